// The simulator's model of GPU usage across processes: a process that has a context on a
// simulated GPU appears in NVML's process list for it, with its device memory, until it exits.
// The doubles share this through a folder: one file per process and GPU, kept locked (flock) by
// its process, so an entry whose process died (even by SIGKILL) is unlocked and no longer counts.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "machine.hpp"

namespace gpusel::sim {

// The shared folder: GPUSEL_SIM_STATE_DIR itself, else <base>/<hash of the machine file> with
// <base> $XDG_RUNTIME_DIR/gpusel-sim, else /tmp/gpusel-sim-<uid>. Every level must belong to the
// user and be writable by nobody else, and none below GPUSEL_SIM_STATE_DIR (or the base) may be a
// symbolic link; when one is not, the calling double says so once on stderr (naming the folder and
// GPUSEL_SIM_STATE_DIR) and shared usage is off for the process: nothing is read, written or
// removed there.
std::string usage_dir(const SimMachine& machine);

// The name of a machine's folder below the default base: FNV-1a of the machine file's path, in
// 16 hex digits (the same on every platform).
inline std::string usage_machine_key(const SimMachine& machine) {
  std::uint64_t hash = 1469598103934665603ull;
  for (unsigned char c : machine.path) hash = (hash ^ c) * 1099511628211ull;
  char name[20];
  std::snprintf(name, sizeof name, "%016llx", static_cast<unsigned long long>(hash));
  return name;
}

// The device memory a context itself takes, counted for every process that has one.
inline constexpr std::uint64_t kContextBytes = 512ull << 20;
// How much each process with a context adds to a GPU's utilisation, in percent.
inline constexpr unsigned kUtilizationPerProcess = 40;

// CUDA double: this process has a context on the GPU `uuid` and `bytes` of device memory
// allocated there. The first call creates the entry; later calls update the memory. Failures to
// write the folder are ignored (usage then shows nothing, as it does on a driver without it).
// `library` names the calling double in the one message about an unusable folder.
void note_usage(const SimMachine& machine, const std::string& uuid, std::uint64_t bytes,
                const char* library);

// NVML double: the live processes on the GPU `uuid` (entries of dead processes are skipped and,
// where permitted, removed).
std::vector<SimProcess> live_processes(const SimMachine& machine, const std::string& uuid,
                                       const char* library);

// This process's id, as entries name it.
unsigned own_pid();

// Device memory other processes hold on a GPU (mig < 0) or on one of its MIG devices (an index
// into gpu.migs): the machine file's processes (on the whole GPU only: they predate MIG) and the
// live simulated processes other than this one (each its context's kContextBytes and its
// allocations), a GPU's MIG devices included. The CUDA double's free memory and allocation limit
// subtract this from the device's total, as NVML's used memory adds it up: one device-wide model.
inline std::uint64_t others_memory(const SimMachine& machine, const SimGpu& gpu, int mig,
                                   const char* library) {
  std::uint64_t used = 0;
  const unsigned self = own_pid();
  auto add = [&](const std::string& uuid) {
    for (const SimProcess& p : live_processes(machine, uuid, library)) {
      if (p.pid != self) used += p.used_memory;
    }
  };
  if (mig >= 0) {
    add(gpu.migs[static_cast<std::size_t>(mig)].uuid);
    return used;
  }
  for (const SimProcess& p : gpu.processes) used += p.used_memory;
  add(gpu.uuid);
  for (const SimMig& m : gpu.migs) add(m.uuid);
  return used;
}

// CUDA double: a program asked for NVIDIA's private driver tables (cuGetExportTable), i.e. it runs
// NVIDIA's own CUDA runtime (linked statically, or inside a library such as cuBLAS: `carrier`
// names that library, "" for the program). Kept as "<unix time> <pid> <carrier or -> <executable>"
// in the machine's usage folder for `gpusel doctor`, which reads it with static_runtime_note ("" if
// none).
void note_static_runtime(const SimMachine& machine, const char* library,
                         const std::string& carrier);
std::string static_runtime_note(const SimMachine& machine);

}  // namespace gpusel::sim
