// gpusel: where a process's GPU comes from, and which launcher's local rank counts (pure, no I/O).
//
// The assignment rule, first match wins:
//   1. an assignment made in code (set_assigned_gpu, assign_gpu);
//   2. GPUSEL_GPU, one entry (what `gpusel run` sets for each rank);
//   3. GPUSEL_GPUS and the local rank;
//   4. no GPUSEL_* variable, a launcher's local rank and several visible CUDA devices: visible
//      device k for local rank k (the torchrun and Slurm convention);
//   5. exactly one visible device: that one;
//   6. no launcher at all: the caller's default ordinal.
// Anything else (several ranks and nothing to tell them apart, a rank past the devices) is an
// error naming the variables involved.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpusel/export.h"

GPUSEL_BEGIN_NAMESPACE

enum class AssignmentSource { Code, GpuselGpu, GpuselGpus, Launcher, Single, Default };

// "code", "GPUSEL_GPU", "GPUSEL_GPUS", "launcher", "single", "default".
const char* source_name(AssignmentSource source) noexcept;

// One launcher among nested ones (srun starting torchrun, mpiexec starting torchrun).
struct LauncherLevel {
  std::string variable;
  int rank = 0;
  std::optional<int> size;
};

struct LocalRank {
  std::string variable;  // the innermost launcher's variable
  // This process's place among the processes on this node, and how many there are (when every
  // launcher says). With nested launchers these count across all of them: the outer launcher's
  // rank times the inner launcher's size, plus the inner rank; the size is the product.
  int rank = 0;
  std::optional<int> local_size;
  std::string size_variable;         // the innermost launcher's size variable
  std::vector<std::string> ignored;  // variables set but not counted, and why, for messages
  // Nested launchers that count, outermost first; empty when one launcher decides alone.
  std::vector<LauncherLevel> levels;
  // "4 processes on this node: SLURM_LOCALID=1 of 2 x LOCAL_RANK=0 of 2" when nested; else
  // "LOCAL_WORLD_SIZE=4" (or "" when no size is known).
  std::string describe_size() const;
};

GPUSEL_END_NAMESPACE
