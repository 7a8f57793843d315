// The CUDA probe's child side, private to the resolution layer: what gpusel-probe-cuda (the
// library's helper program, src/resolution/probe_helper.cpp) runs.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "gpusel/cuda.hpp"
#include "gpusel/error.hpp"

namespace gpusel::detail {

// The helper program's file name (the library looks for it, see default_probe_helper).
#ifdef _WIN32
inline constexpr const char* kProbeHelperName = "gpusel-probe-cuda.exe";
#else
inline constexpr const char* kProbeHelperName = "gpusel-probe-cuda";
#endif

// The lines the child prints for `devices` (one device a line, tab-separated fields), and their
// parser: the probe's wire format, known to this layer only.
std::string serialise_devices(const std::vector<CudaDevice>& devices);
std::optional<std::vector<CudaDevice>> parse_devices(const std::string& text);

// A failure in the child, on the wire: "error", the ErrorCode's number, the driver call, its return
// value and the message, tab-separated on one line. parse_failure reads it back (false when `text`
// is not one such line: a child that died without saying why).
std::string serialise_failure(const std::string& message, const Problem& problem);
bool parse_failure(const std::string& text, std::string& message, Problem& problem);

// Prints what CUDA enumerates in this process on stdout, one device a line (the format probe.cpp's
// parser reads), and returns 0; on failure prints serialise_failure's line and returns 1. Dies with
// the process that started it (GPUSEL_PROBE_PARENT names it), even while cuInit hangs.
int probe_child_main();

}  // namespace gpusel::detail
