// usage.cpp for Windows: not shared yet. The Linux doubles share the processes with a context on
// a GPU through flock(2)-held files; the Windows doubles keep none, so simulated NVML lists only
// the processes a machine file declares, and no memory used by other simulated processes.
#include "usage.hpp"

namespace gpusel::sim {

std::string usage_dir(const SimMachine&) {
  return "";
}

void note_usage(const SimMachine&, const std::string&, std::uint64_t) {}

std::vector<SimProcess> live_processes(const SimMachine&, const std::string&) {
  return {};
}

}  // namespace gpusel::sim
