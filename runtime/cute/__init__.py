"""CuTe DSL device helpers called by tilecute's generated kernels.

The modules here (``reduce``, ``atomic``, ``copy``, ``smem``, ``math`` ...) import CUTLASS; only the
generated kernel source imports them, at cubin-generation time.  This package file
imports nothing, so ``import tilecute.runtime`` stays cheap.
"""
