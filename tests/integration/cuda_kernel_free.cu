// The CUDA runtime's calls that need no kernel, as an nvcc-built program makes them (built with
// `nvcc -cudart shared` by tests/integration/test_sim_runtime.py): 2D copies and memsets,
// __device__ symbols, host functions and stream callbacks, managed-memory hints, pools, stream
// ids, IPC handles, host flags, __managed__ variables, and a kernel launch still refused. One line
// per check:
// "<name> <values...>".
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>

__device__ int counter = 41;
__device__ float table[64];
__managed__ int managed_counter;
__managed__ double managed_table[8];
__constant__ unsigned char lookup[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};

__global__ void touch(int* p) {
  *p = counter;
}

namespace {

int order[8];
int events = 0;
unsigned char* seen_buffer = nullptr;
int seen = -1;

void CUDART_CB host_fn(void* data) {
  order[events++] = *static_cast<int*>(data);
  seen = seen_buffer[255];
}

void CUDART_CB callback(cudaStream_t, cudaError_t status, void* data) {
  order[events++] = *static_cast<int*>(data) + (status == cudaSuccess ? 0 : 100);
}

void copies_2d() {
  enum { W = 24, H = 10, HOST_PITCH = 32 };
  unsigned char src[W * H], back[HOST_PITCH * H];
  for (int i = 0; i < W * H; ++i) src[i] = static_cast<unsigned char>(i * 13 + 5);
  std::memset(back, 0xee, sizeof back);
  void *a = nullptr, *b = nullptr;
  size_t pitch_a = 0, pitch_b = 0;
  cudaMallocPitch(&a, &pitch_a, W, H);
  cudaMallocPitch(&b, &pitch_b, W, H);
  cudaStream_t stream;
  cudaStreamCreate(&stream);
  int rc[6];
  rc[0] = cudaMemcpy2D(a, pitch_a, src, W, W, H, cudaMemcpyHostToDevice);
  rc[1] = cudaMemcpy2DAsync(b, pitch_b, a, pitch_a, W, H, cudaMemcpyDeviceToDevice, stream);
  rc[2] = cudaStreamSynchronize(stream);
  rc[3] = cudaMemcpy2D(back, HOST_PITCH, b, pitch_b, W, H, cudaMemcpyDefault);
  int same = 1, untouched = 1;
  for (int r = 0; r < H; ++r) {
    same = same && std::memcmp(back + r * HOST_PITCH, src + r * W, W) == 0;
    for (int c = W; c < HOST_PITCH; ++c) untouched = untouched && back[r * HOST_PITCH + c] == 0xee;
  }
  rc[4] = cudaMemcpy2D(back, 8, b, pitch_b, W, H, cudaMemcpyDeviceToHost);  // pitch < width
  rc[5] = cudaMemcpy2D(back, HOST_PITCH, b, pitch_b, W, H, static_cast<cudaMemcpyKind>(7));
  std::printf("memcpy2d %d %d %d %d %d %d %d %d %zu\n", rc[0], rc[1], rc[2], rc[3], same, untouched,
              rc[4], rc[5], pitch_a);
  // cudaMemset2D: 3 bytes of each of 2 rows; cudaMemset2DAsync: 2 bytes of 2 rows, 1 byte in.
  const int set = cudaMemset2D(a, pitch_a, 0x7f, 3, 2);
  const int set_async = cudaMemset2DAsync(static_cast<char*>(a) + 1, pitch_a, 0x22, 2, 2, stream);
  cudaStreamSynchronize(stream);
  unsigned char row[2][4];
  cudaMemcpy2D(row, 4, a, pitch_a, 4, 2, cudaMemcpyDeviceToHost);
  std::printf("memset2d %d %d %x %x %x %x %x %x\n", set, set_async, row[0][0], row[0][1], row[0][2],
              row[0][3], row[1][2], row[1][3] == src[W + 3]);
  cudaFree(a);
  cudaFree(b);
  cudaStreamDestroy(stream);
}

void symbols() {
  int initial = 0, value = 7, back = 0;
  size_t size = 0, table_size = 0;
  void* address = nullptr;
  unsigned char constants[16];
  int rc[9];
  rc[0] = cudaMemcpyFromSymbol(&initial, counter, sizeof initial);  // the initialiser, 41
  rc[1] = cudaMemcpyToSymbol(counter, &value, sizeof value);
  rc[2] = cudaMemcpyFromSymbol(&back, counter, sizeof back);
  rc[3] = cudaGetSymbolSize(&size, counter);
  rc[4] = cudaGetSymbolSize(&table_size, table);
  rc[5] = cudaGetSymbolAddress(&address, counter);
  int through_address = 0;
  cudaMemcpy(&through_address, address, sizeof through_address, cudaMemcpyDeviceToHost);
  rc[6] = cudaMemcpyFromSymbol(constants, lookup, sizeof constants);
  float row[4] = {1.5f, 2.5f, 3.5f, 4.5f}, got[4] = {0, 0, 0, 0};
  rc[7] = cudaMemcpyToSymbolAsync(table, row, sizeof row, 8 * sizeof(float), cudaMemcpyHostToDevice,
                                  nullptr);
  cudaMemcpyFromSymbolAsync(got, table, sizeof got, 8 * sizeof(float), cudaMemcpyDeviceToHost,
                            nullptr);
  cudaDeviceSynchronize();
  rc[8] = cudaMemcpyToSymbol(table, row, sizeof row, 62 * sizeof(float));  // past its end
  const int wrong_way =
      cudaMemcpyToSymbol(counter, &value, sizeof value, 0, cudaMemcpyDeviceToHost);
  int not_a_symbol = 0;
  const int unknown = cudaMemcpyToSymbol(not_a_symbol, &value, sizeof value);
  std::printf("symbols %d %d %d %d %d %d %d %d %d %d %d %d\n", rc[0], initial, rc[1], rc[2], back,
              rc[3], static_cast<int>(size), rc[4], static_cast<int>(table_size), rc[5],
              through_address, rc[6]);
  std::printf("symbols_more %d %d %d %d %g %g %d %d %d\n", constants[0], constants[15], rc[7],
              got[0] == 1.5f && got[3] == 4.5f, got[1], got[2], rc[8], wrong_way, unknown);
}

void host_functions() {
  static unsigned char host[256];
  void* dev = nullptr;
  cudaMalloc(&dev, sizeof host);
  cudaMemset(dev, 0x3c, sizeof host);
  cudaStream_t stream;
  cudaStreamCreate(&stream);
  seen_buffer = host;
  static int one = 1, two = 2, three = 3;
  int rc[6];
  rc[0] = cudaMemcpyAsync(host, dev, sizeof host, cudaMemcpyDeviceToHost, stream);
  rc[1] = cudaLaunchHostFunc(stream, host_fn, &one);
  rc[2] = cudaStreamAddCallback(stream, callback, &two, 0);
  rc[3] = cudaLaunchHostFunc(nullptr, host_fn, &three);
  rc[4] = cudaStreamSynchronize(stream);
  rc[5] = cudaStreamAddCallback(stream, callback, &two, 1);
  const int last = cudaGetLastError();
  std::printf("hostfn %d %d %d %d %d %d %d\n", rc[0], rc[1], rc[2], rc[3], rc[4], rc[5], last);
  std::printf("hostfn_order %d %d %d %d %x\n", events, order[0], order[1], order[2], seen);
  cudaFree(dev);
  cudaStreamDestroy(stream);
}

void managed_and_more() {
  void *m = nullptr, *plain = nullptr;
  cudaMallocManaged(&m, 1 << 16);
  cudaMalloc(&plain, 1 << 16);
  cudaStream_t stream;
  cudaStreamCreate(&stream);
  cudaMemLocation gpu{}, host{}, nowhere{};
  gpu.type = cudaMemLocationTypeDevice;
  gpu.id = 0;
  host.type = cudaMemLocationTypeHost;
  nowhere.type = cudaMemLocationTypeDevice;
  nowhere.id = 64;
  std::printf("prefetch %d %d %d %d %d\n", cudaMemPrefetchAsync(m, 1 << 16, gpu, 0, stream),
              cudaMemPrefetchAsync(m, 1 << 16, host, 0, stream),
              cudaMemPrefetchAsync(m, 1 << 16, nowhere, 0, stream),
              cudaMemPrefetchAsync(plain, 1 << 16, gpu, 0, stream),
              cudaMemAdvise(m, 1 << 16, cudaMemAdviseSetPreferredLocation, gpu));
  cudaGetLastError();
  cudaMemPool_t pool;
  cudaDeviceGetDefaultMemPool(&pool, 0);
  unsigned long long threshold = 1ull << 30, read = 0;
  int opportunistic = 0, read_flag = -1;
  int prc[4];
  prc[0] = cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold);
  prc[1] = cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &read);
  prc[2] = cudaMemPoolSetAttribute(pool, cudaMemPoolReuseAllowOpportunistic, &opportunistic);
  prc[3] = cudaMemPoolGetAttribute(pool, cudaMemPoolReuseAllowOpportunistic, &read_flag);
  std::printf("pool %d %d %d %d %llu %d\n", prc[0], prc[1], prc[2], prc[3], read, read_flag);
  unsigned long long id1 = 0, id2 = 0;
  cudaStream_t other;
  cudaStreamCreate(&other);
  const int i1 = cudaStreamGetId(stream, &id1), i2 = cudaStreamGetId(other, &id2);
  std::printf("stream_id %d %d %d\n", i1, i2, id1 != id2 && id1 != 0);
  cudaIpcMemHandle_t handle;
  void* opened = nullptr;
  const int ipc = cudaIpcGetMemHandle(&handle, plain);
  const int ipc_host = cudaIpcGetMemHandle(&handle, &id1);
  const int ipc_open = cudaIpcOpenMemHandle(&opened, handle, cudaIpcMemLazyEnablePeerAccess);
  cudaGetLastError();
  void* pinned = nullptr;
  unsigned flags = 99;
  cudaHostAlloc(&pinned, 4096, cudaHostAllocMapped | cudaHostAllocPortable);
  const int hf = cudaHostGetFlags(&flags, pinned);
  std::printf("ipc_flags %d %d %d %d %u\n", ipc, ipc_host, ipc_open, hf, flags);
  // A kernel still does not run.
  touch<<<1, 1>>>(static_cast<int*>(plain));
  std::printf("launch %d\n", static_cast<int>(cudaGetLastError()));
  cudaFreeHost(pinned);
  cudaFree(m);
  cudaFree(plain);
}

// __managed__ variables from host code: the first access initialises the module, which gives each
// variable managed memory (zeroed: its initialiser is in the device image); written and read by
// the host, it is managed memory to the runtime, and a copy from it reads what was written.
void managed_variables() {
  const int start = managed_counter;
  managed_counter = 12;
  managed_table[3] = 2.5;
  cudaPointerAttributes attr{};
  const int rc = cudaPointerGetAttributes(&attr, &managed_counter);
  int copied = 0;
  const int copy = cudaMemcpy(&copied, &managed_counter, sizeof copied, cudaMemcpyDefault);
  std::printf("managed_var %d %d %d %d %d %g %d\n", start, rc, static_cast<int>(attr.type), copy,
              copied, managed_table[3], &managed_table[0] != nullptr);
}

}  // namespace

int main() {
  if (cudaSetDevice(0) != cudaSuccess) {
    std::printf("no device\n");
    return 1;
  }
  copies_2d();
  symbols();
  host_functions();
  managed_and_more();
  managed_variables();
  return 0;
}
