// The simulated machines as gpusel --sim sees them, read through the simulator's own machine
// reader (libgpusel-sim-machines.so in the simulator's folder, opened at run time), so that the
// gpusel command links no simulator code.
#pragma once

#include <optional>
#include <string>

namespace gpusel::cli {

struct SimMachineInfo {
  bool ok = false;
  std::string error;  // why the machine cannot be used (a machine file's file, line and key)
  std::string path;   // the machine file
  std::string name;
  std::string description;
  std::string nvml_fault;  // "", "missing", "no_v2", "init_fails"
  std::string cuda_fault;  // "", "missing", "init_fails"
  // The last program on this machine that ran NVIDIA's own CUDA runtime (which the simulator cannot
  // serve): "<unix time> <pid> <executable>", or "" (the simulator's usage folder keeps it).
  std::string static_runtime;
  std::string vendor = "nvidia";  // "nvidia" or "amd"
};

// Finds (in `machines_dir`, unless `spec` is a path; with no folder, `spec` is the file itself)
// and checks a machine as the doubles do. nullopt when the simulator in `root` has no machine
// reader. Throws std::runtime_error for a failure that is not the machine's (out of memory).
std::optional<SimMachineInfo> describe_sim_machine(const std::string& root, const std::string& spec,
                                                   const std::optional<std::string>& machines_dir);

}  // namespace gpusel::cli
