"""The anchor for the engine: a plain micrograd-style `Value`, as the lesson first writes it."""

from __future__ import annotations

import math
from collections.abc import Callable


class Value:
    """A scalar with a closure per node that pushes its gradient to its operands."""

    __slots__ = ("_backward", "_op", "_prev", "data", "grad")

    def __init__(self, data: float, _children: tuple[Value, ...] = (), _op: str = "") -> None:
        self.data = data  # the forward value
        self.grad = 0.0  # d(root)/d(self)
        self._backward: Callable[[], None] = _nothing  # chain rule for this node's operands
        self._prev = set(_children)  # the operands, as micrograd keeps them
        self._op = _op  # what made this node

    def __add__(self, other: Value | float) -> Value:
        other = other if isinstance(other, Value) else Value(other)
        out = Value(self.data + other.data, (self, other), "+")

        def _backward() -> None:
            self.grad += out.grad
            other.grad += out.grad

        out._backward = _backward
        return out

    def __mul__(self, other: Value | float) -> Value:
        other = other if isinstance(other, Value) else Value(other)
        out = Value(self.data * other.data, (self, other), "*")

        def _backward() -> None:
            self.grad += other.data * out.grad
            other.grad += self.data * out.grad

        out._backward = _backward
        return out

    def __pow__(self, k: float) -> Value:
        out = Value(self.data**k, (self,), f"**{k}")

        def _backward() -> None:
            self.grad += k * self.data ** (k - 1) * out.grad

        out._backward = _backward
        return out

    def exp(self) -> Value:
        out = Value(math.exp(self.data), (self,), "exp")

        def _backward() -> None:
            self.grad += out.data * out.grad

        out._backward = _backward
        return out

    def relu(self) -> Value:
        out = Value(0.0 if self.data < 0 else self.data, (self,), "relu")

        def _backward() -> None:
            self.grad += (out.data > 0) * out.grad

        out._backward = _backward
        return out

    def tanh(self) -> Value:
        t = math.tanh(self.data)
        out = Value(t, (self,), "tanh")

        def _backward() -> None:
            self.grad += (1 - t * t) * out.grad

        out._backward = _backward
        return out

    def backward(self) -> None:
        # Topological order by depth-first search; an explicit stack instead of micrograd's
        # recursion, which would stop at Python's recursion limit on graphs this large.
        topo: list[Value] = []
        visited = {self}
        stack = [(self, iter(self._prev))]
        while stack:
            node, children = stack[-1]
            for child in children:
                if child not in visited:
                    visited.add(child)
                    stack.append((child, iter(child._prev)))
                    break
            else:
                stack.pop()
                topo.append(node)
        self.grad = 1.0
        for node in reversed(topo):
            node._backward()


def _nothing() -> None:
    pass
