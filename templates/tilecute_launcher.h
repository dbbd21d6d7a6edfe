// tilecute launcher runtime: the part of every generated launcher that does not depend on the
// launch ABI (argument checks, the CUDA driver resolved at run time, per-device module slots,
// TMA encoding, launches, phase timing).  Shipped as package data of tilecute.templates and
// copied next to launcher.cpp into every cache entry, so an entry builds on its own.
//
// Not a stand-alone header: the generated launcher.cpp includes it once, after it defines,
// in an anonymous namespace, the tables of its launch ABI that this code reads:
//   kFunction, kNumArgs, kArgNames          the function and its arguments (for messages)
//   KernelInfo, kNumKernels, kKernels       the kernels, in launch order
//   DTypeName, kDTypeNames                  dtype names for messages
//   TmaDescriptorInfo                       one TMA descriptor parameter
//   kEncodesTiledTma, kEncodesIm2colTma     which encode entry points the driver must provide
// Everything here has internal linkage (anonymous namespace): each launcher library carries
// its own copy.  docs/launch-abi.md describes what the code does.

#ifndef TILECUTE_LAUNCHER_H_
#define TILECUTE_LAUNCHER_H_

#include <cuda.h>
#include <cudaTypedefs.h>
#include <dlfcn.h>
#include <tvm/ffi/any.h>
#include <tvm/ffi/c_api.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/function.h>
#include <tvm/ffi/string.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#ifdef TILECUTE_PHASE_TIMING
#include <chrono>
#include <tvm/ffi/container/map.h>
#endif

namespace {

#define TC_COLD __attribute__((noinline, cold))

// Errors cross into Python as TVM FFI errors: TypeError, ValueError, RuntimeError.  All
// raising goes through these three functions so that the error machinery is instantiated
// once (it dominates the build time otherwise); messages are plain string concatenation.

[[noreturn]] TC_COLD void tc_raise_type_error(const std::string& message) {
  TVM_FFI_THROW(TypeError) << message;
}

[[noreturn]] TC_COLD void tc_raise_value_error(const std::string& message) {
  TVM_FFI_THROW(ValueError) << message;
}

[[noreturn]] TC_COLD void tc_raise_runtime_error(const std::string& message) {
  TVM_FFI_THROW(RuntimeError) << message;
}

std::string tc_str(int64_t value) {
  return std::to_string(value);
}

// "<function>: argument '<arg>': "
std::string tc_arg(const char* arg) {
  return std::string(kFunction) + ": argument '" + arg + "': ";
}

constexpr int kMaxDevices = 64;
// Every driver entry point is resolved for this driver API version, so the pointer types
// below (PFN_<name>_v<version>) stay right whichever CUDA 12+ headers build the launcher.
constexpr int kDriverApiVersion = 12000;
constexpr int64_t kInt32Min = INT32_MIN;
constexpr int64_t kInt32Max = INT32_MAX;
constexpr int64_t kMaxGridX = INT32_MAX;
constexpr int64_t kMaxGridYZ = 65535;

// -- grid expression helpers (Python semantics: floor division, modulo with the divisor's sign)

[[noreturn]] TC_COLD void tc_fail_grid_division() {
  tc_raise_value_error(std::string(kFunction) + ": division by zero in a grid expression");
}

inline int64_t tc_floordiv(int64_t a, int64_t b) {
  if (TVM_FFI_PREDICT_FALSE(b == 0)) tc_fail_grid_division();
  const int64_t q = a / b;
  return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

inline int64_t tc_ceildiv(int64_t a, int64_t b) {
  return -tc_floordiv(-a, b);
}

inline int64_t tc_mod(int64_t a, int64_t b) {
  return a - b * tc_floordiv(a, b);
}

inline int64_t tc_min(int64_t a, int64_t b) {
  return a < b ? a : b;
}

inline int64_t tc_max(int64_t a, int64_t b) {
  return a > b ? a : b;
}

// -- scalar conversions for 16-bit float parameters (round to nearest even, via float)

inline uint16_t tc_float16_bits(double value) {
  const float f = static_cast<float>(value);
  uint32_t x;
  std::memcpy(&x, &f, sizeof(x));
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t exponent = (x >> 23) & 0xffu;
  uint32_t mantissa = x & 0x7fffffu;
  if (exponent == 0xffu) {
    return static_cast<uint16_t>(sign | 0x7c00u | (mantissa != 0 ? 0x200u : 0u));
  }
  const int32_t e = static_cast<int32_t>(exponent) - 127 + 15;
  if (e >= 0x1f) {
    return static_cast<uint16_t>(sign | 0x7c00u);
  }
  if (e <= 0) {
    if (e < -10) {
      return static_cast<uint16_t>(sign);
    }
    mantissa |= 0x800000u;
    const uint32_t shift = static_cast<uint32_t>(14 - e);
    uint32_t half = mantissa >> shift;
    const uint32_t rest = mantissa & ((1u << shift) - 1u);
    const uint32_t midpoint = 1u << (shift - 1u);
    if (rest > midpoint || (rest == midpoint && (half & 1u) != 0)) {
      ++half;
    }
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = sign | (static_cast<uint32_t>(e) << 10) | (mantissa >> 13);
  const uint32_t rest = mantissa & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u) != 0)) {
    ++half;  // a carry into the exponent is still the right encoding
  }
  return static_cast<uint16_t>(half);
}

inline uint16_t tc_bfloat16_bits(double value) {
  const float f = static_cast<float>(value);
  uint32_t x;
  std::memcpy(&x, &f, sizeof(x));
  if ((x & 0x7fffffffu) > 0x7f800000u) {
    return static_cast<uint16_t>((x >> 16) | 0x40u);  // NaN stays a quiet NaN
  }
  const uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>((x + rounding) >> 16);
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

std::string tc_dtype_name(DLDataType dtype) {
  if (dtype.lanes == 1) {
    for (const DTypeName& known : kDTypeNames) {
      if (known.code == dtype.code && known.bits == dtype.bits) {
        return known.name;
      }
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

// -- argument count, kinds and values (TypeError for a wrong kind or count, ValueError for a
//    wrong value); every message names the function and the argument

[[noreturn]] TC_COLD void tc_fail_arg_count(int32_t num_args) {
  tc_raise_type_error(std::string(kFunction) + ": expected " + tc_str(kNumArgs) +
                      (kNumArgs == 1 ? " argument (" : " arguments (") + kArgNames +
                      ") and an optional stream, got " + tc_str(num_args));
}

inline void tc_check_arg_count(int32_t num_args) {
  if (TVM_FFI_PREDICT_FALSE(num_args != kNumArgs && num_args != kNumArgs + 1)) tc_fail_arg_count(num_args);
}

[[noreturn]] TC_COLD void tc_fail_kind(const TVMFFIAny& any, const char* arg, const char* expected) {
  tc_raise_type_error(tc_arg(arg) + "expected " + expected + ", got " + tc_type_name(any));
}

inline const DLTensor* tc_tensor_arg(const TVMFFIAny& any, const char* arg) {
  if (any.type_index == kTVMFFIDLTensorPtr) {
    return static_cast<const DLTensor*>(any.v_ptr);
  }
  if (any.type_index == kTVMFFITensor) {
    return TVMFFITensorGetDLTensorPtr(any.v_obj);
  }
  tc_fail_kind(any, arg, "a tensor");
}

[[noreturn]] TC_COLD void tc_fail_dtype(const DLTensor* t, const char* arg, const char* expected) {
  tc_raise_value_error(tc_arg(arg) + "expected dtype " + expected + ", got " + tc_dtype_name(t->dtype));
}

inline void tc_check_dtype(const DLTensor* t, const char* arg, uint8_t code, uint8_t bits, const char* name) {
  if (TVM_FFI_PREDICT_FALSE(t->dtype.code != code || t->dtype.bits != bits || t->dtype.lanes != 1)) {
    tc_fail_dtype(t, arg, name);
  }
}

[[noreturn]] TC_COLD void tc_fail_rank(const DLTensor* t, const char* arg, int rank) {
  tc_raise_value_error(tc_arg(arg) + "expected rank " + tc_str(rank) + ", got rank " + tc_str(t->ndim) + " (shape " +
                       tc_dims(t->shape, t->ndim) + ")");
}

inline void tc_check_rank(const DLTensor* t, const char* arg, int rank) {
  if (TVM_FFI_PREDICT_FALSE(t->ndim != rank)) tc_fail_rank(t, arg, rank);
}

[[noreturn]] TC_COLD void tc_fail_static(int64_t value, int64_t expected, const char* arg, const char* where) {
  tc_raise_value_error(tc_arg(arg) + "expected " + where + " == " + tc_str(expected) + ", got " + tc_str(value));
}

inline void tc_check_static_dim(int64_t value, int64_t expected, const char* arg, const char* where) {
  if (TVM_FFI_PREDICT_FALSE(value != expected)) tc_fail_static(value, expected, arg, where);
}

// The stride of a size-1 dimension never moves the address, so it may be anything.
inline void tc_check_static_stride(int64_t value, int64_t expected, const char* arg, const char* where,
                                   int64_t extent) {
  if (TVM_FFI_PREDICT_FALSE(value != expected && extent != 1)) tc_fail_static(value, expected, arg, where);
}

[[noreturn]] TC_COLD void tc_fail_int32(int64_t value, const char* arg, const char* where, const char* symbol) {
  tc_raise_value_error(tc_arg(arg) + "expected " + where + " (" + symbol + ") to fit in int32, got " + tc_str(value));
}

[[noreturn]] TC_COLD void tc_fail_divisibility(int64_t value, const char* arg, const char* where, const char* symbol,
                                                int64_t divisibility) {
  tc_raise_value_error(tc_arg(arg) + "expected " + where + " (" + symbol + ") divisible by " + tc_str(divisibility) +
                       ", got " + tc_str(value));
}

inline int64_t tc_bind_symbol(int64_t value, const char* arg, const char* where, const char* symbol,
                              int64_t divisibility) {
  if (TVM_FFI_PREDICT_FALSE(value < kInt32Min || value > kInt32Max)) tc_fail_int32(value, arg, where, symbol);
  if (TVM_FFI_PREDICT_FALSE(divisibility > 1 && value % divisibility != 0)) {
    tc_fail_divisibility(value, arg, where, symbol, divisibility);
  }
  return value;
}

[[noreturn]] TC_COLD void tc_fail_symbol(int64_t value, int64_t bound, const char* arg, const char* where,
                                          const char* symbol, const char* bound_at) {
  tc_raise_value_error(tc_arg(arg) + "expected " + where + " == " + symbol + " = " + tc_str(bound) + " (from " +
                       bound_at + "), got " + tc_str(value));
}

inline void tc_check_symbol(int64_t value, int64_t bound, const char* arg, const char* where, const char* symbol,
                            const char* bound_at) {
  if (TVM_FFI_PREDICT_FALSE(value != bound)) tc_fail_symbol(value, bound, arg, where, symbol, bound_at);
}

[[noreturn]] TC_COLD void tc_fail_contiguous(const DLTensor* t, const char* arg) {
  tc_raise_value_error(tc_arg(arg) + "expected a contiguous (row-major) tensor, got shape " +
                       tc_dims(t->shape, t->ndim) + " with strides " + tc_dims(t->strides, t->ndim));
}

[[noreturn]] TC_COLD void tc_fail_stride_int32(const DLTensor* t, const char* arg, int d) {
  tc_raise_value_error(tc_arg(arg) + "expected strides[" + tc_str(d) + "] to fit in int32, got " +
                       tc_str(t->strides[d]) + " (shape " + tc_dims(t->shape, t->ndim) + ")");
}

TC_COLD bool tc_is_empty(const DLTensor* t) {
  for (int d = 0; d < t->ndim; ++d) {
    if (t->shape[d] == 0) return true;
  }
  return false;
}

// Row-major contiguous: strides[d] == product of shape[d+1:], except where shape[d] == 1.
// A tensor with no elements is contiguous whatever its strides.
inline void tc_check_contiguous(const DLTensor* t, const char* arg) {
  if (t->strides == nullptr) return;  // DLPack: NULL strides mean compact row-major
  int64_t expected = 1;
  for (int d = t->ndim - 1; d >= 0; --d) {
    const int64_t extent = t->shape[d];
    if (extent != 1) {
      if (TVM_FFI_PREDICT_FALSE(t->strides[d] != expected)) {
        if (tc_is_empty(t)) return;
        tc_fail_contiguous(t, arg);
      }
      if (TVM_FFI_PREDICT_FALSE(expected > kInt32Max)) tc_fail_stride_int32(t, arg, d);
    }
    expected *= extent;
  }
}

// Declared strides: read them, or compute them when the producer left them NULL (compact).
inline void tc_read_strides(const DLTensor* t, int64_t* strides) {
  if (t->strides != nullptr) {
    for (int d = 0; d < t->ndim; ++d) strides[d] = t->strides[d];
    return;
  }
  int64_t stride = 1;
  for (int d = t->ndim - 1; d >= 0; --d) {
    strides[d] = stride;
    stride *= t->shape[d];
  }
}

inline void* tc_data_ptr(const DLTensor* t) {
  return static_cast<char*>(t->data) + t->byte_offset;
}

[[noreturn]] TC_COLD void tc_fail_align(const void* ptr, const char* arg, uintptr_t align) {
  const uintptr_t address = reinterpret_cast<uintptr_t>(ptr);
  char hex[32];
  std::snprintf(hex, sizeof(hex), "0x%llx", static_cast<unsigned long long>(address));
  tc_raise_value_error(tc_arg(arg) + "expected the data pointer (data + byte_offset) aligned to " + tc_str(align) +
                       " bytes, got " + hex + " (" + tc_str(address % align) + " bytes past a " + tc_str(align) +
                       "-byte boundary)");
}

inline void tc_check_align(const void* ptr, const char* arg, uintptr_t align) {
  if (TVM_FFI_PREDICT_FALSE(reinterpret_cast<uintptr_t>(ptr) % align != 0)) tc_fail_align(ptr, arg, align);
}

[[noreturn]] TC_COLD void tc_fail_offsets_int32(const DLTensor* t, const char* arg, int64_t last) {
  tc_raise_value_error(tc_arg(arg) + "its largest element offset is " + tc_str(last) +
                       ", past int32, which this kernel computes its offsets in; compile it with "
                       "options={\"wide_offsets\": True} for 64-bit offsets (shape " + tc_dims(t->shape, t->ndim) + ")");
}

// A tensor the kernel indexes with 32-bit offsets: its largest offset, the sum of
// (extent - 1) * |stride|, must fit int32 (extents and strides are int32 already).
inline void tc_check_offsets_int32(const DLTensor* t, const char* arg) {
  int64_t last = 0, stride = 1;
  for (int d = t->ndim - 1; d >= 0; --d) {
    const int64_t s = t->strides != nullptr ? t->strides[d] : stride;
    if (t->shape[d] == 0) return;  // no elements: nothing is read or written
    last += (t->shape[d] - 1) * (s < 0 ? -s : s);
    stride *= t->shape[d];
  }
  if (TVM_FFI_PREDICT_FALSE(last > kInt32Max)) tc_fail_offsets_int32(t, arg, last);
}

[[noreturn]] TC_COLD void tc_fail_int_range(int64_t value, const char* arg, const char* dtype) {
  tc_raise_value_error(tc_arg(arg) + "expected a value that fits " + dtype + ", got " + tc_str(value));
}

[[noreturn]] TC_COLD void tc_fail_int_kind(const TVMFFIAny& any, const char* arg, const char* dtype) {
  if (tc_type_name(any) == "ffi.BigInt") {
    tc_raise_value_error(tc_arg(arg) + "expected a value that fits " + dtype + ", got an integer outside int64");
  }
  tc_fail_kind(any, arg, "an int");
}

// int and bool are accepted (a Python bool is an int).
inline int64_t tc_int_arg(const TVMFFIAny& any, const char* arg, const char* dtype, int64_t lo, int64_t hi) {
  if (TVM_FFI_PREDICT_FALSE(any.type_index != kTVMFFIInt && any.type_index != kTVMFFIBool)) {
    tc_fail_int_kind(any, arg, dtype);
  }
  const int64_t value = any.v_int64;
  if (TVM_FFI_PREDICT_FALSE(value < lo || value > hi)) tc_fail_int_range(value, arg, dtype);
  return value;
}

// float and int are accepted; bool is not.
inline double tc_float_arg(const TVMFFIAny& any, const char* arg) {
  if (any.type_index == kTVMFFIFloat) return any.v_float64;
  if (any.type_index == kTVMFFIInt) return static_cast<double>(any.v_int64);
  tc_fail_kind(any, arg, "a float");
}

// bool and int are accepted (nonzero is true).
inline bool tc_bool_arg(const TVMFFIAny& any, const char* arg) {
  if (TVM_FFI_PREDICT_FALSE(any.type_index != kTVMFFIBool && any.type_index != kTVMFFIInt)) {
    tc_fail_kind(any, arg, "a bool");
  }
  return any.v_int64 != 0;
}

// -- the optional trailing stream argument

struct StreamArg {
  bool given;
  CUstream stream;
};

[[noreturn]] TC_COLD void tc_fail_stream_value(int64_t value) {
  tc_raise_value_error(tc_arg("stream") + "expected a CUDA stream handle >= 0, got " + tc_str(value));
}

// An int (0 = the default stream) or an opaque pointer is an explicit stream; None or no
// argument means the TVM FFI environment stream.
inline StreamArg tc_stream_arg(const TVMFFIAny* args, int32_t num_args) {
  if (num_args == kNumArgs) return StreamArg{false, nullptr};
  const TVMFFIAny& any = args[kNumArgs];
  switch (any.type_index) {
    case kTVMFFINone:
      return StreamArg{false, nullptr};
    case kTVMFFIInt:
      if (any.v_int64 < 0) tc_fail_stream_value(any.v_int64);
      return StreamArg{true, reinterpret_cast<CUstream>(static_cast<uintptr_t>(any.v_int64))};
    case kTVMFFIOpaquePtr:
      return StreamArg{true, static_cast<CUstream>(any.v_ptr)};
    default:
      tc_fail_kind(any, "stream", "an integer CUDA stream handle or None");
  }
}

inline CUstream tc_env_stream(int device_id) {
  return static_cast<CUstream>(TVMFFIEnvGetStream(kDLCUDA, device_id));
}

// -- devices

[[noreturn]] TC_COLD void tc_fail_cuda(const DLTensor* t, const char* arg) {
  tc_raise_value_error(tc_arg(arg) + "expected a CUDA tensor, got " + tc_device_name(t->device));
}

inline void tc_check_cuda(const DLTensor* t, const char* arg) {
  if (TVM_FFI_PREDICT_FALSE(t->device.device_type != kDLCUDA)) tc_fail_cuda(t, arg);
}

[[noreturn]] TC_COLD void tc_fail_same_device(const DLTensor* t, const char* arg, int device_id, const char* first) {
  tc_raise_value_error(tc_arg(arg) + "expected a tensor on cuda:" + tc_str(device_id) + " (the device of argument '" +
                       first + "'), got " + tc_device_name(t->device));
}

inline void tc_check_same_device(const DLTensor* t, const char* arg, int device_id, const char* first) {
  if (TVM_FFI_PREDICT_FALSE(t->device.device_id != device_id)) tc_fail_same_device(t, arg, device_id, first);
}

// -- grids

[[noreturn]] TC_COLD void tc_fail_grid(int kernel, int64_t x, int64_t y, int64_t z) {
  const KernelInfo& info = kKernels[kernel];
  const std::string grid = "(" + tc_str(x) + ", " + tc_str(y) + ", " + tc_str(z) + ")";
  const std::string prefix = std::string(kFunction) + ": kernel '" + info.symbol + "': grid " + grid;
  const bool in_limits = x >= 0 && x <= kMaxGridX && y >= 0 && y <= kMaxGridYZ && z >= 0 && z <= kMaxGridYZ;
  if (!in_limits) {
    tc_raise_value_error(prefix + " is outside the CUDA limits (0 <= x < 2^31, 0 <= y, z < 65536)");
  }
  tc_raise_value_error(prefix + " is not a multiple of the cluster (" + tc_str(info.cluster[0]) + ", " +
                       tc_str(info.cluster[1]) + ", " + tc_str(info.cluster[2]) + ")");
}

inline void tc_check_grid(int kernel, int64_t x, int64_t y, int64_t z) {
  const KernelInfo& info = kKernels[kernel];
  bool ok = x >= 0 && x <= kMaxGridX && y >= 0 && y <= kMaxGridYZ && z >= 0 && z <= kMaxGridYZ;
  if (ok && info.cluster[0] != 0) {
    ok = x % info.cluster[0] == 0 && y % info.cluster[1] == 0 && z % info.cluster[2] == 0;
  }
  if (TVM_FFI_PREDICT_FALSE(!ok)) tc_fail_grid(kernel, x, y, z);
}

// -- arguments of the auxiliary exports

[[noreturn]] TC_COLD void tc_fail_export_args(const char* name, const char* expected, int32_t num_args) {
  tc_raise_type_error(std::string(kFunction) + ": " + name + ": expected " + expected + ", got " + tc_str(num_args) +
                      (num_args == 1 ? " argument" : " arguments"));
}

std::string tc_string_arg(const TVMFFIAny* args, int32_t num_args, const char* name, const char* arg) {
  if (num_args != 1) tc_fail_export_args(name, "1 argument", num_args);
  std::optional<tvm::ffi::String> text = reinterpret_cast<const tvm::ffi::AnyView*>(args)[0].try_cast<tvm::ffi::String>();
  if (!text.has_value()) tc_fail_kind(args[0], arg, "a str");
  return std::string(text->data(), text->size());
}

int tc_device_id_arg(const TVMFFIAny* args, int32_t num_args, const char* name) {
  if (num_args != 1) tc_fail_export_args(name, "1 argument", num_args);
  if (args[0].type_index != kTVMFFIInt) tc_fail_kind(args[0], "device_id", "an int");
  if (args[0].v_int64 < 0 || args[0].v_int64 >= kMaxDevices) {
    tc_raise_value_error(tc_arg("device_id") + "expected a CUDA device index in [0, " + tc_str(kMaxDevices) + "), got " +
                         tc_str(args[0].v_int64));
  }
  return static_cast<int>(args[0].v_int64);
}

void tc_check_no_args(int32_t num_args, const char* name) {
  if (num_args != 0) tc_fail_export_args(name, "no arguments", num_args);
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
  PFN_cuModuleLoadData_v2000 ModuleLoadData = nullptr;
  PFN_cuModuleUnload_v2000 ModuleUnload = nullptr;
  PFN_cuModuleGetFunction_v2000 ModuleGetFunction = nullptr;
  PFN_cuFuncSetAttribute_v9000 FuncSetAttribute = nullptr;
  PFN_cuLaunchKernel_v4000 LaunchKernel = nullptr;
  PFN_cuLaunchKernelEx_v11060 LaunchKernelEx = nullptr;
  PFN_cuTensorMapEncodeTiled_v12000 TensorMapEncodeTiled = nullptr;    // resolved when kEncodesTiledTma
  PFN_cuTensorMapEncodeIm2col_v12000 TensorMapEncodeIm2col = nullptr;  // resolved when kEncodesIm2colTma
};

CudaDriver g_cuda;
std::once_flag g_cuda_once;
std::string g_cuda_error;  // set once by tc_load_driver when the driver is unusable

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

void tc_load_driver() {
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
  const bool resolved = tc_resolve(get_proc, "cuGetErrorName", &g_cuda.GetErrorName) &&
                        tc_resolve(get_proc, "cuGetErrorString", &g_cuda.GetErrorString) &&
                        tc_resolve(get_proc, "cuInit", &g_cuda.Init) &&
                        tc_resolve(get_proc, "cuDeviceGet", &g_cuda.DeviceGet) &&
                        tc_resolve(get_proc, "cuDevicePrimaryCtxRetain", &g_cuda.DevicePrimaryCtxRetain) &&
                        tc_resolve(get_proc, "cuDevicePrimaryCtxRelease", &g_cuda.DevicePrimaryCtxRelease) &&
                        tc_resolve(get_proc, "cuCtxGetCurrent", &g_cuda.CtxGetCurrent) &&
                        tc_resolve(get_proc, "cuCtxSetCurrent", &g_cuda.CtxSetCurrent) &&
                        tc_resolve(get_proc, "cuModuleLoadData", &g_cuda.ModuleLoadData) &&
                        tc_resolve(get_proc, "cuModuleUnload", &g_cuda.ModuleUnload) &&
                        tc_resolve(get_proc, "cuModuleGetFunction", &g_cuda.ModuleGetFunction) &&
                        tc_resolve(get_proc, "cuFuncSetAttribute", &g_cuda.FuncSetAttribute) &&
                        tc_resolve(get_proc, "cuLaunchKernel", &g_cuda.LaunchKernel) &&
                        tc_resolve(get_proc, "cuLaunchKernelEx", &g_cuda.LaunchKernelEx) &&
                        (!kEncodesTiledTma ||
                         tc_resolve(get_proc, "cuTensorMapEncodeTiled", &g_cuda.TensorMapEncodeTiled)) &&
                        (!kEncodesIm2colTma ||
                         tc_resolve(get_proc, "cuTensorMapEncodeIm2col", &g_cuda.TensorMapEncodeIm2col));
  if (!resolved) return;
  const CUresult status = g_cuda.Init(0);
  if (status != CUDA_SUCCESS) {
    g_cuda_error = "CUDA driver initialization failed: cuInit returned " + tc_cuda_error(status);
  }
}

void tc_require_driver() {
  std::call_once(g_cuda_once, tc_load_driver);
  if (!g_cuda_error.empty()) {
    tc_raise_runtime_error(std::string(kFunction) + ": " + g_cuda_error);
  }
}

[[noreturn]] TC_COLD void tc_fail_driver_call(const char* call, CUresult status, int device_id) {
  tc_raise_runtime_error(std::string(kFunction) + ": " + call + " failed on cuda:" + tc_str(device_id) + ": " +
                         tc_cuda_error(status));
}

// -- TMA descriptors.  A tensor that descriptors cover has its global layout checked with the
//    other argument checks (tc_tma_global, before any driver call); each descriptor is then
//    encoded on every call into a CUtensorMap on the caller's stack, passed to the kernel by
//    value (a __grid_constant__ parameter).  The rules are those of cuda.h for
//    cuTensorMapEncodeTiled / cuTensorMapEncodeIm2col; the launch ABI's own were checked when
//    the launcher was rendered.

static_assert(sizeof(CUtensorMap) == 128, "a TMA descriptor parameter is 128 bytes");
static_assert(alignof(CUtensorMap) >= 64, "the driver encodes a tensor map only at a 64-byte aligned address");

constexpr int kTmaMaxRank = 5;
constexpr int64_t kTmaMaxDim = INT64_C(1) << 32;
constexpr uint64_t kTmaMaxStrideBytes = UINT64_C(1) << 40;

// A tensor's side of its TMA descriptors, in TMA order: dims[0] is the tensor's last axis.
struct TcTmaGlobal {
  void* address;                         // data + byte_offset
  cuuint32_t rank;
  cuuint64_t dims[kTmaMaxRank];          // elements
  cuuint64_t strides[kTmaMaxRank - 1];   // bytes; strides[i] steps along dims[i + 1]
};

inline uint64_t tc_mul_saturated(uint64_t a, uint64_t b) {
  return (b != 0 && a > UINT64_MAX / b) ? UINT64_MAX : a * b;
}

[[noreturn]] TC_COLD inline void tc_fail_tma_align(const void* ptr, const char* arg, uint64_t granule) {
  const uintptr_t address = reinterpret_cast<uintptr_t>(ptr);
  char hex[32];
  std::snprintf(hex, sizeof(hex), "0x%llx", static_cast<unsigned long long>(address));
  tc_raise_value_error(tc_arg(arg) + "TMA needs the data pointer (data + byte_offset) aligned to " + tc_str(granule) +
                       " bytes, got " + hex + " (" + tc_str(address % granule) + " bytes past a " + tc_str(granule) +
                       "-byte boundary)");
}

[[noreturn]] TC_COLD inline void tc_fail_tma_dims(const DLTensor* t, const char* arg) {
  tc_raise_value_error(tc_arg(arg) + "TMA needs every extent in [1, 2^32], got shape " + tc_dims(t->shape, t->ndim));
}

[[noreturn]] TC_COLD inline void tc_fail_tma_inner_stride(const char* arg, int d, int64_t stride) {
  tc_raise_value_error(tc_arg(arg) + "TMA needs the last axis contiguous (strides[" + tc_str(d) + "] == 1), got " +
                       tc_str(stride));
}

[[noreturn]] TC_COLD inline void tc_fail_tma_stride(const char* arg, int d, int64_t elements, uint64_t bytes,
                                                    uint64_t granule) {
  std::string got = tc_str(elements);
  if (elements >= 0 && bytes != UINT64_MAX) got += " (" + std::to_string(bytes) + " bytes)";
  tc_raise_value_error(tc_arg(arg) + "TMA needs strides[" + tc_str(d) + "] in bytes to be a multiple of " +
                       tc_str(granule) + " and below 2^40, got " + got);
}

// `strides`: the tensor's strides in elements for an argument with declared strides (read by
// tc_read_strides), or nullptr for a contiguous argument, whose strides are the compact ones.
// `granule`: 16, or 32 when a descriptor over the tensor interleaves 32 bytes.
inline TcTmaGlobal tc_tma_global(const DLTensor* t, const int64_t* strides, const char* arg, uint64_t element_bytes,
                                 uint64_t granule) {
  TcTmaGlobal global = {};
  global.address = tc_data_ptr(t);
  global.rank = static_cast<cuuint32_t>(t->ndim);
  if (TVM_FFI_PREDICT_FALSE(reinterpret_cast<uintptr_t>(global.address) % granule != 0)) {
    tc_fail_tma_align(global.address, arg, granule);
  }
  const int rank = t->ndim;
  for (int d = 0; d < rank; ++d) {
    if (TVM_FFI_PREDICT_FALSE(t->shape[d] < 1 || t->shape[d] > kTmaMaxDim)) tc_fail_tma_dims(t, arg);
    global.dims[rank - 1 - d] = static_cast<cuuint64_t>(t->shape[d]);
  }
  if (strides != nullptr && t->shape[rank - 1] != 1 && strides[rank - 1] != 1) {
    tc_fail_tma_inner_stride(arg, rank - 1, strides[rank - 1]);
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
    if (TVM_FFI_PREDICT_FALSE(bytes % granule != 0 || bytes >= kTmaMaxStrideBytes)) {
      tc_fail_tma_stride(arg, d, elements, bytes, granule);
    }
    global.strides[i - 1] = bytes;
    compact = tc_mul_saturated(compact, global.dims[i]);
  }
  return global;
}

[[noreturn]] TC_COLD inline void tc_fail_tma_encode(const char* call, const TmaDescriptorInfo& info, CUresult status) {
  tc_raise_runtime_error(tc_arg(info.arg) + "encoding TMA descriptor '" + info.param + "' of kernel '" + info.kernel +
                         "' failed: " + call + " returned " + tc_cuda_error(status));
}

inline void tc_encode_tma_tiled(CUtensorMap* desc, const TcTmaGlobal& global, const TmaDescriptorInfo& info) {
  cuuint32_t box[kTmaMaxRank] = {};
  cuuint32_t element_strides[kTmaMaxRank] = {};
  for (unsigned i = 0; i < info.rank; ++i) {
    box[i] = info.box[info.rank - 1 - i];
    element_strides[i] = info.element_strides[info.rank - 1 - i];
  }
  const CUresult status =
      g_cuda.TensorMapEncodeTiled(desc, info.data_type, global.rank, global.address, global.dims, global.strides, box,
                                  element_strides, info.interleave, info.swizzle, info.l2_promotion, info.oob_fill);
  if (TVM_FFI_PREDICT_FALSE(status != CUDA_SUCCESS)) tc_fail_tma_encode("cuTensorMapEncodeTiled", info, status);
}

inline void tc_encode_tma_im2col(CUtensorMap* desc, const TcTmaGlobal& global, const TmaDescriptorInfo& info) {
  cuuint32_t element_strides[kTmaMaxRank] = {};
  for (unsigned i = 0; i < info.rank; ++i) element_strides[i] = info.element_strides[info.rank - 1 - i];
  // the corners hold one offset per spatial axis: (D, H, W) in tensor order, (W, H, D) for TMA
  const unsigned spatial = info.rank - 2;
  int lower[3] = {};
  int upper[3] = {};
  for (unsigned i = 0; i < spatial; ++i) {
    lower[i] = info.lower_corner[spatial - 1 - i];
    upper[i] = info.upper_corner[spatial - 1 - i];
  }
  const CUresult status = g_cuda.TensorMapEncodeIm2col(
      desc, info.data_type, global.rank, global.address, global.dims, global.strides, lower, upper,
      info.channels_per_pixel, info.pixels_per_column, element_strides, info.interleave, info.swizzle,
      info.l2_promotion, info.oob_fill);
  if (TVM_FFI_PREDICT_FALSE(status != CUDA_SUCCESS)) tc_fail_tma_encode("cuTensorMapEncodeIm2col", info, status);
}

// -- the cubin image, read once per process

std::mutex g_cubin_mutex;
std::string g_cubin_path;
std::string g_cubin_image;  // a std::string keeps a NUL after the bytes, which a PTX image needs
std::atomic<bool> g_cubin_ready{false};

void tc_set_cubin(const std::string& path) {
  std::lock_guard<std::mutex> lock(g_cubin_mutex);
  if (g_cubin_ready.load(std::memory_order_relaxed)) {
    if (path == g_cubin_path) return;
    tc_raise_value_error(std::string(kFunction) + ": the cubin is already set from '" + g_cubin_path +
                         "'; it cannot change to '" + path + "' in this process");
  }
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    const int error = errno;
    tc_raise_runtime_error(std::string(kFunction) + ": cannot read the cubin '" + path + "': " + std::strerror(error));
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
    tc_raise_runtime_error(std::string(kFunction) + ": cannot read the cubin '" + path + "': " +
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
  CUfunction kernels[kNumKernels] = {};
};

DeviceSlot g_slots[kMaxDevices];

// Makes `context` current for its scope and restores the caller's current context after,
// so a launch never changes the caller's current device.
class CurrentContextGuard {
 public:
  CurrentContextGuard(CUcontext context, int device_id) {
    const CUresult got = g_cuda.CtxGetCurrent(&previous_);
    if (got != CUDA_SUCCESS) tc_fail_driver_call("cuCtxGetCurrent", got, device_id);
    if (previous_ != context) {
      const CUresult set = g_cuda.CtxSetCurrent(context);
      if (set != CUDA_SUCCESS) tc_fail_driver_call("cuCtxSetCurrent", set, device_id);
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
void tc_fill_slot(DeviceSlot& slot, int device_id) {
  if (!g_cubin_ready.load(std::memory_order_acquire)) {
    tc_raise_runtime_error(std::string(kFunction) +
                           ": no cubin: the host module calls __tilecute_set_cubin(path) before the first launch");
  }
  CUdevice device = 0;
  CUresult status = g_cuda.DeviceGet(&device, device_id);
  if (status != CUDA_SUCCESS) tc_fail_driver_call("cuDeviceGet", status, device_id);
  CUcontext context = nullptr;
  status = g_cuda.DevicePrimaryCtxRetain(&context, device);
  if (status != CUDA_SUCCESS) tc_fail_driver_call("cuDevicePrimaryCtxRetain", status, device_id);

  std::string failure;
  CUcontext previous = nullptr;
  CUmodule module = nullptr;
  CUfunction kernels[kNumKernels] = {};
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
  for (int k = 0; failure.empty() && k < kNumKernels; ++k) {
    const KernelInfo& info = kKernels[k];
    status = g_cuda.ModuleGetFunction(&kernels[k], module, info.symbol);
    if (status != CUDA_SUCCESS) {
      failure = std::string("kernel '") + info.symbol + "' is not in the cubin '" + g_cubin_path +
                "': " + tc_cuda_error(status);
      break;
    }
    if (info.raise_dynamic_smem_limit) {
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
  if (!failure.empty() && module != nullptr) g_cuda.ModuleUnload(module);
  if (restore) g_cuda.CtxSetCurrent(previous);
  if (!failure.empty()) {
    g_cuda.DevicePrimaryCtxRelease(device);
    tc_raise_runtime_error(std::string(kFunction) + ": cuda:" + tc_str(device_id) + ": " + failure);
  }
  slot.device = device;
  slot.context = context;
  slot.module = module;
  for (int k = 0; k < kNumKernels; ++k) slot.kernels[k] = kernels[k];
}

DeviceSlot& tc_device_slot(int device_id) {
  if (TVM_FFI_PREDICT_FALSE(device_id < 0 || device_id >= kMaxDevices)) {
    tc_raise_runtime_error(std::string(kFunction) + ": the launcher has slots for devices 0 to " +
                           tc_str(kMaxDevices - 1) + ", got cuda:" + tc_str(device_id));
  }
  DeviceSlot& slot = g_slots[device_id];
  if (TVM_FFI_PREDICT_TRUE(slot.ready.load(std::memory_order_acquire))) return slot;
  tc_require_driver();
  std::lock_guard<std::mutex> lock(slot.mutex);
  if (!slot.ready.load(std::memory_order_relaxed)) {
    tc_fill_slot(slot, device_id);
    slot.ready.store(true, std::memory_order_release);
  }
  return slot;
}

// Unload every loaded module and release every retained primary context, each exactly once.
// Must not race with launches of this function.  Calling it again does nothing; a later launch
// fills the slot again.
void tc_cleanup() {
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
    for (CUfunction& kernel : slot.kernels) kernel = nullptr;
  }
  if (!failures.empty()) {
    tc_raise_runtime_error(std::string(kFunction) + ": cleanup:" + failures);
  }
}

// -- launches

[[noreturn]] TC_COLD void tc_fail_launch(int kernel, CUresult status, int device_id) {
  tc_raise_runtime_error(std::string(kFunction) + ": launching kernel '" + kKernels[kernel].symbol + "' on cuda:" +
                         tc_str(device_id) + " failed: " + tc_cuda_error(status));
}

inline void tc_launch(const DeviceSlot& slot, int kernel, int64_t grid_x, int64_t grid_y, int64_t grid_z,
                      CUstream stream, void** params, int device_id) {
  if (grid_x == 0 || grid_y == 0 || grid_z == 0) return;  // an empty grid launches nothing
  const KernelInfo& info = kKernels[kernel];
  CUresult status;
  bool plain = info.cluster[0] == 0;
#ifdef TC_ANY_PDL
  plain = plain && !info.pdl;
#endif
  if (plain) {
    status = g_cuda.LaunchKernel(slot.kernels[kernel], static_cast<unsigned>(grid_x), static_cast<unsigned>(grid_y),
                                 static_cast<unsigned>(grid_z), info.block[0], info.block[1], info.block[2],
                                 info.dynamic_smem, stream, params, nullptr);
  } else {
    CUlaunchAttribute attrs[2];
    std::memset(attrs, 0, sizeof(attrs));
    unsigned num_attrs = 0;
    if (info.cluster[0] != 0) {
      attrs[num_attrs].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
      attrs[num_attrs].value.clusterDim.x = info.cluster[0];
      attrs[num_attrs].value.clusterDim.y = info.cluster[1];
      attrs[num_attrs].value.clusterDim.z = info.cluster[2];
      ++num_attrs;
    }
#ifdef TC_ANY_PDL
    if (info.pdl) {  // the kernel may start while the previous one on the stream finishes
      attrs[num_attrs].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
      attrs[num_attrs].value.programmaticStreamSerializationAllowed = 1;
      ++num_attrs;
    }
#endif
    CUlaunchConfig config;
    std::memset(&config, 0, sizeof(config));
    config.gridDimX = static_cast<unsigned>(grid_x);
    config.gridDimY = static_cast<unsigned>(grid_y);
    config.gridDimZ = static_cast<unsigned>(grid_z);
    config.blockDimX = info.block[0];
    config.blockDimY = info.block[1];
    config.blockDimZ = info.block[2];
    config.sharedMemBytes = info.dynamic_smem;
    config.hStream = stream;
    config.attrs = attrs;
    config.numAttrs = num_attrs;
    status = g_cuda.LaunchKernelEx(&config, slot.kernels[kernel], params, nullptr);
  }
  if (TVM_FFI_PREDICT_FALSE(status != CUDA_SUCCESS)) tc_fail_launch(kernel, status, device_id);
}

// -- phase timing: compiled in only with -DTILECUTE_PHASE_TIMING (docs/performance.md)
//
// The call marks the end of each phase with TC_PHASE_MARK(phase); the time since the
// previous mark (std::chrono::steady_clock) goes to that phase.  The totals are added to
// process-wide counters when the call returns or raises, so a call that fails adds the
// phases it finished; `calls` counts only the calls that returned normally.  Without the
// define the macros expand to nothing and none of this is compiled.

#ifdef TILECUTE_PHASE_TIMING

// In the order a call runs them.
enum TcPhase { kPhaseChecks, kPhasePack, kPhaseStream, kPhaseSlot, kPhaseContext, kPhaseLaunch, kNumPhases };
constexpr const char* kPhaseNames[kNumPhases] = {"checks", "pack", "stream", "slot", "context", "launch"};

using TcClock = std::chrono::steady_clock;

std::atomic<int64_t> g_phase_ns[kNumPhases] = {};
std::atomic<int64_t> g_phase_calls{0};

class PhaseTimer {
 public:
  PhaseTimer() : last_(TcClock::now()) {}

  void mark(TcPhase phase) {
    const TcClock::time_point now = TcClock::now();
    ns_[phase] += std::chrono::duration_cast<std::chrono::nanoseconds>(now - last_).count();
    last_ = now;
  }

  void call_done() { done_ = true; }

  ~PhaseTimer() {
    for (int p = 0; p < kNumPhases; ++p) {
      if (ns_[p] != 0) g_phase_ns[p].fetch_add(ns_[p], std::memory_order_relaxed);
    }
    if (done_) g_phase_calls.fetch_add(1, std::memory_order_relaxed);
  }

  PhaseTimer(const PhaseTimer&) = delete;
  PhaseTimer& operator=(const PhaseTimer&) = delete;

 private:
  TcClock::time_point last_;
  int64_t ns_[kNumPhases] = {};
  bool done_ = false;
};

// Picoseconds per TcClock::now(): every phase holds about one clock read of the timer's own.
int64_t tc_clock_read_ps() {
  constexpr int kReads = 10000;
  const TcClock::time_point start = TcClock::now();
  TcClock::time_point last = start;
  for (int i = 0; i < kReads; ++i) last = TcClock::now();
  return std::chrono::duration_cast<std::chrono::nanoseconds>(last - start).count() * 1000 / kReads;
}

// {"checks": ns, "pack": ns, "stream": ns, "slot": ns, "context": ns, "launch": ns,
//  "calls": n, "clock_read_ps": ps}
tvm::ffi::Map<tvm::ffi::String, int64_t> tc_phase_times() {
  tvm::ffi::Map<tvm::ffi::String, int64_t> times;
  for (int p = 0; p < kNumPhases; ++p) times.Set(kPhaseNames[p], g_phase_ns[p].load(std::memory_order_relaxed));
  times.Set("calls", g_phase_calls.load(std::memory_order_relaxed));
  times.Set("clock_read_ps", tc_clock_read_ps());
  return times;
}

void tc_phase_reset() {
  for (std::atomic<int64_t>& ns : g_phase_ns) ns.store(0, std::memory_order_relaxed);
  g_phase_calls.store(0, std::memory_order_relaxed);
}

#define TC_PHASE_START() PhaseTimer tc_phase_timer
#define TC_PHASE_MARK(phase) tc_phase_timer.mark(phase)
#define TC_PHASE_CALL_DONE() tc_phase_timer.call_done()

#else

#define TC_PHASE_START()
#define TC_PHASE_MARK(phase)
#define TC_PHASE_CALL_DONE()

#endif  // TILECUTE_PHASE_TIMING

}  // namespace

#endif  // TILECUTE_LAUNCHER_H_
