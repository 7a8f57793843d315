// A --gpu request on a machine whose GPUs are AMD's (no NVIDIA driver; ROCm SMI monitors them):
// indices are rocm-smi's, unique ids (GPU- and 16 hex digits, as ROCr writes them) and their
// prefixes name one GPU each, `all` is every GPU with an id. ROCm's visibility variables are not
// taken as a quota yet, so a request under any of them is refused rather than read by CUDA's rules
// (docs/amd.md).
#include <algorithm>
#include <cctype>

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

Resolution resolve_on_amd(const GpuRequest& request, const CudaEnv& env, const AmdSnapshot& amd) {
  const std::string asked = "--gpu " + request_text(request);
  // A preset would be read by ROCr and HIP with their own rules (src/core/amd_visible.cpp); until
  // gpusel keeps within it, it refuses instead of placing a worker outside it.
  const std::optional<std::string> presets[] = {detail::env_value("ROCR_VISIBLE_DEVICES"),
                                                detail::env_value("HIP_VISIBLE_DEVICES"),
                                                env.visible_devices};
  const char* names[] = {"ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"};
  for (std::size_t i = 0; i < 3; ++i) {
    if (!presets[i]) continue;
    throw bad_input(
        asked + ": this machine's GPUs are AMD's, and " + names[i] + "=" +
            detail::quote_value(*presets[i]) +
            " is set; gpusel does not yet keep AMD jobs within ROCm's visibility variables, so "
            "it places none under them: unset " +
            names[i] +
            " and name the GPUs your job was given by unique id (`gpusel list` shows them)",
        about(Subject::VisibleDevices, {{"variable", names[i]},
                                        {"value", *presets[i]},
                                        {"reason", "amd-preset-unsupported"}}));
  }
  if (request.kind == GpuRequest::Kind::Free) {
    throw failure(asked + ": picking free AMD GPUs is not supported yet (gpusel reads no AMD "
                          "GPU's processes); name the GPUs by rocm-smi index or unique id",
                  about(Subject::GpuRequest,
                        {{"request", request_text(request)}, {"reason", "amd-free-unsupported"}}));
  }
  Resolution r;
  r.resolved = true;
  r.vendor = "amd";
  for (const AmdGpu& g : amd.gpus) {
    GpuInfo info;
    info.uuid = g.id;
    info.name = g.name;
    info.pci_bus_id = g.pci_bus_id;
    info.memory_total_bytes = g.memory_total;
    info.index = g.index;
    r.machine.push_back(std::move(info));
  }
  r.notes.push_back(
      {"amd-gpus", "the GPUs are AMD's (ROCm SMI): indices are rocm-smi's, and each worker is "
                   "given its GPU by unique id in ROCR_VISIBLE_DEVICES"});
  const std::size_t n = amd.gpus.size();
  if (request.kind == GpuRequest::Kind::All) {
    for (const AmdGpu& g : amd.gpus) {
      if (!g.id.empty()) r.gpus.push_back(g.id);
    }
    if (r.gpus.empty()) {
      throw failure(asked + ": ROCm SMI gives no AMD GPU a unique id, so none can be named",
                    about(Subject::GpuRequest, {{"request", "all"}, {"reason", "no-ids"}}));
    }
    return r;
  }
  for (const GpuEntry& e : request.gpus) {
    const AmdGpu* found = nullptr;
    if (!e.is_uuid()) {
      if (e.index >= n) {
        throw bad_input("--gpu " + e.text + ": no AMD GPU has rocm-smi index " + e.text +
                            " (this machine has " + std::to_string(n) + ": " + index_range(n) +
                            "); `gpusel list` shows them",
                        about(Subject::GpuEntry, {{"entry", e.text}, {"reason", "out-of-range"}}));
      }
      found = &amd.gpus[e.index];
      if (found->id.empty()) {
        throw failure("--gpu " + e.text + ": ROCm SMI gives that AMD GPU no unique id (" +
                          found->failure + "), so no worker can be given it",
                      about(Subject::GpuEntry, {{"entry", e.text}, {"reason", "no-id"}}));
      }
    } else {
      std::vector<const AmdGpu*> matches;
      for (const AmdGpu& g : amd.gpus) {
        if (id_starts_with(g.id, e.text)) matches.push_back(&g);
      }
      if (matches.size() != 1) {
        const bool none = matches.empty();
        throw bad_input(
            "--gpu " + e.text + ": " +
                (none ? "no AMD GPU's unique id begins with " + e.text
                      : "the ids of " + std::to_string(matches.size()) + " AMD GPUs begin with " +
                            e.text + "; give more of it") +
                " (`gpusel list` shows each GPU's id: GPU- and 16 hex digits)",
            about(Subject::GpuEntry,
                  {{"entry", e.text}, {"reason", none ? "no-match" : "ambiguous-prefix"}}));
      }
      found = matches.front();
    }
    r.gpus.push_back(found->id);
  }
  return r;
}

GPUSEL_END_NAMESPACE
