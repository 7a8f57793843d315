// gpusel: the --gpu option for any CLI11 program, in one line:
//
//   std::vector<std::string> gpus;
//   gpusel::add_gpu_option(app, gpus);      // a list: --gpu 0,1 or --gpu GPU-8f3a,GPU-1c
//   std::string gpu;
//   gpusel::add_single_gpu_option(app, gpu);  // exactly one GPU
//
// The value is parsed by gpusel::parse_gpu_spec; a bad value fails CLI11's parse with gpusel's
// message, in the words of a command line that reads --gpu when the option is named so, else in
// a program's ("GPU request"). The exception is a GpuOptionError, a CLI::ValidationError that
// also carries gpusel's Error (its code, subject and fields). Header-only; needs CLI11 in the
// including program, not in libgpusel.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "gpusel/error.hpp"
#include "gpusel/export.h"
#include "gpusel/spec.hpp"

GPUSEL_BEGIN_NAMESPACE

// A bad value of a GPU option, as CLI11 reports it (what() is the message), with gpusel's Error
// as data for a program that reports failures as data (gpusel's own --json).
class GpuOptionError : public CLI::ValidationError {
 public:
  GpuOptionError(const std::string& message, const gpusel::Error& error)
      : CLI::ValidationError(message), error_(error.kind(), message, error.problem()) {}
  const gpusel::Error& error() const noexcept { return error_; }

 private:
  gpusel::Error error_;
};

// A bad value of the option `name` ("--gpu", "-g,--gpu" ...): in the command line's words when
// one of its names is --gpu.
inline GpuOptionError gpu_option_error(const Error& e, const std::string& name) {
  const bool gpu = ("," + name + ",").find(",--gpu,") != std::string::npos;
  return GpuOptionError(e.message(gpu ? Audience::CommandLine : Audience::Program), e);
}

inline CLI::Option* add_gpu_option(CLI::App& app, std::vector<std::string>& entries,
                                   const std::string& name = "--gpu",
                                   const std::string& help =
                                       "GPUs by nvidia-smi index or UUID "
                                       "(prefix), comma-separated") {
  return app
      .add_option_function<std::string>(
          name,
          [&entries, name](const std::string& value) {
            try {
              entries = parse_gpu_spec(value);
            } catch (const Error& e) {
              throw gpu_option_error(e, name);
            }
          },
          help)
      ->type_name("SPEC");
}

// The same option read into a typed request (read_gpu_request: indices, UUIDs or free:N; `all`
// too when `all_allowed`), which resolve_gpus and acquire_gpus take as it is.
inline CLI::Option* add_gpu_option(CLI::App& app, GpuRequest& request, const std::string& name,
                                   const std::string& help, bool all_allowed) {
  return app
      .add_option_function<std::string>(
          name,
          [&request, all_allowed, name](const std::string& value) {
            try {
              request = read_gpu_request(value, all_allowed);
            } catch (const Error& e) {
              throw gpu_option_error(e, name);
            }
          },
          help)
      ->type_name("SPEC");
}

inline CLI::Option* add_single_gpu_option(CLI::App& app, std::string& entry,
                                          const std::string& name = "--gpu",
                                          const std::string& help =
                                              "one GPU by nvidia-smi index "
                                              "or UUID (prefix)") {
  return app
      .add_option_function<std::string>(
          name,
          [&entry, name](const std::string& value) {
            try {
              entry = parse_single_gpu(value);
            } catch (const Error& e) {
              throw gpu_option_error(e, name);
            }
          },
          help)
      ->type_name("ENTRY");
}

GPUSEL_END_NAMESPACE
