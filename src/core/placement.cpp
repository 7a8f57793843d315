// One analysis of where a worker's GPU comes from, over one model of its environment: binding
// refuses on what it finds, and `gpusel doctor` reports the same (docs/placement.md).
#include <algorithm>

#include "gpusel/error.hpp"
#include "gpusel/spec.hpp"
#include "gpusel_detail.hpp"
#include "text.hpp"

namespace gpusel::detail {
namespace {

std::optional<std::string> var(const std::map<std::string, std::string>& vars, const char* name) {
  auto it = vars.find(name);
  if (it == vars.end()) return std::nullopt;
  return it->second;
}

// `data` naming the variable it is about as well: {"variable", "value"} when it has none.
Problem naming(Problem data, const std::string& variable, const std::string& value) {
  if (data.field("variable") == nullptr) {
    data.fields.push_back({"variable", variable});
    data.fields.push_back({"value", value});
  }
  return data;
}

void refuse(PlacementVerdict& v, std::string id, std::string message, std::string remedy,
            Problem data = {}) {
  v.problems.push_back({std::move(id), std::move(message), std::move(remedy), std::move(data)});
}

// The runtime whose devices the model lists, as messages name it.
const char* runtime(const PlacementModel& m) {
  return m.hip ? "HIP" : "CUDA";
}

// The variables that made that list, as set: "CUDA_VISIBLE_DEVICES=\"1,0\"", or HIP's three.
std::string preset(const PlacementModel& m) {
  return m.hip ? amd_visibility_settings(m.rocr_visible, m.hip_visible, m.cuda.visible_devices)
               : describe_preset(m.cuda);
}

// What to change for another list.
const char* preset_variables(const PlacementModel& m) {
  return m.hip ? "ROCR_, HIP_ or CUDA_VISIBLE_DEVICES" : "CUDA_VISIBLE_DEVICES";
}

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
            request + " -- ...` or eval \"$(gpusel resolve --gpu " + request + " --format env)\"",
        about(Subject::GpuRequest, {{"request", request}, {"reason", "not-a-list"}}));
  }
  return std::move(r.gpus);
}

// GPUSEL_GPU is this rank's own when gpusel run set it: the entry of GPUSEL_GPUS at this rank,
// one entry per rank of the one launcher (LOCAL_RANK) that started the process.
bool own_gpuselgpu(const PlacementModel& m, const std::string& one, const LocalRank& rank) {
  const auto list = var(m.vars, "GPUSEL_GPUS");
  if (!list || !rank.levels.empty() || rank.variable != "LOCAL_RANK") return false;
  try {
    const std::vector<GpuEntry> entries = worker_gpus(read_gpu_request(*list, false));
    if (!rank.local_size || static_cast<std::size_t>(*rank.local_size) != entries.size() ||
        static_cast<std::size_t>(rank.rank) >= entries.size()) {
      return false;
    }
    return same_entry(entries[static_cast<std::size_t>(rank.rank)].text, parse_single_gpu(one));
  } catch (const Error&) {
    return false;
  }
}

// The entry `which` of GPUSEL_GPU or GPUSEL_GPUS as published: a UUID as written, an index as
// resolve_gpus gave it (within the preset).
std::optional<std::string> published(const PlacementModel& m, PlacementVerdict& v,
                                     const std::string& variable, const std::string& value,
                                     const std::vector<GpuEntry>& entries, std::size_t which) {
  if (entries[which].is_uuid()) return entries[which].text;
  if (!m.resolve_error.empty() || which >= m.resolved.size()) {
    refuse(v, variable == "GPUSEL_GPU" ? "gpusel-gpu" : "gpusel-gpus",
           variable + "=" + quote_value(value) + " does not resolve here: " +
               (m.resolve_error.empty() ? std::string("it was not resolved") : m.resolve_error),
           "resolve it on this node, within the job's GPUs: eval \"$(gpusel resolve --gpu SPEC "
           "--format env)\"",
           naming(m.resolve_problem, variable, value));
    return std::nullopt;
  }
  return m.resolved[which];
}

void from_gpusel_gpu(const PlacementModel& m, const std::string& one, PlacementVerdict& v) {
  std::vector<GpuEntry> entry;
  try {
    entry = worker_gpus(read_single_gpu(one));
  } catch (const Error& e) {
    refuse(v, "gpusel-gpu", worker_variable_message("GPUSEL_GPU", one, e.text()),
           "unset GPUSEL_GPU (gpusel run sets it per rank), or give it one GPU",
           naming(e.problem(), "GPUSEL_GPU", one));
    return;
  }
  const std::optional<LocalRank>& rank = v.rank;
  if (rank && rank->local_size && *rank->local_size > 1 && !v.share &&
      !own_gpuselgpu(m, one, *rank)) {
    refuse(v, "gpusel-gpu-shared",
           "GPUSEL_GPU=" + quote_value(one) + " names one GPU, and " + ranks_text(*rank) +
               " (this is " + rank->variable + "=" + std::to_string(rank->rank) +
               "): every one of them would bind that GPU. GPUSEL_GPU was inherited from an "
               "outer job (a job script's export, or gpusel run around another launcher)",
           "give each rank its own GPU: set GPUSEL_GPUS instead (eval \"$(gpusel resolve --gpu "
           "SPEC --format env)\"), or let gpusel run start the ranks; GPUSEL_SHARE=1 shares the "
           "GPU on purpose");
    return;
  }
  v.source = AssignmentSource::GpuselGpu;
  v.entry = published(m, v, "GPUSEL_GPU", one, entry, 0);
}

// True when `uuid` (a device CUDA shows) is the GPU an entry names: equal, or the entry a prefix.
bool names(const std::string& entry, const std::string& uuid) {
  return starts_with_ci(uuid, entry);
}

// No local rank counts: the one listed GPU this process can see is its own (srun --gpus-per-task
// gives each task one of them); several or none cannot be told apart.
void listed_gpu_seen_here(const PlacementModel& m, const std::string& list,
                          const std::vector<GpuEntry>& entries, PlacementVerdict& v) {
  bool per_task = false;
  for (const RankCandidate& c : m.launchers.candidates)
    per_task = per_task || (c.variable == "SLURM_LOCALID" && m.launchers.slurm_gpus_per_task);
  const std::string shown = "GPUSEL_GPUS=" + quote_value(list);
  const std::string no_rank =
      per_task ? "srun --gpus-per-task gave this task GPUs of its own, so SLURM_LOCALID does not "
                 "pick among the entries"
               : "no local rank is set (" + launcher_names() + ")";
  const std::string remedy =
      "start one worker per listed GPU with gpusel run, torchrun, srun or mpirun, give each task "
      "one GPU of the list (srun --gpus-per-task=1), or " +
      reader_text("pass --gpu", "publish the GPU first (set_assigned_gpu)");
  if (!m.visible) {
    refuse(v, "gpusel-gpus-no-rank", shown + " is set but " + no_rank, remedy);
    return;
  }
  if (!m.resolve_error.empty()) {  // indices that do not resolve here: that is the problem
    published(m, v, "GPUSEL_GPUS", list, entries, 0);
    return;
  }
  std::vector<std::size_t> seen;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const std::string text =
        entries[i].is_uuid() ? entries[i].text : (i < m.resolved.size() ? m.resolved[i] : "");
    if (!is_gpu_uuid(text)) continue;  // an index NVML could not place: never guessed
    for (const std::string& d : *m.visible) {
      if (names(text, d)) {
        seen.push_back(i);
        break;
      }
    }
  }
  const std::string visible = std::to_string(m.visible->size()) + " visible (" + preset(m) + ")";
  if (seen.size() == 1) {
    v.source = AssignmentSource::GpuselGpus;
    v.entry =
        entries[seen.front()].is_uuid() ? entries[seen.front()].text : m.resolved[seen.front()];
    return;
  }
  if (seen.empty()) {
    refuse(v, "gpusel-gpus-not-here",
           shown + " lists " + std::to_string(entries.size()) +
               (entries.size() == 1 ? " GPU, " : " GPUs, ") + no_rank +
               ", and none of them is among the devices " + runtime(m) +
               " shows this process: " + visible,
           "list GPUs of this node that this process may use: resolve GPUSEL_GPUS on each node, "
           "within its own job GPUs (eval \"$(gpusel resolve --gpu SPEC --format env)\")");
    return;
  }
  refuse(v, "gpusel-gpus-no-rank",
         shown + " lists " + std::to_string(entries.size()) + " GPUs, " +
             std::to_string(seen.size()) + " of them visible here, and " + no_rank +
             ": this process cannot tell which is its own",
         remedy);
}

void from_gpusel_gpus(const PlacementModel& m, const std::string& list, PlacementVerdict& v) {
  std::vector<GpuEntry> entries;
  try {
    entries = worker_gpus(read_gpu_request(list, false));
  } catch (const Error& e) {
    refuse(v, "gpusel-gpus", worker_variable_message("GPUSEL_GPUS", list, e.text()),
           "set it with eval \"$(gpusel resolve --gpu SPEC --format env)\"",
           naming(e.problem(), "GPUSEL_GPUS", list));
    return;
  }
  const std::string shown = "GPUSEL_GPUS=" + quote_value(list);
  if (!v.rank) {
    listed_gpu_seen_here(m, list, entries, v);
    return;
  }
  const LocalRank& rank = *v.rank;
  if (rank.local_size && static_cast<std::size_t>(*rank.local_size) != entries.size()) {
    refuse(v, "gpusel-gpus-count",
           ranks_text(rank) + ", but " + shown + " lists " + std::to_string(entries.size()) +
               (entries.size() == 1 ? " GPU" : " GPUs"),
           "start as many workers per node as GPUs listed, one GPU each");
    return;
  }
  if (static_cast<std::size_t>(rank.rank) >= entries.size()) {
    refuse(v, "gpusel-gpus-rank",
           rank.variable + "=" + std::to_string(rank.rank) + " is beyond " + shown + " (" +
               std::to_string(entries.size()) + " entries)",
           "start at most one worker per listed GPU, or list more GPUs");
    return;
  }
  v.source = AssignmentSource::GpuselGpus;
  v.entry = published(m, v, "GPUSEL_GPUS", list, entries, static_cast<std::size_t>(rank.rank));
}

// A UUID this process cannot see: another node's, or one hidden by the preset.
void not_visible(const PlacementModel& m, const std::string& uuid, PlacementVerdict& v) {
  std::string seen;
  for (const std::string& d : *m.visible) seen += (seen.empty() ? "" : ", ") + d;
  bool on_machine = !m.nvml;  // unknown: say nothing of other machines
  if (m.nvml) {
    for (const GpuInfo& g : *m.nvml) {
      on_machine = on_machine || names(uuid, g.uuid);
      for (const MigDevice& mig : g.migs) on_machine = on_machine || names(uuid, mig.uuid);
    }
  }
  const auto node = var(m.vars, "SLURMD_NODENAME");
  if (!on_machine) {
    refuse(v, "gpu-on-another-node",
           "GPU " + uuid + " is not a GPU of this machine" +
               (node ? " (Slurm node " + quote_value(*node) + ")" : std::string()) +
               ": NVML here lists no such GPU, so it is another node's (a GPUSEL_GPU or "
               "GPUSEL_GPUS resolved on one node and carried to others)",
           "resolve GPUSEL_GPUS on each node, in a step that runs there (srun ... sh -c 'eval "
           "\"$(gpusel resolve --gpu SPEC --format env)\"; exec ./worker'), or name GPUs by "
           "index, which each node reads as its own",
           about(Subject::Gpu, {{"gpu", uuid}, {"reason", "not-on-this-machine"}}));
    return;
  }
  refuse(v, "gpu-not-visible",
         "GPU " + uuid + " is not visible to " + runtime(m) + " in this process (" + preset(m) +
             "; visible: " + (seen.empty() ? "none" : seen) + ")",
         std::string("give the worker a GPU from that list, or change ") + preset_variables(m),
         about(Subject::Gpu,
               {{"gpu", uuid}, {"reason", m.hip ? "not-visible-to-hip" : "not-visible-to-cuda"}}));
}

// The published entry among CUDA's devices.
void place_entry(const PlacementModel& m, const std::string& entry, PlacementVerdict& v) {
  const std::vector<std::string>& devices = *m.visible;
  if (!is_gpu_uuid(entry)) {
    const std::optional<std::uint64_t> n = read_decimal(entry, 999999);
    if (n && *n < devices.size()) {
      v.ordinal = static_cast<int>(*n);
      return;
    }
    refuse(v, "ordinal-out-of-range",
           std::string("cannot use ") + runtime(m) + " device " + entry + ": " +
               std::to_string(devices.size()) + " visible (" + preset(m) + ")",
           reader_text("run `gpusel list` to see them",
                       "gpusel_list_gpus (or `gpusel list`) shows them"),
           about(Subject::GpuEntry, {{"entry", entry}, {"reason", "out-of-range"}}));
    return;
  }
  std::vector<int> hits;
  for (std::size_t i = 0; i < devices.size(); ++i) {
    if (names(entry, devices[i])) hits.push_back(static_cast<int>(i));
  }
  if (hits.size() == 1) {
    v.ordinal = hits.front();
    return;
  }
  if (hits.empty()) {
    not_visible(m, entry, v);
    return;
  }
  std::string matching;
  for (int i : hits)
    matching += (matching.empty() ? "" : ", ") + devices[static_cast<std::size_t>(i)];
  refuse(v, "gpu-prefix",
         "GPU " + entry + " is a prefix of " + std::to_string(hits.size()) + " devices " +
             runtime(m) + " sees here (" + matching + ")",
         "give enough characters to name one",
         about(Subject::Gpu, {{"gpu", entry}, {"reason", "ambiguous-prefix"}}));
}

// Steps 4 to 6 of the rule: a launcher's local rank over several visible devices, the only
// visible device, or the caller's default.
void place_by_launcher(const PlacementModel& m, int default_ordinal, PlacementVerdict& v) {
  const std::size_t devices = m.visible->size();
  const std::string settings = preset(m);
  const std::string sees = std::string(runtime(m)) + " sees ";
  const std::optional<LocalRank>& rank = v.rank;
  if (rank && devices > 1) {
    if (rank->local_size && static_cast<std::size_t>(*rank->local_size) > devices && !v.share) {
      refuse(v, "ranks-share-gpus",
             ranks_text(*rank) + ", but " + sees + std::to_string(devices) + " devices here (" +
                 settings + "): ranks would share GPUs",
             "give each rank its GPU (gpusel run --gpu, GPUSEL_GPUS), start fewer ranks, or set "
             "GPUSEL_SHARE=1 to share on purpose");
      return;
    }
    v.source = AssignmentSource::Launcher;
    if (static_cast<std::size_t>(rank->rank) >= devices && v.share) {
      v.ordinal = rank->rank % static_cast<int>(devices);  // several ranks per GPU on purpose
      return;
    }
    if (static_cast<std::size_t>(rank->rank) >= devices) {
      refuse(v, "rank-past-devices",
             (rank->levels.empty() ? rank->variable + "=" + std::to_string(rank->rank)
                                   : "this is process " + std::to_string(rank->rank) + " of " +
                                         rank->describe_size()) +
                 " but " + sees + "only " + std::to_string(devices) + " devices here (" + settings +
                 ")",
             "start at most one rank per visible GPU, or set GPUSEL_GPUS");
      return;
    }
    v.ordinal = rank->rank;
    return;
  }
  if (devices == 1) {
    v.source = AssignmentSource::Single;
    v.ordinal = 0;
    return;
  }
  if (!rank && devices > 1) {
    // Several ranks, and nothing to tell them apart: never device 0 for everyone.
    for (const char* size : {"LOCAL_WORLD_SIZE", "WORLD_SIZE"}) {
      const auto value = var(m.vars, size);
      const auto n = value ? read_rank_number(*value) : std::nullopt;
      if (n && *n > 1) {
        refuse(v, "ranks-untold",
               std::string(size) + "=" + quote_value(*value) +
                   " says several processes run, but no local-rank variable tells this one apart "
                   "(" +
                   launcher_names() + ")",
               "set GPUSEL_GPU, or GPUSEL_GPUS and a local rank, or " +
                   reader_text("pass --gpu", "publish the GPU first (set_assigned_gpu)"));
        return;
      }
    }
  }
  v.source = AssignmentSource::Default;
  v.rank.reset();
  if (default_ordinal >= 0 && static_cast<std::size_t>(default_ordinal) < devices) {
    v.ordinal = default_ordinal;
    return;
  }
  if (m.hip && devices == 0) {
    refuse(v, "hip-no-device",
           "HIP shows this process no device (" + settings +
               "): the variables leave HIP programs no GPU here",
           "`gpusel doctor` says which of them hides the GPUs; unset them, or set them to GPUs "
           "this machine has (`gpusel list`)");
    return;
  }
  refuse(v, "ordinal-out-of-range",
         std::string("cannot use ") + runtime(m) + " device " + std::to_string(default_ordinal) +
             ": " + std::to_string(devices) + " visible (" + settings + ")",
         reader_text("run `gpusel list` to see them",
                     "gpusel_list_gpus (or `gpusel list`) shows them"));
}

// A preset of more entries than CUDA shows devices: the driver stopped reading at an entry it
// could not use and dropped the rest, so the process would run on what is left of the list.
void check_truncated(const PlacementModel& m, PlacementVerdict& v) {
  if (!m.visible || m.visible->empty() || !m.cuda.visible_devices) return;
  const std::vector<std::string_view> entries = split_commas(*m.cuda.visible_devices);
  for (std::string_view e : entries) {
    if (starts_with_ci(trim_blanks(e), "MIG-")) return;  // MIG devices: counted otherwise
  }
  if (m.nvml) {
    for (const GpuInfo& g : *m.nvml) {
      if (g.mig_enabled) return;
    }
  }
  if (m.visible->size() >= entries.size()) return;
  refuse(v, "visible-truncated",
         "CUDA_VISIBLE_DEVICES=" + quote_value(*m.cuda.visible_devices) + " names " +
             std::to_string(entries.size()) + " devices, but CUDA shows this process only " +
             std::to_string(m.visible->size()) +
             ": the driver stops reading at the first entry it cannot use (an index past the last "
             "GPU, a negative number, a UUID of another machine, a typo) and drops the rest",
         "remove the entries CUDA cannot use; `gpusel list` shows the GPUs");
}

// The same in a HIP program: HIP reads HIP_VISIBLE_DEVICES (CUDA_VISIBLE_DEVICES where that is
// unset or empty) within what ROCR_VISIBLE_DEVICES leaves, and ROCr and HIP alike stop at the
// first entry they cannot use (HIP also drops a repeated one). The innermost variable set is the
// list the process runs on, so its entries are counted against HIP's devices.
void check_truncated_hip(const PlacementModel& m, PlacementVerdict& v) {
  if (!m.visible || m.visible->empty()) return;
  const std::pair<const char*, const std::optional<std::string>*> layers[] = {
      {"HIP_VISIBLE_DEVICES", &m.hip_visible},
      {"CUDA_VISIBLE_DEVICES", &m.cuda.visible_devices},
      {"ROCR_VISIBLE_DEVICES", &m.rocr_visible}};
  for (const auto& [name, value] : layers) {
    if (!*value || trim_blanks(**value).empty()) continue;
    // A comma last ends the list and drops nothing ("0,1," is two entries to ROCr and HIP alike).
    std::vector<std::string_view> list = split_commas(**value);
    while (!list.empty() && trim_blanks(list.back()).empty()) list.pop_back();
    const std::size_t entries = list.size();
    if (m.visible->size() >= entries) return;
    const bool rocr = std::string_view(name) == "ROCR_VISIBLE_DEVICES";
    refuse(v, "visible-truncated",
           std::string(name) + "=" + quote_value(**value) + " names " + std::to_string(entries) +
               " devices, but HIP shows this process only " + std::to_string(m.visible->size()) +
               " (" + preset(m) + "): " + (rocr ? "ROCr" : "HIP") +
               " stops reading at the first entry it cannot use (" +
               (rocr ? "an index past the last GPU, an id of no GPU here"
                     : "an index past the GPUs ROCR_VISIBLE_DEVICES leaves, a negative number") +
               ", a typo) and drops the rest" + (rocr ? "" : "; a repeated entry is dropped too"),
           "remove the entries " + std::string(rocr ? "ROCr" : "HIP") +
               " cannot use; `gpusel list` shows the GPUs and their HIP numbers");
    return;
  }
}

}  // namespace

Error placement_error(const PlacementProblem& p) {
  Problem data = p.data;
  data.fields.push_back({"check", p.id});
  const bool input = data.code == ErrorCode::None || data.code == ErrorCode::BadInput;
  return input ? bad_input(p.message + "; " + p.remedy, std::move(data))
               : failure(p.message + "; " + p.remedy, std::move(data));
}

std::string launcher_names() {
  std::string names;
  for (const RankVariable& v : kRankVariables)
    names += (names.empty() ? "" : ", ") + std::string(v.name);
  return names;
}

bool sharing_in(const std::map<std::string, std::string>& vars) {
  if (const auto share = var(vars, "GPUSEL_SHARE"); share && !share->empty()) {
    const std::string_view value = trim_blanks(*share);
    if (value == "1") return true;
    if (value != "0") {
      throw bad_input(
          "GPUSEL_SHARE=" + quote_value(*share) +
              " is neither 1 (share this process's GPU with others on purpose) nor 0",
          about(Subject::LaunchVariable,
                {{"variable", "GPUSEL_SHARE"}, {"value", *share}, {"reason", "not-0-or-1"}}));
    }
  }
  // srun --ntasks-per-gpu: several tasks per GPU, by request (Slurm 22.05 tells the tasks
  // SLURM_NTASKS_PER_TRES; SLURM_NTASKS_PER_GPU where it is exported).
  for (const char* name : {"SLURM_NTASKS_PER_GPU", "SLURM_NTASKS_PER_TRES"}) {
    if (const auto n = var(vars, name); n && !n->empty()) return true;
  }
  return false;
}

std::string worker_variable_message(const std::string& variable, const std::string& value,
                                    const std::string& parse_error) {
  const std::string_view inner = trim_blanks(value);
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

PlacementVerdict analyse_placement(const PlacementModel& m, int default_ordinal) {
  PlacementVerdict v;
  try {
    v.rank = choose_local_rank(m.launchers);
  } catch (const Error& e) {
    refuse(v, "local-rank", e.text(),
           "unset the variable an outer launcher left behind, or give each process its GPU "
           "(GPUSEL_GPU, GPUSEL_GPUS, gpusel run)",
           e.problem());
    return v;
  }
  try {
    v.share = sharing_in(m.vars);
  } catch (const Error& e) {
    refuse(v, "gpusel-share", e.text(), "set GPUSEL_SHARE=1 or unset it", e.problem());
    return v;
  }
  if (const auto problem = m.hip ? std::nullopt : uuid_case_problem(m.cuda)) {
    refuse(v, "cuda-visible-case", *problem,
           "write UUIDs in CUDA_VISIBLE_DEVICES as nvidia-smi -L prints them (GPU-..., MIG-...)",
           about(Subject::VisibleDevices, {{"variable", "CUDA_VISIBLE_DEVICES"},
                                           {"value", m.cuda.visible_devices.value_or("")},
                                           {"reason", "uuid-case"}}));
    return v;
  }
  if (m.hip) {
    check_truncated_hip(m, v);
  } else {
    check_truncated(m, v);
  }
  if (!v.problems.empty()) return v;
  if (const auto one = var(m.vars, "GPUSEL_GPU")) {
    from_gpusel_gpu(m, *one, v);
  } else if (const auto list = var(m.vars, "GPUSEL_GPUS")) {
    from_gpusel_gpus(m, *list, v);
  }
  if (!v.problems.empty() || !m.visible) return v;
  if (v.entry) {
    place_entry(m, *v.entry, v);
  } else {
    place_by_launcher(m, default_ordinal, v);
  }
  if (!v.problems.empty() || !v.ordinal) return v;
  v.uuid = (*m.visible)[static_cast<std::size_t>(*v.ordinal)];
  if (m.hip) return v;  // Slurm's checks read CUDA_VISIBLE_DEVICES and NVML's numbers: CUDA's
  if (auto p = slurm_placement_problem(m, *v.uuid)) {
    v.problems.push_back(std::move(*p));
  } else if (auto w = slurm_exposure_warning(m)) {
    v.warnings.push_back(std::move(*w));
  }
  return v;
}

}  // namespace gpusel::detail
