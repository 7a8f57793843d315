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

// A launcher's per-process local-rank variable, with the variable that gives the number of local
// ranks (nullptr where the launcher sets none) and whose variable it is.
struct RankVariable {
  const char* name;
  const char* size_name;
  const char* launcher;
};

// Every local-rank variable gpusel reads. When several are set and agree, the first in this list
// is reported; when they disagree, the one set nearest to this process wins (see
// choose_local_rank).
inline constexpr RankVariable kRankVariables[] = {
    {"OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE", "Open MPI"},
    {"MV2_COMM_WORLD_LOCAL_RANK", "MV2_COMM_WORLD_LOCAL_SIZE", "MVAPICH2"},
    {"MPI_LOCALRANKID", "MPI_LOCALNRANKS", "Intel MPI / MPICH"},
    {"PMI_LOCAL_RANK", "PMI_LOCAL_SIZE", "MPICH"},
    {"PALS_LOCAL_RANKID", "PALS_LOCAL_SIZE", "HPE Cray PALS"},
    {"FLUX_TASK_LOCAL_ID", nullptr, "Flux"},
    {"LOCAL_RANK", "LOCAL_WORLD_SIZE", "torchrun or gpusel run"},
    {"SLURM_LOCALID", "SLURM_STEP_TASKS_PER_NODE", "Slurm (srun)"},
};

// One local-rank variable as this process sees it.
struct RankCandidate {
  std::string variable;
  std::string value;
  std::optional<std::string> size_value;  // its size variable's value, when set
  // How far up this process's ancestry the variable was set: 0 by this process itself, 1 by its
  // parent (the parent's own environment lacks it), and so on. `distance_exact` false: the walk
  // stopped there (an ancestor's environment could not be read), so it was set at least that far
  // up. -1: not looked up.
  int distance = -1;
  bool distance_exact = false;
};

struct LauncherView {
  std::vector<RankCandidate> candidates;  // the set variables, in kRankVariables order
  // SLURM_LOCALID belongs to sbatch's batch step (the job script), not to a task launch: srun
  // did not start this process, so it does not count as a local rank.
  bool slurm_batch_step = false;
  int slurm_node_id = 0;  // SLURM_NODEID, for SLURM_STEP_TASKS_PER_NODE
};

struct LocalRank {
  std::string variable;
  int rank = 0;
  std::optional<int> local_size;  // the number of local ranks, when the launcher says
  std::string size_variable;
  std::vector<std::string> ignored;  // variables set but not counted, and why, for messages
};

// Reads a local rank or size: ASCII digits, at most 6 of them. nullopt otherwise.
std::optional<int> read_rank_number(std::string_view value) noexcept;

// SLURM_STEP_TASKS_PER_NODE ("2(x3),1": two tasks on each of three nodes, then one) for node
// `node`; nullopt when malformed or too short.
std::optional<int> slurm_tasks_on_node(std::string_view value, int node) noexcept;

// True when the view's candidates disagree about the rank, so that distances are needed.
bool ranks_disagree(const LauncherView& view);

// The local rank of the launcher that started this process. nullopt when no variable counts.
// Throws Error(BadInput) naming the variable and its value when one is malformed, and naming both
// when two disagree and the nearer one cannot be told from the distances.
std::optional<LocalRank> choose_local_rank(const LauncherView& view);

GPUSEL_END_NAMESPACE
