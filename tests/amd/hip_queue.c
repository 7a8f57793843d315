/* A HIP program that works on one GPU the way a worker would start to: it makes HIP's device
 * ORDINAL current and creates a stream there (ROCr makes an AQL queue on that GPU, which ROCm SMI
 * then lists the process on), prints "queue <the device's id as ROCr shows it>", then stays
 * SECONDS seconds before it exits 0. With ROUNDS, it first works that hard: ROUNDS memsets on its
 * stream (each a packet: more than the ring holds, so it wraps), then ROUNDS streams made, used
 * and destroyed one after another (more queues than the stand-in has at once), each waited for.
 * Usage: hip_queue ORDINAL SECONDS [ROUNDS]. Run over the simulator's thunk (sim/hsakmt_sim.c),
 * whose command processor completes the packets HIP submits. The HIP calls are declared from HIP's
 * ABI (hip_runtime_api.h, HIP 5.2). Built by tests/integration/test_amd_visible.py. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef int hipError_t;
typedef struct {
  char bytes[16];
} hipUUID;
typedef void* hipStream_t;
hipError_t hipSetDevice(int device);
hipError_t hipStreamCreate(hipStream_t* stream);
hipError_t hipDeviceGetUuid(hipUUID* uuid, int device);
hipError_t hipMalloc(void** ptr, size_t size);
hipError_t hipMemsetAsync(void* dst, int value, size_t size, hipStream_t stream);
hipError_t hipStreamSynchronize(hipStream_t stream);
hipError_t hipStreamDestroy(hipStream_t stream);

/* ROUNDS packets on `stream`, then ROUNDS streams of one packet each: 0, or the first HIP error. */
static hipError_t work(hipStream_t stream, int rounds) {
  void* buffer = NULL;
  hipError_t e = hipMalloc(&buffer, 4096);
  for (int i = 0; e == 0 && i < rounds; ++i) e = hipMemsetAsync(buffer, i & 0xff, 4096, stream);
  if (e == 0) e = hipStreamSynchronize(stream);
  for (int i = 0; e == 0 && i < rounds; ++i) {
    hipStream_t s = NULL;
    e = hipStreamCreate(&s);
    if (e == 0) e = hipMemsetAsync(buffer, 0, 4096, s);
    if (e == 0) e = hipStreamSynchronize(s);
    if (e == 0) e = hipStreamDestroy(s);
  }
  return e;
}

int main(int argc, char** argv) {
  if (argc != 3 && argc != 4) {
    fprintf(stderr, "usage: hip_queue ORDINAL SECONDS [ROUNDS]\n");
    return 2;
  }
  const int ordinal = atoi(argv[1]);
  hipStream_t stream = NULL;
  hipUUID id;
  hipError_t e = hipSetDevice(ordinal);
  if (e == 0) e = hipStreamCreate(&stream);
  if (e == 0) e = hipDeviceGetUuid(&id, ordinal);
  if (e == 0 && argc == 4) e = work(stream, atoi(argv[3]));
  if (e != 0) {
    fprintf(stderr, "hip_queue: HIP error %d on device %d\n", e, ordinal);
    return 1;
  }
  printf("queue GPU-%.16s\n", id.bytes);
  fflush(stdout);
  const struct timespec stay = {atoi(argv[2]), 0};
  nanosleep(&stay, NULL);
  return 0;
}
