// The simulated libcuda.so.1's result names and descriptions, from src/driver/cuda_errors.def.
#include "cuda_sim.hpp"

namespace gpusel::sim::cuda {

const char* error_name(CUresult rc) {
  switch (rc) {
#define GPUSEL_CUDA_ERROR(name, value, text) \
  case name:                                 \
    return #name;
#include "cuda_errors.def"
#undef GPUSEL_CUDA_ERROR
    default:
      return nullptr;
  }
}

const char* error_text(CUresult rc) {
  switch (rc) {
#define GPUSEL_CUDA_ERROR(name, value, text) \
  case name:                                 \
    return text;
#include "cuda_errors.def"
#undef GPUSEL_CUDA_ERROR
    default:
      return nullptr;
  }
}

namespace impl {

CUresult cuGetErrorString(CUresult rc, const char** text) {
  if (text == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *text = error_text(rc);
  return *text == nullptr ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

CUresult cuGetErrorName(CUresult rc, const char** text) {
  if (text == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *text = error_name(rc);
  return *text == nullptr ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

}  // namespace impl

}  // namespace gpusel::sim::cuda
