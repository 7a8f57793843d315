/* A CUDA program that knows nothing of gpusel, as most are written: it takes CUDA device 0, makes
 * a context there, allocates a little and holds it until the test lets it go. Usage:
 *   cuda_hold DIR
 * Once its context is made it writes DIR/ready.<pid> (its pid and CUDA_VISIBLE_DEVICES as it saw
 * it, one line), then waits for a shared lock on DIR/go, which the test holds exclusively while it
 * looks at the GPUs: no timing, the test decides when it ends. Tests judge where the context is by
 * the simulator's process lists, never by what this program writes. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "cuda_take_device.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: cuda_hold DIR\n");
    return 2;
  }
  const CUresult rc = take_cuda_device(0);
  if (rc != 0) {
    fprintf(stderr, "cuda_hold: CUDA error %d\n", rc);
    return 1;
  }
  char path[4096], tmp[4096];
  const char* cvd = getenv("CUDA_VISIBLE_DEVICES");
  snprintf(path, sizeof path, "%s/ready.%d", argv[1], (int)getpid());
  snprintf(tmp, sizeof tmp, "%s/.ready.%d", argv[1], (int)getpid());
  FILE* f = fopen(tmp, "w");
  if (f == NULL) return 1;
  fprintf(f, "%d %s\n", (int)getpid(), cvd ? cvd : "-");
  if (fclose(f) != 0 || rename(tmp, path) != 0) return 1; /* whole, or not at all */
  snprintf(path, sizeof path, "%s/go", argv[1]);
  const int go = open(path, O_RDONLY);
  if (go < 0 || flock(go, LOCK_SH) != 0) return 1;
  printf("cuda_hold %d done\n", (int)getpid());
  return 0;
}
