// Internal: the loaded CUDA driver's function table, shared by the loader and the worker side.
#pragma once

#include <string>

#include "cuda_abi.hpp"

namespace gpusel::detail {

struct CudaApi {
#define GPUSEL_CUDA(api, symbol, required, params) CUresult(*api) params = nullptr;
#include "cuda.def"
#undef GPUSEL_CUDA
};

struct CudaLibrary {
  CudaApi api;
  bool usable = false;
  std::string reason;
};

// Opens libcuda.so.1 (or GPUSEL_CUDA_LIBRARY) once per process; never throws.
const CudaLibrary& cuda_library();

// The table after a successful cuInit (called once per process). Throws Error(Failure) with the
// reason when the library is missing, is the toolkit's stub, or cuInit fails.
const CudaApi& cuda_initialised();

// "CUDA_ERROR_X (description)" for a result code.
std::string cuda_error_text(const CudaApi& api, CUresult rc);

}  // namespace gpusel::detail
