/* A HIP program that binds its GPU in-process through libgpusel's C ABI, as a worker of a job on
 * AMD GPUs would: it starts Debian's real HIP runtime (libamdhip64.so.5), calls
 * gpusel_bind_assigned_gpu, then asks HIP which device is current and prints
 *   <ordinal gpusel returned> <hipGetDevice's ordinal> <that device's id as ROCr shows it>
 * A refusal prints gpusel's message on stderr and exits with gpusel's status. With "hold" as its
 * argument it then waits for its standard input to close, keeping its claim meanwhile. The HIP
 * calls are declared from HIP's ABI (hip_runtime_api.h, HIP 5.2). Built by
 * tests/integration/test_amd_visible.py. */
#include <stdio.h>
#include <string.h>

#include "gpusel/gpusel.h"

typedef int hipError_t;
typedef struct {
  char bytes[16];
} hipUUID;
hipError_t hipGetDeviceCount(int* count);
hipError_t hipGetDevice(int* device);
hipError_t hipDeviceGetUuid(hipUUID* uuid, int device);

int main(int argc, char** argv) {
  int count = 0;
  (void)hipGetDeviceCount(&count); /* the program's first HIP call: HIP starts */
  int ordinal = -1;
  const gpusel_status status = gpusel_bind_assigned_gpu(0, &ordinal);
  if (status != GPUSEL_OK) {
    fprintf(stderr, "%s\n", gpusel_last_error());
    return status;
  }
  int current = -1;
  hipUUID u;
  if (hipGetDevice(&current) != 0 || hipDeviceGetUuid(&u, current) != 0) {
    fprintf(stderr, "HIP has no current device after the bind\n");
    return 1;
  }
  printf("%d %d GPU-%.16s\n", ordinal, current, u.bytes);
  fflush(stdout);
  if (argc > 1 && strcmp(argv[1], "hold") == 0) {
    while (getchar() != EOF) {
    }
  }
  return 0;
}
