// gpusel: the fields of one GPU, from the one table (gpusel/gpu_fields.def): their names, how each
// is written, and each one's value for a GPU of an NVML listing (pure, no I/O).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "gpusel/export.h"

GPUSEL_BEGIN_NAMESPACE

struct GpuInfo;

// Every field of the table, in its order.
enum class GpuField : unsigned {
#define GPUSEL_GPU_FIELD(name, kind, when, header, width, give_way, cut) name,
#define GPUSEL_GPU_READING(name, kind, when, header, width, give_way, cut, symbol) name,
#include "gpusel/gpu_fields.def"
#undef GPUSEL_GPU_FIELD
#undef GPUSEL_GPU_READING
};

// The fields NVML gives by one call each (GPUSEL_GPU_READING rows), in the table's order: the
// positions of GpuInfo::readings.
enum class GpuReading : unsigned {
#define GPUSEL_GPU_FIELD(name, kind, when, header, width, give_way, cut)
#define GPUSEL_GPU_READING(name, kind, when, header, width, give_way, cut, symbol) name,
#include "gpusel/gpu_fields.def"
#undef GPUSEL_GPU_FIELD
#undef GPUSEL_GPU_READING
  Count
};
inline constexpr std::size_t kGpuReadingCount = static_cast<std::size_t>(GpuReading::Count);

// How a field's value is written. Text: a string; Count: a number >= 0; Signed: a number that may
// be negative; Ordinal: a CUDA ordinal (absent when CUDA does not see the GPU); Bytes, Percent: a
// number, written with its unit in the text table; Flag: true or false.
enum class FieldKind { Text, Count, Signed, Ordinal, Bytes, Percent, Flag };

// When a field is read: with every listing, or only with usage (`list`, GPUSEL_LIST_USAGE).
enum class FieldRead { Always, Usage };

struct FieldSpec {
  GpuField field;
  const char* name;
  FieldKind kind;
  FieldRead when;
  const char* header;  // "" when the text table has no column for it
  unsigned width;      // 0: as wide as its widest cell
  unsigned give_way;   // order in which the column gives way to a narrow terminal; 0: never
  unsigned cut;        // giving way, it is cut to this many characters; 0: it is dropped
};

// The table, in its order.
std::span<const FieldSpec> gpu_field_specs() noexcept;
const FieldSpec& gpu_field_spec(GpuField field) noexcept;
const FieldSpec& gpu_reading_spec(GpuReading reading) noexcept;
// The field of that name, or nullptr.
const FieldSpec* find_gpu_field(std::string_view name) noexcept;

// One GPU of a listing, with what only the listing knows: its CUDA ordinal in this process.
struct GpuView {
  const GpuInfo& gpu;
  int cuda_ordinal = -1;   // -1: CUDA does not see it (or cuda_known is false)
  bool cuda_known = true;  // false: the ordinal depends on what NVML cannot tell
  // An AMD GPU (ROCm SMI's): `gpu.index` is rocm-smi's, and the NVIDIA-only fields are absent.
  bool amd = false;
  // AMD: HIP's number for it here; nullopt hidden or unknown.
  std::optional<int> hip_ordinal = std::nullopt;
};

// A field's value: absent when NVML did not give a number, or the field does not apply (the UUID
// of a GPU NVML cannot read, the CUDA ordinal of a hidden GPU, the failure of a readable GPU); a
// text NVML did not give (name, pci_bus_id, cpus) is present and "". Numbers in `number`, Text in
// `text`, Flag as 0/1.
struct FieldValue {
  bool present = false;
  std::int64_t number = 0;
  std::string text;
};

FieldValue gpu_field(const GpuView& view, GpuField field);

// A field as the text table writes it ("80 GiB", "35%", "-" for a hidden GPU's CUDA ordinal, "?"
// for what NVML did not give); control bytes of driver text escaped.
std::string gpu_field_cell(const GpuView& view, GpuField field);

// A field as plain text, for the C ABI: a number in decimal, a flag as "1" or "0", text as NVML
// gave it; "" when absent (FieldValue::present says which).
std::string field_plain_text(const FieldSpec& spec, const FieldValue& value);

GPUSEL_END_NAMESPACE
