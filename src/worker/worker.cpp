// The worker side: publish, bind, identity.
#include "gpusel/worker.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "ancestry.hpp"
#include "cuda_api.hpp"
#include "env.hpp"
#include "gpusel/amd.hpp"
#include "gpusel/cuda.hpp"
#include "gpusel/error.hpp"
#include "gpusel/lease.hpp"
#include "gpusel/nvml.hpp"
#include "gpusel/probe.hpp"
#include "gpusel/resolution.hpp"
#include "gpusel/spec.hpp"
#include "gpusel_detail.hpp"
#include "hip_api.hpp"
#include "nvml_index.hpp"
#include "text.hpp"

namespace gpusel::detail {
namespace {
std::atomic<bool> stderr_warnings_on{true};
}  // namespace

void set_stderr_warnings(bool on) {
  stderr_warnings_on = on;
}

bool stderr_warnings() {
  return stderr_warnings_on.load();
}

}  // namespace gpusel::detail

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
  bool hip = false;  // bound in a HIP runtime: `visible` is its HIP ordinal
  AssignmentInfo info;
};

std::mutex assignment_mutex;
Assignment assignment;

std::string describe(const Assignment& a) {
  if (a.bound_uuid) {
    return *a.bound_uuid + (a.hip ? " (HIP device " : " (CUDA ordinal ") +
           std::to_string(*a.visible) + ")";
  }
  if (a.physical) return *a.physical;
  return "CUDA ordinal " + std::to_string(*a.visible);
}

// The CUDA ordinal of a published UUID among this process's visible devices.
int ordinal_of(const std::string& uuid, const std::vector<CudaHandle>& devices) {
  std::vector<int> hits;
  for (const CudaHandle& d : devices) {
    if (detail::starts_with_ci(d.uuid, uuid)) hits.push_back(d.ordinal);
  }
  if (hits.size() == 1) return hits.front();
  std::string seen;  // for the message only
  for (const CudaHandle& d : devices) seen += (seen.empty() ? "" : ", ") + d.uuid;
  const std::string preset = detail::describe_preset(cuda_env_from_environment());
  if (hits.empty()) {
    throw bad_input("GPU " + uuid + " is not visible to CUDA in this process (" + preset +
                        "; visible: " + (seen.empty() ? "none" : seen) +
                        "); give the worker a GPU from that list, or change CUDA_VISIBLE_DEVICES",
                    about(Subject::Gpu, {{"gpu", uuid}, {"reason", "not-visible-to-cuda"}}));
  }
  throw bad_input("GPU " + uuid + " is a prefix of " + std::to_string(hits.size()) +
                      " devices CUDA sees here (" + seen + "); give enough characters to name one",
                  about(Subject::Gpu, {{"gpu", uuid}, {"reason", "ambiguous-prefix"}}));
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
  static constexpr detail::EnvNames<3> kNames(
      std::array<const char*, 3>{"GPUSEL_SHARE", "SLURM_NTASKS_PER_GPU", "SLURM_NTASKS_PER_TRES"});
  const auto values = detail::env_values(kNames);
  std::map<std::string, std::string> vars;
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (values[i]) vars[kNames.names[i]] = *values[i];
  }
  return detail::sharing_in(vars);
}

std::vector<PlacementProblem> placement_problems(std::optional<std::size_t> visible_devices) {
  // A count alone names no device: stand-ins of that many, and only the problems that do not
  // depend on which devices they are.
  std::optional<std::vector<std::string>> visible;
  if (visible_devices) visible = std::vector<std::string>(*visible_devices, "");
  const detail::PlacementVerdict v = detail::analyse_placement(detail::placement_model(visible));
  std::vector<PlacementProblem> out;
  for (const PlacementProblem& p : v.problems) {
    if (p.id == "gpu-not-visible" || p.id == "gpu-on-another-node" || p.id == "gpu-prefix" ||
        p.id == "gpusel-gpus-not-here" || p.id == "ordinal-out-of-range" ||
        p.id.rfind("slurm-", 0) == 0) {
      continue;
    }
    out.push_back(p);
    out.back().message = worded(p.message, Audience::Program);  // a program's words: C++ callers
    out.back().remedy = worded(p.remedy, Audience::Program);
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
      resolve_gpus(read_single_gpu(value), cuda_env_from_environment(), probe_helper_when_needed());
  set_assigned_gpu(r.gpus.front());
}

namespace {

// A placement problem as an error: its data, with the check's id as the field "check".
// The environment's verdict, without CUDA's devices (publishing, not binding): the entry of
// GPUSEL_GPU or GPUSEL_GPUS this process takes.
detail::PlacementVerdict verdict_without_devices() {
  detail::PlacementVerdict v = detail::analyse_placement(detail::placement_model(std::nullopt));
  if (!v.problems.empty()) {
    throw detail::placement_error(v.problems.front());
  }
  return v;
}

}  // namespace

std::optional<AssignmentInfo> assign_from_environment() {
  if (!env_string("GPUSEL_GPU") && !env_string("GPUSEL_GPUS")) return std::nullopt;
  const detail::PlacementVerdict v = verdict_without_devices();
  if (!v.entry) return std::nullopt;
  set_assigned_gpu(*v.entry);
  std::lock_guard<std::mutex> lock(assignment_mutex);
  assignment.info = info_of(v.source, v.rank);
  return assignment.info;
}

std::optional<AssignmentInfo> assignment_info() {
  std::lock_guard<std::mutex> lock(assignment_mutex);
  if (!assignment.physical && !assignment.visible) return std::nullopt;
  return assignment.info;  // after a bind, visible is set whatever decided
}

namespace {

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
// Says on stderr, once per process, that this process bound its GPU without a claim, so that
// another process may bind it too: whoever calls (C, C++, Python, the command) is told.
void warn_unclaimed(const std::string& gpu, const std::string& why, bool partial = false) {
  if (!detail::stderr_warnings()) return;
  static std::once_flag said;
  std::call_once(said, [&] {
    const std::string line =
        "gpusel: warning: " + gpu + " was bound without a " + (partial ? "full " : "") + "claim (" +
        detail::printable(why) +
        "), so another process may bind it too; set GPUSEL_LEASE_DIR to a folder of yours, or "
        "have root run `gpusel setup`\n";
    std::fputs(line.c_str(), stderr);
  });
}

// The data of a GPU another process holds: the GPU, and the holder's pid where it is known.
Problem holder_problem(const std::string& uuid, const std::optional<LeaseHolder>& other) {
  Problem p = about(Subject::Gpu, {{"gpu", uuid}, {"reason", "bound-by-another-process"}});
  if (other && other->pid > 0) p.fields.push_back({"pid", std::to_string(other->pid)});
  return p;
}

// `uuid`: the GPU (or MIG device) to claim; `gpu`: how messages name it.
void claim_gpu(const std::string& uuid, const std::string& gpu, AssignmentInfo& info) {
  const bool share = sharing_asked();
  info.shared = share;
  std::optional<LeaseStore> store;
  try {
    store = LeaseStore::locate();
  } catch (const Error& e) {
    // A program's words: the note reaches C++, C and Python callers as it is.
    info.claim_note = {"unclaimed", std::string("no claim was taken: ") + e.what()};
    if (!share) warn_unclaimed(gpu, e.what());
    return;
  }
  const ClaimResult c = store->claim(uuid, share);
  if (c.unusable) {
    const std::string why = c.unusable->text();
    // In a store that binds every user, a GPU whose lease file is missing or unusable is held
    // by nobody: binding it unclaimed could put two users on it. Sharing asked for it anyway.
    if (!c.claimed && store->shared() && !share) {
      Problem data = c.unusable->problem();
      data.fields.push_back({"gpu", uuid});
      throw failure(gpu + " cannot be claimed: " + detail::printable(why), std::move(data));
    }
    info.claim_note = {c.claimed ? "claim-partial" : "unclaimed",
                       (c.claimed ? "the claim is partial: " : "no claim was taken: ") + why};
    if (!share) warn_unclaimed(gpu, why, c.claimed);
    return;
  }
  if (c.claimed) return;
  if (c.leased_elsewhere && !share) {
    throw bad_input(
        gpu + " is leased by another job: " +
            (c.leased_by_other_job ? describe_holder(*c.leased_by_other_job)
                                   : std::string("its holder is not visible here")) +
            "; this process was not started by it. Choose another GPU, wait for that job, "
            "or set GPUSEL_SHARE=1 to run beside it on purpose",
        about(Subject::Gpu, {{"gpu", uuid}, {"reason", "leased-by-another-job"}}));
  }
  if (c.beside) {
    if (c.other) info.shared_with_pid = c.other->pid;
    return;
  }
  // This very process holds it: a claim taken before an exec (`gpusel bind -- PROGRAM`) stays
  // with the process, whose pid the program keeps.
  if (c.other && c.other->pid == detail::current_pid()) return;
  const std::map<std::string, std::string> mine = own_settings();
  std::optional<std::map<std::string, std::string>> theirs;
  if (c.other && c.other->pid > 0) theirs = detail::initial_environment(c.other->pid);
  throw bad_input(
      gpu + " is already bound by " +
          (c.other ? describe_holder(*c.other) : std::string("another process")) +
          ": one process per GPU, unless sharing is asked for.\n  " +
          (c.other ? "pid " + std::to_string(c.other->pid) : std::string("it")) +
          " was started with " +
          (theirs ? rank_settings(*theirs) : std::string("an environment gpusel cannot read")) +
          "\n  this process (pid " + std::to_string(detail::current_pid()) + ") with " +
          rank_settings(mine) + "\nLikely cause: " + likely_cause(mine, theirs) +
          ". To share the GPU on purpose, set GPUSEL_SHARE=1 in both (gpusel run --share, "
          "--ranks-per-gpu)",
      holder_problem(uuid, c.other));
}

}  // namespace

namespace {

[[noreturn]] void refuse(const PlacementProblem& p) {
  throw detail::placement_error(p);
}

std::vector<std::string> uuids_of(const std::vector<CudaHandle>& devices) {
  std::vector<std::string> out;
  for (const CudaHandle& d : devices) out.push_back(d.uuid);
  return out;
}

// What shows this machine's GPUs are AMD's, for messages: AMD's GPU compute driver (/dev/kfd), or
// GPUs ROCm SMI lists (as on a simulated AMD machine, which has no /dev/kfd); "" when neither.
std::string amd_machine_sign() {
  if (amd_driver_present()) return "AMD's GPU driver (/dev/kfd)";
  const AmdSnapshot amd = query_rocm_smi();
  if (amd.available && !amd.gpus.empty())
    return std::to_string(amd.gpus.size()) + " AMD GPU" + (amd.gpus.size() == 1 ? "" : "s") +
           " (ROCm SMI lists them)";
  return "";
}

// The devices CUDA shows this process. Where CUDA cannot be used and nothing was published, a
// problem of the environment itself is said first (it is the one to fix).
std::vector<CudaHandle> visible_devices(const CudaApi*& api, bool published) {
  try {
    api = &cuda_initialised();
    return cuda_device_handles();
  } catch (const Error& e) {
    if (!published) {
      const detail::PlacementVerdict v =
          detail::analyse_placement(detail::placement_model(std::nullopt));
      if (!v.problems.empty()) refuse(v.problems.front());
    }
    // A HIP program that binds before it has loaded HIP: the CUDA words alone would mislead.
    if (e.code() == ErrorCode::LibraryNotLoaded) {
      const detail::HipRuntime* hip = detail::loaded_hip_runtime();
      if (hip != nullptr && hip->missing.empty()) {
        // HIP is loaded, and shows no device (else bind would have taken it): the variables.
        const detail::PlacementVerdict v =
            detail::analyse_placement(detail::hip_placement_model({}));
        if (!v.problems.empty()) refuse(v.problems.front());
      }
      if (const std::string amd = amd_machine_sign(); !amd.empty()) {
        throw failure(
            e.text() + detail::reader_text(
                           "", "; this machine has " + amd +
                                   ", and a HIP program is bound in the HIP runtime it has "
                                   "loaded (libamdhip64), which this process has not yet: bind "
                                   "after the program's first HIP call"),
            e.problem());
      }
    }
    throw;
  }
}

// The CUDA ordinal of what was published (in code, or from the environment before).
int published_ordinal(const Assignment& a, const std::vector<CudaHandle>& devices) {
  const int ordinal = a.physical ? ordinal_of(*a.physical, devices) : *a.visible;
  if (ordinal < 0 || static_cast<std::size_t>(ordinal) >= devices.size()) {
    throw bad_input("cannot use CUDA device " + std::to_string(ordinal) + ": " +
                    std::to_string(devices.size()) + " visible (" +
                    detail::describe_preset(cuda_env_from_environment()) +
                    detail::reader_text("); run `gpusel list` to see them",
                                        "); gpusel_list_gpus (or `gpusel list`) shows them"));
  }
  // (The model reads the whole environment and may ask NVML: only where it can find something.)
  if (!detail::slurm_grant_checked(cuda_env_from_environment())) return ordinal;
  const CudaHandle& chosen = devices[static_cast<std::size_t>(ordinal)];
  if (const auto p =
          detail::slurm_placement_problem(detail::placement_model(uuids_of(devices)), chosen.uuid))
    refuse(*p);
  return ordinal;
}

}  // namespace

namespace {

// The device this process binds, chosen and claimed, with no context made: what was published
// (in code, or from the environment before), else what the one analysis decides (the rule of
// assignment.hpp), whatever would put this process on a wrong or shared GPU (what `gpusel doctor`
// calls an error) refused. Called with assignment_mutex held; `api` is set once CUDA is loaded.
CudaHandle choose_and_claim_in_cuda(Assignment& a, int default_ordinal, const CudaApi*& api) {
  const bool published = a.physical || a.visible;
  // UUIDs only: binding needs nothing else of the devices.
  const std::vector<CudaHandle> devices = visible_devices(api, published);
  int ordinal = 0;
  if (published) {
    ordinal = published_ordinal(a, devices);
  } else {
    const detail::PlacementVerdict v =
        detail::analyse_placement(detail::placement_model(uuids_of(devices)), default_ordinal);
    if (!v.problems.empty()) refuse(v.problems.front());
    ordinal = *v.ordinal;
    if (v.entry && is_gpu_uuid(*v.entry)) a.physical = detail::canonical_entry(*v.entry);
    a.info = info_of(v.source, v.rank);
  }
  const CudaHandle chosen = devices[static_cast<std::size_t>(ordinal)];
  claim_gpu(chosen.uuid,
            "GPU " + chosen.uuid + " (CUDA ordinal " + std::to_string(chosen.ordinal) + ")",
            a.info);
  return chosen;
}

// A GPU CUDA cannot see (`e`, refused by the placement rules) that is an AMD GPU of this machine
// (one with both makers' GPUs): said in those words. ROCm SMI is asked only for an id in an AMD
// id's form, after the refusal: CUDA binds pay nothing.
void refuse_amd_gpu_in_cuda(const Error& e) {
  const std::string* reason = e.problem().field("reason");
  const std::string* gpu = e.problem().field("gpu");
  if (reason == nullptr || gpu == nullptr ||
      (*reason != "not-on-this-machine" && *reason != "not-visible-to-cuda"))
    return;
  if (!detail::amd_id_form(*gpu)) return;
  const AmdSnapshot amd = query_rocm_smi();
  for (const AmdGpu& g : amd.gpus) {
    if (!detail::starts_with_ci(g.id, *gpu)) continue;
    throw failure("GPU " + g.id + " is an AMD GPU of this machine (rocm-smi index " +
                      std::to_string(g.index) +
                      "), which this process would bind in CUDA: CUDA has only the NVIDIA GPUs. " +
                      detail::reader_text("Wrap a HIP program as `gpusel bind -- PROGRAM`",
                                          "Bind after the program's first HIP call") +
                      " (HIP then takes it), or give a CUDA program an NVIDIA GPU",
                  about(Subject::Gpu, {{"gpu", g.id}, {"reason", "amd-gpu-in-cuda"}}));
  }
}

CudaHandle choose_and_claim(Assignment& a, int default_ordinal, const CudaApi*& api) {
  try {
    return choose_and_claim_in_cuda(a, default_ordinal, api);
  } catch (const Error& e) {
    refuse_amd_gpu_in_cuda(e);
    throw;
  }
}
// ROCr's id of a GPU with one: "GPU-" and 16 hex digits.
bool is_amd_unique_id(const std::string& id) {
  if (id.size() != 20 || id.compare(0, 4, "GPU-") != 0) return false;
  for (std::size_t i = 4; i < id.size(); ++i)
    if (std::isxdigit(static_cast<unsigned char>(id[i])) == 0) return false;
  return true;
}

// The HIP ordinal of a GPU entry (a published id or prefix, or an index that is a HIP ordinal)
// among this process's HIP devices; refused in HIP's words, naming the three variables as set.
int hip_ordinal_of(const std::string& entry, const std::vector<detail::HipHandle>& devices) {
  std::vector<int> hits;
  std::vector<std::string> seen;
  for (const detail::HipHandle& d : devices) {
    seen.push_back(d.id);
    if (detail::starts_with_ci(d.id, entry)) hits.push_back(d.ordinal);
  }
  const std::string settings = hip_settings(cuda_env_from_environment());
  const std::string listed = seen.empty() ? std::string("none") : detail::join_entries(seen);
  if (!is_gpu_uuid(entry)) {
    const std::optional<std::uint64_t> n = detail::read_decimal(entry, 999999);
    if (n && *n < devices.size()) return static_cast<int>(*n);
    throw bad_input("cannot use HIP device " + entry + ": " + std::to_string(devices.size()) +
                        " in this process (" + settings + "; HIP devices: " + listed +
                        "); give an ordinal below that count, or change those variables",
                    about(Subject::Gpu, {{"gpu", entry}, {"reason", "ordinal-out-of-range"}}));
  }
  if (hits.size() == 1) return hits.front();
  if (hits.empty()) {
    throw bad_input("AMD GPU " + entry + " is not among this process's HIP devices (" + settings +
                        "; HIP devices: " + listed +
                        "); give the worker a GPU from that list, or change those variables",
                    about(Subject::Gpu, {{"gpu", entry}, {"reason", "not-visible-to-hip"}}));
  }
  throw bad_input("AMD GPU " + entry + " is a prefix of " + std::to_string(hits.size()) +
                      " HIP devices here (" + listed + "); give enough characters to name one",
                  about(Subject::Gpu, {{"gpu", entry}, {"reason", "ambiguous-prefix"}}));
}

// With nothing published in code: the same rule as among CUDA's devices (GPUSEL_GPU, GPUSEL_GPUS
// and the local rank, ...), over HIP's. Refusals about the device list are worded for HIP.
int hip_ordinal_by_rule(Assignment& a, int default_ordinal,
                        const std::vector<detail::HipHandle>& devices) {
  std::vector<std::string> ids;
  for (const detail::HipHandle& d : devices) ids.push_back(d.id);
  const detail::PlacementVerdict v =
      detail::analyse_placement(detail::hip_placement_model(ids), default_ordinal);
  if (!v.problems.empty()) refuse(v.problems.front());
  if (v.entry && is_gpu_uuid(*v.entry)) a.physical = detail::canonical_entry(*v.entry);
  a.info = info_of(v.source, v.rank);
  return *v.ordinal;
}

// The GPU entry this worker was handed: published in code, else GPUSEL_GPU, else the whole of
// GPUSEL_GPUS (a launcher's rank picks among them); empty where none.
std::vector<std::string> handed_entries(const Assignment& a) {
  if (a.physical) return {*a.physical};
  if (std::optional<std::string> one = env_string("GPUSEL_GPU")) return {*one};
  std::vector<std::string> out;
  if (std::optional<std::string> all = env_string("GPUSEL_GPUS")) {
    for (std::string_view e : detail::split_commas(*all)) out.emplace_back(detail::trim_blanks(e));
  }
  return out;
}

// Whose GPU an entry names by its form: an NVIDIA UUID (or MIG device) has a dash past its first
// 8 digits, an AMD id never; a shorter prefix, or an index, could be either's.
enum class EntryMaker { Nvidia, Amd, Either };
EntryMaker entry_maker(std::string_view e) {
  e = detail::trim_blanks(e);
  if (detail::amd_id_form(e)) return e.size() > 12 ? EntryMaker::Amd : EntryMaker::Either;
  const bool uuid = detail::starts_with_ci(e, "GPU-") || detail::starts_with_ci(e, "MIG-");
  return uuid && e.size() > 4 ? EntryMaker::Nvidia : EntryMaker::Either;
}

// A machine with both makers' GPUs: a short UUID prefix handed to this worker that starts an
// NVIDIA UUID and an AMD id is refused, whichever runtime binds (asked of NVML and ROCm SMI only
// for such a prefix: whole UUIDs and ids, and indices, cost nothing).
void refuse_prefix_of_both(const Assignment& a) {
  for (const std::string& entry : handed_entries(a)) {
    const std::string_view e = detail::trim_blanks(entry);
    if (!detail::amd_id_form(e) || e.size() > 12) continue;
    const AmdSnapshot amd = query_rocm_smi();
    const auto amd_hit = std::find_if(amd.gpus.begin(), amd.gpus.end(), [&](const AmdGpu& g) {
      return detail::starts_with_ci(g.id, e);
    });
    if (amd_hit == amd.gpus.end()) continue;
    const NvmlSnapshot nvidia = query_nvml(NvmlQuery{false, false, NvmlDetail::Uuid});
    const auto nvidia_hit =
        std::find_if(nvidia.gpus.begin(), nvidia.gpus.end(),
                     [&](const GpuInfo& g) { return detail::starts_with_ci(g.uuid, e); });
    if (nvidia_hit == nvidia.gpus.end()) continue;
    throw bad_input("the GPU handed to this worker, " + detail::quote_value(std::string(e)) +
                        ", starts the UUID of an NVIDIA GPU (" + nvidia_hit->uuid +
                        ") and the id of an AMD GPU (" + amd_hit->id +
                        "); give enough characters to name one (`gpusel list` shows both)",
                    about(Subject::Gpu, {{"gpu", std::string(e)}, {"reason", "ambiguous-prefix"}}));
  }
}

// bind_assigned_gpu in a HIP program (AMD GPUs): the device chosen among HIP's own, claimed, then
// made the calling thread's current HIP device (HIP's one notion of a bound device). Called with
// assignment_mutex held.
int bind_hip(Assignment& a, int default_ordinal, const detail::HipRuntime& hip) {
  if (!a.hip) {
    const std::vector<detail::HipHandle> devices = detail::hip_device_handles(hip);
    int ordinal = 0;
    if (a.physical) {
      ordinal = hip_ordinal_of(*a.physical, devices);
    } else if (a.visible) {
      ordinal = hip_ordinal_of(std::to_string(*a.visible), devices);
    } else {
      ordinal = hip_ordinal_by_rule(a, default_ordinal, devices);
    }
    const detail::HipHandle& chosen = devices[static_cast<std::size_t>(ordinal)];
    if (!is_amd_unique_id(chosen.id)) {
      // "GPU-XX": no id to claim it by, nor to tell it from another GPU without one.
      throw failure("HIP device " + std::to_string(ordinal) + " has no unique id (" + chosen.id +
                        "), so gpusel cannot claim it or tell it apart from another GPU (" +
                        hip_settings(cuda_env_from_environment()) +
                        "); give the worker a GPU with an id (`gpusel list`)",
                    about(Subject::Gpu, {{"gpu", chosen.id}, {"reason", "no-unique-id"}}));
    }
    claim_gpu(chosen.id, "AMD GPU " + chosen.id + " (HIP device " + std::to_string(ordinal) + ")",
              a.info);
    a.hip = true;
    a.visible = ordinal;
    a.bound_uuid = chosen.id;
  }
  detail::hip_set_device(hip, *a.visible);
  return *a.visible;
}

}  // namespace

int bind_assigned_gpu(int default_ordinal) {
  std::lock_guard<std::mutex> lock(assignment_mutex);
  Assignment& a = assignment;
  // A HIP program (AMD GPUs) binds in the HIP runtime it loaded; a CUDA program in CUDA. A
  // program with both runtimes loaded binds where the GPU it was handed is: an NVIDIA UUID in CUDA,
  // an AMD id in HIP, anything else in HIP.
  if (a.hip) return bind_hip(a, default_ordinal, *detail::loaded_hip_runtime());
  if (a.context == nullptr && !a.bound) {
    refuse_prefix_of_both(a);
    const std::vector<std::string> handed = handed_entries(a);
    const bool nvidia_gpu =
        !handed.empty() && std::all_of(handed.begin(), handed.end(), [](const std::string& e) {
          return entry_maker(e) == EntryMaker::Nvidia;
        });
    if (!nvidia_gpu) {
      if (const detail::HipRuntime* hip = detail::hip_runtime_with_devices())
        return bind_hip(a, default_ordinal, *hip);
    }
  }
  const CudaApi* api_pointer = nullptr;
  if (a.context == nullptr) {
    // Chosen and claimed already (detail::claim_assigned_gpu), or now.
    const CudaHandle chosen =
        a.bound ? *a.bound : choose_and_claim(a, default_ordinal, api_pointer);
    const CudaApi& api = api_pointer != nullptr ? *api_pointer : cuda_initialised();
    api_pointer = &api;
    CUcontext ctx = nullptr;
    CUresult rc = api.cuDevicePrimaryCtxRetain(&ctx, chosen.device);
    if (rc != CUDA_SUCCESS) {
      throw failure("cuDevicePrimaryCtxRetain failed for CUDA device " +
                        std::to_string(chosen.ordinal) + ": " + cuda_error_text(api, rc),
                    Problem{ErrorCode::DriverCallFailed, "cuDevicePrimaryCtxRetain", rc});
    }
    a.context = ctx;
    a.visible = chosen.ordinal;
    a.bound_uuid = chosen.uuid;
    a.bound = chosen;
  }
  const CudaApi& api = api_pointer != nullptr ? *api_pointer : cuda_initialised();
  CUresult rc = api.cuCtxSetCurrent(a.context);
  if (rc != CUDA_SUCCESS) {
    throw failure("cuCtxSetCurrent failed: " + cuda_error_text(api, rc),
                  Problem{ErrorCode::DriverCallFailed, "cuCtxSetCurrent", rc});
  }
  return *a.visible;
}

namespace {

// detail::claim_assigned_gpu: bind_assigned_gpu without the context.
int claim_without_context(int default_ordinal) {
  std::lock_guard<std::mutex> lock(assignment_mutex);
  Assignment& a = assignment;
  if (!a.bound && !a.hip) {  // bound in HIP: chosen and claimed already
    const CudaApi* api = nullptr;
    const CudaHandle chosen = choose_and_claim(a, default_ordinal, api);
    a.visible = chosen.ordinal;
    a.bound_uuid = chosen.uuid;
    a.bound = chosen;
  }
  return *a.visible;
}

}  // namespace

std::optional<int> assigned_visible_gpu() {
  std::lock_guard<std::mutex> lock(assignment_mutex);
  Assignment& a = assignment;
  if (a.visible) return a.visible;
  if (a.physical) {
    if (const detail::HipRuntime* hip = detail::hip_runtime_with_devices())
      return hip_ordinal_of(*a.physical, detail::hip_device_handles(*hip));
    return ordinal_of(*a.physical, cuda_device_handles());
  }
  return std::nullopt;
}

namespace {

// The device of a CUDA ordinal: the bound one as bind found it (CUDA's devices do not change
// within a process), else from a fresh enumeration of the UUIDs.
CudaHandle device_handle(int cuda_ordinal) {
  {
    std::lock_guard<std::mutex> lock(assignment_mutex);
    if (assignment.bound && assignment.bound->ordinal == cuda_ordinal) return *assignment.bound;
    if (assignment.hip) {
      throw failure("gpu_identity describes CUDA devices, and this process is bound in HIP, to " +
                        describe(assignment) +
                        ": `gpusel list` shows that GPU's rocm-smi index, name and memory",
                    Problem{ErrorCode::LibraryNotLoaded});
    }
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
  // Every variable read below, in one pass over the environment (env_values).
  constexpr std::size_t kRanks = std::size(detail::kRankVariables);
  enum Extra : std::size_t {
    kOuter = 2 * kRanks,
    kLocalId,
    kJobId,
    kStepId,
    kStepIdOld,
    kNodeId,
    kGpusPerTask,
    kStepGpus,
    kGpusOnNode,
    kNames
  };
  static constexpr detail::EnvNames<kNames> kList = [] {
    std::array<const char*, kNames> names{};
    for (std::size_t k = 0; k < kRanks; ++k) {
      names[k] = detail::kRankVariables[k].name;
      // (A launcher without a size variable: its name again, its value unused.)
      const char* size = detail::kRankVariables[k].size_name;
      names[kRanks + k] = size != nullptr ? size : detail::kRankVariables[k].name;
    }
    names[kOuter] = detail::kRunOuterVariable;
    names[kLocalId] = "SLURM_LOCALID";
    names[kJobId] = "SLURM_JOB_ID";
    names[kStepId] = "SLURM_STEP_ID";
    names[kStepIdOld] = "SLURM_STEPID";
    names[kNodeId] = "SLURM_NODEID";
    names[kGpusPerTask] = "SLURM_GPUS_PER_TASK";
    names[kStepGpus] = "SLURM_STEP_GPUS";
    names[kGpusOnNode] = "SLURM_GPUS_ON_NODE";
    return detail::EnvNames<kNames>(names);
  }();
  auto values = detail::env_values(kList);

  detail::LauncherView view;
  for (std::size_t k = 0; k < kRanks; ++k) {
    if (!values[k]) continue;
    detail::RankCandidate c;
    c.variable = detail::kRankVariables[k].name;
    c.value = std::move(*values[k]);
    if (detail::kRankVariables[k].size_name != nullptr) c.size_value = values[kRanks + k];
    view.candidates.push_back(std::move(c));
  }
  // A worker of gpusel run: the launchers around run do not count, run's LOCAL_RANK does.
  if (const auto& outer = values[kOuter]) detail::set_aside_outer_ranks(view, *outer);
  // sbatch's batch step (the job script) has SLURM_LOCALID=0 but no step of its own; a task
  // that srun starts has SLURM_STEP_ID.
  if (values[kLocalId] && values[kJobId]) {
    const auto& step = values[kStepId] ? values[kStepId] : values[kStepIdOld];
    view.slurm_batch_step = !step || *step == "batch" || *step == "4294967294";
  }
  if (const auto& node = values[kNodeId])
    view.slurm_node_id = detail::read_rank_number(*node).value_or(0);
  // srun --gpus-per-task: SLURM_GPUS_PER_TASK where Slurm exports it; else (Slurm 22.05 does not,
  // to tasks) a task whose own GPUs (SLURM_STEP_GPUS) are fewer than the step's on this node
  // (SLURM_GPUS_ON_NODE).
  if (const auto& per_task = values[kGpusPerTask]; per_task && !per_task->empty()) {
    view.slurm_gpus_per_task = true;
  } else if (const auto& step = values[kStepGpus], &on_node = values[kGpusOnNode];
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

namespace {

// The Slurm variables of the process Slurm started on this node: walking up from this process,
// the last of the ancestors that have SLURM_JOB_ID in their starting environment (above it is
// slurmstepd, or an environment this user cannot read).
std::optional<std::map<std::string, std::string>> slurm_task_environment() {
  constexpr int kMaxDepth = 32;
  std::optional<std::map<std::string, std::string>> task;
  int pid = detail::current_pid();
  for (int depth = 0; depth < kMaxDepth && pid > 1; ++depth) {
    const auto env = detail::initial_environment(pid);
    if (!env || env->find("SLURM_JOB_ID") == env->end()) break;
    task = *env;
    pid = detail::parent_of(pid);
  }
  if (!task) return std::nullopt;
  std::map<std::string, std::string> out;
  for (const char* name : kSlurmTaskVariables) {
    auto it = task->find(name);
    if (it != task->end()) out[name] = it->second;
  }
  return out;
}

// GPUSEL_GPU's or GPUSEL_GPUS's request, when it names GPUs; nullopt otherwise (the analysis
// says why).
std::optional<GpuRequest> worker_request(const PlacementModel& m) {
  try {
    if (auto it = m.vars.find("GPUSEL_GPU"); it != m.vars.end()) return read_single_gpu(it->second);
    if (auto it = m.vars.find("GPUSEL_GPUS"); it != m.vars.end())
      return read_gpu_request(it->second, false);
  } catch (const Error&) {
  }
  return std::nullopt;
}

// NVML is read only where the analysis needs it: Slurm named GPUs and CUDA_VISIBLE_DEVICES is set
// (are they the ones this process binds?), or a listed UUID is not among CUDA's devices (is it
// another machine's?).
bool needs_nvml(const PlacementModel& m, const std::optional<GpuRequest>& request) {
  if (m.cuda.visible_devices &&
      (m.vars.count("SLURM_STEP_GPUS") || m.vars.count("SLURM_JOB_GPUS") || m.slurm_task))
    return true;
  if (!request || !m.visible || request->kind != GpuRequest::Kind::Gpus) return false;
  for (const GpuEntry& e : request->gpus) {
    if (!e.is_uuid()) continue;
    bool seen = false;
    for (const std::string& d : *m.visible) seen = seen || detail::starts_with_ci(d, e.text);
    if (!seen) return true;
  }
  return false;
}

}  // namespace

namespace {

// What both models read the same way: the variables, the launchers, Slurm's task.
PlacementModel environment_model(std::optional<std::vector<std::string>> visible) {
  PlacementModel m;
  static constexpr detail::EnvNames<std::size(kPlacementVariables)> kNames(
      std::to_array(kPlacementVariables));
  auto values = detail::env_values(kNames);
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (values[i]) m.vars[kPlacementVariables[i]] = std::move(*values[i]);
  }
  m.cuda = cuda_env_from_environment();
  m.launchers = launcher_view();
  m.visible = std::move(visible);
  if (m.vars.count("SLURM_JOB_ID")) m.slurm_task = slurm_task_environment();
  return m;
}

bool has_index(const std::optional<GpuRequest>& request) {
  return request && request->kind == GpuRequest::Kind::Gpus &&
         std::any_of(request->gpus.begin(), request->gpus.end(),
                     [](const GpuEntry& e) { return !e.is_uuid(); });
}

}  // namespace

PlacementModel hip_placement_model(std::vector<std::string> hip_ids) {
  PlacementModel m = environment_model(std::move(hip_ids));
  m.hip = true;
  m.rocr_visible = env_string("ROCR_VISIBLE_DEVICES");
  m.hip_visible = env_string("HIP_VISIBLE_DEVICES");
  const std::optional<GpuRequest> request = worker_request(m);
  if (!has_index(request)) return m;
  // An index is rocm-smi's (within a preset, a position among HIP's devices): ROCm SMI places it.
  const AmdSnapshot amd = query_rocm_smi();
  if (!amd.available || amd.gpus.empty()) {
    m.resolve_error =
        "an index there is a rocm-smi index, which needs ROCm SMI to be placed, and " +
        (amd.available ? std::string("ROCm SMI lists no GPU here") : amd.reason) +
        "; give the GPU by its id instead (GPU- and 16 hex digits, as `gpusel list` "
        "or rocminfo shows it)";
    // HIP has GPUs that ROCm SMI does not list: the machine's libraries disagree (a failure).
    Problem none(ErrorCode::DriverBroken, "rsmi_num_monitor_devices", 0);
    none.subject = Subject::Gpu;
    none.fields = {{"reason", "rocm-smi-no-gpu"}};
    m.resolve_problem = amd.available ? none : amd.problem;
    return m;
  }
  try {
    m.resolved = resolve_on_amd(*request, m.cuda, amd).gpus;
  } catch (const Error& e) {
    m.resolve_error = e.text();
    m.resolve_problem = e.problem();
  }
  return m;
}

PlacementModel placement_model(std::optional<std::vector<std::string>> visible,
                               const std::optional<std::vector<GpuInfo>>& nvml) {
  PlacementModel m = environment_model(std::move(visible));
  const std::optional<GpuRequest> request = worker_request(m);
  if (nvml) {
    m.nvml = nvml;
  } else if (needs_nvml(m, request)) {
    NvmlSnapshot snap = query_nvml(NvmlQuery{false, false, NvmlDetail::Model});
    if (snap.available) m.nvml = std::move(snap.gpus);
  }
  if (has_index(request)) {
    try {
      m.resolved = resolve_gpus(*request, m.cuda, probe_helper_when_needed()).gpus;
    } catch (const Error& e) {
      m.resolve_error = e.text();
      m.resolve_problem = e.problem();
    }
  }
  return m;
}

int claim_assigned_gpu(int default_ordinal) {
  return claim_without_context(default_ordinal);
}

AssignmentInfo claim_for_exec(const std::string& uuid, const std::string& gpu,
                              AssignmentSource source, std::optional<LocalRank> rank) {
  AssignmentInfo info = info_of(source, rank);
  claim_gpu(uuid, gpu, info);
  return info;
}

}  // namespace gpusel::detail
