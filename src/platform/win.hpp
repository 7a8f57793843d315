// Internal, Windows only: text conversion and error messages for the Win32 API. gpusel keeps
// UTF-8 everywhere; every Win32 call that takes text goes through its -W form with widen().
#pragma once

#ifndef _WIN32
#error "src/platform/win.hpp is for the Windows build"
#endif

#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#ifndef NOMINMAX
#define NOMINMAX
#endif
#include <windows.h>
// windows.h defines these as macros (16-bit pointer qualifiers); gpusel uses them as names.
#undef near
#undef far

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace gpusel::detail::win {

std::wstring widen(const std::string& utf8);
std::string narrow(const std::wstring& wide);

// FormatMessage's text for a Win32 error code (GetLastError()), without the trailing newline,
// followed by the code itself: "The specified module could not be found. (error 126)".
std::string error_text(DWORD code);

// An environment variable read through GetEnvironmentVariableW; nullopt when it is not set.
std::optional<std::wstring> environment(const wchar_t* name);

// The full path of this process's executable.
std::wstring module_path(HMODULE module = nullptr);

// An exit code as Windows reports it: "exit code 3", or, for an NTSTATUS exception
// (0xC0000005 and the like), "exception 0xC0000005 (access violation)".
std::string exit_code_text(DWORD code);

// True when `code` is an NTSTATUS error (a crash, or a process ended by TerminateProcess with such
// a code), not a value the program chose.
bool is_ntstatus_error(DWORD code);

// A command line CreateProcessW and the C runtime's argument parser (CommandLineToArgvW) split
// back into exactly `argv`: each argument quoted where it holds a blank, a tab or a quote, with
// backslashes doubled only before a quote.
std::wstring command_line(const std::vector<std::string>& argv);

// This process's environment (GetEnvironmentStringsW) as name -> value. Names compare without
// regard to case on Windows, so the map's key is the upper-cased name and `names` keeps the
// spelling.
struct Environment {
  std::map<std::wstring, std::pair<std::wstring, std::wstring>> vars;  // NAME -> (Name, value)
  static Environment current();
  void set(const std::string& name, const std::string& value);
  void unset(const std::string& name);
  // The block CreateProcessW takes with CREATE_UNICODE_ENVIRONMENT, sorted as Windows expects.
  std::wstring block() const;
};

// An owned HANDLE, closed on destruction.
class Handle {
 public:
  Handle() = default;
  explicit Handle(HANDLE h) : h_(h == INVALID_HANDLE_VALUE ? nullptr : h) {}
  Handle(Handle&& o) noexcept : h_(o.h_) { o.h_ = nullptr; }
  Handle& operator=(Handle&& o) noexcept {
    if (this != &o) {
      reset();
      h_ = o.h_;
      o.h_ = nullptr;
    }
    return *this;
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle() { reset(); }
  HANDLE get() const noexcept { return h_; }
  explicit operator bool() const noexcept { return h_ != nullptr; }
  HANDLE release() noexcept {
    HANDLE h = h_;
    h_ = nullptr;
    return h;
  }
  void reset() noexcept {
    if (h_ != nullptr) CloseHandle(h_);
    h_ = nullptr;
  }

 private:
  HANDLE h_ = nullptr;
};

// A Job Object that kills every process in it when its last handle closes (when this process
// ends, however it ends): no process gpusel starts outlives it.
Handle kill_on_close_job();

}  // namespace gpusel::detail::win
