// The external headers every tilecute launcher includes (templates/tilecute_launcher.h and
// launcher.cpp.j2), precompiled once per cache root and toolchain (tilecute.toolchain
// precompiled_header) and force-included (-include) ahead of a launcher's own source, so
// a launcher build parses none of them again.  A launcher builds the same without it.
// tests/test_toolchain.py checks that this list covers every <...> include of the two.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>
#include <dlfcn.h>
#include <tvm/ffi/any.h>
#include <tvm/ffi/c_api.h>
#include <tvm/ffi/container/map.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/function.h>
#include <tvm/ffi/string.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
