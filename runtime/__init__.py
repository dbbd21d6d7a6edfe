"""What generated host modules import at run time: the launch ABI, the cubin reader,
cache-entry helpers and the lazy cubin step.  Imports neither CUTLASS nor torch nor the
compiler; each submodule loads its own dependencies on first use."""
