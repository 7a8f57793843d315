// The stable names of gpusel's error codes (gpusel/error.hpp).
#include "gpusel/error.hpp"

GPUSEL_BEGIN_NAMESPACE

const char* error_code_name(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::None:
      return "none";
    case ErrorCode::Unspecified:
      return "unspecified";
    case ErrorCode::BadInput:
      return "bad-input";
    case ErrorCode::LibraryNotLoaded:
      return "library-not-loaded";
    case ErrorCode::LibraryIncomplete:
      return "library-incomplete";
    case ErrorCode::CudaLinkStub:
      return "cuda-link-stub";
    case ErrorCode::NoDevice:
      return "no-device";
    case ErrorCode::DriverCallFailed:
      return "driver-call-failed";
    case ErrorCode::GpuLost:
      return "gpu-lost";
    case ErrorCode::DriverBroken:
      return "driver-broken";
    case ErrorCode::ProbeUnavailable:
      return "probe-unavailable";
    case ErrorCode::ProbeTimedOut:
      return "probe-timed-out";
    case ErrorCode::ProbeFailed:
      return "probe-failed";
    case ErrorCode::BufferTooSmall:
      return "buffer-too-small";
  }
  return "unknown";
}

const char* subject_name(Subject subject) noexcept {
  switch (subject) {
    case Subject::None:
      return "none";
    case Subject::GpuRequest:
      return "gpu-request";
    case Subject::GpuEntry:
      return "gpu-entry";
    case Subject::VisibleDevices:
      return "cuda-visible-devices";
    case Subject::LaunchVariable:
      return "launch-variable";
    case Subject::Gpu:
      return "gpu";
    case Subject::Lease:
      return "lease";
    case Subject::Command:
      return "command";
    case Subject::Probe:
      return "probe";
  }
  return "unknown";
}

GPUSEL_END_NAMESPACE
