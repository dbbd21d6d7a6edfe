// Calls a kernel of an exported tilecute package from C++: no Python is linked or run.
//
//   tilecute export examples/export/kernels.py -o dist --arch sm_90a,sm_80 --name tcdemo
//   g++ -std=c++17 -O2 examples/export/main.cpp -o vector_add_demo -Idist/tcdemo/include
//       $(python -m tvm_ffi.config --cxxflags --ldflags --libs) -I/usr/local/cuda/include
//       -L/usr/local/cuda/lib64 -lcudart -Wl,-rpath,$(python -m tvm_ffi.config --libdir)
//   ./vector_add_demo dist/tcdemo [N]
//
// (the g++ command is one line; the tvm_ffi flags come from the Python environment that
// has apache-tvm-ffi, but the program itself loads only libtvm_ffi.so and the launcher)
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <exception>
#include <vector>

#include "tcdemo.h"

#define CHECK_CUDA(call)                                                            \
  do {                                                                              \
    cudaError_t status_ = (call);                                                   \
    if (status_ != cudaSuccess) {                                                   \
      std::fprintf(stderr, "%s failed: %s\n", #call, cudaGetErrorString(status_)); \
      return 1;                                                                     \
    }                                                                               \
  } while (0)

static DLTensor vector_of(float* data, int64_t* shape) {
  DLTensor t{};
  t.data = data;
  t.device = DLDevice{kDLCUDA, 0};
  t.ndim = 1;
  t.dtype = DLDataType{kDLFloat, 32, 1};
  t.shape = shape;
  t.strides = nullptr;  // contiguous
  t.byte_offset = 0;
  return t;
}

int main(int argc, char** argv) {
  const std::string package_dir = argc > 1 ? argv[1] : "dist/tcdemo";
  int64_t n = argc > 2 ? std::atoll(argv[2]) : 1000003;

  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  const std::string arch = tcdemo::pick_arch(prop.major, prop.minor);
  if (arch.empty()) {
    std::fprintf(stderr, "the package has no cubin for sm_%d%d\n", prop.major, prop.minor);
    return 1;
  }

  std::vector<float> a(n), b(n), c(n);
  for (int64_t i = 0; i < n; ++i) a[i] = 0.5f * i, b[i] = 1.0f - i;
  float *da = nullptr, *db = nullptr, *dc = nullptr;
  CHECK_CUDA(cudaMalloc(&da, n * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&db, n * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&dc, n * sizeof(float)));
  CHECK_CUDA(cudaMemcpy(da, a.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(db, b.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreate(&stream));

  int64_t shape[1] = {n};
  DLTensor A = vector_of(da, shape), B = vector_of(db, shape), C = vector_of(dc, shape);
  try {
    tcdemo::vector_add add(package_dir, arch);
    add(&A, &B, &C, stream);
  } catch (const std::exception& e) {  // tvm::ffi::Error: a bad argument, a missing file
    std::fprintf(stderr, "vector_add failed: %s\n", e.what());
    return 1;
  }
  CHECK_CUDA(cudaStreamSynchronize(stream));
  CHECK_CUDA(cudaMemcpy(c.data(), dc, n * sizeof(float), cudaMemcpyDeviceToHost));
  for (int64_t i = 0; i < n; ++i) {
    if (std::fabs(c[i] - (a[i] + b[i])) > 1e-6f * std::fabs(a[i] + b[i]) + 1e-6f) {
      std::fprintf(stderr, "mismatch at %lld: %f vs %f\n", (long long)i, c[i], a[i] + b[i]);
      return 1;
    }
  }
  std::printf("vector_add from %s (%s): %lld elements ok\n", package_dir.c_str(), arch.c_str(),
              (long long)n);
  cudaFree(da);
  cudaFree(db);
  cudaFree(dc);
  cudaStreamDestroy(stream);
  return 0;
}
