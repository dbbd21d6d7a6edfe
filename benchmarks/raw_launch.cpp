// The floor for launch overhead: a C++ loop of raw cuLaunchKernel on a cubin's kernel
// whose parameters are (ptr, ptr, ptr, int32) -- tilecute's vector_add.
// Build on the GPU machine: nvcc -O2 -o raw_launch raw_launch.cpp -lcuda
// Usage: raw_launch CUBIN KERNEL N ITERS BURST  -> prints one JSON line per mode.
#include <cuda.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>

#define CHECK(x) do { CUresult r = (x); if (r != CUDA_SUCCESS) { const char* s; cuGetErrorName(r, &s); \
  std::fprintf(stderr, "%s failed: %s\n", #x, s); std::exit(1); } } while (0)

int main(int argc, char** argv) {
  if (argc != 6) { std::fprintf(stderr, "usage: raw_launch CUBIN KERNEL N ITERS BURST\n"); return 2; }
  int n = std::atoi(argv[3]), iters = std::atoi(argv[4]), burst = std::atoi(argv[5]);
  CHECK(cuInit(0));
  CUdevice dev; CHECK(cuDeviceGet(&dev, 0));
  CUcontext ctx; CHECK(cuDevicePrimaryCtxRetain(&ctx, dev)); CHECK(cuCtxSetCurrent(ctx));
  CUmodule mod; CHECK(cuModuleLoad(&mod, argv[1]));
  CUfunction fn; CHECK(cuModuleGetFunction(&fn, mod, argv[2]));
  CUdeviceptr a, b, c; size_t bytes = size_t(n) * 2;
  CHECK(cuMemAlloc(&a, bytes)); CHECK(cuMemAlloc(&b, bytes)); CHECK(cuMemAlloc(&c, bytes));
  CUstream stream; CHECK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  void* params[] = {&a, &b, &c, &n};
  unsigned grid = (n + 1023) / 1024;
  auto launch = [&] { CHECK(cuLaunchKernel(fn, grid, 1, 1, 128, 1, 1, 0, stream, params, nullptr)); };
  for (int i = 0; i < 1000; ++i) launch();
  CHECK(cuStreamSynchronize(stream));
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) launch();
  CHECK(cuStreamSynchronize(stream));
  double loop_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / iters;
  // bursts: host time to issue `burst` launches, the queue drained between bursts
  double best = 1e30, total = 0; int rounds = 50;
  for (int r = 0; r < rounds; ++r) {
    auto s = std::chrono::steady_clock::now();
    for (int i = 0; i < burst; ++i) launch();
    double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - s).count() / burst;
    CHECK(cuStreamSynchronize(stream));
    total += us; if (us < best) best = us;
  }
  std::printf("{\"peer\": \"raw cuLaunchKernel (C++)\", \"mode\": \"loop\", \"us_per_call\": %.3f}\n", loop_us);
  std::printf("{\"peer\": \"raw cuLaunchKernel (C++)\", \"mode\": \"burst%d\", \"us_per_call\": %.3f}\n", burst, total / rounds);
  return 0;
}
