// Shared by the fault libraries: which faults GPUSEL_FAULT asks for.
#pragma once

#include <cstdlib>
#include <cstring>

namespace gpusel_fault {

// True when the comma-separated list in GPUSEL_FAULT holds `mode`.
inline bool fault(const char* mode) {
  const char* list = std::getenv("GPUSEL_FAULT");
  if (list == nullptr) return false;
  const std::size_t n = std::strlen(mode);
  for (const char* p = list; *p != '\0';) {
    const char* end = std::strchr(p, ',');
    const std::size_t len = end ? static_cast<std::size_t>(end - p) : std::strlen(p);
    if (len == n && std::strncmp(p, mode, n) == 0) return true;
    if (end == nullptr) break;
    p = end + 1;
  }
  return false;
}

// Copies `text` into `buf` of `len` bytes. With `full`, fills all `len` bytes, padding with `pad`
// and leaving no terminating NUL (a driver that ignores the contract); else NUL-terminates.
inline void put(char* buf, std::size_t len, const char* text, bool full, char pad) {
  if (buf == nullptr || len == 0) return;
  std::size_t n = std::strlen(text);
  if (full) {
    if (n > len) n = len;
    std::memcpy(buf, text, n);
    std::memset(buf + n, pad, len - n);
    return;
  }
  if (n > len - 1) n = len - 1;
  std::memcpy(buf, text, n);
  buf[n] = '\0';
}

// Bytes that are not UTF-8 and terminal control sequences, for names, UUIDs and bus ids.
constexpr const char* kBadName = "Bad \xff\xfe GPU \x1b[31mred\x1b[0m\x07\x7f\x9b";

}  // namespace gpusel_fault
