// gpusel-probe-cuda: the CUDA probe's helper program. libgpusel runs it (never a user) to learn how
// CUDA numbers the GPUs without initialising CUDA in the caller's own process; installed in
// <prefix>/libexec/gpusel/, and found there by the library relative to itself (probe.cpp).
#include "probe_child.hpp"

int main() {
  return gpusel::detail::probe_child_main();
}
