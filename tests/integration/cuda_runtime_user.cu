// A CUDA runtime program as users write one, built by the tests with the CUDA toolkit's nvcc
// (`nvcc -cudart shared`) and run on the simulated machines against the simulator's libcudart.
// It prints one JSON object: what the runtime says about each device, and the outcome of each step
// (memory, copies, streams, events, peers, a kernel launch). Exit status 0 when every step
// behaved as the runtime documents; each failed expectation is listed in "failures".
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

std::vector<std::string> failures;

void expect(bool ok, const std::string& what) {
  if (!ok) failures.push_back(what);
}

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string uuid_text(const cudaUUID_t& u) {
  const auto* b = reinterpret_cast<const unsigned char*>(u.bytes);
  char text[64];
  std::snprintf(text, sizeof text,
                "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
                b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
                b[14], b[15]);
  return text;
}

__global__ void scale(float* data, float factor) {
  data[threadIdx.x] *= factor;
}

// cudaGetDeviceProperties writes exactly sizeof(cudaDeviceProp), and its fields agree with
// cudaDeviceGetAttribute (one model behind both).
std::string device_json(int d) {
  constexpr std::size_t kGuard = 64;
  std::vector<unsigned char> buffer(sizeof(cudaDeviceProp) + kGuard, 0xAB);
  auto* p = reinterpret_cast<cudaDeviceProp*>(buffer.data());
  expect(cudaGetDeviceProperties(p, d) == cudaSuccess, "cudaGetDeviceProperties");
  bool guard = true;
  for (std::size_t i = sizeof(cudaDeviceProp); i < buffer.size(); ++i)
    guard = guard && buffer[i] == 0xAB;
  expect(guard, "cudaGetDeviceProperties wrote past sizeof(cudaDeviceProp)");
  struct Check {
    const char* field;
    long long prop;
    cudaDeviceAttr attr;
  };
  const Check checks[] = {
      {"major", p->major, cudaDevAttrComputeCapabilityMajor},
      {"minor", p->minor, cudaDevAttrComputeCapabilityMinor},
      {"multiProcessorCount", p->multiProcessorCount, cudaDevAttrMultiProcessorCount},
      {"pciBusID", p->pciBusID, cudaDevAttrPciBusId},
      {"pciDeviceID", p->pciDeviceID, cudaDevAttrPciDeviceId},
      {"pciDomainID", p->pciDomainID, cudaDevAttrPciDomainId},
      {"l2CacheSize", p->l2CacheSize, cudaDevAttrL2CacheSize},
      {"memoryBusWidth", p->memoryBusWidth, cudaDevAttrGlobalMemoryBusWidth},
      {"maxThreadsPerBlock", p->maxThreadsPerBlock, cudaDevAttrMaxThreadsPerBlock},
      {"warpSize", p->warpSize, cudaDevAttrWarpSize},
      {"sharedMemPerMultiprocessor", static_cast<long long>(p->sharedMemPerMultiprocessor),
       cudaDevAttrMaxSharedMemoryPerMultiprocessor},
      {"maxBlocksPerMultiProcessor", p->maxBlocksPerMultiProcessor,
       cudaDevAttrMaxBlocksPerMultiprocessor},
      {"reservedSharedMemPerBlock", static_cast<long long>(p->reservedSharedMemPerBlock),
       cudaDevAttrReservedSharedMemoryPerBlock},
      {"clusterLaunch", p->clusterLaunch, cudaDevAttrClusterLaunch},
      {"memoryPoolsSupported", p->memoryPoolsSupported, cudaDevAttrMemoryPoolsSupported},
      {"gpuPciDeviceID", p->gpuPciDeviceID, cudaDevAttrGpuPciDeviceId},
      {"hostNumaId", p->hostNumaId, cudaDevAttrHostNumaId},
  };
  for (const Check& c : checks) {
    int v = 0;
    expect(cudaDeviceGetAttribute(&v, c.attr, d) == cudaSuccess,
           std::string("cudaDeviceGetAttribute for ") + c.field);
    expect(v == c.prop, std::string("cudaDeviceProp.") + c.field + " = " + std::to_string(c.prop) +
                            " but the attribute is " + std::to_string(v));
  }
  char bus[32] = {};
  expect(cudaDeviceGetPCIBusId(bus, sizeof bus, d) == cudaSuccess, "cudaDeviceGetPCIBusId");
  int back = -1;
  expect(cudaDeviceGetByPCIBusId(&back, bus) == cudaSuccess && back == d,
         "cudaDeviceGetByPCIBusId");
  return "{\"ordinal\": " + std::to_string(d) + ", \"name\": " + quoted(p->name) +
         ", \"uuid\": " + quoted(uuid_text(p->uuid)) + ", \"pci_bus_id\": " + quoted(bus) +
         ", \"memory\": " + std::to_string(p->totalGlobalMem) + ", \"cc\": \"" +
         std::to_string(p->major) + "." + std::to_string(p->minor) +
         "\", \"sms\": " + std::to_string(p->multiProcessorCount) + "}";
}

void exercise(int count, std::string& steps) {
  // The device set last is the current one; memory, copies and memsets on it.
  const int device = count - 1;
  expect(cudaSetDevice(device) == cudaSuccess, "cudaSetDevice");
  int current = -1;
  expect(cudaGetDevice(&current) == cudaSuccess && current == device,
         "cudaGetDevice after cudaSetDevice");
  std::size_t free_before = 0, total = 0;
  expect(cudaMemGetInfo(&free_before, &total) == cudaSuccess && total > 0, "cudaMemGetInfo");
  constexpr int kN = 1 << 16;
  std::vector<float> host(kN), back(kN, 0.0f);
  for (int i = 0; i < kN; ++i) host[i] = static_cast<float>(i) * 0.5f;
  float* dev = nullptr;
  expect(cudaMalloc(&dev, kN * sizeof(float)) == cudaSuccess, "cudaMalloc");
  std::size_t free_after = 0;
  cudaMemGetInfo(&free_after, &total);
  expect(free_after + kN * sizeof(float) <= free_before, "cudaMemGetInfo counts cudaMalloc");
  expect(cudaMemcpy(dev, host.data(), kN * sizeof(float), cudaMemcpyHostToDevice) == cudaSuccess,
         "cudaMemcpy H2D");
  expect(cudaMemcpy(back.data(), dev, kN * sizeof(float), cudaMemcpyDefault) == cudaSuccess,
         "cudaMemcpy D2H (default)");
  expect(std::memcmp(host.data(), back.data(), kN * sizeof(float)) == 0, "copy round trip");
  expect(cudaMemset(dev, 0, kN * sizeof(float)) == cudaSuccess, "cudaMemset");
  cudaMemcpy(back.data(), dev, sizeof(float) * 4, cudaMemcpyDeviceToHost);
  expect(back[0] == 0.0f && back[3] == 0.0f, "cudaMemset wrote zeros");
  cudaPointerAttributes attrs{};
  expect(cudaPointerGetAttributes(&attrs, dev) == cudaSuccess &&
             attrs.type == cudaMemoryTypeDevice && attrs.device == device,
         "cudaPointerGetAttributes");

  // Asynchronous copies on a stream between pinned memory and the device, timed with events.
  float* pinned = nullptr;
  expect(cudaMallocHost(&pinned, kN * sizeof(float)) == cudaSuccess, "cudaMallocHost");
  cudaStream_t stream = nullptr;
  expect(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess,
         "cudaStreamCreateWithFlags");
  unsigned flags = 0;
  expect(cudaStreamGetFlags(stream, &flags) == cudaSuccess && flags == cudaStreamNonBlocking,
         "cudaStreamGetFlags");
  cudaEvent_t start = nullptr, stop = nullptr;
  expect(cudaEventCreate(&start) == cudaSuccess && cudaEventCreate(&stop) == cudaSuccess,
         "cudaEventCreate");
  cudaEventRecord(start, stream);
  for (int i = 0; i < 8; ++i)
    expect(cudaMemcpyAsync(dev, pinned, kN * sizeof(float), cudaMemcpyHostToDevice, stream) ==
               cudaSuccess,
           "cudaMemcpyAsync");
  expect(cudaMemsetAsync(dev, 1, 64, stream) == cudaSuccess, "cudaMemsetAsync");
  cudaEventRecord(stop, stream);
  expect(cudaStreamSynchronize(stream) == cudaSuccess, "cudaStreamSynchronize");
  expect(cudaEventQuery(stop) == cudaSuccess, "cudaEventQuery");
  float ms = -1;
  expect(cudaEventElapsedTime(&ms, start, stop) == cudaSuccess && ms > 0, "cudaEventElapsedTime");
  steps += ", \"copy_ms\": " + std::to_string(ms);

  // Peer access and a peer copy between the first two devices.
  if (count >= 2) {
    int can = -1;
    expect(cudaDeviceCanAccessPeer(&can, 0, 1) == cudaSuccess, "cudaDeviceCanAccessPeer");
    steps += ", \"peer_0_1\": " + std::to_string(can);
    float* other = nullptr;
    cudaSetDevice(0);
    expect(cudaMalloc(&other, kN * sizeof(float)) == cudaSuccess, "cudaMalloc on device 0");
    if (can) expect(cudaDeviceEnablePeerAccess(1, 0) == cudaSuccess, "cudaDeviceEnablePeerAccess");
    expect(cudaMemcpyPeer(other, 0, dev, device, 256) == cudaSuccess, "cudaMemcpyPeer");
    cudaFree(other);
    cudaSetDevice(device);
  }

  // A kernel launch: registered, never run; the documented error, then a clean last error.
  scale<<<1, 32>>>(dev, 2.0f);
  const cudaError_t launched = cudaGetLastError();
  steps += ", \"launch\": " + quoted(cudaGetErrorName(launched));
  expect(cudaGetLastError() == cudaSuccess, "cudaGetLastError resets");
  expect(std::string(cudaGetErrorString(cudaErrorInvalidValue)) == "invalid argument",
         "cudaGetErrorString");

  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaStreamDestroy(stream);
  cudaFreeHost(pinned);
  expect(cudaFree(dev) == cudaSuccess, "cudaFree");
  expect(cudaDeviceSynchronize() == cudaSuccess, "cudaDeviceSynchronize");
}

}  // namespace

int main(int argc, char** argv) {
  const bool devices_only = argc > 1 && std::strcmp(argv[1], "--devices") == 0;
  int runtime = 0, driver = 0, count = 0;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);
  const cudaError_t rc = cudaGetDeviceCount(&count);
  std::string out = "{\"runtime\": " + std::to_string(runtime) +
                    ", \"driver\": " + std::to_string(driver) +
                    ", \"count_error\": " + quoted(cudaGetErrorName(rc)) + ", \"devices\": [";
  for (int d = 0; rc == cudaSuccess && d < count; ++d) out += (d ? ", " : "") + device_json(d);
  out += "]";
  if (rc == cudaSuccess && count > 0) {
    // A context bound before the runtime's first use (as gpusel bind does) is the current device.
    int current = -1;
    cudaGetDevice(&current);
    out += ", \"current_at_start\": " + std::to_string(current);
    if (!devices_only) exercise(count, out);
  }
  out += ", \"failures\": [";
  for (std::size_t i = 0; i < failures.size(); ++i) out += (i ? ", " : "") + quoted(failures[i]);
  out += "]}";
  std::printf("%s\n", out.c_str());
  return failures.empty() ? 0 : 1;
}
