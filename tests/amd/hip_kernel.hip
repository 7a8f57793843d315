// A HIP program as users write one, built by Debian's hipcc (clang 15, for gfx90a, the simulated
// MI210s' target): on its device 0 it allocates, launches a __global__ kernel on a stream, waits
// for it, then prints the device's unique id and how the wait ended ("GPU-<16 hex> hipSuccess"),
// and stays SECONDS (argument; 0 when absent) holding its queue. Over the tests' thunk stand-in
// the kernel's packet is completed without its work being done: its output is not checked.
// Built by tests/integration/test_amd_visible.py.
#include <hip/hip_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <unistd.h>

__global__ void scale(float* data, float factor, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] *= factor;
}

int main(int argc, char** argv) {
  const int seconds = argc > 1 ? std::atoi(argv[1]) : 0;
  int count = 0;
  if (hipGetDeviceCount(&count) != hipSuccess || count == 0) {
    std::printf("no-device\n");
    return 1;
  }
  constexpr int n = 1 << 16;
  float* data = nullptr;
  if (hipMalloc(&data, n * sizeof(float)) != hipSuccess) {
    std::printf("malloc-failed\n");
    return 1;
  }
  hipStream_t stream;
  if (hipStreamCreate(&stream) != hipSuccess) {
    std::printf("stream-failed\n");
    return 1;
  }
  hipLaunchKernelGGL(scale, dim3(n / 256), dim3(256), 0, stream, data, 2.0f, n);
  const hipError_t launched = hipGetLastError();
  const hipError_t waited = hipStreamSynchronize(stream);
  int device = -1;
  hipGetDevice(&device);
  hipUUID uuid;
  if (hipDeviceGetUuid(&uuid, device) != hipSuccess) {
    std::printf("uuid-failed\n");
    return 1;
  }
  std::printf("GPU-%.16s %s\n", uuid.bytes,
              hipGetErrorString(launched != hipSuccess ? launched : waited));
  std::fflush(stdout);
  if (seconds > 0) sleep(static_cast<unsigned>(seconds));
  hipStreamDestroy(stream);
  hipFree(data);
  return launched == hipSuccess && waited == hipSuccess ? 0 : 1;
}
