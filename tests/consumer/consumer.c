/* Uses the installed C ABI, built with pkg-config: cc consumer.c $(pkg-config --cflags --libs
 * gpusel) */
#include <gpusel/gpusel.h>
#include <stdio.h>

int main(int argc, char** argv) {
  char buf[8];
  size_t needed = 0;
  int resolved = 0;
  gpusel_status s = gpusel_resolve(argc > 1 ? argv[1] : "0", buf, sizeof buf, &needed, &resolved);
  if (s == GPUSEL_TOO_SMALL) {
    char big[4096];
    if (needed > sizeof big) return 1;
    s = gpusel_resolve(argc > 1 ? argv[1] : "0", big, needed, NULL, &resolved);
    if (s == GPUSEL_OK) printf("version=%s resolved=%d gpus=%s\n", gpusel_version(), resolved, big);
  } else if (s == GPUSEL_OK) {
    printf("version=%s resolved=%d gpus=%s\n", gpusel_version(), resolved, buf);
  }
  if (s != GPUSEL_OK) {
    fprintf(stderr, "consumer: %s\n", gpusel_last_error());
    return s;
  }
  gpusel_gpu_list* list = NULL;
  if (gpusel_list_gpus(&list) != GPUSEL_OK) {
    fprintf(stderr, "consumer: %s\n", gpusel_last_error());
    return 1;
  }
  for (size_t i = 0; i < gpusel_gpu_list_count(list); ++i) {
    gpusel_gpu_info info = {sizeof info};
    gpusel_gpu_list_get(list, i, &info);
    printf("%u %d %s %s\n", info.nvidia_smi_index, info.cuda_ordinal, info.uuid, info.name);
  }
  gpusel_gpu_list_free(list);
  return 0;
}
