// Linked together with libcuda.cpp, whose cuGetProcAddress_v2 is renamed at compile time
// (-DcuGetProcAddress_v2=fake_base_cuGetProcAddress_v2): this one forwards every request to it
// (which logs the request) and answers the two tensor-map entry points itself.  A descriptor
// it encodes holds {"TMA", encode number, global address} in its first three words.
#include <cuda.h>

#include <cstdint>
#include <cstring>
#include <sstream>
#include <string>

extern "C" CUresult fake_base_cuGetProcAddress_v2(const char* symbol, void** pfn, int version, cuuint64_t flags,
                                                  CUdriverProcAddressQueryResult* status);

namespace {

std::string g_tma_log;
uint64_t g_encodes = 0;
int g_fail_next_encode = CUDA_SUCCESS;

template <typename T>
void list(std::ostringstream& os, const char* key, const T* values, unsigned n) {
  os << " " << key << "=";
  for (unsigned i = 0; i < n; ++i) os << (i == 0 ? "" : ",") << static_cast<long long>(values[i]);
}

// Logs the common arguments; writes a descriptor {"TMA", encode number, global address}.
CUresult finish(std::ostringstream& os, CUtensorMap* map, void* address, CUtensorMapInterleave interleave,
                CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob) {
  os << " interleave=" << interleave << " swizzle=" << swizzle << " l2=" << l2 << " oob=" << oob;
  g_tma_log += os.str() + "\n";
  if (reinterpret_cast<uintptr_t>(map) % 64 != 0) return CUDA_ERROR_INVALID_VALUE;  // the real rule
  if (g_fail_next_encode != CUDA_SUCCESS) {
    const int status = g_fail_next_encode;
    g_fail_next_encode = CUDA_SUCCESS;
    return static_cast<CUresult>(status);
  }
  std::memset(map, 0, sizeof(*map));
  map->opaque[0] = 0x414d54;  // "TMA"
  map->opaque[1] = ++g_encodes;
  map->opaque[2] = reinterpret_cast<uintptr_t>(address);
  return CUDA_SUCCESS;
}

CUresult fake_cuTensorMapEncodeTiled(CUtensorMap* map, CUtensorMapDataType type, cuuint32_t rank, void* address,
                                     const cuuint64_t* dims, const cuuint64_t* strides, const cuuint32_t* box,
                                     const cuuint32_t* element_strides, CUtensorMapInterleave interleave,
                                     CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2,
                                     CUtensorMapFloatOOBfill oob) {
  std::ostringstream os;
  os << "tiled type=" << type << " rank=" << rank << " address=" << reinterpret_cast<uintptr_t>(address);
  list(os, "dims", dims, rank);
  list(os, "strides", strides, rank - 1);
  list(os, "box", box, rank);
  list(os, "element_strides", element_strides, rank);
  return finish(os, map, address, interleave, swizzle, l2, oob);
}

CUresult fake_cuTensorMapEncodeIm2col(CUtensorMap* map, CUtensorMapDataType type, cuuint32_t rank, void* address,
                                      const cuuint64_t* dims, const cuuint64_t* strides, const int* lower,
                                      const int* upper, cuuint32_t channels, cuuint32_t pixels,
                                      const cuuint32_t* element_strides, CUtensorMapInterleave interleave,
                                      CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2,
                                      CUtensorMapFloatOOBfill oob) {
  std::ostringstream os;
  os << "im2col type=" << type << " rank=" << rank << " address=" << reinterpret_cast<uintptr_t>(address);
  list(os, "dims", dims, rank);
  list(os, "strides", strides, rank - 1);
  list(os, "lower", lower, rank - 2);
  list(os, "upper", upper, rank - 2);
  os << " channels=" << channels << " pixels=" << pixels;
  list(os, "element_strides", element_strides, rank);
  return finish(os, map, address, interleave, swizzle, l2, oob);
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int version,
                                                                     cuuint64_t flags,
                                                                     CUdriverProcAddressQueryResult* status) {
  const CUresult found = fake_base_cuGetProcAddress_v2(symbol, pfn, version, flags, status);
  void* own = nullptr;
  if (std::strcmp(symbol, "cuTensorMapEncodeTiled") == 0) own = reinterpret_cast<void*>(&fake_cuTensorMapEncodeTiled);
  if (std::strcmp(symbol, "cuTensorMapEncodeIm2col") == 0) own = reinterpret_cast<void*>(&fake_cuTensorMapEncodeIm2col);
  if (own == nullptr) return found;
  *pfn = own;
  if (status != nullptr) *status = CU_GET_PROC_ADDRESS_SUCCESS;
  return CUDA_SUCCESS;
}

__attribute__((visibility("default"))) const char* fake_tma_log() { return g_tma_log.c_str(); }
__attribute__((visibility("default"))) void fake_clear_tma_log() { g_tma_log.clear(); }
__attribute__((visibility("default"))) void fake_fail_next_encode(int result) { g_fail_next_encode = result; }

}  // extern "C"
