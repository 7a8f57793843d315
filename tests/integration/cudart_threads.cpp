// The simulated CUDA runtime used from several threads at once, as a multi-GPU program does: each
// thread selects its own device, allocates, copies, records events and frees, while the others do
// the same. Loads the runtime named on the command line (the simulator's libcudart) with dlopen, so
// it builds without a CUDA toolkit; run under the sanitizer presets, it checks the runtime's
// locking. Prints "ok" and exits 0, or names what went wrong and exits 1.
#include <dlfcn.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

using Error = int;
struct Api {
  Error (*GetDeviceCount)(int*);
  Error (*SetDevice)(int);
  Error (*GetDevice)(int*);
  Error (*Malloc)(void**, std::size_t);
  Error (*Free)(void*);
  Error (*Memcpy)(void*, const void*, std::size_t, int);
  Error (*StreamCreate)(void**);
  Error (*StreamDestroy)(void*);
  Error (*MemcpyAsync)(void*, const void*, std::size_t, int, void*);
  Error (*StreamSynchronize)(void*);
  Error (*EventCreate)(void**);
  Error (*EventRecord)(void*, void*);
  Error (*EventDestroy)(void*);
  Error (*GetLastError)();
};

template <typename F>
bool bind(void* lib, const char* name, F& fn) {
  fn = reinterpret_cast<F>(dlsym(lib, name));
  if (fn == nullptr) std::fprintf(stderr, "cudart_threads: %s is missing\n", name);
  return fn != nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: cudart_threads LIBCUDART\n");
    return 2;
  }
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    std::fprintf(stderr, "cudart_threads: %s\n", dlerror());
    return 1;
  }
  Api a{};
  bool ok = bind(lib, "cudaGetDeviceCount", a.GetDeviceCount) &&
            bind(lib, "cudaSetDevice", a.SetDevice) && bind(lib, "cudaGetDevice", a.GetDevice) &&
            bind(lib, "cudaMalloc", a.Malloc) && bind(lib, "cudaFree", a.Free) &&
            bind(lib, "cudaMemcpy", a.Memcpy) && bind(lib, "cudaStreamCreate", a.StreamCreate) &&
            bind(lib, "cudaStreamDestroy", a.StreamDestroy) &&
            bind(lib, "cudaMemcpyAsync", a.MemcpyAsync) &&
            bind(lib, "cudaStreamSynchronize", a.StreamSynchronize) &&
            bind(lib, "cudaEventCreate", a.EventCreate) &&
            bind(lib, "cudaEventRecord", a.EventRecord) &&
            bind(lib, "cudaEventDestroy", a.EventDestroy) &&
            bind(lib, "cudaGetLastError", a.GetLastError);
  if (!ok) return 1;
  int count = 0;
  if (a.GetDeviceCount(&count) != 0 || count < 2) {
    std::fprintf(stderr, "cudart_threads: cudaGetDeviceCount gave %d devices\n", count);
    return 1;
  }
  std::atomic<int> failures{0};
  auto fail = [&](int thread, const char* what, Error e) {
    std::fprintf(stderr, "cudart_threads: thread %d: %s returned %d\n", thread, what, e);
    ++failures;
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      const int device = t % count;
      if (Error e = a.SetDevice(device); e != 0) return fail(t, "cudaSetDevice", e);
      std::vector<unsigned char> host(1 << 16, static_cast<unsigned char>(t + 1)), back(1 << 16);
      for (int round = 0; round < 20; ++round) {
        int current = -1;
        if (a.GetDevice(&current) != 0 || current != device)
          return fail(t, "cudaGetDevice", current);
        void* p = nullptr;
        void* stream = nullptr;
        void* event = nullptr;
        if (Error e = a.Malloc(&p, host.size()); e != 0) return fail(t, "cudaMalloc", e);
        if (Error e = a.StreamCreate(&stream); e != 0) return fail(t, "cudaStreamCreate", e);
        if (Error e = a.EventCreate(&event); e != 0) return fail(t, "cudaEventCreate", e);
        if (Error e = a.MemcpyAsync(p, host.data(), host.size(), 1, stream); e != 0)
          return fail(t, "cudaMemcpyAsync", e);
        if (Error e = a.EventRecord(event, stream); e != 0) return fail(t, "cudaEventRecord", e);
        if (Error e = a.StreamSynchronize(stream); e != 0)
          return fail(t, "cudaStreamSynchronize", e);
        if (Error e = a.Memcpy(back.data(), p, back.size(), 2); e != 0)
          return fail(t, "cudaMemcpy", e);
        if (std::memcmp(host.data(), back.data(), host.size()) != 0)
          return fail(t, "the round trip", 0);
        a.EventDestroy(event);
        a.StreamDestroy(stream);
        if (Error e = a.Free(p); e != 0) return fail(t, "cudaFree", e);
      }
      if (Error e = a.GetLastError(); e != 0) fail(t, "cudaGetLastError", e);
    });
  }
  for (std::thread& t : threads) t.join();
  if (failures != 0) return 1;
  std::printf("ok\n");
  return 0;
}
