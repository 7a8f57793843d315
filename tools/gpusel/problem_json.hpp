// Failures as data in gpusel's --json output: the library's error code (gpusel/error.hpp) by its
// stable name, with the driver call and its return value where one failed.
#pragma once

#include <exception>
#include <nlohmann/json.hpp>

#include "gpusel/error.hpp"

namespace gpusel::cli {

// {"code": "gpu-lost", "call": "nvmlDeviceGetHandleByIndex_v2", "result": 15, "subject": null,
// "fields": {}}; `call` and `result` are null where no driver call failed, `subject` where the
// problem is about nothing in particular; `fields` holds the named values, as text
// ({"entry": "9", "reason": "out-of-range"}). null for ErrorCode::None.
nlohmann::json problem_json(const Problem& problem);

// What a --json command prints on stdout when it fails, beside its message on stderr:
// {"error": {"code", "call", "result", "subject", "fields", "exit_code", "message"}}; a failure
// that is not a gpusel::Error is "unspecified" with exit code 1.
nlohmann::json failure_json(const std::exception& failure);

// Reports a failed command: its message on stderr, and with `json` failure_json on stdout.
// Returns the exit status (the error's, else 1).
int report_failure(const std::exception& failure, bool json);

}  // namespace gpusel::cli
