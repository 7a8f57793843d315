/* A HIP program that binds its GPU in-process through libgpusel's C ABI, as a worker of a job on
 * AMD GPUs would: it starts Debian's real HIP runtime (libamdhip64.so.5), calls
 * gpusel_bind_assigned_gpu, then asks HIP which device is current and prints
 *   <ordinal gpusel returned> <hipGetDevice's ordinal> <that device's id as ROCr shows it>
 * or "<ordinal gpusel returned> none" when HIP has no device (an NVIDIA machine). A refusal prints
 * gpusel's message on stderr and exits with gpusel's status. Arguments, in any order:
 *   publish=ID   gpusel_set_assigned_gpu(ID) before the bind (an assignment made in code)
 *   copy=PATH    dlopen PATH (another copy of the HIP runtime) before the bind
 *   identity     gpusel_gpu_identity(ordinal) after the bind; its message on stderr if refused
 *   visible      gpusel_assigned_visible_gpu before the bind, printed first as "visible N"
 *   hold         after printing, wait for standard input to close, keeping the claim meanwhile
 * The HIP calls are declared from HIP's ABI (hip_runtime_api.h, HIP 5.2). Built by
 * tests/integration/test_amd_visible.py. */
#include <dlfcn.h>
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

static int failed(gpusel_status status) {
  fprintf(stderr, "%s\n", gpusel_last_error());
  return status;
}

int main(int argc, char** argv) {
  int count = 0;
  if (hipGetDeviceCount(&count) != 0) count = 0; /* the program's first HIP call: HIP starts */
  int hold = 0, identity = 0;
  for (int i = 1; i < argc; ++i) {
    if (strncmp(argv[i], "publish=", 8) == 0) {
      const gpusel_status s = gpusel_set_assigned_gpu(argv[i] + 8);
      if (s != GPUSEL_OK) return failed(s);
    } else if (strncmp(argv[i], "copy=", 5) == 0) {
      if (dlopen(argv[i] + 5, RTLD_NOW | RTLD_LOCAL) == NULL) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 3;
      }
    } else if (strcmp(argv[i], "visible") == 0) {
      int visible = -2;
      const gpusel_status s = gpusel_assigned_visible_gpu(&visible);
      if (s != GPUSEL_OK) return failed(s);
      printf("visible %d\n", visible);
    } else if (strcmp(argv[i], "identity") == 0) {
      identity = 1;
    } else if (strcmp(argv[i], "hold") == 0) {
      hold = 1;
    }
  }
  int ordinal = -1;
  const gpusel_status status = gpusel_bind_assigned_gpu(0, &ordinal);
  if (status != GPUSEL_OK) return failed(status);
  if (count == 0) {
    printf("%d none\n", ordinal);
  } else {
    int current = -1;
    hipUUID u;
    if (hipGetDevice(&current) != 0 || hipDeviceGetUuid(&u, current) != 0) {
      fprintf(stderr, "HIP has no current device after the bind\n");
      return 1;
    }
    printf("%d %d GPU-%.16s\n", ordinal, current, u.bytes);
  }
  fflush(stdout);
  if (identity) {
    gpusel_identity id;
    memset(&id, 0, sizeof id);
    id.size = sizeof id;
    const gpusel_status s = gpusel_gpu_identity(ordinal, &id);
    if (s != GPUSEL_OK) return failed(s);
    printf("identity %s\n", id.uuid);
  }
  if (hold) {
    while (getchar() != EOF) {
    }
  }
  return 0;
}
