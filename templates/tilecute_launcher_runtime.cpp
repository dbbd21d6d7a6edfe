// tilecute launcher runtime: the code that is the same in every launcher (the CUDA driver
// resolved at run time, per-device module slots, TMA encoding, launches, error messages, phase
// timing), reading what a launcher launches from its TcLauncher (tilecute_launcher.h).
//
// Compiled once per toolchain and content into an object (tilecute.toolchain
// launcher_runtime_object; -DTILECUTE_PHASE_TIMING builds get their own) that every launcher
// library links statically: each library holds its own copy of the state below (driver table,
// device slots, cubin image), exactly as if the code were compiled into it, and exports none
// of it (hidden visibility).  docs/launch-abi.md describes what the code does.

#include "tilecute_launcher.h"

#include <cudaTypedefs.h>
#include <dlfcn.h>
#include <tvm/ffi/any.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/function.h>
#include <tvm/ffi/string.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#ifdef TILECUTE_PHASE_TIMING
#include <tvm/ffi/container/map.h>
#endif

#pragma GCC visibility push(hidden)

namespace {

constexpr int kMaxDevices = 64;
// Every driver entry point is resolved for this driver API version, so the pointer types
// below (PFN_<name>_v<version>) stay right whichever CUDA 12+ headers build the launcher.
constexpr int kDriverApiVersion = 12000;

// -- errors: TVM FFI errors (TypeError, ValueError, RuntimeError) whose traceback points at the
//    launcher's call function (TcLauncher::source, ::line); messages are plain concatenation

[[noreturn]] TC_COLD void tc_raise(const TcLauncher& L, const char* kind, const std::string& message) {
  throw tvm::ffi::Error(kind, message, TVMFFIBacktrace(L.source, L.line, L.function, 0));
}

[[noreturn]] TC_COLD void tc_raise_type_error(const TcLauncher& L, const std::string& message) {
  tc_raise(L, "TypeError", message);
}

[[noreturn]] TC_COLD void tc_raise_value_error(const TcLauncher& L, const std::string& message) {
  tc_raise(L, "ValueError", message);
}

[[noreturn]] TC_COLD void tc_raise_runtime_error(const TcLauncher& L, const std::string& message) {
  tc_raise(L, "RuntimeError", message);
}

std::string tc_str(int64_t value) {
  return std::to_string(value);
}

// "<function>: argument '<arg>': "
std::string tc_arg(const TcLauncher& L, const char* arg) {
  return std::string(L.function) + ": argument '" + arg + "': ";
}

// -- names for messages

std::string tc_type_name(const TVMFFIAny& any) {
  switch (any.type_index) {
    case kTVMFFINone:
      return "None";
    case kTVMFFIInt:
      return "int";
    case kTVMFFIBool:
      return "bool";
    case kTVMFFIFloat:
      return "float";
    case kTVMFFIOpaquePtr:
      return "pointer";
    case kTVMFFIRawStr:
    case kTVMFFISmallStr:
    case kTVMFFIStr:
      return "str";
    case kTVMFFIByteArrayPtr:
    case kTVMFFISmallBytes:
    case kTVMFFIBytes:
      return "bytes";
    case kTVMFFIDLTensorPtr:
    case kTVMFFITensor:
      return "tensor";
    default:
      return tvm::ffi::TypeIndexToTypeKey(any.type_index);
  }
}

std::string tc_device_name(DLDevice device) {
  std::string kind;
  switch (device.device_type) {
    case kDLCPU:
      return "cpu";
    case kDLCUDA:
      kind = "cuda";
      break;
    case kDLCUDAHost:
      return "cuda_host (pinned host memory)";
    case kDLCUDAManaged:
      kind = "cuda_managed";
      break;
    case kDLROCM:
      kind = "rocm";
      break;
    case kDLMetal:
      kind = "metal";
      break;
    case kDLVulkan:
      kind = "vulkan";
      break;
    default:
      kind = "DLPack device type " + tc_str(device.device_type);
      break;
  }
  return kind + ":" + tc_str(device.device_id);
}

std::string tc_dtype_name(const TcLauncher& L, DLDataType dtype) {
  if (dtype.lanes == 1) {
    for (int i = 0; i < L.num_dtype_names; ++i) {
      const TcDTypeName& known = L.dtype_names[i];
      if (known.code == dtype.code && known.bits == dtype.bits) {
        return known.name;
      }
    }
    // DLPack types no tilecute dtype is (torch's float8 "fnuz" variants, complex): their names
    switch (dtype.code) {
      case 5: return "complex" + tc_str(dtype.bits);
      case 7: return "float8_e3m4";
      case 8: return "float8_e4m3 (DLPack code 8, not e4m3fn)";
      case 9: return "float8_e4m3b11fnuz";
      case 11: return "float8_e4m3fnuz";
      case 13: return "float8_e5m2fnuz";
      case 14: return "float8_e8m0fnu";
      case 15: return "float6_e2m3fn";
      case 16: return "float6_e3m2fn";
      default: break;
    }
  }
  return "DLDataType(code=" + tc_str(dtype.code) + ", bits=" + tc_str(dtype.bits) + ", lanes=" + tc_str(dtype.lanes) +
         ")";
}

std::string tc_dims(const int64_t* dims, int ndim) {
  std::string out = "[";
  for (int d = 0; d < ndim; ++d) {
    out += (d == 0 ? "" : ", ") + tc_str(dims[d]);
  }
  return out + "]";
}

std::string tc_hex(const void* ptr) {
  char hex[32];
  std::snprintf(hex, sizeof(hex), "0x%llx", static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(ptr)));
  return hex;
}

}  // namespace

// -- argument checks: the failures of the inline checks of tilecute_launcher.h

void tc_fail_assume(const TcLauncher& L, const char* condition) {
  // TileLang's host code raises a RuntimeError "Assume: <condition>" for a host-evaluable
  // T.assume the call's arguments break (and for a top-level assert on them, its Assert)
  tc_raise_runtime_error(L, std::string(L.function) + ": Assume: " + condition +
                                " does not hold for this call's arguments (a T.assume or top-level "
                                "assert, checked at every call)");
}

void tc_fail_no_carrier(const TcLauncher& L, const char* symbol, const char* carriers) {
  // TileLang's binder raises a RuntimeError when every buffer carrying a symbol the body
  // uses is NULL
  tc_raise_runtime_error(L, std::string(L.function) + ": symbolic shape variable " + symbol +
                                " requires at least one non-null buffer among: " + carriers +
                                " (all were given as None)");
}

void tc_fail_grid_division(const TcLauncher& L) {
  tc_raise_value_error(L, std::string(L.function) + ": division by zero in a grid expression");
}

void tc_fail_arg_count(const TcLauncher& L, int32_t num_args) {
  tc_raise_type_error(L, std::string(L.function) + ": expected " + tc_str(L.num_args) +
                             (L.num_args == 1 ? " argument (" : " arguments (") + L.arg_names +
                             ") and an optional stream, got " + tc_str(num_args));
}

void tc_fail_kind(const TcLauncher& L, const TVMFFIAny& any, const char* arg, const char* expected) {
  tc_raise_type_error(L, tc_arg(L, arg) + "expected " + expected + ", got " + tc_type_name(any));
}

void tc_fail_dtype(const TcLauncher& L, const DLTensor* t, const char* arg, const char* expected) {
  tc_raise_value_error(L, tc_arg(L, arg) + "expected dtype " + expected + ", got " + tc_dtype_name(L, t->dtype));
}

void tc_fail_null_data(const TcLauncher& L, const DLTensor* t, const char* arg) {
  tc_raise_value_error(L, tc_arg(L, arg) + "the data pointer is NULL, but the tensor has elements (shape " +
                              tc_dims(t->shape, t->ndim) + ")");
}

void tc_fail_rank(const TcLauncher& L, const DLTensor* t, const char* arg, int rank) {
  tc_raise_value_error(L, tc_arg(L, arg) + "expected rank " + tc_str(rank) + ", got rank " + tc_str(t->ndim) +
                              " (shape " + tc_dims(t->shape, t->ndim) + ")");
}

void tc_fail_static(const TcLauncher& L, int64_t value, int64_t expected, const char* arg, const char* where) {
  tc_raise_value_error(L, tc_arg(L, arg) + "expected " + where + " == " + tc_str(expected) + ", got " +
                              tc_str(value));
}

void tc_fail_int32(const TcLauncher& L, int64_t value, const char* arg, const char* where, const char* symbol) {
  tc_raise_value_error(L, tc_arg(L, arg) + "expected " + where + " (" + symbol + ") to fit in int32, got " +
                              tc_str(value));
}

void tc_fail_divisibility(const TcLauncher& L, int64_t value, const char* arg, const char* where,
                          const char* symbol, int64_t divisibility) {
  tc_raise_value_error(L, tc_arg(L, arg) + "expected " + where + " (" + symbol + ") divisible by " +
                              tc_str(divisibility) + ", got " + tc_str(value));
}

void tc_fail_symbol(const TcLauncher& L, int64_t value, int64_t bound, const char* arg, const char* where,
                    const char* symbol, const char* bound_at) {
  tc_raise_value_error(L, tc_arg(L, arg) + "expected " + where + " == " + symbol + " = " + tc_str(bound) +
                              " (from " + bound_at + "), got " + tc_str(value));
}

void tc_fail_solve(const TcLauncher& L, int64_t value, const char* arg, const char* where, const char* symbol,
                   const char* text) {
  tc_raise_value_error(L, tc_arg(L, arg) + "expected " + where + " == " + text + " for an integer " + symbol +
                              " >= 0, got " + tc_str(value));
}

void tc_fail_dim_expr(const TcLauncher& L, int64_t value, int64_t expected, const char* arg, const char* where,
                      const char* text) {
  tc_raise_value_error(L, tc_arg(L, arg) + "expected " + where + " == " + text + " = " + tc_str(expected) +
                              ", got " + tc_str(value));
}

void tc_fail_contiguous_unless_empty(const TcLauncher& L, const DLTensor* t, const char* arg) {
  for (int d = 0; d < t->ndim; ++d) {
    if (t->shape[d] == 0) return;  // no elements: contiguous whatever the strides
  }
  tc_raise_value_error(L, tc_arg(L, arg) + "expected a contiguous (row-major) tensor, got shape " +
                              tc_dims(t->shape, t->ndim) + " with strides " + tc_dims(t->strides, t->ndim));
}

void tc_fail_stride_int32(const TcLauncher& L, const DLTensor* t, const char* arg, int d) {
  tc_raise_value_error(L, tc_arg(L, arg) + "expected strides[" + tc_str(d) + "] to fit in int32, got " +
                              tc_str(t->strides[d]) + " (shape " + tc_dims(t->shape, t->ndim) + ")");
}

void tc_fail_align(const TcLauncher& L, const void* ptr, const char* arg, uintptr_t align) {
  const uintptr_t address = reinterpret_cast<uintptr_t>(ptr);
  tc_raise_value_error(L, tc_arg(L, arg) + "expected the data pointer (data + byte_offset) aligned to " +
                              tc_str(align) + " bytes, got " + tc_hex(ptr) + " (" + tc_str(address % align) +
                              " bytes past a " + tc_str(align) + "-byte boundary)");
}

void tc_fail_offsets_int32(const TcLauncher& L, const DLTensor* t, const char* arg, int64_t last) {
  tc_raise_value_error(L, tc_arg(L, arg) + "its largest element offset is " + tc_str(last) +
                              ", past int32, which this kernel computes its offsets in; compile it with "
                              "options={\"wide_offsets\": True} for 64-bit offsets (shape " +
                              tc_dims(t->shape, t->ndim) + ")");
}

void tc_fail_int_range(const TcLauncher& L, int64_t value, const char* arg, const char* dtype) {
  tc_raise_value_error(L, tc_arg(L, arg) + "expected a value that fits " + dtype + ", got " + tc_str(value));
}

void tc_fail_int_kind(const TcLauncher& L, const TVMFFIAny& any, const char* arg, const char* dtype) {
  if (tc_type_name(any) == "ffi.BigInt") {
    tc_raise_value_error(L, tc_arg(L, arg) + "expected a value that fits " + dtype +
                                ", got an integer outside int64");
  }
  tc_fail_kind(L, any, arg, "an int");
}

void tc_fail_stream_value(const TcLauncher& L, int64_t value) {
  tc_raise_value_error(L, tc_arg(L, "stream") + "expected a CUDA stream handle >= 0, got " + tc_str(value));
}

void tc_fail_address(const TcLauncher& L, int64_t value, const char* arg) {
  tc_raise_value_error(L, tc_arg(L, arg) + "expected a device address >= 0, got " + tc_str(value));
}

void tc_fail_address_align(const TcLauncher& L, int64_t address, const char* arg, uintptr_t align) {
  const void* ptr = reinterpret_cast<const void*>(static_cast<uintptr_t>(address));
  tc_raise_value_error(L, tc_arg(L, arg) + "expected an address aligned to " + tc_str(align) +
                              " bytes (what the kernel's accesses through T.make_tensor assume), got " +
                              tc_hex(ptr) + " (" + tc_str(static_cast<int64_t>(address % align)) +
                              " bytes past a " + tc_str(align) + "-byte boundary)");
}

void tc_fail_cuda(const TcLauncher& L, const DLTensor* t, const char* arg) {
  tc_raise_value_error(L, tc_arg(L, arg) + "expected a CUDA tensor, got " + tc_device_name(t->device));
}

void tc_fail_same_device(const TcLauncher& L, const DLTensor* t, const char* arg, int device_id, const char* first) {
  tc_raise_value_error(L, tc_arg(L, arg) + "expected a tensor on cuda:" + tc_str(device_id) +
                              " (the device of argument '" + first + "'), got " + tc_device_name(t->device));
}

void tc_fail_grid(const TcLauncher& L, int kernel, int64_t x, int64_t y, int64_t z) {
  const TcKernelInfo& info = L.kernels[kernel];
  const std::string grid = "(" + tc_str(x) + ", " + tc_str(y) + ", " + tc_str(z) + ")";
  const std::string prefix = std::string(L.function) + ": kernel '" + info.symbol + "': grid " + grid;
  const int64_t extents[3] = {x, y, z};
  for (int d = 0; d < 3; ++d) {
    if (extents[d] == 0) {
      tc_raise_value_error(L, prefix + " has an empty dimension: its extent along " + "xyz"[d] + ", `" +
                                  info.grid_text[d] + "`, is 0; a kernel launches at least one block " +
                                  "along each dimension (TileLang raises rather than launch it)");
    }
  }
  const bool in_limits = x >= 0 && x <= kTcMaxGridX && y >= 0 && y <= kTcMaxGridYZ && z >= 0 && z <= kTcMaxGridYZ;
  if (!in_limits) {
    // name the first dimension past its limit (an int64 dim's grid, T.ceildiv(n, 512) of a
    // large n, passes grid.x's 2^31 - 1)
    const int64_t dims[3] = {x, y, z};
    std::string which;
    for (int d = 0; d < 3 && which.empty(); ++d) {
      const int64_t limit = d == 0 ? kTcMaxGridX : kTcMaxGridYZ;
      if (dims[d] < 0 || dims[d] > limit) {
        which = std::string("grid.") + "xyz"[d] + " = " + tc_str(dims[d]) +
                (dims[d] < 0 ? " is negative" : " is above " + tc_str(limit)) + ": ";
      }
    }
    tc_raise_value_error(L, prefix + " is outside the CUDA limits (" + which +
                                "1 <= x < 2^31, 1 <= y, z < 65536)");
  }
  tc_raise_value_error(L, prefix + " is not a multiple of the cluster (" + tc_str(info.cluster[0]) + ", " +
                              tc_str(info.cluster[1]) + ", " + tc_str(info.cluster[2]) + ")");
}

namespace {

// -- arguments of the auxiliary exports

[[noreturn]] TC_COLD void tc_fail_export_args(const TcLauncher& L, const char* name, const char* expected,
                                              int32_t num_args) {
  tc_raise_type_error(L, std::string(L.function) + ": " + name + ": expected " + expected + ", got " +
                             tc_str(num_args) + (num_args == 1 ? " argument" : " arguments"));
}

std::string tc_string_arg(const TcLauncher& L, const TVMFFIAny* args, int32_t num_args, const char* name,
                          const char* arg) {
  if (num_args != 1) tc_fail_export_args(L, name, "1 argument", num_args);
  std::optional<tvm::ffi::String> text = reinterpret_cast<const tvm::ffi::AnyView*>(args)[0].try_cast<tvm::ffi::String>();
  if (!text.has_value()) tc_fail_kind(L, args[0], arg, "a str");
  return std::string(text->data(), text->size());
}

int tc_device_id_arg(const TcLauncher& L, const TVMFFIAny* args, int32_t num_args, const char* name) {
  if (num_args != 1) tc_fail_export_args(L, name, "1 argument", num_args);
  if (args[0].type_index != kTVMFFIInt) tc_fail_kind(L, args[0], "device_id", "an int");
  if (args[0].v_int64 < 0 || args[0].v_int64 >= kMaxDevices) {
    tc_raise_value_error(L, tc_arg(L, "device_id") + "expected a CUDA device index in [0, " + tc_str(kMaxDevices) +
                                "), got " + tc_str(args[0].v_int64));
  }
  return static_cast<int>(args[0].v_int64);
}

void tc_check_no_args(const TcLauncher& L, int32_t num_args, const char* name) {
  if (num_args != 0) tc_fail_export_args(L, name, "no arguments", num_args);
}

// -- the CUDA driver, resolved once per process at run time (no link-time libcuda)

struct CudaDriver {
  PFN_cuInit_v2000 Init = nullptr;
  PFN_cuGetErrorName_v6000 GetErrorName = nullptr;
  PFN_cuGetErrorString_v6000 GetErrorString = nullptr;
  PFN_cuDeviceGet_v2000 DeviceGet = nullptr;
  PFN_cuDevicePrimaryCtxRetain_v7000 DevicePrimaryCtxRetain = nullptr;
  PFN_cuDevicePrimaryCtxRelease_v11000 DevicePrimaryCtxRelease = nullptr;
  PFN_cuCtxGetCurrent_v4000 CtxGetCurrent = nullptr;
  PFN_cuCtxSetCurrent_v4000 CtxSetCurrent = nullptr;
  PFN_cuCtxGetDevice_v2000 CtxGetDevice = nullptr;
  PFN_cuModuleLoadData_v2000 ModuleLoadData = nullptr;
  PFN_cuModuleUnload_v2000 ModuleUnload = nullptr;
  PFN_cuModuleGetFunction_v2000 ModuleGetFunction = nullptr;
  PFN_cuFuncSetAttribute_v9000 FuncSetAttribute = nullptr;
  PFN_cuLaunchKernel_v4000 LaunchKernel = nullptr;
  PFN_cuLaunchKernelEx_v11060 LaunchKernelEx = nullptr;
  // a device's limits: its SMs (T.sync_grid()), its shared memory a block may have (a shared
  // buffer sized at launch)
  PFN_cuDeviceGetAttribute_v2000 DeviceGetAttribute = nullptr;
  // resolved only for a launcher with T.sync_grid() (TcLauncher::uses_grid_barrier)
  PFN_cuMemAlloc_v3020 MemAlloc = nullptr;
  PFN_cuMemFree_v3020 MemFree = nullptr;
  PFN_cuMemsetD32_v3020 MemsetD32 = nullptr;
  PFN_cuCtxSynchronize_v2000 CtxSynchronize = nullptr;
  PFN_cuOccupancyMaxActiveBlocksPerMultiprocessor_v6050 OccupancyMaxActiveBlocksPerMultiprocessor = nullptr;
  // the TMA encoders are tc_cuda_encode_tma_tiled / _im2col (tilecute_launcher.h)
};

// Resolved on the first call with an L2 access policy window (T.annotate_l2_hit_ratio), by
// tc_require_l2_driver: the persisting-L2 limit and its device maximum.
struct CudaL2Driver {
  PFN_cuDeviceGetAttribute_v2000 DeviceGetAttribute = nullptr;
  PFN_cuCtxGetLimit_v3010 CtxGetLimit = nullptr;
  PFN_cuCtxSetLimit_v3010 CtxSetLimit = nullptr;
  PFN_cuCtxResetPersistingL2Cache_v11000 CtxResetPersistingL2Cache = nullptr;
};

CudaDriver g_cuda;
std::once_flag g_cuda_once;
std::string g_cuda_error;  // set once by tc_load_driver when the driver is unusable
PFN_cuGetProcAddress_v12000 g_get_proc = nullptr;  // set by tc_load_driver, for later resolutions
CudaL2Driver g_cuda_l2;
std::once_flag g_cuda_l2_once;
std::string g_cuda_l2_error;  // set once by tc_load_l2_driver when an entry point is missing

std::string tc_cuda_error(CUresult status) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (g_cuda.GetErrorName == nullptr || g_cuda.GetErrorName(status, &name) != CUDA_SUCCESS || name == nullptr) {
    return "CUDA error " + tc_str(status);
  }
  std::string out = name;
  if (g_cuda.GetErrorString != nullptr && g_cuda.GetErrorString(status, &text) == CUDA_SUCCESS && text != nullptr) {
    out += std::string(" (") + text + ")";
  }
  return out;
}

bool tc_resolve_symbol(PFN_cuGetProcAddress_v12000 get_proc, const char* name, void** fn) {
  CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  const CUresult status = get_proc(name, fn, kDriverApiVersion, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &found);
  if (status != CUDA_SUCCESS || found != CU_GET_PROC_ADDRESS_SUCCESS || *fn == nullptr) {
    g_cuda_error = std::string("the CUDA driver has no usable ") + name + " (cuGetProcAddress returned " +
                   tc_str(status) + ", symbol status " + tc_str(found) + ")";
    return false;
  }
  return true;
}

template <typename Fn>
bool tc_resolve(PFN_cuGetProcAddress_v12000 get_proc, const char* name, Fn* out) {
  void* fn = nullptr;
  if (!tc_resolve_symbol(get_proc, name, &fn)) return false;
  *out = reinterpret_cast<Fn>(fn);
  return true;
}

void tc_load_driver(bool encodes_tiled_tma, bool encodes_im2col_tma, bool uses_grid_barrier) {
  void* library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* reason = dlerror();
    g_cuda_error = std::string("no CUDA driver (libcuda.so.1 could not be loaded: ") +
                   (reason != nullptr ? reason : "unknown reason") + ")";
    return;
  }
  // Kept loaded for the life of the process: the module and context handles live in it.
  auto get_proc = reinterpret_cast<PFN_cuGetProcAddress_v12000>(dlsym(library, "cuGetProcAddress_v2"));
  if (get_proc == nullptr) {
    g_cuda_error = "no CUDA driver (libcuda.so.1 has no cuGetProcAddress_v2: a CUDA 12 or newer driver is needed)";
    return;
  }
  g_get_proc = get_proc;
  const bool resolved = tc_resolve(get_proc, "cuGetErrorName", &g_cuda.GetErrorName) &&
                        tc_resolve(get_proc, "cuGetErrorString", &g_cuda.GetErrorString) &&
                        tc_resolve(get_proc, "cuInit", &g_cuda.Init) &&
                        tc_resolve(get_proc, "cuDeviceGet", &g_cuda.DeviceGet) &&
                        tc_resolve(get_proc, "cuDevicePrimaryCtxRetain", &g_cuda.DevicePrimaryCtxRetain) &&
                        tc_resolve(get_proc, "cuDevicePrimaryCtxRelease", &g_cuda.DevicePrimaryCtxRelease) &&
                        tc_resolve(get_proc, "cuCtxGetCurrent", &g_cuda.CtxGetCurrent) &&
                        tc_resolve(get_proc, "cuCtxSetCurrent", &g_cuda.CtxSetCurrent) &&
                        tc_resolve(get_proc, "cuCtxGetDevice", &g_cuda.CtxGetDevice) &&
                        tc_resolve(get_proc, "cuModuleLoadData", &g_cuda.ModuleLoadData) &&
                        tc_resolve(get_proc, "cuModuleUnload", &g_cuda.ModuleUnload) &&
                        tc_resolve(get_proc, "cuModuleGetFunction", &g_cuda.ModuleGetFunction) &&
                        tc_resolve(get_proc, "cuFuncSetAttribute", &g_cuda.FuncSetAttribute) &&
                        tc_resolve(get_proc, "cuLaunchKernel", &g_cuda.LaunchKernel) &&
                        tc_resolve(get_proc, "cuLaunchKernelEx", &g_cuda.LaunchKernelEx) &&
                        tc_resolve(get_proc, "cuDeviceGetAttribute", &g_cuda.DeviceGetAttribute) &&
                        (!encodes_tiled_tma ||
                         tc_resolve(get_proc, "cuTensorMapEncodeTiled", &tc_cuda_encode_tma_tiled)) &&
                        (!encodes_im2col_tma ||
                         tc_resolve(get_proc, "cuTensorMapEncodeIm2col", &tc_cuda_encode_tma_im2col)) &&
                        (!uses_grid_barrier ||
                         (tc_resolve(get_proc, "cuMemAlloc", &g_cuda.MemAlloc) &&
                          tc_resolve(get_proc, "cuMemFree", &g_cuda.MemFree) &&
                          tc_resolve(get_proc, "cuMemsetD32", &g_cuda.MemsetD32) &&
                          tc_resolve(get_proc, "cuCtxSynchronize", &g_cuda.CtxSynchronize) &&
                          tc_resolve(get_proc, "cuOccupancyMaxActiveBlocksPerMultiprocessor",
                                     &g_cuda.OccupancyMaxActiveBlocksPerMultiprocessor)));
  if (!resolved) return;
  const CUresult status = g_cuda.Init(0);
  if (status != CUDA_SUCCESS) {
    g_cuda_error = "CUDA driver initialization failed: cuInit returned " + tc_cuda_error(status);
  }
}

[[noreturn]] TC_COLD void tc_fail_driver_call(const TcLauncher& L, const char* call, CUresult status,
                                              int device_id) {
  tc_raise_runtime_error(L, std::string(L.function) + ": " + call + " failed on cuda:" + tc_str(device_id) + ": " +
                                tc_cuda_error(status));
}

void tc_load_l2_driver() {
  // tc_resolve reports into g_cuda_error; this resolution has its own
  const std::string driver_error = g_cuda_error;
  const bool resolved = tc_resolve(g_get_proc, "cuDeviceGetAttribute", &g_cuda_l2.DeviceGetAttribute) &&
                        tc_resolve(g_get_proc, "cuCtxGetLimit", &g_cuda_l2.CtxGetLimit) &&
                        tc_resolve(g_get_proc, "cuCtxSetLimit", &g_cuda_l2.CtxSetLimit) &&
                        tc_resolve(g_get_proc, "cuCtxResetPersistingL2Cache", &g_cuda_l2.CtxResetPersistingL2Cache);
  if (!resolved) g_cuda_l2_error = g_cuda_error;
  g_cuda_error = driver_error;
}

// The driver is loaded (tc_require_driver) before.
void tc_require_l2_driver(const TcLauncher& L, const TcL2Window& window) {
  std::call_once(g_cuda_l2_once, tc_load_l2_driver);
  if (TC_UNLIKELY(!g_cuda_l2_error.empty())) {
    tc_raise_runtime_error(L, std::string(L.function) + ": " + window.text + ": " + g_cuda_l2_error);
  }
}

[[noreturn]] TC_COLD void tc_fail_l2_call(const TcLauncher& L, const TcL2Window& window, const std::string& call,
                                          CUresult status, int device_id) {
  tc_raise_runtime_error(L, std::string(L.function) + ": " + window.text + ": " + call + " failed on cuda:" +
                                tc_str(device_id) + ": " + tc_cuda_error(status));
}

// -- TMA descriptors.  The rules are those of cuda.h for cuTensorMapEncodeTiled /
//    cuTensorMapEncodeIm2col; the launch ABI's own were checked when the launcher was rendered.

constexpr int64_t kTmaMaxDim = INT64_C(1) << 32;
constexpr uint64_t kTmaMaxStrideBytes = UINT64_C(1) << 40;

uint64_t tc_mul_saturated(uint64_t a, uint64_t b) {
  return (b != 0 && a > UINT64_MAX / b) ? UINT64_MAX : a * b;
}

[[noreturn]] TC_COLD void tc_fail_tma_align(const TcLauncher& L, const void* ptr, const char* arg, uint64_t granule) {
  const uintptr_t address = reinterpret_cast<uintptr_t>(ptr);
  tc_raise_value_error(L, tc_arg(L, arg) + "TMA needs the data pointer (data + byte_offset) aligned to " +
                              tc_str(granule) + " bytes, got " + tc_hex(ptr) + " (" + tc_str(address % granule) +
                              " bytes past a " + tc_str(granule) + "-byte boundary)");
}

[[noreturn]] TC_COLD void tc_fail_tma_dims(const TcLauncher& L, const DLTensor* t, const char* arg) {
  tc_raise_value_error(L, tc_arg(L, arg) + "TMA needs every extent in [1, 2^32], got shape " +
                              tc_dims(t->shape, t->ndim));
}

[[noreturn]] TC_COLD void tc_fail_tma_inner_stride(const TcLauncher& L, const char* arg, int d, int64_t stride) {
  tc_raise_value_error(L, tc_arg(L, arg) + "TMA needs the last axis contiguous (strides[" + tc_str(d) +
                              "] == 1), got " + tc_str(stride));
}

[[noreturn]] TC_COLD void tc_fail_tma_stride(const TcLauncher& L, const char* arg, int d, int64_t elements,
                                             uint64_t bytes, uint64_t granule) {
  std::string got = tc_str(elements);
  if (elements >= 0 && bytes != UINT64_MAX) got += " (" + std::to_string(bytes) + " bytes)";
  tc_raise_value_error(L, tc_arg(L, arg) + "TMA needs strides[" + tc_str(d) + "] in bytes to be a multiple of " +
                              tc_str(granule) + " and below 2^40, got " + got);
}

}  // namespace

decltype(&cuTensorMapEncodeTiled) tc_cuda_encode_tma_tiled = nullptr;
decltype(&cuTensorMapEncodeIm2col) tc_cuda_encode_tma_im2col = nullptr;

void tc_fail_tma_encode(const TcLauncher& L, const char* call, const TcTmaDescriptorInfo& info, CUresult status) {
  tc_raise_runtime_error(L, tc_arg(L, info.arg) + "encoding TMA descriptor '" + info.param + "' of kernel '" +
                                info.kernel + "' failed: " + call + " returned " + tc_cuda_error(status));
}

TcTmaGlobal tc_tma_global(const TcLauncher& L, const DLTensor* t, const int64_t* strides, const char* arg,
                          uint64_t element_bytes, uint64_t granule) {
  TcTmaGlobal global = {};
  global.address = tc_data_ptr(t);
  global.rank = static_cast<cuuint32_t>(t->ndim);
  if (TC_UNLIKELY(reinterpret_cast<uintptr_t>(global.address) % granule != 0)) {
    tc_fail_tma_align(L, global.address, arg, granule);
  }
  const int rank = t->ndim;
  for (int d = 0; d < rank; ++d) {
    if (TC_UNLIKELY(t->shape[d] < 1 || t->shape[d] > kTmaMaxDim)) tc_fail_tma_dims(L, t, arg);
    global.dims[rank - 1 - d] = static_cast<cuuint64_t>(t->shape[d]);
  }
  if (strides != nullptr && t->shape[rank - 1] != 1 && strides[rank - 1] != 1) {
    tc_fail_tma_inner_stride(L, arg, rank - 1, strides[rank - 1]);
  }
  uint64_t compact = tc_mul_saturated(element_bytes, global.dims[0]);  // bytes per step of a compact tensor
  for (int i = 1; i < rank; ++i) {
    const int d = rank - 1 - i;  // the tensor axis of TMA dimension i
    uint64_t bytes;
    int64_t elements;
    if (t->shape[d] == 1) {
      // The stride of a size-1 axis never moves the address, but the driver checks it: use the
      // span of the inner dimensions, padded to the granule.
      const uint64_t span = i == 1 ? compact : tc_mul_saturated(global.strides[i - 2], global.dims[i - 1]);
      bytes = span > kTmaMaxStrideBytes ? span : (span + granule - 1) / granule * granule;
      elements = static_cast<int64_t>(bytes / element_bytes);
    } else if (strides == nullptr) {
      bytes = compact;
      elements = static_cast<int64_t>(compact / element_bytes);
    } else {
      elements = strides[d];
      bytes = elements < 0 ? UINT64_MAX : tc_mul_saturated(static_cast<uint64_t>(elements), element_bytes);
    }
    if (TC_UNLIKELY(bytes % granule != 0 || bytes >= kTmaMaxStrideBytes)) {
      tc_fail_tma_stride(L, arg, d, elements, bytes, granule);
    }
    global.strides[i - 1] = bytes;
    compact = tc_mul_saturated(compact, global.dims[i]);
  }
  return global;
}

void tc_require_driver(const TcLauncher& L) {
  std::call_once(g_cuda_once, tc_load_driver, L.encodes_tiled_tma, L.encodes_im2col_tma, L.uses_grid_barrier);
  if (TC_UNLIKELY(!g_cuda_error.empty())) {
    tc_raise_runtime_error(L, std::string(L.function) + ": " + g_cuda_error);
  }
}

int tc_current_device(const TcLauncher& L) {
  tc_require_driver(L);
  CUcontext context = nullptr;
  CUresult status = g_cuda.CtxGetCurrent(&context);
  if (status != CUDA_SUCCESS) tc_fail_driver_call(L, "cuCtxGetCurrent", status, 0);
  if (context == nullptr) return 0;
  CUdevice device = 0;  // a device handle is its ordinal
  status = g_cuda.CtxGetDevice(&device);
  if (status != CUDA_SUCCESS) tc_fail_driver_call(L, "cuCtxGetDevice", status, 0);
  return static_cast<int>(device);
}

namespace {

// -- the cubin image, read once per process

std::mutex g_cubin_mutex;
std::string g_cubin_path;
std::string g_cubin_image;  // a std::string keeps a NUL after the bytes, which a PTX image needs
std::atomic<bool> g_cubin_ready{false};

void tc_set_cubin(const TcLauncher& L, const std::string& path) {
  std::lock_guard<std::mutex> lock(g_cubin_mutex);
  if (g_cubin_ready.load(std::memory_order_relaxed)) {
    if (path == g_cubin_path) return;
    tc_raise_value_error(L, std::string(L.function) + ": the cubin is already set from '" + g_cubin_path +
                                "'; it cannot change to '" + path + "' in this process");
  }
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    const int error = errno;
    tc_raise_runtime_error(L, std::string(L.function) + ": cannot read the cubin '" + path + "': " +
                                  std::strerror(error));
  }
  std::string image;
  char buffer[1 << 16];
  size_t count = 0;
  while ((count = std::fread(buffer, 1, sizeof(buffer), file)) > 0) {
    image.append(buffer, count);
  }
  const bool failed = std::ferror(file) != 0;
  std::fclose(file);
  if (failed || image.empty()) {
    tc_raise_runtime_error(L, std::string(L.function) + ": cannot read the cubin '" + path + "': " +
                                  (failed ? "read error" : "the file is empty"));
  }
  g_cubin_image = std::move(image);
  g_cubin_path = path;
  g_cubin_ready.store(true, std::memory_order_release);
}

// -- per-device slots: filled once under the slot's own mutex, read without a lock after

struct DeviceSlot {
  std::mutex mutex;                // held while the slot is filled or emptied
  std::atomic<bool> ready{false};  // release-stored once filled; acquire-loaded by every call
  CUdevice device = 0;
  CUcontext context = nullptr;     // the device's primary context, retained once
  CUmodule module = nullptr;
  std::unique_ptr<CUfunction[]> kernels;  // L.num_kernels, in launch order
  // T.sync_grid() (L.uses_grid_barrier): the barrier word, and per kernel the blocks that fit
  // the device at once (blocks per SM at its block size and dynamic shared memory, and SMs)
  CUdeviceptr grid_barrier = 0;
  std::unique_ptr<int[]> blocks_per_sm;
  int sms = 0;
  // the bytes of dynamic shared memory a block may have on the device (its opt-in maximum),
  // to which the kernels with a shared buffer sized at launch are allowed: a launch above
  // it is refused naming the kernel
  int max_smem = 0;
};

DeviceSlot g_slots[kMaxDevices];

// Makes `context` current for its scope and restores the caller's current context after,
// so a launch never changes the caller's current device.
class CurrentContextGuard {
 public:
  CurrentContextGuard(const TcLauncher& L, CUcontext context, int device_id) {
    const CUresult got = g_cuda.CtxGetCurrent(&previous_);
    if (got != CUDA_SUCCESS) tc_fail_driver_call(L, "cuCtxGetCurrent", got, device_id);
    if (previous_ != context) {
      const CUresult set = g_cuda.CtxSetCurrent(context);
      if (set != CUDA_SUCCESS) tc_fail_driver_call(L, "cuCtxSetCurrent", set, device_id);
      switched_ = true;
    }
  }

  ~CurrentContextGuard() {
    if (switched_) g_cuda.CtxSetCurrent(previous_);
  }

  CurrentContextGuard(const CurrentContextGuard&) = delete;
  CurrentContextGuard& operator=(const CurrentContextGuard&) = delete;

 private:
  CUcontext previous_ = nullptr;
  bool switched_ = false;
};

std::string tc_describe_failure(const char* what, CUresult status) {
  return std::string(what) + ": " + tc_cuda_error(status);
}

// Retain the primary context, load the cubin, get every kernel and set its attributes.  On a
// failure everything acquired so far is given back, the slot stays empty and the error says why.
void tc_fill_slot(const TcLauncher& L, DeviceSlot& slot, int device_id) {
  if (!g_cubin_ready.load(std::memory_order_acquire)) {
    tc_raise_runtime_error(L, std::string(L.function) +
                                  ": no cubin: the host module calls __tilecute_set_cubin(path) before the first launch");
  }
  CUdevice device = 0;
  CUresult status = g_cuda.DeviceGet(&device, device_id);
  if (status != CUDA_SUCCESS) tc_fail_driver_call(L, "cuDeviceGet", status, device_id);
  CUcontext context = nullptr;
  status = g_cuda.DevicePrimaryCtxRetain(&context, device);
  if (status != CUDA_SUCCESS) tc_fail_driver_call(L, "cuDevicePrimaryCtxRetain", status, device_id);

  std::string failure;
  CUcontext previous = nullptr;
  CUmodule module = nullptr;
  std::unique_ptr<CUfunction[]> kernels(new CUfunction[L.num_kernels]());
  status = g_cuda.CtxGetCurrent(&previous);
  const bool restore = status == CUDA_SUCCESS;
  if (status != CUDA_SUCCESS) failure = tc_describe_failure("cuCtxGetCurrent", status);
  if (failure.empty()) {
    status = g_cuda.CtxSetCurrent(context);
    if (status != CUDA_SUCCESS) failure = tc_describe_failure("cuCtxSetCurrent", status);
  }
  if (failure.empty()) {
    status = g_cuda.ModuleLoadData(&module, g_cubin_image.data());
    if (status != CUDA_SUCCESS) {
      module = nullptr;
      failure = "loading the cubin '" + g_cubin_path + "' failed: " + tc_cuda_error(status);
    }
  }
  int max_smem = 0;  // (queried when a kernel has a shared buffer sized at launch)
  for (int k = 0; failure.empty() && k < L.num_kernels; ++k) {
    const TcKernelInfo& info = L.kernels[k];
    status = g_cuda.ModuleGetFunction(&kernels[k], module, info.symbol);
    if (status != CUDA_SUCCESS) {
      failure = std::string("kernel '") + info.symbol + "' is not in the cubin '" + g_cubin_path +
                "': " + tc_cuda_error(status);
      break;
    }
    if (info.launch_sized_smem && max_smem == 0) {
      status = g_cuda.DeviceGetAttribute(&max_smem, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
                                         device);
      if (status != CUDA_SUCCESS) {
        failure = tc_describe_failure("cuDeviceGetAttribute(MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)", status);
        break;
      }
    }
    if (info.launch_sized_smem) {  // any size up to the device's maximum, checked per launch
      status = g_cuda.FuncSetAttribute(kernels[k], CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, max_smem);
      if (status != CUDA_SUCCESS) {
        failure = std::string("kernel '") + info.symbol + "': allowing " + tc_str(max_smem) +
                  " bytes of dynamic shared memory failed: " + tc_cuda_error(status);
      }
    } else if (info.raise_dynamic_smem_limit) {
      status = g_cuda.FuncSetAttribute(kernels[k], CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                       static_cast<int>(info.dynamic_smem));
      if (status != CUDA_SUCCESS) {
        failure = std::string("kernel '") + info.symbol + "': allowing " + tc_str(info.dynamic_smem) +
                  " bytes of dynamic shared memory failed: " + tc_cuda_error(status);
      }
    }
    if (failure.empty() && info.non_portable_cluster) {
      status = g_cuda.FuncSetAttribute(kernels[k], CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1);
      if (status != CUDA_SUCCESS) {
        failure = std::string("kernel '") + info.symbol + "': allowing a non-portable cluster size failed: " +
                  tc_cuda_error(status);
      }
    }
  }
  CUdeviceptr grid_barrier = 0;
  std::unique_ptr<int[]> blocks_per_sm(new int[L.num_kernels]());
  int sms = 0;
  if (failure.empty() && L.uses_grid_barrier) {
    // T.sync_grid(): the barrier word, zeroed before any launch on any stream may read it,
    // and how many blocks of each cooperative kernel fit the device at once
    status = g_cuda.DeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device);
    if (status != CUDA_SUCCESS) failure = tc_describe_failure("cuDeviceGetAttribute(MULTIPROCESSOR_COUNT)", status);
    for (int k = 0; failure.empty() && k < L.num_kernels; ++k) {
      const TcKernelInfo& info = L.kernels[k];
      if (!info.cooperative) continue;
      status = g_cuda.OccupancyMaxActiveBlocksPerMultiprocessor(
          &blocks_per_sm[k], kernels[k], static_cast<int>(info.block[0] * info.block[1] * info.block[2]),
          info.dynamic_smem);
      if (status != CUDA_SUCCESS) {
        failure = std::string("kernel '") + info.symbol + "': cuOccupancyMaxActiveBlocksPerMultiprocessor: " +
                  tc_cuda_error(status);
      }
    }
    if (failure.empty()) {
      status = g_cuda.MemAlloc(&grid_barrier, sizeof(uint32_t));
      if (status != CUDA_SUCCESS) {
        grid_barrier = 0;
        failure = tc_describe_failure("allocating the T.sync_grid() barrier word (cuMemAlloc)", status);
      }
    }
    if (failure.empty()) status = g_cuda.MemsetD32(grid_barrier, 0, 1);
    if (failure.empty() && status == CUDA_SUCCESS) status = g_cuda.CtxSynchronize();
    if (failure.empty() && status != CUDA_SUCCESS) {
      failure = tc_describe_failure("zeroing the T.sync_grid() barrier word", status);
    }
    if (!failure.empty() && grid_barrier != 0) g_cuda.MemFree(grid_barrier);
  }
  if (!failure.empty() && module != nullptr) g_cuda.ModuleUnload(module);
  if (restore) g_cuda.CtxSetCurrent(previous);
  if (!failure.empty()) {
    g_cuda.DevicePrimaryCtxRelease(device);
    tc_raise_runtime_error(L, std::string(L.function) + ": cuda:" + tc_str(device_id) + ": " + failure);
  }
  slot.device = device;
  slot.context = context;
  slot.module = module;
  slot.kernels = std::move(kernels);
  slot.grid_barrier = grid_barrier;
  slot.blocks_per_sm = std::move(blocks_per_sm);
  slot.sms = sms;
  slot.max_smem = max_smem;
}

// The slot of a device whose slot is not filled yet: fills it (or raises why not).
TC_COLD DeviceSlot& tc_fill_device_slot(const TcLauncher& L, int device_id) {
  if (device_id < 0 || device_id >= kMaxDevices) {
    tc_raise_runtime_error(L, std::string(L.function) + ": the launcher has slots for devices 0 to " +
                                  tc_str(kMaxDevices - 1) + ", got cuda:" + tc_str(device_id));
  }
  DeviceSlot& slot = g_slots[device_id];
  tc_require_driver(L);
  std::lock_guard<std::mutex> lock(slot.mutex);
  if (!slot.ready.load(std::memory_order_relaxed)) {
    tc_fill_slot(L, slot, device_id);
    slot.ready.store(true, std::memory_order_release);
  }
  return slot;
}

// The device's slot, filled on first use; after that one atomic load, no lock.
inline DeviceSlot& tc_device_slot(const TcLauncher& L, int device_id) {
  if (TC_LIKELY(static_cast<unsigned>(device_id) < static_cast<unsigned>(kMaxDevices))) {
    DeviceSlot& slot = g_slots[device_id];
    if (TC_LIKELY(slot.ready.load(std::memory_order_acquire))) return slot;
  }
  return tc_fill_device_slot(L, device_id);
}

// Unload every loaded module and release every retained primary context, each exactly once.
// Must not race with launches of this function.  Calling it again does nothing; a later launch
// fills the slot again.
void tc_cleanup(const TcLauncher& L) {
  std::string failures;
  for (int device_id = 0; device_id < kMaxDevices; ++device_id) {
    DeviceSlot& slot = g_slots[device_id];
    std::lock_guard<std::mutex> lock(slot.mutex);
    if (!slot.ready.load(std::memory_order_relaxed)) continue;
    slot.ready.store(false, std::memory_order_release);
    CUcontext previous = nullptr;
    CUresult status = g_cuda.CtxGetCurrent(&previous);
    const bool restore = status == CUDA_SUCCESS;
    if (status == CUDA_SUCCESS) status = g_cuda.CtxSetCurrent(slot.context);
    if (status == CUDA_SUCCESS && slot.grid_barrier != 0) status = g_cuda.MemFree(slot.grid_barrier);
    if (status == CUDA_SUCCESS) status = g_cuda.ModuleUnload(slot.module);
    if (status != CUDA_SUCCESS) {
      failures += " cuda:" + tc_str(device_id) + ": unloading the module: " + tc_cuda_error(status) + ";";
    }
    if (restore) g_cuda.CtxSetCurrent(previous);
    status = g_cuda.DevicePrimaryCtxRelease(slot.device);
    if (status != CUDA_SUCCESS) {
      failures += " cuda:" + tc_str(device_id) + ": releasing the primary context: " + tc_cuda_error(status) + ";";
    }
    slot.module = nullptr;
    slot.context = nullptr;
    slot.kernels.reset();
    slot.grid_barrier = 0;
    slot.blocks_per_sm.reset();
  }
  if (!failures.empty()) {
    tc_raise_runtime_error(L, std::string(L.function) + ": cleanup:" + failures);
  }
}

// -- launches

[[noreturn]] TC_COLD void tc_fail_launch(const TcLauncher& L, int kernel, CUresult status, int device_id) {
  tc_raise_runtime_error(L, std::string(L.function) + ": launching kernel '" + L.kernels[kernel].symbol +
                                "' on cuda:" + tc_str(device_id) + " failed: " + tc_cuda_error(status));
}

// A kernel that calls T.sync_grid() waits for every block of its grid: they must all be resident
// at once, which the cooperative launch would refuse with a bare CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE.
TC_COLD void tc_fail_coresident(const TcLauncher& L, const DeviceSlot& slot, int kernel, int64_t blocks,
                                int device_id) {
  const TcKernelInfo& info = L.kernels[kernel];
  const int per_sm = slot.blocks_per_sm[kernel];
  tc_raise_value_error(
      L, std::string(L.function) + ": kernel '" + info.symbol + "' calls T.sync_grid(), so every block of its " +
             "grid must be resident at once, but its grid has " + tc_str(blocks) + " blocks and cuda:" +
             tc_str(device_id) + " holds " + tc_str(static_cast<int64_t>(per_sm) * slot.sms) + " (" + tc_str(per_sm) +
             " per SM at " + tc_str(info.block[0] * info.block[1] * info.block[2]) + " threads and " +
             tc_str(info.dynamic_smem) + " bytes of dynamic shared memory, " + tc_str(slot.sms) +
             " SMs); launch at most that many blocks (TileLang's persistent kernels use the SM count)");
}

inline void tc_check_coresident(const TcLauncher& L, const DeviceSlot& slot, int kernel, const TcLaunch& launch,
                                int device_id) {
  const int64_t blocks = launch.grid[0] * launch.grid[1] * launch.grid[2];
  if (TC_UNLIKELY(blocks > static_cast<int64_t>(slot.blocks_per_sm[kernel]) * slot.sms)) {
    tc_fail_coresident(L, slot, kernel, blocks, device_id);
  }
}

// A kernel's shared buffer sized at launch (TileLang's dynamic shared memory) needs more than a
// block may have on the device (or a negative size): refused before anything launches.
[[noreturn]] TC_COLD void tc_fail_launch_smem(const TcLauncher& L, const DeviceSlot& slot, int kernel,
                                              int64_t bytes, int device_id) {
  const TcKernelInfo& info = L.kernels[kernel];
  tc_raise_value_error(
      L, std::string(L.function) + ": kernel '" + info.symbol + "' needs " + tc_str(bytes) +
             " bytes of dynamic shared memory at these arguments (" + tc_str(info.dynamic_smem) +
             " static, then its shared buffers sized at launch), " +
             (bytes < info.dynamic_smem ? std::string("a negative size for that buffer")
                                        : "above the " + tc_str(slot.max_smem) + " bytes a block may have on cuda:" +
                                              tc_str(device_id)));
}

// The bytes of dynamic shared memory of this launch: the kernel's static bytes, or with a shared
// buffer sized at launch the call's, checked against the device.
inline unsigned tc_launch_smem(const TcLauncher& L, const DeviceSlot& slot, int kernel, const TcLaunch& launch,
                               int device_id) {
  const TcKernelInfo& info = L.kernels[kernel];
  if (!info.launch_sized_smem) return info.dynamic_smem;
  if (TC_UNLIKELY(launch.smem < info.dynamic_smem || launch.smem > slot.max_smem)) {
    tc_fail_launch_smem(L, slot, kernel, launch.smem, device_id);
  }
  return static_cast<unsigned>(launch.smem);
}

// `window`: the L2 access policy window the launch carries, or nullptr.
inline void tc_launch(const TcLauncher& L, const DeviceSlot& slot, int kernel, const TcLaunch& launch,
                      CUstream stream, int device_id, const CUaccessPolicyWindow* window = nullptr) {
  const int64_t grid_x = launch.grid[0], grid_y = launch.grid[1], grid_z = launch.grid[2];
  const TcKernelInfo& info = L.kernels[kernel];
  const unsigned smem = tc_launch_smem(L, slot, kernel, launch, device_id);
  if (info.cooperative) tc_check_coresident(L, slot, kernel, launch, device_id);
  CUresult status;
  if (info.cluster[0] == 0 && !info.pdl && !info.cooperative && window == nullptr) {
    status = g_cuda.LaunchKernel(slot.kernels[kernel], static_cast<unsigned>(grid_x), static_cast<unsigned>(grid_y),
                                 static_cast<unsigned>(grid_z), info.block[0], info.block[1], info.block[2],
                                 smem, stream, launch.params, nullptr);
  } else {
    CUlaunchAttribute attrs[4];
    std::memset(attrs, 0, sizeof(attrs));
    unsigned num_attrs = 0;
    if (info.cluster[0] != 0) {
      attrs[num_attrs].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
      attrs[num_attrs].value.clusterDim.x = info.cluster[0];
      attrs[num_attrs].value.clusterDim.y = info.cluster[1];
      attrs[num_attrs].value.clusterDim.z = info.cluster[2];
      ++num_attrs;
    }
    if (info.pdl) {  // the kernel may start while the previous one on the stream finishes
      attrs[num_attrs].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
      attrs[num_attrs].value.programmaticStreamSerializationAllowed = 1;
      ++num_attrs;
    }
    if (info.cooperative) {  // T.sync_grid(): every block resident at once
      attrs[num_attrs].id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
      attrs[num_attrs].value.cooperative = 1;
      ++num_attrs;
    }
    if (window != nullptr) {  // T.annotate_l2_hit_ratio
      attrs[num_attrs].id = CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW;
      attrs[num_attrs].value.accessPolicyWindow = *window;
      ++num_attrs;
    }
    CUlaunchConfig config;
    std::memset(&config, 0, sizeof(config));
    config.gridDimX = static_cast<unsigned>(grid_x);
    config.gridDimY = static_cast<unsigned>(grid_y);
    config.gridDimZ = static_cast<unsigned>(grid_z);
    config.blockDimX = info.block[0];
    config.blockDimY = info.block[1];
    config.blockDimZ = info.block[2];
    config.sharedMemBytes = smem;
    config.hStream = stream;
    config.attrs = attrs;
    config.numAttrs = num_attrs;
    status = g_cuda.LaunchKernelEx(&config, slot.kernels[kernel], launch.params, nullptr);
  }
  if (TC_UNLIKELY(status != CUDA_SUCCESS)) tc_fail_launch(L, kernel, status, device_id);
}

// -- phase timing (docs/performance.md)

#ifdef TILECUTE_PHASE_TIMING

constexpr const char* kPhaseNames[kNumPhases] = {"checks", "pack", "stream", "slot", "context", "launch"};

std::atomic<int64_t> g_phase_ns[kNumPhases] = {};
std::atomic<int64_t> g_phase_calls{0};

// Picoseconds per steady_clock::now(): every phase holds about one clock read of the timer's own.
int64_t tc_clock_read_ps() {
  using Clock = TcPhaseTimer::Clock;
  constexpr int kReads = 10000;
  const Clock::time_point start = Clock::now();
  Clock::time_point last = start;
  for (int i = 0; i < kReads; ++i) last = Clock::now();
  return std::chrono::duration_cast<std::chrono::nanoseconds>(last - start).count() * 1000 / kReads;
}

#define TC_RUNTIME_MARK(phase) \
  if (timer != nullptr) timer->mark(phase)

#else

#define TC_RUNTIME_MARK(phase) (void)timer

#endif  // TILECUTE_PHASE_TIMING

}  // namespace

#ifdef TILECUTE_PHASE_TIMING
void tc_phase_add(const int64_t* ns, bool done) {
  for (int p = 0; p < kNumPhases; ++p) {
    if (ns[p] != 0) g_phase_ns[p].fetch_add(ns[p], std::memory_order_relaxed);
  }
  if (done) g_phase_calls.fetch_add(1, std::memory_order_relaxed);
}
#endif

CUdeviceptr tc_grid_barrier(const TcLauncher& L, int device_id) {
  return tc_device_slot(L, device_id).grid_barrier;
}

namespace {

// T.annotate_l2_hit_ratio, as TileLang's host code does it around the call (its
// tvm_cuda_stream_set/reset_access_policy_window): the persisting-L2 limit set to the window's
// bytes (the tensor's, clamped to the device's maximum where it has one), the kernels launched
// with the window, then the persisting lines reset and the previous limit restored -- also
// when a launch fails.  The window rides on each launch (CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW)
// rather than on the stream, so the stream's own policy is left as the caller set it.
// The primary context is current.
void tc_launch_with_l2_window(const TcLauncher& L, const DeviceSlot& slot, int device_id, CUstream stream,
                              const TcLaunch* launches, const TcL2Window& window) {
  tc_require_l2_driver(L, window);
  int max_persisting = 0;
  CUresult status = g_cuda_l2.DeviceGetAttribute(&max_persisting, CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE,
                                                 slot.device);
  if (status != CUDA_SUCCESS) {
    tc_fail_l2_call(L, window, "cuDeviceGetAttribute(CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE)", status,
                    device_id);
  }
  size_t num_bytes = window.num_bytes > 0 ? static_cast<size_t>(window.num_bytes) : 0;
  if (max_persisting > 0 && num_bytes > static_cast<size_t>(max_persisting)) {
    num_bytes = static_cast<size_t>(max_persisting);
  }
  size_t previous = 0;
  status = g_cuda_l2.CtxGetLimit(&previous, CU_LIMIT_PERSISTING_L2_CACHE_SIZE);
  if (status != CUDA_SUCCESS) {
    tc_fail_l2_call(L, window, "cuCtxGetLimit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE)", status, device_id);
  }
  status = g_cuda_l2.CtxSetLimit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE, num_bytes);
  if (status != CUDA_SUCCESS) {
    tc_fail_l2_call(L, window, "cuCtxSetLimit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE, " +
                        tc_str(static_cast<int64_t>(num_bytes)) + ")",
                    status, device_id);
  }
  CUaccessPolicyWindow policy;
  std::memset(&policy, 0, sizeof(policy));
  policy.base_ptr = window.base;
  policy.num_bytes = num_bytes;
  policy.hitRatio = window.hit_ratio;
  policy.hitProp = CU_ACCESS_PROPERTY_PERSISTING;
  policy.missProp = CU_ACCESS_PROPERTY_STREAMING;
  try {
    for (int k = 0; k < L.num_kernels; ++k) tc_launch(L, slot, k, launches[k], stream, device_id, &policy);
  } catch (...) {
    g_cuda_l2.CtxResetPersistingL2Cache();  // (the launch's error is the one raised)
    g_cuda_l2.CtxSetLimit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE, previous);
    throw;
  }
  status = g_cuda_l2.CtxResetPersistingL2Cache();
  const CUresult restored = g_cuda_l2.CtxSetLimit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE, previous);
  if (status != CUDA_SUCCESS) tc_fail_l2_call(L, window, "cuCtxResetPersistingL2Cache", status, device_id);
  if (restored != CUDA_SUCCESS) {
    tc_fail_l2_call(L, window, "cuCtxSetLimit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE, " +
                        tc_str(static_cast<int64_t>(previous)) + ")",
                    restored, device_id);
  }
}

}  // namespace

void tc_launch_kernels(const TcLauncher& L, int device_id, TcStreamArg stream_arg, const TcLaunch* launches,
                       TcPhaseTimer* timer, const TcL2Window* l2_window) {
  const CUstream stream =
      stream_arg.given ? stream_arg.stream : static_cast<CUstream>(TVMFFIEnvGetStream(kDLCUDA, device_id));
  TC_RUNTIME_MARK(kPhaseStream);
  DeviceSlot& slot = tc_device_slot(L, device_id);
  TC_RUNTIME_MARK(kPhaseSlot);
  {
    CurrentContextGuard context_guard(L, slot.context, device_id);
    TC_RUNTIME_MARK(kPhaseContext);
    if (l2_window != nullptr && l2_window->base != nullptr) {
      tc_launch_with_l2_window(L, slot, device_id, stream, launches, *l2_window);
    } else {
      for (int k = 0; k < L.num_kernels; ++k) tc_launch(L, slot, k, launches[k], stream, device_id);
    }
    TC_RUNTIME_MARK(kPhaseLaunch);
  }  // the caller's current context is restored here
  TC_RUNTIME_MARK(kPhaseContext);
}

// -- exports: TVM FFI safe calls

int tc_set_raised(const TcLauncher& L) {
  try {
    throw;
  } catch (const tvm::ffi::Error& error) {
    tvm::ffi::detail::SetSafeCallRaised(error);
  } catch (const std::exception& error) {
    tvm::ffi::detail::SetSafeCallRaised(tvm::ffi::Error("InternalError", error.what(), ""));
  } catch (...) {
    tvm::ffi::detail::SetSafeCallRaised(
        tvm::ffi::Error("InternalError", std::string(L.function) + ": an unknown C++ exception", ""));
  }
  return -1;
}

int tc_export_set_cubin(const TcLauncher& L, const TVMFFIAny* args, int32_t num_args, const char* name) {
  try {
    tc_set_cubin(L, tc_string_arg(L, args, num_args, name, "path"));
    return 0;
  } catch (...) {
    return tc_set_raised(L);
  }
}

int tc_export_ensure_device(const TcLauncher& L, const TVMFFIAny* args, int32_t num_args, const char* name) {
  try {
    tc_device_slot(L, tc_device_id_arg(L, args, num_args, name));
    return 0;
  } catch (...) {
    return tc_set_raised(L);
  }
}

int tc_export_cleanup(const TcLauncher& L, int32_t num_args, const char* name) {
  try {
    tc_check_no_args(L, num_args, name);
    tc_cleanup(L);
    return 0;
  } catch (...) {
    return tc_set_raised(L);
  }
}

#ifdef TILECUTE_PHASE_TIMING
// {"checks": ns, "pack": ns, "stream": ns, "slot": ns, "context": ns, "launch": ns,
//  "calls": n, "clock_read_ps": ps}
int tc_export_phase_times(const TcLauncher& L, int32_t num_args, TVMFFIAny* result, const char* name) {
  try {
    tc_check_no_args(L, num_args, name);
    tvm::ffi::Map<tvm::ffi::String, int64_t> times;
    for (int p = 0; p < kNumPhases; ++p) times.Set(kPhaseNames[p], g_phase_ns[p].load(std::memory_order_relaxed));
    times.Set("calls", g_phase_calls.load(std::memory_order_relaxed));
    times.Set("clock_read_ps", tc_clock_read_ps());
    *reinterpret_cast<tvm::ffi::Any*>(result) = times;
    return 0;
  } catch (...) {
    return tc_set_raised(L);
  }
}

int tc_export_phase_reset(const TcLauncher& L, int32_t num_args, const char* name) {
  try {
    tc_check_no_args(L, num_args, name);
    for (std::atomic<int64_t>& ns : g_phase_ns) ns.store(0, std::memory_order_relaxed);
    g_phase_calls.store(0, std::memory_order_relaxed);
    return 0;
  } catch (...) {
    return tc_set_raised(L);
  }
}
#endif  // TILECUTE_PHASE_TIMING

#pragma GCC visibility pop
