// A parent's resolution of --gpu entries: NVML once, the CUDA probe only where NVML cannot tell
// CUDA's order or is unavailable, free:N through the picker; and the CUDA environment it reads.
#include "gpusel/resolution.hpp"

#include <algorithm>
#include <cstdlib>

#include "env.hpp"
#include "gpusel/acquire.hpp"
#include "gpusel/amd.hpp"
#include "gpusel/error.hpp"
#include "gpusel/nvml.hpp"
#include "gpusel/probe.hpp"
#include "gpusel/resolution.hpp"
#include "gpusel/spec.hpp"
#include "gpusel_detail.hpp"
#include "nvml_index.hpp"
#include "resolve_detail.hpp"

GPUSEL_BEGIN_NAMESPACE

CudaEnv cuda_env_from_environment() {
  // Through detail::env_value: on Windows the C runtime's copy of the environment can be stale.
  return CudaEnv{gpusel::detail::env_value("CUDA_VISIBLE_DEVICES"),
                 gpusel::detail::env_value("CUDA_DEVICE_ORDER")};
}

namespace {

// The entries as the user wrote them (canonical), comma-separated, for messages.
std::string join_texts(const std::vector<GpuEntry>& entries) {
  std::string out;
  for (const GpuEntry& e : entries) out += (out.empty() ? "" : ",") + e.text;
  return out;
}

// NVML is unavailable: nvidia-smi indices are PCI bus order, which CUDA's own enumeration (without
// CUDA_VISIBLE_DEVICES) gives too. UUID entries need no mapping: CUDA matches them at bind.
// `probed`: an unfiltered probe made already (for `all`), else one is made here.
Resolution resolve_through_cuda(const std::vector<GpuEntry>& entries, const CudaEnv& env,
                                const std::string& probe_helper, const std::string& nvml_reason,
                                const Problem& nvml_problem, const ProbeResult* probed = nullptr) {
  Resolution r;
  r.reason = nvml_reason;
  r.nvml_problem = nvml_problem;
  if (entries.empty() || entries.front().is_uuid()) {
    for (const GpuEntry& e : entries) r.gpus.push_back(e.text);
    return r;
  }
  const ProbeResult probe = probed != nullptr ? *probed : probe_cuda(probe_helper, true);
  if (!probe.ok) {
    throw failure(
        detail::gpu_request_words() + " " + join_texts(entries) +
            ": nvidia-smi indices cannot be placed: NVML is unavailable (" + nvml_reason +
            ") and asking CUDA failed too (" + probe.reason +
            detail::reader_text("); give --gpu as GPU UUIDs", "); give the GPUs as UUIDs") +
            ", or fix the NVIDIA driver installation",
        probe.problem);
  }
  r.machine = detail::gpus_from_cuda(probe.devices);
  const std::optional<std::vector<int>> order = detail::cuda_order_from(r.machine, probe.devices);
  if (!order) throw failure("CUDA's enumeration of the GPUs could not be read (a MIG device?)");
  r.gpus = resolve_entries(entries, r.machine, env, &*order);
  r.resolved = true;
  r.through_cuda = true;
  r.probed = true;
  r.notes.push_back({"nvml-unavailable",
                     "NVML is unavailable (" + nvml_reason +
                         "); nvidia-smi indices were mapped through CUDA's own device list in PCI "
                         "bus order"});
  return r;
}

// "--gpu 2,3 counts within CUDA_VISIBLE_DEVICES="4,5,6,7": nvidia-smi 6,7", when a preset
// renumbers index entries. `picked`: each entry's position in `gpus`.
void note_renumbering(Resolution& r, const std::vector<GpuEntry>& entries, const CudaEnv& env,
                      const std::vector<GpuInfo>& gpus, const std::vector<std::size_t>& picked) {
  if (!env.visible_devices || entries.empty() || entries.front().is_uuid()) return;
  std::string smi;
  bool renumbered = false;
  for (std::size_t i = 0; i < picked.size(); ++i) {
    const unsigned index = gpus[picked[i]].index;
    smi += (smi.empty() ? "" : ",") + std::to_string(index);
    renumbered = renumbered || entries[i].index != index;
  }
  if (renumbered) {
    r.notes.push_back({"preset-renumbers", detail::gpu_request_words() + " " + join_texts(entries) +
                                               " counts within " + detail::describe_preset(env) +
                                               ": nvidia-smi " + smi});
  }
}

// Without a preset the GPUs were read by their UUIDs alone: the picked GPUs' MIG modes are read
// now and the entries resolved again with them (a MIG-enabled GPU is refused). Where the first
// pass refuses the entries, every GPU is read, so the refusal is the one the whole machine gives.
// `broken`: why NVML turned out unusable (then nothing is returned).
std::vector<std::size_t> positions_by_uuid(const std::vector<GpuEntry>& entries,
                                           std::vector<GpuInfo>& gpus, const CudaEnv& env,
                                           std::optional<Error>& broken) {
  std::vector<std::size_t> picked;
  try {
    picked = detail::resolve_positions(entries, gpus, env, nullptr);
  } catch (const Error&) {
    picked.clear();
    for (std::size_t g = 0; g < gpus.size(); ++g) picked.push_back(g);
  }
  broken = detail::nvml_complete(gpus, picked, detail::NvmlPart::Mig);
  if (broken) return {};
  return detail::resolve_positions(entries, gpus, env, nullptr);
}

// The entries `all` stands for on the GPUs of `snap` (read to NvmlDetail::Model): without
// CUDA_VISIBLE_DEVICES, the nvidia-smi index of each GPU NVML lists, failed and MIG-enabled GPUs
// left out (and named in `notes`); under a preset, the positions 0..n-1 of the GPUs it exposes (MIG
// instances not counted); without NVML, CUDA's device count, from an unfiltered probe kept in
// `probe` for the resolution. Throws Error(BadInput) when there is no GPU to use, Error(Failure)
// when the GPUs cannot be told.
std::vector<std::size_t> all_indices(const NvmlSnapshot& snap, const CudaEnv& env,
                                     const std::string& probe_helper, std::vector<Note>& notes,
                                     std::optional<ProbeResult>& probe) {
  std::size_t count = 0;
  std::vector<std::size_t> entries;
  if (!snap.available) {
    if (env.visible_devices) {
      throw failure(
          detail::gpu_request_words() + " all: NVML is unavailable (" + snap.reason + ") and " +
              detail::describe_preset(env) +
              " is set, so gpusel cannot tell which GPUs it exposes; name the GPUs instead "
              "(indices count within CUDA_VISIBLE_DEVICES)",
          snap.problem);
    }
    probe = probe_cuda(probe_helper, true);
    if (!probe->ok) {
      throw failure(detail::gpu_request_words() + " all: NVML is unavailable (" + snap.reason +
                        ") and CUDA could not be asked for its devices either (" + probe->reason +
                        "); name the GPUs instead",
                    probe->problem);
    }
    count = detail::gpus_from_cuda(probe->devices).size();
  } else if (!env.visible_devices) {
    std::vector<std::string> left_out;
    for (const GpuInfo& g : snap.gpus) {
      if (g.failed()) {
        left_out.push_back("GPU " + std::to_string(g.index) + " (" + g.failure + ")");
      } else if (g.mig_enabled) {
        left_out.push_back("GPU " + std::to_string(g.index) + " (MIG mode)");
      } else {
        entries.push_back(g.index);
      }
    }
    if (!left_out.empty()) {
      std::string names;
      for (const std::string& n : left_out) names += (names.empty() ? "" : ", ") + n;
      notes.push_back({"all-leaves-out", detail::gpu_request_words() + " all leaves out " + names});
    }
  } else {
    const VisibleSet vs = model_visible(snap.gpus, env);
    if (vs.known) {
      count = static_cast<std::size_t>(std::count_if(
          vs.devices.begin(), vs.devices.end(), [](const VisibleDevice& d) { return d.mig < 0; }));
    } else if (!vs.duplicate) {
      count = vs.used_entries;
    }
  }
  if (entries.empty()) {
    for (std::size_t k = 0; k < count; ++k) entries.push_back(k);
  }
  if (entries.empty()) {
    throw bad_input(
        detail::gpu_request_words() + " all: no GPU to run on here (" +
            detail::describe_preset(env) + (snap.available ? "" : "; NVML: " + snap.reason) +
            detail::reader_text("); run `gpusel list` to see the GPUs and what CUDA exposes",
                                "); gpusel_list_gpus (or `gpusel list`) shows the GPUs "
                                "and what CUDA exposes"),
        about(Subject::GpuRequest, {{"request", "all"}, {"reason", "no-gpu-here"}}));
  }
  return entries;
}

// Resolves `entries` on the GPUs of `snap` (NVML's enumeration, made by the caller); through CUDA
// when NVML is unavailable (`probed`: a probe made already, or nullptr).
Resolution resolve_on(NvmlSnapshot snap, const std::vector<GpuEntry>& entries, const CudaEnv& env,
                      const std::string& probe_helper, const ProbeResult* probed) {
  if (!snap.available)
    return resolve_through_cuda(entries, env, probe_helper, snap.reason, snap.problem, probed);
  Resolution r;
  r.resolved = true;
  // The CUDA_VISIBLE_DEVICES model, made once: resolution reads the same one.
  std::optional<VisibleSet> vs;
  if (env.visible_devices) vs = model_visible(snap.gpus, env);
  // A preset of indices on a machine whose CUDA order NVML cannot tell: ask CUDA for its order.
  if (vs && !vs->known) {
    ProbeResult probe = probe_cuda(probe_helper, true);
    std::optional<std::vector<int>> order;
    if (probe.ok) order = detail::cuda_order_from(snap.gpus, probe.devices);
    if (!order) {
      try {
        detail::resolve_positions(entries, snap.gpus, env, &*vs);
      } catch (const Error& e) {
        throw bad_input(std::string(e.text()) + " (asking CUDA for its order did not help: " +
                            (probe.ok ? "its devices did not match NVML's" : probe.reason) + ")",
                        e.problem());
      }
      throw failure("CUDA's device order is unknown and could not be probed");
    }
    r.probed = true;
    vs = model_visible(snap.gpus, env, &*order);
  }
  std::vector<std::size_t> picked;
  if (vs || snap.detail >= NvmlDetail::Model) {
    picked = detail::resolve_positions(entries, snap.gpus, env, vs ? &*vs : nullptr);
  } else {
    std::optional<Error> broken;
    picked = positions_by_uuid(entries, snap.gpus, env, broken);
    if (broken) {  // NVML failed part way
      return resolve_through_cuda(entries, env, probe_helper, broken->text(), broken->problem());
    }
  }
  for (std::size_t g : picked) r.gpus.push_back(snap.gpus[g].uuid);
  note_renumbering(r, entries, env, snap.gpus, picked);
  r.machine = std::move(snap.gpus);
  return r;
}

}  // namespace

Resolution resolve_gpus(const GpuRequest& request, const CudaEnv& env,
                        const std::string& probe_helper) {
  // No NVIDIA driver, and ROCm SMI monitors GPUs: an AMD machine (ROCm SMI is never asked where
  // NVML works, so NVIDIA machines pay nothing for it).
  if (!nvml_usable()) {
    // free:N is picked below, by acquire_gpus, which reads the AMD GPUs' usage.
    const AmdSnapshot amd = query_rocm_smi();
    if (amd.available && !amd.gpus.empty() && request.kind != GpuRequest::Kind::Free)
      return resolve_on_amd(request, env, amd);
    std::string asked = "--gpu";
    for (const std::string& t : request.texts()) asked += (asked == "--gpu" ? " " : ",") + t;
    if (std::optional<Error> e = amd_unreadable(asked, amd)) throw *e;
  }
  if (request.kind == GpuRequest::Kind::Free) {
    return acquire_gpus(request, env, probe_helper, AcquireOptions{}).resolution;  // picks only
  }
  if (request.kind == GpuRequest::Kind::All) {
    // One enumeration for both: which GPUs `all` stands for, and resolving them.
    NvmlSnapshot snap = query_nvml(NvmlQuery{false, false, NvmlDetail::Model});
    std::vector<Note> notes;
    std::optional<ProbeResult> probe;
    std::vector<GpuEntry> every;
    for (std::size_t index : all_indices(snap, env, probe_helper, notes, probe)) {
      GpuEntry e;
      e.text = std::to_string(index);
      e.index = index;
      every.push_back(std::move(e));
    }
    Resolution r = resolve_on(std::move(snap), every, env, probe_helper, probe ? &*probe : nullptr);
    r.notes.insert(r.notes.begin(), notes.begin(), notes.end());
    return r;
  }
  // Only what resolving reads: the UUIDs, and under a preset what the model of it needs.
  try {
    Resolution r =
        resolve_on(query_nvml(NvmlQuery{
                       false, false, env.visible_devices ? NvmlDetail::Model : NvmlDetail::Uuid}),
                   request.gpus, env, probe_helper, nullptr);
    if (r.resolved) refuse_prefix_of_both_makers(request);
    return r;
  } catch (const Error& e) {
    // An entry NVML's GPUs do not have: perhaps an AMD GPU of a machine with both (asked only
    // here, so that NVIDIA machines pay nothing for it).
    const std::string* reason = e.problem().field("reason");
    if (reason == nullptr || *reason != "no-match") throw;
    const NvmlSnapshot nvidia = query_nvml(NvmlQuery{false, false, NvmlDetail::Uuid});
    if (std::optional<Resolution> amd = resolve_amd_beside_nvidia(request, env, nvidia.gpus))
      return *amd;
    throw;
  }
}

GPUSEL_END_NAMESPACE
