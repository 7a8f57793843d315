/* What a program that knows nothing of gpusel does to use a GPU, shared by the test programs that
 * play one (cuda_local_rank.c, cuda_hold.c): the driver API's few declarations they need, and
 * taking CUDA device `ordinal` the usual way (initialise, retain its primary context, make it
 * current, allocate a little), which the simulator records as a context on that GPU. */
#ifndef GPUSEL_TESTS_CUDA_TAKE_DEVICE_H
#define GPUSEL_TESTS_CUDA_TAKE_DEVICE_H

#include <stddef.h>

typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st* CUcontext;
typedef unsigned long long CUdeviceptr;

CUresult cuInit(unsigned int flags);
CUresult cuDeviceGet(CUdevice* device, int ordinal);
CUresult cuDevicePrimaryCtxRetain(CUcontext* ctx, CUdevice device);
CUresult cuCtxSetCurrent(CUcontext ctx);
CUresult cuMemAlloc_v2(CUdeviceptr* ptr, size_t bytes);

/* 0 once the device's context is current and holds 1 MiB; else the first CUDA error. */
static inline CUresult take_cuda_device(int ordinal) {
  CUdevice dev = 0;
  CUcontext ctx = NULL;
  CUdeviceptr ptr = 0;
  CUresult rc = cuInit(0);
  if (rc == 0) rc = cuDeviceGet(&dev, ordinal);
  if (rc == 0) rc = cuDevicePrimaryCtxRetain(&ctx, dev);
  if (rc == 0) rc = cuCtxSetCurrent(ctx);
  if (rc == 0) rc = cuMemAlloc_v2(&ptr, 1 << 20);
  return rc;
}

#endif
