// Calls a launcher's exported function in a loop, straight through its TVM FFI C symbol (no
// Python, no TVM FFI function object), and prints the fastest round's nanoseconds per call
// (benchmarks/launcher_cpu.py).  Tensors are DLTensors on cuda:0 that own no memory.
//
//   launcher_call_loop LIB FUNCTION CUBIN CALLS ROUNDS ARG...
//   ARG: t<code>.<bits>:<d0>x<d1>... (a contiguous tensor) | i<int> | f<float> | s (stream 0)
#include <dlfcn.h>
#include <tvm/ffi/c_api.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

using SafeCall = int (*)(void*, const TVMFFIAny*, int32_t, TVMFFIAny*);

int main(int argc, char** argv) {
  if (argc < 6) {
    std::fprintf(stderr, "usage: %s LIB FUNCTION CUBIN CALLS ROUNDS ARG...\n", argv[0]);
    return 2;
  }
  void* library = dlopen(argv[1], RTLD_NOW);
  if (library == nullptr) {
    std::fprintf(stderr, "%s\n", dlerror());
    return 1;
  }
  auto call = reinterpret_cast<SafeCall>(dlsym(library, (std::string("__tvm_ffi_") + argv[2]).c_str()));
  auto set_cubin = reinterpret_cast<SafeCall>(dlsym(library, "__tvm_ffi___tilecute_set_cubin"));
  if (call == nullptr || set_cubin == nullptr) {
    std::fprintf(stderr, "%s: no __tvm_ffi_%s or __tvm_ffi___tilecute_set_cubin\n", argv[1], argv[2]);
    return 1;
  }
  TVMFFIAny result{};
  TVMFFIAny path{};
  path.type_index = kTVMFFIRawStr;
  path.v_c_str = argv[3];
  const long calls = std::atol(argv[4]);
  const int rounds = std::atoi(argv[5]);

  std::vector<TVMFFIAny> args;
  std::vector<std::vector<int64_t>> shapes;
  shapes.reserve(argc);
  std::vector<DLTensor> tensors;
  tensors.reserve(argc);
  uintptr_t address = 0x7f0000000000;
  for (int i = 6; i < argc; ++i) {
    const char* text = argv[i];
    TVMFFIAny arg{};
    if (text[0] == 't') {
      char* end = nullptr;
      DLTensor t{};
      t.dtype.code = static_cast<uint8_t>(std::strtol(text + 1, &end, 10));
      t.dtype.bits = static_cast<uint8_t>(std::strtol(end + 1, &end, 10));
      t.dtype.lanes = 1;
      shapes.emplace_back();
      while (*end == ':' || *end == 'x') shapes.back().push_back(std::strtoll(end + 1, &end, 10));
      t.ndim = static_cast<int32_t>(shapes.back().size());
      t.shape = shapes.back().data();
      t.data = reinterpret_cast<void*>(address);
      address += uintptr_t(1) << 32;
      t.device = DLDevice{kDLCUDA, 0};
      tensors.push_back(t);
      arg.type_index = kTVMFFIDLTensorPtr;
      arg.v_ptr = &tensors.back();
    } else if (text[0] == 'i' || text[0] == 's') {
      arg.type_index = kTVMFFIInt;
      arg.v_int64 = text[0] == 's' ? 0 : std::atoll(text + 1);
    } else if (text[0] == 'f') {
      arg.type_index = kTVMFFIFloat;
      arg.v_float64 = std::atof(text + 1);
    }
    args.push_back(arg);
  }
  const int32_t num_args = static_cast<int32_t>(args.size());
  if (set_cubin(nullptr, &path, 1, &result) != 0 || call(nullptr, args.data(), num_args, &result) != 0) {
    TVMFFIObjectHandle error = nullptr;
    TVMFFIErrorMoveFromRaised(&error);
    std::fprintf(stderr, "the first call failed\n");
    return 1;
  }
  double best = 1e300;
  for (int r = 0; r < rounds; ++r) {
    const auto start = std::chrono::steady_clock::now();
    for (long i = 0; i < calls; ++i) call(nullptr, args.data(), num_args, &result);
    const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
    if (ns / calls < best) best = ns / calls;
  }
  std::printf("%.2f\n", best);
  return 0;
}
