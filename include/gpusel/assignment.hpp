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
// docs/launchers.md has the table, with each launcher's documentation.
inline constexpr RankVariable kRankVariables[] = {
    {"OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE", "Open MPI"},
    {"MV2_COMM_WORLD_LOCAL_RANK", "MV2_COMM_WORLD_LOCAL_SIZE", "MVAPICH2"},
    {"MPI_LOCALRANKID", "MPI_LOCALNRANKS", "MPICH (Hydra) / Intel MPI"},
    {"PMI_LOCAL_RANK", "PMI_LOCAL_SIZE", "Cray MPICH (PMI)"},
    {"PALS_LOCAL_RANKID", "PALS_LOCAL_SIZE", "HPE Cray PALS"},
    {"FLUX_TASK_LOCAL_ID", nullptr, "Flux"},
    {"JSM_NAMESPACE_LOCAL_RANK", "JSM_NAMESPACE_LOCAL_SIZE", "IBM jsrun"},
    {"HOROVOD_LOCAL_RANK", "HOROVOD_LOCAL_SIZE", "horovodrun"},
    {"SUBMITIT_LOCAL_LOCALID", "SUBMITIT_LOCAL_NTASKS", "submitit (local executor)"},
    {"LOCAL_RANK", "LOCAL_WORLD_SIZE", "torchrun or gpusel run"},
    {"SLURM_LOCALID", "SLURM_STEP_TASKS_PER_NODE", "Slurm (srun)"},
};

// The launcher a local-rank variable belongs to ("Slurm (srun)"); "" when it is none of ours.
const char* launcher_of(std::string_view variable) noexcept;

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
  // srun --gpus-per-task (SLURM_GPUS_PER_TASK): each task sees GPUs of its own, so Slurm's local
  // rank does not count towards choosing among them.
  bool slurm_gpus_per_task = false;
};

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

// Reads a local rank or size: ASCII digits, at most 6 of them. nullopt otherwise.
std::optional<int> read_rank_number(std::string_view value) noexcept;

// SLURM_STEP_TASKS_PER_NODE ("2(x3),1": two tasks on each of three nodes, then one) for node
// `node`; nullopt when malformed or too short.
std::optional<int> slurm_tasks_on_node(std::string_view value, int node) noexcept;

// True when the view's candidates disagree about the rank, so that distances are needed.
bool ranks_disagree(const LauncherView& view);

// The local rank of the launchers that started this process. nullopt when no variable counts.
// Where several launchers are nested (told apart by how far up each variable was set), their
// ranks are combined, so that an inner rank alone never decides while an outer launcher runs
// several tasks here; an outer launcher whose size is unknown counts as one task when its rank
// is 0. Throws Error(BadInput) naming the variable and its value when one is malformed, naming
// both when two disagree and the nearer one cannot be told from the distances, and when an outer
// launcher's size is needed and unknown.
std::optional<LocalRank> choose_local_rank(const LauncherView& view);

GPUSEL_END_NAMESPACE
