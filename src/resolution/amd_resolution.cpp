// A --gpu request on a machine whose GPUs are AMD's (no NVIDIA driver; ROCm SMI monitors them):
// indices are rocm-smi's, unique ids (GPU- and 16 hex digits, as ROCr writes them) and their
// prefixes name one GPU each, `all` is every GPU with an id. Under ROCR_, HIP_ or
// CUDA_VISIBLE_DEVICES the GPUs a HIP program would see here are the quota, read by ROCm's own
// rules (src/core/amd_visible.cpp): indices are positions in it (HIP's ordinals in the job), ids
// must be in it (docs/amd.md).
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>

#include "amd_visible.hpp"
#include "env.hpp"
#include "gpusel/amd.hpp"
#include "gpusel/error.hpp"
#include "gpusel/resolution.hpp"
#include "gpusel_detail.hpp"

GPUSEL_BEGIN_NAMESPACE

namespace {

bool same_letters(char a, char b) {
  return std::toupper(static_cast<unsigned char>(a)) == std::toupper(static_cast<unsigned char>(b));
}

// Whether `entry` ("GPU-" and hex digits, any case) starts the id `id`, as ROCr compares them.
bool id_starts_with(const std::string& id, const std::string& entry) {
  return !id.empty() && entry.size() <= id.size() &&
         std::equal(entry.begin(), entry.end(), id.begin(), same_letters);
}

std::string index_range(std::size_t n) {
  return n == 1 ? "0" : "0 to " + std::to_string(n - 1);
}

std::string request_text(const GpuRequest& request) {
  std::string out;
  for (const std::string& t : request.texts()) out += (out.empty() ? "" : ",") + t;
  return out;
}

}  // namespace

namespace {

// The job's quota under ROCm's variables: the GPUs a HIP program started here would see, by id,
// in HIP's ordinal order (`preset` false: no variable set, no quota).
struct AmdQuota {
  bool preset = false;
  std::string settings;  // the three variables, for messages
  std::vector<std::string> ids;
};

// A render node ROCm cannot open for a reason other than its absence or the device cgroup: ROCm
// then starts no GPU at all in this process, so nothing may be placed.
void refuse_if_rocm_cannot_start(const std::string& asked, const AmdSnapshot& amd) {
  for (const AmdGpu& g : amd.gpus) {
    if (render_access(g) != RenderAccess::StopsRocm) continue;
    throw failure(
        asked + ": HIP programs cannot start here: ROCm opens every AMD GPU's render node, and " +
            g.render_node + " (" + g.id + ") cannot be opened (" + std::strerror(*g.render_error) +
            "); " + render_node_remedy(g),
        about(Subject::Gpu, {{"gpu", g.id},
                             {"render_node", g.render_node},
                             {"reason", "amd-render-node-unopenable"}}));
  }
}

// A GPU HIP programs here cannot use (its render node missing, or denied by the device cgroup):
// refused by name, never handed to a worker that would then find no GPU.
void refuse_if_unusable(const std::string& entry, const AmdGpu& g) {
  if (render_access(g) == RenderAccess::Usable) return;
  throw bad_input(
      "--gpu " + entry + ": that is " + g.id + ", whose render node " + g.render_node +
          (*g.render_error == ENOENT
               ? " does not exist here (a container given other GPUs?)"
               : " is denied to this process (" + std::string(std::strerror(*g.render_error)) +
                     ": the device cgroup)") +
          ", so HIP programs started here cannot use it; name a GPU they can (`gpusel list`: "
          "those with a HIP number)",
      about(Subject::GpuEntry, {{"entry", entry},
                                {"gpu", g.id},
                                {"render_node", g.render_node},
                                {"reason", "amd-gpu-not-usable-here"}}));
}

AmdQuota read_quota(const std::string& asked, const CudaEnv& env, const AmdSnapshot& amd) {
  refuse_if_rocm_cannot_start(asked, amd);
  const HipDevices here = hip_devices(env, amd);
  AmdQuota q{here.preset, here.settings, here.ids};
  if (!q.preset) return q;
  auto problem = [&](const char* reason) {
    const std::optional<std::string> rocr = detail::env_value("ROCR_VISIBLE_DEVICES");
    const std::optional<std::string> hip = detail::env_value("HIP_VISIBLE_DEVICES");
    const char* variable = rocr  ? "ROCR_VISIBLE_DEVICES"
                           : hip ? "HIP_VISIBLE_DEVICES"
                                 : "CUDA_VISIBLE_DEVICES";
    const std::optional<std::string>& value = rocr ? rocr : hip ? hip : env.visible_devices;
    return about(Subject::VisibleDevices,
                 {{"variable", variable}, {"value", value.value_or("")}, {"reason", reason}});
  };
  if (here.unknown == "amd-kfd-order-unknown") {
    throw bad_input(
        asked + ": this machine's GPUs are AMD's, and " + q.settings +
            " is set; reading that needs the GPUs' order in the kernel's KFD topology, and " +
            kfd_order_unknown_text(amd) +
            ", so gpusel places no worker under it: unset the variables and name the GPUs your "
            "job was given by unique id (`gpusel list` shows them)",
        problem("amd-kfd-order-unknown"));
  }
  if (here.unknown == "amd-rocr-empty-entry") {
    throw bad_input(asked + ": " + q.settings +
                        ": ROCR_VISIBLE_DEVICES has an empty entry, which makes every HIP "
                        "program abort at start; remove the empty entry (`gpusel doctor` "
                        "explains the variables)",
                    problem("amd-rocr-empty-entry"));
  }
  if (here.unknown == "amd-hip-version-dependent") {
    throw bad_input(asked + ": " + q.settings +
                        ": which GPUs HIP programs see under these depends on the HIP version "
                        "(an empty value, or unique ids in HIP_/CUDA_VISIBLE_DEVICES), so "
                        "gpusel cannot tell the job's GPUs; give indices, never an empty "
                        "value (`gpusel doctor` explains)",
                    problem("amd-hip-version-dependent"));
  }
  if (q.ids.empty()) {
    throw bad_input(asked + ": " + q.settings +
                        " leave HIP programs no GPU, so there is none to give; `gpusel doctor` "
                        "explains why, and what to set instead",
                    problem("amd-preset-hides-all"));
  }
  return q;
}

// The id of the GPU one index entry names: rocm-smi's index, or under a preset a position in the
// quota (HIP's ordinal in this job).
std::string by_index(const GpuEntry& e, const AmdQuota& q, const AmdSnapshot& amd) {
  if (q.preset) {
    if (e.index >= q.ids.size()) {
      const std::size_t n = q.ids.size();
      throw bad_input("--gpu " + e.text + ": under " + q.settings + " HIP programs see " +
                          std::to_string(n) + " GPU" + (n == 1 ? "" : "s") + " (" + index_range(n) +
                          "), so " + e.text +
                          " is none of them; give a position among those, or a unique id",
                      about(Subject::GpuEntry, {{"entry", e.text}, {"reason", "out-of-range"}}));
    }
    return q.ids[e.index];
  }
  const std::size_t n = amd.gpus.size();
  if (e.index >= n) {
    throw bad_input("--gpu " + e.text + ": no AMD GPU has rocm-smi index " + e.text +
                        " (this machine has " + std::to_string(n) + ": " + index_range(n) +
                        "); `gpusel list` shows them",
                    about(Subject::GpuEntry, {{"entry", e.text}, {"reason", "out-of-range"}}));
  }
  const AmdGpu& g = amd.gpus[e.index];
  if (g.id.empty()) {
    throw failure("--gpu " + e.text + ": ROCm SMI gives that AMD GPU no unique id (" + g.failure +
                      "), so no worker can be given it",
                  about(Subject::GpuEntry, {{"entry", e.text}, {"reason", "no-id"}}));
  }
  refuse_if_unusable(e.text, g);
  return g.id;
}

// The id of the one GPU whose id an id entry begins, which must be in the quota under a preset.
std::string by_id(const GpuEntry& e, const AmdQuota& q, const AmdSnapshot& amd) {
  std::vector<const AmdGpu*> matches;
  for (const AmdGpu& g : amd.gpus) {
    if (id_starts_with(g.id, e.text)) matches.push_back(&g);
  }
  if (matches.size() != 1) {
    const bool none = matches.empty();
    throw bad_input("--gpu " + e.text + ": " +
                        (none ? "no AMD GPU's unique id begins with " + e.text
                              : "the ids of " + std::to_string(matches.size()) +
                                    " AMD GPUs begin with " + e.text + "; give more of it") +
                        " (`gpusel list` shows each GPU's id: GPU- and 16 hex digits)",
                    about(Subject::GpuEntry,
                          {{"entry", e.text}, {"reason", none ? "no-match" : "ambiguous-prefix"}}));
  }
  const std::string& id = matches.front()->id;
  refuse_if_unusable(e.text, *matches.front());
  if (q.preset && std::find(q.ids.begin(), q.ids.end(), id) == q.ids.end()) {
    throw bad_input(
        "--gpu " + e.text + ": that is " + id + ", which " + q.settings +
            " hide from HIP programs here; name one of the job's GPUs (" +
            detail::join_entries(q.ids) + ")",
        about(Subject::GpuEntry, {{"entry", e.text}, {"gpu", id}, {"reason", "outside-preset"}}));
  }
  return id;
}

}  // namespace

std::string hip_settings(const CudaEnv& env) {
  return detail::amd_visibility_settings(detail::env_value("ROCR_VISIBLE_DEVICES"),
                                         detail::env_value("HIP_VISIBLE_DEVICES"),
                                         env.visible_devices);
}

HipDevices hip_devices(const CudaEnv& env, const AmdSnapshot& amd) {
  const std::optional<std::string> rocr = detail::env_value("ROCR_VISIBLE_DEVICES");
  const std::optional<std::string> hip = detail::env_value("HIP_VISIBLE_DEVICES");
  const std::optional<std::string>& cuda = env.visible_devices;
  HipDevices out;
  out.preset = rocr || hip || cuda;
  out.settings = hip_settings(env);
  const std::optional<std::vector<std::string>> kfd = kfd_order(amd);
  if (!kfd) {
    out.unknown = "amd-kfd-order-unknown";
    return out;
  }
  const detail::HipView view = detail::hip_view(*kfd, rocr, hip, cuda);
  if (view.aborts || view.version_dependent) {
    out.unknown = view.aborts ? "amd-rocr-empty-entry" : "amd-hip-version-dependent";
    return out;
  }
  for (std::size_t d : view.devices) out.ids.push_back((*kfd)[d]);
  return out;
}

std::vector<std::optional<int>> hip_ordinals(const HipDevices& here, const AmdSnapshot& amd) {
  std::vector<std::optional<int>> out(amd.gpus.size());
  if (!here.unknown.empty()) return out;
  for (std::size_t ord = 0; ord < here.ids.size(); ++ord) {
    for (std::size_t i = 0; i < amd.gpus.size(); ++i) {
      if (amd.gpus[i].id == here.ids[ord]) out[i] = static_cast<int>(ord);
    }
  }
  return out;
}

AmdChoice amd_choices(const std::string& asked, const CudaEnv& env, const AmdSnapshot& amd) {
  const AmdQuota quota = read_quota(asked, env, amd);
  AmdChoice c;
  c.preset = quota.preset;
  if (quota.preset) {
    c.ids = quota.ids;
  } else {
    for (const AmdGpu& g : amd.gpus) {
      if (!g.id.empty() && render_access(g) == RenderAccess::Usable) c.ids.push_back(g.id);
    }
  }
  c.note = {"amd-gpus",
            std::string("the GPUs are AMD's (ROCm SMI): ") +
                (quota.preset ? "under " + quota.settings +
                                    ", indices are positions among the GPUs HIP programs see "
                                    "here (`gpusel list`'s HIP column)"
                              : std::string("indices are rocm-smi's")) +
                ", and each worker is given its GPU by unique id in ROCR_VISIBLE_DEVICES"};
  return c;
}

Resolution resolve_on_amd(const GpuRequest& request, const CudaEnv& env, const AmdSnapshot& amd) {
  const std::string asked = "--gpu " + request_text(request);
  const AmdQuota quota = read_quota(asked, env, amd);
  if (request.kind == GpuRequest::Kind::Free) {
    // Picked by acquire_gpus (FreeLook), which reads the GPUs' usage; never here.
    throw failure(asked + ": free:N is picked by acquire_gpus, not resolve_on_amd",
                  about(Subject::GpuRequest, {{"request", request_text(request)}}));
  }
  Resolution r;
  r.resolved = true;
  r.vendor = "amd";
  r.machine = amd_gpu_records(amd);
  const AmdChoice choice = amd_choices(asked, env, amd);
  r.notes.push_back(choice.note);
  if (request.kind == GpuRequest::Kind::All) {
    r.gpus = choice.ids;
    if (r.gpus.empty()) {
      throw failure(asked + ": ROCm SMI gives no AMD GPU a unique id, so none can be named",
                    about(Subject::GpuRequest, {{"request", "all"}, {"reason", "no-ids"}}));
    }
    return r;
  }
  for (const GpuEntry& e : request.gpus)
    r.gpus.push_back(e.is_uuid() ? by_id(e, quota, amd) : by_index(e, quota, amd));
  for (std::size_t i = 0; i < r.gpus.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      if (r.gpus[i] != r.gpus[j]) continue;
      throw bad_input(detail::reader_text("--gpu entries ", "GPU entries ") +
                          detail::quote_value(request.gpus[j].text) + " and " +
                          detail::quote_value(request.gpus[i].text) + " both name GPU " +
                          r.gpus[i] + "; each rank needs a GPU of its own",
                      about(Subject::GpuEntry, {{"entry", request.gpus[i].text},
                                                {"reason", "same-gpu-twice"},
                                                {"gpu", r.gpus[i]}}));
    }
  }
  return r;
}

std::optional<Resolution> resolve_amd_beside_nvidia(const GpuRequest& request, const CudaEnv& env,
                                                    const std::vector<GpuInfo>& nvidia) {
  if (request.kind != GpuRequest::Kind::Gpus) return std::nullopt;
  const AmdSnapshot amd = query_rocm_smi();
  if (!amd.available || amd.gpus.empty()) return std::nullopt;
  const GpuEntry* amd_entry = nullptr;  // the first entry naming an AMD GPU, and one that does not
  const GpuEntry* nvidia_entry = nullptr;
  for (const GpuEntry& e : request.gpus) {
    const bool on_amd =
        e.is_uuid() && std::any_of(amd.gpus.begin(), amd.gpus.end(),
                                   [&](const AmdGpu& g) { return id_starts_with(g.id, e.text); });
    const bool on_nvidia =
        !e.is_uuid() || std::any_of(nvidia.begin(), nvidia.end(), [&](const GpuInfo& g) {
          return id_starts_with(g.uuid, e.text);
        });
    if (on_amd && on_nvidia) {
      throw bad_input(
          detail::gpu_entry_words() + " " + detail::quote_value(e.text) +
              " starts the UUID of an NVIDIA GPU and the id of an AMD GPU; give enough "
              "characters to name one (`gpusel list` shows both makers' GPUs)",
          about(Subject::GpuEntry, {{"entry", e.text}, {"reason", "ambiguous-prefix"}}));
    }
    if (!on_amd && !on_nvidia) {
      throw bad_input(detail::gpu_entry_words() + " " + detail::quote_value(e.text) +
                          " matches no GPU on this machine (" + std::to_string(nvidia.size()) +
                          " NVIDIA, " + std::to_string(amd.gpus.size()) +
                          " AMD); check for a typo, run `gpusel list` to see both makers' GPUs",
                      about(Subject::GpuEntry, {{"entry", e.text}, {"reason", "no-match"}}));
    }
    if (on_amd && amd_entry == nullptr) amd_entry = &e;
    if (on_nvidia && nvidia_entry == nullptr) nvidia_entry = &e;
  }
  if (amd_entry == nullptr) return std::nullopt;
  if (nvidia_entry != nullptr) {
    throw bad_input(
        "--gpu " + request_text(request) +
            " names GPUs of two makers: " + detail::quote_value(amd_entry->text) +
            " is an AMD GPU and " + detail::quote_value(nvidia_entry->text) + " an NVIDIA " +
            (nvidia_entry->is_uuid() ? "GPU" : "index (nvidia-smi's)") +
            "; one job's GPUs are one maker's (a worker runs on CUDA or on HIP): name NVIDIA "
            "GPUs by nvidia-smi index or UUID, or AMD GPUs by their unique id, in separate jobs "
            "(`gpusel list` shows both)",
        about(Subject::GpuRequest, {{"request", request_text(request)}, {"reason", "two-makers"}}));
  }
  Resolution r = resolve_on_amd(request, env, amd);
  for (Note& n : r.notes) {
    if (n.code != "amd-gpus") continue;
    n.text =
        "this machine has NVIDIA and AMD GPUs: `--gpu N` and free:N count nvidia-smi's; "
        "these are AMD GPUs named by unique id, and each worker is given its GPU by unique "
        "id in ROCR_VISIBLE_DEVICES";
  }
  return r;
}

void refuse_prefix_of_both_makers(const GpuRequest& request) {
  if (request.kind != GpuRequest::Kind::Gpus) return;
  // Only a prefix of at most 12 characters without a dash can start an NVIDIA UUID and an AMD id
  // ("GPU-" and 16 hex digits). Such entries alone ask ROCm SMI.
  auto short_enough = [](const GpuEntry& e) {
    return e.is_uuid() && detail::amd_id_form(e.text) && e.text.size() <= 12;
  };
  if (std::none_of(request.gpus.begin(), request.gpus.end(), short_enough)) return;
  const AmdSnapshot amd = query_rocm_smi();
  if (!amd.available) return;
  for (const GpuEntry& e : request.gpus) {
    if (!short_enough(e)) continue;
    for (const AmdGpu& g : amd.gpus) {
      if (!id_starts_with(g.id, e.text)) continue;
      throw bad_input(
          detail::gpu_entry_words() + " " + detail::quote_value(e.text) +
              " starts the UUID of an NVIDIA GPU and the id of an AMD GPU (" + g.id +
              "); give enough characters to name one (`gpusel list` shows both makers' GPUs)",
          about(Subject::GpuEntry, {{"entry", e.text}, {"reason", "ambiguous-prefix"}}));
    }
  }
}

GPUSEL_END_NAMESPACE
