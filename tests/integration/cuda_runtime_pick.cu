// An unmodified CUDA runtime program as users write one, built by the tests with the CUDA
// toolkit's nvcc (`nvcc -cudart shared`) and run under gpusel on the simulated machines (issue 29).
// It knows nothing of gpusel and picks its device one of the two naive ways:
//   cuda_runtime_pick local-rank HOLD   cudaSetDevice(atoi(getenv("LOCAL_RANK")))
//   cuda_runtime_pick default HOLD      no cudaSetDevice at all: the runtime's device 0
// then allocates device memory, sets and copies it (no kernel: the simulator runs none), prints
//   cuda_runtime_pick PID on PCI_BUS_ID
// (the PCI bus id of its current device, as cudaDeviceGetPCIBusId writes it) and holds its context:
//   HOLD a number: for that many seconds;
//   HOLD a folder: the tests' protocol (support.Holding): it writes HOLD/ready.<pid> (its pid and
//   CUDA_VISIBLE_DEVICES, one line), then waits for a shared lock on HOLD/go.
// Last it prints `cuda_runtime_pick PID done`. Any CUDA error: one line on stderr, exit 1.
#include <cuda_runtime.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

bool failed(cudaError_t rc, const char* what) {
  if (rc == cudaSuccess) return false;
  std::fprintf(stderr, "cuda_runtime_pick: %s: %s (%s)\n", what, cudaGetErrorName(rc),
               cudaGetErrorString(rc));
  return true;
}

// Memory on the current device, set and read back: what makes the context and shows in NVML.
bool use_memory() {
  constexpr std::size_t kBytes = 1 << 20;
  void* dev = nullptr;
  if (failed(cudaMalloc(&dev, kBytes), "cudaMalloc")) return false;
  if (failed(cudaMemset(dev, 7, kBytes), "cudaMemset")) return false;
  std::vector<unsigned char> host(kBytes, 0);
  if (failed(cudaMemcpy(host.data(), dev, kBytes, cudaMemcpyDeviceToHost), "cudaMemcpy"))
    return false;
  if (host[0] != 7 || host[kBytes - 1] != 7) {
    std::fprintf(stderr, "cuda_runtime_pick: the memory read back is not what was set\n");
    return false;
  }
  return true;
}

bool hold_in(const char* dir) {
  char path[4096], tmp[4096];
  const char* cvd = std::getenv("CUDA_VISIBLE_DEVICES");
  std::snprintf(path, sizeof path, "%s/ready.%d", dir, static_cast<int>(getpid()));
  std::snprintf(tmp, sizeof tmp, "%s/.ready.%d", dir, static_cast<int>(getpid()));
  FILE* f = std::fopen(tmp, "w");
  if (f == nullptr) return false;
  std::fprintf(f, "%d %s\n", static_cast<int>(getpid()), cvd && *cvd ? cvd : "-");
  if (std::fclose(f) != 0 || std::rename(tmp, path) != 0) return false;  // whole, or not at all
  std::snprintf(path, sizeof path, "%s/go", dir);
  const int go = open(path, O_RDONLY);
  return go >= 0 && flock(go, LOCK_SH) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 ||
      (std::strcmp(argv[1], "local-rank") != 0 && std::strcmp(argv[1], "default") != 0)) {
    std::fprintf(stderr, "usage: cuda_runtime_pick local-rank|default SECONDS|DIR\n");
    return 2;
  }
  if (std::strcmp(argv[1], "local-rank") == 0) {
    const char* rank = std::getenv("LOCAL_RANK");
    if (rank == nullptr) {
      std::fprintf(stderr, "cuda_runtime_pick: LOCAL_RANK is not set\n");
      return 2;
    }
    if (failed(cudaSetDevice(std::atoi(rank)), "cudaSetDevice(LOCAL_RANK)")) return 1;
  }
  if (!use_memory()) return 1;
  int device = -1;
  char bus[32] = {};
  if (failed(cudaGetDevice(&device), "cudaGetDevice")) return 1;
  if (failed(cudaDeviceGetPCIBusId(bus, sizeof bus, device), "cudaDeviceGetPCIBusId")) return 1;
  std::printf("cuda_runtime_pick %d on %s\n", static_cast<int>(getpid()), bus);
  std::fflush(stdout);
  struct stat st {};
  if (stat(argv[2], &st) == 0 && S_ISDIR(st.st_mode)) {
    if (!hold_in(argv[2])) return 1;
  } else {
    sleep(static_cast<unsigned>(std::atoi(argv[2])));
  }
  std::printf("cuda_runtime_pick %d done\n", static_cast<int>(getpid()));
  return 0;
}
