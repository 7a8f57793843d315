// A fake libcuda.so.1 for gpusel's tests: two identical GPUs (the UUIDs of nvml_fault.cpp's),
// broken in the ways GPUSEL_FAULT lists (comma-separated):
//   cuda_count    cuDeviceGetCount reports 2^31-1 devices, each one answering
//   cuinit_hang   cuInit never returns (it writes its process id to GPUSEL_FAULT_PIDFILE first)
//   strings_full  cuDeviceGetName and cuDeviceGetPCIBusId fill the whole buffer, no NUL
//   bad_bytes     the name and bus id hold bytes that are not UTF-8, and escape sequences
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstring>

#include "cuda_abi.hpp"
#include "fault.hpp"

#define FAULT_API extern "C" __attribute__((visibility("default")))

using gpusel_fault::fault;
using gpusel_fault::put;

namespace {

int count() {
  return fault("cuda_count") ? INT_MAX : 2;
}

bool valid(CUdevice dev) {
  return dev >= 0 && dev < count();
}

CUctx_st* const kContext = reinterpret_cast<CUctx_st*>(0x1000);
CUcontext current = nullptr;

}  // namespace

FAULT_API CUresult cuInit(unsigned int) {
  if (fault("cuinit_hang")) {
    if (const char* file = std::getenv("GPUSEL_FAULT_PIDFILE")) {
      if (FILE* f = std::fopen(file, "w")) {
        std::fprintf(f, "%d\n", static_cast<int>(getpid()));
        std::fclose(f);
      }
    }
    for (;;) pause();
  }
  return CUDA_SUCCESS;
}

FAULT_API CUresult cuDriverGetVersion(int* v) {
  if (v == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *v = 12080;
  return CUDA_SUCCESS;
}

FAULT_API CUresult cuDeviceGetCount(int* n) {
  if (n == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *n = count();
  return CUDA_SUCCESS;
}

FAULT_API CUresult cuDeviceGet(CUdevice* dev, int ordinal) {
  if (dev == nullptr || !valid(ordinal)) return CUDA_ERROR_INVALID_DEVICE;
  *dev = ordinal;
  return CUDA_SUCCESS;
}

FAULT_API CUresult cuDeviceGetName(char* name, int len, CUdevice dev) {
  if (name == nullptr || len <= 0 || !valid(dev)) return CUDA_ERROR_INVALID_VALUE;
  put(name, static_cast<std::size_t>(len),
      fault("bad_bytes") ? gpusel_fault::kBadName : "Fault GPU", fault("strings_full"), 'n');
  return CUDA_SUCCESS;
}

FAULT_API CUresult cuDeviceGetUuid_v2(CUuuid* uuid, CUdevice dev) {
  if (uuid == nullptr || !valid(dev)) return CUDA_ERROR_INVALID_VALUE;
  std::memset(uuid->bytes, 0, sizeof uuid->bytes);
  uuid->bytes[0] = static_cast<char>(0xfa);
  uuid->bytes[1] = 0x17;
  uuid->bytes[15] = static_cast<char>(dev % 2);
  return CUDA_SUCCESS;
}

FAULT_API CUresult cuDeviceGetUuid(CUuuid* uuid, CUdevice dev) {
  return cuDeviceGetUuid_v2(uuid, dev);
}

FAULT_API CUresult cuDeviceTotalMem_v2(std::size_t* bytes, CUdevice dev) {
  if (bytes == nullptr || !valid(dev)) return CUDA_ERROR_INVALID_VALUE;
  *bytes = std::size_t{16} << 30;
  return CUDA_SUCCESS;
}

FAULT_API CUresult cuDeviceGetAttribute(int* value, int attribute, CUdevice dev) {
  if (value == nullptr || !valid(dev)) return CUDA_ERROR_INVALID_VALUE;
  switch (attribute) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
      *value = 9;
      break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
      *value = 0;
      break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
      *value = 100;
      break;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

FAULT_API CUresult cuDeviceGetPCIBusId(char* bus, int len, CUdevice dev) {
  if (bus == nullptr || len <= 0 || !valid(dev)) return CUDA_ERROR_INVALID_VALUE;
  char text[64];
  std::snprintf(text, sizeof text, "%s0000:0%d:00.0", fault("bad_bytes") ? "\xff\x1b[2J" : "",
                dev % 2 + 1);
  const bool full = fault("strings_full");
  put(bus, static_cast<std::size_t>(len), full ? "" : text, full, 'Z');
  return CUDA_SUCCESS;
}

FAULT_API CUresult cuDevicePrimaryCtxRetain(CUcontext* ctx, CUdevice dev) {
  if (ctx == nullptr || !valid(dev)) return CUDA_ERROR_INVALID_VALUE;
  *ctx = kContext;
  return CUDA_SUCCESS;
}

FAULT_API CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  return valid(dev) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

FAULT_API CUresult cuCtxSetCurrent(CUcontext ctx) {
  current = ctx;
  return CUDA_SUCCESS;
}

FAULT_API CUresult cuCtxGetCurrent(CUcontext* ctx) {
  if (ctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *ctx = current;
  return CUDA_SUCCESS;
}
