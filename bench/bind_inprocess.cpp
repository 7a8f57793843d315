// The worker API in-process, for bench/floors.py: assign_gpu(argv[1]) then bind_assigned_gpu(),
// as a worker does; prints the ordinal.
#include <cstdio>

#include "gpusel/error.hpp"
#include "gpusel/worker.hpp"

int main(int argc, char** argv) {
  if (argc != 2) return std::fprintf(stderr, "usage: bind_inprocess GPU\n"), 2;
  try {
    gpusel::assign_gpu(argv[1]);
    std::printf("%d\n", gpusel::bind_assigned_gpu());
    return 0;
  } catch (const gpusel::Error& e) {
    std::fprintf(stderr, "bind_inprocess: %s\n", e.what());
    return e.exit_code();
  }
}
