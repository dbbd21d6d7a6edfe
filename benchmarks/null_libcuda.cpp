// A libcuda.so.1 that does nothing, for timing a launcher's own CPU work without a GPU
// (benchmarks/launcher_cpu.py): entry points through cuGetProcAddress_v2 only, as the launcher
// asks for them; every call succeeds at once.  One device context, always current, so a
// launch never switches contexts; a launch reads its first parameter and a tiled TMA encode
// writes its descriptor, so neither is free of memory traffic.
#include <cuda.h>

#include <cstring>

namespace {

int g_context, g_module, g_function;
volatile uintptr_t g_sink;

CUresult Init(unsigned) { return CUDA_SUCCESS; }
CUresult ErrorName(CUresult, const char** name) {
  *name = "CUDA_ERROR";
  return CUDA_SUCCESS;
}
CUresult DeviceGet(CUdevice* device, int ordinal) {
  *device = ordinal;
  return CUDA_SUCCESS;
}
CUresult Retain(CUcontext* context, CUdevice) {
  *context = reinterpret_cast<CUcontext>(&g_context);
  return CUDA_SUCCESS;
}
CUresult Release(CUdevice) { return CUDA_SUCCESS; }
CUresult GetCurrent(CUcontext* context) {
  *context = reinterpret_cast<CUcontext>(&g_context);
  return CUDA_SUCCESS;
}
CUresult SetCurrent(CUcontext) { return CUDA_SUCCESS; }
CUresult CtxGetDevice(CUdevice* device) {
  *device = 0;
  return CUDA_SUCCESS;
}
CUresult Load(CUmodule* module, const void*) {
  *module = reinterpret_cast<CUmodule>(&g_module);
  return CUDA_SUCCESS;
}
CUresult Unload(CUmodule) { return CUDA_SUCCESS; }
CUresult GetFunction(CUfunction* function, CUmodule, const char*) {
  *function = reinterpret_cast<CUfunction>(&g_function);
  return CUDA_SUCCESS;
}
CUresult SetAttribute(CUfunction, CUfunction_attribute, int) { return CUDA_SUCCESS; }
CUresult DeviceAttribute(int* value, CUdevice_attribute attribute, CUdevice) {
  // an H100's: its SMs, and the shared memory a block may opt in to
  *value = attribute == CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT ? 132 : 232448;
  return CUDA_SUCCESS;
}
CUresult Launch(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                void** params, void**) {
  g_sink += params != nullptr ? reinterpret_cast<uintptr_t>(params[0]) : 0;
  return CUDA_SUCCESS;
}
CUresult LaunchEx(const CUlaunchConfig*, CUfunction, void** params, void**) {
  g_sink += params != nullptr ? reinterpret_cast<uintptr_t>(params[0]) : 0;
  return CUDA_SUCCESS;
}
CUresult EncodeTiled(CUtensorMap* map, CUtensorMapDataType, cuuint32_t, void* address, const cuuint64_t*,
                     const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                     CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill) {
  std::memset(map, 0, sizeof(*map));
  std::memcpy(map, &address, sizeof(address));
  return CUDA_SUCCESS;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) CUresult cuGetProcAddress_v2(
    const char* symbol, void** fn, int, cuuint64_t, CUdriverProcAddressQueryResult* found) {
  static const struct {
    const char* name;
    void* fn;
  } table[] = {
      {"cuInit", reinterpret_cast<void*>(&Init)},
      {"cuGetErrorName", reinterpret_cast<void*>(&ErrorName)},
      {"cuGetErrorString", reinterpret_cast<void*>(&ErrorName)},
      {"cuDeviceGet", reinterpret_cast<void*>(&DeviceGet)},
      {"cuDevicePrimaryCtxRetain", reinterpret_cast<void*>(&Retain)},
      {"cuDevicePrimaryCtxRelease", reinterpret_cast<void*>(&Release)},
      {"cuCtxGetCurrent", reinterpret_cast<void*>(&GetCurrent)},
      {"cuCtxSetCurrent", reinterpret_cast<void*>(&SetCurrent)},
      {"cuCtxGetDevice", reinterpret_cast<void*>(&CtxGetDevice)},
      {"cuModuleLoadData", reinterpret_cast<void*>(&Load)},
      {"cuModuleUnload", reinterpret_cast<void*>(&Unload)},
      {"cuModuleGetFunction", reinterpret_cast<void*>(&GetFunction)},
      {"cuFuncSetAttribute", reinterpret_cast<void*>(&SetAttribute)},
      {"cuDeviceGetAttribute", reinterpret_cast<void*>(&DeviceAttribute)},
      {"cuLaunchKernel", reinterpret_cast<void*>(&Launch)},
      {"cuLaunchKernelEx", reinterpret_cast<void*>(&LaunchEx)},
      {"cuTensorMapEncodeTiled", reinterpret_cast<void*>(&EncodeTiled)},
  };
  for (const auto& entry : table) {
    if (std::strcmp(entry.name, symbol) == 0) {
      *fn = entry.fn;
      if (found != nullptr) *found = CU_GET_PROC_ADDRESS_SUCCESS;
      return CUDA_SUCCESS;
    }
  }
  *fn = nullptr;
  if (found != nullptr) *found = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  return CUDA_ERROR_NOT_FOUND;
}
