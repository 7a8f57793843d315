/* What pairwise topology costs the simulated NVML (bench/sim_scale.py): dlopen NVML
 * (GPUSEL_NVML_LIBRARY, else libnvidia-ml.so.1), initialise it, take every GPU's handle by index
 * and by UUID, then ask for the topology level and the NVLink P2P status of pairs, as a client
 * reading the topology does: each GPU with the PEERS GPUs after it (wrapping round; the argument,
 * default every other GPU, capped there; 0: no pairs, the cost of everything else). Prints the
 * number of pairs asked and the sum of the answers (so that nothing is optimised away). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

typedef int (*init_fn)(void);
typedef int (*count_fn)(unsigned*);
typedef int (*handle_fn)(unsigned, void**);
typedef int (*uuid_fn)(void*, char*, unsigned);
typedef int (*by_uuid_fn)(const char*, void**);
typedef int (*level_fn)(void*, void*, int*);
typedef int (*p2p_fn)(void*, void*, int, int*);

int main(int argc, char** argv) {
  const char* path = getenv("GPUSEL_NVML_LIBRARY");
  void* lib = dlopen(path && *path ? path : "libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return fprintf(stderr, "sim_topology: %s\n", dlerror()), 1;
  init_fn init = (init_fn)dlsym(lib, "nvmlInit_v2");
  count_fn count = (count_fn)dlsym(lib, "nvmlDeviceGetCount_v2");
  handle_fn handle = (handle_fn)dlsym(lib, "nvmlDeviceGetHandleByIndex_v2");
  uuid_fn uuid = (uuid_fn)dlsym(lib, "nvmlDeviceGetUUID");
  by_uuid_fn by_uuid = (by_uuid_fn)dlsym(lib, "nvmlDeviceGetHandleByUUID");
  level_fn level = (level_fn)dlsym(lib, "nvmlDeviceGetTopologyCommonAncestor");
  p2p_fn p2p = (p2p_fn)dlsym(lib, "nvmlDeviceGetP2PStatus");
  if (!init || !count || !handle || !uuid || !by_uuid || !level || !p2p || init() != 0) return 1;
  unsigned n = 0;
  if (count(&n) != 0) return 1;
  void** devs = calloc(n ? n : 1, sizeof *devs);
  if (!devs) return 1;
  for (unsigned i = 0; i < n; ++i) {
    char buf[96];
    void* again = NULL;
    if (handle(i, &devs[i]) != 0 || uuid(devs[i], buf, sizeof buf) != 0 ||
        by_uuid(buf, &again) != 0 || again != devs[i])
      return 1;
  }
  unsigned peers = n > 0 ? n - 1 : 0;
  if (argc > 1) {
    const unsigned long asked_for = strtoul(argv[1], NULL, 10);
    if (asked_for < peers) peers = (unsigned)asked_for;
  }
  long long sum = 0, asked = 0;
  for (unsigned a = 0; a < n; ++a) {
    for (unsigned k = 1; k <= peers; ++k) {
      const unsigned b = (a + k) % n;
      int l = 0, s = 0;
      if (level(devs[a], devs[b], &l) != 0 ||
          p2p(devs[a], devs[b], 2 /* NVML_P2P_CAPS_INDEX_NVLINK */, &s) != 0)
        return 1;
      sum += l + s;
      ++asked;
    }
  }
  printf("%lld %lld\n", asked, sum);
  free(devs);
  return 0;
}
