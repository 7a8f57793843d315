/* A program that knows nothing of gpusel, as many are written: it takes CUDA device LOCAL_RANK
 * (the torchrun convention), makes a context there, allocates a little, prints which device it
 * took and holds it for the given number of seconds (default 3). Run under `gpusel run` without
 * --set-visible, its ranks land on CUDA devices 0..n-1 whatever GPUs gpusel gave them. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st* CUcontext;
typedef unsigned long long CUdeviceptr;

CUresult cuInit(unsigned int flags);
CUresult cuDeviceGet(CUdevice* device, int ordinal);
CUresult cuDevicePrimaryCtxRetain(CUcontext* ctx, CUdevice device);
CUresult cuCtxSetCurrent(CUcontext ctx);
CUresult cuMemAlloc_v2(CUdeviceptr* ptr, size_t bytes);

int main(int argc, char** argv) {
  const char* rank = getenv("LOCAL_RANK");
  const int ordinal = rank ? atoi(rank) : 0;
  const int seconds = argc > 1 ? atoi(argv[1]) : 3;
  CUdevice dev = 0;
  CUcontext ctx = NULL;
  CUdeviceptr ptr = 0;
  CUresult rc = cuInit(0);
  if (rc == 0) rc = cuDeviceGet(&dev, ordinal);
  if (rc == 0) rc = cuDevicePrimaryCtxRetain(&ctx, dev);
  if (rc == 0) rc = cuCtxSetCurrent(ctx);
  if (rc == 0) rc = cuMemAlloc_v2(&ptr, 1 << 20);
  if (rc != 0) {
    printf("rank %s: CUDA error %d on device %d\n", rank ? rank : "-", rc, ordinal);
    return 1;
  }
  printf("rank %s: on CUDA device %d\n", rank ? rank : "-", ordinal);
  fflush(stdout);
  sleep((unsigned)seconds);
  return 0;
}
