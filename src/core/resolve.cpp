// Resolution of --gpu entries to full GPU UUIDs.
#include <algorithm>
#include <cctype>

#include "gpusel/resolution.hpp"
#include "gpusel_detail.hpp"

#include "gpusel/error.hpp"
#include "gpusel/spec.hpp"
#include "resolve_detail.hpp"
#include "text.hpp"

GPUSEL_BEGIN_NAMESPACE
namespace {

// The data of a refused GPU entry: the entry as given, why (a stable word), and the GPU it names
// where it names one.
Problem entry_problem(const std::string& entry, const char* reason, const GpuInfo* gpu = nullptr) {
  Problem p = about(Subject::GpuEntry, {{"entry", entry}, {"reason", reason}});
  if (gpu != nullptr) {
    if (!gpu->uuid.empty()) p.fields.push_back({"gpu", gpu->uuid});
    p.fields.push_back({"index", std::to_string(gpu->index)});
  }
  return p;
}

// The data of a refused CUDA_VISIBLE_DEVICES preset.
Problem preset_problem(const CudaEnv& env, const char* reason) {
  return about(Subject::VisibleDevices, {{"variable", "CUDA_VISIBLE_DEVICES"},
                                         {"value", env.visible_devices.value_or("")},
                                         {"reason", reason}});
}

// Where to see the GPUs by every name.
std::string list_hint() {
  return detail::reader_text("run `gpusel list` to see the GPUs and how CUDA numbers them",
                             "gpusel_list_gpus (or `gpusel list`) shows the GPUs and how CUDA "
                             "numbers them");
}

std::string count_gpus(std::size_t n, const char* what = "GPU") {
  return std::to_string(n) + " " + what + (n == 1 ? "" : "s");
}

// Positions of the GPUs whose UUID starts with `prefix`.
std::vector<std::size_t> uuid_hits(const std::vector<GpuInfo>& gpus, const std::string& prefix) {
  std::vector<std::size_t> hits;
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    if (detail::starts_with_ci(gpus[i].uuid, prefix)) hits.push_back(i);
  }
  return hits;
}

// Edit distance (insertions, deletions, substitutions), letters compared without case.
std::size_t edit_distance_ci(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      const bool same = std::tolower(static_cast<unsigned char>(a[i - 1])) ==
                        std::tolower(static_cast<unsigned char>(b[j - 1]));
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (same ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// For an entry that matches no UUID: "; did you mean GPU-... (GPU 3)?" when the UUID of exactly
// one GPU starts within two edits of it (a typo), else "". Only said, never picked.
std::string near_uuid_hint(const std::vector<GpuInfo>& gpus, const std::string& entry) {
  constexpr std::size_t kMaxEdits = 2;
  if (entry.size() < 8) return "";
  std::size_t best = kMaxEdits + 1, count = 0, pick = 0;
  for (std::size_t g = 0; g < gpus.size(); ++g) {
    const std::string& uuid = gpus[g].uuid;
    std::size_t d = kMaxEdits + 1;
    for (std::size_t len = entry.size() - kMaxEdits; len <= entry.size() + kMaxEdits; ++len) {
      if (len <= uuid.size()) d = std::min(d, edit_distance_ci(entry, uuid.substr(0, len)));
    }
    if (d < best) {
      best = d;
      count = 1;
      pick = g;
    } else if (d == best && d <= kMaxEdits) {
      ++count;
    }
  }
  if (count != 1) return "";
  return "; did you mean " + gpus[pick].uuid + " (GPU " + std::to_string(gpus[pick].index) +
         ")? (" + list_hint() + ")";
}

std::string list_uuids(const std::vector<GpuInfo>& gpus, const std::vector<std::size_t>& which) {
  std::string out;
  for (std::size_t i : which) out += (out.empty() ? "" : ", ") + gpus[i].uuid;
  return out;
}

void refuse_failed(const GpuInfo& gpu, const std::string& entry) {
  if (!gpu.failed()) return;
  throw bad_input(detail::gpu_entry_words() + " " + detail::quote_value(entry) + " names GPU " +
                      std::to_string(gpu.index) + ", which NVML cannot use (" + gpu.failure +
                      "); pick another GPU, and have the failed one checked (nvidia-smi -q -i " +
                      std::to_string(gpu.index) + ")",
                  entry_problem(entry, "gpu-failed", &gpu));
}

// "nvidia-smi 6,7" for the GPUs a preset exposes (MIG devices by their parent GPU).
std::string smi_indices(const std::vector<GpuInfo>& gpus, const VisibleSet& vs) {
  std::string out;
  for (const VisibleDevice& d : vs.devices) {
    out += (out.empty() ? "" : ",") + std::to_string(gpus[static_cast<std::size_t>(d.gpu)].index);
  }
  return out.empty() ? std::string("none") : "nvidia-smi " + out;
}

void refuse_mig(const GpuInfo& gpu, const std::string& entry) {
  if (!gpu.mig_enabled) return;
  throw bad_input(detail::gpu_entry_words() + " " + detail::quote_value(entry) + " names GPU " +
                      std::to_string(gpu.index) + " (" + gpu.uuid +
                      "), which has MIG enabled: CUDA exposes only its MIG devices, and gpusel "
                      "assigns whole GPUs; pick a GPU without MIG (" +
                      list_hint() + ")",
                  entry_problem(entry, "mig-enabled", &gpu));
}

// An index with no preset: the nvidia-smi index.
std::size_t physical_index(const std::vector<GpuInfo>& gpus, const GpuEntry& entry) {
  if (entry.index >= gpus.size()) {
    throw bad_input(
        detail::gpu_entry_words() + " " + detail::quote_value(entry.text) +
            " is out of range: this machine has " + count_gpus(gpus.size()) +
            (gpus.empty() ? std::string() : ", indices 0 to " + std::to_string(gpus.size() - 1)) +
            "; " + list_hint(),
        entry_problem(entry.text, "out-of-range"));
  }
  return static_cast<std::size_t>(entry.index);
}

std::size_t physical_uuid(const std::vector<GpuInfo>& gpus, const std::string& entry) {
  auto hits = uuid_hits(gpus, entry);
  if (hits.empty()) {
    const std::string hint = near_uuid_hint(gpus, entry);
    throw bad_input(detail::gpu_entry_words() + " " + detail::quote_value(entry) +
                        " matches no GPU on this machine (" + count_gpus(gpus.size()) + ")" +
                        (hint.empty() ? "; check for a typo, " + list_hint() : hint),
                    entry_problem(entry, "no-match"));
  }
  if (hits.size() > 1) {
    throw bad_input(detail::gpu_entry_words() + " " + detail::quote_value(entry) +
                        " is a prefix of " + std::to_string(hits.size()) + " GPUs (" +
                        list_uuids(gpus, hits) + "); give enough characters to name one",
                    entry_problem(entry, "ambiguous-prefix"));
  }
  return hits.front();
}

std::size_t preset_index(const std::vector<GpuInfo>& gpus, const VisibleSet& vs,
                         const GpuEntry& index, const std::string& preset) {
  const std::string& entry = index.text;
  if (!vs.known) {
    throw bad_input(
        detail::gpu_entry_words() + " " + detail::quote_value(entry) + " counts within " + preset +
            ", but " + vs.unknown_reason +
            detail::reader_text("; give --gpu as GPU UUIDs", "; give the GPUs as UUIDs") +
            ", or set CUDA_DEVICE_ORDER=PCI_BUS_ID (" + list_hint() + ")",
        entry_problem(entry, "order-unknown"));
  }
  if (index.index >= vs.devices.size()) {
    std::string why;
    if (vs.invalid_entry) {
      why = " (the driver stops reading at the invalid entry " +
            detail::quote_value(*vs.invalid_entry) + ")";
    }
    throw bad_input(
        detail::gpu_entry_words() + " " + detail::quote_value(entry) +
            " is out of range: " + preset + " exposes " + count_gpus(vs.devices.size(), "device") +
            " (" + smi_indices(gpus, vs) + ")" + why +
            "; with a preset, indices count within that list (0 is its first device); " +
            list_hint(),
        entry_problem(entry, "out-of-range"));
  }
  const VisibleDevice& d = vs.devices[static_cast<std::size_t>(index.index)];
  const GpuInfo& gpu = gpus[static_cast<std::size_t>(d.gpu)];
  if (d.mig >= 0) refuse_mig(gpu, entry);
  return static_cast<std::size_t>(d.gpu);
}

std::size_t preset_uuid(const std::vector<GpuInfo>& gpus, const VisibleSet& vs,
                        const std::string& entry, const std::string& preset) {
  if (vs.mode == VisibleMode::Indices && !vs.known) {
    throw bad_input(detail::gpu_entry_words() + " " + detail::quote_value(entry) +
                        " is a UUID, but " + preset + " lists GPUs by index and " +
                        vs.unknown_reason +
                        detail::reader_text("; give --gpu as positions", "; give positions") +
                        " in that list (0 is its first device), set "
                        "CUDA_DEVICE_ORDER=PCI_BUS_ID, or set CUDA_VISIBLE_DEVICES to GPU UUIDs",
                    entry_problem(entry, "order-unknown"));
  }
  // The whole GPUs the preset exposes, matched by full UUID, so both a short preset entry and a
  // short --gpu entry work, and only GPUs the driver really exposes count.
  std::vector<std::size_t> visible_hits;
  for (const VisibleDevice& d : vs.devices) {
    const auto g = static_cast<std::size_t>(d.gpu);
    if (d.mig < 0 && detail::starts_with_ci(gpus[g].uuid, entry)) visible_hits.push_back(g);
  }
  if (visible_hits.size() == 1) return visible_hits.front();
  if (visible_hits.size() > 1) {
    throw bad_input(detail::gpu_entry_words() + " " + detail::quote_value(entry) +
                        " is a prefix of " + std::to_string(visible_hits.size()) +
                        " GPUs exposed by " + preset + " (" + list_uuids(gpus, visible_hits) +
                        "); give enough characters to name one",
                    entry_problem(entry, "ambiguous-prefix"));
  }
  auto anywhere = uuid_hits(gpus, entry);
  if (anywhere.size() == 1) refuse_mig(gpus[anywhere.front()], entry);
  std::string why;
  if (anywhere.size() == 1 && vs.invalid_entry) {
    why = "; the driver stops reading it at the invalid entry " +
          detail::quote_value(*vs.invalid_entry);
  }
  throw bad_input(
      detail::gpu_entry_words() + " " + detail::quote_value(entry) + " is not one of the GPUs " +
          preset + " lets this process use" +
          (anywhere.size() == 1 ? " (GPU " + std::to_string(gpus[anywhere.front()].index) +
                                      " exists, outside that list" + why + ")"
                                : std::string(" (it matches no GPU on this machine)")) +
          "; pick from that list, or change CUDA_VISIBLE_DEVICES (" + list_hint() + ")",
      anywhere.empty() ? entry_problem(entry, "no-match")
                       : entry_problem(entry, "outside-preset",
                                       anywhere.size() == 1 ? &gpus[anywhere.front()] : nullptr));
}

}  // namespace

std::vector<std::string> resolve_entries(const std::vector<GpuEntry>& entries,
                                         const std::vector<GpuInfo>& gpus, const CudaEnv& env,
                                         const std::vector<int>* cuda_order) {
  std::optional<VisibleSet> vs;
  if (env.visible_devices) vs = model_visible(gpus, env, cuda_order);
  std::vector<std::string> out;
  for (std::size_t g : detail::resolve_positions(entries, gpus, env, vs ? &*vs : nullptr)) {
    out.push_back(gpus[g].uuid);
  }
  return out;
}

GPUSEL_END_NAMESPACE

namespace gpusel::detail {

std::vector<std::size_t> resolve_positions(const std::vector<GpuEntry>& entries,
                                           const std::vector<GpuInfo>& gpus, const CudaEnv& env,
                                           const VisibleSet* vs) {
  std::vector<std::size_t> picked;
  if (const auto problem = detail::uuid_case_problem(env))
    throw bad_input(*problem, preset_problem(env, "uuid-case"));
  if (!env.visible_devices) {
    for (const GpuEntry& entry : entries) {
      std::size_t g =
          entry.is_uuid() ? physical_uuid(gpus, entry.text) : physical_index(gpus, entry);
      refuse_failed(gpus[g], entry.text);
      refuse_mig(gpus[g], entry.text);
      picked.push_back(g);
    }
  } else {
    const std::string preset = detail::describe_preset(env);
    if (vs->mode == VisibleMode::MigUuids) {
      throw bad_input(preset + " selects MIG devices; gpusel assigns whole GPUs, so " +
                          detail::reader_text("--gpu", "a GPU request") +
                          " cannot choose among them; run without MIG devices in "
                          "CUDA_VISIBLE_DEVICES, or unset it",
                      preset_problem(env, "mig-devices"));
    }
    if (vs->duplicate) {
      throw bad_input(
          preset +
              " names one GPU twice, so CUDA exposes no device at all; remove the repeated "
              "entry from CUDA_VISIBLE_DEVICES",
          preset_problem(env, "duplicate"));
    }
    for (const GpuEntry& entry : entries) {
      picked.push_back(entry.is_uuid() ? preset_uuid(gpus, *vs, entry.text, preset)
                                       : preset_index(gpus, *vs, entry, preset));
    }
  }
  for (std::size_t i = 0; i < picked.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      if (picked[i] == picked[j]) {
        throw bad_input(detail::reader_text("--gpu entries ", "GPU entries ") +
                            detail::quote_value(entries[j].text) + " and " +
                            detail::quote_value(entries[i].text) + " both name GPU " +
                            gpus[picked[i]].uuid + "; each rank needs a GPU of its own",
                        entry_problem(entries[i].text, "same-gpu-twice", &gpus[picked[i]]));
      }
    }
  }
  return picked;
}

std::string describe_preset(const CudaEnv& env) {
  if (!env.visible_devices) return "CUDA_VISIBLE_DEVICES (unset)";
  return "CUDA_VISIBLE_DEVICES=" + detail::quote_value(*env.visible_devices);
}

}  // namespace gpusel::detail
