// gpusel: parsing of a --gpu value (pure, no I/O).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "gpusel/export.h"

GPUSEL_BEGIN_NAMESPACE

// "GPU-" in any letter case at the start.
bool is_gpu_uuid(std::string_view entry) noexcept;
// One or more ASCII decimal digits and nothing else.
bool is_gpu_index(std::string_view entry) noexcept;

// The form the driver compares: a UUID gets an upper-case "GPU-" (the rest kept as typed); an
// index is returned as it is. Throws Error(BadInput) for anything else.
std::string canonical_entry(std::string_view entry);

// True when two canonical entries certainly name the same GPU: equal index values ("1" and "01"),
// or UUIDs equal apart from letter case.
bool same_entry(std::string_view a, std::string_view b) noexcept;

// Splits a --gpu value on commas. Blank entries are skipped and blanks around entries ignored.
// Throws Error(BadInput) when no entry is left, an entry is neither an index nor a UUID, indices
// and UUIDs are mixed, or one GPU is named twice.
std::vector<std::string> parse_gpu_spec(std::string_view value);

// As parse_gpu_spec, but the value must hold exactly one entry.
std::string parse_single_gpu(std::string_view value);

// "all" in any letter case, blanks around it ignored: every GPU CUDA_VISIBLE_DEVICES lets this
// process use.
bool is_all_entry(std::string_view entry) noexcept;

// A GPU request, as `gpusel resolve`, `run` and `bench bw`, the C ABI's gpusel_parse_gpu_spec and
// gpusel_resolve, and Python's parse_gpu_spec take it: parse_gpu_spec's lists (free:N among
// them), or "all" alone, returned as {"all"} (resolve_gpus expands it). A worker's own list
// (GPUSEL_GPUS, GPUSEL_GPU) names its GPUs and is read by parse_gpu_spec, which refuses "all".
std::vector<std::string> parse_gpu_request(std::string_view value);

// ASCII letter case ignored: does `text` start with `head`; are `a` and `b` equal.
bool starts_with_ci(std::string_view text, std::string_view head) noexcept;
bool equal_ci(std::string_view a, std::string_view b) noexcept;

// Joins entries with commas (for messages).
std::string join_entries(const std::vector<std::string>& entries);

GPUSEL_END_NAMESPACE
