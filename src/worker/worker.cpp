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
#include "gpusel/nvml.hpp"
#include "gpusel/probe.hpp"
#include "gpusel/resolve.hpp"
#include "gpusel/spec.hpp"
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
    if (starts_with_ci(d.uuid, uuid)) hits.push_back(d.ordinal);
  }
  if (hits.size() == 1) return hits.front();
  const std::string preset = describe_preset(cuda_env_from_environment());
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
void look_up_distances(std::vector<RankCandidate>& candidates) {
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

LauncherView launcher_view() {
  LauncherView view;
  for (const RankVariable& v : kRankVariables) {
    auto value = env_string(v.name);
    if (!value) continue;
    RankCandidate c;
    c.variable = v.name;
    c.value = *value;
    if (v.size_name != nullptr) c.size_value = env_string(v.size_name);
    view.candidates.push_back(std::move(c));
  }
  // sbatch's batch step (the job script) has SLURM_LOCALID=0 but no step of its own; a task
  // that srun starts has SLURM_STEP_ID.
  if (env_string("SLURM_LOCALID") && env_string("SLURM_JOB_ID")) {
    const auto step =
        env_string("SLURM_STEP_ID") ? env_string("SLURM_STEP_ID") : env_string("SLURM_STEPID");
    view.slurm_batch_step = !step || *step == "batch" || *step == "4294967294";
  }
  if (auto node = env_string("SLURM_NODEID"))
    view.slurm_node_id = read_rank_number(*node).value_or(0);
  if (ranks_disagree(view)) look_up_distances(view.candidates);
  return view;
}

std::optional<LocalRank> local_rank() {
  return choose_local_rank(launcher_view());
}

void set_assigned_gpu(std::string_view target) {
  const std::string entry = canonical_entry(target);
  std::optional<std::string> physical;
  std::optional<int> visible;
  if (is_gpu_uuid(entry)) {
    physical = entry;
  } else {
    // At most six digits after the leading zeros.
    const std::optional<std::uint64_t> n = detail::read_decimal(entry, 999999);
    if (!n) throw bad_input("CUDA ordinal " + quote_value(entry) + " is out of range");
    visible = static_cast<int>(*n);
  }
  std::lock_guard<std::mutex> lock(assignment_mutex);
  Assignment& a = assignment;
  if (!a.physical && !a.visible) {
    a.physical = physical;
    a.visible = visible;
    a.info = AssignmentInfo{AssignmentSource::Code, std::nullopt};
    return;
  }
  bool same = false;
  if (physical) {
    same = (a.physical && same_entry(*a.physical, *physical)) ||
           (a.bound_uuid && starts_with_ci(*a.bound_uuid, *physical));
  } else {
    same = a.visible && *a.visible == *visible && (a.bound_uuid || !a.physical);
  }
  if (!same) {
    throw bad_input("this process already has GPU " + describe(a) + " and cannot also take " +
                    entry + ": one process runs on one GPU");
  }
}

void assign_gpu(std::string_view value) {
  const std::string entry = parse_single_gpu(value);
  Resolution r = resolve_gpus({entry}, cuda_env_from_environment(), default_probe_helper());
  set_assigned_gpu(r.gpus.front());
}

namespace {

std::string launcher_names() {
  std::string names;
  for (const RankVariable& v : kRankVariables)
    names += (names.empty() ? "" : ", ") + std::string(v.name);
  return names;
}

// One entry of GPUSEL_GPU or GPUSEL_GPUS, published: a UUID as it is (CUDA decides at bind), an
// index resolved as --gpu would be, within a preset CUDA_VISIBLE_DEVICES (`list` is the whole
// value, so that duplicates and the preset are judged as the parent judges them).
void publish_entry(const std::string& variable, const std::string& value,
                   const std::vector<std::string>& entries, std::size_t which) {
  if (is_gpu_uuid(entries[which])) {
    set_assigned_gpu(entries[which]);
    return;
  }
  try {
    const Resolution r = resolve_gpus(entries, cuda_env_from_environment(), default_probe_helper());
    set_assigned_gpu(r.gpus.at(which));
  } catch (const Error& e) {
    throw Error(e.kind(), variable + "=" + quote_value(value) + ": " + e.what());
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
    return variable + "=" + quote_value(value) + ": " + parse_error;
  const auto lines = 1 + std::count(inner.begin(), inner.end(), '\n');
  const std::string head =
      variable + "=" + quote_value(value) + " holds " + std::to_string(lines) + " lines";
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
    std::string entry;
    try {
      entry = parse_single_gpu(*gpu);
    } catch (const Error& e) {
      throw bad_input(variable_message("GPUSEL_GPU", *gpu, e.what()));
    }
    publish_entry("GPUSEL_GPU", *gpu, {entry}, 0);
    // The rank did not pick the GPU, but callers report it (gpusel run sets LOCAL_RANK too).
    std::optional<LocalRank> rank;
    try {
      rank = local_rank();
    } catch (const Error&) {
    }
    std::lock_guard<std::mutex> lock(assignment_mutex);
    assignment.info = AssignmentInfo{AssignmentSource::GpuselGpu, rank};
    return assignment.info;
  }
  const auto list = env_string("GPUSEL_GPUS");
  if (!list) return std::nullopt;
  std::vector<std::string> entries;
  try {
    entries = parse_gpu_spec(*list);
  } catch (const Error& e) {
    throw bad_input(variable_message("GPUSEL_GPUS", *list, e.what()));
  }
  std::optional<LocalRank> rank = local_rank();
  if (!rank) {
    throw bad_input("GPUSEL_GPUS=" + quote_value(*list) + " is set but no local rank is (" +
                    launcher_names() +
                    "); start workers with gpusel run, torchrun, srun or mpirun, or pass --gpu");
  }
  if (rank->local_size && static_cast<std::size_t>(*rank->local_size) != entries.size()) {
    throw bad_input(rank->size_variable + "=" + std::to_string(*rank->local_size) +
                    " ranks run on this node, but GPUSEL_GPUS=" + quote_value(*list) + " lists " +
                    std::to_string(entries.size()) + (entries.size() == 1 ? " GPU" : " GPUs") +
                    "; start as many workers per node as GPUs listed, one GPU each");
  }
  if (static_cast<std::size_t>(rank->rank) >= entries.size()) {
    throw bad_input(rank->variable + "=" + std::to_string(rank->rank) + " is beyond GPUSEL_GPUS=" +
                    quote_value(*list) + " (" + std::to_string(entries.size()) +
                    " entries); start as many workers per node as GPUs listed");
  }
  publish_entry("GPUSEL_GPUS", *list, entries, static_cast<std::size_t>(rank->rank));
  std::lock_guard<std::mutex> lock(assignment_mutex);
  assignment.info = AssignmentInfo{AssignmentSource::GpuselGpus, rank};
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
  const std::string preset = describe_preset(cuda_env_from_environment());
  if (rank && devices.size() > 1) {
    if (rank->local_size && static_cast<std::size_t>(*rank->local_size) > devices.size()) {
      throw bad_input(rank->size_variable + "=" + std::to_string(*rank->local_size) +
                      " ranks run on this node, but CUDA sees " + std::to_string(devices.size()) +
                      " devices here (" + preset +
                      "); ranks would share GPUs. Give each rank its GPU (gpusel run --gpu, "
                      "GPUSEL_GPUS) or start fewer ranks");
    }
    if (static_cast<std::size_t>(rank->rank) >= devices.size()) {
      throw bad_input(rank->variable + "=" + std::to_string(rank->rank) + " but CUDA sees only " +
                      std::to_string(devices.size()) + " devices here (" + preset +
                      "); start at most one rank per visible GPU, or set GPUSEL_GPUS");
    }
    ordinal = rank->rank;
    return AssignmentInfo{AssignmentSource::Launcher, rank};
  }
  if (devices.size() == 1) {
    ordinal = 0;
    return AssignmentInfo{AssignmentSource::Single, rank};
  }
  if (!rank && devices.size() > 1) {
    // Several ranks, and nothing to tell them apart: never device 0 for everyone.
    for (const char* size : {"LOCAL_WORLD_SIZE", "WORLD_SIZE"}) {
      const auto v = env_string(size);
      const auto n = v ? read_rank_number(*v) : std::nullopt;
      if (n && *n > 1) {
        throw bad_input(std::string(size) + "=" + quote_value(*v) +
                        " says several processes run, but no local-rank variable tells this one "
                        "apart (" +
                        launcher_names() +
                        "); set GPUSEL_GPU, or GPUSEL_GPUS and a local rank, or pass --gpu");
      }
    }
  }
  ordinal = default_ordinal;
  return AssignmentInfo{AssignmentSource::Default, std::nullopt};
}

}  // namespace

int bind_assigned_gpu(int default_ordinal) {
  // Publishing takes the lock itself. Two threads binding at once may both publish from the
  // environment: the same GPU twice, which is accepted.
  if (!assignment_info()) assign_from_environment();
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
                      describe_preset(cuda_env_from_environment()) +
                      "); run `gpusel list` to see them");
    }
    const CudaHandle& chosen = devices[static_cast<std::size_t>(ordinal)];
    CUcontext ctx = nullptr;
    CUresult rc = api.cuDevicePrimaryCtxRetain(&ctx, chosen.device);
    if (rc != CUDA_SUCCESS) {
      throw failure("cuDevicePrimaryCtxRetain failed for CUDA device " + std::to_string(ordinal) +
                    ": " + cuda_error_text(api, rc));
    }
    a.context = ctx;
    a.visible = ordinal;
    a.bound_uuid = chosen.uuid;
    a.bound = chosen;
  }
  CUresult rc = api.cuCtxSetCurrent(a.context);
  if (rc != CUDA_SUCCESS) throw failure("cuCtxSetCurrent failed: " + cuda_error_text(api, rc));
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

GpuIdentity gpu_identity(int cuda_ordinal) {
  // The other devices' names, memory and attributes are not needed: only this one's.
  const CudaDevice d = cuda_device(device_handle(cuda_ordinal));
  GpuIdentity id;
  id.cuda_ordinal = cuda_ordinal;
  id.uuid = d.uuid;
  id.name = d.name;
  id.total_bytes = d.total_bytes;
  id.cc_major = d.cc_major;
  id.cc_minor = d.cc_minor;
  id.pci_bus_id = d.pci_bus_id;
  id.l2_cache_bytes = d.l2_cache_bytes;
  // NVML finds the one GPU by its UUID; only where it cannot (another spelling of the UUID, an
  // older library) are all GPUs enumerated.
  if (detail::nvml_gpu_index(d.parent_uuid, id.index)) return id;
  const NvmlSnapshot snap = query_nvml();
  for (const GpuInfo& g : snap.gpus) {
    if (same_entry(g.uuid, d.parent_uuid)) id.index = g.index;
  }
  return id;
}

GPUSEL_END_NAMESPACE
