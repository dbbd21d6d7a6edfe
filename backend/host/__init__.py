"""Host-side generation: the C++ launcher (``launcher``) and the Python host module that
wraps it.  Everything here turns a :class:`tilecute.runtime.abi.LaunchABI` into text; it
builds nothing and imports neither CUTLASS nor torch."""
