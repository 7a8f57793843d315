// Internal: the loaded CUDA driver's function table, shared by the loader and the worker side.
#pragma once

#include <string>
#include <type_traits>
#include <vector>

#include "cuda_abi.hpp"
#include "dl.hpp"
#include "gpusel/cuda.hpp"
#include "gpusel/error.hpp"

namespace gpusel::detail {

struct CudaApi {
#define GPUSEL_CUDA(api, symbol, required, params) \
  DriverFunction<required, CUresult(*) params> api{};
#include "cuda.def"
#undef GPUSEL_CUDA
};

struct CudaLibrary {
  CudaApi api;
  bool usable = false;
  std::string path;  // the library opened
  std::string reason;
  ErrorCode code = ErrorCode::None;  // LibraryNotLoaded or LibraryIncomplete when not usable
  int driver_version = 0;            // cuDriverGetVersion's, read once at load; 0 when it failed
};

// Opens libcuda.so.1 (or GPUSEL_CUDA_LIBRARY) once per process; never throws.
const CudaLibrary& cuda_library();

// The table after a successful cuInit (called once per process). Throws Error(Failure) with the
// reason when the library is missing, is the toolkit's stub, or cuInit fails.
const CudaApi& cuda_initialised();

// One visible device by what binding needs: its ordinal, its CUdevice (from cuDeviceGet: NVIDIA's
// drivers make it equal to the ordinal, which the API does not promise and the simulator does
// not do) and its UUIDs.
struct CudaHandle {
  int ordinal = 0;
  CUdevice device = 0;
  std::string uuid;         // GPU-... or MIG-...
  std::string parent_uuid;  // the whole GPU's, for a MIG device; empty when it is `uuid`
};

// The visible devices, UUIDs only (cuInit first). Throws Error(Failure) as cuda_devices() does.
std::vector<CudaHandle> cuda_device_handles();

// Everything cuda_devices() says of one device.
CudaDevice cuda_device(const CudaHandle& handle);

// "CUDA_ERROR_X (description)" for a result code.
std::string cuda_error_text(const CudaApi& api, CUresult rc);

// The symbol each CudaApi member was looked up by: cuda_symbol<&CudaApi::cuMemAlloc> is
// "cuMemAlloc_v2".
template <auto Member>
inline constexpr const char* cuda_symbol = nullptr;
#define GPUSEL_CUDA(api, symbol, required, params) \
  template <>                                      \
  inline constexpr const char* cuda_symbol<&CudaApi::api> = #symbol;
#include "cuda.def"
#undef GPUSEL_CUDA

// Throws Error(Failure): `feature` needs `missing` (symbols), which the loaded library lacks.
[[noreturn]] void cuda_functions_missing(const std::string& feature, const std::string& missing);

// The optional functions of cuda.def (required ones are checked at load) that a feature calls:
// each feature names its own, e.g.
//   using Needs = CudaNeeds<&CudaApi::cuMemAlloc, &CudaApi::cuMemFree>;
//   Needs::check(api, "measuring copy bandwidth");
// check() throws Error(Failure) naming every one the loaded library lacks, before the feature
// calls any (so an old or partial driver fails with a message, never a call through null).
template <auto... Members>
struct CudaNeeds {
  static_assert(sizeof...(Members) > 0);
  static_assert((std::is_member_object_pointer_v<decltype(Members)> && ...));
  static void check(const CudaApi& api, const std::string& feature) {
    std::string missing;
    ((api.*Members == nullptr
          ? void(missing += (missing.empty() ? "" : ", ") + std::string(cuda_symbol<Members>))
          : void()),
     ...);
    if (!missing.empty()) cuda_functions_missing(feature, missing);
  }
};

}  // namespace gpusel::detail
