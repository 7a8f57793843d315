// A cuBLAS program, as a launch set-up would run one: it counts the devices through the runtime it
// links (under `-cudart shared`, the simulator's libcudart.so.13 answers), then creates a cuBLAS
// handle, which starts cuBLAS's own copy of NVIDIA's runtime inside libcublas. One JSON line.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdio>

int main() {
  int count = -1;
  const cudaError_t counted = cudaGetDeviceCount(&count);
  cublasHandle_t handle = nullptr;
  const cublasStatus_t created = cublasCreate(&handle);
  std::printf("{\"count_error\": %d, \"count\": %d, \"cublas_status\": %d}\n",
              static_cast<int>(counted), count, static_cast<int>(created));
  if (created == CUBLAS_STATUS_SUCCESS) cublasDestroy(handle);
  return 0;
}
