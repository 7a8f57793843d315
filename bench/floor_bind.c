/* The floor for binding a GPU the way a worker must: dlopen the CUDA driver (GPUSEL_CUDA_LIBRARY,
 * else libcuda.so.1), cuInit, enumerate the devices' UUIDs, find the one asked for (argv[1], a
 * full GPU UUID), retain its primary context and make it current, print its ordinal, exit.
 * `floor_bind --index N` is handed an nvidia-smi index instead, as `gpusel bind --gpu N` is: it
 * first asks NVML (GPUSEL_NVML_LIBRARY, else libnvidia-ml.so.1) for that GPU's UUID (init, the
 * handle of index N, its UUID), the least that turning an index into a UUID costs.
 * bench/floors.py times it beside `gpusel bind` and the worker API. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  unsigned char bytes[16];
} uuid_t16;
typedef int (*init_fn)(unsigned);
typedef int (*count_fn)(int*);
typedef int (*get_fn)(int*, int);
typedef int (*uuid_fn)(uuid_t16*, int);
typedef int (*retain_fn)(void**, int);
typedef int (*current_fn)(void*);
typedef int (*nvml_init_fn)(void);
typedef int (*nvml_handle_fn)(unsigned, void**);
typedef int (*nvml_uuid_fn)(void*, char*, unsigned);

/* The UUID of nvidia-smi index `index`, through NVML, into `out`; 0 on success. */
static int uuid_of_index(const char* index, char* out, unsigned size) {
  const char* path = getenv("GPUSEL_NVML_LIBRARY");
  void* lib = dlopen(path && *path ? path : "libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return fprintf(stderr, "floor_bind: %s\n", dlerror()), 1;
  nvml_init_fn init = (nvml_init_fn)dlsym(lib, "nvmlInit_v2");
  nvml_handle_fn handle = (nvml_handle_fn)dlsym(lib, "nvmlDeviceGetHandleByIndex_v2");
  nvml_uuid_fn uuid = (nvml_uuid_fn)dlsym(lib, "nvmlDeviceGetUUID");
  void* dev = NULL;
  char* end = NULL;
  const unsigned long n = strtoul(index, &end, 10);
  if (*index == '\0' || *end != '\0') return fprintf(stderr, "floor_bind: index %s?\n", index), 2;
  if (!init || !handle || !uuid || init() != 0)
    return fprintf(stderr, "floor_bind: NVML did not start\n"), 1;
  if (handle((unsigned)n, &dev) != 0 || uuid(dev, out, size) != 0)
    return fprintf(stderr, "floor_bind: NVML has no GPU %lu\n", n), 1;
  return 0;
}

int main(int argc, char** argv) {
  char asked[96];
  if (argc == 3 && strcmp(argv[1], "--index") == 0) {
    if (uuid_of_index(argv[2], asked, sizeof asked) != 0) return 1;
  } else if (argc == 2) {
    snprintf(asked, sizeof asked, "%s", argv[1]);
  } else {
    return fprintf(stderr, "usage: floor_bind GPU-UUID | floor_bind --index N\n"), 2;
  }
  const char* path = getenv("GPUSEL_CUDA_LIBRARY");
  void* lib = dlopen(path && *path ? path : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return fprintf(stderr, "floor_bind: %s\n", dlerror()), 1;
  init_fn init = (init_fn)dlsym(lib, "cuInit");
  count_fn count = (count_fn)dlsym(lib, "cuDeviceGetCount");
  get_fn get = (get_fn)dlsym(lib, "cuDeviceGet");
  uuid_fn uuid = (uuid_fn)dlsym(lib, "cuDeviceGetUuid_v2");
  retain_fn retain = (retain_fn)dlsym(lib, "cuDevicePrimaryCtxRetain");
  current_fn current = (current_fn)dlsym(lib, "cuCtxSetCurrent");
  if (!init || !count || !get || !uuid || !retain || !current || init(0) != 0) return 1;
  int n = 0;
  if (count(&n) != 0) return 1;
  for (int i = 0; i < n; ++i) {
    int dev = 0;
    uuid_t16 u;
    char text[64];
    if (get(&dev, i) != 0 || uuid(&u, dev) != 0) return 1;
    const unsigned char* b = u.bytes;
    snprintf(text, sizeof text,
             "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
             b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
             b[15]);
    if (strcmp(text, asked) == 0) {
      void* ctx = NULL;
      if (retain(&ctx, dev) != 0 || current(ctx) != 0) return 1;
      printf("%d\n", i);
      return 0;
    }
  }
  fprintf(stderr, "floor_bind: %s is not visible\n", asked);
  return 1;
}
