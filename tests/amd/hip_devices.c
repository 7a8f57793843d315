/* Starts Debian's real HIP runtime (libamdhip64.so.5) and prints its devices in ordinal order, one
 * unique id a line as ROCr shows it ("GPU-<16 hex>", "GPU-XX"); nothing when HIP has no device.
 * With --pci, each line also has the device's PCI address, memory in GiB and name.
 * The few calls are declared here from HIP's ABI (hip_runtime_api.h, HIP 5.2): error codes are
 * ints, hipUUID is 16 bytes. Built by tests/integration/test_amd_visible.py. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

typedef int hipError_t;
typedef struct {
  char bytes[16];
} hipUUID;
hipError_t hipGetDeviceCount(int* count);
hipError_t hipDeviceGetUuid(hipUUID* uuid, int device);
hipError_t hipDeviceGetPCIBusId(char* bus, int len, int device);
hipError_t hipDeviceTotalMem(size_t* bytes, int device);
hipError_t hipDeviceGetName(char* name, int len, int device);

int main(int argc, char** argv) {
  const int pci = argc > 1 && strcmp(argv[1], "--pci") == 0;
  int count = 0;
  if (hipGetDeviceCount(&count) != 0) return 0; /* hipErrorNoDevice: no device left */
  for (int i = 0; i < count; ++i) {
    hipUUID u;
    const hipError_t rc = hipDeviceGetUuid(&u, i);
    if (rc != 0) {
      printf("uuid-error %d\n", (int)rc);
      return 1;
    }
    if (!pci) {
      printf("GPU-%.16s\n", u.bytes);
      continue;
    }
    char bus[64] = "", name[256] = "";
    size_t bytes = 0;
    if (hipDeviceGetPCIBusId(bus, sizeof bus, i) != 0 || hipDeviceTotalMem(&bytes, i) != 0 ||
        hipDeviceGetName(name, sizeof name, i) != 0) {
      printf("details-error\n");
      return 1;
    }
    printf("GPU-%.16s %s %zu %s\n", u.bytes, bus, bytes >> 30, name);
  }
  return 0;
}
