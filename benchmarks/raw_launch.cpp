// The floor for launch overhead: a C++ loop of raw cuLaunchKernel on one of tilecute's
// cubin kernels, with parameters described on the command line.
// Build on the GPU machine: nvcc -O2 -o raw_launch raw_launch.cpp -lcuda
// Usage: raw_launch CUBIN KERNEL N ITERS BURST GRID_X BLOCK_X SIGNATURE
//   SIGNATURE: one letter per kernel parameter, in order: p = pointer to an N-element
//   2-byte buffer (fresh allocation), n = int32 N, i = int32 1, f = float32 1.0
// Prints one JSON line per mode (loop, burst).
#include <cuda.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CHECK(x) do { CUresult r = (x); if (r != CUDA_SUCCESS) { const char* s; cuGetErrorName(r, &s); \
  std::fprintf(stderr, "%s failed: %s\n", #x, s); std::exit(1); } } while (0)

int main(int argc, char** argv) {
  if (argc != 9) {
    std::fprintf(stderr, "usage: raw_launch CUBIN KERNEL N ITERS BURST GRID_X BLOCK_X SIGNATURE\n");
    return 2;
  }
  int n = std::atoi(argv[3]), iters = std::atoi(argv[4]), burst = std::atoi(argv[5]);
  unsigned grid = std::atoi(argv[6]), block = std::atoi(argv[7]);
  const char* sig = argv[8];
  CHECK(cuInit(0));
  CUdevice dev; CHECK(cuDeviceGet(&dev, 0));
  CUcontext ctx; CHECK(cuDevicePrimaryCtxRetain(&ctx, dev)); CHECK(cuCtxSetCurrent(ctx));
  CUmodule mod; CHECK(cuModuleLoad(&mod, argv[1]));
  CUfunction fn; CHECK(cuModuleGetFunction(&fn, mod, argv[2]));
  size_t count = std::strlen(sig);
  std::vector<CUdeviceptr> ptrs(count);
  std::vector<int> ints(count);
  std::vector<float> floats(count);
  std::vector<void*> params(count);
  for (size_t i = 0; i < count; ++i) {
    switch (sig[i]) {
      case 'p': CHECK(cuMemAlloc(&ptrs[i], size_t(n) * 2)); CHECK(cuMemsetD8(ptrs[i], 0, size_t(n) * 2)); params[i] = &ptrs[i]; break;
      case 'n': ints[i] = n; params[i] = &ints[i]; break;
      case 'i': ints[i] = 1; params[i] = &ints[i]; break;
      case 'f': floats[i] = 1.0f; params[i] = &floats[i]; break;
      default: std::fprintf(stderr, "bad signature letter %c\n", sig[i]); return 2;
    }
  }
  CUstream stream; CHECK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  auto launch = [&] { CHECK(cuLaunchKernel(fn, grid, 1, 1, block, 1, 1, 0, stream, params.data(), nullptr)); };
  for (int i = 0; i < 1000; ++i) launch();
  CHECK(cuStreamSynchronize(stream));
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) launch();
  CHECK(cuStreamSynchronize(stream));
  double loop_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / iters;
  // bursts: host time to issue `burst` launches, the queue drained between bursts
  double total = 0; int rounds = 50;
  for (int r = 0; r < rounds; ++r) {
    auto s = std::chrono::steady_clock::now();
    for (int i = 0; i < burst; ++i) launch();
    total += std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - s).count() / burst;
    CHECK(cuStreamSynchronize(stream));
  }
  std::printf("{\"peer\": \"raw cuLaunchKernel (C++)\", \"mode\": \"loop\", \"us_per_call\": %.3f}\n", loop_us);
  std::printf("{\"peer\": \"raw cuLaunchKernel (C++)\", \"mode\": \"burst%d\", \"us_per_call\": %.3f}\n", burst, total / rounds);
  return 0;
}
