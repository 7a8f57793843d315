// Whole files through C stdio (file_text.hpp), on Linux and Windows alike.
#include "file_text.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace gpusel::detail {
namespace {

// Closes `f` after a read; `ok`, with errno kept from the failure where it is false.
bool closed_after(std::FILE* f, bool ok) {
  const int error = errno;
  std::fclose(f);
  if (!ok) errno = error;
  return ok;
}

}  // namespace

std::optional<std::string> read_file_text(const std::string& path, std::size_t limit,
                                          std::uint64_t offset) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return std::nullopt;
  std::string text;
  bool ok = true;
  if (offset > 0) {
    // Past the end is not an error for fseek: the read below then finds nothing.
#ifdef _WIN32
    ok = _fseeki64(f, static_cast<long long>(offset), SEEK_SET) == 0;
#else
    ok = fseeko(f, static_cast<off_t>(offset), SEEK_SET) == 0;
#endif
  }
  char buf[16384];
  while (ok && text.size() < limit) {
    const std::size_t want = limit - text.size() < sizeof buf ? limit - text.size() : sizeof buf;
    const std::size_t got = std::fread(buf, 1, want, f);
    text.append(buf, got);
    if (got < want) {
      ok = std::ferror(f) == 0;
      break;
    }
  }
  if (!closed_after(f, ok)) return std::nullopt;
  return text;
}

std::optional<std::string> read_first_line(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return std::nullopt;
  // Read in blocks up to the first '\n' (a NUL byte is part of the line, as for std::getline).
  std::string line;
  char buf[4096];
  bool ok = true, any = false;
  for (;;) {
    const std::size_t got = std::fread(buf, 1, sizeof buf, f);
    if (got == 0) {
      ok = std::ferror(f) == 0 && any;
      break;
    }
    any = true;
    if (const void* end = std::memchr(buf, '\n', got); end != nullptr) {
      line.append(buf, static_cast<std::size_t>(static_cast<const char*>(end) - buf));
      break;
    }
    line.append(buf, got);
  }
  if (!closed_after(f, ok)) return std::nullopt;
  return line;
}

bool write_file_text(const std::string& path, std::string_view text, bool append) {
  std::FILE* f = std::fopen(path.c_str(), append ? "ab" : "wb");
  if (f == nullptr) return false;
  const bool written = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  int error = errno;
  const bool closed = std::fclose(f) == 0;
  if (written && !closed) error = errno;
  errno = error;
  return written && closed;
}

std::string_view next_word(std::string_view text, std::size_t& at) {
  const auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  while (at < text.size() && blank(text[at])) ++at;
  const std::size_t start = at;
  while (at < text.size() && !blank(text[at])) ++at;
  return text.substr(start, at - start);
}

std::optional<std::string_view> next_line(std::string_view text, std::size_t& at) {
  if (at >= text.size()) return std::nullopt;
  const std::size_t end = text.find('\n', at);
  const std::size_t stop = end == std::string_view::npos ? text.size() : end;
  const std::string_view line = text.substr(at, stop - at);
  at = end == std::string_view::npos ? text.size() : end + 1;
  return line;
}

}  // namespace gpusel::detail
