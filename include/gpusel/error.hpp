// gpusel: the one exception type of the library, carrying the exit code a CLI should use, and what
// went wrong as data (a code, the driver call and what it returned), which callers decide from.
// The text is for people; no caller should search it.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gpusel/export.h"

GPUSEL_BEGIN_NAMESPACE

// BadInput: the user gave a value gpusel cannot accept (exit code 2).
// Failure: something outside the user's input went wrong (exit code 1).
enum class ErrorKind { Failure = 1, BadInput = 2 };

// What went wrong, for code to decide from. The values are fixed (the C ABI and the CUDA probe's
// helper pass them as numbers): a new code takes a new number, an old one is never reused.
enum class ErrorCode {
  None = 0,
  Unspecified = 1,        // no code of its own (the text says what)
  BadInput = 2,           // a value the caller gave
  LibraryNotLoaded = 3,   // the NVIDIA library (libnvidia-ml.so.1, libcuda.so.1) cannot be opened
  LibraryIncomplete = 4,  // it lacks functions gpusel needs: a driver too old, or another library
  CudaLinkStub = 5,       // the libcuda.so.1 found is the CUDA toolkit's link stub, not the driver
  NoDevice = 6,           // the driver enumerates no device (CUDA_ERROR_NO_DEVICE)
  DriverCallFailed = 7,   // a driver function returned an error: see Problem::call and ::result
  GpuLost = 8,            // NVML says the GPU has fallen off the bus (NVML_ERROR_GPU_IS_LOST)
  DriverBroken = 9,       // the driver answered something impossible (a device count past any)
  ProbeUnavailable = 10,  // the CUDA probe's helper program is not installed, or cannot start
  ProbeTimedOut = 11,     // the CUDA probe did not answer in time
  ProbeFailed = 12,       // the CUDA probe ended without an answer gpusel could read
  BufferTooSmall = 13,    // a caller's buffer is too small for the answer (the C ABI's)
};

// What a problem is about: the value or thing its message names, so a caller can decide from it
// without reading the message. Each has a stable name (subject_name) for machine-readable output.
enum class Subject {
  None,            // nothing in particular (a driver call's failure names its call)
  GpuRequest,      // a GPU request as a whole (--gpu's value): field "request"
  GpuEntry,        // one entry of a GPU request: "entry", "reason", and "gpu" (a UUID) where known
  VisibleDevices,  // the CUDA_VISIBLE_DEVICES preset: "variable", "value", "reason"
  LaunchVariable,  // a variable of the launch (LOCAL_RANK, GPUSEL_SHARE ...): "variable", "value"
  Gpu,             // one GPU: "gpu" (a UUID) and "index" where known
  Lease,           // the lease store or one lease: "path" where known
  Command,         // the program gpusel is asked to run: "command"
  Probe,           // the CUDA probe (asking CUDA in a child process): "variable", "value"
};

// One named value of a problem: the entry as given, the variable's value, a GPU's UUID. Values are
// text as the user or the driver gave them.
struct ProblemField {
  std::string name;
  std::string value;
  friend bool operator==(const ProblemField&, const ProblemField&) = default;
};

// The data of a failure: a code, what it is about (subject) and the values it names (fields).
// `call` and `result` are set where a driver function returned an error (DriverCallFailed,
// GpuLost, NoDevice ...): its name ("cuInit", "nvmlDeviceGetUUID") and its return value (a
// CUresult or nvmlReturn_t).
struct Problem {
  Problem() = default;
  Problem(ErrorCode code_, std::string call_ = {}, long long result_ = 0)
      : code(code_), call(std::move(call_)), result(result_) {}
  ErrorCode code = ErrorCode::None;
  std::string call;
  long long result = 0;
  Subject subject = Subject::None;
  std::vector<ProblemField> fields;
  explicit operator bool() const noexcept { return code != ErrorCode::None; }
  // The field named `name`, or nullptr.
  const std::string* field(std::string_view name) const noexcept {
    for (const ProblemField& f : fields) {
      if (f.name == name) return &f.value;
    }
    return nullptr;
  }
};

// A note: something true that explains an answer without failing it (a preset that renumbers
// GPUs, a GPU left out, leases that bind one user only), in words and by a stable code, so that a
// caller decides from the code ("preset-renumbers") and never from the words. docs/commands.md
// lists the codes.
struct Note {
  std::string code;
  std::string text;
  friend bool operator==(const Note&, const Note&) = default;
};

// A problem with no code yet (Error gives it one from its kind) about `subject`.
inline Problem about(Subject subject, std::vector<ProblemField> fields = {}) {
  Problem p;
  p.subject = subject;
  p.fields = std::move(fields);
  return p;
}

// The stable name of a code ("cuda-link-stub"), for machine-readable output; "unknown" for a
// value outside the enumeration.
const char* error_code_name(ErrorCode code) noexcept;

// The stable name of a subject ("gpu-entry"); "none" for Subject::None.
const char* subject_name(Subject subject) noexcept;

// Whom a message is worded for. The library's messages name the value they are about and the
// remedy in the words of whoever gave the value: a program (C++, C through gpusel.h, Python) hears
// of a "GPU request" and a "GPU entry" and is pointed to gpusel_list_gpus and nvidia-smi; the
// gpusel command's users hear of --gpu and `gpusel list`, as they typed them. Where the two
// wordings differ, a message holds both, and whoever shows it (the C ABI, the gpusel command) words
// it for its own reader.
enum class Audience { Program, CommandLine };

// A message holding both wordings, as its reader reads it; text without the second wording is
// returned as it is.
std::string worded(std::string_view message, Audience audience);

class Error : public std::runtime_error {
 public:
  // `message` may hold both wordings (detail::reader_text); what() is the program's.
  Error(ErrorKind kind, const std::string& message, Problem problem = {})
      : std::runtime_error(worded(message, Audience::Program)),
        kind_(kind),
        problem_(std::move(problem)),
        text_(message) {
    if (!problem_) {
      problem_.code = kind == ErrorKind::BadInput ? ErrorCode::BadInput : ErrorCode::Unspecified;
    }
  }
  ErrorKind kind() const noexcept { return kind_; }
  int exit_code() const noexcept { return static_cast<int>(kind_); }
  ErrorCode code() const noexcept { return problem_.code; }
  const Problem& problem() const noexcept { return problem_; }
  // The message in `audience`'s words (what() is the program's).
  std::string message(Audience audience) const { return worded(text_, audience); }
  // The message with both wordings, to build another message from.
  const std::string& text() const noexcept { return text_; }

 private:
  ErrorKind kind_;
  Problem problem_;
  std::string text_;
};

inline Error bad_input(const std::string& message, Problem problem = {}) {
  return Error(ErrorKind::BadInput, message, std::move(problem));
}
inline Error failure(const std::string& message, Problem problem = {}) {
  return Error(ErrorKind::Failure, message, std::move(problem));
}

GPUSEL_END_NAMESPACE
