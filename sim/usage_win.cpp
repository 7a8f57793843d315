// usage.cpp for Windows: not shared yet. The Linux doubles share the processes with a context on
// a GPU through flock(2)-held files; the Windows doubles keep none, so simulated NVML lists only
// the processes a machine file declares, and no memory used by other simulated processes.
#include "usage.hpp"

namespace gpusel::sim {

std::string usage_dir(const SimMachine&) {
  return "";
}

void note_usage(const SimMachine&, const std::string&, std::uint64_t, const char*) {}

std::vector<SimProcess> live_processes(const SimMachine&, const std::string&, const char*) {
  return {};
}

void note_static_runtime(const SimMachine&, const char*) {}

std::string static_runtime_note(const SimMachine&) {
  return "";
}

}  // namespace gpusel::sim
