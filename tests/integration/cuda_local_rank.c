/* A program that knows nothing of gpusel, as many are written: it takes CUDA device LOCAL_RANK
 * (the torchrun convention), makes a context there, allocates a little, prints which device it
 * took and holds it for the given number of seconds (default 3). Run under `gpusel run` without
 * --set-visible, its ranks land on CUDA devices 0..n-1 whatever GPUs gpusel gave them. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "cuda_take_device.h"

int main(int argc, char** argv) {
  const char* rank = getenv("LOCAL_RANK");
  const int ordinal = rank ? atoi(rank) : 0;
  const int seconds = argc > 1 ? atoi(argv[1]) : 3;
  const CUresult rc = take_cuda_device(ordinal);
  if (rc != 0) {
    printf("rank %s: CUDA error %d on device %d\n", rank ? rank : "-", rc, ordinal);
    return 1;
  }
  printf("rank %s: on CUDA device %d\n", rank ? rank : "-", ordinal);
  fflush(stdout);
  sleep((unsigned)seconds);
  return 0;
}
