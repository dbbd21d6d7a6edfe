// The floor for launch overhead: a C++ loop of raw cuLaunchKernel on one of tilecute's
// cubin kernels, with its parameters described on the command line.
// Build on the GPU machine: nvcc -O2 -o raw_launch raw_launch.cpp -lcuda
//   (or g++ -O2 -std=c++17 -I/usr/local/cuda/include raw_launch.cpp -lcuda)
// Usage: raw_launch CUBIN KERNEL ITERS BURST GRID BLOCK SMEM PARAM...
//   GRID, BLOCK: X,Y,Z.  SMEM: dynamic shared memory in bytes.
//   PARAM: one per kernel parameter, in the cubin's order:
//     p:BYTES        pointer to a fresh, zeroed device buffer of BYTES bytes
//     i:VALUE        int32
//     f:VALUE        float32
//     t:K:SHAPE:BOX[:L2]  a tiled float16 TMA descriptor (CUtensorMap, passed by value)
//                    over the buffer of parameter K (a p:), a contiguous row-major tensor of
//                    SHAPE (extents joined by 'x', tensor axis order: 64x64), box BOX (the
//                    same form), L2 promotion L2 bytes (0, 64, 128 or 256; default 0); no
//                    interleave or swizzle, zero out-of-bounds fill: what tilecute's launcher
//                    encodes for such a TmaSpec
// Prints one JSON line per (peer, mode): modes "loop" (ITERS launches, then one
// synchronize) and "burstBURST" (BURST launches timed, the queue drained between bursts,
// 50 rounds).  With descriptors there are two peers: the first encodes every descriptor
// with cuTensorMapEncodeTiled before every launch, as tilecute's launcher does (the
// baseline for it); the second encodes them once, outside the loop.
#include <cuda.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#define CHECK(x) do { CUresult r = (x); if (r != CUDA_SUCCESS) { const char* s = "?"; cuGetErrorName(r, &s); \
  std::fprintf(stderr, "%s failed: %s\n", #x, s); std::exit(1); } } while (0)

[[noreturn]] static void usage(const char* why) {
  std::fprintf(stderr, "raw_launch: %s\nusage: raw_launch CUBIN KERNEL ITERS BURST GRID BLOCK SMEM PARAM...\n", why);
  std::exit(2);
}

// "a,b,c" or "axb" -> numbers
static std::vector<long long> numbers(const std::string& text, char sep) {
  std::vector<long long> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(sep, start);
    if (end == std::string::npos) end = text.size();
    std::string part = text.substr(start, end - start);
    char* rest = nullptr;
    long long v = std::strtoll(part.c_str(), &rest, 10);
    if (part.empty() || *rest != '\0') usage(("bad number list: " + text).c_str());
    out.push_back(v);
    start = end + 1;
  }
  return out;
}

struct Tma {          // one descriptor: its parameter slot and how to encode it
  size_t param;       // index of its CUtensorMap in `maps`
  size_t source;      // the p: parameter it covers
  cuuint32_t rank;
  cuuint64_t dims[5];      // TMA order: dims[0] is the tensor's last axis
  cuuint64_t strides[4];   // bytes
  cuuint32_t box[5];
  cuuint32_t element_strides[5];
  CUtensorMapL2promotion l2;
};

int main(int argc, char** argv) {
  if (argc < 8) usage("too few arguments");
  const char* cubin = argv[1];
  const char* kernel = argv[2];
  const int iters = std::atoi(argv[3]), burst = std::atoi(argv[4]);
  std::vector<long long> grid = numbers(argv[5], ','), block = numbers(argv[6], ',');
  if (grid.size() != 3 || block.size() != 3) usage("GRID and BLOCK are X,Y,Z");
  const unsigned smem = static_cast<unsigned>(std::atoll(argv[7]));
  const size_t count = static_cast<size_t>(argc - 8);

  CHECK(cuInit(0));
  CUdevice dev; CHECK(cuDeviceGet(&dev, 0));
  CUcontext ctx; CHECK(cuDevicePrimaryCtxRetain(&ctx, dev)); CHECK(cuCtxSetCurrent(ctx));
  CUmodule mod; CHECK(cuModuleLoad(&mod, cubin));
  CUfunction fn; CHECK(cuModuleGetFunction(&fn, mod, kernel));
  if (smem > 48 * 1024) CHECK(cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, int(smem)));

  std::vector<CUdeviceptr> ptrs(count);
  std::vector<int32_t> ints(count);
  std::vector<float> floats(count);
  std::vector<CUtensorMap> maps(count);  // alignas(64) type: C++17 allocates it aligned
  std::vector<void*> params(count);
  std::vector<Tma> tmas;
  for (size_t i = 0; i < count; ++i) {
    const std::string spec = argv[8 + i];
    if (spec.size() < 3 || spec[1] != ':') usage(("bad parameter: " + spec).c_str());
    const std::string value = spec.substr(2);
    switch (spec[0]) {
      case 'p': {
        const size_t bytes = static_cast<size_t>(std::atoll(value.c_str()));
        CHECK(cuMemAlloc(&ptrs[i], bytes));
        CHECK(cuMemsetD8(ptrs[i], 0, bytes));
        params[i] = &ptrs[i];
        break;
      }
      case 'i': ints[i] = static_cast<int32_t>(std::atoll(value.c_str())); params[i] = &ints[i]; break;
      case 'f': floats[i] = std::strtof(value.c_str(), nullptr); params[i] = &floats[i]; break;
      case 't': {
        const size_t c1 = value.find(':'), c2 = value.find(':', c1 + 1);
        if (c1 == std::string::npos || c2 == std::string::npos) usage(("bad descriptor: " + spec).c_str());
        const size_t c3 = value.find(':', c2 + 1);  // optional :L2
        Tma t = {};
        t.param = i;
        t.source = static_cast<size_t>(std::atoll(value.substr(0, c1).c_str()));
        std::vector<long long> shape = numbers(value.substr(c1 + 1, c2 - c1 - 1), 'x');
        std::vector<long long> box = numbers(value.substr(c2 + 1, c3 == std::string::npos ? std::string::npos : c3 - c2 - 1), 'x');
        const long long l2 = c3 == std::string::npos ? 0 : std::atoll(value.substr(c3 + 1).c_str());
        switch (l2) {
          case 0: t.l2 = CU_TENSOR_MAP_L2_PROMOTION_NONE; break;
          case 64: t.l2 = CU_TENSOR_MAP_L2_PROMOTION_L2_64B; break;
          case 128: t.l2 = CU_TENSOR_MAP_L2_PROMOTION_L2_128B; break;
          case 256: t.l2 = CU_TENSOR_MAP_L2_PROMOTION_L2_256B; break;
          default: usage(("bad L2 promotion: " + spec).c_str());
        }
        if (t.source >= i || argv[8 + t.source][0] != 'p') {
          usage(("descriptor source is not an earlier p: " + spec).c_str());
        }
        if (shape.empty() || shape.size() > 5 || box.size() != shape.size()) {
          usage(("bad descriptor rank: " + spec).c_str());
        }
        t.rank = static_cast<cuuint32_t>(shape.size());
        uint64_t stride = 2;  // float16
        for (cuuint32_t d = 0; d < t.rank; ++d) {
          const size_t axis = t.rank - 1 - d;  // tensor axis of TMA dimension d
          t.dims[d] = static_cast<cuuint64_t>(shape[axis]);
          t.box[d] = static_cast<cuuint32_t>(box[axis]);
          t.element_strides[d] = 1;
          if (d > 0) t.strides[d - 1] = stride;
          stride *= t.dims[d];
        }
        tmas.push_back(t);
        params[i] = &maps[i];
        break;
      }
      default: usage(("bad parameter letter: " + spec).c_str());
    }
  }
  auto encode = [&] {
    for (const Tma& t : tmas) {
      CHECK(cuTensorMapEncodeTiled(&maps[t.param], CU_TENSOR_MAP_DATA_TYPE_FLOAT16, t.rank,
                                   reinterpret_cast<void*>(ptrs[t.source]), t.dims, t.strides, t.box,
                                   t.element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                                   t.l2, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
    }
  };
  CUstream stream; CHECK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  auto launch = [&] {
    CHECK(cuLaunchKernel(fn, unsigned(grid[0]), unsigned(grid[1]), unsigned(grid[2]), unsigned(block[0]),
                         unsigned(block[1]), unsigned(block[2]), smem, stream, params.data(), nullptr));
  };

  auto measure = [&](const std::string& peer, bool encode_per_call) {
    auto call = [&] {
      if (encode_per_call) encode();
      launch();
    };
    encode();
    for (int i = 0; i < 1000; ++i) call();
    CHECK(cuStreamSynchronize(stream));
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) call();
    CHECK(cuStreamSynchronize(stream));
    const double loop_us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / iters;
    // bursts: host time to issue `burst` launches, the queue drained between bursts
    double total = 0;
    const int rounds = 50;
    for (int r = 0; r < rounds; ++r) {
      auto s = std::chrono::steady_clock::now();
      for (int i = 0; i < burst; ++i) call();
      total += std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - s).count() / burst;
      CHECK(cuStreamSynchronize(stream));
    }
    std::printf("{\"peer\": \"%s\", \"mode\": \"loop\", \"us_per_call\": %.3f}\n", peer.c_str(), loop_us);
    std::printf("{\"peer\": \"%s\", \"mode\": \"burst%d\", \"us_per_call\": %.3f}\n", peer.c_str(), burst,
                total / rounds);
    std::fflush(stdout);
  };

  if (tmas.empty()) {
    measure("raw cuLaunchKernel (C++)", false);
  } else {
    const std::string n = std::to_string(tmas.size());
    measure("raw cuLaunchKernel (C++), " + n + " cuTensorMapEncodeTiled per call", true);
    measure("raw cuLaunchKernel (C++), " + n + " descriptors encoded once, outside the loop", false);
  }
  return 0;
}
