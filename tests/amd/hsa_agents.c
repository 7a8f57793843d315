/* Starts ROCr (libhsa-runtime64.so.1) and prints the GPU agents it keeps after applying
 * ROCR_VISIBLE_DEVICES, one unique id a line in ROCr's order ("GPU-<16 hex>", "GPU-XX" for a GPU
 * without one); "init N" when hsa_init fails with status N (an empty entry in the variable makes
 * ROCr refuse to start). Built by tests/integration/test_amd_rocr.py against Debian's hsa.h. */
#include <stdio.h>
#include <string.h>

#include "hsa/hsa.h"
#include "hsa/hsa_ext_amd.h"

static hsa_status_t print_gpu(hsa_agent_t agent, void* data) {
  (void)data;
  hsa_device_type_t type;
  if (hsa_agent_get_info(agent, HSA_AGENT_INFO_DEVICE, &type) != HSA_STATUS_SUCCESS)
    return HSA_STATUS_ERROR;
  if (type != HSA_DEVICE_TYPE_GPU) return HSA_STATUS_SUCCESS;
  char uuid[64];
  memset(uuid, 0, sizeof uuid);
  if (hsa_agent_get_info(agent, (hsa_agent_info_t)HSA_AMD_AGENT_INFO_UUID, uuid) !=
      HSA_STATUS_SUCCESS)
    return HSA_STATUS_ERROR;
  printf("%s\n", uuid);
  return HSA_STATUS_SUCCESS;
}

int main(void) {
  const hsa_status_t init = hsa_init();
  if (init != HSA_STATUS_SUCCESS) {
    printf("init %d\n", (int)init);
    return 0;
  }
  const hsa_status_t rc = hsa_iterate_agents(print_gpu, NULL);
  hsa_shut_down();
  return rc == HSA_STATUS_SUCCESS ? 0 : 1;
}
