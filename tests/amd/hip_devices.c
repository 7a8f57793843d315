/* Starts Debian's real HIP runtime (libamdhip64.so.5) and prints its devices in ordinal order, one
 * unique id a line as ROCr shows it ("GPU-<16 hex>", "GPU-XX"); nothing when HIP has no device.
 * The few calls are declared here from HIP's ABI (hip_runtime_api.h, HIP 5.2): error codes are
 * ints, hipUUID is 16 bytes. Built by tests/integration/test_amd_visible.py. */
#include <stdio.h>

typedef int hipError_t;
typedef struct {
  char bytes[16];
} hipUUID;
hipError_t hipGetDeviceCount(int* count);
hipError_t hipDeviceGetUuid(hipUUID* uuid, int device);

int main(void) {
  int count = 0;
  if (hipGetDeviceCount(&count) != 0) return 0; /* hipErrorNoDevice: no device left */
  for (int i = 0; i < count; ++i) {
    hipUUID u;
    const hipError_t rc = hipDeviceGetUuid(&u, i);
    if (rc != 0) {
      printf("uuid-error %d\n", (int)rc);
      return 1;
    }
    printf("GPU-%.16s\n", u.bytes);
  }
  return 0;
}
