// Whole files through C stdio (file_text.hpp), on Linux and Windows alike.
#include "file_text.hpp"

#ifndef _WIN32
#include <fcntl.h>
#include <unistd.h>
#endif

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace gpusel::detail {
namespace {

// A file open for reading: read(2) on POSIX (no FILE or stdio buffer to allocate, and a /proc
// file's error, ESRCH for a process that has ended, comes back from the read), stdio on Windows.
class InFile {
 public:
  explicit InFile(const std::string& path) {
#ifdef _WIN32
    f_ = std::fopen(path.c_str(), "rb");
#else
    fd_ = open(path.c_str(), O_RDONLY | O_CLOEXEC);
#endif
  }
  ~InFile() {
    const int error = errno;  // a failed read's, kept for the caller
#ifdef _WIN32
    if (f_ != nullptr) std::fclose(f_);
#else
    if (fd_ >= 0) close(fd_);
#endif
    errno = error;
  }
  InFile(const InFile&) = delete;
  InFile& operator=(const InFile&) = delete;
  bool is_open() const {
#ifdef _WIN32
    return f_ != nullptr;
#else
    return fd_ >= 0;
#endif
  }
  // Past the end is no error: the reads then find nothing.
  bool seek(std::uint64_t offset) {
#ifdef _WIN32
    return _fseeki64(f_, static_cast<long long>(offset), SEEK_SET) == 0;
#else
    return lseek(fd_, static_cast<off_t>(offset), SEEK_SET) >= 0;
#endif
  }
  // Up to `size` bytes into `buf`: how many (0 at the end), or -1 when the read fails.
  long long read(char* buf, std::size_t size) {
#ifdef _WIN32
    const std::size_t got = std::fread(buf, 1, size, f_);
    return got == 0 && std::ferror(f_) != 0 ? -1 : static_cast<long long>(got);
#else
    for (;;) {
      const ssize_t got = ::read(fd_, buf, size);
      if (got >= 0 || errno != EINTR) return got;
    }
#endif
  }

 private:
#ifdef _WIN32
  std::FILE* f_ = nullptr;
#else
  int fd_ = -1;
#endif
};

}  // namespace

std::optional<std::string> read_file_text(const std::string& path, std::size_t limit,
                                          std::uint64_t offset) {
  InFile in(path);
  if (!in.is_open() || (offset > 0 && !in.seek(offset))) return std::nullopt;
  std::string text;
  char buf[16384];
  while (text.size() < limit) {
    const long long got = in.read(buf, sizeof buf);
    if (got < 0) return std::nullopt;
    if (got == 0) break;
    text.append(buf, static_cast<std::size_t>(got));
  }
  if (text.size() > limit) text.resize(limit);
  return text;
}

std::optional<std::string> read_first_line(const std::string& path) {
  InFile in(path);
  if (!in.is_open()) return std::nullopt;
  // Read in blocks up to the first '\n' (a NUL byte is part of the line, as for std::getline).
  std::string line;
  char buf[4096];
  for (bool any = false;;) {
    const long long got = in.read(buf, sizeof buf);
    if (got < 0 || (got == 0 && !any)) return std::nullopt;  // an error, or an empty file
    if (got == 0) break;
    any = true;
    const auto size = static_cast<std::size_t>(got);
    if (const void* end = std::memchr(buf, '\n', size); end != nullptr) {
      line.append(buf, static_cast<std::size_t>(static_cast<const char*>(end) - buf));
      break;
    }
    line.append(buf, size);
  }
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
