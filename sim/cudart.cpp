// The simulated CUDA runtime: libcudart.so.11.0, libcudart.so.12 and libcudart.so.13, built from
// this file with GPUSEL_CUDART_MAJOR set to 11, 12 or 13. The public runtime API over the
// simulated driver: it loads the libcuda.so.1 beside it (never another on the search path) and
// calls its cu* functions, so there is one model of the machine, its
// devices, contexts, memory and time. The primary context is the driver's: a context a program
// (or gpusel bind) made current with the driver API is the runtime's current device.
//
// No device code runs: fat binaries and kernels register (so an nvcc-built program starts), and a
// kernel launch returns cudaErrorNotSupported, said once on stderr. The calls this file does not
// model (cudart_unmodelled.inc) return cudaErrorNotSupported.
#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "cudart_abi.hpp"

#ifndef GPUSEL_CUDART_MAJOR
#error "GPUSEL_CUDART_MAJOR (11, 12 or 13) must be defined"
#endif

#define CUDART_API extern "C" __attribute__((visibility("default")))

namespace gpusel::sim::cudart {
namespace {

// cudaRuntimeGetVersion: the release this library stands in for.
constexpr int kRuntimeVersion = GPUSEL_CUDART_MAJOR == 11   ? 11080
                                : GPUSEL_CUDART_MAJOR == 12 ? 12080
                                                            : 13000;
#define GPUSEL_STRINGIFY2(x) #x
#define GPUSEL_STRINGIFY(x) GPUSEL_STRINGIFY2(x)
constexpr const char* kLibrary = GPUSEL_CUDART_MAJOR == 11
                                     ? "libcudart.so.11.0"
                                     : "libcudart.so." GPUSEL_STRINGIFY(GPUSEL_CUDART_MAJOR);

enum : cudaError_t {
#define GPUSEL_CUDART_ERROR(name, value, text) name = value,
#include "cudart_errors.def"
#undef GPUSEL_CUDART_ERROR
};

// The driver's types, as this file uses them (opaque handles).
typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef void* CUcontext;
typedef void* CUstream;
typedef void* CUevent;

// The driver's CUDA_MEMCPY2D (memory types: 1 host, 2 device, 4 unified).
struct Memcpy2D {
  std::size_t srcXInBytes, srcY;
  int srcMemoryType;
  const void* srcHost;
  CUdeviceptr srcDevice;
  void* srcArray;
  std::size_t srcPitch;
  std::size_t dstXInBytes, dstY;
  int dstMemoryType;
  void* dstHost;
  CUdeviceptr dstDevice;
  void* dstArray;
  std::size_t dstPitch;
  std::size_t WidthInBytes, Height;
};

// A __device__ (or __constant__) variable of the program, registered by its host shadow's
// address: its size and, per device, its device memory (made on first use there, holding the host
// shadow's bytes: the initialiser nvcc compiles into the device image is not read, since the
// simulator reads no device code, and nvcc leaves the shadow zeroed).
struct Symbol {
  std::size_t size = 0;
  std::string name;
  std::map<int, CUdeviceptr> memory;  // by device ordinal
};

// The driver functions the runtime calls, looked up once in libcuda.so.1.
#define GPUSEL_DRIVER_FUNCTIONS(X)                                                              \
  X(cuInit, (unsigned))                                                                         \
  X(cuDriverGetVersion, (int*))                                                                 \
  X(cuDeviceGetCount, (int*))                                                                   \
  X(cuDeviceGet, (CUdevice*, int))                                                              \
  X(cuDeviceGetName, (char*, int, CUdevice))                                                    \
  X(cuDeviceGetUuid_v2, (unsigned char*, CUdevice))                                             \
  X(cuDeviceTotalMem_v2, (std::size_t*, CUdevice))                                              \
  X(cuDeviceGetAttribute, (int*, int, CUdevice))                                                \
  X(cuDeviceGetPCIBusId, (char*, int, CUdevice))                                                \
  X(cuDeviceGetByPCIBusId, (CUdevice*, const char*))                                            \
  X(cuDeviceCanAccessPeer, (int*, CUdevice, CUdevice))                                          \
  X(cuDeviceGetP2PAttribute, (int*, int, CUdevice, CUdevice))                                   \
  X(cuDevicePrimaryCtxRetain, (CUcontext*, CUdevice))                                           \
  X(cuDevicePrimaryCtxReset_v2, (CUdevice))                                                     \
  X(cuDevicePrimaryCtxRelease_v2, (CUdevice))                                                   \
  X(cuDevicePrimaryCtxSetFlags_v2, (CUdevice, unsigned))                                        \
  X(cuDevicePrimaryCtxGetState, (CUdevice, unsigned*, int*))                                    \
  X(cuCtxSetCurrent, (CUcontext))                                                               \
  X(cuCtxGetCurrent, (CUcontext*))                                                              \
  X(cuCtxGetDevice, (CUdevice*))                                                                \
  X(cuCtxSynchronize, ())                                                                       \
  X(cuCtxGetLimit, (std::size_t*, int))                                                         \
  X(cuCtxSetLimit, (int, std::size_t))                                                          \
  X(cuCtxGetCacheConfig, (int*))                                                                \
  X(cuCtxSetCacheConfig, (int))                                                                 \
  X(cuCtxGetStreamPriorityRange, (int*, int*))                                                  \
  X(cuCtxEnablePeerAccess, (CUcontext, unsigned))                                               \
  X(cuCtxDisablePeerAccess, (CUcontext))                                                        \
  X(cuMemGetInfo_v2, (std::size_t*, std::size_t*))                                              \
  X(cuMemAlloc_v2, (CUdeviceptr*, std::size_t))                                                 \
  X(cuMemAllocManaged, (CUdeviceptr*, std::size_t, unsigned))                                   \
  X(cuMemFree_v2, (CUdeviceptr))                                                                \
  X(cuMemHostAlloc, (void**, std::size_t, unsigned))                                            \
  X(cuMemFreeHost, (void*))                                                                     \
  X(cuMemHostGetDevicePointer_v2, (CUdeviceptr*, void*, unsigned))                              \
  X(cuMemHostRegister_v2, (void*, std::size_t, unsigned))                                       \
  X(cuMemHostUnregister, (void*))                                                               \
  X(cuMemcpy, (CUdeviceptr, CUdeviceptr, std::size_t))                                          \
  X(cuMemcpyAsync, (CUdeviceptr, CUdeviceptr, std::size_t, CUstream))                           \
  X(cuMemcpyHtoD_v2, (CUdeviceptr, const void*, std::size_t))                                   \
  X(cuMemcpyDtoH_v2, (void*, CUdeviceptr, std::size_t))                                         \
  X(cuMemcpyDtoD_v2, (CUdeviceptr, CUdeviceptr, std::size_t))                                   \
  X(cuMemcpyHtoDAsync_v2, (CUdeviceptr, const void*, std::size_t, CUstream))                    \
  X(cuMemcpyDtoHAsync_v2, (void*, CUdeviceptr, std::size_t, CUstream))                          \
  X(cuMemcpyDtoDAsync_v2, (CUdeviceptr, CUdeviceptr, std::size_t, CUstream))                    \
  X(cuMemcpyPeer, (CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, std::size_t))                \
  X(cuMemcpyPeerAsync, (CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, std::size_t, CUstream)) \
  X(cuMemsetD8_v2, (CUdeviceptr, unsigned char, std::size_t))                                   \
  X(cuMemsetD8Async, (CUdeviceptr, unsigned char, std::size_t, CUstream))                       \
  X(cuMemGetAddressRange_v2, (CUdeviceptr*, std::size_t*, CUdeviceptr))                         \
  X(cuPointerGetAttribute, (void*, int, CUdeviceptr))                                           \
  X(cuMemAllocAsync, (CUdeviceptr*, std::size_t, CUstream))                                     \
  X(cuMemFreeAsync, (CUdeviceptr, CUstream))                                                    \
  X(cuDeviceGetDefaultMemPool, (void**, CUdevice))                                              \
  X(cuStreamCreate, (CUstream*, unsigned))                                                      \
  X(cuStreamCreateWithPriority, (CUstream*, unsigned, int))                                     \
  X(cuStreamDestroy_v2, (CUstream))                                                             \
  X(cuStreamSynchronize, (CUstream))                                                            \
  X(cuStreamQuery, (CUstream))                                                                  \
  X(cuStreamWaitEvent, (CUstream, CUevent, unsigned))                                           \
  X(cuStreamGetPriority, (CUstream, int*))                                                      \
  X(cuStreamGetFlags, (CUstream, unsigned*))                                                    \
  X(cuStreamGetDevice, (CUstream, CUdevice*))                                                   \
  X(cuEventCreate, (CUevent*, unsigned))                                                        \
  X(cuEventRecord, (CUevent, CUstream))                                                         \
  X(cuEventRecordWithFlags, (CUevent, CUstream, unsigned))                                      \
  X(cuEventQuery, (CUevent))                                                                    \
  X(cuEventSynchronize, (CUevent))                                                              \
  X(cuEventElapsedTime, (float*, CUevent, CUevent))                                             \
  X(cuEventDestroy_v2, (CUevent))                                                               \
  X(cuGetProcAddress_v2, (const char*, void**, int, unsigned long long, int*))                  \
  X(cuMemcpy2D_v2, (const Memcpy2D*))                                                           \
  X(cuMemcpy2DAsync_v2, (const Memcpy2D*, CUstream))                                            \
  X(cuMemsetD2D8_v2, (CUdeviceptr, std::size_t, unsigned char, std::size_t, std::size_t))       \
  X(cuMemsetD2D8Async,                                                                          \
    (CUdeviceptr, std::size_t, unsigned char, std::size_t, std::size_t, CUstream))              \
  X(cuLaunchHostFunc, (CUstream, HostFn, void*))                                                \
  X(cuStreamAddCallback, (CUstream, StreamCallback, void*, unsigned))                           \
  X(cuMemPrefetchAsync_v2, (CUdeviceptr, std::size_t, MemLocation, unsigned, CUstream))         \
  X(cuMemAdvise_v2, (CUdeviceptr, std::size_t, int, MemLocation))                               \
  X(cuMemHostGetFlags, (unsigned*, void*))                                                      \
  X(cuIpcGetMemHandle, (IpcMemHandle*, CUdeviceptr))                                            \
  X(cuMemPoolGetAttribute, (void*, int, void*))                                                 \
  X(cuMemPoolSetAttribute, (void*, int, void*))                                                 \
  X(cuStreamGetId, (CUstream, unsigned long long*))                                             \
  X(cuStreamIsCapturing, (CUstream, int*))                                                      \
  X(cuStreamBeginCapture_v2, (CUstream, int))                                                   \
  X(cuStreamEndCapture, (CUstream, void**))                                                     \
  X(cuGraphCreate, (void**, unsigned))                                                          \
  X(cuGraphGetNodes, (void*, void**, std::size_t*))                                             \
  X(cuGraphDestroy, (void*))                                                                    \
  X(cuGraphInstantiateWithFlags, (void**, void*, unsigned long long))                           \
  X(cuGraphExecDestroy, (void*))                                                                \
  X(cuGraphLaunch, (void*, CUstream))

struct Driver {
#define GPUSEL_DRIVER_FIELD(name, params) CUresult(*name) params = nullptr;
  GPUSEL_DRIVER_FUNCTIONS(GPUSEL_DRIVER_FIELD)
#undef GPUSEL_DRIVER_FIELD
};

struct Runtime {
  std::once_flag once;
  cudaError_t init_error = cudaErrorInitializationError;
  Driver cu;
  int device_count = 0;
  std::vector<CUdevice> handles;  // by ordinal
  std::mutex mutex;               // guards what follows
  std::vector<bool> retained;     // the runtime holds a reference on the device's primary context
  std::vector<unsigned> device_flags;
  std::map<const void*, std::string> functions;  // registered host stubs -> device names
  std::map<const void*, Symbol> symbols;         // registered variables, by host shadow
};

Runtime& rt() {
  static Runtime* r = new Runtime;  // never destroyed: other libraries' destructors may call in
  return *r;
}

thread_local cudaError_t last_error = cudaSuccess;
thread_local int selected_device = 0;  // cudaSetDevice's choice while no context is current

std::atomic<bool> launch_reported{false};
std::atomic<bool> driver_reported{false};

void say(const std::string& message) {
  const std::string line = std::string("gpusel-sim (") + kLibrary + "): " + message + "\n";
  (void)!write(2, line.data(), line.size());
}

// Records an error as the thread's last one (as every runtime call does) and returns it.
cudaError_t fail(cudaError_t e) {
  if (e != cudaSuccess) last_error = e;
  return e;
}

// The driver's result codes and the runtime's share their numbers for everything this runtime
// passes on, except a failed initialisation.
cudaError_t from_driver(CUresult rc) {
  return fail(static_cast<cudaError_t>(rc));
}

// This library's folder ("" when unknown).
std::string own_folder() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<const void*>(&own_folder), &info) == 0 || info.dli_fname == nullptr)
    return "";
  const std::string file = info.dli_fname;
  const auto slash = file.rfind('/');
  return slash == std::string::npos ? "" : file.substr(0, slash);
}

void initialise(Runtime& r) {
  // The simulated driver beside this library (a fault machine's folder may have none: then there
  // is no driver, as there is none on that machine), never another libcuda.so.1 on the search path.
  const std::string folder = own_folder();
  void* lib =
      folder.empty() ? nullptr : dlopen((folder + "/libcuda.so.1").c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    r.init_error = cudaErrorInsufficientDriver;
    return;
  }
  bool complete = true;
#define GPUSEL_DRIVER_LOOKUP(name, params)                             \
  r.cu.name = reinterpret_cast<CUresult(*) params>(dlsym(lib, #name)); \
  if (r.cu.name == nullptr) complete = false;
  GPUSEL_DRIVER_FUNCTIONS(GPUSEL_DRIVER_LOOKUP)
#undef GPUSEL_DRIVER_LOOKUP
  if (!complete) {
    // Not the simulator's driver (or a very old one): nothing here can work over it.
    say("the libcuda.so.1 beside this library is not the simulator's (it lacks calls this "
        "runtime uses): reinstall or rebuild the simulator");
    r.init_error = cudaErrorInsufficientDriver;
    return;
  }
  int driver = 0;
  r.cu.cuDriverGetVersion(&driver);
  if (driver < kRuntimeVersion) {
    if (!driver_reported.exchange(true)) {
      say("the simulated driver supports CUDA " + std::to_string(driver / 1000) + "." +
          std::to_string(driver % 1000 / 10) + ", older than this runtime's CUDA " +
          std::to_string(kRuntimeVersion / 1000) + "." +
          std::to_string(kRuntimeVersion % 1000 / 10) +
          ": cudaErrorInsufficientDriver, as on a real machine; run it on a machine file whose "
          "cuda_driver_version (and driver_version) is that new (docs/simulator.md)");
    }
    r.init_error = cudaErrorInsufficientDriver;
    return;
  }
  const CUresult rc = r.cu.cuInit(0);
  if (rc != 0) {
    r.init_error = rc == cudaErrorNoDevice || rc == cudaErrorStubLibrary
                       ? static_cast<cudaError_t>(rc)
                       : cudaErrorInitializationError;
    return;
  }
  r.cu.cuDeviceGetCount(&r.device_count);
  for (int i = 0; i < r.device_count; ++i) {
    CUdevice h = 0;
    r.cu.cuDeviceGet(&h, i);
    r.handles.push_back(h);
  }
  r.retained.assign(static_cast<std::size_t>(r.device_count), false);
  r.device_flags.assign(static_cast<std::size_t>(r.device_count), 0);
  r.init_error = r.device_count > 0 ? cudaSuccess : cudaErrorNoDevice;
}

// The runtime's lazy initialisation: cudaSuccess when the driver is usable.
cudaError_t init() {
  Runtime& r = rt();
  std::call_once(r.once, [&] { initialise(r); });
  return r.init_error;
}

bool valid_ordinal(int device) {
  return device >= 0 && device < rt().device_count;
}

CUdevice handle(int device) {
  return rt().handles[static_cast<std::size_t>(device)];
}

// The ordinal of the device of the calling thread's current context, or -1.
int current_ordinal() {
  Runtime& r = rt();
  CUcontext ctx = nullptr;
  if (r.cu.cuCtxGetCurrent(&ctx) != 0 || ctx == nullptr) return -1;
  CUdevice dev = 0;
  if (r.cu.cuCtxGetDevice(&dev) != 0) return -1;
  for (int i = 0; i < r.device_count; ++i) {
    if (handle(i) == dev) return i;
  }
  return -1;
}

// `device`'s primary context; the runtime holds one reference on it (taken on first use, given
// up by cudaDeviceReset). Call with the mutex held.
CUresult primary(int device, CUcontext* ctx) {
  Runtime& r = rt();
  if (const CUresult rc = r.cu.cuDevicePrimaryCtxRetain(ctx, handle(device)); rc != 0) return rc;
  if (r.retained[static_cast<std::size_t>(device)]) {
    r.cu.cuDevicePrimaryCtxRelease_v2(handle(device));  // already held: keep one reference
  }
  r.retained[static_cast<std::size_t>(device)] = true;
  return 0;
}

// Makes `device`'s primary context current on this thread (retaining it once per process).
cudaError_t activate(int device) {
  Runtime& r = rt();
  CUcontext ctx = nullptr;
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    if (const CUresult rc = primary(device, &ctx); rc != 0) return static_cast<cudaError_t>(rc);
  }
  return static_cast<cudaError_t>(r.cu.cuCtxSetCurrent(ctx));
}

// The device runtime calls work on: the current context's, else the selected one (its primary
// context then made current, as the runtime does on first use).
cudaError_t ensure_context(int* device = nullptr) {
  if (cudaError_t e = init(); e != cudaSuccess) return e;
  int d = current_ordinal();
  if (d < 0) {
    d = selected_device;
    if (cudaError_t e = activate(d); e != cudaSuccess) return e;
  }
  if (device != nullptr) *device = d;
  return cudaSuccess;
}

CUstream driver_stream(void* stream) {
  return stream;  // cudaStreamLegacy (1) and cudaStreamPerThread (2) are the driver's too
}

// A pointer inside device memory this process allocated.
bool is_device(const void* p) {
  CUdeviceptr base = 0;
  std::size_t size = 0;
  return p != nullptr &&
         rt().cu.cuMemGetAddressRange_v2(&base, &size, reinterpret_cast<CUdeviceptr>(p)) == 0;
}

enum MemcpyKind {
  kHostToHost = 0,
  kHostToDevice = 1,
  kDeviceToHost = 2,
  kDeviceToDevice = 3,
  kDefault = 4
};

cudaError_t memcpy_any(void* dst, const void* src, std::size_t count, int kind, void* stream,
                       bool async) {
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return fail(e);
  if (count == 0) return cudaSuccess;
  if (dst == nullptr || src == nullptr) return fail(cudaErrorInvalidValue);
  const Driver& cu = rt().cu;
  const auto d = reinterpret_cast<CUdeviceptr>(dst);
  const auto s = reinterpret_cast<CUdeviceptr>(src);
  CUstream st = driver_stream(stream);
  switch (kind) {
    case kHostToHost:
      std::memmove(dst, src, count);
      return cudaSuccess;
    case kHostToDevice:
      if (!is_device(dst)) return fail(cudaErrorInvalidValue);
      return from_driver(async ? cu.cuMemcpyHtoDAsync_v2(d, src, count, st)
                               : cu.cuMemcpyHtoD_v2(d, src, count));
    case kDeviceToHost:
      if (!is_device(src)) return fail(cudaErrorInvalidValue);
      return from_driver(async ? cu.cuMemcpyDtoHAsync_v2(dst, s, count, st)
                               : cu.cuMemcpyDtoH_v2(dst, s, count));
    case kDeviceToDevice:
      if (!is_device(src) || !is_device(dst)) return fail(cudaErrorInvalidValue);
      return from_driver(async ? cu.cuMemcpyDtoDAsync_v2(d, s, count, st)
                               : cu.cuMemcpyDtoD_v2(d, s, count));
    case kDefault:
      return from_driver(async ? cu.cuMemcpyAsync(d, s, count, st) : cu.cuMemcpy(d, s, count));
    default:
      return fail(cudaErrorInvalidMemcpyDirection);
  }
}

// Fills a cudaDeviceProp of either layout from the driver's answers (name, UUID, memory and
// every attribute), so every field comes from the machine file or its model's defaults.
template <typename Prop>
cudaError_t fill_properties(Prop& p, int device) {
  const Driver& cu = rt().cu;
  const CUdevice h = handle(device);
  p = Prop{};
  cu.cuDeviceGetName(p.name, static_cast<int>(sizeof p.name), h);
  cu.cuDeviceGetUuid_v2(p.uuid, h);
  std::size_t total = 0;
  cu.cuDeviceTotalMem_v2(&total, h);
  p.totalGlobalMem = total;
  auto a = [&](int attribute) {
    int v = 0;
    cu.cuDeviceGetAttribute(&v, attribute, h);
    return v;
  };
  p.sharedMemPerBlock = static_cast<std::size_t>(a(8));
  p.regsPerBlock = a(12);
  p.warpSize = a(10);
  p.memPitch = static_cast<std::size_t>(a(11));
  p.maxThreadsPerBlock = a(1);
  p.maxThreadsDim[0] = a(2);
  p.maxThreadsDim[1] = a(3);
  p.maxThreadsDim[2] = a(4);
  p.maxGridSize[0] = a(5);
  p.maxGridSize[1] = a(6);
  p.maxGridSize[2] = a(7);
  p.totalConstMem = static_cast<std::size_t>(a(9));
  p.major = a(75);
  p.minor = a(76);
  p.textureAlignment = static_cast<std::size_t>(a(14));
  p.texturePitchAlignment = static_cast<std::size_t>(a(51));
  p.multiProcessorCount = a(16);
  p.integrated = a(18);
  p.canMapHostMemory = a(19);
  p.maxTexture1D = a(21);
  p.maxTexture1DMipmap = a(77);
  p.maxTexture2D[0] = a(22);
  p.maxTexture2D[1] = a(23);
  p.maxTexture2DMipmap[0] = a(73);
  p.maxTexture2DMipmap[1] = a(74);
  p.maxTexture2DLinear[0] = a(70);
  p.maxTexture2DLinear[1] = a(71);
  p.maxTexture2DLinear[2] = a(72);
  p.maxTexture2DGather[0] = a(45);
  p.maxTexture2DGather[1] = a(46);
  p.maxTexture3D[0] = a(24);
  p.maxTexture3D[1] = a(25);
  p.maxTexture3D[2] = a(26);
  p.maxTexture3DAlt[0] = a(47);
  p.maxTexture3DAlt[1] = a(48);
  p.maxTexture3DAlt[2] = a(49);
  p.maxTextureCubemap = a(52);
  p.maxTexture1DLayered[0] = a(42);
  p.maxTexture1DLayered[1] = a(43);
  p.maxTexture2DLayered[0] = a(27);
  p.maxTexture2DLayered[1] = a(28);
  p.maxTexture2DLayered[2] = a(29);
  p.maxTextureCubemapLayered[0] = a(53);
  p.maxTextureCubemapLayered[1] = a(54);
  p.maxSurface1D = a(55);
  p.maxSurface2D[0] = a(56);
  p.maxSurface2D[1] = a(57);
  p.maxSurface3D[0] = a(58);
  p.maxSurface3D[1] = a(59);
  p.maxSurface3D[2] = a(60);
  p.maxSurface1DLayered[0] = a(61);
  p.maxSurface1DLayered[1] = a(62);
  p.maxSurface2DLayered[0] = a(63);
  p.maxSurface2DLayered[1] = a(64);
  p.maxSurface2DLayered[2] = a(65);
  p.maxSurfaceCubemap = a(66);
  p.maxSurfaceCubemapLayered[0] = a(67);
  p.maxSurfaceCubemapLayered[1] = a(68);
  p.surfaceAlignment = static_cast<std::size_t>(a(30));
  p.concurrentKernels = a(31);
  p.ECCEnabled = a(32);
  p.pciBusID = a(33);
  p.pciDeviceID = a(34);
  p.pciDomainID = a(50);
  p.tccDriver = a(35);
  p.asyncEngineCount = a(40);
  p.unifiedAddressing = a(41);
  p.memoryBusWidth = a(37);
  p.l2CacheSize = a(38);
  p.persistingL2CacheMaxSize = a(108);
  p.maxThreadsPerMultiProcessor = a(39);
  p.streamPrioritiesSupported = a(78);
  p.globalL1CacheSupported = a(79);
  p.localL1CacheSupported = a(80);
  p.sharedMemPerMultiprocessor = static_cast<std::size_t>(a(81));
  p.regsPerMultiprocessor = a(82);
  p.managedMemory = a(83);
  p.isMultiGpuBoard = a(84);
  p.multiGpuBoardGroupID = a(85);
  p.hostNativeAtomicSupported = a(86);
  p.pageableMemoryAccess = a(88);
  p.concurrentManagedAccess = a(89);
  p.computePreemptionSupported = a(90);
  p.canUseHostPointerForRegisteredMem = a(91);
  p.cooperativeLaunch = a(95);
  p.sharedMemPerBlockOptin = static_cast<std::size_t>(a(97));
  p.pageableMemoryAccessUsesHostPageTables = a(100);
  p.directManagedMemAccessFromHost = a(101);
  p.maxBlocksPerMultiProcessor = a(106);
  p.accessPolicyMaxWindowSize = a(109);
  p.reservedSharedMemPerBlock = static_cast<std::size_t>(a(111));
  p.hostRegisterSupported = a(99);
  p.sparseCudaArraySupported = a(112);
  p.hostRegisterReadOnlySupported = a(113);
  p.timelineSemaphoreInteropSupported = a(114);
  p.memoryPoolsSupported = a(115);
  p.gpuDirectRDMASupported = a(116);
  p.gpuDirectRDMAFlushWritesOptions = static_cast<unsigned>(a(117));
  p.gpuDirectRDMAWritesOrdering = a(118);
  p.memoryPoolSupportedHandleTypes = static_cast<unsigned>(a(119));
  p.deferredMappingCudaArraySupported = a(121);
  p.ipcEventSupported = a(125);
  p.clusterLaunch = a(120);
  p.unifiedFunctionPointers = a(129);
  p.deviceNumaConfig = a(130);
  p.deviceNumaId = a(131);
  p.mpsEnabled = a(133);
  p.hostNumaId = a(134);
  p.gpuPciDeviceID = static_cast<unsigned>(a(139));
  p.gpuPciSubsystemID = static_cast<unsigned>(a(140));
  p.hostNumaMultinodeIpcSupported = a(143);
  if constexpr (requires { p.clockRate; }) {
    p.clockRate = a(13);
    p.deviceOverlap = a(15);
    p.kernelExecTimeoutEnabled = a(17);
    p.computeMode = a(20);
    p.maxTexture1DLinear = a(69);
    p.memoryClockRate = a(36);
    p.singleToDoublePrecisionPerfRatio = a(87);
    p.cooperativeMultiDeviceLaunch = a(96);
  }
  return cudaSuccess;
}

// Writes `bytes` of the layout `Prop` for `device` into the caller's struct.
template <typename Prop>
cudaError_t properties(void* out, int device, std::size_t bytes) {
  if (out == nullptr) return fail(cudaErrorInvalidValue);
  if (cudaError_t e = init(); e != cudaSuccess) return fail(e);
  if (!valid_ordinal(device)) return fail(cudaErrorInvalidDevice);
  Prop p;
  fill_properties(p, device);
  std::memcpy(out, &p, bytes);
  return cudaSuccess;
}

const char* error_name(cudaError_t e) {
  switch (e) {
#define GPUSEL_CUDART_ERROR(name, value, text) \
  case name:                                   \
    return #name;
#include "cudart_errors.def"
#undef GPUSEL_CUDART_ERROR
    default:
      return nullptr;
  }
}

const char* error_text(cudaError_t e) {
  switch (e) {
#define GPUSEL_CUDART_ERROR(name, value, text) \
  case name:                                   \
    return text;
#include "cudart_errors.def"
#undef GPUSEL_CUDART_ERROR
    default:
      return nullptr;
  }
}

}  // namespace
}  // namespace gpusel::sim::cudart

using namespace gpusel::sim::cudart;

// ---- versions and errors ---------------------------------------------------------------------

CUDART_API cudaError_t cudaRuntimeGetVersion(int* version) {
  if (version == nullptr) return fail(cudaErrorInvalidValue);
  *version = kRuntimeVersion;
  return cudaSuccess;
}

CUDART_API cudaError_t cudaDriverGetVersion(int* version) {
  if (version == nullptr) return fail(cudaErrorInvalidValue);
  *version = 0;
  init();
  if (rt().cu.cuDriverGetVersion != nullptr) rt().cu.cuDriverGetVersion(version);
  return cudaSuccess;
}

CUDART_API cudaError_t cudaGetLastError(void) {
  const cudaError_t e = last_error;
  last_error = cudaSuccess;
  return e;
}

CUDART_API cudaError_t cudaPeekAtLastError(void) {
  return last_error;
}

CUDART_API const char* cudaGetErrorName(cudaError_t e) {
  const char* name = error_name(e);
  return name != nullptr ? name : "cudaErrorUnknown";
}

CUDART_API const char* cudaGetErrorString(cudaError_t e) {
  const char* text = error_text(e);
  return text != nullptr ? text : "unrecognized error code";
}

// ---- devices ---------------------------------------------------------------------------------

CUDART_API cudaError_t cudaGetDeviceCount(int* count) {
  if (count == nullptr) return fail(cudaErrorInvalidValue);
  *count = 0;
  if (cudaError_t e = init(); e != cudaSuccess) return fail(e);
  *count = rt().device_count;
  return cudaSuccess;
}

CUDART_API cudaError_t cudaGetDevice(int* device) {
  if (device == nullptr) return fail(cudaErrorInvalidValue);
  if (cudaError_t e = init(); e != cudaSuccess) return fail(e);
  const int d = current_ordinal();
  *device = d >= 0 ? d : selected_device;
  return cudaSuccess;
}

CUDART_API cudaError_t cudaSetDevice(int device) {
  if (cudaError_t e = init(); e != cudaSuccess) return fail(e);
  if (!valid_ordinal(device)) return fail(cudaErrorInvalidDevice);
  selected_device = device;
  return fail(activate(device));
}

CUDART_API cudaError_t cudaInitDevice(int device, unsigned int device_flags, unsigned int flags) {
  if (cudaError_t e = init(); e != cudaSuccess) return fail(e);
  if (!valid_ordinal(device)) return fail(cudaErrorInvalidDevice);
  if (flags > 1) return fail(cudaErrorInvalidValue);  // cudaInitDeviceFlagsAreValid
  (void)device_flags;
  CUcontext ctx = nullptr;
  std::lock_guard<std::mutex> lock(rt().mutex);
  return from_driver(primary(device, &ctx));
}

CUDART_API cudaError_t cudaSetDeviceFlags(unsigned int flags) {
  int device = 0;
  if (cudaError_t e = init(); e != cudaSuccess) return fail(e);
  const int d = current_ordinal();
  device = d >= 0 ? d : selected_device;
  if (flags > 0xFF) return fail(cudaErrorInvalidValue);
  std::lock_guard<std::mutex> lock(rt().mutex);
  rt().device_flags[static_cast<std::size_t>(device)] = flags;
  return from_driver(rt().cu.cuDevicePrimaryCtxSetFlags_v2(handle(device), flags & 0x7u));
}

CUDART_API cudaError_t cudaGetDeviceFlags(unsigned int* flags) {
  if (flags == nullptr) return fail(cudaErrorInvalidValue);
  if (cudaError_t e = init(); e != cudaSuccess) return fail(e);
  const int d = current_ordinal();
  const int device = d >= 0 ? d : selected_device;
  std::lock_guard<std::mutex> lock(rt().mutex);
  *flags = rt().device_flags[static_cast<std::size_t>(device)] | 0x08u;  // cudaDeviceMapHost
  return cudaSuccess;
}

#if GPUSEL_CUDART_MAJOR == 13
CUDART_API cudaError_t cudaGetDeviceProperties(void* prop, int device) {
  return properties<DeviceProp13>(prop, device, sizeof(DeviceProp13));
}
#else
// The unversioned symbol writes CUDA 11's struct, a prefix of CUDA 12's.
CUDART_API cudaError_t cudaGetDeviceProperties(void* prop, int device) {
  return properties<DeviceProp12>(prop, device, kDeviceProp11Size);
}
#endif
// CUDA 12's versioned symbol (exported by every build: harmless where unused).
CUDART_API cudaError_t cudaGetDeviceProperties_v2(void* prop, int device) {
  return properties<DeviceProp12>(prop, device, sizeof(DeviceProp12));
}

// cudaDeviceAttr values are the driver's CUdevice_attribute numbers.
CUDART_API cudaError_t cudaDeviceGetAttribute(int* value, int attribute, int device) {
  if (value == nullptr) return fail(cudaErrorInvalidValue);
  if (cudaError_t e = init(); e != cudaSuccess) return fail(e);
  if (!valid_ordinal(device)) return fail(cudaErrorInvalidDevice);
  return from_driver(rt().cu.cuDeviceGetAttribute(value, attribute, handle(device)));
}

CUDART_API cudaError_t cudaDeviceGetPCIBusId(char* bus, int length, int device) {
  if (bus == nullptr || length <= 0) return fail(cudaErrorInvalidValue);
  if (cudaError_t e = init(); e != cudaSuccess) return fail(e);
  if (!valid_ordinal(device)) return fail(cudaErrorInvalidDevice);
  return from_driver(rt().cu.cuDeviceGetPCIBusId(bus, length, handle(device)));
}

CUDART_API cudaError_t cudaDeviceGetByPCIBusId(int* device, const char* bus) {
  if (device == nullptr || bus == nullptr) return fail(cudaErrorInvalidValue);
  if (cudaError_t e = init(); e != cudaSuccess) return fail(e);
  CUdevice h = 0;
  if (CUresult rc = rt().cu.cuDeviceGetByPCIBusId(&h, bus); rc != 0) return from_driver(rc);
  for (int i = 0; i < rt().device_count; ++i) {
    if (handle(i) == h) {
      *device = i;
      return cudaSuccess;
    }
  }
  return fail(cudaErrorInvalidDevice);
}

CUDART_API cudaError_t cudaDeviceCanAccessPeer(int* can, int device, int peer) {
  if (can == nullptr) return fail(cudaErrorInvalidValue);
  if (cudaError_t e = init(); e != cudaSuccess) return fail(e);
  if (!valid_ordinal(device) || !valid_ordinal(peer)) return fail(cudaErrorInvalidDevice);
  return from_driver(rt().cu.cuDeviceCanAccessPeer(can, handle(device), handle(peer)));
}

CUDART_API cudaError_t cudaDeviceGetP2PAttribute(int* value, int attribute, int src, int dst) {
  if (value == nullptr) return fail(cudaErrorInvalidValue);
  if (cudaError_t e = init(); e != cudaSuccess) return fail(e);
  if (!valid_ordinal(src) || !valid_ordinal(dst)) return fail(cudaErrorInvalidDevice);
  return from_driver(rt().cu.cuDeviceGetP2PAttribute(value, attribute, handle(src), handle(dst)));
}

// Peer access from the current device to `peer`'s primary context (retained for it).
CUDART_API cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned int flags) {
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return fail(e);
  if (!valid_ordinal(peer)) return fail(cudaErrorInvalidDevice);
  if (flags != 0) return fail(cudaErrorInvalidValue);
  CUcontext ctx = nullptr;
  {
    std::lock_guard<std::mutex> lock(rt().mutex);
    if (CUresult rc = primary(peer, &ctx); rc != 0) return from_driver(rc);
  }
  return from_driver(rt().cu.cuCtxEnablePeerAccess(ctx, 0));
}

CUDART_API cudaError_t cudaDeviceDisablePeerAccess(int peer) {
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return fail(e);
  if (!valid_ordinal(peer)) return fail(cudaErrorInvalidDevice);
  CUcontext ctx = nullptr;
  {
    std::lock_guard<std::mutex> lock(rt().mutex);
    if (!rt().retained[static_cast<std::size_t>(peer)]) return fail(cudaErrorPeerAccessNotEnabled);
    if (CUresult rc = primary(peer, &ctx); rc != 0) return from_driver(rc);
  }
  return from_driver(rt().cu.cuCtxDisablePeerAccess(ctx));
}

CUDART_API cudaError_t cudaDeviceSynchronize(void) {
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return fail(e);
  return from_driver(rt().cu.cuCtxSynchronize());
}

// Destroys the current device's primary context (and everything in it) for the whole process.
CUDART_API cudaError_t cudaDeviceReset(void) {
  if (cudaError_t e = init(); e != cudaSuccess) return fail(e);
  const int d = current_ordinal();
  const int device = d >= 0 ? d : selected_device;
  {
    std::lock_guard<std::mutex> lock(rt().mutex);
    rt().retained[static_cast<std::size_t>(device)] = false;
    for (auto& [shadow, symbol] : rt().symbols) symbol.memory.erase(device);  // freed with it
  }
  return from_driver(rt().cu.cuDevicePrimaryCtxReset_v2(handle(device)));
}

CUDART_API cudaError_t cudaDeviceGetLimit(std::size_t* value, int limit) {
  if (value == nullptr) return fail(cudaErrorInvalidValue);
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return fail(e);
  return from_driver(rt().cu.cuCtxGetLimit(value, limit));
}

CUDART_API cudaError_t cudaDeviceSetLimit(int limit, std::size_t value) {
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return fail(e);
  return from_driver(rt().cu.cuCtxSetLimit(limit, value));
}

CUDART_API cudaError_t cudaDeviceGetCacheConfig(int* config) {
  if (config == nullptr) return fail(cudaErrorInvalidValue);
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return fail(e);
  return from_driver(rt().cu.cuCtxGetCacheConfig(config));
}

CUDART_API cudaError_t cudaDeviceSetCacheConfig(int config) {
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return fail(e);
  return from_driver(rt().cu.cuCtxSetCacheConfig(config));
}

CUDART_API cudaError_t cudaDeviceGetStreamPriorityRange(int* least, int* greatest) {
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return fail(e);
  return from_driver(rt().cu.cuCtxGetStreamPriorityRange(least, greatest));
}

CUDART_API cudaError_t cudaDeviceGetDefaultMemPool(void** pool, int device) {
  if (pool == nullptr) return fail(cudaErrorInvalidValue);
  if (cudaError_t e = init(); e != cudaSuccess) return fail(e);
  if (!valid_ordinal(device)) return fail(cudaErrorInvalidDevice);
  return from_driver(rt().cu.cuDeviceGetDefaultMemPool(pool, handle(device)));
}

CUDART_API cudaError_t cudaDeviceGetMemPool(void** pool, int device) {
  return cudaDeviceGetDefaultMemPool(pool, device);
}

// The best device for a wanted cudaDeviceProp: the simulator's answer is the first one.
CUDART_API cudaError_t cudaChooseDevice(int* device, const void* prop) {
  if (device == nullptr || prop == nullptr) return fail(cudaErrorInvalidValue);
  if (cudaError_t e = init(); e != cudaSuccess) return fail(e);
  *device = 0;
  return cudaSuccess;
}

// CUDA 11's deprecated names (exported by every build).
CUDART_API cudaError_t cudaThreadSynchronize(void) {
  return cudaDeviceSynchronize();
}
CUDART_API cudaError_t cudaThreadExit(void) {
  return cudaDeviceReset();
}

// ---- memory ----------------------------------------------------------------------------------

CUDART_API cudaError_t cudaMalloc(void** ptr, std::size_t size) {
  if (ptr == nullptr) return fail(cudaErrorInvalidValue);
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return fail(e);
  if (size == 0) {
    *ptr = nullptr;
    return cudaSuccess;
  }
  CUdeviceptr p = 0;
  if (CUresult rc = rt().cu.cuMemAlloc_v2(&p, size); rc != 0) return from_driver(rc);
  *ptr = reinterpret_cast<void*>(p);
  return cudaSuccess;
}

CUDART_API cudaError_t cudaFree(void* ptr) {
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return fail(e);
  if (ptr == nullptr) return cudaSuccess;
  return from_driver(rt().cu.cuMemFree_v2(reinterpret_cast<CUdeviceptr>(ptr)));
}

CUDART_API cudaError_t cudaMallocManaged(void** ptr, std::size_t size, unsigned int flags) {
  if (ptr == nullptr || size == 0) return fail(cudaErrorInvalidValue);
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return fail(e);
  CUdeviceptr p = 0;
  if (CUresult rc = rt().cu.cuMemAllocManaged(&p, size, flags); rc != 0) return from_driver(rc);
  *ptr = reinterpret_cast<void*>(p);
  return cudaSuccess;
}

CUDART_API cudaError_t cudaMallocPitch(void** ptr, std::size_t* pitch, std::size_t width,
                                       std::size_t height) {
  if (pitch == nullptr) return fail(cudaErrorInvalidValue);
  const std::size_t row = (width + 511) / 512 * 512;
  *pitch = row;
  return cudaMalloc(ptr, row * height);
}

CUDART_API cudaError_t cudaMallocAsync(void** ptr, std::size_t size, void* stream) {
  if (ptr == nullptr) return fail(cudaErrorInvalidValue);
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return fail(e);
  CUdeviceptr p = 0;
  if (CUresult rc = rt().cu.cuMemAllocAsync(&p, size, driver_stream(stream)); rc != 0)
    return from_driver(rc);
  *ptr = reinterpret_cast<void*>(p);
  return cudaSuccess;
}

CUDART_API cudaError_t cudaFreeAsync(void* ptr, void* stream) {
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return fail(e);
  return from_driver(
      rt().cu.cuMemFreeAsync(reinterpret_cast<CUdeviceptr>(ptr), driver_stream(stream)));
}

CUDART_API cudaError_t cudaHostAlloc(void** ptr, std::size_t size, unsigned int flags) {
  if (ptr == nullptr || size == 0) return fail(cudaErrorInvalidValue);
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return fail(e);
  return from_driver(rt().cu.cuMemHostAlloc(ptr, size, flags));
}

CUDART_API cudaError_t cudaMallocHost(void** ptr, std::size_t size) {
  return cudaHostAlloc(ptr, size, 0);
}

CUDART_API cudaError_t cudaFreeHost(void* ptr) {
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return fail(e);
  if (ptr == nullptr) return cudaSuccess;
  return from_driver(rt().cu.cuMemFreeHost(ptr));
}

CUDART_API cudaError_t cudaHostRegister(void* ptr, std::size_t size, unsigned int flags) {
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return fail(e);
  const CUresult rc = rt().cu.cuMemHostRegister_v2(ptr, size, flags);
  return from_driver(rc == 1 && ptr != nullptr ? cudaErrorHostMemoryAlreadyRegistered : rc);
}

CUDART_API cudaError_t cudaHostUnregister(void* ptr) {
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return fail(e);
  const CUresult rc = rt().cu.cuMemHostUnregister(ptr);
  return from_driver(rc == 1 ? cudaErrorHostMemoryNotRegistered : rc);
}

CUDART_API cudaError_t cudaHostGetDevicePointer(void** dev, void* host, unsigned int flags) {
  if (dev == nullptr) return fail(cudaErrorInvalidValue);
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return fail(e);
  CUdeviceptr p = 0;
  if (CUresult rc = rt().cu.cuMemHostGetDevicePointer_v2(&p, host, flags); rc != 0)
    return from_driver(rc);
  *dev = reinterpret_cast<void*>(p);
  return cudaSuccess;
}

CUDART_API cudaError_t cudaMemGetInfo(std::size_t* free, std::size_t* total) {
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return fail(e);
  return from_driver(rt().cu.cuMemGetInfo_v2(free, total));
}

CUDART_API cudaError_t cudaMemcpy(void* dst, const void* src, std::size_t count, int kind) {
  return memcpy_any(dst, src, count, kind, nullptr, false);
}

CUDART_API cudaError_t cudaMemcpyAsync(void* dst, const void* src, std::size_t count, int kind,
                                       void* stream) {
  return memcpy_any(dst, src, count, kind, stream, true);
}

namespace {
cudaError_t peer_copy(void* dst, int dst_device, const void* src, int src_device, std::size_t count,
                      void* stream, bool async) {
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return fail(e);
  if (!valid_ordinal(dst_device) || !valid_ordinal(src_device)) return fail(cudaErrorInvalidDevice);
  CUcontext dst_ctx = nullptr, src_ctx = nullptr;
  {
    std::lock_guard<std::mutex> lock(rt().mutex);
    for (int d : {dst_device, src_device}) {
      CUcontext c = nullptr;
      if (CUresult rc = primary(d, &c); rc != 0) return from_driver(rc);
      (d == dst_device ? dst_ctx : src_ctx) = c;
    }
  }
  const auto d = reinterpret_cast<CUdeviceptr>(dst);
  const auto s = reinterpret_cast<CUdeviceptr>(src);
  return from_driver(
      async ? rt().cu.cuMemcpyPeerAsync(d, dst_ctx, s, src_ctx, count, driver_stream(stream))
            : rt().cu.cuMemcpyPeer(d, dst_ctx, s, src_ctx, count));
}
}  // namespace

CUDART_API cudaError_t cudaMemcpyPeer(void* dst, int dst_device, const void* src, int src_device,
                                      std::size_t count) {
  return peer_copy(dst, dst_device, src, src_device, count, nullptr, false);
}

CUDART_API cudaError_t cudaMemcpyPeerAsync(void* dst, int dst_device, const void* src,
                                           int src_device, std::size_t count, void* stream) {
  return peer_copy(dst, dst_device, src, src_device, count, stream, true);
}

CUDART_API cudaError_t cudaMemset(void* ptr, int value, std::size_t count) {
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return fail(e);
  return from_driver(rt().cu.cuMemsetD8_v2(reinterpret_cast<CUdeviceptr>(ptr),
                                           static_cast<unsigned char>(value), count));
}

CUDART_API cudaError_t cudaMemsetAsync(void* ptr, int value, std::size_t count, void* stream) {
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return fail(e);
  return from_driver(rt().cu.cuMemsetD8Async(reinterpret_cast<CUdeviceptr>(ptr),
                                             static_cast<unsigned char>(value), count,
                                             driver_stream(stream)));
}

// cudaPointerAttributes: device memory, pinned host memory, managed memory, or unregistered
// (type 0) memory.
CUDART_API cudaError_t cudaPointerGetAttributes(PointerAttributes* attributes, const void* ptr) {
  if (attributes == nullptr) return fail(cudaErrorInvalidValue);
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return fail(e);
  PointerAttributes out{};
  const auto p = reinterpret_cast<CUdeviceptr>(ptr);
  unsigned type = 0;
  if (rt().cu.cuPointerGetAttribute(&type, 2, p) == 0) {  // CU_POINTER_ATTRIBUTE_MEMORY_TYPE
    int ordinal = 0;
    rt().cu.cuPointerGetAttribute(&ordinal, 9, p);  // DEVICE_ORDINAL
    int managed = 0;
    rt().cu.cuPointerGetAttribute(&managed, 8, p);  // IS_MANAGED
    out.device = ordinal;
    out.type = managed != 0 ? 3 : type == 2 ? 2 : 1;  // managed : device : host
    out.devicePointer = const_cast<void*>(ptr);
    out.hostPointer = type == 2 && managed == 0 ? nullptr : const_cast<void*>(ptr);
  } else {
    out.type = 0;
    out.device = -2;
  }
  std::memcpy(attributes, &out,
              GPUSEL_CUDART_MAJOR >= 13 ? sizeof(PointerAttributes) : kPointerAttributes12Size);
  return cudaSuccess;
}

// ---- streams and events ----------------------------------------------------------------------

CUDART_API cudaError_t cudaStreamCreateWithPriority(void** stream, unsigned int flags,
                                                    int priority) {
  if (stream == nullptr) return fail(cudaErrorInvalidValue);
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return fail(e);
  return from_driver(rt().cu.cuStreamCreateWithPriority(stream, flags, priority));
}

CUDART_API cudaError_t cudaStreamCreateWithFlags(void** stream, unsigned int flags) {
  return cudaStreamCreateWithPriority(stream, flags, 0);
}

CUDART_API cudaError_t cudaStreamCreate(void** stream) {
  return cudaStreamCreateWithPriority(stream, 0, 0);
}

CUDART_API cudaError_t cudaStreamDestroy(void* stream) {
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return fail(e);
  return from_driver(rt().cu.cuStreamDestroy_v2(stream));
}

CUDART_API cudaError_t cudaStreamSynchronize(void* stream) {
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return fail(e);
  return from_driver(rt().cu.cuStreamSynchronize(driver_stream(stream)));
}

CUDART_API cudaError_t cudaStreamQuery(void* stream) {
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return fail(e);
  return from_driver(rt().cu.cuStreamQuery(driver_stream(stream)));
}

CUDART_API cudaError_t cudaStreamWaitEvent(void* stream, void* event, unsigned int flags) {
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return fail(e);
  return from_driver(rt().cu.cuStreamWaitEvent(driver_stream(stream), event, flags));
}

CUDART_API cudaError_t cudaStreamGetPriority(void* stream, int* priority) {
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return fail(e);
  return from_driver(rt().cu.cuStreamGetPriority(driver_stream(stream), priority));
}

CUDART_API cudaError_t cudaStreamGetFlags(void* stream, unsigned int* flags) {
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return fail(e);
  return from_driver(rt().cu.cuStreamGetFlags(driver_stream(stream), flags));
}

CUDART_API cudaError_t cudaStreamGetDevice(void* stream, int* device) {
  if (device == nullptr) return fail(cudaErrorInvalidValue);
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return fail(e);
  CUdevice h = 0;
  if (CUresult rc = rt().cu.cuStreamGetDevice(driver_stream(stream), &h); rc != 0)
    return from_driver(rc);
  for (int i = 0; i < rt().device_count; ++i) {
    if (handle(i) == h) *device = i;
  }
  return cudaSuccess;
}

// Stream capture and graphs: the driver records what a capturing stream is given and replays it
// when the graph is launched (sim/cuda_graph.cpp).
CUDART_API cudaError_t cudaStreamIsCapturing(void* stream, int* status) {
  if (status == nullptr) return fail(cudaErrorInvalidValue);
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return fail(e);
  return from_driver(rt().cu.cuStreamIsCapturing(driver_stream(stream), status));
}

CUDART_API cudaError_t cudaStreamBeginCapture(void* stream, int mode) {
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return fail(e);
  return from_driver(rt().cu.cuStreamBeginCapture_v2(driver_stream(stream), mode));
}

CUDART_API cudaError_t cudaStreamEndCapture(void* stream, void** graph) {
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return fail(e);
  return from_driver(rt().cu.cuStreamEndCapture(driver_stream(stream), graph));
}

CUDART_API cudaError_t cudaGraphCreate(void** graph, unsigned int flags) {
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return fail(e);
  return from_driver(rt().cu.cuGraphCreate(graph, flags));
}

CUDART_API cudaError_t cudaGraphGetNodes(void* graph, void** nodes, std::size_t* count) {
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return fail(e);
  return from_driver(rt().cu.cuGraphGetNodes(graph, nodes, count));
}

CUDART_API cudaError_t cudaGraphDestroy(void* graph) {
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return fail(e);
  return from_driver(rt().cu.cuGraphDestroy(graph));
}

CUDART_API cudaError_t cudaGraphInstantiateWithFlags(void** exec, void* graph,
                                                     unsigned long long flags) {
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return fail(e);
  return from_driver(rt().cu.cuGraphInstantiateWithFlags(exec, graph, flags));
}

#if GPUSEL_CUDART_MAJOR >= 12
CUDART_API cudaError_t cudaGraphInstantiate(void** exec, void* graph, unsigned long long flags) {
  return cudaGraphInstantiateWithFlags(exec, graph, flags);
}
#else
// CUDA 11's: where instantiation failed, and a log (none here: capture records only what runs).
CUDART_API cudaError_t cudaGraphInstantiate(void** exec, void* graph, void** error_node, char* log,
                                            std::size_t log_size) {
  if (error_node != nullptr) *error_node = nullptr;
  if (log != nullptr && log_size > 0) log[0] = '\0';
  return cudaGraphInstantiateWithFlags(exec, graph, 0);
}
#endif

CUDART_API cudaError_t cudaGraphExecDestroy(void* exec) {
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return fail(e);
  return from_driver(rt().cu.cuGraphExecDestroy(exec));
}

CUDART_API cudaError_t cudaGraphLaunch(void* exec, void* stream) {
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return fail(e);
  return from_driver(rt().cu.cuGraphLaunch(exec, driver_stream(stream)));
}

CUDART_API cudaError_t cudaEventCreateWithFlags(void** event, unsigned int flags) {
  if (event == nullptr) return fail(cudaErrorInvalidValue);
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return fail(e);
  return from_driver(rt().cu.cuEventCreate(event, flags));
}

CUDART_API cudaError_t cudaEventCreate(void** event) {
  return cudaEventCreateWithFlags(event, 0);
}

CUDART_API cudaError_t cudaEventRecord(void* event, void* stream) {
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return fail(e);
  return from_driver(rt().cu.cuEventRecord(event, driver_stream(stream)));
}

CUDART_API cudaError_t cudaEventRecordWithFlags(void* event, void* stream, unsigned int flags) {
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return fail(e);
  return from_driver(rt().cu.cuEventRecordWithFlags(event, driver_stream(stream), flags));
}

CUDART_API cudaError_t cudaEventQuery(void* event) {
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return fail(e);
  return from_driver(rt().cu.cuEventQuery(event));
}

CUDART_API cudaError_t cudaEventSynchronize(void* event) {
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return fail(e);
  return from_driver(rt().cu.cuEventSynchronize(event));
}

CUDART_API cudaError_t cudaEventElapsedTime(float* ms, void* start, void* end) {
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return fail(e);
  return from_driver(rt().cu.cuEventElapsedTime(ms, start, end));
}

CUDART_API cudaError_t cudaEventElapsedTime_v2(float* ms, void* start, void* end) {
  return cudaEventElapsedTime(ms, start, end);
}

CUDART_API cudaError_t cudaEventDestroy(void* event) {
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return fail(e);
  return from_driver(rt().cu.cuEventDestroy_v2(event));
}

// ---- calls that need no kernel: 2D copies and memsets, symbols, host functions, managed memory
// hints, pools, IPC handles, host flags ---------------------------------------------------------

namespace {

constexpr int kMemoryHost = 1, kMemoryDevice = 2, kMemoryUnified = 4;

cudaError_t copy_2d(void* dst, std::size_t dpitch, const void* src, std::size_t spitch,
                    std::size_t width, std::size_t height, int kind, void* stream, bool async) {
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return fail(e);
  int src_type = 0, dst_type = 0;
  switch (kind) {
    case kHostToHost:
      src_type = dst_type = kMemoryHost;
      break;
    case kHostToDevice:
      src_type = kMemoryHost;
      dst_type = kMemoryDevice;
      break;
    case kDeviceToHost:
      src_type = kMemoryDevice;
      dst_type = kMemoryHost;
      break;
    case kDeviceToDevice:
      src_type = dst_type = kMemoryDevice;
      break;
    case kDefault:
      src_type = dst_type = kMemoryUnified;
      break;
    default:
      return fail(cudaErrorInvalidMemcpyDirection);
  }
  if (width > dpitch || width > spitch) return fail(cudaErrorInvalidPitchValue);
  if (width == 0 || height == 0) return cudaSuccess;
  Memcpy2D p{};
  p.srcMemoryType = src_type;
  p.srcHost = src;
  p.srcDevice = reinterpret_cast<CUdeviceptr>(src);
  p.srcPitch = spitch;
  p.dstMemoryType = dst_type;
  p.dstHost = dst;
  p.dstDevice = reinterpret_cast<CUdeviceptr>(dst);
  p.dstPitch = dpitch;
  p.WidthInBytes = width;
  p.Height = height;
  const Driver& cu = rt().cu;
  return from_driver(async ? cu.cuMemcpy2DAsync_v2(&p, driver_stream(stream))
                           : cu.cuMemcpy2D_v2(&p));
}

// The device memory of a registered variable on the current device (made there on first use,
// holding the host shadow's bytes) and its size.
cudaError_t symbol_memory(const void* shadow, CUdeviceptr* at, std::size_t* size) {
  int device = 0;
  if (cudaError_t e = ensure_context(&device); e != cudaSuccess) return fail(e);
  std::lock_guard<std::mutex> lock(rt().mutex);
  auto it = rt().symbols.find(shadow);
  if (shadow == nullptr || it == rt().symbols.end()) return fail(cudaErrorInvalidSymbol);
  Symbol& symbol = it->second;
  auto mem = symbol.memory.find(device);
  if (mem == symbol.memory.end()) {
    CUdeviceptr p = 0;
    if (CUresult rc = rt().cu.cuMemAlloc_v2(&p, symbol.size); rc != 0) return from_driver(rc);
    // A module load's initialisation, not a copy the program queued: no simulated time.
    std::memcpy(reinterpret_cast<void*>(p), shadow, symbol.size);
    mem = symbol.memory.emplace(device, p).first;
  }
  *at = mem->second;
  if (size != nullptr) *size = symbol.size;
  return cudaSuccess;
}

// cudaMemcpyToSymbol and cudaMemcpyFromSymbol (to: true for the first), count bytes at offset.
cudaError_t symbol_copy(bool to, void* other, const void* shadow, std::size_t count,
                        std::size_t offset, int kind, void* stream, bool async) {
  const bool direction_ok =
      kind == kDeviceToDevice || kind == kDefault || kind == (to ? kHostToDevice : kDeviceToHost);
  if (!direction_ok) return fail(cudaErrorInvalidMemcpyDirection);
  CUdeviceptr at = 0;
  std::size_t size = 0;
  if (cudaError_t e = symbol_memory(shadow, &at, &size); e != cudaSuccess) return e;
  if (offset > size || count > size - offset) return fail(cudaErrorInvalidValue);
  void* symbol = reinterpret_cast<void*>(at + offset);
  return to ? memcpy_any(symbol, other, count, kind, stream, async)
            : memcpy_any(other, symbol, count, kind, stream, async);
}

// A cudaMemPrefetchAsync or cudaMemAdvise location: a device ordinal, the host, a NUMA node.
cudaError_t check_location(const MemLocation& where) {
  if (where.type == 1 && !valid_ordinal(where.id)) return fail(cudaErrorInvalidDevice);
  return cudaSuccess;
}

#if GPUSEL_CUDART_MAJOR < 13
// CUDA 11 and 12 name the destination by ordinal, cudaCpuDeviceId (-1) for the host.
MemLocation location_of(int device) {
  return device == -1 ? MemLocation{2, 0} : MemLocation{1, device};
}
#endif

cudaError_t prefetch(const void* ptr, std::size_t count, MemLocation where, unsigned flags,
                     void* stream) {
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return fail(e);
  if (cudaError_t e = check_location(where); e != cudaSuccess) return e;
  return from_driver(rt().cu.cuMemPrefetchAsync_v2(reinterpret_cast<CUdeviceptr>(ptr), count, where,
                                                   flags, driver_stream(stream)));
}

cudaError_t advise(const void* ptr, std::size_t count, int advice, MemLocation where) {
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return fail(e);
  if (advice >= 3 && advice != 4) {  // a location matters: preferred location, accessed by
    if (cudaError_t e = check_location(where); e != cudaSuccess) return e;
  }
  return from_driver(
      rt().cu.cuMemAdvise_v2(reinterpret_cast<CUdeviceptr>(ptr), count, advice, where));
}

}  // namespace

CUDART_API cudaError_t cudaMemcpy2D(void* dst, std::size_t dpitch, const void* src,
                                    std::size_t spitch, std::size_t width, std::size_t height,
                                    int kind) {
  return copy_2d(dst, dpitch, src, spitch, width, height, kind, nullptr, false);
}

CUDART_API cudaError_t cudaMemcpy2DAsync(void* dst, std::size_t dpitch, const void* src,
                                         std::size_t spitch, std::size_t width, std::size_t height,
                                         int kind, void* stream) {
  return copy_2d(dst, dpitch, src, spitch, width, height, kind, stream, true);
}

CUDART_API cudaError_t cudaMemset2D(void* ptr, std::size_t pitch, int value, std::size_t width,
                                    std::size_t height) {
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return fail(e);
  return from_driver(rt().cu.cuMemsetD2D8_v2(reinterpret_cast<CUdeviceptr>(ptr), pitch,
                                             static_cast<unsigned char>(value), width, height));
}

CUDART_API cudaError_t cudaMemset2DAsync(void* ptr, std::size_t pitch, int value, std::size_t width,
                                         std::size_t height, void* stream) {
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return fail(e);
  return from_driver(rt().cu.cuMemsetD2D8Async(reinterpret_cast<CUdeviceptr>(ptr), pitch,
                                               static_cast<unsigned char>(value), width, height,
                                               driver_stream(stream)));
}

CUDART_API cudaError_t cudaMemcpyToSymbol(const void* symbol, const void* src, std::size_t count,
                                          std::size_t offset, int kind) {
  return symbol_copy(true, const_cast<void*>(src), symbol, count, offset, kind, nullptr, false);
}

CUDART_API cudaError_t cudaMemcpyFromSymbol(void* dst, const void* symbol, std::size_t count,
                                            std::size_t offset, int kind) {
  return symbol_copy(false, dst, symbol, count, offset, kind, nullptr, false);
}

CUDART_API cudaError_t cudaMemcpyToSymbolAsync(const void* symbol, const void* src,
                                               std::size_t count, std::size_t offset, int kind,
                                               void* stream) {
  return symbol_copy(true, const_cast<void*>(src), symbol, count, offset, kind, stream, true);
}

CUDART_API cudaError_t cudaMemcpyFromSymbolAsync(void* dst, const void* symbol, std::size_t count,
                                                 std::size_t offset, int kind, void* stream) {
  return symbol_copy(false, dst, symbol, count, offset, kind, stream, true);
}

CUDART_API cudaError_t cudaGetSymbolAddress(void** ptr, const void* symbol) {
  if (ptr == nullptr) return fail(cudaErrorInvalidValue);
  CUdeviceptr at = 0;
  if (cudaError_t e = symbol_memory(symbol, &at, nullptr); e != cudaSuccess) return e;
  *ptr = reinterpret_cast<void*>(at);
  return cudaSuccess;
}

CUDART_API cudaError_t cudaGetSymbolSize(std::size_t* size, const void* symbol) {
  if (size == nullptr) return fail(cudaErrorInvalidValue);
  if (cudaError_t e = init(); e != cudaSuccess) return fail(e);
  std::lock_guard<std::mutex> lock(rt().mutex);
  auto it = rt().symbols.find(symbol);
  if (symbol == nullptr || it == rt().symbols.end()) return fail(cudaErrorInvalidSymbol);
  *size = it->second.size;
  return cudaSuccess;
}

// Host functions and callbacks run on the calling thread once the stream's earlier work is done,
// before the call returns (the simulated driver's choice: sim/cuda_kernel_free.cpp).
CUDART_API cudaError_t cudaLaunchHostFunc(void* stream, HostFn fn, void* data) {
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return fail(e);
  return from_driver(rt().cu.cuLaunchHostFunc(driver_stream(stream), fn, data));
}

CUDART_API cudaError_t cudaStreamAddCallback(void* stream, StreamCallback callback, void* data,
                                             unsigned int flags) {
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return fail(e);
  return from_driver(rt().cu.cuStreamAddCallback(driver_stream(stream), callback, data, flags));
}

#if GPUSEL_CUDART_MAJOR >= 13
CUDART_API cudaError_t cudaMemPrefetchAsync(const void* ptr, std::size_t count,
                                            MemLocation location, unsigned int flags,
                                            void* stream) {
  return prefetch(ptr, count, location, flags, stream);
}
CUDART_API cudaError_t cudaMemAdvise(const void* ptr, std::size_t count, int advice,
                                     MemLocation location) {
  return advise(ptr, count, advice, location);
}
CUDART_API cudaError_t cudaMemPrefetchAsync_ptsz(const void* ptr, std::size_t count,
                                                 MemLocation location, unsigned int flags,
                                                 void* stream) {
  return prefetch(ptr, count, location, flags, stream);
}
#else
CUDART_API cudaError_t cudaMemPrefetchAsync(const void* ptr, std::size_t count, int device,
                                            void* stream) {
  return prefetch(ptr, count, location_of(device), 0, stream);
}
CUDART_API cudaError_t cudaMemAdvise(const void* ptr, std::size_t count, int advice, int device) {
  return advise(ptr, count, advice, location_of(device));
}
CUDART_API cudaError_t cudaMemPrefetchAsync_ptsz(const void* ptr, std::size_t count, int device,
                                                 void* stream) {
  return prefetch(ptr, count, location_of(device), 0, stream);
}
#endif

CUDART_API cudaError_t cudaMemPoolSetAttribute(void* pool, int attribute, void* value) {
  if (cudaError_t e = init(); e != cudaSuccess) return fail(e);
  return from_driver(rt().cu.cuMemPoolSetAttribute(pool, attribute, value));
}

CUDART_API cudaError_t cudaMemPoolGetAttribute(void* pool, int attribute, void* value) {
  if (cudaError_t e = init(); e != cudaSuccess) return fail(e);
  return from_driver(rt().cu.cuMemPoolGetAttribute(pool, attribute, value));
}

CUDART_API cudaError_t cudaStreamGetId(void* stream, unsigned long long* id) {
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return fail(e);
  return from_driver(rt().cu.cuStreamGetId(driver_stream(stream), id));
}

// A handle naming a device allocation; opening one (cudaIpcOpenMemHandle) is not supported.
CUDART_API cudaError_t cudaIpcGetMemHandle(IpcMemHandle* handle, void* ptr) {
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return fail(e);
  return from_driver(rt().cu.cuIpcGetMemHandle(handle, reinterpret_cast<CUdeviceptr>(ptr)));
}

CUDART_API cudaError_t cudaHostGetFlags(unsigned int* flags, void* host) {
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return fail(e);
  return from_driver(rt().cu.cuMemHostGetFlags(flags, host));
}

// ---- driver entry points, channel descriptions, profiling ------------------------------------

CUDART_API cudaError_t cudaGetDriverEntryPointByVersion(const char* symbol, void** fn,
                                                        unsigned int version,
                                                        unsigned long long flags, int* status) {
  if (symbol == nullptr || fn == nullptr) return fail(cudaErrorInvalidValue);
  if (cudaError_t e = init(); e != cudaSuccess) return fail(e);
  return from_driver(rt().cu.cuGetProcAddress_v2(symbol, fn, static_cast<int>(version),
                                                 flags == 0 ? 1ull : flags, status));
}

CUDART_API cudaError_t cudaGetDriverEntryPoint(const char* symbol, void** fn,
                                               unsigned long long flags, int* status) {
  return cudaGetDriverEntryPointByVersion(symbol, fn, static_cast<unsigned>(kRuntimeVersion), flags,
                                          status);
}

CUDART_API ChannelFormatDesc cudaCreateChannelDesc(int x, int y, int z, int w, int f) {
  return ChannelFormatDesc{x, y, z, w, f};
}

CUDART_API cudaError_t cudaProfilerStart(void) {
  return cudaSuccess;
}

CUDART_API cudaError_t cudaProfilerStop(void) {
  return cudaSuccess;
}

// ---- what nvcc-built programs call at start-up, and kernel launches --------------------------
// A fat binary registers and gets a handle; its kernels register by host stub. No device code
// runs: a launch of a registered kernel returns cudaErrorNotSupported (said once on stderr), of
// anything else cudaErrorInvalidDeviceFunction. Never a crash.

namespace {
struct FatBinary {
  const void* image;
};
struct CallConfiguration {
  Dim3 grid, block;
  std::size_t shared;
  void* stream;
};
thread_local std::vector<CallConfiguration> configurations;

cudaError_t launch(const void* function) {
  std::string name;
  {
    std::lock_guard<std::mutex> lock(rt().mutex);
    auto it = rt().functions.find(function);
    if (it == rt().functions.end()) return fail(cudaErrorInvalidDeviceFunction);
    name = it->second;
  }
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return fail(e);
  if (!launch_reported.exchange(true)) {
    say("kernel " + name +
        " was not run: the simulator runs no device code (kernel launches return "
        "cudaErrorNotSupported; see docs/simulator.md)");
  }
  return fail(cudaErrorNotSupported);
}
}  // namespace

CUDART_API void** __cudaRegisterFatBinary(void* image) {
  return reinterpret_cast<void**>(new FatBinary{image});
}

CUDART_API void __cudaRegisterFatBinaryEnd(void**) {}

CUDART_API void __cudaUnregisterFatBinary(void** handle) {
  delete reinterpret_cast<FatBinary*>(handle);
}

// __managed__ variables. nvcc's host code reaches each through a pointer of its own (0 until the
// module is initialised) that registration hands over; the first host access initialises the
// module (__cudaInitModule), which gives each variable managed memory of its size and points its
// pointer there. As for __device__ variables, the initialiser lives in the device image the
// simulator does not read: the memory starts zeroed.
struct ManagedVariable {
  void** pointer = nullptr;
  std::size_t size = 0;
};
std::vector<ManagedVariable>& managed_variables() {
  static auto* v = new std::vector<ManagedVariable>;  // guarded by rt().mutex; never destroyed
  return *v;
}

CUDART_API char __cudaInitModule(void**) {
  if (ensure_context() != cudaSuccess) return 0;
  std::lock_guard<std::mutex> lock(rt().mutex);
  for (ManagedVariable& v : managed_variables()) {
    if (v.pointer == nullptr || *v.pointer != nullptr) continue;
    CUdeviceptr p = 0;
    if (rt().cu.cuMemAllocManaged(&p, v.size, 1 /* CU_MEM_ATTACH_GLOBAL */) != 0) return 0;
    std::memset(reinterpret_cast<void*>(p), 0, v.size);
    *v.pointer = reinterpret_cast<void*>(p);
  }
  return 1;
}

CUDART_API void __cudaRegisterFunction(void**, const char* host_function, char*,
                                       const char* device_name, int, void*, void*, void*, void*,
                                       int*) {
  std::lock_guard<std::mutex> lock(rt().mutex);
  rt().functions[host_function] = device_name != nullptr ? device_name : "(unnamed)";
}

CUDART_API void __cudaRegisterVar(void**, char* shadow, char*, const char* name, int,
                                  std::size_t size, int, int) {
  std::lock_guard<std::mutex> lock(rt().mutex);
  Symbol& symbol = rt().symbols[shadow];
  symbol.size = size;
  symbol.name = name != nullptr ? name : "(unnamed)";
}
CUDART_API void __cudaRegisterManagedVar(void**, void** pointer, char*, const char*, int,
                                         std::size_t size, int, int) {
  std::lock_guard<std::mutex> lock(rt().mutex);
  managed_variables().push_back({pointer, size});
}
CUDART_API void __cudaRegisterHostVar(void**, const char*, char*, std::size_t) {}
CUDART_API void __cudaRegisterUnifiedTable(void**, const void*) {}
CUDART_API void __cudaRegisterTexture(void**, const void*, const void**, const char*, int, int,
                                      int) {}
CUDART_API void __cudaRegisterSurface(void**, const void*, const void**, const char*, int, int) {}

CUDART_API unsigned __cudaPushCallConfiguration(Dim3 grid, Dim3 block, std::size_t shared,
                                                void* stream) {
  configurations.push_back({grid, block, shared, stream});
  return 0;
}

// `stream` is where to store the stream: nvcc's code passes a cudaStream_t's address, which
// host_runtime.h declares as void*.
CUDART_API cudaError_t __cudaPopCallConfiguration(Dim3* grid, Dim3* block, std::size_t* shared,
                                                  void* stream) {
  if (configurations.empty()) return fail(cudaErrorMissingConfiguration);
  const CallConfiguration c = configurations.back();
  configurations.pop_back();
  if (grid != nullptr) *grid = c.grid;
  if (block != nullptr) *block = c.block;
  if (shared != nullptr) *shared = c.shared;
  if (stream != nullptr) *static_cast<void**>(stream) = c.stream;
  return cudaSuccess;
}

// CUDA 12.8+'s launch path: the kernel handle is the host stub itself.
CUDART_API cudaError_t __cudaGetKernel(void** kernel, const void* function) {
  if (kernel == nullptr) return fail(cudaErrorInvalidValue);
  std::lock_guard<std::mutex> lock(rt().mutex);
  if (rt().functions.count(function) == 0) return fail(cudaErrorInvalidDeviceFunction);
  *kernel = const_cast<void*>(function);
  return cudaSuccess;
}

CUDART_API cudaError_t __cudaLaunchKernel(void* kernel, Dim3, Dim3, void**, std::size_t, void*) {
  return launch(kernel);
}

CUDART_API cudaError_t __cudaLaunchKernel_ptsz(void* kernel, Dim3, Dim3, void**, std::size_t,
                                               void*) {
  return launch(kernel);
}

CUDART_API cudaError_t cudaLaunchKernel(const void* function, Dim3, Dim3, void**, std::size_t,
                                        void*) {
  return launch(function);
}

CUDART_API cudaError_t cudaLaunchCooperativeKernel(const void* function, Dim3, Dim3, void**,
                                                   std::size_t, void*) {
  return launch(function);
}

CUDART_API cudaError_t cudaLaunchKernelExC(const void* config, const void* function, void**) {
  if (config == nullptr) return fail(cudaErrorInvalidValue);
  return launch(function);
}

// Settings of a registered kernel are accepted (they change nothing here); of anything else, an
// invalid device function. Its attributes and occupancy need its compiled code: not supported.
namespace {
cudaError_t registered(const void* function) {
  if (cudaError_t e = init(); e != cudaSuccess) return fail(e);
  std::lock_guard<std::mutex> lock(rt().mutex);
  return rt().functions.count(function) != 0 ? cudaSuccess : fail(cudaErrorInvalidDeviceFunction);
}
}  // namespace

CUDART_API cudaError_t cudaFuncSetAttribute(const void* function, int, int) {
  return registered(function);
}
CUDART_API cudaError_t cudaFuncSetCacheConfig(const void* function, int) {
  return registered(function);
}
CUDART_API cudaError_t cudaFuncGetAttributes(void* attributes, const void* function) {
  if (attributes == nullptr) return fail(cudaErrorInvalidValue);
  if (cudaError_t e = registered(function); e != cudaSuccess) return e;
  return fail(cudaErrorNotSupported);
}
CUDART_API cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int* blocks,
                                                                              const void* function,
                                                                              int, std::size_t,
                                                                              unsigned int) {
  if (blocks == nullptr) return fail(cudaErrorInvalidValue);
  if (cudaError_t e = registered(function); e != cudaSuccess) return e;
  return fail(cudaErrorNotSupported);
}
CUDART_API cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks,
                                                                     const void* function, int size,
                                                                     std::size_t shared) {
  return cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(blocks, function, size, shared, 0);
}

// ---- per-thread default stream variants (nvcc --default-stream per-thread) -------------------
// The simulator has one default stream per device, so each is the call it varies.
CUDART_API cudaError_t cudaMemcpy_ptds(void* dst, const void* src, std::size_t n, int kind) {
  return cudaMemcpy(dst, src, n, kind);
}
CUDART_API cudaError_t cudaMemcpyAsync_ptsz(void* dst, const void* src, std::size_t n, int kind,
                                            void* stream) {
  return cudaMemcpyAsync(dst, src, n, kind, stream);
}
CUDART_API cudaError_t cudaMemset_ptds(void* ptr, int value, std::size_t n) {
  return cudaMemset(ptr, value, n);
}
CUDART_API cudaError_t cudaMemsetAsync_ptsz(void* ptr, int value, std::size_t n, void* stream) {
  return cudaMemsetAsync(ptr, value, n, stream);
}
CUDART_API cudaError_t cudaStreamSynchronize_ptsz(void* stream) {
  return cudaStreamSynchronize(stream);
}
CUDART_API cudaError_t cudaStreamQuery_ptsz(void* stream) {
  return cudaStreamQuery(stream);
}
CUDART_API cudaError_t cudaStreamWaitEvent_ptsz(void* stream, void* event, unsigned int flags) {
  return cudaStreamWaitEvent(stream, event, flags);
}
CUDART_API cudaError_t cudaStreamGetPriority_ptsz(void* stream, int* priority) {
  return cudaStreamGetPriority(stream, priority);
}
CUDART_API cudaError_t cudaStreamGetFlags_ptsz(void* stream, unsigned int* flags) {
  return cudaStreamGetFlags(stream, flags);
}
CUDART_API cudaError_t cudaStreamIsCapturing_ptsz(void* stream, int* status) {
  return cudaStreamIsCapturing(stream, status);
}
CUDART_API cudaError_t cudaStreamBeginCapture_ptsz(void* stream, int mode) {
  return cudaStreamBeginCapture(stream, mode);
}
CUDART_API cudaError_t cudaStreamEndCapture_ptsz(void* stream, void** graph) {
  return cudaStreamEndCapture(stream, graph);
}
CUDART_API cudaError_t cudaGraphLaunch_ptsz(void* exec, void* stream) {
  return cudaGraphLaunch(exec, stream);
}
CUDART_API cudaError_t cudaEventRecord_ptsz(void* event, void* stream) {
  return cudaEventRecord(event, stream);
}
CUDART_API cudaError_t cudaEventRecordWithFlags_ptsz(void* event, void* stream,
                                                     unsigned int flags) {
  return cudaEventRecordWithFlags(event, stream, flags);
}
CUDART_API cudaError_t cudaMallocAsync_ptsz(void** ptr, std::size_t size, void* stream) {
  return cudaMallocAsync(ptr, size, stream);
}
CUDART_API cudaError_t cudaFreeAsync_ptsz(void* ptr, void* stream) {
  return cudaFreeAsync(ptr, stream);
}
CUDART_API cudaError_t cudaMemcpyPeer_ptds(void* dst, int dd, const void* src, int sd,
                                           std::size_t n) {
  return cudaMemcpyPeer(dst, dd, src, sd, n);
}
CUDART_API cudaError_t cudaMemcpyPeerAsync_ptsz(void* dst, int dd, const void* src, int sd,
                                                std::size_t n, void* stream) {
  return cudaMemcpyPeerAsync(dst, dd, src, sd, n, stream);
}
CUDART_API cudaError_t cudaLaunchKernel_ptsz(const void* function, Dim3 g, Dim3 b, void** args,
                                             std::size_t shared, void* stream) {
  return cudaLaunchKernel(function, g, b, args, shared, stream);
}
CUDART_API cudaError_t cudaLaunchCooperativeKernel_ptsz(const void* function, Dim3 g, Dim3 b,
                                                        void** args, std::size_t shared,
                                                        void* stream) {
  return cudaLaunchCooperativeKernel(function, g, b, args, shared, stream);
}
CUDART_API cudaError_t cudaLaunchKernelExC_ptsz(const void* config, const void* function,
                                                void** args) {
  return cudaLaunchKernelExC(config, function, args);
}

CUDART_API cudaError_t cudaMemcpy2D_ptds(void* dst, std::size_t dpitch, const void* src,
                                         std::size_t spitch, std::size_t width, std::size_t height,
                                         int kind) {
  return cudaMemcpy2D(dst, dpitch, src, spitch, width, height, kind);
}
CUDART_API cudaError_t cudaMemcpy2DAsync_ptsz(void* dst, std::size_t dpitch, const void* src,
                                              std::size_t spitch, std::size_t width,
                                              std::size_t height, int kind, void* stream) {
  return cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, height, kind, stream);
}
CUDART_API cudaError_t cudaMemset2D_ptds(void* ptr, std::size_t pitch, int value, std::size_t width,
                                         std::size_t height) {
  return cudaMemset2D(ptr, pitch, value, width, height);
}
CUDART_API cudaError_t cudaMemset2DAsync_ptsz(void* ptr, std::size_t pitch, int value,
                                              std::size_t width, std::size_t height, void* stream) {
  return cudaMemset2DAsync(ptr, pitch, value, width, height, stream);
}
CUDART_API cudaError_t cudaMemcpyToSymbol_ptds(const void* symbol, const void* src, std::size_t n,
                                               std::size_t offset, int kind) {
  return cudaMemcpyToSymbol(symbol, src, n, offset, kind);
}
CUDART_API cudaError_t cudaMemcpyFromSymbol_ptds(void* dst, const void* symbol, std::size_t n,
                                                 std::size_t offset, int kind) {
  return cudaMemcpyFromSymbol(dst, symbol, n, offset, kind);
}
CUDART_API cudaError_t cudaMemcpyToSymbolAsync_ptsz(const void* symbol, const void* src,
                                                    std::size_t n, std::size_t offset, int kind,
                                                    void* stream) {
  return cudaMemcpyToSymbolAsync(symbol, src, n, offset, kind, stream);
}
CUDART_API cudaError_t cudaMemcpyFromSymbolAsync_ptsz(void* dst, const void* symbol, std::size_t n,
                                                      std::size_t offset, int kind, void* stream) {
  return cudaMemcpyFromSymbolAsync(dst, symbol, n, offset, kind, stream);
}
CUDART_API cudaError_t cudaLaunchHostFunc_ptsz(void* stream, HostFn fn, void* data) {
  return cudaLaunchHostFunc(stream, fn, data);
}
CUDART_API cudaError_t cudaStreamAddCallback_ptsz(void* stream, StreamCallback callback, void* data,
                                                  unsigned int flags) {
  return cudaStreamAddCallback(stream, callback, data, flags);
}
CUDART_API cudaError_t cudaStreamGetId_ptsz(void* stream, unsigned long long* id) {
  return cudaStreamGetId(stream, id);
}

// ---- everything else: not modelled ------------------------------------------------------------
// The rest of NVIDIA's libcudart exports (cudart_unmodelled.inc): cudaErrorNotSupported, kept
// as the thread's last error, arguments untouched. They take no parameters here: on the C calling
// convention the caller cleans up, so a call with any arguments returns safely.
#define SIM_CUDART_UNMODELLED(name)     \
  CUDART_API cudaError_t name() {       \
    return fail(cudaErrorNotSupported); \
  }
#include "cudart_unmodelled.inc"
#undef SIM_CUDART_UNMODELLED
