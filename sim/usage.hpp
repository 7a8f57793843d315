// The simulator's model of GPU usage across processes: a process that has a context on a
// simulated GPU appears in NVML's process list for it, with its device memory, until it exits.
// The doubles share this through a folder: one file per process and GPU, kept locked (flock) by
// its process, so an entry whose process died (even by SIGKILL) is unlocked and no longer counts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "machine.hpp"

namespace gpusel::sim {

// The shared folder: GPUSEL_SIM_STATE_DIR, else /tmp/gpusel-sim-<uid>/<hash of the machine file>.
std::string usage_dir(const SimMachine& machine);

// The device memory a context itself takes, counted for every process that has one.
inline constexpr std::uint64_t kContextBytes = 512ull << 20;
// How much each process with a context adds to a GPU's utilisation, in percent.
inline constexpr unsigned kUtilizationPerProcess = 40;

// CUDA double: this process has a context on the GPU `uuid` and `bytes` of device memory
// allocated there. The first call creates the entry; later calls update the memory. Failures to
// write the folder are ignored (usage then shows nothing, as it does on a driver without it).
void note_usage(const SimMachine& machine, const std::string& uuid, std::uint64_t bytes);

// NVML double: the live processes on the GPU `uuid` (entries of dead processes are skipped and,
// where permitted, removed).
std::vector<SimProcess> live_processes(const SimMachine& machine, const std::string& uuid);

}  // namespace gpusel::sim
