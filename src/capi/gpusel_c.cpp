// The C ABI: a thin layer over the C++ API. Every exception becomes a status and a thread-local
// message; nothing throws across the boundary.
#include "gpusel/gpusel.h"

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gpusel/amd.hpp"
#include "gpusel/error.hpp"
#include "gpusel/gpu_fields.hpp"
#include "gpusel/nvml.hpp"
#include "gpusel/probe.hpp"
#include "gpusel/resolution.hpp"
#include "gpusel/spec.hpp"
#include "gpusel/version.h"
#include "gpusel/worker.hpp"
#include "gpusel_detail.hpp"
#include "sized_struct.hpp"

namespace {

thread_local std::string last_error;
thread_local gpusel::Problem last_problem;

// The C codes are the library's ErrorCode values.
static_assert(GPUSEL_ERROR_NONE == static_cast<int>(gpusel::ErrorCode::None));
static_assert(GPUSEL_ERROR_UNSPECIFIED == static_cast<int>(gpusel::ErrorCode::Unspecified));
static_assert(GPUSEL_ERROR_BAD_INPUT == static_cast<int>(gpusel::ErrorCode::BadInput));
static_assert(GPUSEL_ERROR_LIBRARY_NOT_LOADED ==
              static_cast<int>(gpusel::ErrorCode::LibraryNotLoaded));
static_assert(GPUSEL_ERROR_LIBRARY_INCOMPLETE ==
              static_cast<int>(gpusel::ErrorCode::LibraryIncomplete));
static_assert(GPUSEL_ERROR_CUDA_LINK_STUB == static_cast<int>(gpusel::ErrorCode::CudaLinkStub));
static_assert(GPUSEL_ERROR_NO_DEVICE == static_cast<int>(gpusel::ErrorCode::NoDevice));
static_assert(GPUSEL_ERROR_DRIVER_CALL == static_cast<int>(gpusel::ErrorCode::DriverCallFailed));
static_assert(GPUSEL_ERROR_GPU_LOST == static_cast<int>(gpusel::ErrorCode::GpuLost));
static_assert(GPUSEL_ERROR_DRIVER_BROKEN == static_cast<int>(gpusel::ErrorCode::DriverBroken));
static_assert(GPUSEL_ERROR_PROBE_UNAVAILABLE ==
              static_cast<int>(gpusel::ErrorCode::ProbeUnavailable));
static_assert(GPUSEL_ERROR_PROBE_TIMED_OUT == static_cast<int>(gpusel::ErrorCode::ProbeTimedOut));
static_assert(GPUSEL_ERROR_PROBE_FAILED == static_cast<int>(gpusel::ErrorCode::ProbeFailed));
static_assert(GPUSEL_ERROR_BUFFER_TOO_SMALL == static_cast<int>(gpusel::ErrorCode::BufferTooSmall));

template <typename F>
gpusel_status guarded(F&& f) {
  last_error.clear();
  last_problem = {};
  try {
    return f();
  } catch (const gpusel::Error& e) {
    last_error = e.what();
    last_problem = e.problem();
    return e.kind() == gpusel::ErrorKind::BadInput ? GPUSEL_BAD_INPUT : GPUSEL_FAILURE;
  } catch (const std::exception& e) {
    last_error = e.what();
    last_problem.code = gpusel::ErrorCode::Unspecified;
    return GPUSEL_FAILURE;
  } catch (...) {
    last_error = "unknown error";
    last_problem.code = gpusel::ErrorCode::Unspecified;
    return GPUSEL_FAILURE;
  }
}

gpusel_status out_string(const std::string& value, char* buf, size_t size, size_t* needed) {
  if (needed != nullptr) *needed = value.size() + 1;
  if (buf == nullptr || size < value.size() + 1) {
    last_error = "the buffer holds " + std::to_string(size) + " bytes; " +
                 std::to_string(value.size() + 1) + " are needed";
    last_problem = {};
    last_problem.code = gpusel::ErrorCode::BufferTooSmall;
    return GPUSEL_TOO_SMALL;
  }
  std::memcpy(buf, value.c_str(), value.size() + 1);
  return GPUSEL_OK;
}

template <std::size_t N>
void copy_field(char (&dst)[N], const std::string& src) {
  const std::size_t n = std::min(src.size(), N - 1);
  std::memcpy(dst, src.data(), n);
  dst[n] = '\0';
}

// Where the fields of each caller-sized struct end: in the first version (gpusel 0.1; a caller's
// `size` below that is refused) and in this library's (what it fills). Later versions only append
// fields; a new field moves the second constant to the new last field.
constexpr std::size_t kGpuInfoFirstSize =
    offsetof(gpusel_gpu_info, mig_enabled) + sizeof(gpusel_gpu_info::mig_enabled);
constexpr std::size_t kGpuInfoFieldsEnd = kGpuInfoFirstSize;
constexpr std::size_t kIdentityFirstSize =
    offsetof(gpusel_identity, pci_bus_id) + sizeof(gpusel_identity::pci_bus_id);
constexpr std::size_t kIdentityFieldsEnd = kIdentityFirstSize;
// Only trailing padding may follow the last field named above.
static_assert(sizeof(gpusel_gpu_info) - kGpuInfoFieldsEnd < alignof(gpusel_gpu_info));
static_assert(sizeof(gpusel_identity) - kIdentityFieldsEnd < alignof(gpusel_identity));

// Throws Error(BadInput) unless the caller's struct `out` (of `what`) is at least the first
// version's size. Nothing of `out` but its `size` is read, and nothing is written.
void check_size(const void* out, std::size_t first_size, const char* what) {
  if (out == nullptr) throw gpusel::bad_input(std::string(what) + " is NULL");
  const std::size_t size = gpusel::detail::caller_struct_size(out);
  if (size < first_size) {
    throw gpusel::bad_input(std::string(what) + "->size is " + std::to_string(size) +
                            "; set it to sizeof(" + what + ") (at least " +
                            std::to_string(first_size) + ")");
  }
}

// Fills the caller's struct as far as both it and this library know it (sized_struct.hpp): a
// `size` larger than this library's struct (a newer caller, or one that left `size`
// uninitialised) never makes the library write past its own struct's last field.
template <typename T>
void fill_sized(T* out, const T& value, std::size_t fields_end) {
  gpusel::detail::copy_sized_struct(out, &value, fields_end);
}

std::string need(const char* s, const char* what) {
  if (s == nullptr) throw gpusel::bad_input(std::string(what) + " is NULL");
  return s;
}

}  // namespace

struct gpusel_gpu_list {
  std::vector<gpusel::GpuInfo> gpus;
  std::vector<int> cuda_ordinals;  // per GPU; -1 hidden or unknown
  bool cuda_known = true;          // false: the ordinals depend on what NVML cannot tell
  // gpus[first_amd...] are AMD GPUs, from ROCm SMI: all of them where NVML is unavailable, those
  // after NVIDIA's on a machine with both makers' GPUs; gpus.size() where there are none.
  std::size_t first_amd = 0;
  std::vector<std::optional<int>> hip_ordinals;  // AMD's, from first_amd: nullopt hidden/unknown
  bool is_amd(std::size_t i) const { return i >= first_amd; }
};

namespace {

// Where ROCm SMI lists GPUs: the AMD GPUs appended to `out`, each with the device number a HIP
// program started in this environment gives it (as `gpusel list` gives them); false where it
// lists none.
bool add_amd_gpus(gpusel_gpu_list& out, bool usage) {
  const gpusel::AmdSnapshot amd = gpusel::query_rocm_smi(usage);
  out.first_amd = out.gpus.size();
  if (!amd.available || amd.gpus.empty()) return false;
  for (gpusel::GpuInfo& g : gpusel::amd_gpu_records(amd)) out.gpus.push_back(std::move(g));
  out.cuda_ordinals.resize(out.gpus.size(), -1);
  out.hip_ordinals =
      gpusel::hip_ordinals(gpusel::hip_devices(gpusel::cuda_env_from_environment(), amd), amd);
  return true;
}

}  // namespace

extern "C" {

const char* gpusel_version(void) {
  return GPUSEL_VERSION_STRING;
}
const char* gpusel_last_error(void) {
  return last_error.c_str();
}
int gpusel_last_error_code(void) {
  return static_cast<int>(last_problem.code);
}
const char* gpusel_last_error_call(long long* result) {
  if (result != nullptr) *result = last_problem.result;
  return last_problem.call.c_str();
}
const char* gpusel_last_error_subject(void) {
  return last_problem.subject == gpusel::Subject::None ? ""
                                                       : gpusel::subject_name(last_problem.subject);
}
const char* gpusel_last_error_field_name(size_t i) {
  return i < last_problem.fields.size() ? last_problem.fields[i].name.c_str() : nullptr;
}
const char* gpusel_last_error_field(const char* name) {
  if (name == nullptr) return nullptr;
  const std::string* value = last_problem.field(name);
  return value != nullptr ? value->c_str() : nullptr;
}

int gpusel_is_gpu_uuid(const char* entry) {
  return entry != nullptr && gpusel::is_gpu_uuid(entry) ? 1 : 0;
}
int gpusel_is_gpu_index(const char* entry) {
  return entry != nullptr && gpusel::is_gpu_index(entry) ? 1 : 0;
}

gpusel_status gpusel_parse_gpu_spec(const char* value, char* buf, size_t size, size_t* needed) {
  return guarded([&] {
    return out_string(
        gpusel::detail::join_entries(gpusel::read_gpu_request(need(value, "value")).texts()), buf,
        size, needed);
  });
}

gpusel_status gpusel_parse_single_gpu(const char* value, char* buf, size_t size, size_t* needed) {
  return guarded([&] {
    return out_string(gpusel::parse_single_gpu(need(value, "value")), buf, size, needed);
  });
}

gpusel_status gpusel_resolve(const char* value, char* buf, size_t size, size_t* needed,
                             int* resolved) {
  return guarded([&] {
    const gpusel::GpuRequest request = gpusel::read_gpu_request(need(value, "value"));
    const gpusel::Resolution r = gpusel::resolve_gpus(request, gpusel::cuda_env_from_environment(),
                                                      gpusel::probe_helper_when_needed());
    if (resolved != nullptr) *resolved = r.resolved ? 1 : 0;
    return out_string(gpusel::detail::join_entries(r.gpus), buf, size, needed);
  });
}

gpusel_status gpusel_list_gpus(gpusel_gpu_list** list) {
  return gpusel_list_gpus_with(0, list);
}

gpusel_status gpusel_list_gpus_with(unsigned flags, gpusel_gpu_list** list) {
  return guarded([&] {
    if (list == nullptr) throw gpusel::bad_input("list is NULL");
    *list = nullptr;
    if ((flags & ~GPUSEL_LIST_USAGE) != 0)
      throw gpusel::bad_input("flags " + std::to_string(flags) +
                              " has bits other than GPUSEL_LIST_USAGE");
    gpusel::NvmlQuery query;
    query.usage = (flags & GPUSEL_LIST_USAGE) != 0;
    gpusel::NvmlSnapshot snap = gpusel::query_nvml(query);
    if (!snap.available) {
      auto amd = std::make_unique<gpusel_gpu_list>();
      if (add_amd_gpus(*amd, query.usage)) {
        *list = amd.release();
        return GPUSEL_OK;
      }
      throw gpusel::failure("NVML is unavailable: " + snap.reason, snap.problem);
    }
    const gpusel::VisibleSet vs =
        gpusel::model_visible(snap.gpus, gpusel::cuda_env_from_environment());
    auto out = std::make_unique<gpusel_gpu_list>();
    out->cuda_ordinals.assign(snap.gpus.size(), -1);
    out->cuda_known = vs.known;
    for (std::size_t k = 0; k < vs.devices.size(); ++k) {
      if (vs.devices[k].mig < 0)
        out->cuda_ordinals[static_cast<std::size_t>(vs.devices[k].gpu)] = static_cast<int>(k);
    }
    out->gpus = std::move(snap.gpus);
    add_amd_gpus(*out, query.usage);  // a machine with AMD GPUs too: theirs follow
    *list = out.release();
    return GPUSEL_OK;
  });
}

size_t gpusel_gpu_list_count(const gpusel_gpu_list* list) {
  return list == nullptr ? 0 : list->gpus.size();
}

gpusel_status gpusel_gpu_list_get(const gpusel_gpu_list* list, size_t i, gpusel_gpu_info* info) {
  return guarded([&] {
    if (list == nullptr || info == nullptr) throw gpusel::bad_input("list or info is NULL");
    check_size(info, kGpuInfoFirstSize, "gpusel_gpu_info");
    if (i >= list->gpus.size()) {
      throw gpusel::bad_input("GPU " + std::to_string(i) + " is past the end of the list (" +
                              std::to_string(list->gpus.size()) + " GPUs)");
    }
    const gpusel::GpuInfo& g = list->gpus[i];
    gpusel_gpu_info out{};
    out.size = sizeof out;
    // An AMD GPU: rocm-smi's index, what `--gpu N` means on a machine of AMD GPUs; beside NVIDIA's
    // GPUs, where `--gpu N` counts NVIDIA's, none (UINT_MAX: name it by uuid).
    out.nvidia_smi_index =
        list->is_amd(i) && list->first_amd > 0 ? std::numeric_limits<unsigned>::max() : g.index;
    out.cuda_ordinal = list->cuda_ordinals[i];
    copy_field(out.uuid, g.uuid);
    copy_field(out.name, g.name);
    copy_field(out.pci_bus_id, g.pci_bus_id);
    out.total_bytes = g.memory_total_bytes;
    out.numa_node = g.numa_node.value_or(-1);
    out.cc_major = g.cc_major;
    out.cc_minor = g.cc_minor;
    out.mig_enabled = g.mig_enabled ? 1 : 0;
    fill_sized(info, out, kGpuInfoFieldsEnd);
    return GPUSEL_OK;
  });
}

void gpusel_gpu_list_free(gpusel_gpu_list* list) {
  delete list;
}

const char* gpusel_gpu_field_name(size_t k) {
  const auto specs = gpusel::gpu_field_specs();
  return k < specs.size() ? specs[k].name : nullptr;
}

int gpusel_gpu_field_kind(size_t k) {
  const auto specs = gpusel::gpu_field_specs();
  if (k >= specs.size()) return -1;
  switch (specs[k].kind) {
    case gpusel::FieldKind::Text:
      return GPUSEL_FIELD_TEXT;
    case gpusel::FieldKind::Flag:
      return GPUSEL_FIELD_FLAG;
    default:
      return GPUSEL_FIELD_NUMBER;
  }
}

gpusel_status gpusel_gpu_list_field(const gpusel_gpu_list* list, size_t i, const char* name,
                                    char* buf, size_t size, size_t* needed, int* present) {
  return guarded([&] {
    if (present != nullptr) *present = 0;
    if (list == nullptr) throw gpusel::bad_input("list is NULL");
    const std::string field = need(name, "name");
    const gpusel::FieldSpec* spec = gpusel::find_gpu_field(field);
    if (spec == nullptr) {
      std::string known;
      for (const gpusel::FieldSpec& s : gpusel::gpu_field_specs())
        known += (known.empty() ? "" : ", ") + std::string(s.name);
      throw gpusel::bad_input("no GPU field is named " + gpusel::detail::quote_value(field) +
                              "; the fields are " + known);
    }
    if (i >= list->gpus.size()) {
      throw gpusel::bad_input("GPU " + std::to_string(i) + " is past the end of the list (" +
                              std::to_string(list->gpus.size()) + " GPUs)");
    }
    const bool amd = list->is_amd(i);
    const gpusel::GpuView view{list->gpus[i], list->cuda_ordinals[i], list->cuda_known, amd,
                               amd ? list->hip_ordinals[i - list->first_amd] : std::nullopt};
    const gpusel::FieldValue value = gpusel::gpu_field(view, spec->field);
    const gpusel_status status =
        out_string(gpusel::field_plain_text(*spec, value), buf, size, needed);
    if (status == GPUSEL_OK && present != nullptr) *present = value.present ? 1 : 0;
    return status;
  });
}

gpusel_status gpusel_set_assigned_gpu(const char* target) {
  return guarded([&] {
    gpusel::set_assigned_gpu(need(target, "target"));
    return GPUSEL_OK;
  });
}

gpusel_status gpusel_assign_gpu(const char* value) {
  return guarded([&] {
    gpusel::assign_gpu(need(value, "value"));
    return GPUSEL_OK;
  });
}

gpusel_status gpusel_assign_from_environment(int* rank) {
  return guarded([&] {
    auto info = gpusel::assign_from_environment();
    if (rank != nullptr) *rank = info && info->rank ? info->rank->rank : -1;
    return GPUSEL_OK;
  });
}

gpusel_status gpusel_assignment_source(int* source, int* rank) {
  return guarded([&] {
    const auto info = gpusel::assignment_info();
    static_assert(static_cast<int>(gpusel::AssignmentSource::Default) == GPUSEL_SOURCE_DEFAULT);
    if (source != nullptr) *source = info ? static_cast<int>(info->source) : GPUSEL_SOURCE_NONE;
    if (rank != nullptr) *rank = info && info->rank ? info->rank->rank : -1;
    return GPUSEL_OK;
  });
}

gpusel_status gpusel_local_rank(int* rank) {
  return guarded([&] {
    auto r = gpusel::local_rank();
    if (rank != nullptr) *rank = r ? r->rank : -1;
    return GPUSEL_OK;
  });
}

gpusel_status gpusel_bind_assigned_gpu(int default_ordinal, int* ordinal) {
  return guarded([&] {
    const int o = gpusel::bind_assigned_gpu(default_ordinal);
    if (ordinal != nullptr) *ordinal = o;
    return GPUSEL_OK;
  });
}

gpusel_status gpusel_assigned_visible_gpu(int* ordinal) {
  return guarded([&] {
    auto o = gpusel::assigned_visible_gpu();
    if (ordinal != nullptr) *ordinal = o.value_or(-1);
    return GPUSEL_OK;
  });
}

gpusel_status gpusel_claim_note(char* buf, size_t size, size_t* needed) {
  return guarded([&] {
    const std::optional<gpusel::AssignmentInfo> info = gpusel::assignment_info();
    // Sharing on purpose takes no claim and is not warned about.
    return out_string(info && !info->shared ? info->claim_note.text : std::string(), buf, size,
                      needed);
  });
}

void gpusel_set_stderr_warnings(int on) {
  gpusel::detail::set_stderr_warnings(on != 0);
}

gpusel_status gpusel_gpu_identity(int cuda_ordinal, gpusel_identity* identity) {
  return guarded([&] {
    if (identity == nullptr) throw gpusel::bad_input("identity is NULL");
    check_size(identity, kIdentityFirstSize, "gpusel_identity");
    const gpusel::CudaDevice id = gpusel::gpu_identity(cuda_ordinal);
    gpusel_identity out{};
    out.size = sizeof out;
    out.nvidia_smi_index = id.nvidia_smi_index ? static_cast<int>(*id.nvidia_smi_index) : -1;
    out.cuda_ordinal = id.cuda_ordinal;
    copy_field(out.uuid, id.uuid);
    copy_field(out.name, id.name);
    out.total_bytes = id.memory_total_bytes;
    out.cc_major = id.cc_major;
    out.cc_minor = id.cc_minor;
    copy_field(out.pci_bus_id, id.pci_bus_id);
    fill_sized(identity, out, kIdentityFieldsEnd);
    return GPUSEL_OK;
  });
}

}  // extern "C"
