// What /proc tells of a process on Linux: its ancestry, environment, arguments and stat line.
#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "ancestry.hpp"
#include "env.hpp"
#include "file_text.hpp"

namespace gpusel::detail {

std::optional<std::string> env_value(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::nullopt : std::optional<std::string>(v);
}

void read_env_values(const char* const* names, std::size_t count, const std::uint64_t* by_slot,
                     std::uint64_t indexed, std::optional<std::string>* values) {
  const std::uint64_t all = count >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << count) - 1;
  for (std::uint64_t alone = all & ~indexed; alone != 0; alone &= alone - 1) {
    const auto i = static_cast<std::size_t>(__builtin_ctzll(alone));
    values[i] = env_value(names[i]);
  }
  for (std::size_t i = 64; i < count; ++i) values[i] = env_value(names[i]);
  // The indexed names not found yet (the first value set counts, as for getenv).
  std::uint64_t left_to_find = indexed & all;
  for (char** entry = environ; entry != nullptr && *entry != nullptr && left_to_find != 0;
       ++entry) {
    const char* text = *entry;
    if (text[0] == '\0' || text[1] == '\0') continue;  // no name of two bytes or more
    for (std::uint64_t candidates = by_slot[env_slot(text)] & left_to_find; candidates != 0;
         candidates &= candidates - 1) {
      const auto i = static_cast<std::size_t>(__builtin_ctzll(candidates));
      const char* name = names[i];
      std::size_t k = 0;
      while (name[k] != '\0' && text[k] == name[k]) ++k;
      if (name[k] != '\0' || text[k] != '=') continue;
      values[i] = std::string(text + k + 1);
      left_to_find &= ~(std::uint64_t{1} << i);
    }
  }
}

// The file NAME of process `pid` in /proc, whole (at most `limit` bytes); nullopt when it cannot be
// read. Read with read(2) (read_file_text), never an iostream: a process that ends between the
// open and the read makes read fail with ESRCH, which libstdc++'s stream buffer throws as an
// exception.
std::optional<std::string> process_file(int pid, const char* name, std::size_t limit) {
  return read_file_text("/proc/" + std::to_string(pid) + "/" + name, limit);
}

std::vector<std::string> process_args(int pid, std::size_t limit) {
  std::vector<std::string> words;
  const std::optional<std::string> text = process_file(pid, "cmdline", limit);
  if (!text) return words;
  for (std::size_t start = 0; start < text->size();) {
    std::size_t end = text->find('\0', start);
    if (end == std::string::npos) end = text->size();
    words.emplace_back(*text, start, end - start);
    start = end + 1;
  }
  return words;
}

// A process's environment at its start, from /proc; nullopt when it cannot be read.
std::optional<std::map<std::string, std::string>> initial_environment(int pid) {
  const std::optional<std::string> read = process_file(pid, "environ", 4u << 20);
  if (!read) return std::nullopt;
  const std::string& text = *read;
  std::map<std::string, std::string> env;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\0', start);
    if (end == std::string::npos) end = text.size();
    const std::string_view entry(text.data() + start, end - start);
    const std::size_t eq = entry.find('=');
    if (eq != std::string_view::npos)
      env.emplace(std::string(entry.substr(0, eq)), std::string(entry.substr(eq + 1)));
    start = end + 1;
  }
  return env;
}

// Read with read(2) (see process_file); the fields up to the 22nd lie well within the first 1,024
// bytes, whatever the command's name (at most 16 bytes, and it may hold anything: the last ')'
// ends it).
std::optional<ProcessStat> process_stat(int pid) {
  const std::string path = "/proc/" + std::to_string(pid) + "/stat";
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  struct stat st {};
  char buf[1024];
  const ssize_t n = fstat(fd, &st) == 0 ? read(fd, buf, sizeof buf - 1) : -1;
  close(fd);
  if (n <= 0) return std::nullopt;
  buf[n] = '\0';
  const char* close_paren = std::strrchr(buf, ')');
  if (close_paren == nullptr) return std::nullopt;
  ProcessStat s;
  s.owner = st.st_uid;
  const char* p = close_paren + 1;
  for (int field = 3; field <= 22; ++field) {
    while (*p == ' ') ++p;
    if (*p == '\0') return std::nullopt;
    const char* end = std::strchr(p, ' ');
    if (end == nullptr) end = p + std::strlen(p);
    const std::string text(p, end);
    if (field == 3) s.state = text[0];
    if (field == 4) s.parent = std::atoi(text.c_str());
    if (field == 5) s.group = std::atoi(text.c_str());
    if (field == 22) s.start = std::strtoull(text.c_str(), nullptr, 10);
    p = end;
  }
  return s;
}

int parent_of(int pid) {
  const std::optional<ProcessStat> s = process_stat(pid);
  return s ? s->parent : 0;
}

namespace {

// This process's id, once asked (0 until then): NVML's session checks ask on every call to tell a
// forked child from its parent, a system call each (25,000 of them for a `list` of 1,024 GPUs).
// A child made by fork() starts with 0 again (the handler below, which fork runs in the child);
// one made otherwise (vfork, a raw clone) runs no gpusel code before it execs.
std::atomic<int> known_pid{0};

void forget_pid() {
  known_pid.store(0, std::memory_order_relaxed);
}

}  // namespace

int current_pid() {
  int pid = known_pid.load(std::memory_order_relaxed);
  if (pid != 0) return pid;
  static const bool registered = pthread_atfork(nullptr, nullptr, forget_pid) == 0;
  pid = static_cast<int>(getpid());
  if (registered) known_pid.store(pid, std::memory_order_relaxed);
  return pid;
}

}  // namespace gpusel::detail
