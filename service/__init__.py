"""autograd-service: shows how gradients flow through a computation graph."""

__version__ = "1.0.0"
