// gpusel: --gpu entries to full GPU UUIDs, one per rank (pure, no I/O).
#pragma once

#include <string>
#include <vector>

#include "gpusel/export.h"
#include "gpusel/spec.hpp"
#include "gpusel/visible.hpp"

GPUSEL_BEGIN_NAMESPACE

// Resolves entries (a request read by read_gpu_request) against the physical GPUs NVML reported.
// Without a preset CUDA_VISIBLE_DEVICES an index is an nvidia-smi index and a UUID prefix must
// name exactly one GPU. With a preset, an index counts within the devices the driver exposes and
// a UUID must name one of the preset's UUID entries. Throws Error(BadInput) with a message naming
// the entry, the preset and the remedy.
std::vector<std::string> resolve_entries(const std::vector<GpuEntry>& entries,
                                         const std::vector<GpuInfo>& gpus, const CudaEnv& env,
                                         const std::vector<int>* cuda_order = nullptr);

// Quotes a value for a message: "value" with control characters escaped.
std::string quote_value(std::string_view value);

// `text` for a terminal: control bytes (C0, DEL, C1) and bytes that are not UTF-8 escaped as
// \xNN; well-formed UTF-8 kept. Driver strings (GPU names, process commands) go through it before
// they are printed.
std::string printable(std::string_view text);

// `value` as one POSIX shell word: single-quoted, each ' written as '\''; safe for eval. (`gpusel
// sim env` and `resolve --format env` print values so; lease holders' commands are shown so.)
std::string shell_quote(std::string_view value);

// Describes the preset for messages: CUDA_VISIBLE_DEVICES="..." or "unset".
std::string describe_preset(const CudaEnv& env);

GPUSEL_END_NAMESPACE
