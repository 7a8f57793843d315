// A fake libnvidia-ml.so.1 for gpusel's tests: two identical GPUs, broken in the ways GPUSEL_FAULT
// lists (comma-separated):
//   nvml_count_int   nvmlDeviceGetCount_v2 reports 2^31-1 GPUs
//   nvml_count_uint  nvmlDeviceGetCount_v2 reports 2^32-1 GPUs
//   nvml_mig_count   GPU 0 is in MIG mode and reports 2^32-1 MIG device slots, each one answering
//   strings_full     every string buffer is filled completely, with no terminating NUL
//   bad_bytes        names, UUIDs and bus ids hold bytes that are not UTF-8, and escape sequences
//   empty_uuid       GPU 0's UUID is empty (success, but nothing written)
// Handles past the two GPUs answer as GPU (index % 2), so a loop over an absurd count never ends
// on its own.
#include <climits>
#include <cstdio>

#include "fault.hpp"
#include "nvml_abi.hpp"

#define FAULT_API extern "C" __attribute__((visibility("default")))

using gpusel_fault::fault;
using gpusel_fault::put;

struct gpuselNvmlDevice {
  unsigned index;
  bool mig;
};

namespace {

gpuselNvmlDevice gpus[2] = {{0, false}, {1, false}};
gpuselNvmlDevice migs[2] = {{0, true}, {1, true}};

bool valid(nvmlDevice_t d) {
  return d == &gpus[0] || d == &gpus[1] || d == &migs[0] || d == &migs[1];
}

}  // namespace

FAULT_API nvmlReturn_t nvmlInit_v2(void) {
  return NVML_SUCCESS;
}
FAULT_API nvmlReturn_t nvmlShutdown(void) {
  return NVML_SUCCESS;
}

FAULT_API const char* nvmlErrorString(nvmlReturn_t rc) {
  return rc == NVML_SUCCESS ? "Success" : "Fault";
}

FAULT_API nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *count = fault("nvml_count_int") ? INT_MAX : fault("nvml_count_uint") ? UINT_MAX : 2;
  return NVML_SUCCESS;
}

FAULT_API nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* dev) {
  if (dev == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *dev = &gpus[index % 2];
  return NVML_SUCCESS;
}

FAULT_API nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t dev, char* buf, unsigned int len) {
  if (!valid(dev) || buf == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (fault("empty_uuid") && dev == &gpus[0]) {
    if (len > 0) buf[0] = '\0';
    return NVML_SUCCESS;
  }
  char text[96];
  std::snprintf(text, sizeof text, "%s-fa170000-0000-0000-0000-00000000000%u%s",
                dev->mig ? "MIG" : "GPU", dev->index, fault("bad_bytes") ? "\xc3\x1b[2J" : "");
  put(buf, len, text, fault("strings_full"), 'u');
  return NVML_SUCCESS;
}

FAULT_API nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t dev, char* buf, unsigned int len) {
  if (!valid(dev) || buf == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  put(buf, len, fault("bad_bytes") ? gpusel_fault::kBadName : "Fault GPU", fault("strings_full"),
      'n');
  return NVML_SUCCESS;
}

FAULT_API nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t dev, nvmlPciInfo_t* pci) {
  if (!valid(dev) || pci == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  char text[64];
  std::snprintf(text, sizeof text, "%s00000000:0%u:00.0", fault("bad_bytes") ? "\xff\x1b[2J" : "",
                dev->index + 1);
  put(pci->busId, sizeof pci->busId, text, fault("strings_full"), 'b');
  put(pci->busIdLegacy, sizeof pci->busIdLegacy, text, fault("strings_full"), 'b');
  pci->domain = 0;
  pci->bus = dev->index + 1;
  pci->device = 0;
  return NVML_SUCCESS;
}

FAULT_API nvmlReturn_t nvmlSystemGetDriverVersion(char* buf, unsigned int len) {
  if (buf == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  put(buf, len, "999.99.99", fault("strings_full"), '9');
  return NVML_SUCCESS;
}

FAULT_API nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t dev, unsigned int* current,
                                            unsigned int* pending) {
  if (!valid(dev) || current == nullptr || pending == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *current = *pending = (fault("nvml_mig_count") && dev == &gpus[0]) ? 1 : 0;
  return NVML_SUCCESS;
}

FAULT_API nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t dev, unsigned int* count) {
  if (!valid(dev) || count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *count = fault("nvml_mig_count") ? UINT_MAX : 0;
  return NVML_SUCCESS;
}

FAULT_API nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t dev, unsigned int index,
                                                           nvmlDevice_t* mig) {
  if (!valid(dev) || mig == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (!fault("nvml_mig_count")) return NVML_ERROR_NOT_FOUND;
  *mig = &migs[index % 2];
  return NVML_SUCCESS;
}
