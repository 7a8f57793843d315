// gpusel: the fields of one GPU (gpusel/gpu_fields.def): the table, and each field's value.
#include "gpusel/gpu_fields.hpp"

#include <array>
#include <utility>

#include "gpusel/visible.hpp"
#include "gpusel_detail.hpp"

GPUSEL_BEGIN_NAMESPACE

namespace {

constexpr std::array kSpecs = {
#define GPUSEL_GPU_FIELD(name, kind, when, header, width, give_way, cut) \
  FieldSpec{GpuField::name, #name, FieldKind::kind, FieldRead::when, header, width, give_way, cut},
#define GPUSEL_GPU_READING(name, kind, when, header, width, give_way, cut, symbol) \
  GPUSEL_GPU_FIELD(name, kind, when, header, width, give_way, cut)
#include "gpusel/gpu_fields.def"
#undef GPUSEL_GPU_FIELD
#undef GPUSEL_GPU_READING
};

// The table's rows are in GpuField's order, so a field's row is found by its number.
constexpr bool in_order() {
  for (std::size_t i = 0; i < kSpecs.size(); ++i) {
    if (static_cast<std::size_t>(kSpecs[i].field) != i) return false;
  }
  return true;
}
static_assert(in_order());

// The field of each reading, by GpuReading.
constexpr std::array<GpuField, kGpuReadingCount> kReadingFields = {
#define GPUSEL_GPU_FIELD(name, kind, when, header, width, give_way, cut)
#define GPUSEL_GPU_READING(name, kind, when, header, width, give_way, cut, symbol) GpuField::name,
#include "gpusel/gpu_fields.def"
#undef GPUSEL_GPU_FIELD
#undef GPUSEL_GPU_READING
};

// The reading a GPUSEL_GPU_READING row keeps, by its field; nullopt for the other rows.
constexpr std::optional<GpuReading> reading_of(GpuField field) {
  for (std::size_t r = 0; r < kReadingFields.size(); ++r) {
    if (kReadingFields[r] == field) return static_cast<GpuReading>(r);
  }
  return std::nullopt;
}

FieldValue number(std::int64_t n) {
  return FieldValue{true, n, {}};
}
FieldValue text(std::string t) {
  return FieldValue{true, 0, std::move(t)};
}
template <typename T>
FieldValue optional_number(const std::optional<T>& n) {
  return n ? number(static_cast<std::int64_t>(*n)) : FieldValue{};
}

// NVIDIA's own numbers and modes, which an AMD GPU does not have.
bool nvidia_only(GpuField field) {
  switch (field) {
    case GpuField::nvidia_smi_index:
    case GpuField::cuda_ordinal:
    case GpuField::cuda_visibility:
    case GpuField::compute_capability:
    case GpuField::mig_enabled:
      return true;
    default:
      return false;
  }
}

// The value of a field with a reader of its own (GPUSEL_GPU_FIELD rows).
FieldValue own_field(const GpuView& v, GpuField field) {
  const GpuInfo& g = v.gpu;
  if (v.amd && nvidia_only(field)) return FieldValue{};
  switch (field) {
    case GpuField::vendor:
      return text(v.amd ? "amd" : "nvidia");
    case GpuField::rocm_smi_index:
      return v.amd ? number(g.index) : FieldValue{};
    case GpuField::hip_ordinal:
      return v.amd ? optional_number(v.hip_ordinal) : FieldValue{};
    case GpuField::nvidia_smi_index:
      return number(g.index);
    case GpuField::cuda_ordinal:
      return v.cuda_known && v.cuda_ordinal >= 0 ? number(v.cuda_ordinal) : FieldValue{};
    case GpuField::uuid:
      return g.failed() ? FieldValue{} : text(g.uuid);
    case GpuField::name:
      return text(g.name);
    case GpuField::memory_total_bytes:
      return g.memory_total_bytes == 0 ? FieldValue{}
                                       : number(static_cast<std::int64_t>(g.memory_total_bytes));
    case GpuField::pci_bus_id:
      return text(g.pci_bus_id);
    case GpuField::numa_node:
      return optional_number(g.numa_node);
    case GpuField::memory_used_bytes:
      return optional_number(g.memory_used);
    case GpuField::utilization_percent:
      return optional_number(g.utilization);
    case GpuField::cuda_visibility:
      return text(!v.cuda_known ? "unknown" : v.cuda_ordinal >= 0 ? "visible" : "hidden");
    case GpuField::state:
      return text(!g.failed() ? "ok" : g.problem.code == ErrorCode::GpuLost ? "lost" : "error");
    case GpuField::failure:
      return g.failed() ? text(g.failure) : FieldValue{};
    case GpuField::compute_capability:
      return g.cc_major < 0 ? FieldValue{}
                            : text(std::to_string(g.cc_major) + "." + std::to_string(g.cc_minor));
    case GpuField::cpus:
      return text(detail::format_cpu_list(g.cpus));
    case GpuField::mig_enabled:
      return number(g.mig_enabled ? 1 : 0);
      // No default: a GPUSEL_GPU_FIELD row without a case here is a warning (an error in gpusel's
      // builds). The readings have their value from GpuInfo::readings (gpu_field).
#define GPUSEL_GPU_FIELD(name, kind, when, header, width, give_way, cut)
#define GPUSEL_GPU_READING(name, kind, when, header, width, give_way, cut, symbol) \
  case GpuField::name:
#include "gpusel/gpu_fields.def"
#undef GPUSEL_GPU_FIELD
#undef GPUSEL_GPU_READING
      break;
  }
  return FieldValue{};
}

}  // namespace

std::span<const FieldSpec> gpu_field_specs() noexcept {
  return kSpecs;
}

const FieldSpec& gpu_field_spec(GpuField field) noexcept {
  return kSpecs[static_cast<std::size_t>(field)];
}

const FieldSpec& gpu_reading_spec(GpuReading reading) noexcept {
  return gpu_field_spec(kReadingFields[static_cast<std::size_t>(reading)]);
}

const FieldSpec* find_gpu_field(std::string_view name) noexcept {
  for (const FieldSpec& spec : kSpecs) {
    if (name == spec.name) return &spec;
  }
  return nullptr;
}

FieldValue gpu_field(const GpuView& view, GpuField field) {
  if (const std::optional<GpuReading> r = reading_of(field)) {
    const std::optional<std::uint64_t> n = view.gpu.reading(*r);
    if (!n) return FieldValue{};
    return number(gpu_field_spec(field).kind == FieldKind::Flag ? (*n != 0 ? 1 : 0)
                                                                : static_cast<std::int64_t>(*n));
  }
  return own_field(view, field);
}

std::string gpu_field_cell(const GpuView& view, GpuField field) {
  const FieldSpec& spec = gpu_field_spec(field);
  const FieldValue value = gpu_field(view, field);
  if (!value.present) {
    switch (spec.kind) {
      case FieldKind::Ordinal:
        return view.cuda_known ? "-" : "?";
      case FieldKind::Signed:
        return "-";
      case FieldKind::Text:
        return "";
      default:
        return "?";
    }
  }
  switch (spec.kind) {
    case FieldKind::Text:
      return detail::printable(value.text);
    case FieldKind::Bytes:
      return detail::format_bytes(static_cast<std::uint64_t>(value.number));
    case FieldKind::Percent:
      return std::to_string(value.number) + "%";
    case FieldKind::Flag:
      return value.number != 0 ? "yes" : "no";
    default:
      return std::to_string(value.number);
  }
}

std::string field_plain_text(const FieldSpec& spec, const FieldValue& value) {
  if (!value.present) return "";
  if (spec.kind == FieldKind::Text) return value.text;
  return std::to_string(value.number);
}

GPUSEL_END_NAMESPACE
