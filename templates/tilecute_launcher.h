// tilecute launcher runtime, the part a generated launcher.cpp compiles itself: the types of
// its launch ABI tables, the fast paths of the argument checks (inline: they run on every
// call), and the declarations of everything else.  Everything else -- the CUDA driver
// resolved at run time, per-device module slots, TMA encoding, launches, every error message,
// phase timing -- is tilecute_launcher_runtime.cpp, compiled once per toolchain into an object
// that every launcher links statically (tilecute.toolchain.launcher_runtime_object), so a
// launcher's build compiles its own few dozen lines and nothing more (docs/performance.md).
//
// Both files are package data of tilecute.templates, copied next to launcher.cpp into every
// cache entry, so an entry builds on its own (`g++ -shared launcher.cpp
// tilecute_launcher_runtime.cpp -ltvm_ffi -ldl` with tilecute.toolchain's flags).
//
// Only C headers here (the CUDA driver API's types, TVM FFI's C API): the C++ library and
// TVM FFI's C++ headers are the runtime's alone.
//
// The one thing a launcher defines for this header is `tc_launcher`, its TcLauncher: the
// function's name and arguments and its kernels, which the runtime reads (every runtime
// function takes it) and the inline checks name in their errors.  Every declaration here
// has hidden visibility: a launcher library exports only its TVM FFI functions, and the
// runtime code in one launcher library never binds to another's.  docs/launch-abi.md
// describes what the code does.

#ifndef TILECUTE_LAUNCHER_H_
#define TILECUTE_LAUNCHER_H_

#include <cuda.h>
#include <stdint.h>
#include <string.h>
#include <tvm/ffi/c_api.h>
#include <tvm/ffi/extra/c_env_api.h>

#ifdef TILECUTE_PHASE_TIMING
#include <chrono>
#endif

#pragma GCC visibility push(hidden)

#define TC_COLD __attribute__((noinline, cold))
#define TC_UNLIKELY(cond) (__builtin_expect(static_cast<bool>(cond), 0))
#define TC_LIKELY(cond) (__builtin_expect(static_cast<bool>(cond), 1))

// ---------------------------------------------------------------------------------------------
// What a launcher launches: the tables launcher.cpp renders from its launch ABI
// ---------------------------------------------------------------------------------------------

struct TcKernelInfo {
  const char* symbol;             // exact name of the kernel in the cubin
  const char* grid_text[3];       // the grid extents as the program reads (messages)
  unsigned block[3];
  unsigned cluster[3];            // {0, 0, 0}: no cluster, launched with cuLaunchKernel
  unsigned dynamic_smem;          // bytes of dynamic shared memory per block
  bool raise_dynamic_smem_limit;  // above 48 KiB a kernel must opt in
  bool non_portable_cluster;      // more than 8 blocks per cluster
  bool pdl;                       // Programmatic Dependent Launch (option pdl)
  bool cooperative;               // calls T.sync_grid(): a cooperative launch, every block resident
  bool launch_sized_smem = false; // a shared buffer sized at launch: TcLaunch.smem bytes in all
};

// One TMA descriptor parameter (the launch ABI's TmaSpec), encoded on every call.  The
// per-axis arrays are in tensor axis order, as in the ABI; tc_encode_tma_tiled /
// tc_encode_tma_im2col reverse them into TMA order (TMA dimension 0 = the last tensor axis).
struct TcTmaDescriptorInfo {
  const char* kernel;                   // kernel symbol
  const char* param;                    // parameter name
  const char* arg;                      // the tensor argument it covers
  CUtensorMapDataType data_type;
  unsigned rank;
  cuuint32_t box[5];                    // tiled: elements per axis
  cuuint32_t element_strides[5];
  CUtensorMapInterleave interleave;
  CUtensorMapSwizzle swizzle;
  CUtensorMapL2promotion l2_promotion;
  CUtensorMapFloatOOBfill oob_fill;
  int lower_corner[3];                  // im2col: one offset per spatial axis
  int upper_corner[3];
  cuuint32_t channels_per_pixel;        // im2col
  cuuint32_t pixels_per_column;         // im2col
};

struct TcDTypeName {
  uint8_t code;
  uint8_t bits;
  const char* name;
};

// A launcher, as the runtime sees it.
struct TcLauncher {
  const char* function;              // the exported function: every message starts with it
  int num_args;                      // without the optional stream
  const char* arg_names;             // "A, B, C", for the argument-count message
  const TcKernelInfo* kernels;       // in launch order
  int num_kernels;
  const TcDTypeName* dtype_names;    // dtype names for messages
  int num_dtype_names;
  bool encodes_tiled_tma;            // which encode entry points the driver must provide
  bool encodes_im2col_tma;
  bool uses_grid_barrier;            // a kernel calls T.sync_grid(): a barrier word per device
  const char* source;                // launcher.cpp (__FILE__) and the line of its call
  int line;                          //   function: where tracebacks of its errors point
};

extern const TcLauncher tc_launcher;  // defined by launcher.cpp

// ---------------------------------------------------------------------------------------------
// The runtime (tilecute_launcher_runtime.cpp): failures, each raising a TVM FFI error whose
// message names the function and the argument (TypeError for a wrong kind or count,
// ValueError for a wrong value, RuntimeError for the driver), and the launch side.
// ---------------------------------------------------------------------------------------------

[[noreturn]] TC_COLD void tc_fail_grid_division(const TcLauncher& L);
[[noreturn]] TC_COLD void tc_fail_assume(const TcLauncher& L, const char* condition);
[[noreturn]] TC_COLD void tc_fail_no_carrier(const TcLauncher& L, const char* symbol, const char* carriers);
[[noreturn]] TC_COLD void tc_fail_arg_count(const TcLauncher& L, int32_t num_args);
[[noreturn]] TC_COLD void tc_fail_kind(const TcLauncher& L, const TVMFFIAny& any, const char* arg,
                                       const char* expected);
[[noreturn]] TC_COLD void tc_fail_dtype(const TcLauncher& L, const DLTensor* t, const char* arg,
                                        const char* expected);
[[noreturn]] TC_COLD void tc_fail_null_data(const TcLauncher& L, const DLTensor* t, const char* arg);
[[noreturn]] TC_COLD void tc_fail_rank(const TcLauncher& L, const DLTensor* t, const char* arg, int rank);
[[noreturn]] TC_COLD void tc_fail_static(const TcLauncher& L, int64_t value, int64_t expected, const char* arg,
                                         const char* where);
[[noreturn]] TC_COLD void tc_fail_int32(const TcLauncher& L, int64_t value, const char* arg, const char* where,
                                        const char* symbol);
[[noreturn]] TC_COLD void tc_fail_divisibility(const TcLauncher& L, int64_t value, const char* arg,
                                               const char* where, const char* symbol, int64_t divisibility);
[[noreturn]] TC_COLD void tc_fail_symbol(const TcLauncher& L, int64_t value, int64_t bound, const char* arg,
                                         const char* where, const char* symbol, const char* bound_at);
[[noreturn]] TC_COLD void tc_fail_solve(const TcLauncher& L, int64_t value, const char* arg, const char* where,
                                        const char* symbol, const char* text);
[[noreturn]] TC_COLD void tc_fail_dim_expr(const TcLauncher& L, int64_t value, int64_t expected, const char* arg,
                                           const char* where, const char* text);
// a tensor that is not row-major contiguous; returns for one with no elements, which passes
TC_COLD void tc_fail_contiguous_unless_empty(const TcLauncher& L, const DLTensor* t, const char* arg);
[[noreturn]] TC_COLD void tc_fail_stride_int32(const TcLauncher& L, const DLTensor* t, const char* arg, int d);
[[noreturn]] TC_COLD void tc_fail_align(const TcLauncher& L, const void* ptr, const char* arg, uintptr_t align);
[[noreturn]] TC_COLD void tc_fail_offsets_int32(const TcLauncher& L, const DLTensor* t, const char* arg,
                                                int64_t last);
[[noreturn]] TC_COLD void tc_fail_int_range(const TcLauncher& L, int64_t value, const char* arg,
                                            const char* dtype);
[[noreturn]] TC_COLD void tc_fail_int_kind(const TcLauncher& L, const TVMFFIAny& any, const char* arg,
                                           const char* dtype);
[[noreturn]] TC_COLD void tc_fail_stream_value(const TcLauncher& L, int64_t value);
[[noreturn]] TC_COLD void tc_fail_address(const TcLauncher& L, int64_t value, const char* arg);
[[noreturn]] TC_COLD void tc_fail_address_align(const TcLauncher& L, int64_t address, const char* arg,
                                                uintptr_t align);
[[noreturn]] TC_COLD void tc_fail_cuda(const TcLauncher& L, const DLTensor* t, const char* arg);
[[noreturn]] TC_COLD void tc_fail_same_device(const TcLauncher& L, const DLTensor* t, const char* arg,
                                              int device_id, const char* first);
[[noreturn]] TC_COLD void tc_fail_grid(const TcLauncher& L, int kernel, int64_t x, int64_t y, int64_t z);

// A tensor's side of its TMA descriptors, in TMA order: dims[0] is the tensor's last axis.
constexpr int kTmaMaxRank = 5;
struct TcTmaGlobal {
  void* address;                         // data + byte_offset
  cuuint32_t rank;
  cuuint64_t dims[kTmaMaxRank];          // elements
  cuuint64_t strides[kTmaMaxRank - 1];   // bytes; strides[i] steps along dims[i + 1]
};

// Checks a tensor that TMA descriptors read and returns its global layout (before any driver
// call).  `strides`: its strides in elements for an argument with declared strides (read by
// tc_read_strides), or nullptr for a contiguous argument, whose strides are the compact ones.
// `granule`: 16, or 32 when a descriptor over the tensor interleaves 32 bytes.
TcTmaGlobal tc_tma_global(const TcLauncher& L, const DLTensor* t, const int64_t* strides, const char* arg,
                          uint64_t element_bytes, uint64_t granule);

// Loads the CUDA driver once per process (dlopen("libcuda.so.1") + cuGetProcAddress; no
// link-time libcuda) or raises why it cannot.
void tc_require_driver(const TcLauncher& L);

// The device of the calling thread's current CUDA context (torch's current device: setting
// it makes the device's primary context current), 0 when no context is current; the launch
// device of a call with no tensor argument.  Loads the driver first.
int tc_current_device(const TcLauncher& L);

// The driver's TMA encoders, resolved by tc_require_driver for a launcher whose TcLauncher
// says it encodes them; called inline (tc_encode_tma_tiled / _im2col below), so that the
// descriptor's constants fold into the call.
extern decltype(&cuTensorMapEncodeTiled) tc_cuda_encode_tma_tiled;
extern decltype(&cuTensorMapEncodeIm2col) tc_cuda_encode_tma_im2col;
[[noreturn]] TC_COLD void tc_fail_tma_encode(const TcLauncher& L, const char* call, const TcTmaDescriptorInfo& info,
                                             CUresult status);

// The optional trailing stream argument.
struct TcStreamArg {
  bool given;
  CUstream stream;
};

// One kernel of a call: its grid and its parameter array (cuLaunchKernel's kernelParams).
struct TcLaunch {
  int64_t grid[3];
  void** params;
  int64_t smem = 0;  // TcKernelInfo.launch_sized_smem: this call's bytes of dynamic shared memory
};

// Phase timing (docs/performance.md): compiled in only with -DTILECUTE_PHASE_TIMING, in the
// launcher and in the runtime object it links.  The call marks the end of each phase with
// TC_PHASE_MARK(phase); the time since the previous mark (std::chrono::steady_clock) goes to
// that phase.  The totals are added to the library's counters when the call returns or raises,
// so a call that fails adds the phases it finished; `calls` counts only the calls that
// returned normally.  Without the define the macros expand to nothing (TC_PHASE_TIMER: nullptr).
#ifdef TILECUTE_PHASE_TIMING

// In the order a call runs them.
enum TcPhase { kPhaseChecks, kPhasePack, kPhaseStream, kPhaseSlot, kPhaseContext, kPhaseLaunch, kNumPhases };

// adds one call's phase times (ns) to the library's counters; `done`: the call returned
void tc_phase_add(const int64_t* ns, bool done);

class TcPhaseTimer {
 public:
  using Clock = std::chrono::steady_clock;

  TcPhaseTimer() : last_(Clock::now()) {}

  void mark(TcPhase phase) {
    const Clock::time_point now = Clock::now();
    ns_[phase] += std::chrono::duration_cast<std::chrono::nanoseconds>(now - last_).count();
    last_ = now;
  }

  void call_done() { done_ = true; }

  ~TcPhaseTimer() { tc_phase_add(ns_, done_); }

  TcPhaseTimer(const TcPhaseTimer&) = delete;
  TcPhaseTimer& operator=(const TcPhaseTimer&) = delete;

 private:
  Clock::time_point last_;
  int64_t ns_[kNumPhases] = {};
  bool done_ = false;
};

#define TC_PHASE_START() TcPhaseTimer tc_phase_timer
#define TC_PHASE_MARK(phase) tc_phase_timer.mark(phase)
#define TC_PHASE_CALL_DONE() tc_phase_timer.call_done()
#define TC_PHASE_TIMER (&tc_phase_timer)

#else

class TcPhaseTimer;
#define TC_PHASE_START()
#define TC_PHASE_MARK(phase)
#define TC_PHASE_CALL_DONE()
#define TC_PHASE_TIMER nullptr

#endif  // TILECUTE_PHASE_TIMING

// TileLang's T.annotate_l2_hit_ratio({arg: hit_ratio}): the L2 access policy window the call's
// kernels launch with (the launch ABI's l2_window).
struct TcL2Window {
  const char* text;    // "T.annotate_l2_hit_ratio({B: 0.8})", for messages
  void* base;          // the tensor's data pointer; nullptr (None passed for an unused tensor): no window
  int64_t num_bytes;   // element bytes x elements, before the device's persisting-L2 maximum clamps it
  float hit_ratio;
};

// Launches the call's kernels in order on one stream -- the given one, else the TVM FFI
// environment stream of the device -- with the device's primary context current (the caller's
// is restored after), loading the cubin on the device on first use.  `launches`: one per
// kernel of L.kernels.  `timer`: TC_PHASE_TIMER.  `l2_window`: with one, the context's
// persisting-L2 limit is set to its bytes (clamped to the device's maximum) for the launches,
// each launch carries CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW (hits persisting, misses
// streaming), and after them the persisting lines are reset and the previous limit restored.
void tc_launch_kernels(const TcLauncher& L, int device_id, TcStreamArg stream, const TcLaunch* launches,
                       TcPhaseTimer* timer, const TcL2Window* l2_window = nullptr);

// The device's T.sync_grid() barrier word (32 bits of device memory the launcher allocates,
// zeroes once and keeps with the device's module; the barrier leaves it as it found it),
// loading the cubin on the device on first use.
CUdeviceptr tc_grid_barrier(const TcLauncher& L, int device_id);

// The launcher's exports other than the call (TVM FFI safe calls: 0, or -1 with the error
// set): __tilecute_set_cubin(path), __tilecute_ensure_device(device_id), cleanup(), and with
// -DTILECUTE_PHASE_TIMING __tilecute_phase_times(), __tilecute_phase_reset().
int tc_export_set_cubin(const TcLauncher& L, const TVMFFIAny* args, int32_t num_args, const char* name);
int tc_export_ensure_device(const TcLauncher& L, const TVMFFIAny* args, int32_t num_args, const char* name);
int tc_export_cleanup(const TcLauncher& L, int32_t num_args, const char* name);
#ifdef TILECUTE_PHASE_TIMING
int tc_export_phase_times(const TcLauncher& L, int32_t num_args, TVMFFIAny* result, const char* name);
int tc_export_phase_reset(const TcLauncher& L, int32_t num_args, const char* name);
#endif

// Called in a `catch (...)` of an export: the exception being handled becomes the TVM FFI
// error of the call (a TVM FFI error as it is, any other as an InternalError); returns -1.
int tc_set_raised(const TcLauncher& L);

// ---------------------------------------------------------------------------------------------
// Inline: what every call runs.  Each check branches to a cold runtime function on failure,
// so nothing is allocated and no string is built on success.
// ---------------------------------------------------------------------------------------------

constexpr int64_t kTcInt32Min = INT32_MIN;
constexpr int64_t kTcInt32Max = INT32_MAX;
constexpr int64_t kTcMaxGridX = INT32_MAX;
constexpr int64_t kTcMaxGridYZ = 65535;

// -- grid expression helpers (Python semantics: floor division, modulo with the divisor's sign)

inline int64_t tc_floordiv(int64_t a, int64_t b) {
  if (TC_UNLIKELY(b == 0)) tc_fail_grid_division(tc_launcher);
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
  memcpy(&x, &f, sizeof(x));
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
  memcpy(&x, &f, sizeof(x));
  if ((x & 0x7fffffffu) > 0x7f800000u) {
    return static_cast<uint16_t>((x >> 16) | 0x40u);  // NaN stays a quiet NaN
  }
  const uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>((x + rounding) >> 16);
}

// -- argument count, kinds and values

inline void tc_check_arg_count(int32_t num_args) {
  const int n = tc_launcher.num_args;
  if (TC_UNLIKELY(num_args != n && num_args != n + 1)) tc_fail_arg_count(tc_launcher, num_args);
}

inline const DLTensor* tc_tensor_arg(const TVMFFIAny& any, const char* arg) {
  if (any.type_index == kTVMFFIDLTensorPtr) {
    return static_cast<const DLTensor*>(any.v_ptr);
  }
  if (any.type_index == kTVMFFITensor) {
    return TVMFFITensorGetDLTensorPtr(any.v_obj);
  }
  tc_fail_kind(tc_launcher, any, arg, "a tensor");
}

// A tensor argument that no kernel reads or writes: a tensor, or None (nullptr: the kernels get
// the null address and the argument is not checked), as TileLang lets an unused buffer be NULL.
inline const DLTensor* tc_tensor_arg_or_none(const TVMFFIAny& any, const char* arg) {
  if (any.type_index == kTVMFFINone) return nullptr;
  return tc_tensor_arg(any, arg);
}

inline void tc_check_dtype(const DLTensor* t, const char* arg, uint8_t code, uint8_t bits, const char* name) {
  if (TC_UNLIKELY(t->dtype.code != code || t->dtype.bits != bits || t->dtype.lanes != 1)) {
    tc_fail_dtype(tc_launcher, t, arg, name);
  }
}

// A bool tensor: torch's bool (DLPack kDLBool, 8 bits), or any 8-bit integer tensor (int8, uint8),
// as TileLang binds a T.bool buffer; a byte reads as true where it is nonzero.
inline void tc_check_dtype_bool(const DLTensor* t, const char* arg) {
  const bool byte_int = t->dtype.code == kDLInt || t->dtype.code == kDLUInt || t->dtype.code == kDLBool;
  if (TC_UNLIKELY(!byte_int || t->dtype.bits != 8 || t->dtype.lanes != 1)) {
    tc_fail_dtype(tc_launcher, t, arg, "bool (or an 8-bit integer tensor: int8, uint8)");
  }
}

// A packed sub-byte dtype (float4_e2m1fn, two elements a byte): any tensor of 8-bit elements
// (torch's float4_e2m1fn_x2 is 4 bits x 2 lanes; uint8, int8), as TileLang binds one.
inline void tc_check_dtype_bytes(const DLTensor* t, const char* arg, const char* name) {
  if (TC_UNLIKELY(t->dtype.bits * t->dtype.lanes != 8)) tc_fail_dtype(tc_launcher, t, arg, name);
}

// A NULL data pointer passes only for a tensor with no elements (TileLang's "data pointer is
// NULL" check); the loop runs only on the NULL path.
inline void tc_check_data(const DLTensor* t, const char* arg) {
  if (TC_UNLIKELY(t->data == nullptr)) {
    for (int d = 0; d < t->ndim; ++d) {
      if (t->shape[d] == 0) return;
    }
    tc_fail_null_data(tc_launcher, t, arg);
  }
}

inline void tc_check_rank(const DLTensor* t, const char* arg, int rank) {
  if (TC_UNLIKELY(t->ndim != rank)) tc_fail_rank(tc_launcher, t, arg, rank);
}

inline void tc_check_static_dim(int64_t value, int64_t expected, const char* arg, const char* where) {
  if (TC_UNLIKELY(value != expected)) tc_fail_static(tc_launcher, value, expected, arg, where);
}

// The stride of a size-1 dimension never moves the address, so it may be anything.
inline void tc_check_static_stride(int64_t value, int64_t expected, const char* arg, const char* where,
                                   int64_t extent) {
  if (TC_UNLIKELY(value != expected && extent != 1)) tc_fail_static(tc_launcher, value, expected, arg, where);
}

// `int64`: an int64 symbol (TileLang's T.dynamic("n", "int64")), which takes any extent.
inline int64_t tc_bind_symbol(int64_t value, const char* arg, const char* where, const char* symbol,
                              int64_t divisibility, bool int64 = false) {
  if (TC_UNLIKELY(!int64 && (value < kTcInt32Min || value > kTcInt32Max))) {
    tc_fail_int32(tc_launcher, value, arg, where, symbol);
  }
  if (TC_UNLIKELY(divisibility > 1 && value % divisibility != 0)) {
    tc_fail_divisibility(tc_launcher, value, arg, where, symbol, divisibility);
  }
  return value;
}

// A symbol solved from a dim declared `scale * symbol + offset` (TileLang's T.Tensor((n * 4 + 1,), ...)):
// the extent must fit int32 (unless the dim is int64) and be that for some integer symbol >= 0.
inline int64_t tc_solve_symbol(int64_t value, const char* arg, const char* where, const char* symbol,
                               const char* text, int64_t scale, int64_t offset, int64_t divisibility,
                               bool int64 = false) {
  if (TC_UNLIKELY(!int64 && (value < kTcInt32Min || value > kTcInt32Max))) {
    tc_fail_int32(tc_launcher, value, arg, where, text);
  }
  const int64_t rest = value - offset;
  if (TC_UNLIKELY(rest % scale != 0 || rest / scale < 0)) tc_fail_solve(tc_launcher, value, arg, where, symbol, text);
  const int64_t solved = rest / scale;
  if (TC_UNLIKELY(divisibility > 1 && solved % divisibility != 0)) {
    tc_fail_divisibility(tc_launcher, solved, arg, where, symbol, divisibility);
  }
  return solved;
}

// A dim declared as an expression of symbols bound elsewhere; the kernel computes it in int32
// (in int64 where it names an int64 symbol: `int64`).
inline void tc_check_dim_expr(int64_t value, int64_t expected, const char* arg, const char* where, const char* text,
                              bool int64 = false) {
  if (TC_UNLIKELY(value != expected)) tc_fail_dim_expr(tc_launcher, value, expected, arg, where, text);
  if (TC_UNLIKELY(!int64 && (value < kTcInt32Min || value > kTcInt32Max))) {
    tc_fail_int32(tc_launcher, value, arg, where, text);
  }
}

inline void tc_check_symbol(int64_t value, int64_t bound, const char* arg, const char* where, const char* symbol,
                            const char* bound_at) {
  if (TC_UNLIKELY(value != bound)) tc_fail_symbol(tc_launcher, value, bound, arg, where, symbol, bound_at);
}

// A declared stride that names a symbol bound elsewhere (or an expression of such symbols), as
// TileLang's binder checks it: any stride passes where the dim's extent is 1 (the stride never
// moves the address) or where the declared stride is 0 (a later dim is empty).
inline void tc_check_stride_symbol(int64_t value, int64_t bound, const char* arg, const char* where,
                                   const char* symbol, const char* bound_at, int64_t extent) {
  if (TC_UNLIKELY(value != bound && extent != 1 && bound != 0)) {
    tc_fail_symbol(tc_launcher, value, bound, arg, where, symbol, bound_at);
  }
}

inline void tc_check_stride_expr(int64_t value, int64_t expected, const char* arg, const char* where,
                                 const char* text, int64_t extent) {
  if (TC_UNLIKELY(value != expected && extent != 1 && expected != 0)) {
    tc_fail_dim_expr(tc_launcher, value, expected, arg, where, text);
  }
}

// Row-major contiguous: strides[d] == product of shape[d+1:], except where shape[d] == 1.
// A tensor with no elements is contiguous whatever its strides.  The kernel computes the
// strides from the shape in int32, so they must fit it, unless it indexes the tensor with
// 64-bit offsets (`offsets_int64`: an int64 dim, a static shape past int32, wide_offsets).
inline void tc_check_contiguous(const DLTensor* t, const char* arg, bool offsets_int64 = false) {
  if (t->strides == nullptr) return;  // DLPack: NULL strides mean compact row-major
  int64_t expected = 1;
  for (int d = t->ndim - 1; d >= 0; --d) {
    const int64_t extent = t->shape[d];
    if (extent != 1) {
      if (TC_UNLIKELY(t->strides[d] != expected)) {
        tc_fail_contiguous_unless_empty(tc_launcher, t, arg);
        return;
      }
      if (TC_UNLIKELY(!offsets_int64 && expected > kTcInt32Max)) tc_fail_stride_int32(tc_launcher, t, arg, d);
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

inline void tc_check_align(const void* ptr, const char* arg, uintptr_t align) {
  if (TC_UNLIKELY(reinterpret_cast<uintptr_t>(ptr) % align != 0)) tc_fail_align(tc_launcher, ptr, arg, align);
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
  if (TC_UNLIKELY(last > kTcInt32Max)) tc_fail_offsets_int32(tc_launcher, t, arg, last);
}

// int and bool are accepted (a Python bool is an int).
inline int64_t tc_int_arg(const TVMFFIAny& any, const char* arg, const char* dtype, int64_t lo, int64_t hi) {
  if (TC_UNLIKELY(any.type_index != kTVMFFIInt && any.type_index != kTVMFFIBool)) {
    tc_fail_int_kind(tc_launcher, any, arg, dtype);
  }
  const int64_t value = any.v_int64;
  if (TC_UNLIKELY(value < lo || value > hi)) tc_fail_int_range(tc_launcher, value, arg, dtype);
  return value;
}

// A pointer argument (TileLang's T.ptr): a tensor, whose data pointer (data + byte_offset) it
// is (`*tensor` set, for the device checks), an int address, an opaque pointer, or None (the
// null address), as TileLang's backends take one.
inline int64_t tc_pointer_arg(const TVMFFIAny& any, const char* arg, const DLTensor** tensor) {
  switch (any.type_index) {
    case kTVMFFIDLTensorPtr:
    case kTVMFFITensor:
      *tensor = tc_tensor_arg(any, arg);
      return static_cast<int64_t>(reinterpret_cast<uintptr_t>(tc_data_ptr(*tensor)));
    case kTVMFFIInt:
      if (TC_UNLIKELY(any.v_int64 < 0)) tc_fail_address(tc_launcher, any.v_int64, arg);
      return any.v_int64;
    case kTVMFFIOpaquePtr:
      return static_cast<int64_t>(reinterpret_cast<uintptr_t>(any.v_ptr));
    case kTVMFFINone:
      return 0;
    default:
      tc_fail_kind(tc_launcher, any, arg, "a tensor (its data pointer) or an int address");
  }
}

inline void tc_check_address_align(int64_t address, const char* arg, uintptr_t align) {
  if (TC_UNLIKELY(static_cast<uintptr_t>(address) % align != 0)) {
    tc_fail_address_align(tc_launcher, address, arg, align);
  }
}

// float and int are accepted; bool is not.
inline double tc_float_arg(const TVMFFIAny& any, const char* arg) {
  if (any.type_index == kTVMFFIFloat) return any.v_float64;
  if (any.type_index == kTVMFFIInt) return static_cast<double>(any.v_int64);
  tc_fail_kind(tc_launcher, any, arg, "a float");
}

// bool and int are accepted (nonzero is true).
inline bool tc_bool_arg(const TVMFFIAny& any, const char* arg) {
  if (TC_UNLIKELY(any.type_index != kTVMFFIBool && any.type_index != kTVMFFIInt)) {
    tc_fail_kind(tc_launcher, any, arg, "a bool");
  }
  return any.v_int64 != 0;
}

// An int (0 = the default stream) or an opaque pointer is an explicit stream; None or no
// argument means the TVM FFI environment stream.
inline TcStreamArg tc_stream_arg(const TVMFFIAny* args, int32_t num_args) {
  if (num_args == tc_launcher.num_args) return TcStreamArg{false, nullptr};
  const TVMFFIAny& any = args[tc_launcher.num_args];
  switch (any.type_index) {
    case kTVMFFINone:
      return TcStreamArg{false, nullptr};
    case kTVMFFIInt:
      if (any.v_int64 < 0) tc_fail_stream_value(tc_launcher, any.v_int64);
      return TcStreamArg{true, reinterpret_cast<CUstream>(static_cast<uintptr_t>(any.v_int64))};
    case kTVMFFIOpaquePtr:
      return TcStreamArg{true, static_cast<CUstream>(any.v_ptr)};
    default:
      tc_fail_kind(tc_launcher, any, "stream", "an integer CUDA stream handle or None");
  }
}

// -- devices

inline void tc_check_cuda(const DLTensor* t, const char* arg) {
  if (TC_UNLIKELY(t->device.device_type != kDLCUDA)) tc_fail_cuda(tc_launcher, t, arg);
}

inline void tc_check_same_device(const DLTensor* t, const char* arg, int device_id, const char* first) {
  if (TC_UNLIKELY(t->device.device_id != device_id)) tc_fail_same_device(tc_launcher, t, arg, device_id, first);
}

// A pointer argument given as a tensor (`t`; nullptr for an int address), or a tensor argument
// that no kernel uses (`t`; nullptr for None): a CUDA tensor on the launch device, which the
// first tensor argument ('first') fixed.
inline void tc_check_pointer_device(const DLTensor* t, const char* arg, int device_id, const char* first) {
  if (t == nullptr) return;
  tc_check_cuda(t, arg);
  tc_check_same_device(t, arg, device_id, first);
}

// The same with no tensor argument the caller must give: the first tensor given (a tensor
// argument that may be None, a pointer argument's tensor) fixes the launch device (`*device_id`
// < 0 until then).
inline void tc_pointer_device(const DLTensor* t, const char* arg, int* device_id, const char** first) {
  if (t == nullptr) return;
  tc_check_cuda(t, arg);
  if (*device_id < 0) {
    *device_id = t->device.device_id;
    *first = arg;
    return;
  }
  tc_check_same_device(t, arg, *device_id, *first);
}

// -- grids: within the CUDA limits, and a multiple of the cluster

inline void tc_check_grid(int kernel, int64_t x, int64_t y, int64_t z) {
  const TcKernelInfo& info = tc_launcher.kernels[kernel];
  // an extent of 0 is an error, as TileLang's (a launch would run no block, or on a
  // clamped grid one block past the data)
  bool ok = x >= 1 && x <= kTcMaxGridX && y >= 1 && y <= kTcMaxGridYZ && z >= 1 && z <= kTcMaxGridYZ;
  if (ok && info.cluster[0] != 0) {
    ok = x % info.cluster[0] == 0 && y % info.cluster[1] == 0 && z % info.cluster[2] == 0;
  }
  if (TC_UNLIKELY(!ok)) tc_fail_grid(tc_launcher, kernel, x, y, z);
}

// -- TMA descriptors: encoded on every call into a CUtensorMap on the caller's stack, passed to
//    the kernel by value (a __grid_constant__ parameter); the driver is loaded first.

static_assert(sizeof(CUtensorMap) == 128, "a TMA descriptor parameter is 128 bytes");
static_assert(alignof(CUtensorMap) >= 64, "the driver encodes a tensor map only at a 64-byte aligned address");

inline void tc_encode_tma_tiled(const TcLauncher& L, CUtensorMap* desc, const TcTmaGlobal& global,
                                const TcTmaDescriptorInfo& info) {
  cuuint32_t box[kTmaMaxRank] = {};
  cuuint32_t element_strides[kTmaMaxRank] = {};
  for (unsigned i = 0; i < info.rank; ++i) {
    box[i] = info.box[info.rank - 1 - i];
    element_strides[i] = info.element_strides[info.rank - 1 - i];
  }
  const CUresult status =
      tc_cuda_encode_tma_tiled(desc, info.data_type, global.rank, global.address, global.dims, global.strides, box,
                               element_strides, info.interleave, info.swizzle, info.l2_promotion, info.oob_fill);
  if (TC_UNLIKELY(status != CUDA_SUCCESS)) tc_fail_tma_encode(L, "cuTensorMapEncodeTiled", info, status);
}

inline void tc_encode_tma_im2col(const TcLauncher& L, CUtensorMap* desc, const TcTmaGlobal& global,
                                 const TcTmaDescriptorInfo& info) {
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
  const CUresult status = tc_cuda_encode_tma_im2col(
      desc, info.data_type, global.rank, global.address, global.dims, global.strides, lower, upper,
      info.channels_per_pixel, info.pixels_per_column, element_strides, info.interleave, info.swizzle,
      info.l2_promotion, info.oob_fill);
  if (TC_UNLIKELY(status != CUDA_SUCCESS)) tc_fail_tma_encode(L, "cuTensorMapEncodeIm2col", info, status);
}

#pragma GCC visibility pop

#endif  // TILECUTE_LAUNCHER_H_
