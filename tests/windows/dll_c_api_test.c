/* The C ABI through gpusel.dll and its import library, as a C program on Windows uses it (the
 * functions dllimport'ed: GPUSEL_STATIC is not defined here), on the simulated dgx-h100 (ctest
 * sets GPUSEL_NVML_LIBRARY, GPUSEL_CUDA_LIBRARY and GPUSEL_SIM_MACHINE to the Windows doubles). */
#include <stdio.h>
#include <string.h>

#include "gpusel/gpusel.h"
#include "gpusel/version.h"

static int failures = 0;
#define CHECK(cond)                                                                      \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      fprintf(stderr, "%s:%d: failed: %s (last error: %s)\n", __FILE__, __LINE__, #cond, \
              gpusel_last_error());                                                      \
      ++failures;                                                                        \
    }                                                                                    \
  } while (0)

int main(void) {
  CHECK(strcmp(gpusel_version(), GPUSEL_VERSION_STRING) == 0);
  CHECK(gpusel_is_gpu_uuid("GPU-4ba71ab7-ac05-04a5-6cc6-be1805fdf179") == 1);
  CHECK(gpusel_is_gpu_uuid("0") == 0);

  /* Resolution through nvml.dll (the double): nvidia-smi 3 and 0 of dgx-h100. */
  char buf[256];
  size_t needed = 0;
  int resolved = -1;
  CHECK(gpusel_resolve("3,0", buf, sizeof buf, &needed, &resolved) == GPUSEL_OK);
  CHECK(resolved == 1);
  CHECK(
      strcmp(buf,
             "GPU-a02bff2f-31bf-a6af-28b5-8ab4d47a9a78,GPU-4ba71ab7-ac05-04a5-6cc6-be1805fdf179") ==
      0);
  CHECK(gpusel_resolve("9", buf, sizeof buf, &needed, &resolved) == GPUSEL_BAD_INPUT);

  gpusel_gpu_list* list = NULL;
  CHECK(gpusel_list_gpus(&list) == GPUSEL_OK);
  if (list != NULL) {
    CHECK(gpusel_gpu_list_count(list) == 8);
    gpusel_gpu_info info;
    memset(&info, 0, sizeof info);
    info.size = sizeof info;
    CHECK(gpusel_gpu_list_get(list, 5, &info) == GPUSEL_OK);
    CHECK(strcmp(info.uuid, "GPU-87a152f4-60ca-36fe-3d3d-b70b0d99ed20") == 0);
    CHECK(strcmp(info.name, "NVIDIA H100 80GB HBM3") == 0);
    gpusel_gpu_list_free(list);
  }

  /* The worker side through nvcuda.dll (the double): bind GPU 3 by UUID. */
  int ordinal = -1;
  CHECK(gpusel_assign_gpu("GPU-a02bff2f") == GPUSEL_OK);
  CHECK(gpusel_bind_assigned_gpu(0, &ordinal) == GPUSEL_OK);
  CHECK(ordinal == 3);
  gpusel_identity id;
  memset(&id, 0, sizeof id);
  id.size = sizeof id;
  CHECK(gpusel_gpu_identity(ordinal, &id) == GPUSEL_OK);
  CHECK(strcmp(id.uuid, "GPU-a02bff2f-31bf-a6af-28b5-8ab4d47a9a78") == 0);
  CHECK(id.nvidia_smi_index == 3);

  if (failures == 0)
    printf("gpusel.dll %s: the C ABI works through the import library\n", gpusel_version());
  return failures == 0 ? 0 : 1;
}
