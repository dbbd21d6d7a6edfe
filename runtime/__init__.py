"""What generated host modules import at run time: the launch ABI, the cubin reader,
cache-entry helpers and the lazy cubin step.  Imports neither CUTLASS nor torch nor the
compiler; each submodule loads its own dependencies on first use."""

import os as _os


def env_switch(name: str, default: bool) -> bool:
    """An on/off environment variable as every tilecute switch reads it: unset or empty is
    ``default``; ``0``, ``false``, ``no`` and ``off`` (any case) are off; any other value
    is on."""
    value = _os.environ.get(name, "").strip().lower()
    return default if not value else value not in ("0", "false", "no", "off")
