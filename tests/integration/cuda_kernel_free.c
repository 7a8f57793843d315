/* The driver API's calls that need no kernel, as a C program makes them (its own prototypes,
 * linked against libcuda.so.1 by name; no CUDA toolkit needed): 2D copies and memsets, host
 * functions and stream callbacks, prefetches and advice on managed memory, host allocation flags,
 * IPC handles and pool attributes. It prints one line per check, "<name> <values...>", for
 * tests/integration/test_sim_kernel_free.py to compare. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st* CUcontext;
typedef struct CUstream_st* CUstream;
typedef struct CUevent_st* CUevent;
typedef struct CUarray_st* CUarray;
typedef struct CUmemPoolHandle_st* CUmemoryPool;

typedef struct {
  size_t srcXInBytes, srcY;
  int srcMemoryType;
  const void* srcHost;
  CUdeviceptr srcDevice;
  CUarray srcArray;
  size_t srcPitch;
  size_t dstXInBytes, dstY;
  int dstMemoryType;
  void* dstHost;
  CUdeviceptr dstDevice;
  CUarray dstArray;
  size_t dstPitch;
  size_t WidthInBytes, Height;
} CUDA_MEMCPY2D;

typedef struct {
  unsigned int srcXInBytes, srcY;
  int srcMemoryType;
  const void* srcHost;
  unsigned int srcDevice;
  CUarray srcArray;
  unsigned int srcPitch;
  unsigned int dstXInBytes, dstY;
  int dstMemoryType;
  void* dstHost;
  unsigned int dstDevice;
  CUarray dstArray;
  unsigned int dstPitch;
  unsigned int WidthInBytes, Height;
} CUDA_MEMCPY2D_v1;

typedef struct {
  int type;
  int id;
} CUmemLocation;

typedef struct {
  char reserved[64];
} CUipcMemHandle;

enum { HOST = 1, DEVICE = 2, ARRAY = 3, UNIFIED = 4 };

CUresult cuInit(unsigned int flags);
CUresult cuDeviceGet(CUdevice* device, int ordinal);
CUresult cuDevicePrimaryCtxRetain(CUcontext* ctx, CUdevice device);
CUresult cuCtxSetCurrent(CUcontext ctx);
CUresult cuMemAlloc_v2(CUdeviceptr* ptr, size_t bytes);
CUresult cuMemAllocManaged(CUdeviceptr* ptr, size_t bytes, unsigned int flags);
CUresult cuMemHostAlloc(void** ptr, size_t bytes, unsigned int flags);
CUresult cuMemAllocHost_v2(void** ptr, size_t bytes);
CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void* src, size_t bytes);
CUresult cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, size_t bytes);
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void* src, size_t bytes, CUstream stream);
CUresult cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr src, size_t bytes, CUstream stream);
CUresult cuMemcpy2D(const CUDA_MEMCPY2D_v1* copy);
CUresult cuMemcpy2D_v2(const CUDA_MEMCPY2D* copy);
CUresult cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D* copy, CUstream stream);
CUresult cuMemsetD2D32_v2(CUdeviceptr dst, size_t pitch, unsigned int value, size_t width,
                          size_t height);
CUresult cuMemsetD2D8Async(CUdeviceptr dst, size_t pitch, unsigned char value, size_t width,
                           size_t height, CUstream stream);
CUresult cuStreamCreate(CUstream* stream, unsigned int flags);
CUresult cuStreamSynchronize(CUstream stream);
CUresult cuEventCreate(CUevent* event, unsigned int flags);
CUresult cuEventRecord(CUevent event, CUstream stream);
CUresult cuEventElapsedTime(float* ms, CUevent start, CUevent end);
CUresult cuLaunchHostFunc(CUstream stream, void (*fn)(void*), void* data);
CUresult cuStreamAddCallback(CUstream stream, void (*fn)(CUstream, CUresult, void*), void* data,
                             unsigned int flags);
CUresult cuMemPrefetchAsync(CUdeviceptr ptr, size_t count, CUdevice device, CUstream stream);
CUresult cuMemPrefetchAsync_v2(CUdeviceptr ptr, size_t count, CUmemLocation where,
                               unsigned int flags, CUstream stream);
CUresult cuMemAdvise(CUdeviceptr ptr, size_t count, int advice, CUdevice device);
CUresult cuMemAdvise_v2(CUdeviceptr ptr, size_t count, int advice, CUmemLocation where);
CUresult cuMemHostGetFlags(unsigned int* flags, void* p);
CUresult cuIpcGetMemHandle(CUipcMemHandle* handle, CUdeviceptr ptr);
CUresult cuIpcOpenMemHandle_v2(CUdeviceptr* ptr, CUipcMemHandle handle, unsigned int flags);
CUresult cuPointerGetAttribute(void* data, int attribute, CUdeviceptr ptr);
CUresult cuDeviceGetDefaultMemPool(CUmemoryPool* pool, CUdevice device);
CUresult cuMemPoolSetAttribute(CUmemoryPool pool, int attribute, void* value);
CUresult cuMemPoolGetAttribute(CUmemoryPool pool, int attribute, void* value);
CUresult cuGetProcAddress_v2(const char* symbol, void** fn, int version, unsigned long long flags,
                             int* status);

enum { W = 16, H = 8, DEV_PITCH = 64, X = 4 };

static int order[8];
static int events;
static unsigned char* seen_buffer;
static int seen_value;

static void host_fn(void* data) {
  order[events++] = *(int*)data;
  seen_value = seen_buffer[W * H - 1];  // the bytes the copy queued before it moved
}

static void callback(CUstream stream, CUresult status, void* data) {
  order[events++] = *(int*)data + (status == 0 ? 0 : 100) + (stream == NULL ? 0 : 10);
}

static int copy_2d(void) {
  static unsigned char src[W * H], back[32 * H];
  for (int i = 0; i < W * H; ++i) src[i] = (unsigned char)(i * 7 + 1);
  CUdeviceptr pitched = 0, other = 0;
  cuMemAlloc_v2(&pitched, DEV_PITCH * H);
  cuMemAlloc_v2(&other, DEV_PITCH * H);
  CUDA_MEMCPY2D up = {0};
  up.srcMemoryType = HOST;
  up.srcHost = src;
  up.srcPitch = W;
  up.dstMemoryType = DEVICE;
  up.dstDevice = pitched;
  up.dstXInBytes = X;
  up.dstPitch = DEV_PITCH;
  up.WidthInBytes = W;
  up.Height = H;
  CUDA_MEMCPY2D across = {0};  // device to device, unified addressing on both sides
  across.srcMemoryType = UNIFIED;
  across.srcDevice = pitched;
  across.srcXInBytes = X;
  across.srcPitch = DEV_PITCH;
  across.dstMemoryType = UNIFIED;
  across.dstDevice = other;
  across.dstPitch = DEV_PITCH;
  across.WidthInBytes = W;
  across.Height = H;
  CUDA_MEMCPY2D down = {0};
  down.srcMemoryType = DEVICE;
  down.srcDevice = other;
  down.srcPitch = DEV_PITCH;
  down.dstMemoryType = HOST;
  down.dstHost = back;
  down.dstPitch = 32;
  down.WidthInBytes = W;
  down.Height = H;
  CUstream stream = NULL;
  cuStreamCreate(&stream, 0);
  memset(back, 0xee, sizeof back);
  const int rc[3] = {cuMemcpy2D_v2(&up), cuMemcpy2DAsync_v2(&across, stream), cuMemcpy2D_v2(&down)};
  int same = 1, untouched = 1;
  for (int r = 0; r < H; ++r) {
    same = same && memcmp(back + r * 32, src + r * W, W) == 0;
    for (int c = W; c < 32; ++c) untouched = untouched && back[r * 32 + c] == 0xee;
  }
  printf("copy2d %d %d %d %d %d\n", rc[0], rc[1], rc[2], same, untouched);
  // The legacy 32-bit struct, host to host.
  static unsigned char to[W * H];
  CUDA_MEMCPY2D_v1 legacy = {0};
  legacy.srcMemoryType = HOST;
  legacy.srcHost = src;
  legacy.srcPitch = W;
  legacy.dstMemoryType = HOST;
  legacy.dstHost = to;
  legacy.dstPitch = W;
  legacy.WidthInBytes = W;
  legacy.Height = H;
  const int legacy_rc = cuMemcpy2D(&legacy);
  printf("copy2d_v1 %d %d\n", legacy_rc, memcmp(to, src, sizeof to) == 0);
  // Errors: a pitch narrower than the rows, an array (none can exist), past the allocation.
  CUDA_MEMCPY2D bad = up;
  bad.dstPitch = 8;
  const int narrow = cuMemcpy2D_v2(&bad);
  bad = up;
  bad.dstMemoryType = ARRAY;
  bad.dstArray = (CUarray)&bad;
  const int array = cuMemcpy2D_v2(&bad);
  bad = up;
  bad.dstY = 1;
  const int past = cuMemcpy2D_v2(&bad);
  printf("copy2d_errors %d %d %d\n", narrow, array, past);
  // Memsets: 32-bit words in a pitched block, then bytes on a stream.
  unsigned int words[DEV_PITCH / 4 * 2];
  const int set32 = cuMemsetD2D32_v2(pitched, DEV_PITCH, 0xabcd1234u, 3, 2);
  cuMemcpyDtoH_v2(words, pitched, sizeof words);
  const int set8 = cuMemsetD2D8Async(pitched + 1, DEV_PITCH, 0x11, 2, 2, stream);
  unsigned char bytes[DEV_PITCH * 2];
  cuStreamSynchronize(stream);
  cuMemcpyDtoH_v2(bytes, pitched, sizeof bytes);
  printf("memset2d %d %d %x %x %x %d %x %x %x %x %x\n", set32, set8, words[0], words[2],
         words[DEV_PITCH / 4], words[3] == 0xabcd1234u, bytes[0], bytes[1], bytes[2], bytes[3],
         bytes[DEV_PITCH + 2]);
  return 0;
}

// A 2D copy takes the simulated time of a flat copy of as many bytes over the same link.
static void timing(void) {
  static unsigned char host[1024 * 256];
  CUdeviceptr dev = 0;
  cuMemAlloc_v2(&dev, 2048 * 256);
  CUevent e0, e1, e2;
  cuEventCreate(&e0, 0);
  cuEventCreate(&e1, 0);
  cuEventCreate(&e2, 0);
  CUDA_MEMCPY2D up = {0};
  up.srcMemoryType = HOST;
  up.srcHost = host;
  up.srcPitch = 1024;
  up.dstMemoryType = DEVICE;
  up.dstDevice = dev;
  up.dstPitch = 2048;
  up.WidthInBytes = 1024;
  up.Height = 256;
  cuEventRecord(e0, NULL);
  cuMemcpy2D_v2(&up);
  cuEventRecord(e1, NULL);
  cuMemcpyHtoD_v2(dev, host, sizeof host);
  cuEventRecord(e2, NULL);
  float two_d = 0, flat = 0;
  cuEventElapsedTime(&two_d, e0, e1);
  cuEventElapsedTime(&flat, e1, e2);
  printf("timing %.6f %.6f\n", two_d, flat);
}

static void host_functions(void) {
  static unsigned char host[W * H];
  CUdeviceptr dev = 0;
  cuMemAlloc_v2(&dev, sizeof host);
  unsigned char pattern[W * H];
  memset(pattern, 0x5c, sizeof pattern);
  cuMemcpyHtoD_v2(dev, pattern, sizeof pattern);
  CUstream stream = NULL;
  cuStreamCreate(&stream, 0);
  seen_buffer = host;
  static int one = 1, two = 2, three = 3;
  int rc[7];
  rc[0] = cuMemcpyDtoHAsync_v2(host, dev, sizeof host, stream);
  rc[1] = cuLaunchHostFunc(stream, host_fn, &one);
  rc[2] = cuStreamAddCallback(stream, callback, &two, 0);
  rc[3] = cuStreamAddCallback(NULL, callback, &three, 0);
  rc[4] = cuStreamSynchronize(stream);
  rc[5] = cuStreamAddCallback(stream, callback, &two, 1);
  rc[6] = cuLaunchHostFunc(stream, NULL, &one);
  const int bad_stream = cuLaunchHostFunc((CUstream)0xdead0, host_fn, &one);
  printf("hostfn %d %d %d %d %d %d %d %d\n", rc[0], rc[1], rc[2], rc[3], rc[4], rc[5], rc[6],
         bad_stream);
  printf("hostfn_order %d %d %d %d %x\n", events, order[0], order[1], order[2], seen_value);
}

static void managed(CUdevice dev) {
  CUdeviceptr m = 0, plain = 0;
  cuMemAllocManaged(&m, 4096, 1);
  cuMemAlloc_v2(&plain, 4096);
  unsigned char data[4096], back[4096];
  memset(data, 0x42, sizeof data);
  cuMemcpyHtoD_v2(m, data, sizeof data);
  const CUmemLocation gpu = {1, 0}, host = {2, 0}, nowhere = {1, 99}, numa = {3, 0};
  printf("prefetch %d %d %d %d %d %d %d %d %d\n", cuMemPrefetchAsync_v2(m, 4096, gpu, 0, NULL),
         cuMemPrefetchAsync_v2(m, 4096, host, 0, NULL),
         cuMemPrefetchAsync_v2(m, 4096, numa, 0, NULL),
         cuMemPrefetchAsync_v2(m, 4096, nowhere, 0, NULL),
         cuMemPrefetchAsync_v2(m, 4096, gpu, 1, NULL),
         cuMemPrefetchAsync_v2(plain, 4096, gpu, 0, NULL),
         cuMemPrefetchAsync_v2(m, 8192, gpu, 0, NULL), cuMemPrefetchAsync(m, 4096, dev, NULL),
         cuMemPrefetchAsync(m, 4096, -1, NULL));
  printf("advise %d %d %d %d %d %d\n", cuMemAdvise_v2(m, 4096, 1, nowhere),
         cuMemAdvise_v2(m, 4096, 3, gpu), cuMemAdvise_v2(m, 4096, 5, nowhere),
         cuMemAdvise_v2(m, 4096, 9, gpu), cuMemAdvise_v2(plain, 4096, 1, gpu),
         cuMemAdvise(m, 4096, 5, dev));
  cuMemcpyDtoH_v2(back, m, sizeof back);
  printf("managed_data %d\n", memcmp(back, data, sizeof back) == 0);
}

static void host_flags_and_ipc(void) {
  void *mapped = NULL, *plain = NULL;
  cuMemHostAlloc(&mapped, 4096, 0x02 | 0x04);  // DEVICEMAP | WRITECOMBINED
  cuMemAllocHost_v2(&plain, 4096);
  unsigned int f1 = 99, f2 = 99, f3 = 99;
  int stack = 0;
  const int r1 = cuMemHostGetFlags(&f1, (char*)mapped + 100), r2 = cuMemHostGetFlags(&f2, plain);
  const int r3 = cuMemHostGetFlags(&f3, &stack), r4 = cuMemHostGetFlags(NULL, plain);
  printf("host_flags %d %u %d %u %d %u %d\n", r1, f1, r2, f2, r3, f3, r4);
  CUdeviceptr dev = 0;
  cuMemAlloc_v2(&dev, 4096);
  CUipcMemHandle h1, h2;
  memset(&h1, 0, sizeof h1);
  memset(&h2, 1, sizeof h2);
  CUdeviceptr opened = 0;
  int capable = -1;
  const int got = cuIpcGetMemHandle(&h1, dev + 16);
  const int base = cuIpcGetMemHandle(&h2, dev);
  const int same = memcmp(&h1, &h2, sizeof h1) == 0;
  const int marked = memcmp(h1.reserved, "gpusel-sim ipc", 14) == 0;
  const int host = cuIpcGetMemHandle(&h2, (CUdeviceptr)(size_t)&stack);
  const int open = cuIpcOpenMemHandle_v2(&opened, h1, 1);
  const int attribute = cuPointerGetAttribute(&capable, 10, dev);
  printf("ipc %d %d %d %d %d %d %d %d\n", got, base, same, marked, host, open, attribute, capable);
}

static void pools(CUdevice dev) {
  CUmemoryPool pool = NULL;
  cuDeviceGetDefaultMemPool(&pool, dev);
  int off = 0, reuse = -1;
  unsigned long long zero = 0, five = 5, used = 99;
  int rc[6];
  rc[0] = cuMemPoolSetAttribute(pool, 2, &off);
  rc[1] = cuMemPoolGetAttribute(pool, 2, &reuse);
  rc[2] = cuMemPoolSetAttribute(pool, 5, &zero);
  rc[3] = cuMemPoolSetAttribute(pool, 6, &zero);
  rc[4] = cuMemPoolSetAttribute(pool, 8, &five);
  rc[5] = cuMemPoolGetAttribute(pool, 8, &used);
  printf("pool %d %d %d %d %d %d %d %llu\n", rc[0], rc[1], reuse, rc[2], rc[3], rc[4], rc[5], used);
}

static void proc_addresses(void) {
  void *copy = NULL, *prefetch_old = NULL, *prefetch_new = NULL, *hostfn = NULL;
  int s[4] = {-1, -1, -1, -1};
  cuGetProcAddress_v2("cuMemcpy2D", &copy, 12000, 0, &s[0]);
  cuGetProcAddress_v2("cuMemPrefetchAsync", &prefetch_old, 12000, 0, &s[1]);
  cuGetProcAddress_v2("cuMemPrefetchAsync", &prefetch_new, 12080, 0, &s[2]);
  cuGetProcAddress_v2("cuLaunchHostFunc", &hostfn, 12080, 0, &s[3]);
  printf("proc %d %d %d %d %d %d %d %d\n", s[0], s[1], s[2], s[3], copy == (void*)cuMemcpy2D_v2,
         prefetch_old == (void*)cuMemPrefetchAsync, prefetch_new == (void*)cuMemPrefetchAsync_v2,
         hostfn == (void*)cuLaunchHostFunc);
}

int main(void) {
  CUdevice dev = 0;
  CUcontext ctx = NULL;
  if (cuInit(0) != 0 || cuDeviceGet(&dev, 0) != 0 || cuDevicePrimaryCtxRetain(&ctx, dev) != 0 ||
      cuCtxSetCurrent(ctx) != 0) {
    printf("init failed\n");
    return 1;
  }
  copy_2d();
  timing();
  host_functions();
  managed(dev);
  host_flags_and_ipc();
  pools(dev);
  proc_addresses();
  return 0;
}
