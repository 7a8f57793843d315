// Stream capture of work that needs no kernel, as an nvcc-built program makes it (built with
// `nvcc -cudart shared` by tests/integration/test_sim_runtime.py). One line per check:
// "<name> <values...>".
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>

namespace {

int host_calls = 0;

void CUDART_CB count_call(void*) {
  ++host_calls;
}

// Captures host -> device, a memset of part of it, device -> device, a host function and device
// -> host into `out`; nothing moves until the graph is launched, then each launch moves the host
// buffer's current bytes.
void one_stream() {
  enum { N = 256 };
  unsigned char in[N], out[N];
  for (int i = 0; i < N; ++i) in[i] = static_cast<unsigned char>(i);
  std::memset(out, 0xee, sizeof out);
  void *a = nullptr, *b = nullptr;
  cudaMalloc(&a, N);
  cudaMalloc(&b, N);
  cudaStream_t s = nullptr;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  int status = -1;
  const int begin = cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
  cudaStreamIsCapturing(s, reinterpret_cast<cudaStreamCaptureStatus*>(&status));
  cudaMemcpyAsync(a, in, N, cudaMemcpyHostToDevice, s);
  cudaMemsetAsync(a, 0x55, 16, s);
  cudaMemcpyAsync(b, a, N, cudaMemcpyDeviceToDevice, s);
  cudaLaunchHostFunc(s, count_call, nullptr);
  const int last = cudaMemcpyAsync(out, b, N, cudaMemcpyDeviceToHost, s);
  cudaGraph_t graph = nullptr;
  const int end = cudaStreamEndCapture(s, &graph);
  int after = -1;
  cudaStreamIsCapturing(s, reinterpret_cast<cudaStreamCaptureStatus*>(&after));
  const int untouched = out[0] == 0xee && host_calls == 0;
  std::size_t nodes = 0;
  const int count = cudaGraphGetNodes(graph, nullptr, &nodes);
  cudaGraphExec_t exec = nullptr;
  const int inst = cudaGraphInstantiate(&exec, graph, 0);
  const int launch = cudaGraphLaunch(exec, s);
  cudaStreamSynchronize(s);
  const int first = out[0], mid = out[100];
  in[100] = 7;  // the next launch copies the buffer's bytes as they are then
  cudaGraphLaunch(exec, s);
  cudaStreamSynchronize(s);
  std::printf("capture %d %d %d %d %d %d %zu %d %d %d %x %x %d %d\n", begin, status, last, end,
              after, count, nodes, untouched, inst, launch, first, mid, out[100], host_calls);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(s);
  cudaFree(a);
  cudaFree(b);
}

// A second stream joins the capture by waiting for an event recorded in it, and the origin waits
// for the second's event before the capture ends (fork and join).
void fork_join() {
  enum { N = 64 };
  unsigned char in[N], out1[N], out2[N];
  for (int i = 0; i < N; ++i) in[i] = static_cast<unsigned char>(200 - i);
  std::memset(out1, 0, sizeof out1);
  std::memset(out2, 0, sizeof out2);
  void* a = nullptr;
  cudaMalloc(&a, N);
  cudaStream_t s1 = nullptr, s2 = nullptr;
  cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking);
  cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking);
  cudaEvent_t forked = nullptr, joined = nullptr;
  cudaEventCreateWithFlags(&forked, cudaEventDisableTiming);
  cudaEventCreateWithFlags(&joined, cudaEventDisableTiming);
  cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal);
  cudaMemcpyAsync(a, in, N, cudaMemcpyHostToDevice, s1);
  cudaEventRecord(forked, s1);
  cudaStreamWaitEvent(s2, forked, 0);
  int second = -1;
  cudaStreamIsCapturing(s2, reinterpret_cast<cudaStreamCaptureStatus*>(&second));
  cudaMemcpyAsync(out2, a, N, cudaMemcpyDeviceToHost, s2);
  cudaEventRecord(joined, s2);
  cudaStreamWaitEvent(s1, joined, 0);
  cudaMemcpyAsync(out1, a, N, cudaMemcpyDeviceToHost, s1);
  const int wrong_end = cudaStreamEndCapture(s2, nullptr) == cudaSuccess;
  cudaGraph_t graph = nullptr;
  const int end = cudaStreamEndCapture(s1, &graph);
  int after = -1;
  cudaStreamIsCapturing(s2, reinterpret_cast<cudaStreamCaptureStatus*>(&after));
  std::size_t nodes = 0;
  cudaGraphGetNodes(graph, nullptr, &nodes);
  cudaGraphExec_t exec = nullptr;
  cudaGraphInstantiate(&exec, graph, 0);
  const int before = out1[0] + out2[0];
  cudaGraphLaunch(exec, s1);
  cudaStreamSynchronize(s1);
  std::printf("fork_join %d %d %d %zu %d %d %d %d\n", second, wrong_end, end, nodes, before, after,
              out1[10], out2[10]);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaEventDestroy(forked);
  cudaEventDestroy(joined);
  cudaStreamDestroy(s1);
  cudaStreamDestroy(s2);
  cudaFree(a);
}

// What a capture refuses: waiting for the capturing stream (which invalidates the capture, so that
// its end fails and gives no graph), and capturing the legacy stream.
void refusals() {
  void* a = nullptr;
  cudaMalloc(&a, 64);
  cudaStream_t s = nullptr;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed);
  cudaMemsetAsync(a, 1, 64, s);
  const int sync = cudaStreamSynchronize(s);
  cudaGetLastError();
  int status = -1;
  cudaStreamIsCapturing(s, reinterpret_cast<cudaStreamCaptureStatus*>(&status));
  cudaGraph_t graph = reinterpret_cast<cudaGraph_t>(1);
  const int end = cudaStreamEndCapture(s, &graph);
  cudaGetLastError();
  const int legacy = cudaStreamBeginCapture(nullptr, cudaStreamCaptureModeGlobal);
  cudaGetLastError();
  const int not_capturing = cudaStreamEndCapture(s, &graph);
  cudaGetLastError();
  // A capture whose stream is destroyed ends with it: a stream it had drawn in captures no more.
  cudaStream_t origin = nullptr, joined = nullptr;
  cudaStreamCreateWithFlags(&origin, cudaStreamNonBlocking);
  cudaStreamCreateWithFlags(&joined, cudaStreamNonBlocking);
  cudaEvent_t fork = nullptr;
  cudaEventCreateWithFlags(&fork, cudaEventDisableTiming);
  cudaStreamBeginCapture(origin, cudaStreamCaptureModeGlobal);
  cudaEventRecord(fork, origin);
  cudaStreamWaitEvent(joined, fork, 0);
  int drawn = -1, released = -1;
  cudaStreamIsCapturing(joined, reinterpret_cast<cudaStreamCaptureStatus*>(&drawn));
  const int destroyed = cudaStreamDestroy(origin);
  cudaStreamIsCapturing(joined, reinterpret_cast<cudaStreamCaptureStatus*>(&released));
  std::printf("refusals %d %d %d %d %d %d %d %d %d\n", sync, status, end, graph == nullptr, legacy,
              not_capturing, drawn, destroyed, released);
  cudaEventDestroy(fork);
  cudaStreamDestroy(joined);
  cudaStreamDestroy(s);
  cudaFree(a);
}

}  // namespace

int main() {
  if (cudaSetDevice(0) != cudaSuccess) {
    std::printf("no device\n");
    return 1;
  }
  one_stream();
  fork_join();
  refusals();
  return 0;
}
