"""Nereus from Python: the parameter-server client through its C interface.

nereus.capi loads libnereus_c.so with ctypes (nereus/c_api.h); nereus.torch
plugs it into PyTorch (docs/TORCH.md). Neither compiles against PyTorch or
Python, so one build serves any PyTorch version.
"""

__version__ = "0.1.0"
