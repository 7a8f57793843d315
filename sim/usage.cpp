// Usage shared between the simulated drivers of several processes.
//
// The folder is per user and checked before anything in it is read, written or removed: every
// level is opened with O_DIRECTORY | O_NOFOLLOW (the base named by GPUSEL_SIM_STATE_DIR may be
// reached through links the user chose, but is itself checked on the opened descriptor) and
// must be owned by the user and writable by nobody else; entries are opened relative to the
// checked folder with O_NOFOLLOW and must be regular files; a stale entry is removed with
// unlinkat in that folder, which removes a name there and never follows it. So a folder that
// another user made first, or a link planted in it, is refused instead of followed.
#include "usage.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <mutex>

#include "sim_common.hpp"
#include "text.hpp"

namespace gpusel::sim {
namespace {

std::mutex entries_mutex;
std::map<std::string, int> entries;  // this process's entry per GPU folder: a locked descriptor
std::atomic<bool> reported{false};   // the unusable folder was reported (once per process)

class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  Fd(Fd&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  int get() const { return fd_; }
  int release() {
    const int f = fd_;
    fd_ = -1;
    return f;
  }

 private:
  int fd_;
};

// Why the opened folder may not be used, or "" when it may.
std::string refuse_reason(int fd) {
  struct stat st {};
  if (fstat(fd, &st) != 0) return std::string("cannot be examined (") + std::strerror(errno) + ")";
  if (!S_ISDIR(st.st_mode)) return "is not a folder";
  if (st.st_uid != geteuid()) {
    return "belongs to user id " + std::to_string(st.st_uid) + ", not to you (user id " +
           std::to_string(geteuid()) + ")";
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%03o", static_cast<unsigned>(st.st_mode & 0777));
    return std::string("is writable by other users (mode ") + mode + ")";
  }
  return "";
}

// mkdir + open one level below `parent` (AT_FDCWD: an absolute path) without following a link,
// then the checks above. Sets `why` and returns -1 when the folder may not be used.
int open_level(int parent, const std::string& name, bool follow, std::string& why) {
  if (mkdirat(parent, name.c_str(), 0700) != 0 && errno != EEXIST) {
    why = std::string("cannot be created (") + std::strerror(errno) + ")";
    return -1;
  }
  Fd fd(
      openat(parent, name.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | (follow ? 0 : O_NOFOLLOW)));
  if (fd.get() < 0) {
    why = errno == ELOOP || errno == ENOTDIR
              ? std::string("is a symbolic link or not a folder")
              : std::string("cannot be opened (") + std::strerror(errno) + ")";
    return -1;
  }
  why = refuse_reason(fd.get());
  return why.empty() ? fd.release() : -1;
}

// The base folder's path and whether the user named it (GPUSEL_SIM_STATE_DIR).
std::string base_dir(bool* named) {
  *named = false;
  if (const char* dir = std::getenv("GPUSEL_SIM_STATE_DIR"); dir != nullptr && *dir != '\0') {
    *named = true;
    return dir;
  }
  if (const char* run = std::getenv("XDG_RUNTIME_DIR"); run != nullptr && run[0] == '/') {
    return std::string(run) + "/gpusel-sim";
  }
  return "/tmp/gpusel-sim-" + std::to_string(geteuid());
}

// Opens (creating where missing) base/<machine> and, with `uuid` not empty, base/<machine>/<uuid>,
// each level checked; -1 when any level may not be used (reported on stderr once per process,
// naming the folder and the remedy, unless `library` is null).
int open_usage_dir(const SimMachine& machine, const std::string& uuid, const char* library) {
  bool named = false;
  const std::string base = base_dir(&named);
  std::string why;
  std::string failed = base;
  int fd = -1;
  {
    // The base is opened by its full path: the user may reach a folder they named through links
    // (its parents are theirs to choose), but the default's last level is never a link.
    // GPUSEL_SIM_STATE_DIR is the machine's folder itself; the default base has one per machine.
    Fd b(open_level(AT_FDCWD, base, named, why));
    if (b.get() >= 0) {
      const std::string key = usage_machine_key(machine);
      if (!named) failed = base + "/" + key;
      Fd m(named ? Fd(b.release()) : Fd(open_level(b.get(), key, false, why)));
      if (m.get() >= 0 && uuid.empty()) {
        fd = m.release();
      } else if (m.get() >= 0) {
        failed += "/" + uuid;
        fd = open_level(m.get(), uuid, false, why);
      }
    }
  }
  if (fd < 0 && library != nullptr && !reported.exchange(true)) {
    report(library, "the folder for usage shared between simulated processes, " + failed + ", " +
                        why +
                        "; usage of other processes is not shown and this one's is not "
                        "recorded. Set GPUSEL_SIM_STATE_DIR to a folder of your own (mode 700)" +
                        (named ? std::string(" (it is set to \"") + base + "\")" : ""));
  }
  return fd;
}

int open_gpu_dir(const SimMachine& machine, const std::string& uuid, const char* library) {
  return open_usage_dir(machine, uuid, library);
}

// The note's name holds the machine's key: GPUSEL_SIM_STATE_DIR may serve several machine files.
std::string static_runtime_file(const SimMachine& machine) {
  return "static-runtime-" + usage_machine_key(machine);
}

}  // namespace

unsigned own_pid() {
  return static_cast<unsigned>(getpid());
}

std::string usage_dir(const SimMachine& machine) {
  bool named = false;
  const std::string base = base_dir(&named);
  return named ? base : base + "/" + usage_machine_key(machine);
}

void note_usage(const SimMachine& machine, const std::string& uuid, std::uint64_t bytes,
                const char* library) {
  if (!detail::is_plain_file_name(uuid)) return;
  const std::string key = usage_dir(machine) + "/" + uuid;
  std::lock_guard<std::mutex> lock(entries_mutex);
  auto it = entries.find(key);
  if (it == entries.end()) {
    Fd dir(open_gpu_dir(machine, uuid, library));
    if (dir.get() < 0) return;
    // Made under a name readers skip, locked, then renamed into place: a reader never finds the
    // entry unlocked (and removes it as a dead process's) between its creation and its lock.
    const std::string name = std::to_string(getpid());
    const std::string fresh = "." + name + ".new";
    Fd fd(openat(dir.get(), fresh.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
                 0600));
    struct stat st {};
    if (fd.get() < 0 || fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) ||
        flock(fd.get(), LOCK_EX | LOCK_NB) != 0 ||
        renameat(dir.get(), fresh.c_str(), dir.get(), name.c_str()) != 0) {
      unlinkat(dir.get(), fresh.c_str(), 0);
      return;
    }
    it = entries.emplace(key, fd.release()).first;
  }
  char text[32];
  const int n = std::snprintf(text, sizeof text, "%llu\n", static_cast<unsigned long long>(bytes));
  if (ftruncate(it->second, 0) == 0 && n > 0) {
    (void)!pwrite(it->second, text, static_cast<std::size_t>(n), 0);
  }
}

std::vector<SimProcess> live_processes(const SimMachine& machine, const std::string& uuid,
                                       const char* library) {
  std::vector<SimProcess> out;
  if (!detail::is_plain_file_name(uuid)) return out;
  Fd dir(open_gpu_dir(machine, uuid, library));
  if (dir.get() < 0) return out;
  const int listing = dup(dir.get());
  if (listing < 0) return out;
  DIR* d = fdopendir(listing);
  if (d == nullptr) {
    close(listing);
    return out;
  }
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name.empty() || name.size() > 10 ||
        name.find_first_not_of("0123456789") != std::string::npos)
      continue;
    Fd fd(openat(dir.get(), name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
    struct stat st {};
    if (fd.get() < 0 || fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if (flock(fd.get(), LOCK_SH | LOCK_NB) == 0) {  // nobody holds it: its process is gone
      unlinkat(dir.get(), name.c_str(), 0);         // the name in this checked folder only
      continue;
    }
    char text[32] = {};
    const ssize_t got = pread(fd.get(), text, sizeof text - 1, 0);
    SimProcess p;
    p.pid = static_cast<unsigned>(std::strtoul(name.c_str(), nullptr, 10));
    p.used_memory = kContextBytes + (got > 0 ? std::strtoull(text, nullptr, 10) : 0);
    out.push_back(p);
  }
  closedir(d);
  return out;
}

}  // namespace gpusel::sim

namespace gpusel::sim {

void note_static_runtime(const SimMachine& machine, const char* library,
                         const std::string& carrier) {
  Fd dir(open_usage_dir(machine, "", library));
  if (dir.get() < 0) return;
  char exe[512] = {};
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  const std::string text = std::to_string(static_cast<long long>(time(nullptr))) + " " +
                           std::to_string(getpid()) + " " + (carrier.empty() ? "-" : carrier) +
                           " " + (n > 0 ? exe : "?") + "\n";
  Fd fd(openat(dir.get(), static_runtime_file(machine).c_str(),
               O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600));
  struct stat st {};
  if (fd.get() < 0 || fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return;
  (void)!write(fd.get(), text.data(), text.size());
}

std::string static_runtime_note(const SimMachine& machine) {
  Fd dir(open_usage_dir(machine, "", nullptr));
  if (dir.get() < 0) return "";
  Fd fd(openat(dir.get(), static_runtime_file(machine).c_str(),
               O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
  struct stat st {};
  if (fd.get() < 0 || fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return "";
  char text[600] = {};
  const ssize_t got = read(fd.get(), text, sizeof text - 1);
  std::string out = got > 0 ? std::string(text, static_cast<std::size_t>(got)) : "";
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

}  // namespace gpusel::sim
