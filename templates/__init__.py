"""The Jinja2 templates and C++ sources the host generators render and copy."""

# the launcher runtime: its header and the code every launcher links, copied next to each
# launcher.cpp (tilecute.host.launcher.write_launcher) and compiled once per toolchain
# (tilecute.toolchain)
RUNTIME_HEADER = "tilecute_launcher.h"
RUNTIME_SOURCE = "tilecute_launcher_runtime.cpp"
