// gpusel: the one exception type of the library, carrying the exit code a CLI should use.
#pragma once

#include <stdexcept>
#include <string>

#include "gpusel/export.h"

GPUSEL_BEGIN_NAMESPACE

// BadInput: the user gave a value gpusel cannot accept (exit code 2).
// Failure: something outside the user's input went wrong (exit code 1).
enum class ErrorKind { Failure = 1, BadInput = 2 };

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const noexcept { return kind_; }
  int exit_code() const noexcept { return static_cast<int>(kind_); }

 private:
  ErrorKind kind_;
};

inline Error bad_input(const std::string& message) {
  return Error(ErrorKind::BadInput, message);
}
inline Error failure(const std::string& message) {
  return Error(ErrorKind::Failure, message);
}

GPUSEL_END_NAMESPACE
