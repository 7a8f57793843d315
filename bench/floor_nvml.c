/* The floor for `gpusel resolve`: the least a program must do to name GPUs by UUID. dlopen NVML
 * (GPUSEL_NVML_LIBRARY, else libnvidia-ml.so.1, as gpusel does), initialise it, enumerate every
 * GPU's UUID, print them, exit. bench/floors.py times it beside gpusel. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

typedef int (*init_fn)(void);
typedef int (*count_fn)(unsigned*);
typedef int (*handle_fn)(unsigned, void**);
typedef int (*uuid_fn)(void*, char*, unsigned);

int main(void) {
  const char* path = getenv("GPUSEL_NVML_LIBRARY");
  void* lib = dlopen(path && *path ? path : "libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return fprintf(stderr, "floor_nvml: %s\n", dlerror()), 1;
  init_fn init = (init_fn)dlsym(lib, "nvmlInit_v2");
  count_fn count = (count_fn)dlsym(lib, "nvmlDeviceGetCount_v2");
  handle_fn handle = (handle_fn)dlsym(lib, "nvmlDeviceGetHandleByIndex_v2");
  uuid_fn uuid = (uuid_fn)dlsym(lib, "nvmlDeviceGetUUID");
  init_fn shutdown = (init_fn)dlsym(lib, "nvmlShutdown");
  if (!init || !count || !handle || !uuid || !shutdown || init() != 0) return 1;
  unsigned n = 0;
  if (count(&n) != 0) return 1;
  for (unsigned i = 0; i < n; ++i) {
    void* dev = NULL;
    char buf[96];
    if (handle(i, &dev) != 0 || uuid(dev, buf, sizeof buf) != 0) return 1;
    puts(buf);
  }
  shutdown();
  return 0;
}
