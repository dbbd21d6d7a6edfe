// libcuda's own entry points, as benchmarks/raw_launch.cpp links them (cuda.h maps cuMemAlloc
// and cuMemsetD8 to their _v2 symbols on both sides).  Modules come from a text "cubin"
// ("kernel <name> <param sizes...>" lines); at exit it prints to stderr how many encodes and
// launches it saw and each distinct encode and launch line, with the parameter bytes.
#include <cuda.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace {
struct Function { std::string name; std::vector<int> sizes; };
std::map<std::string, Function> g_functions;
std::map<std::string, long> g_encodes, g_launches;
long g_encode_count = 0, g_launch_count = 0;
uint64_t g_next_alloc = 0x100000;

template <typename T>
void list(std::ostringstream& os, const char* key, const T* values, unsigned n) {
  os << " " << key << "=";
  for (unsigned i = 0; i < n; ++i) os << (i == 0 ? "" : ",") << static_cast<long long>(values[i]);
}

struct Report {
  ~Report() {
    std::fprintf(stderr, "encodes %ld\nlaunches %ld\n", g_encode_count, g_launch_count);
    for (auto& [line, n] : g_encodes) std::fprintf(stderr, "%s count=%ld\n", line.c_str(), n);
    for (auto& [line, n] : g_launches) std::fprintf(stderr, "%s count=%ld\n", line.c_str(), n);
  }
} g_report;
}  // namespace

extern "C" {
CUresult cuInit(unsigned) { return CUDA_SUCCESS; }
CUresult cuGetErrorName(CUresult, const char** s) { *s = "FAKE_ERROR"; return CUDA_SUCCESS; }
CUresult cuDeviceGet(CUdevice* d, int ordinal) { *d = ordinal; return CUDA_SUCCESS; }
CUresult cuDevicePrimaryCtxRetain(CUcontext* c, CUdevice) {
  *c = reinterpret_cast<CUcontext>(0x10);
  return CUDA_SUCCESS;
}
CUresult cuCtxSetCurrent(CUcontext) { return CUDA_SUCCESS; }
CUresult cuModuleLoad(CUmodule* m, const char* path) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream is(line);
    std::string kind;
    Function f;
    is >> kind >> f.name;
    for (int size; is >> size;) f.sizes.push_back(size);
    if (kind == "kernel") g_functions[f.name] = f;
  }
  *m = reinterpret_cast<CUmodule>(0x20);
  return g_functions.empty() ? CUDA_ERROR_INVALID_IMAGE : CUDA_SUCCESS;
}
CUresult cuModuleGetFunction(CUfunction* f, CUmodule, const char* name) {
  auto it = g_functions.find(name);
  if (it == g_functions.end()) return CUDA_ERROR_NOT_FOUND;
  *f = reinterpret_cast<CUfunction>(&it->second);
  return CUDA_SUCCESS;
}
CUresult cuFuncSetAttribute(CUfunction, CUfunction_attribute, int) { return CUDA_SUCCESS; }
CUresult cuMemAlloc(CUdeviceptr* p, size_t bytes) {
  *p = g_next_alloc;
  g_next_alloc += (bytes + 0xfffff) & ~size_t(0xfffff);
  return CUDA_SUCCESS;
}
CUresult cuMemsetD8(CUdeviceptr, unsigned char, size_t) { return CUDA_SUCCESS; }
CUresult cuStreamCreate(CUstream* s, unsigned) { *s = reinterpret_cast<CUstream>(0x30); return CUDA_SUCCESS; }
CUresult cuStreamSynchronize(CUstream) { return CUDA_SUCCESS; }
CUresult cuTensorMapEncodeTiled(CUtensorMap* map, CUtensorMapDataType type, cuuint32_t rank, void* address,
                                const cuuint64_t* dims, const cuuint64_t* strides, const cuuint32_t* box,
                                const cuuint32_t* element_strides, CUtensorMapInterleave interleave,
                                CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob) {
  std::ostringstream os;
  os << "tiled type=" << type << " rank=" << rank << " address=" << reinterpret_cast<uintptr_t>(address);
  list(os, "dims", dims, rank);
  list(os, "strides", strides, rank - 1);
  list(os, "box", box, rank);
  list(os, "element_strides", element_strides, rank);
  os << " interleave=" << interleave << " swizzle=" << swizzle << " l2=" << l2 << " oob=" << oob;
  ++g_encodes[os.str()];
  ++g_encode_count;
  if (reinterpret_cast<uintptr_t>(map) % 64 != 0) return CUDA_ERROR_INVALID_VALUE;  // the real rule
  std::memset(map, 0, sizeof(*map));
  map->opaque[0] = 0x414d54;  // "TMA"
  map->opaque[2] = reinterpret_cast<uintptr_t>(address);
  return CUDA_SUCCESS;
}
CUresult cuLaunchKernel(CUfunction handle, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                        unsigned bz, unsigned smem, CUstream stream, void** params, void** extra) {
  auto* f = reinterpret_cast<Function*>(handle);
  std::ostringstream os;
  os << "launch " << f->name << " grid=" << gx << "," << gy << "," << gz << " block=" << bx << "," << by << ","
     << bz << " smem=" << smem << " stream=" << reinterpret_cast<uintptr_t>(stream) << " extra=" << (extra != nullptr)
     << " params=";
  for (size_t i = 0; i < f->sizes.size(); ++i) {
    const auto* bytes = static_cast<const unsigned char*>(params[i]);
    char hex[3];
    os << (i == 0 ? "" : ",");
    for (int b = 0; b < f->sizes[i]; ++b) {
      std::snprintf(hex, sizeof(hex), "%02x", bytes[b]);
      os << hex;
    }
  }
  ++g_launches[os.str()];
  ++g_launch_count;
  return CUDA_SUCCESS;
}
}  // extern "C"
