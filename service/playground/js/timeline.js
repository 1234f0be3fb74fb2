// The passes as a sequence of steps, and what the graph shows after any step: the forward pass
// computes one operation per step; the backward pass replays the service's `backward` schedule,
// one node passing its gradient to its inputs per step, as micrograd's loop does.

import { edgeLabel, formatNumber } from "./format.js";
import { edgeKey } from "./graph.js";

const HIDDEN = "--";

export function stepCount(evaluation, pass) {
  if (pass === "forward") {
    return evaluation.graph.nodes.filter((n) => n.kind === "operation").length;
  }
  return evaluation.backward.length;
}

// `step` may be "end"; the step actually shown, within 0..count.
export function clampStep(evaluation, pass, step) {
  const count = stepCount(evaluation, pass);
  if (step === "end") return count;
  return Math.max(0, Math.min(count, step));
}

// What the page calls a graph's output: the name the program gives it, else f.
export function outputName(graph) {
  return graph.nodes[graph.root].name ?? "f";
}

// Everything the graph and the caption need at `step` of `pass` (the caption names its node by
// id; the graph knows what the node's card is called). With `final`, every gradient
// and every edge label is shown whatever the step.
export function viewAt(evaluation, pass, step, final) {
  const nodes = evaluation.graph.nodes;
  const view = {
    values: nodes.map((n) => formatNumber(n.value)),
    grads: nodes.map(() => HIDDEN),
    labels: new Map(),
    locals: new Map(),
    activeNodes: new Set(),
    activeEdges: new Set(),
    caption: null,
  };
  for (const node of nodes) {
    node.children.forEach((_, index) => {
      view.locals.set(edgeKey(node.id, index), `∂ ${formatNumber(node.local_grads[index])}`);
    });
  }
  const applyBackward = (entry) => {
    view.grads[entry.node] = formatNumber(entry.grad);
    const children = nodes[entry.node].children;
    entry.sends.forEach((send, index) => {
      // One send per child edge, in the order of `children`.
      const child = children[index] ?? send.to;
      view.grads[child] = formatNumber(send.grad_after);
      view.labels.set(edgeKey(entry.node, index), edgeLabel(entry.grad, send.local_grad, send.contribution));
    });
  };

  if (pass === "forward") {
    const operations = evaluation.forward.filter((id) => nodes[id].kind === "operation");
    operations.forEach((id, index) => {
      if (index >= step) view.values[id] = HIDDEN;
    });
    if (step > 0) {
      const id = operations[step - 1];
      view.activeNodes.add(id);
      nodes[id].children.forEach((_, index) => view.activeEdges.add(edgeKey(id, index)));
      view.caption = { key: "forwardStep", params: { n: step, node: id, value: view.values[id] } };
    }
    if (step === 0) view.caption = { key: "forwardStart" };
    if (step === operations.length) {
      view.caption = { key: "forwardDone", params: { output: outputName(evaluation.graph), value: formatNumber(evaluation.value) } };
      view.activeNodes.clear();
      view.activeEdges.clear();
    }
  } else {
    evaluation.backward.slice(0, step).forEach(applyBackward);
    if (step === 0) view.caption = { key: final ? "backwardStartFinal" : "backwardStart" };
    else {
      const entry = evaluation.backward[step - 1];
      view.activeNodes.add(entry.node);
      entry.sends.forEach((_, index) => view.activeEdges.add(edgeKey(entry.node, index)));
      const params = { n: step, node: entry.node, grad: formatNumber(entry.grad) };
      const kind = nodes[entry.node].kind;
      const key = entry.sends.length ? "backwardStep" : kind === "constant" ? "backwardConstant" : "backwardLeaf";
      view.caption = { key, params };
      if (step === evaluation.backward.length) {
        view.caption = { key: "backwardDone" };
        view.activeNodes.clear();
        view.activeEdges.clear();
      }
    }
  }
  // What a frame narrower than the graph scrolls to: the moment's nodes, or where none is
  // active, what the caption speaks of: the output where the backward pass starts and the
  // forward pass ends, the inputs where the others start or end.
  const atOutput = pass === "backward" ? step === 0 : view.caption?.key === "forwardDone";
  if (view.activeNodes.size) view.inSight = view.activeNodes;
  else if (atOutput) view.inSight = new Set([evaluation.graph.root]);
  else view.inSight = new Set(nodes.filter((node) => node.kind === "variable").map((node) => node.id));
  if (final) {
    nodes.forEach((node) => (view.grads[node.id] = formatNumber(node.grad)));
    evaluation.backward.forEach((entry) => {
      entry.sends.forEach((send, index) => {
        view.labels.set(edgeKey(entry.node, index), edgeLabel(entry.grad, send.local_grad, send.contribution));
      });
    });
  }
  return view;
}
