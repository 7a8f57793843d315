// gpusel: parsing of a --gpu value (pure, no I/O).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gpusel/export.h"

GPUSEL_BEGIN_NAMESPACE

// One GPU a --gpu entry names, read once: downstream code works on the kind and the value, never on
// the text again.
struct GpuEntry {
  enum class Kind : unsigned char {
    Index,  // an nvidia-smi index, or under a preset CUDA_VISIBLE_DEVICES a position in it
    Uuid,   // a GPU UUID, or a prefix of one that must name exactly one GPU
  };
  Kind kind = Kind::Index;
  // The entry's canonical text, for messages and for the driver: the digits as given, or "GPU-"
  // in upper case and the rest as given.
  std::string text;
  // An Index's value, leading zeros ignored ("01" is 1); UINT64_MAX for one past 64 bits, which
  // no machine's list reaches. 0 for a UUID.
  std::uint64_t index = 0;
  bool is_uuid() const noexcept { return kind == Kind::Uuid; }
};

// A --gpu request, read once: named GPUs (all indices or all UUIDs, each GPU once), free:N, or
// all.
struct GpuRequest {
  enum class Kind : unsigned char { Gpus, Free, All };
  Kind kind = Kind::Gpus;
  std::vector<GpuEntry> gpus;  // Gpus: in rank order
  int free_count = 0;          // Free: N
  // The request as parse_gpu_request gives it: the entries' texts, {"free:N"} or {"all"}.
  std::vector<std::string> texts() const;
};

// Reads a --gpu value into a request, by the rules of parse_gpu_request (`all` alone accepted)
// or, with `all_allowed` false, of parse_gpu_spec (a worker's own list names its GPUs). Throws
// Error(BadInput) as they do.
GpuRequest read_gpu_request(std::string_view value, bool all_allowed = true);

// "GPU-" in any letter case at the start.
bool is_gpu_uuid(std::string_view entry) noexcept;
// One or more ASCII decimal digits and nothing else.
bool is_gpu_index(std::string_view entry) noexcept;

// Splits a --gpu value on commas. Blank entries are skipped and blanks around entries ignored.
// Throws Error(BadInput) when no entry is left, an entry is neither an index nor a UUID, indices
// and UUIDs are mixed, or one GPU is named twice.
std::vector<std::string> parse_gpu_spec(std::string_view value);

// As parse_gpu_spec, but the value must hold exactly one entry.
std::string parse_single_gpu(std::string_view value);
// The same, read once into a request of one GPU (or free:N, which parse_single_gpu passes on as
// one entry).
GpuRequest read_single_gpu(std::string_view value);

// A GPU request, as `gpusel resolve`, `run` and `bench bw`, the C ABI's gpusel_parse_gpu_spec and
// gpusel_resolve, and Python's parse_gpu_spec take it: parse_gpu_spec's lists (free:N among
// them), or "all" alone, returned as {"all"} (resolve_gpus expands it). A worker's own list
// (GPUSEL_GPUS, GPUSEL_GPU) names its GPUs and is read by parse_gpu_spec, which refuses "all".
std::vector<std::string> parse_gpu_request(std::string_view value);

GPUSEL_END_NAMESPACE
