// gpusel: the library's own helpers that its programs (the gpusel command, the tests, the
// benchmarks, the simulator) use beside the public API. Not API: never installed, never exported
// (libgpusel.so exports the C ABI alone), reachable only through the static library and the
// layers' objects, and free to change with any commit. Each section names the layer that defines
// it; a layer may call only the sections of the layers it may use (the layer checks' links enforce
// it, docs/design.md). What a program outside this tree needs belongs in include/gpusel instead,
// in the static library's C++ API (docs/versioning.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpusel/assignment.hpp"
#include "gpusel/cuda.hpp"
#include "gpusel/error.hpp"
#include "gpusel/lease.hpp"
#include "gpusel/nvml.hpp"
#include "gpusel/pick.hpp"
#include "gpusel/resolution.hpp"
#include "gpusel/spec.hpp"
#include "gpusel/visible.hpp"
#include "gpusel/worker.hpp"

namespace gpusel::detail {

// ---- core: AMD's visibility variables (src/core/amd_visible.cpp, docs/amd.md) ------------------

// What doctor says of ROCR_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES and CUDA_VISIBLE_DEVICES together,
// on a machine whose AMD GPUs gpusel does not read: each GPU an entry of ROCR_VISIBLE_DEVICES names
// is taken to exist. Nothing when neither AMD variable is set. Both HIP rule sets are tried (ROCm
// 5.2 and 6.2), and a difference is reported.
// What a HIP program started under the three variables would see, on a machine whose GPUs'
// ids are `ids` in KFD order, whatever HIP version it loads: HIP's devices as positions in `ids`,
// in HIP ordinal order. The model is applied with HIP 5.2's rules and with 6.2's (which read
// an empty value and ids differently); where they disagree the answer is the HIP version's, which
// gpusel cannot know, and `version_dependent` is set.
struct HipView {
  std::vector<std::size_t> devices;
  bool aborts = false;             // ROCr's parser throws (an empty entry): HIP programs abort
  bool version_dependent = false;  // HIP 5.2 and 6.2 would see different GPUs
};
HipView hip_view(const std::vector<std::string>& ids, const std::optional<std::string>& rocr,
                 const std::optional<std::string>& hip, const std::optional<std::string>& cuda);

struct AmdVisibilityNote {
  enum class Kind { NoDevice, Aborts, VersionDependent, Dropped } kind;
  std::string id;       // stable, for doctor's --json
  std::string message;  // the composition, in words
  std::string remedy;
};
std::vector<AmdVisibilityNote> explain_amd_visibility(const std::optional<std::string>& rocr,
                                                      const std::optional<std::string>& hip,
                                                      const std::optional<std::string>& cuda);

// The three variables a HIP program's devices come through, as messages show them:
// "ROCR_VISIBLE_DEVICES=\"2,0\", HIP_VISIBLE_DEVICES=unset, CUDA_VISIBLE_DEVICES=unset".
std::string amd_visibility_settings(const std::optional<std::string>& rocr,
                                    const std::optional<std::string>& hip,
                                    const std::optional<std::string>& cuda);

// ---- core: text (src/core/text.cpp, spec.cpp, resolve.cpp) -------------------------------------

// Quotes a value for a message: "value" with control characters escaped.
std::string quote_value(std::string_view value);

// `text` for a terminal: control bytes (C0, DEL, C1) and bytes that are not UTF-8 escaped as
// \xNN; well-formed UTF-8 (no overlong form, surrogate, or code point past U+10FFFF) kept. Driver
// strings (GPU names, process commands) go through it before they are printed.
std::string printable(std::string_view text);

// ASCII letter case ignored: does `text` start with `head`; are `a` and `b` equal.
bool starts_with_ci(std::string_view text, std::string_view head) noexcept;
// Whether `entry` has the form of an AMD GPU's unique id or a prefix of one: "GPU-" (any case) and
// 1 to 16 characters without a dash. Only such an entry of at most 12 characters can also start an
// NVIDIA UUID (whose 13th character is a dash).
bool amd_id_form(std::string_view entry) noexcept;
bool equal_ci(std::string_view a, std::string_view b) noexcept;

// Every piece between commas, untouched (blanks kept, empty pieces kept): "a,,b" gives
// {"a", "", "b"}, "" gives {""}. The views point into `value`.
std::vector<std::string_view> split_commas(std::string_view value);

// Joins entries with commas (for messages).
std::string join_entries(const std::vector<std::string>& entries);

// Describes the preset for messages: CUDA_VISIBLE_DEVICES="..." or "unset".
std::string describe_preset(const CudaEnv& env);

// ---- core: whom messages speak to (src/core/text.cpp) -------------------------------------------

// The library's messages name the value they are about and the remedy in the words of whoever
// gave the value (gpusel::Audience, gpusel/error.hpp): where a program's words and the gpusel
// command's differ, a message holds both, and whoever shows it words it for its reader
// (gpusel::worded, Error::message). No setting of the process decides it.

// A piece of a message in both wordings: `command_line` for the gpusel command's users,
// `library` for a program.
std::string reader_text(std::string_view command_line, std::string_view library);

// What a GPU request and one of its entries are called: "--gpu" / "GPU request", "--gpu entry" /
// "GPU entry".
std::string gpu_request_words();
std::string gpu_entry_words();

// A value as the reader would write it: --gpu 0,1 on the command line, "0,1" for a program.
std::string gpu_example(std::string_view value);

// ---- core: --gpu entries (src/core/spec.cpp, pick.cpp) -----------------------------------------

// The form the driver compares: a UUID gets an upper-case "GPU-" (the rest kept as typed); an
// index is returned as it is. Throws Error(BadInput) for anything else.
std::string canonical_entry(std::string_view entry);

// True when two canonical entries certainly name the same GPU: equal index values ("1" and "01"),
// or UUIDs equal apart from letter case.
bool same_entry(std::string_view a, std::string_view b) noexcept;

// "all" in any letter case, blanks around it ignored: every GPU CUDA_VISIBLE_DEVICES lets this
// process use.
bool is_all_entry(std::string_view entry) noexcept;

// "free:N" (any letter case, blanks around it ignored) -> N. nullopt when `value` is not a free
// request at all. Throws Error(BadInput) for free:0, a negative or malformed count, or free:N
// mixed with other entries.
std::optional<int> parse_free_request(std::string_view value);

// Why `gpu` is not free under `limits` from NVML's usage alone (processes, memory, utilisation),
// or "" when it is. Unknown usage counts as free.
std::string busy_reason(const GpuInfo& gpu, const FreeLimits& limits);

// ---- core: the CUDA_VISIBLE_DEVICES model (src/core/visible.cpp) -------------------------------

// Reads one CUDA_VISIBLE_DEVICES integer entry the way C's strtoul starts: blanks, optional sign,
// digits, anything after ignored. nullopt when no digits or negative.
std::optional<std::uint64_t> read_driver_integer(std::string_view entry) noexcept;

// A CUDA_VISIBLE_DEVICES entry whose UUID prefix is not written GPU- or MIG- (gpu-, Mig-, ...):
// how the NVIDIA driver reads it is not known ([OPEN]; the model reads it as no UUID), so gpusel
// refuses such a preset. The message naming the entry and the GPU- form to write; nullopt when
// there is none.
std::optional<std::string> uuid_case_problem(const CudaEnv& env);

// True when CUDA_DEVICE_ORDER=PCI_BUS_ID is in force.
bool pci_bus_order(const CudaEnv& env) noexcept;

// True when every GPU is the same model (name and compute capability), so that FASTEST_FIRST is
// PCI order. Failed GPUs do not count.
bool homogeneous(const std::vector<GpuInfo>& gpus) noexcept;

// ---- core: sizes, durations, CPU lists (src/core/units.cpp) ------------------------------------

// A byte size as written, read once: the one parser behind every size gpusel takes (`bench bw
// --size`, `--min-free-memory`). Units, in any case: K, M, G, T, KiB, MiB, GiB, TiB, Ki, Mi, Gi,
// Ti (powers of 1024), kB, MB, GB, TB (powers of 1000), B, or none (bytes); a blank between the
// number and the unit is allowed. The number has digits and at most one dot.
struct ByteSize {
  enum class Problem {
    None,         // `bytes` holds the size
    NoNumber,     // it does not start with a number ("MiB", "", ".")
    Negative,     // it starts with a minus sign
    UnknownUnit,  // `unit` is not one of the units above
    Zero,         // zero bytes
    TooLarge,     // beyond 2^64 - 1 bytes
    NotWhole,     // a fraction of a byte ("1.5", "0.3KiB")
  };
  std::optional<std::uint64_t> bytes;
  Problem problem = Problem::None;
  std::string unit;  // the unit as written (trimmed), for messages
};
ByteSize read_byte_size(std::string_view text);

// read_byte_size's value alone: nullopt for anything it refuses.
std::optional<std::uint64_t> parse_byte_size(std::string_view text);

// A duration in seconds: "30", "1.5", "1e10" (seconds), "90s", "15m", "2h", "1d" (letters in any
// case), or "inf" / "forever" (infinity). nullopt for anything else, a negative value or NaN.
std::optional<double> parse_duration(std::string_view text);

// 30 -> "30 s", 1.5 -> "1.5 s", 0.25 -> "0.25 s", 7200 -> "7200 s"; infinity -> "for ever".
std::string format_seconds(double seconds);

// "0-55,112-167" -> the CPUs in order. nullopt for a malformed list.
std::optional<std::vector<int>> parse_cpu_list(std::string_view text);

// The inverse: 0,1,2,3,8 -> "0-3,8".
std::string format_cpu_list(const std::vector<int>& cpus);

// 85899345920 -> "80 GiB"; exact binary units when they fit, else one decimal.
std::string format_bytes(std::uint64_t bytes);

// ---- core: launchers' local ranks (src/core/assignment.cpp) ------------------------------------

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
  // Variables set but not counted before choose_local_rank looks (set_aside_outer_ranks), with
  // why; choose_local_rank reports them with its own.
  std::vector<std::string> ignored;
};

// gpusel run's workers are its own. The variable in which `gpusel run` names, for its workers, the
// local ranks of the launchers around it as it inherited them ("SLURM_LOCALID=0,...").
inline constexpr const char* kRunOuterVariable = "GPUSEL_RUN_OUTER";

// The value of kRunOuterVariable for gpusel run's workers: every local-rank variable of
// kRankVariables but LOCAL_RANK (which run sets itself) that `value_of` (run's own environment)
// gives, as NAME=VALUE separated by commas; "" when none is set. A value holding ',' or '=' is
// left out (choose_local_rank refuses it as a rank anyway).
std::string outer_ranks_marker(
    const std::function<std::optional<std::string>(const std::string&)>& value_of);

// Takes out of `view` the candidates that `marker` (kRunOuterVariable's value) names with the very
// value they have: a launcher around gpusel run set them, and run's own LOCAL_RANK counts for its
// workers. Each goes to view.ignored, saying so. A variable that a launcher inside run set again,
// to another value, stays.
void set_aside_outer_ranks(LauncherView& view, std::string_view marker);

// Reads a local rank or size: ASCII digits, at most 6 of them. nullopt otherwise.
std::optional<int> read_rank_number(std::string_view value) noexcept;

// SLURM_STEP_TASKS_PER_NODE ("2(x3),1": two tasks on each of three nodes, then one) for node
// `node`; nullopt when malformed or too short.
std::optional<int> slurm_tasks_on_node(std::string_view value, int node) noexcept;

// The local rank of the launchers that started this process. nullopt when no variable counts.
// Where several launchers are nested (told apart by how far up each variable was set), their
// ranks are combined, so that an inner rank alone never decides while an outer launcher runs
// several tasks here; an outer launcher whose size is unknown counts as one task when its rank
// is 0. Throws Error(BadInput) naming the variable and its value when one is malformed, naming
// both when two disagree and the nearer one cannot be told from the distances, and when an outer
// launcher's size is needed and unknown.
std::optional<LocalRank> choose_local_rank(const LauncherView& view);

// ---- core: where a worker's GPU comes from, judged once (src/core/placement.cpp) ---------------

// Everything that decides a worker's GPU, read once. bind_assigned_gpu and `gpusel doctor` both
// fill one (placement_model, in the worker layer) and judge it with analyse_placement, so that
// what doctor calls an error is exactly what binding refuses.
struct PlacementModel {
  // The variables of kPlacementVariables that are set, by name.
  std::map<std::string, std::string> vars;
  CudaEnv cuda;            // CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER
  LauncherView launchers;  // the local-rank variables, with how far up each was set
  // The devices CUDA shows this process, in CUDA ordinal order (GPU-/MIG- UUIDs); nullopt when not
  // known (publishing without binding, or CUDA unavailable).
  std::optional<std::vector<std::string>> visible;
  // NVML's GPUs in nvidia-smi order (a lost GPU keeps its index and has `failure`); nullopt when
  // NVML was not read or is unavailable.
  std::optional<std::vector<GpuInfo>> nvml;
  // GPUSEL_GPU's or GPUSEL_GPUS's entries as resolve_gpus gave them (an index resolved within the
  // preset, as --gpu would be), in order; empty when not resolved (every entry a UUID), and
  // `resolve_error` saying why when they could not be.
  std::vector<std::string> resolved;
  std::string resolve_error;
  Problem resolve_problem;  // resolve_error's data
  // The Slurm variables of the process Slurm itself started on this node (the task, or the batch
  // script), read from this process's ancestors; nullopt when no such ancestor could be read.
  // They tell this node's own allocation where a launcher carried another node's variables here.
  std::optional<std::map<std::string, std::string>> slurm_task;
  // Whose devices `visible` lists: CUDA's, or HIP's (a HIP program on AMD GPUs, or `gpusel bind --
  // PROGRAM` there), which come through ROCR_VISIBLE_DEVICES and HIP_VISIBLE_DEVICES (as set
  // here) before CUDA_VISIBLE_DEVICES. It decides the refusals' words, and which variable a
  // preset cut short is read from.
  bool hip = false;
  std::optional<std::string> rocr_visible, hip_visible;
};

// The variables PlacementModel::vars holds.
inline constexpr const char* kPlacementVariables[] = {
    "GPUSEL_GPU",           "GPUSEL_GPUS",           "GPUSEL_SHARE",
    "SLURM_NTASKS_PER_GPU", "SLURM_NTASKS_PER_TRES", "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",     "SLURM_JOB_ID",          "SLURM_STEP_ID",
    "SLURM_STEPID",         "SLURM_STEP_GPUS",       "SLURM_JOB_GPUS",
    "SLURMD_NODENAME",      "SLURM_LOCALID",
};

// The Slurm variables kept from the task Slurm started on this node (PlacementModel::slurm_task).
inline constexpr const char* kSlurmTaskVariables[] = {
    "SLURM_JOB_ID",   "SLURM_STEP_ID",   "SLURM_STEPID",         "SLURM_STEP_GPUS",
    "SLURM_JOB_GPUS", "SLURMD_NODENAME", "CUDA_VISIBLE_DEVICES",
};

struct PlacementVerdict {
  // What would put this process on a wrong or shared GPU: binding refuses with the first, doctor
  // reports each as an error.
  std::vector<PlacementProblem> problems;
  // Worth knowing, not refused (doctor's warnings).
  std::vector<PlacementProblem> warnings;
  AssignmentSource source = AssignmentSource::Default;
  std::optional<LocalRank> rank;  // the local rank that counted, where one did
  bool share = false;             // sharing asked for (GPUSEL_SHARE=1, srun --ntasks-per-gpu)
  // GPUSEL_GPU's or GPUSEL_GPUS's entry for this process, as published: a UUID, or an index that
  // is then a CUDA ordinal (no NVML to resolve it).
  std::optional<std::string> entry;
  // The CUDA ordinal this process binds, and that device's UUID: set when `visible` is known and
  // there is no problem.
  std::optional<int> ordinal;
  std::optional<std::string> uuid;
};

// The whole rule of assignment.hpp for a process with nothing published in code, and every check
// binding makes before it claims: pure, no I/O. `default_ordinal` is bind_assigned_gpu's.
PlacementVerdict analyse_placement(const PlacementModel& model, int default_ordinal = 0);

// A refusal as the error binding throws: its message and remedy, its data with the check's id
// ("check"). Bad input (exit 2), except where the data says a driver library or call failed (an
// index that could not be resolved because NVML or ROCm SMI cannot be loaded): that failure
// (exit 1), as `gpusel resolve` gives it.
Error placement_error(const PlacementProblem& p);

// Slurm's GPUs on this node against a device this process binds (`chosen`, a UUID), for an
// assignment made in code, which skips the rest of the analysis; nullopt when fine or unknown.
// Nothing is judged where slurm_grant_checked(model.cuda) is false: a caller may then skip
// building the model.
bool slurm_grant_checked(const CudaEnv& cuda);
std::optional<PlacementProblem> slurm_placement_problem(const PlacementModel& model,
                                                        const std::string& chosen);

// Where the chosen device is fine but CUDA also shows this process GPUs Slurm did not give it (a
// warning: a program that picks its own device may run there); nullopt otherwise.
std::optional<PlacementProblem> slurm_exposure_warning(const PlacementModel& model);

// Whether sharing was asked for in these variables (GPUSEL_SHARE, SLURM_NTASKS_PER_GPU,
// SLURM_NTASKS_PER_TRES). Throws Error(BadInput) for a GPUSEL_SHARE that is neither 1 nor 0.
bool sharing_in(const std::map<std::string, std::string>& vars);

// Why GPUSEL_GPU or GPUSEL_GPUS cannot be read, with the usual slip (a list one UUID a line) named.
std::string worker_variable_message(const std::string& variable, const std::string& value,
                                    const std::string& parse_error);

// The local-rank variables gpusel reads, joined for messages.
std::string launcher_names();

// ---- platform: shell words (src/platform/shell.cpp)
// ----------------------------------------------

// `value` as one POSIX shell word: single-quoted, each ' written as '\''; safe for eval. (`gpusel
// sim env` prints values so; so do the bash and zsh completions.)
std::string shell_quote(std::string_view value);

// `value` as one POSIX shell word, as it is where a shell reads it literally (not empty, and only
// ASCII letters, digits and the characters of `plain`), else shell_quote(value). `resolve --format
// env` writes its value so (plain "-,_.:/"), lease holders' commands are shown so
// (plain "_@%+=:,./-").
std::string shell_word(std::string_view value, std::string_view plain);

// ---- driver (src/driver/nvml.cpp, cuda.cpp) -----------------------------------------------------

// What nvml_complete reads.
enum class NvmlPart {
  Mig,   // MIG mode and MIG devices (what refusing a MIG-enabled GPU needs)
  Full,  // every field of GpuInfo but usage (NvmlDetail::Full's)
};

// Reads `part` of the GPUs of `gpus` at `positions` (a failed GPU is skipped), in this process's
// NVML session, through this session's enumeration's handles where they are still valid, else
// finding each again by its UUID: a resolution reads first only the UUIDs, then the rest of the
// GPUs it picked. Returns why it could not (NVML unavailable, the library broken, a GPU no longer
// found), as an Error with its Problem; nullopt when done.
std::optional<Error> nvml_complete(std::vector<GpuInfo>& gpus,
                                   const std::vector<std::size_t>& positions, NvmlPart part);

// The NVLink path between two whole GPUs (UUIDs) as NVML reports it: the links a copy from one to
// the other can use (those of each GPU that are active and reach the other GPU directly, or reach
// an NVSwitch; the fewer of the two GPUs' counts) and their NVLink generation (the lower of the
// two; 0 when NVML cannot say). nullopt when NVML is unavailable, says they are not NVLink peers
// (nvmlDeviceGetP2PStatus), or finds no such links.
struct NvlinkPath {
  unsigned links = 0;
  unsigned version = 0;  // the generation: 1 to 5
};
std::optional<NvlinkPath> nvml_nvlink_path(const std::string& a, const std::string& b);

// The theoretical rate of `links` NVLinks of `version` per direction in decimal GB/s: 20 per link
// for NVLink 1, 25 for NVLink 2 to 4, 50 for NVLink 5; 0 for version 0.
double nvlink_gbps(unsigned links, unsigned version);

// Formats CUDA's 16 raw UUID bytes (which may hold zeros) the way nvidia-smi prints them.
std::string format_uuid(const unsigned char bytes[16], const char* prefix = "GPU-");

// "0000:18:00.0" (CUDA's form, any case) -> "00000000:18:00.0" (NVML's form, upper case).
std::string normalise_bus_id(const std::string& bus);

// ---- lease (src/lease/lease.cpp, job_record.cpp) ------------------------------------------------

// Who a process is, from /proc; fields stay empty where /proc does not tell.
LeaseHolder process_details(int pid);
// Its command line alone, as process_details gives it ("" where /proc does not tell).
std::string process_command(int pid);

// The job's workers have started (their pids): the record this process left beside its leases in
// the shared store lists their process groups, so that another user finds the job's processes
// after this one has ended (src/lease/job_record.hpp). Nothing where there is no record
// (no lease in the shared store, or Windows).
void note_job_groups(const std::vector<int>& pids);

// Why the file system under the existing shared store `dir` cannot keep leases safe (modes that
// are not setup's, a queue without the sticky bit, locks that do not exclude, inotify that does
// not report), one line each; none when it can, or when there is no store there (`gpusel doctor`).
std::vector<std::string> store_file_system_problems(const std::string& dir);

// ---- resolution (src/resolution/probe.cpp, resolution.cpp) --------------------------------------

// CUDA's enumeration order of the physical GPUs (positions into `gpus`), from an unfiltered probe;
// nullopt when the probe does not account for every GPU exactly once.
std::optional<std::vector<int>> cuda_order_from(const std::vector<GpuInfo>& gpus,
                                                const std::vector<CudaDevice>& devices);

// The GPUs CUDA enumerates, as NVML would list them: one per physical GPU (MIG devices under
// their GPU), in PCI bus order, indexed from 0.
std::vector<GpuInfo> gpus_from_cuda(const std::vector<CudaDevice>& devices);

// ---- worker (src/worker/worker.cpp) -------------------------------------------------------------

// Whether the worker side says a bind without a claim on stderr (once per process); off where the
// caller reports gpusel_claim_note itself (the Python module, as a warning). On by default.
void set_stderr_warnings(bool on);
bool stderr_warnings();

// What this process's environment says about the launchers that started it. Where the set
// local-rank variables disagree, each one's distance is looked up in the environments of this
// process's ancestors (/proc/PID/environ): the variable an outer launcher set is also in the
// environment of the inner launcher itself.
LauncherView launcher_view();

// bind_assigned_gpu's choice and claim, without its context: the same rule, refusals and claim,
// and the CUDA ordinal chosen (assignment_info and gpu_identity then tell of it as after a bind),
// but no context is made on the GPU. For `gpusel bind -- PROGRAM`, which replaces itself with
// PROGRAM on that GPU: a context made before the exec would be a second one, on no program's
// behalf. A later bind_assigned_gpu in the process makes the context on the same GPU.
int claim_assigned_gpu(int default_ordinal = 0);

// The claim alone, on a GPU chosen without CUDA (`gpusel bind -- PROGRAM` on AMD GPUs, where the
// program is then placed by ROCR_VISIBLE_DEVICES): the same refusals and notes as a bind's claim,
// held by this process (and the program it becomes). `gpu` names it in messages.
AssignmentInfo claim_for_exec(const std::string& uuid, const std::string& gpu,
                              AssignmentSource source, std::optional<LocalRank> rank);

// The model of this process's environment, read once: the variables, the launchers' view, and
// NVML and resolution where the analysis needs them. `visible` is CUDA's devices here (UUIDs, CUDA
// order), or nullopt when not known; `nvml`, when given, is used instead of reading NVML.
PlacementModel placement_model(std::optional<std::vector<std::string>> visible,
                               const std::optional<std::vector<GpuInfo>>& nvml = std::nullopt);

// The same for a HIP program's devices (`hip_ids`: HIP's ids here, in HIP ordinal order), with
// ROCR_ and HIP_VISIBLE_DEVICES as set; an index in GPUSEL_GPU or GPUSEL_GPUS is rocm-smi's, read
// through ROCm SMI (never NVML).
PlacementModel hip_placement_model(std::vector<std::string> hip_ids);

}  // namespace gpusel::detail
