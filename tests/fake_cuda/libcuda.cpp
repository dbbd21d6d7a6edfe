// A stand-in for libcuda.so.1: two devices, primary contexts with retain counts, a
// thread-local current context, modules parsed from a text "cubin" ("kernel <name>
// <param sizes...>" lines), and a log of attributes and launches with the parameter bytes.
// Entry points are handed out by cuGetProcAddress_v2 only, as the launcher asks for them; the
// fake_* exports at the end let a test steer and read the fake (fake_cuda.open_driver).
// For T.annotate_l2_hit_ratio launchers: a persisting-L2 limit per context (cuCtxGetLimit /
// cuCtxSetLimit, logged), cuCtxResetPersistingL2Cache (logged), a device maximum of
// fake_set_max_persisting_l2(n) bytes (1 MiB unless set), and each launch's access policy window.
// For T.sync_grid() launchers: device memory (cuMemAlloc hands out fake addresses, cuMemsetD32 and
// cuMemFree are logged), 132 SMs, and fake_set_blocks_per_sm(n) blocks per SM for every kernel.
// FAKE_CUDA_LOAD_DELAY_MS=<ms> makes device 0's module loads that slow.
#include <cuda.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <thread>
#include <sstream>
#include <string>
#include <vector>

namespace {

constexpr int kDevices = 2;
struct FakeContext {
  int device;
};
FakeContext g_contexts[kDevices] = {{0}, {1}};
int g_retains[kDevices] = {0, 0};
thread_local CUcontext g_current = nullptr;

struct FakeFunction {
  std::string name;
  std::vector<int> sizes;
  CUcontext context;
};
struct FakeModule {
  CUcontext context;
  std::map<std::string, FakeFunction> functions;
};

int g_modules_live = 0;
int g_modules_loaded = 0;
int g_init_result = CUDA_SUCCESS;
int g_fail_next_launch = CUDA_SUCCESS;
int g_blocks_per_sm = 1;
int g_max_persisting_l2 = 1 << 20;            // bytes: CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE
size_t g_persisting_limit[kDevices] = {0, 0};  // CU_LIMIT_PERSISTING_L2_CACHE_SIZE per context
uintptr_t g_next_address = 0x7000000;
std::string g_requests;  // "<symbol> <version> <flags>" for every cuGetProcAddress request
std::string g_log;

int device_of(CUcontext context) {
  for (int d = 0; d < kDevices; ++d) {
    if (context == reinterpret_cast<CUcontext>(&g_contexts[d])) return d;
  }
  return -1;
}

CUresult fake_cuInit(unsigned int) { return static_cast<CUresult>(g_init_result); }

CUresult fake_cuGetErrorName(CUresult error, const char** name) {
  switch (error) {
    case CUDA_SUCCESS: *name = "CUDA_SUCCESS"; return CUDA_SUCCESS;
    case CUDA_ERROR_NO_DEVICE: *name = "CUDA_ERROR_NO_DEVICE"; return CUDA_SUCCESS;
    case CUDA_ERROR_INVALID_DEVICE: *name = "CUDA_ERROR_INVALID_DEVICE"; return CUDA_SUCCESS;
    case CUDA_ERROR_INVALID_CONTEXT: *name = "CUDA_ERROR_INVALID_CONTEXT"; return CUDA_SUCCESS;
    case CUDA_ERROR_NOT_FOUND: *name = "CUDA_ERROR_NOT_FOUND"; return CUDA_SUCCESS;
    case CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES: *name = "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"; return CUDA_SUCCESS;
    default: *name = nullptr; return CUDA_ERROR_INVALID_VALUE;
  }
}

CUresult fake_cuGetErrorString(CUresult, const char** text) {
  *text = "fake driver error";
  return CUDA_SUCCESS;
}

CUresult fake_cuDeviceGet(CUdevice* device, int ordinal) {
  if (ordinal < 0 || ordinal >= kDevices) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

CUresult fake_cuDevicePrimaryCtxRetain(CUcontext* context, CUdevice device) {
  ++g_retains[device];
  *context = reinterpret_cast<CUcontext>(&g_contexts[device]);
  return CUDA_SUCCESS;
}

CUresult fake_cuDevicePrimaryCtxRelease(CUdevice device) {
  if (g_retains[device] == 0) return CUDA_ERROR_INVALID_CONTEXT;
  --g_retains[device];
  return CUDA_SUCCESS;
}

CUresult fake_cuCtxGetCurrent(CUcontext* context) {
  *context = g_current;
  return CUDA_SUCCESS;
}

CUresult fake_cuCtxSetCurrent(CUcontext context) {
  g_current = context;
  return CUDA_SUCCESS;
}

CUresult fake_cuCtxGetDevice(CUdevice* device) {
  const int d = device_of(g_current);
  if (d < 0) return CUDA_ERROR_INVALID_CONTEXT;
  *device = d;
  return CUDA_SUCCESS;
}

std::mutex g_load_mutex;  // module loads may run on several threads (one per device)

CUresult fake_cuModuleLoadData(CUmodule* out, const void* image) {
  if (device_of(g_current) < 0) return CUDA_ERROR_INVALID_CONTEXT;
  // FAKE_CUDA_LOAD_DELAY_MS: a slow first load on device 0, to show other devices don't wait
  if (const char* delay = std::getenv("FAKE_CUDA_LOAD_DELAY_MS"); delay && device_of(g_current) == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(delay)));
  }
  std::lock_guard<std::mutex> lock(g_load_mutex);
  auto* module = new FakeModule{g_current, {}};
  std::istringstream in(static_cast<const char*>(image));
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string kind, name;
    if (!(words >> kind >> name) || kind != "kernel") continue;
    FakeFunction function{name, {}, g_current};
    int size = 0;
    while (words >> size) function.sizes.push_back(size);
    module->functions[name] = function;
  }
  ++g_modules_live;
  ++g_modules_loaded;
  g_log += "load device=" + std::to_string(device_of(g_current)) + "\n";
  *out = reinterpret_cast<CUmodule>(module);
  return CUDA_SUCCESS;
}

CUresult fake_cuModuleUnload(CUmodule handle) {
  auto* module = reinterpret_cast<FakeModule*>(handle);
  if (g_current != module->context) return CUDA_ERROR_INVALID_CONTEXT;
  g_log += "unload device=" + std::to_string(device_of(module->context)) + "\n";
  delete module;
  --g_modules_live;
  return CUDA_SUCCESS;
}

CUresult fake_cuModuleGetFunction(CUfunction* out, CUmodule handle, const char* name) {
  auto* module = reinterpret_cast<FakeModule*>(handle);
  auto it = module->functions.find(name);
  if (it == module->functions.end()) return CUDA_ERROR_NOT_FOUND;
  *out = reinterpret_cast<CUfunction>(&it->second);
  return CUDA_SUCCESS;
}

CUresult fake_cuFuncSetAttribute(CUfunction handle, CUfunction_attribute attribute, int value) {
  auto* function = reinterpret_cast<FakeFunction*>(handle);
  g_log += "attribute " + function->name + " " + std::to_string(static_cast<int>(attribute)) + "=" +
           std::to_string(value) + "\n";
  return CUDA_SUCCESS;
}

CUresult fake_cuMemAlloc(CUdeviceptr* out, size_t bytes) {
  if (device_of(g_current) < 0) return CUDA_ERROR_INVALID_CONTEXT;
  *out = static_cast<CUdeviceptr>(g_next_address);
  g_log += "alloc " + std::to_string(g_next_address) + " bytes=" + std::to_string(bytes) + " device=" +
           std::to_string(device_of(g_current)) + "\n";
  g_next_address += 0x1000;
  return CUDA_SUCCESS;
}

CUresult fake_cuMemFree(CUdeviceptr address) {
  g_log += "free " + std::to_string(static_cast<uintptr_t>(address)) + "\n";
  return CUDA_SUCCESS;
}

CUresult fake_cuMemsetD32(CUdeviceptr address, unsigned int value, size_t count) {
  g_log += "memset " + std::to_string(static_cast<uintptr_t>(address)) + " value=" + std::to_string(value) +
           " count=" + std::to_string(count) + "\n";
  return CUDA_SUCCESS;
}

CUresult fake_cuCtxSynchronize() {
  g_log += "synchronize device=" + std::to_string(device_of(g_current)) + "\n";
  return CUDA_SUCCESS;
}

CUresult fake_cuDeviceGetAttribute(int* value, CUdevice_attribute attribute, CUdevice device) {
  if (device < 0 || device >= kDevices) return CUDA_ERROR_INVALID_DEVICE;
  if (attribute == CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE) {
    *value = g_max_persisting_l2;
    return CUDA_SUCCESS;
  }
  if (attribute == CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN) {
    *value = 232448;  // an H100's / H200's 227 KiB
    return CUDA_SUCCESS;
  }
  if (attribute != CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT) return CUDA_ERROR_NOT_SUPPORTED;
  *value = 132;
  return CUDA_SUCCESS;
}

// The persisting-L2 limit, one per context (T.annotate_l2_hit_ratio's launches).
CUresult fake_cuCtxGetLimit(size_t* value, CUlimit limit) {
  const int device = device_of(g_current);
  if (device < 0) return CUDA_ERROR_INVALID_CONTEXT;
  if (limit != CU_LIMIT_PERSISTING_L2_CACHE_SIZE) return CUDA_ERROR_NOT_SUPPORTED;
  *value = g_persisting_limit[device];
  return CUDA_SUCCESS;
}

CUresult fake_cuCtxSetLimit(CUlimit limit, size_t value) {
  const int device = device_of(g_current);
  if (device < 0) return CUDA_ERROR_INVALID_CONTEXT;
  if (limit != CU_LIMIT_PERSISTING_L2_CACHE_SIZE) return CUDA_ERROR_NOT_SUPPORTED;
  g_persisting_limit[device] = value;
  g_log += "set_limit persisting_l2=" + std::to_string(value) + " device=" + std::to_string(device) + "\n";
  return CUDA_SUCCESS;
}

CUresult fake_cuCtxResetPersistingL2Cache() {
  const int device = device_of(g_current);
  if (device < 0) return CUDA_ERROR_INVALID_CONTEXT;
  g_log += "reset_persisting_l2 device=" + std::to_string(device) + "\n";
  return CUDA_SUCCESS;
}

CUresult fake_cuOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks, CUfunction handle, int threads,
                                                          size_t smem) {
  auto* function = reinterpret_cast<FakeFunction*>(handle);
  g_log += "occupancy " + function->name + " threads=" + std::to_string(threads) + " smem=" + std::to_string(smem) +
           "\n";
  *blocks = g_blocks_per_sm;
  return CUDA_SUCCESS;
}

CUresult record_launch(CUfunction handle, const unsigned grid[3], const unsigned block[3], unsigned smem,
                       CUstream stream, void** params, const unsigned cluster[3], bool cooperative = false,
                       const CUaccessPolicyWindow* window = nullptr) {
  auto* function = reinterpret_cast<FakeFunction*>(handle);
  if (g_current != function->context) return CUDA_ERROR_INVALID_CONTEXT;
  if (g_fail_next_launch != CUDA_SUCCESS) {
    const int status = g_fail_next_launch;
    g_fail_next_launch = CUDA_SUCCESS;
    return static_cast<CUresult>(status);
  }
  std::ostringstream os;
  os << "launch " << function->name << " grid=" << grid[0] << "," << grid[1] << "," << grid[2]
     << " block=" << block[0] << "," << block[1] << "," << block[2] << " smem=" << smem
     << " stream=" << reinterpret_cast<uintptr_t>(stream) << " device=" << device_of(g_current)
     << " cluster=" << cluster[0] << "," << cluster[1] << "," << cluster[2]
     << (cooperative ? " cooperative=1" : "");
  if (window != nullptr) {
    os << " l2_window=" << reinterpret_cast<uintptr_t>(window->base_ptr) << "," << window->num_bytes << ","
       << window->hitRatio << "," << static_cast<int>(window->hitProp) << "," << static_cast<int>(window->missProp);
  }
  os << " params=";
  for (size_t i = 0; i < function->sizes.size(); ++i) {
    const auto* bytes = static_cast<const unsigned char*>(params[i]);
    char hex[3];
    os << (i == 0 ? "" : ",");
    for (int b = 0; b < function->sizes[i]; ++b) {
      std::snprintf(hex, sizeof(hex), "%02x", bytes[b]);
      os << hex;
    }
  }
  g_log += os.str() + "\n";
  return CUDA_SUCCESS;
}

CUresult fake_cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                             unsigned bz, unsigned smem, CUstream stream, void** params, void** extra) {
  if (extra != nullptr) return CUDA_ERROR_INVALID_VALUE;
  const unsigned grid[3] = {gx, gy, gz};
  const unsigned block[3] = {bx, by, bz};
  const unsigned cluster[3] = {0, 0, 0};
  return record_launch(f, grid, block, smem, stream, params, cluster);
}

CUresult fake_cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f, void** params, void** extra) {
  if (extra != nullptr) return CUDA_ERROR_INVALID_VALUE;
  const unsigned grid[3] = {config->gridDimX, config->gridDimY, config->gridDimZ};
  const unsigned block[3] = {config->blockDimX, config->blockDimY, config->blockDimZ};
  unsigned cluster[3] = {0, 0, 0};
  bool cooperative = false;
  const CUaccessPolicyWindow* window = nullptr;
  for (unsigned i = 0; i < config->numAttrs; ++i) {
    if (config->attrs[i].id == CU_LAUNCH_ATTRIBUTE_COOPERATIVE) cooperative = config->attrs[i].value.cooperative != 0;
    if (config->attrs[i].id == CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW) window = &config->attrs[i].value.accessPolicyWindow;
    if (config->attrs[i].id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) {
      cluster[0] = config->attrs[i].value.clusterDim.x;
      cluster[1] = config->attrs[i].value.clusterDim.y;
      cluster[2] = config->attrs[i].value.clusterDim.z;
    }
  }
  return record_launch(f, grid, block, config->sharedMemBytes, config->hStream, params, cluster, cooperative, window);
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int version,
                                                                     cuuint64_t flags,
                                                                     CUdriverProcAddressQueryResult* status) {
  g_requests += std::string(symbol) + " " + std::to_string(version) + " " + std::to_string(flags) + "\n";
  static const std::map<std::string, void*> table = {
      {"cuInit", reinterpret_cast<void*>(&fake_cuInit)},
      {"cuGetErrorName", reinterpret_cast<void*>(&fake_cuGetErrorName)},
      {"cuGetErrorString", reinterpret_cast<void*>(&fake_cuGetErrorString)},
      {"cuDeviceGet", reinterpret_cast<void*>(&fake_cuDeviceGet)},
      {"cuDevicePrimaryCtxRetain", reinterpret_cast<void*>(&fake_cuDevicePrimaryCtxRetain)},
      {"cuDevicePrimaryCtxRelease", reinterpret_cast<void*>(&fake_cuDevicePrimaryCtxRelease)},
      {"cuCtxGetCurrent", reinterpret_cast<void*>(&fake_cuCtxGetCurrent)},
      {"cuCtxSetCurrent", reinterpret_cast<void*>(&fake_cuCtxSetCurrent)},
      {"cuCtxGetDevice", reinterpret_cast<void*>(&fake_cuCtxGetDevice)},
      {"cuModuleLoadData", reinterpret_cast<void*>(&fake_cuModuleLoadData)},
      {"cuModuleUnload", reinterpret_cast<void*>(&fake_cuModuleUnload)},
      {"cuModuleGetFunction", reinterpret_cast<void*>(&fake_cuModuleGetFunction)},
      {"cuFuncSetAttribute", reinterpret_cast<void*>(&fake_cuFuncSetAttribute)},
      {"cuLaunchKernel", reinterpret_cast<void*>(&fake_cuLaunchKernel)},
      {"cuLaunchKernelEx", reinterpret_cast<void*>(&fake_cuLaunchKernelEx)},
      {"cuMemAlloc", reinterpret_cast<void*>(&fake_cuMemAlloc)},
      {"cuMemFree", reinterpret_cast<void*>(&fake_cuMemFree)},
      {"cuMemsetD32", reinterpret_cast<void*>(&fake_cuMemsetD32)},
      {"cuCtxSynchronize", reinterpret_cast<void*>(&fake_cuCtxSynchronize)},
      {"cuDeviceGetAttribute", reinterpret_cast<void*>(&fake_cuDeviceGetAttribute)},
      {"cuCtxGetLimit", reinterpret_cast<void*>(&fake_cuCtxGetLimit)},
      {"cuCtxSetLimit", reinterpret_cast<void*>(&fake_cuCtxSetLimit)},
      {"cuCtxResetPersistingL2Cache", reinterpret_cast<void*>(&fake_cuCtxResetPersistingL2Cache)},
      {"cuOccupancyMaxActiveBlocksPerMultiprocessor",
       reinterpret_cast<void*>(&fake_cuOccupancyMaxActiveBlocksPerMultiprocessor)},
  };
  auto it = table.find(symbol);
  if (it == table.end()) {
    *pfn = nullptr;
    if (status != nullptr) *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return CUDA_ERROR_NOT_FOUND;
  }
  *pfn = it->second;
  if (status != nullptr) *status = CU_GET_PROC_ADDRESS_SUCCESS;
  return CUDA_SUCCESS;
}

__attribute__((visibility("default"))) const char* fake_log() { return g_log.c_str(); }
__attribute__((visibility("default"))) void fake_clear_log() { g_log.clear(); }
__attribute__((visibility("default"))) int fake_retains(int device) { return g_retains[device]; }
__attribute__((visibility("default"))) int fake_modules_live() { return g_modules_live; }
__attribute__((visibility("default"))) int fake_modules_loaded() { return g_modules_loaded; }
__attribute__((visibility("default"))) void fake_set_init_result(int result) { g_init_result = result; }
__attribute__((visibility("default"))) void fake_fail_next_launch(int result) { g_fail_next_launch = result; }
__attribute__((visibility("default"))) void* fake_context(int device) { return &g_contexts[device]; }
__attribute__((visibility("default"))) void fake_set_current(void* context) {
  g_current = static_cast<CUcontext>(context);
}
__attribute__((visibility("default"))) void* fake_current() { return g_current; }
__attribute__((visibility("default"))) const char* fake_requests() { return g_requests.c_str(); }
__attribute__((visibility("default"))) void fake_set_blocks_per_sm(int blocks) { g_blocks_per_sm = blocks; }
__attribute__((visibility("default"))) void fake_clear_requests() { g_requests.clear(); }
__attribute__((visibility("default"))) void fake_set_max_persisting_l2(int bytes) { g_max_persisting_l2 = bytes; }
__attribute__((visibility("default"))) void fake_set_persisting_limit(int device, long long bytes) {
  g_persisting_limit[device] = static_cast<size_t>(bytes);
}

}  // extern "C"
