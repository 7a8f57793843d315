// The worker side: publish, bind, identity.
#include "gpusel/worker.hpp"

#include <cstdlib>
#include <mutex>

#include "../driver/cuda_api.hpp"
#include "gpusel/cuda.hpp"
#include "gpusel/error.hpp"
#include "gpusel/nvml.hpp"
#include "gpusel/probe.hpp"
#include "gpusel/resolve.hpp"
#include "gpusel/spec.hpp"

namespace gpusel {
namespace {

struct Assignment {
  std::optional<std::string> physical;  // a published UUID (or prefix)
  std::optional<int> visible;           // a published or bound CUDA ordinal
  std::optional<std::string> bound_uuid;
  CUcontext context = nullptr;
};

std::mutex assignment_mutex;
Assignment assignment;

std::string describe(const Assignment& a) {
  if (a.bound_uuid) return *a.bound_uuid + " (CUDA ordinal " + std::to_string(*a.visible) + ")";
  if (a.physical) return *a.physical;
  return "CUDA ordinal " + std::to_string(*a.visible);
}

// The CUDA ordinal of a published UUID among this process's visible devices.
int ordinal_of(const std::string& uuid, const std::vector<CudaDevice>& devices) {
  std::vector<int> hits;
  std::string seen;
  for (const CudaDevice& d : devices) {
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

std::optional<LocalRank> local_rank() {
  for (const char* name : kLocalRankVariables) {
    const char* value = std::getenv(name);
    if (value == nullptr) continue;
    const std::string v = value;
    if (!is_gpu_index(v) || v.size() > 6) {
      throw bad_input(std::string(name) + "=" + quote_value(v) +
                      " is not a local rank (a non-negative integer); fix the launcher's setting "
                      "or unset it");
    }
    return LocalRank{name, std::stoi(v)};
  }
  return std::nullopt;
}

void set_assigned_gpu(std::string_view target) {
  const std::string entry = canonical_entry(target);
  std::optional<std::string> physical;
  std::optional<int> visible;
  if (is_gpu_uuid(entry)) {
    physical = entry;
  } else {
    std::string_view digits = entry;
    while (digits.size() > 1 && digits.front() == '0') digits.remove_prefix(1);
    if (digits.size() > 6)
      throw bad_input("CUDA ordinal " + quote_value(entry) + " is out of range");
    visible = std::stoi(std::string(digits));
  }
  std::lock_guard<std::mutex> lock(assignment_mutex);
  Assignment& a = assignment;
  if (!a.physical && !a.visible) {
    a.physical = physical;
    a.visible = visible;
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

std::optional<LocalRank> assign_from_environment() {
  const char* list = std::getenv("GPUSEL_GPUS");
  if (list == nullptr) return std::nullopt;
  std::vector<std::string> entries;
  try {
    entries = parse_gpu_spec(list);
  } catch (const Error& e) {
    throw bad_input(std::string("GPUSEL_GPUS=") + quote_value(list) + ": " + e.what());
  }
  std::optional<LocalRank> rank = local_rank();
  if (!rank) {
    std::string names;
    for (const char* n : kLocalRankVariables) names += (names.empty() ? "" : ", ") + std::string(n);
    throw bad_input(std::string("GPUSEL_GPUS=") + quote_value(list) +
                    " is set but no local rank is (" + names +
                    "); start workers with gpusel run, torchrun, srun or mpirun, or pass --gpu");
  }
  if (static_cast<std::size_t>(rank->rank) >= entries.size()) {
    throw bad_input(rank->variable + "=" + std::to_string(rank->rank) + " is beyond GPUSEL_GPUS=" +
                    quote_value(list) + " (" + std::to_string(entries.size()) +
                    " entries); start as many workers per node as GPUs listed");
  }
  set_assigned_gpu(entries[static_cast<std::size_t>(rank->rank)]);
  return rank;
}

int bind_assigned_gpu(int default_ordinal) {
  std::lock_guard<std::mutex> lock(assignment_mutex);
  Assignment& a = assignment;
  const CudaApi& api = cuda_initialised();
  if (a.context == nullptr) {
    const std::vector<CudaDevice> devices = cuda_devices();
    const int ordinal =
        a.physical ? ordinal_of(*a.physical, devices) : a.visible.value_or(default_ordinal);
    if (ordinal < 0 || static_cast<std::size_t>(ordinal) >= devices.size()) {
      throw bad_input("cannot use CUDA device " + std::to_string(ordinal) + ": " +
                      std::to_string(devices.size()) + " visible (" +
                      describe_preset(cuda_env_from_environment()) +
                      "); run `gpusel list` to see them");
    }
    CUcontext ctx = nullptr;
    CUresult rc = api.cuDevicePrimaryCtxRetain(&ctx, ordinal);
    if (rc != CUDA_SUCCESS) {
      throw failure("cuDevicePrimaryCtxRetain failed for CUDA device " + std::to_string(ordinal) +
                    ": " + cuda_error_text(api, rc));
    }
    a.context = ctx;
    a.visible = ordinal;
    a.bound_uuid = devices[static_cast<std::size_t>(ordinal)].uuid;
  }
  CUresult rc = api.cuCtxSetCurrent(a.context);
  if (rc != CUDA_SUCCESS) throw failure("cuCtxSetCurrent failed: " + cuda_error_text(api, rc));
  return *a.visible;
}

std::optional<int> assigned_visible_gpu() {
  std::lock_guard<std::mutex> lock(assignment_mutex);
  Assignment& a = assignment;
  if (a.visible) return a.visible;
  if (a.physical) return ordinal_of(*a.physical, cuda_devices());
  return std::nullopt;
}

GpuIdentity gpu_identity(int cuda_ordinal) {
  const std::vector<CudaDevice> devices = cuda_devices();
  if (cuda_ordinal < 0 || static_cast<std::size_t>(cuda_ordinal) >= devices.size()) {
    throw bad_input("no CUDA device " + std::to_string(cuda_ordinal) + ": " +
                    std::to_string(devices.size()) + " visible");
  }
  const CudaDevice& d = devices[static_cast<std::size_t>(cuda_ordinal)];
  GpuIdentity id;
  id.cuda_ordinal = cuda_ordinal;
  id.uuid = d.uuid;
  id.name = d.name;
  id.total_bytes = d.total_bytes;
  id.cc_major = d.cc_major;
  id.cc_minor = d.cc_minor;
  id.pci_bus_id = d.pci_bus_id;
  id.l2_cache_bytes = d.l2_cache_bytes;
  const NvmlSnapshot snap = query_nvml();
  for (const GpuInfo& g : snap.gpus) {
    if (same_entry(g.uuid, d.parent_uuid)) id.index = g.index;
  }
  return id;
}

}  // namespace gpusel
