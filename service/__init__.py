"""autograd-service: shows how gradients flow through a computation graph."""

import os
import platform

__version__ = "1.0.0"

# numpy chooses its vectorised exp, expm1, log and pow by CPU when it is first imported. Its
# AVX-512 versions are within a few ulp of the C library rather than equal to it, so a sweep's
# point would differ from the engine's `math` in its last bits, and a point at a domain edge
# (relu of a cancellation) could fall the other way. With them off, numpy calls the C library
# there as it does on every other CPU; AVX2 stays on for the rest. It must be set before numpy's
# first import in the process, which is why it lives here (tests/test_sweep.py checks the bits).
if platform.machine().lower() in {"x86_64", "amd64"}:
    os.environ.setdefault("NPY_DISABLE_CPU_FEATURES", "X86_V4 AVX512_ICL AVX512_SPR")
