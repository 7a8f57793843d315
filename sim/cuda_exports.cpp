// The simulated libcuda.so.1's exported functions: each a traced wrapper around
// gpusel::sim::cuda::impl (the other cuda_*.cpp files), and cuGetProcAddress's table of them.
#include <cstring>
#include <string>
#include <tuple>
#include <type_traits>

#include "cuda_sim.hpp"
#include "trace.hpp"

#if defined(_WIN32)
#define CUDA_SIM_API extern "C" __declspec(dllexport)
#else
#define CUDA_SIM_API extern "C" __attribute__((visibility("default")))
#endif

namespace impl = gpusel::sim::cuda::impl;
using gpusel::sim::cuda::error_name;

// ---- the exported entry points: traced wrappers around impl:: --------------------------------
#define SIM_CU(name, params, args)                                              \
  CUDA_SIM_API CUresult name params {                                           \
    const CUresult rc = impl::name args;                                        \
    if (gpusel::sim::trace::on())                                               \
      std::apply(                                                               \
          [&](const auto&... traced_args) {                                     \
            gpusel::sim::trace::call("libcuda.so.1", #name, rc, error_name(rc), \
                                     rc == CUDA_SUCCESS, traced_args...);       \
          },                                                                    \
          std::make_tuple args);                                                \
    return rc;                                                                  \
  }
#define SIM_CU_AS(name, implementation, params, args)                           \
  CUDA_SIM_API CUresult name params {                                           \
    const CUresult rc = impl::implementation args;                              \
    if (gpusel::sim::trace::on())                                               \
      std::apply(                                                               \
          [&](const auto&... traced_args) {                                     \
            gpusel::sim::trace::call("libcuda.so.1", #name, rc, error_name(rc), \
                                     rc == CUDA_SUCCESS, traced_args...);       \
          },                                                                    \
          std::make_tuple args);                                                \
    return rc;                                                                  \
  }
#include "cuda_exports.inc"
#undef SIM_CU
#undef SIM_CU_AS

// The functions the simulator does not model: CUDA_ERROR_NOT_SUPPORTED, arguments untouched. They
// take no parameters here: on the platforms' C calling conventions the caller cleans up, so a
// call with any arguments returns safely.
#define SIM_CU_UNMODELLED(name)                                                  \
  CUDA_SIM_API CUresult name() {                                                 \
    if (gpusel::sim::trace::on())                                                \
      gpusel::sim::trace::call("libcuda.so.1", #name, CUDA_ERROR_NOT_SUPPORTED,  \
                               "CUDA_ERROR_NOT_SUPPORTED (not modelled)", true); \
    return CUDA_ERROR_NOT_SUPPORTED;                                             \
  }
#include "cuda_unmodelled.inc"
#undef SIM_CU_UNMODELLED

namespace {

template <typename F>
void* proc(F* f) {
  return reinterpret_cast<void*>(f);
}

struct Export {
  const char* symbol;
  void* fn;
  bool modelled;  // false: an unmodelled symbol (CUDA_ERROR_NOT_SUPPORTED)
};
const Export kExports[] = {
#define SIM_CU(name, params, args) {#name, proc(&::name), true},
#define SIM_CU_AS(name, implementation, params, args) {#name, proc(&::name), true},
#define SIM_CU_UNMODELLED(name) {#name, proc(&::name), false},
#include "cuda_exports.inc"
#include "cuda_unmodelled.inc"
#undef SIM_CU
#undef SIM_CU_AS
#undef SIM_CU_UNMODELLED
};

// The CUDA version that brought each exported symbol's ABI (cudaTypedefs.h's PFN_<name>_v<N>):
// cuGetProcAddress hands out, for a base name, the newest of its symbols at or below the version
// asked for. Symbols not listed came with CUDA 2.0.
struct Since {
  const char* symbol;
  int version;
};
const Since kSince[] = {
    {"cuDeviceTotalMem_v2", 3020},
    {"cuCtxCreate_v2", 3020},
    {"cuMemGetInfo_v2", 3020},
    {"cuMemAlloc_v2", 3020},
    {"cuMemFree_v2", 3020},
    {"cuMemGetAddressRange_v2", 3020},
    {"cuMemAllocHost_v2", 3020},
    {"cuMemHostGetDevicePointer_v2", 3020},
    {"cuMemcpyHtoD_v2", 3020},
    {"cuMemcpyDtoH_v2", 3020},
    {"cuMemcpyDtoD_v2", 3020},
    {"cuMemcpyHtoDAsync_v2", 3020},
    {"cuMemcpyDtoHAsync_v2", 3020},
    {"cuMemcpyDtoDAsync_v2", 3020},
    {"cuMemsetD8_v2", 3020},
    {"cuMemsetD32_v2", 3020},
    {"cuModuleGetGlobal_v2", 3020},
    {"cuCtxDestroy_v2", 4000},
    {"cuCtxPushCurrent_v2", 4000},
    {"cuCtxPopCurrent_v2", 4000},
    {"cuStreamDestroy_v2", 4000},
    {"cuEventDestroy_v2", 4000},
    {"cuMemHostRegister_v2", 6050},
    {"cuLinkCreate_v2", 6050},
    {"cuDevicePrimaryCtxRelease_v2", 11000},
    {"cuDevicePrimaryCtxSetFlags_v2", 11000},
    {"cuDevicePrimaryCtxReset_v2", 11000},
    {"cuIpcOpenMemHandle_v2", 11000},
    {"cuDeviceGetUuid_v2", 11040},
    {"cuGetProcAddress_v2", 12000},
    {"cuEventElapsedTime_v2", 12080},
    {"cuMemHostAlloc", 2020},
    {"cuDriverGetVersion", 2020},
    {"cuFuncGetAttribute", 2020},
    {"cuCtxGetApiVersion", 3020},
    {"cuCtxGetCacheConfig", 3020},
    {"cuCtxSetCacheConfig", 3020},
    {"cuStreamWaitEvent", 3020},
    {"cuMemsetD8Async", 3020},
    {"cuMemsetD32Async", 3020},
    {"cuCtxGetLimit", 3010},
    {"cuCtxSetLimit", 3010},
    {"cuCtxSetCurrent", 4000},
    {"cuCtxGetCurrent", 4000},
    {"cuDeviceCanAccessPeer", 4000},
    {"cuCtxEnablePeerAccess", 4000},
    {"cuCtxDisablePeerAccess", 4000},
    {"cuMemHostUnregister", 4000},
    {"cuPointerGetAttribute", 4000},
    {"cuLaunchKernel", 4000},
    {"cuDeviceGetByPCIBusId", 4010},
    {"cuDeviceGetPCIBusId", 4010},
    {"cuIpcGetMemHandle", 4010},
    {"cuIpcOpenMemHandle", 4010},
    {"cuIpcCloseMemHandle", 4010},
    {"cuIpcGetEventHandle", 4010},
    {"cuIpcOpenEventHandle", 4010},
    {"cuCtxGetStreamPriorityRange", 5050},
    {"cuStreamCreateWithPriority", 5050},
    {"cuLinkDestroy", 5050},
    {"cuMemAllocManaged", 6000},
    {"cuGetErrorString", 6000},
    {"cuGetErrorName", 6000},
    {"cuDevicePrimaryCtxRetain", 7000},
    {"cuDevicePrimaryCtxRelease", 7000},
    {"cuDevicePrimaryCtxSetFlags", 7000},
    {"cuDevicePrimaryCtxGetState", 7000},
    {"cuDevicePrimaryCtxReset", 7000},
    {"cuCtxGetFlags", 7000},
    {"cuDeviceGetP2PAttribute", 8000},
    {"cuDeviceGetUuid", 9020},
    {"cuGetProcAddress", 11030},
    {"cuMemcpy", 4000},
    {"cuMemcpyAsync", 4000},
    {"cuMemcpyPeer", 4000},
    {"cuMemcpyPeerAsync", 4000},
    {"cuMemsetD16_v2", 3020},
    {"cuMemsetD16Async", 3020},
    {"cuStreamGetPriority", 5050},
    {"cuStreamGetFlags", 5050},
    {"cuStreamGetCtx", 9020},
    {"cuStreamGetCtx_v2", 12050},
    {"cuStreamGetDevice", 12080},
    {"cuStreamGetId", 12000},
    {"cuStreamIsCapturing", 10000},
    {"cuEventRecordWithFlags", 11010},
    {"cuPointerGetAttributes", 7000},
    {"cuMemAllocAsync", 11020},
    {"cuMemAllocFromPoolAsync", 11020},
    {"cuMemFreeAsync", 11020},
    {"cuDeviceGetDefaultMemPool", 11020},
    {"cuDeviceGetMemPool", 11020},
    {"cuMemPoolGetAttribute", 11020},
    {"cuMemPoolSetAttribute", 11020},
    {"cuMemPoolTrimTo", 11020},
    {"cuLibraryLoadData", 12000},
    {"cuLibraryLoadFromFile", 12000},
    {"cuLibraryUnload", 12000},
    {"cuLibraryGetKernel", 12000},
    {"cuLibraryGetModule", 12000},
    {"cuKernelGetFunction", 12000},
    {"cuKernelGetAttribute", 12000},
    {"cuKernelSetAttribute", 12000},
    {"cuKernelGetName", 12030},
    {"cuLaunchKernelEx", 11060},
    {"cuFuncSetAttribute", 9000},
    {"cuOccupancyMaxActiveBlocksPerMultiprocessor", 6050},
    {"cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags", 7000},
    {"cuOccupancyMaxPotentialBlockSize", 6050},
    {"cuOccupancyMaxPotentialBlockSizeWithFlags", 7000},
    {"cuOccupancyAvailableDynamicSMemPerBlock", 10020},
    {"cuOccupancyMaxPotentialClusterSize", 11070},
    {"cuOccupancyMaxActiveClusters", 11070},
    {"cuCtxGetId", 12000},
    {"cuCtxGetDevice_v2", 13000},
    {"cuCtxSynchronize_v2", 13000},
    {"cuProfilerStart", 4000},
    {"cuProfilerStop", 4000},
    {"cuGetExportTable", 3000},
    {"cuMemcpy2D_v2", 3020},
    {"cuMemcpy2DAsync_v2", 3020},
    {"cuMemcpy2DUnaligned_v2", 3020},
    {"cuMemsetD2D8_v2", 3020},
    {"cuMemsetD2D16_v2", 3020},
    {"cuMemsetD2D32_v2", 3020},
    {"cuMemsetD2D8Async", 3020},
    {"cuMemsetD2D16Async", 3020},
    {"cuMemsetD2D32Async", 3020},
    {"cuMemHostGetFlags", 2030},
    {"cuStreamAddCallback", 5000},
    {"cuMemPrefetchAsync", 8000},
    {"cuMemAdvise", 8000},
    {"cuMemPrefetchAsync_v2", 12020},
    {"cuMemAdvise_v2", 12020},
    {"cuLaunchHostFunc", 10000},
    {"cuStreamBeginCapture_v2", 10010},
    {"cuStreamEndCapture", 10000},
    {"cuGraphCreate", 10000},
    {"cuGraphGetNodes", 10000},
    {"cuGraphDestroy", 10000},
    {"cuGraphInstantiateWithFlags", 11040},
    {"cuGraphExecDestroy", 10000},
    {"cuGraphLaunch", 10000},
};

int since(const char* symbol) {
  for (const Since& s : kSince) {
    if (std::strcmp(s.symbol, symbol) == 0) return s.version;
  }
  return 2000;
}

// "cuMemAlloc" for "cuMemAlloc_v2".
std::string base_name(const char* symbol) {
  std::string s = symbol;
  const auto at = s.rfind("_v");
  if (at != std::string::npos && at + 2 < s.size() &&
      s.find_first_not_of("0123456789", at + 2) == std::string::npos)
    s.resize(at);
  return s;
}

}  // namespace

CUresult impl::cuGetProcAddress(const char* symbol, void** fn, int version,
                                unsigned long long flags) {
  return cuGetProcAddress_v2(symbol, fn, version, flags, nullptr);
}

// cuGetProcAddress: `symbol` is a base name ("cuMemAlloc"), as the real driver expects; the
// per-thread-default-stream flag gives the same functions (the simulator has one kind of stream).
CUresult impl::cuGetProcAddress_v2(const char* symbol, void** fn, int version,
                                   unsigned long long flags, int* status) {
  if (symbol == nullptr || fn == nullptr || flags > 2) return CUDA_ERROR_INVALID_VALUE;
  *fn = nullptr;
  int best = -1;
  bool too_new = false;
  // Where the simulator models a function, only its modelled ABIs are handed out (an older ABI of
  // the same function is VERSION_NOT_SUFFICIENT, not an unmodelled stub); a function it does not
  // model at all gets its stub, which answers CUDA_ERROR_NOT_SUPPORTED.
  bool modelled = false;
  for (const Export& e : kExports)
    modelled = modelled || (e.modelled && base_name(e.symbol) == symbol);
  for (const Export& e : kExports) {
    if (e.modelled != modelled || base_name(e.symbol) != symbol) continue;
    const int v = since(e.symbol);
    if (v > version) {
      too_new = true;
    } else if (v > best) {
      best = v;
      *fn = e.fn;
    }
  }
  const int found = *fn != nullptr ? CU_GET_PROC_ADDRESS_SUCCESS
                    : too_new      ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                                   : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  if (status != nullptr) *status = found;
  if (found == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND && gpusel::sim::trace::on()) {
    gpusel::sim::trace::missing("libcuda.so.1", "cuGetProcAddress", symbol,
                                "(version " + std::to_string(version) + ")");
  }
  return *fn != nullptr ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

// Each exported function of cuda.def has exactly the prototype gpusel's loader expects.
#define GPUSEL_CUDA(api, symbol, required, params) \
  static_assert(std::is_same_v<decltype(&::symbol), CUresult(*) params>, #symbol " prototype");
#include "cuda.def"
#undef GPUSEL_CUDA
