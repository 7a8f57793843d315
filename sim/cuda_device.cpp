// The simulated libcuda.so.1's device queries: identity, PCI location and peer access.
#include "cuda_sim.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace gpusel::sim::cuda {

std::optional<CUuuid> uuid_bytes_of(const std::string& text) {
  // skip "GPU-" / "MIG-", then 32 hex digits with dashes
  CUuuid out{};
  int n = 0;
  unsigned char byte = 0;
  for (std::size_t i = 4; i < text.size(); ++i) {
    char c = text[i];
    if (c == '-') continue;
    int v = (c >= '0' && c <= '9')   ? c - '0'
            : (c >= 'a' && c <= 'f') ? c - 'a' + 10
            : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                                     : -1;
    if (v < 0 || n >= 32) return std::nullopt;
    byte = static_cast<unsigned char>((byte << 4) | v);
    if (n % 2 == 1) out.bytes[n / 2] = static_cast<char>(byte);
    ++n;
  }
  if (n != 32) return std::nullopt;
  return out;
}

namespace {

CUresult copy_uuid(const std::optional<CUuuid>& bytes, CUuuid* uuid) {
  if (!bytes) return CUDA_ERROR_UNKNOWN;
  *uuid = *bytes;
  return CUDA_SUCCESS;
}

}  // namespace

// Peer access between two enumerated devices: not to itself, not for MIG devices, else as the
// machine's topology says (NVLink, or PCIe where both boards allow it within one NUMA node).
bool peer_access(const Device& a, const Device& b) {
  if (&a == &b || a.mig >= 0 || b.mig >= 0 || a.gpu == b.gpu) return false;
  const State& s = state();
  return gpusel::sim::peer_access(gpu_of(s, a), gpu_of(s, b));
}

namespace impl {

CUresult cuDeviceGetName(char* name, int len, CUdevice dev) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  Device* d = device(dev);
  if (d == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  if (name == nullptr || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  const std::size_t n = std::min(d->name.size(), static_cast<std::size_t>(len - 1));
  std::memcpy(name, d->name.data(), n);
  name[n] = '\0';
  return CUDA_SUCCESS;
}

// Before CUDA 13, v1 gave the parent GPU's UUID for a MIG device; v2 gives the MIG device's own.
CUresult cuDeviceGetUuid(CUuuid* uuid, CUdevice dev) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  Device* d = device(dev);
  if (d == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  if (uuid == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const bool before_13 = state().loaded.machine().cuda_driver_version < 13000;
  return copy_uuid(before_13 ? d->parent_bytes : d->uuid_bytes, uuid);
}

CUresult cuDeviceGetUuid_v2(CUuuid* uuid, CUdevice dev) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  Device* d = device(dev);
  if (d == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  if (uuid == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return copy_uuid(d->uuid_bytes, uuid);
}

CUresult cuDeviceTotalMem_v2(std::size_t* bytes, CUdevice dev) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  Device* d = device(dev);
  if (d == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  if (bytes == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *bytes = d->memory_total;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetAttribute(int* value, int attribute, CUdevice dev) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  Device* d = device(dev);
  if (d == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const auto v = attribute_value(state(), *d, attribute);
  if (!v) return CUDA_ERROR_INVALID_VALUE;
  *value = *v;
  return CUDA_SUCCESS;
}

CUresult cuDeviceComputeCapability(int* major, int* minor, CUdevice dev) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  Device* d = device(dev);
  if (d == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  if (major == nullptr || minor == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const SimGpu& g = gpu_of(state(), *d);
  *major = g.cc_major;
  *minor = g.cc_minor;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetPCIBusId(char* bus, int len, CUdevice dev) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  Device* d = device(dev);
  if (d == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  if (bus == nullptr || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  const SimGpu& g = gpu_of(state(), *d);
  std::snprintf(bus, static_cast<std::size_t>(len), "%04X:%02X:%02X.%X", g.pci_domain, g.pci_bus,
                g.pci_device, g.pci_function);
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetByPCIBusId(CUdevice* dev, const char* bus) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  if (dev == nullptr || bus == nullptr) return CUDA_ERROR_INVALID_VALUE;
  // [domain:]bus:device.function, hex, any case.
  unsigned dom = 0, b = 0, d = 0, f = 0;
  if (std::sscanf(bus, "%x:%x:%x.%x", &dom, &b, &d, &f) != 4) {
    dom = 0;
    if (std::sscanf(bus, "%x:%x.%x", &b, &d, &f) != 3) return CUDA_ERROR_INVALID_VALUE;
  }
  State& s = state();
  for (std::size_t i = 0; i < s.devices.size(); ++i) {
    const SimGpu& g = gpu_of(s, s.devices[i]);
    if (g.pci_domain == dom && g.pci_bus == b && g.pci_device == d && g.pci_function == f) {
      *dev = handle_of(static_cast<int>(i));
      return CUDA_SUCCESS;
    }
  }
  return CUDA_ERROR_INVALID_DEVICE;
}

CUresult cuDeviceCanAccessPeer(int* can, CUdevice dev, CUdevice peer) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  if (can == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Device* a = device(dev);
  Device* b = device(peer);
  if (a == nullptr || b == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  *can = peer_access(*a, *b) ? 1 : 0;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetP2PAttribute(int* value, int attribute, CUdevice src, CUdevice dst) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Device* a = device(src);
  Device* b = device(dst);
  if (a == nullptr || b == nullptr || src == dst) return CUDA_ERROR_INVALID_DEVICE;
  const bool access = peer_access(*a, *b);
  const bool nvlink =
      access && gpusel::sim::nvlink_between(gpu_of(state(), *a), gpu_of(state(), *b));
  switch (attribute) {
    case 1:  // PERFORMANCE_RANK: 0 is the best link (NVLink), 1 PCIe; 0 without access
      *value = access && !nvlink ? 1 : 0;
      break;
    case 2:  // ACCESS_SUPPORTED
    case 4:  // CUDA_ARRAY_ACCESS_SUPPORTED
      *value = access ? 1 : 0;
      break;
    case 3:  // NATIVE_ATOMIC_SUPPORTED: over NVLink only
      *value = nvlink ? 1 : 0;
      break;
    case 5:  // ONLY_PARTIAL_NATIVE_ATOMIC_SUPPORTED
      *value = 0;
      break;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

}  // namespace impl

}  // namespace gpusel::sim::cuda
