// The worker side: publish, bind, identity.
#include "gpusel/worker.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "ancestry.hpp"
#include "cuda_api.hpp"
#include "env.hpp"
#include "gpusel/cuda.hpp"
#include "gpusel/error.hpp"
#include "gpusel/lease.hpp"
#include "gpusel/nvml.hpp"
#include "gpusel/probe.hpp"
#include "gpusel/resolution.hpp"
#include "gpusel/spec.hpp"
#include "gpusel_detail.hpp"
#include "nvml_index.hpp"
#include "text.hpp"

GPUSEL_BEGIN_NAMESPACE

using detail::cuda_device;
using detail::cuda_device_handles;
using detail::cuda_error_text;
using detail::cuda_initialised;
using detail::CudaApi;
using detail::CudaHandle;

namespace {

AssignmentInfo info_of(AssignmentSource source, std::optional<LocalRank> rank) {
  AssignmentInfo info;
  info.source = source;
  info.rank = std::move(rank);
  return info;
}

struct Assignment {
  std::optional<std::string> physical;  // a published UUID (or prefix)
  std::optional<int> visible;           // a published or bound CUDA ordinal
  std::optional<std::string> bound_uuid;
  std::optional<CudaHandle> bound;  // the device bound, as enumerated then
  CUcontext context = nullptr;
  AssignmentInfo info;
};

std::mutex assignment_mutex;
Assignment assignment;

std::string describe(const Assignment& a) {
  if (a.bound_uuid) return *a.bound_uuid + " (CUDA ordinal " + std::to_string(*a.visible) + ")";
  if (a.physical) return *a.physical;
  return "CUDA ordinal " + std::to_string(*a.visible);
}

// The CUDA ordinal of a published UUID among this process's visible devices.
int ordinal_of(const std::string& uuid, const std::vector<CudaHandle>& devices) {
  std::vector<int> hits;
  std::string seen;
  for (const CudaHandle& d : devices) {
    seen += (seen.empty() ? "" : ", ") + d.uuid;
    if (detail::starts_with_ci(d.uuid, uuid)) hits.push_back(d.ordinal);
  }
  if (hits.size() == 1) return hits.front();
  const std::string preset = detail::describe_preset(cuda_env_from_environment());
  if (hits.empty()) {
    throw bad_input("GPU " + uuid + " is not visible to CUDA in this process (" + preset +
                    "; visible: " + (seen.empty() ? "none" : seen) +
                    "); give the worker a GPU from that list, or change CUDA_VISIBLE_DEVICES");
  }
  throw bad_input("GPU " + uuid + " is a prefix of " + std::to_string(hits.size()) +
                  " devices CUDA sees here (" + seen + "); give enough characters to name one");
}

}  // namespace

namespace {

std::optional<std::string> env_string(const char* name) {
  return detail::env_value(name);
}

// How far up the ancestry each candidate was set: the first process (this one at 0, then its
// parent, ...) whose starting environment lacks the variable with this value. An environment that
// cannot be read ends the walk, leaving lower bounds.
void look_up_distances(std::vector<detail::RankCandidate>& candidates) {
  constexpr int kMaxDepth = 32;
  int pid = detail::current_pid();
  std::vector<bool> done(candidates.size(), false);
  for (int depth = 0; depth < kMaxDepth && pid > 0; ++depth) {
    const auto env = detail::initial_environment(pid);
    for (std::size_t i = 0; i < candidates.size(); ++i) {
      if (done[i]) continue;
      candidates[i].distance = depth;
      if (!env) continue;  // a lower bound
      auto it = env->find(candidates[i].variable);
      if (it == env->end() || it->second != candidates[i].value) {
        candidates[i].distance_exact = true;
        done[i] = true;
      }
    }
    if (!env || pid == 1) break;
    pid = detail::parent_of(pid);
  }
}

}  // namespace

std::optional<LocalRank> local_rank() {
  return detail::choose_local_rank(detail::launcher_view());
}

bool sharing_asked() {
  if (const auto share = env_string("GPUSEL_SHARE"); share && !share->empty()) {
    const std::string_view v = detail::trim_blanks(*share);
    if (v == "1") return true;
    if (v != "0") {
      throw bad_input("GPUSEL_SHARE=" + detail::quote_value(*share) +
                      " is neither 1 (share this process's GPU with others on purpose) nor 0");
    }
  }
  // srun --ntasks-per-gpu: several tasks per GPU, by request (Slurm 22.05 tells the tasks
  // SLURM_NTASKS_PER_TRES; SLURM_NTASKS_PER_GPU where it is exported).
  for (const char* name : {"SLURM_NTASKS_PER_GPU", "SLURM_NTASKS_PER_TRES"}) {
    if (const auto n = env_string(name); n && !n->empty()) return true;
  }
  return false;
}

namespace {

// "LOCAL_WORLD_SIZE=4 ranks run on this node", "4 processes on this node (SLURM_LOCALID=1 of 2 x
// LOCAL_RANK=0 of 2)".
std::string ranks_text(const LocalRank& rank) {
  if (!rank.levels.empty()) return rank.describe_size();
  return rank.size_variable + "=" + std::to_string(rank.local_size.value_or(0)) +
         " ranks run on this node";
}

// A worker's own list (GPUSEL_GPUS, GPUSEL_GPU), read once: the GPUs it names. free:N and all are
// requests, which a parent resolves to GPUs before it starts the workers.
std::vector<GpuEntry> worker_gpus(GpuRequest r) {
  if (r.kind != GpuRequest::Kind::Gpus) {
    const std::string request = r.texts().front();
    throw bad_input(
        "it asks for " + request +
        ", but a worker's list names the GPUs themselves: pick them in the parent, with "
        "`gpusel run --gpu " +
        request + " -- ...` or eval \"$(gpusel resolve --gpu " + request + " --format env)\"");
  }
  return std::move(r.gpus);
}
std::vector<GpuEntry> read_worker_list(const std::string& value) {
  return worker_gpus(read_gpu_request(value, false));
}

// GPUSEL_GPU is this rank's own when gpusel run set it: the entry of GPUSEL_GPUS at this rank,
// one entry per rank of the one launcher (LOCAL_RANK) that started the process.
bool own_gpuselgpu(const std::string& one, const LocalRank& rank) {
  const auto list = env_string("GPUSEL_GPUS");
  if (!list || !rank.levels.empty() || rank.variable != "LOCAL_RANK") return false;
  std::vector<GpuEntry> entries;
  try {
    entries = read_worker_list(*list);
  } catch (const Error&) {
    return false;
  }
  if (!rank.local_size || static_cast<std::size_t>(*rank.local_size) != entries.size() ||
      static_cast<std::size_t>(rank.rank) >= entries.size()) {
    return false;
  }
  try {
    return detail::same_entry(entries[static_cast<std::size_t>(rank.rank)].text,
                              parse_single_gpu(one));
  } catch (const Error&) {
    return false;
  }
}

}  // namespace

std::vector<PlacementProblem> placement_problems(std::optional<std::size_t> visible_devices) {
  std::vector<PlacementProblem> out;
  std::optional<LocalRank> rank;
  try {
    rank = local_rank();
  } catch (const Error& e) {
    out.push_back({"local-rank", e.what(),
                   "unset the variable an outer launcher left behind, or give each process its "
                   "GPU (GPUSEL_GPU, GPUSEL_GPUS, gpusel run)"});
    return out;
  }
  bool share = false;
  try {
    share = sharing_asked();
  } catch (const Error& e) {
    out.push_back({"gpusel-share", e.what(), "set GPUSEL_SHARE=1 or unset it"});
    return out;
  }
  if (const auto problem = detail::uuid_case_problem(cuda_env_from_environment())) {
    out.push_back({"cuda-visible-case", *problem,
                   "write UUIDs in CUDA_VISIBLE_DEVICES as nvidia-smi -L prints them (GPU-..., "
                   "MIG-...)"});
  }
  const auto one = env_string("GPUSEL_GPU");
  const auto list = env_string("GPUSEL_GPUS");
  if (one) {
    if (rank && rank->local_size && *rank->local_size > 1 && !share &&
        !own_gpuselgpu(*one, *rank)) {
      out.push_back(
          {"gpusel-gpu-shared",
           "GPUSEL_GPU=" + detail::quote_value(*one) + " names one GPU, and " + ranks_text(*rank) +
               " (this is " + rank->variable + "=" + std::to_string(rank->rank) +
               "): every one of them would bind that GPU. GPUSEL_GPU was inherited from an "
               "outer job (a job script's export, or gpusel run around another launcher)",
           "give each rank its own GPU: set GPUSEL_GPUS instead (eval \"$(gpusel resolve --gpu "
           "SPEC --format env)\"), or let gpusel run start the ranks; GPUSEL_SHARE=1 shares the "
           "GPU on purpose"});
    }
    return out;
  }
  if (list) {
    std::vector<GpuEntry> entries;
    try {
      entries = read_worker_list(*list);
    } catch (const Error& e) {
      out.push_back({"gpusel-gpus",
                     "GPUSEL_GPUS=" + detail::quote_value(*list) + " cannot be read: " + e.what(),
                     "set it with eval \"$(gpusel resolve --gpu SPEC --format env)\""});
      return out;
    }
    if (!rank) return out;  // doctor says so as information; bind refuses with its own words
    if (rank->local_size && static_cast<std::size_t>(*rank->local_size) != entries.size()) {
      out.push_back({"gpusel-gpus-count",
                     ranks_text(*rank) + ", but GPUSEL_GPUS=" + detail::quote_value(*list) +
                         " lists " + std::to_string(entries.size()) +
                         " GPUs: workers will refuse to bind",
                     "start as many workers per node as GPUs listed, or list one GPU per worker"});
    } else if (static_cast<std::size_t>(rank->rank) >= entries.size()) {
      out.push_back({"gpusel-gpus-rank",
                     rank->variable + "=" + std::to_string(rank->rank) +
                         " is beyond GPUSEL_GPUS=" + detail::quote_value(*list) + " (" +
                         std::to_string(entries.size()) + " entries)",
                     "start at most one worker per listed GPU, or list more GPUs"});
    }
    return out;
  }
  if (rank && visible_devices && *visible_devices > 1 && rank->local_size &&
      static_cast<std::size_t>(*rank->local_size) > *visible_devices && !share) {
    out.push_back({"ranks-share-gpus",
                   ranks_text(*rank) + ", but CUDA sees " + std::to_string(*visible_devices) +
                       " devices: ranks would share GPUs",
                   "give each rank its GPU (gpusel run --gpu, GPUSEL_GPUS), start fewer ranks, or "
                   "set GPUSEL_SHARE=1 to share on purpose"});
  }
  return out;
}

void set_assigned_gpu(std::string_view target) {
  const std::string entry = detail::canonical_entry(target);
  std::optional<std::string> physical;
  std::optional<int> visible;
  if (is_gpu_uuid(entry)) {
    physical = entry;
  } else {
    // At most six digits after the leading zeros.
    const std::optional<std::uint64_t> n = detail::read_decimal(entry, 999999);
    if (!n) throw bad_input("CUDA ordinal " + detail::quote_value(entry) + " is out of range");
    visible = static_cast<int>(*n);
  }
  std::lock_guard<std::mutex> lock(assignment_mutex);
  Assignment& a = assignment;
  if (!a.physical && !a.visible) {
    a.physical = physical;
    a.visible = visible;
    a.info = info_of(AssignmentSource::Code, std::nullopt);
    return;
  }
  bool same = false;
  if (physical) {
    same = (a.physical && detail::same_entry(*a.physical, *physical)) ||
           (a.bound_uuid && detail::starts_with_ci(*a.bound_uuid, *physical));
  } else {
    same = a.visible && *a.visible == *visible && (a.bound_uuid || !a.physical);
  }
  if (!same) {
    throw bad_input("this process already has GPU " + describe(a) + " and cannot also take " +
                    entry + ": one process runs on one GPU");
  }
}

void assign_gpu(std::string_view value) {
  Resolution r =
      resolve_gpus(read_single_gpu(value), cuda_env_from_environment(), default_probe_helper());
  set_assigned_gpu(r.gpus.front());
}

namespace {

std::string launcher_names() {
  std::string names;
  for (const detail::RankVariable& v : detail::kRankVariables)
    names += (names.empty() ? "" : ", ") + std::string(v.name);
  return names;
}

// One entry of GPUSEL_GPU or GPUSEL_GPUS, published: a UUID as it is (CUDA decides at bind), an
// index resolved as --gpu would be, within a preset CUDA_VISIBLE_DEVICES (`list` is the whole
// value, so that duplicates and the preset are judged as the parent judges them).
void publish_entry(const std::string& variable, const std::string& value,
                   const std::vector<GpuEntry>& entries, std::size_t which) {
  if (entries[which].is_uuid()) {
    set_assigned_gpu(entries[which].text);
    return;
  }
  try {
    GpuRequest request;
    request.gpus = entries;
    const Resolution r = resolve_gpus(request, cuda_env_from_environment(), default_probe_helper());
    set_assigned_gpu(r.gpus.at(which));
  } catch (const Error& e) {
    throw Error(e.kind(), variable + "=" + detail::quote_value(value) + ": " + e.what());
  }
}

// Why GPUSEL_GPU or GPUSEL_GPUS cannot be read. A value of several lines is the usual slip: a
// list of UUIDs, one a line as `gpusel resolve` prints them, exported without joining the lines.
std::string variable_message(const std::string& variable, const std::string& value,
                             const std::string& parse_error) {
  std::string_view inner(value);
  while (!inner.empty() && std::isspace(static_cast<unsigned char>(inner.front())))
    inner.remove_prefix(1);
  while (!inner.empty() && std::isspace(static_cast<unsigned char>(inner.back())))
    inner.remove_suffix(1);
  if (inner.find('\n') == std::string_view::npos)
    return variable + "=" + detail::quote_value(value) + ": " + parse_error;
  const auto lines = 1 + std::count(inner.begin(), inner.end(), '\n');
  const std::string head =
      variable + "=" + detail::quote_value(value) + " holds " + std::to_string(lines) + " lines";
  if (variable == "GPUSEL_GPU") {
    return head +
           ", but it names one GPU; to give each rank its own GPU from a list, set GPUSEL_GPUS "
           "instead, with the GPUs separated by commas: eval \"$(gpusel resolve --gpu SPEC "
           "--format env)\"";
  }
  return head +
         ": it takes one line, the GPUs separated by commas (was `gpusel resolve`'s output, one "
         "UUID a line, exported without `| paste -sd,`?); set it with eval \"$(gpusel resolve "
         "--gpu SPEC --format env)\", or GPUSEL_GPUS=$(gpusel resolve --gpu SPEC --format csv)";
}

}  // namespace

std::optional<AssignmentInfo> assign_from_environment() {
  if (const auto gpu = env_string("GPUSEL_GPU")) {
    std::vector<GpuEntry> entry;
    try {
      entry = worker_gpus(read_single_gpu(*gpu));
    } catch (const Error& e) {
      throw bad_input(variable_message("GPUSEL_GPU", *gpu, e.what()));
    }
    publish_entry("GPUSEL_GPU", *gpu, entry, 0);
    // The rank did not pick the GPU, but callers report it (gpusel run sets LOCAL_RANK too).
    std::optional<LocalRank> rank;
    try {
      rank = local_rank();
    } catch (const Error&) {
    }
    std::lock_guard<std::mutex> lock(assignment_mutex);
    assignment.info = info_of(AssignmentSource::GpuselGpu, rank);
    return assignment.info;
  }
  const auto list = env_string("GPUSEL_GPUS");
  if (!list) return std::nullopt;
  std::vector<GpuEntry> entries;
  try {
    entries = read_worker_list(*list);
  } catch (const Error& e) {
    throw bad_input(variable_message("GPUSEL_GPUS", *list, e.what()));
  }
  std::optional<LocalRank> rank = local_rank();
  if (!rank) {
    throw bad_input("GPUSEL_GPUS=" + detail::quote_value(*list) + " is set but no local rank is (" +
                    launcher_names() +
                    "); start workers with gpusel run, torchrun, srun or mpirun, or " +
                    detail::reader_text("pass --gpu", "publish the GPU first (set_assigned_gpu)"));
  }
  if (rank->local_size && static_cast<std::size_t>(*rank->local_size) != entries.size()) {
    throw bad_input(rank->size_variable + "=" + std::to_string(*rank->local_size) +
                    " ranks run on this node, but GPUSEL_GPUS=" + detail::quote_value(*list) +
                    " lists " + std::to_string(entries.size()) +
                    (entries.size() == 1 ? " GPU" : " GPUs") +
                    "; start as many workers per node as GPUs listed, one GPU each");
  }
  if (static_cast<std::size_t>(rank->rank) >= entries.size()) {
    throw bad_input(rank->variable + "=" + std::to_string(rank->rank) + " is beyond GPUSEL_GPUS=" +
                    detail::quote_value(*list) + " (" + std::to_string(entries.size()) +
                    " entries); start as many workers per node as GPUs listed");
  }
  publish_entry("GPUSEL_GPUS", *list, entries, static_cast<std::size_t>(rank->rank));
  std::lock_guard<std::mutex> lock(assignment_mutex);
  assignment.info = info_of(AssignmentSource::GpuselGpus, rank);
  return assignment.info;
}

std::optional<AssignmentInfo> assignment_info() {
  std::lock_guard<std::mutex> lock(assignment_mutex);
  if (!assignment.physical && !assignment.visible) return std::nullopt;
  return assignment.info;  // after a bind, visible is set whatever decided
}

namespace {

// Steps 4 to 6 of the rule, for a process that nothing was published for: a launcher's local rank
// over several visible devices, the only visible device, or the caller's default.
AssignmentInfo ordinal_from_launcher(const std::vector<CudaHandle>& devices, int default_ordinal,
                                     int& ordinal) {
  const std::optional<LocalRank> rank = local_rank();
  const std::string preset = detail::describe_preset(cuda_env_from_environment());
  if (rank && devices.size() > 1) {
    if (rank->local_size && static_cast<std::size_t>(*rank->local_size) > devices.size() &&
        !sharing_asked()) {
      throw bad_input(
          ranks_text(*rank) + ", but CUDA sees " + std::to_string(devices.size()) +
          " devices here (" + preset +
          "); ranks would share GPUs. Give each rank its GPU (gpusel run --gpu, GPUSEL_GPUS), "
          "start fewer ranks, or set GPUSEL_SHARE=1 to share on purpose");
    }
    if (static_cast<std::size_t>(rank->rank) >= devices.size() && sharing_asked()) {
      // Several ranks per GPU on purpose: round-robin over the visible devices.
      ordinal = rank->rank % static_cast<int>(devices.size());
      return info_of(AssignmentSource::Launcher, rank);
    }
    if (static_cast<std::size_t>(rank->rank) >= devices.size()) {
      throw bad_input((rank->levels.empty() ? rank->variable + "=" + std::to_string(rank->rank)
                                            : "this is process " + std::to_string(rank->rank) +
                                                  " of " + rank->describe_size()) +
                      " but CUDA sees only " + std::to_string(devices.size()) + " devices here (" +
                      preset + "); start at most one rank per visible GPU, or set GPUSEL_GPUS");
    }
    ordinal = rank->rank;
    return info_of(AssignmentSource::Launcher, rank);
  }
  if (devices.size() == 1) {
    ordinal = 0;
    return info_of(AssignmentSource::Single, rank);
  }
  if (!rank && devices.size() > 1) {
    // Several ranks, and nothing to tell them apart: never device 0 for everyone.
    for (const char* size : {"LOCAL_WORLD_SIZE", "WORLD_SIZE"}) {
      const auto v = env_string(size);
      const auto n = v ? detail::read_rank_number(*v) : std::nullopt;
      if (n && *n > 1) {
        throw bad_input(
            std::string(size) + "=" + detail::quote_value(*v) +
            " says several processes run, but no local-rank variable tells this one "
            "apart (" +
            launcher_names() + "); set GPUSEL_GPU, or GPUSEL_GPUS and a local rank, or " +
            detail::reader_text("pass --gpu", "publish the GPU first (set_assigned_gpu)"));
      }
    }
  }
  ordinal = default_ordinal;
  return info_of(AssignmentSource::Default, std::nullopt);
}

}  // namespace

namespace {

// Slurm's GPUs against CUDA's under the current order (only where Slurm named GPUs by index and
// the order is not PCI_BUS_ID: NVML is asked then, and only then). A process that binds, by UUID,
// the very GPU Slurm gave passes.
void check_slurm_gpus(const std::vector<CudaHandle>& devices, const CudaHandle& chosen) {
  const CudaEnv env = cuda_env_from_environment();
  if (!env.visible_devices || detail::pci_bus_order(env)) return;
  if (!env_string("SLURM_STEP_GPUS") && !env_string("SLURM_JOB_GPUS")) return;
  const NvmlSnapshot snap = query_nvml();
  if (!snap.available) return;
  std::vector<std::string> visible;
  for (const CudaHandle& d : devices) visible.push_back(d.uuid);
  const std::optional<PlacementProblem> problem = detail::slurm_gpu_problem(snap.gpus, visible);
  if (!problem) return;
  // The chosen device is fine when it is one Slurm gave.
  if (!detail::slurm_gpu_problem(snap.gpus, {chosen.uuid})) return;
  throw bad_input(problem->message + "; " + problem->remedy);
}

// The names of the variables that tell a process's place, as it was started.
std::string rank_settings(const std::map<std::string, std::string>& env) {
  std::string out;
  auto add = [&](const std::string& name) {
    auto it = env.find(name);
    if (it != env.end())
      out += (out.empty() ? "" : " ") + name + "=" + detail::printable(it->second);
  };
  for (const detail::RankVariable& v : detail::kRankVariables) {
    add(v.name);
    if (v.size_name != nullptr) add(v.size_name);
  }
  for (const char* name : {"GPUSEL_GPU", "GPUSEL_GPUS", "GPUSEL_SHARE"}) add(name);
  return out.empty() ? "no launcher's variables" : out;
}

std::map<std::string, std::string> own_settings() {
  std::map<std::string, std::string> env;
  for (const detail::RankVariable& v : detail::kRankVariables) {
    if (auto value = env_string(v.name)) env[v.name] = *value;
    if (v.size_name != nullptr) {
      if (auto value = env_string(v.size_name)) env[v.size_name] = *value;
    }
  }
  for (const char* name : {"GPUSEL_GPU", "GPUSEL_GPUS", "GPUSEL_SHARE"}) {
    if (auto value = env_string(name)) env[name] = *value;
  }
  return env;
}

// Why two processes came to bind one GPU, from what each was started with.
std::string likely_cause(const std::map<std::string, std::string>& mine,
                         const std::optional<std::map<std::string, std::string>>& theirs) {
  auto has_rank = [](const std::map<std::string, std::string>& env) {
    for (const detail::RankVariable& v : detail::kRankVariables) {
      if (env.count(v.name)) return true;
    }
    return false;
  };
  if (mine.count("GPUSEL_GPU") &&
      (!theirs ||
       (theirs->count("GPUSEL_GPU") && theirs->at("GPUSEL_GPU") == mine.at("GPUSEL_GPU")))) {
    return "an inherited GPUSEL_GPU: it names one GPU and every process that inherits it binds "
           "that GPU (it was exported in a job script, or set by gpusel run around another "
           "launcher); give each rank its own with GPUSEL_GPUS, or let gpusel run start them";
  }
  if (!has_rank(mine) && (!theirs || !has_rank(*theirs))) {
    return "a launcher gpusel does not know started several processes with nothing to tell "
           "them apart (torch.multiprocessing.spawn, submitit's local executor, a script's own "
           "loop): set LOCAL_RANK (and LOCAL_WORLD_SIZE) for each process, or call "
           "gpusel.assign_gpu(rank) / gpusel::assign_gpu(rank) before binding";
  }
  if (theirs) {
    bool same_inner = false, outer_differs = false;
    for (const detail::RankVariable& v : detail::kRankVariables) {
      auto a = mine.find(v.name);
      auto b = theirs->find(v.name);
      if (a == mine.end() || b == theirs->end()) continue;
      if (a->second == b->second) same_inner = true;
      if (a->second != b->second) outer_differs = true;
    }
    if (same_inner && outer_differs) {
      return "nested launchers: the inner launcher's local rank repeats under each task of the "
             "outer one; run one launcher per node, or give each process its GPU (GPUSEL_GPUS)";
    }
  }
  return "two processes were given the same GPU: check the launcher's variables above, or give "
         "each process its GPU (GPUSEL_GPU, GPUSEL_GPUS, gpusel run --gpu)";
}

// Claims the chosen GPU for this process. Another process's claim on it is refused, with both
// processes' settings and the likely cause, unless sharing was asked for (then it runs beside).
void claim_gpu(const CudaHandle& chosen, AssignmentInfo& info) {
  const bool share = sharing_asked();
  info.shared = share;
  std::optional<LeaseStore> store;
  try {
    store = LeaseStore::locate();
  } catch (const Error& e) {
    info.claim_note = std::string("no claim was taken: ") + e.what();
    return;
  }
  const ClaimResult c = store->claim(chosen.uuid, share);
  if (c.claimed) return;
  if (!c.problem.empty()) {
    info.claim_note = "no claim was taken: " + c.problem;
    return;
  }
  const std::string gpu =
      "GPU " + chosen.uuid + " (CUDA ordinal " + std::to_string(chosen.ordinal) + ")";
  if (c.leased_elsewhere && !share) {
    throw bad_input(gpu + " is leased by another job: " +
                    (c.leased_by_other_job ? describe_holder(*c.leased_by_other_job)
                                           : std::string("its holder is not visible here")) +
                    "; this process was not started by it. Choose another GPU, wait for that job, "
                    "or set GPUSEL_SHARE=1 to run beside it on purpose");
  }
  if (c.beside) {
    if (c.other) info.shared_with_pid = c.other->pid;
    return;
  }
  const std::map<std::string, std::string> mine = own_settings();
  std::optional<std::map<std::string, std::string>> theirs;
  if (c.other && c.other->pid > 0) theirs = detail::initial_environment(c.other->pid);
  throw bad_input(
      gpu + " is already bound by " +
      (c.other ? describe_holder(*c.other) : std::string("another process")) +
      ": one process per GPU, unless sharing is asked for.\n  " +
      (c.other ? "pid " + std::to_string(c.other->pid) : std::string("it")) + " was started with " +
      (theirs ? rank_settings(*theirs) : std::string("an environment gpusel cannot read")) +
      "\n  this process (pid " + std::to_string(detail::current_pid()) + ") with " +
      rank_settings(mine) + "\nLikely cause: " + likely_cause(mine, theirs) +
      ". To share the GPU on purpose, set GPUSEL_SHARE=1 in both (gpusel run --share, "
      "--ranks-per-gpu)");
}

}  // namespace

int bind_assigned_gpu(int default_ordinal) {
  // Nothing published in code: the environment decides, and whatever in it would put this
  // process on a wrong or shared GPU (what `gpusel doctor` calls an error) is refused first.
  if (!assignment_info()) {
    const std::vector<PlacementProblem> problems = placement_problems();
    if (!problems.empty()) {
      throw bad_input(problems.front().message + "; " + problems.front().remedy);
    }
    // Publishing takes the lock itself. Two threads binding at once may both publish from the
    // environment: the same GPU twice, which is accepted.
    assign_from_environment();
  }
  std::lock_guard<std::mutex> lock(assignment_mutex);
  Assignment& a = assignment;
  const CudaApi& api = cuda_initialised();
  if (a.context == nullptr) {
    // UUIDs only: binding needs nothing else of the devices.
    const std::vector<CudaHandle> devices = cuda_device_handles();
    int ordinal = 0;
    if (a.physical) {
      ordinal = ordinal_of(*a.physical, devices);
    } else if (a.visible) {
      ordinal = *a.visible;
    } else {
      a.info = ordinal_from_launcher(devices, default_ordinal, ordinal);
    }
    if (ordinal < 0 || static_cast<std::size_t>(ordinal) >= devices.size()) {
      throw bad_input("cannot use CUDA device " + std::to_string(ordinal) + ": " +
                      std::to_string(devices.size()) + " visible (" +
                      detail::describe_preset(cuda_env_from_environment()) +
                      detail::reader_text("); run `gpusel list` to see them",
                                          "); gpusel_list_gpus (or `gpusel list`) shows them"));
    }
    const CudaHandle& chosen = devices[static_cast<std::size_t>(ordinal)];
    check_slurm_gpus(devices, chosen);
    claim_gpu(chosen, a.info);
    CUcontext ctx = nullptr;
    CUresult rc = api.cuDevicePrimaryCtxRetain(&ctx, chosen.device);
    if (rc != CUDA_SUCCESS) {
      throw failure("cuDevicePrimaryCtxRetain failed for CUDA device " + std::to_string(ordinal) +
                        ": " + cuda_error_text(api, rc),
                    Problem{ErrorCode::DriverCallFailed, "cuDevicePrimaryCtxRetain", rc});
    }
    a.context = ctx;
    a.visible = ordinal;
    a.bound_uuid = chosen.uuid;
    a.bound = chosen;
  }
  CUresult rc = api.cuCtxSetCurrent(a.context);
  if (rc != CUDA_SUCCESS) {
    throw failure("cuCtxSetCurrent failed: " + cuda_error_text(api, rc),
                  Problem{ErrorCode::DriverCallFailed, "cuCtxSetCurrent", rc});
  }
  return *a.visible;
}

std::optional<int> assigned_visible_gpu() {
  std::lock_guard<std::mutex> lock(assignment_mutex);
  Assignment& a = assignment;
  if (a.visible) return a.visible;
  if (a.physical) return ordinal_of(*a.physical, cuda_device_handles());
  return std::nullopt;
}

namespace {

// The device of a CUDA ordinal: the bound one as bind found it (CUDA's devices do not change
// within a process), else from a fresh enumeration of the UUIDs.
CudaHandle device_handle(int cuda_ordinal) {
  {
    std::lock_guard<std::mutex> lock(assignment_mutex);
    if (assignment.bound && assignment.bound->ordinal == cuda_ordinal) return *assignment.bound;
  }
  std::vector<CudaHandle> devices = cuda_device_handles();
  if (cuda_ordinal < 0 || static_cast<std::size_t>(cuda_ordinal) >= devices.size()) {
    throw bad_input("no CUDA device " + std::to_string(cuda_ordinal) + ": " +
                    std::to_string(devices.size()) + " visible");
  }
  return std::move(devices[static_cast<std::size_t>(cuda_ordinal)]);
}

}  // namespace

CudaDevice gpu_identity(int cuda_ordinal) {
  // The other devices' names, memory and attributes are not needed: only this one's.
  CudaDevice id = cuda_device(device_handle(cuda_ordinal));
  id.cuda_ordinal = cuda_ordinal;
  // NVML finds the one GPU by its UUID; only where it cannot (another spelling of the UUID, an
  // older library) are all GPUs enumerated.
  if (detail::nvml_gpu_index(id.parent_uuid, id.nvidia_smi_index)) return id;
  const NvmlSnapshot snap = query_nvml();
  for (const GpuInfo& g : snap.gpus) {
    if (detail::same_entry(g.uuid, id.parent_uuid)) id.nvidia_smi_index = g.index;
  }
  return id;
}

GPUSEL_END_NAMESPACE

namespace gpusel::detail {

detail::LauncherView launcher_view() {
  detail::LauncherView view;
  for (const detail::RankVariable& v : detail::kRankVariables) {
    auto value = env_string(v.name);
    if (!value) continue;
    detail::RankCandidate c;
    c.variable = v.name;
    c.value = *value;
    if (v.size_name != nullptr) c.size_value = env_string(v.size_name);
    view.candidates.push_back(std::move(c));
  }
  // A worker of gpusel run: the launchers around run do not count, run's LOCAL_RANK does.
  if (auto outer = env_string(detail::kRunOuterVariable))
    detail::set_aside_outer_ranks(view, *outer);
  // sbatch's batch step (the job script) has SLURM_LOCALID=0 but no step of its own; a task
  // that srun starts has SLURM_STEP_ID.
  if (env_string("SLURM_LOCALID") && env_string("SLURM_JOB_ID")) {
    const auto step =
        env_string("SLURM_STEP_ID") ? env_string("SLURM_STEP_ID") : env_string("SLURM_STEPID");
    view.slurm_batch_step = !step || *step == "batch" || *step == "4294967294";
  }
  if (auto node = env_string("SLURM_NODEID"))
    view.slurm_node_id = detail::read_rank_number(*node).value_or(0);
  // srun --gpus-per-task: SLURM_GPUS_PER_TASK where Slurm exports it; else (Slurm 22.05 does not,
  // to tasks) a task whose own GPUs (SLURM_STEP_GPUS) are fewer than the step's on this node
  // (SLURM_GPUS_ON_NODE).
  if (auto per_task = env_string("SLURM_GPUS_PER_TASK"); per_task && !per_task->empty()) {
    view.slurm_gpus_per_task = true;
  } else if (auto step = env_string("SLURM_STEP_GPUS"), on_node = env_string("SLURM_GPUS_ON_NODE");
             step && on_node && !step->empty()) {
    const auto own = static_cast<int>(std::count(step->begin(), step->end(), ',') + 1);
    const std::optional<int> total = detail::read_rank_number(detail::trim_blanks(*on_node));
    view.slurm_gpus_per_task = total && *total > own;
  }
  // Several variables: which launcher set each (nested launchers, or one left behind) is read
  // from the ancestors' environments, whether or not they agree.
  if (view.candidates.size() > 1) look_up_distances(view.candidates);
  return view;
}

std::optional<PlacementProblem> slurm_gpu_problem(const std::vector<GpuInfo>& nvml,
                                                  const std::vector<std::string>& cuda_visible) {
  const CudaEnv env = cuda_env_from_environment();
  if (!env.visible_devices || detail::pci_bus_order(env)) return std::nullopt;
  const bool batch = !env_string("SLURM_STEP_ID") && !env_string("SLURM_STEPID");
  const char* variable = batch ? "SLURM_JOB_GPUS" : "SLURM_STEP_GPUS";
  const auto given = env_string(variable);
  if (!given || given->empty()) return std::nullopt;
  // Slurm's numbers are device files' numbers: nvidia-smi indices.
  std::vector<std::string> slurm_uuids;
  bool all_read = true;
  detail::each_comma_piece(*given, [&](std::string_view piece) {
    const auto index = detail::read_decimal(detail::trim_blanks(piece), 1u << 20);
    bool found = false;
    for (const GpuInfo& g : nvml) {
      if (index && g.index == *index && !g.uuid.empty()) {
        slurm_uuids.push_back(g.uuid);
        found = true;
      }
    }
    all_read = all_read && found;
    return true;
  });
  if (!all_read || slurm_uuids.empty()) return std::nullopt;  // NVML cannot say: nothing to check
  std::vector<std::string> exposed_not_given;
  for (const std::string& u : cuda_visible) {
    bool mine = false;
    for (const std::string& s : slurm_uuids)
      mine = mine || detail::same_entry(s, u) || detail::starts_with_ci(u, s);
    if (!mine) exposed_not_given.push_back(u);
  }
  if (exposed_not_given.empty()) return std::nullopt;
  std::string which;
  for (const std::string& u : exposed_not_given) {
    std::string label = u;
    for (const GpuInfo& g : nvml) {
      if (detail::same_entry(g.uuid, u))
        label = "nvidia-smi " + std::to_string(g.index) + " (" + u + ")";
    }
    which += (which.empty() ? "" : ", ") + label;
  }
  return PlacementProblem{
      "slurm-gpu-order",
      std::string("Slurm gave this ") + (batch ? "job" : "step") + " nvidia-smi GPU(s) " + *given +
          " (" + variable +
          ") and set CUDA_VISIBLE_DEVICES=" + detail::quote_value(*env.visible_devices) +
          ", but CUDA reads those numbers in its own order (CUDA_DEVICE_ORDER " +
          (env.device_order ? "=" + detail::quote_value(*env.device_order) : std::string("unset")) +
          ", fastest first) and exposes " + which +
          ", which Slurm did not give it: on a machine of mixed GPU models the numbers differ",
      "export CUDA_DEVICE_ORDER=PCI_BUS_ID in the job script (before srun), so that CUDA reads "
      "Slurm's numbers as nvidia-smi does"};
}

}  // namespace gpusel::detail
