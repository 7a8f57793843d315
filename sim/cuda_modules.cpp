// The simulated libcuda.so.1 runs no device code: module loading is reported as unsupported, so
// no module, function or linker handle exists.
#include "cuda_sim.hpp"

namespace gpusel::sim::cuda {

namespace impl {

// No device code runs: loading is not supported, so no module or function handle exists.
CUresult cuModuleLoad(CUmodule* module, const char* path) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  if (module == nullptr || path == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_ERROR_NOT_SUPPORTED;
}

// The simulator runs no device code: module loading is reported as unsupported.
CUresult cuModuleLoadData(CUmodule* module, const void* image) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  if (module == nullptr || image == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_ERROR_NOT_SUPPORTED;
}

CUresult cuModuleLoadDataEx(CUmodule* module, const void* image, unsigned int, int*, void**) {
  return cuModuleLoadData(module, image);
}

CUresult cuModuleLoadFatBinary(CUmodule* module, const void* image) {
  return cuModuleLoadData(module, image);
}

CUresult cuModuleUnload(CUmodule) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  return CUDA_ERROR_INVALID_HANDLE;
}

CUresult cuModuleGetFunction(CUfunction* fn, CUmodule, const char*) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  return fn == nullptr ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_INVALID_HANDLE;
}

CUresult cuModuleGetGlobal_v2(CUdeviceptr*, std::size_t*, CUmodule, const char*) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  return CUDA_ERROR_INVALID_HANDLE;
}

CUresult cuFuncGetAttribute(int* value, int, CUfunction) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  return value == nullptr ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_INVALID_HANDLE;
}

CUresult cuLaunchKernel(CUfunction, unsigned int, unsigned int, unsigned int, unsigned int,
                        unsigned int, unsigned int, unsigned int, CUstream, void**, void**) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  return CUDA_ERROR_INVALID_HANDLE;
}

CUresult cuLinkCreate_v2(unsigned int, int*, void**, CUlinkState* state_out) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  if (state_out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_ERROR_NOT_SUPPORTED;  // the JIT linker needs device code
}

CUresult cuLinkDestroy(CUlinkState) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  return CUDA_ERROR_INVALID_HANDLE;
}

}  // namespace impl

}  // namespace gpusel::sim::cuda
