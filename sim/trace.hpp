// GPUSEL_SIM_TRACE: each call into a driver double, one line each, with its arguments, what it
// wrote through its pointers (on success) and its result; and each cuGetProcAddress lookup of a
// symbol the double does not have. The value is "stderr" or a file, appended to (O_APPEND: lines
// of several processes and threads do not mix). Header-only: each double has its own copy.
#pragma once

#include <fcntl.h>
#ifdef _WIN32
#include <io.h>  // the C runtime's open and write
// Windows: not inherited by child processes, and no CRLF translation.
#define GPUSEL_TRACE_OPEN_FLAGS (_O_NOINHERIT | _O_BINARY)
#else
#include <unistd.h>
#define GPUSEL_TRACE_OPEN_FLAGS O_CLOEXEC
#endif

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>

namespace gpusel::sim::trace {

// The descriptor to trace to, or -1 when GPUSEL_SIM_TRACE is unset or empty. Read once.
inline int fd() {
  static const int out = [] {
    const char* where = std::getenv("GPUSEL_SIM_TRACE");
    if (where == nullptr || *where == '\0') return -1;
    if (std::strcmp(where, "stderr") == 0) return 2;
    const int f = ::open(where, O_WRONLY | O_CREAT | O_APPEND | GPUSEL_TRACE_OPEN_FLAGS, 0644);
    if (f < 0) {
      const std::string line = std::string("gpusel-sim: cannot open GPUSEL_SIM_TRACE=") + where +
                               ": " + std::strerror(errno) + "; tracing to stderr\n";
      (void)!::write(2, line.data(), line.size());
      return 2;
    }
    return f;
  }();
  return out;
}

inline bool on() {
  return fd() >= 0;
}

inline void emit(std::string line) {
  line += '\n';
  (void)!::write(fd(), line.data(), line.size());
}

// A C string, quoted and escaped, at most 200 bytes of it.
inline void quote(std::string& out, const char* s) {
  if (s == nullptr) {
    out += "NULL";
    return;
  }
  out += '"';
  std::size_t i = 0;
  for (; s[i] != '\0' && i < 200; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c >= 0x7f) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    } else {
      out += static_cast<char>(c);
    }
  }
  if (s[i] != '\0') out += "...";
  out += '"';
}

inline void pointer(std::string& out, const void* p) {
  if (p == nullptr) {
    out += "NULL";
    return;
  }
  char text[32];
  std::snprintf(text, sizeof text, "%p", p);
  out += text;
}

// One argument. `done`: the call succeeded, so what an output pointer points to is meaningful.
template <typename T>
void arg(std::string& out, const T& value, bool done) {
  if constexpr (std::is_same_v<T, const char*>) {
    quote(out, value);
  } else if constexpr (std::is_same_v<T, char*>) {
    pointer(out, value);
    if (done && value != nullptr) {
      out += "->";
      quote(out, value);
    }
  } else if constexpr (std::is_pointer_v<T> && std::is_function_v<std::remove_pointer_t<T>>) {
    pointer(out, reinterpret_cast<const void*>(value));  // a callback
  } else if constexpr (std::is_pointer_v<T>) {
    using P = std::remove_cv_t<std::remove_pointer_t<T>>;
    pointer(out, static_cast<const void*>(value));
    if constexpr (std::is_arithmetic_v<P> && !std::is_same_v<P, char>) {
      if (done && value != nullptr) out += "->" + std::to_string(*value);
    } else if constexpr (std::is_pointer_v<P>) {
      if (done && value != nullptr) {
        out += "->";
        pointer(out, static_cast<const void*>(*value));
      }
    }
  } else if constexpr (std::is_floating_point_v<T>) {
    out += std::to_string(value);
  } else if constexpr (std::is_integral_v<T> || std::is_enum_v<T>) {
    out += std::to_string(static_cast<long long>(value));
  } else {
    out += "{...}";  // a structure passed by value
  }
}

// "lib: name(a, b, ...) = result NAME" with `names` the parameter list as written ("(a, b)").
template <typename... A>
void call(const char* lib, const char* name, long long result, const char* result_name, bool done,
          const A&... args) {
  std::string line = "gpusel-sim[" + std::to_string(::getpid()) + "] " + lib + ": " + name + "(";
  bool first = true;
  (void)done;  // unused when there are no arguments
  ((line += first ? "" : ", ", first = false, arg(line, args, done)), ...);
  line += ") = " + std::to_string(result);
  if (result_name != nullptr) line += std::string(" ") + result_name;
  emit(std::move(line));
}

// A lookup of a symbol this double does not have.
inline void missing(const char* lib, const char* how, const char* symbol,
                    const std::string& detail) {
  std::string line =
      "gpusel-sim[" + std::to_string(::getpid()) + "] " + lib + ": MISSING " + how + " ";
  quote(line, symbol);
  if (!detail.empty()) line += " " + detail;
  emit(std::move(line));
}

}  // namespace gpusel::sim::trace
