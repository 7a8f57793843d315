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
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <memory>
#include <mutex>
#include <set>

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
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      if (fd_ >= 0) close(fd_);
      fd_ = o.release();
    }
    return *this;
  }
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
// A reader removes a GPU's folder it finds empty (look()): one that goes between the mkdir and the
// open here is made again.
int open_level(int parent, const std::string& name, bool follow, std::string& why) {
  Fd fd;
  for (int attempt = 0; attempt < 8 && fd.get() < 0; ++attempt) {
    if (mkdirat(parent, name.c_str(), 0700) != 0 && errno != EEXIST) {
      why = std::string("cannot be created (") + std::strerror(errno) + ")";
      return -1;
    }
    fd = Fd(openat(parent, name.c_str(),
                   O_RDONLY | O_DIRECTORY | O_CLOEXEC | (follow ? 0 : O_NOFOLLOW)));
    if (fd.get() < 0 && errno != ENOENT) break;
  }
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

std::string named_note(const std::string& base) {
  return std::string(" (it is set to \"") + base + "\")";
}

// Says once per process (unless `library` is null) that the usage folder `failed` may not be used.
void report_unusable(const char* library, const std::string& failed, const std::string& why,
                     const std::string& note) {
  if (library == nullptr || reported.exchange(true)) return;
  report(library, "the folder for usage shared between simulated processes, " + failed + ", " +
                      why +
                      "; usage of other processes is not shown and this one's is not "
                      "recorded. Set GPUSEL_SIM_STATE_DIR to a folder of your own (mode 700)" +
                      note);
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
  if (fd < 0) report_unusable(library, failed, why, named ? named_note(base) : "");
  return fd;
}

int open_gpu_dir(const SimMachine& machine, const std::string& uuid, const char* library) {
  return open_usage_dir(machine, uuid, library);
}

// The counter every writer adds one to when it puts an entry in place: "usage-generation" in the
// machine's folder, 8 bytes, mapped shared. A reader keeps what it found at its last look and
// looks again only when the counter moved, so a query of a GPU nobody uses makes no system call.
// nullptr when the file cannot be made or mapped (every query then looks again).
std::atomic<std::uint64_t>* map_generation(int machine_fd) {
  static_assert(sizeof(std::atomic<std::uint64_t>) == sizeof(std::uint64_t) &&
                std::atomic<std::uint64_t>::is_always_lock_free);
  Fd fd(openat(machine_fd, "usage-generation", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600));
  struct stat st {};
  if (fd.get() < 0 || fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return nullptr;
  if (st.st_size < static_cast<off_t>(sizeof(std::uint64_t)) &&
      ftruncate(fd.get(), sizeof(std::uint64_t)) != 0) {
    return nullptr;
  }
  void* at = mmap(nullptr, sizeof(std::uint64_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  return at == MAP_FAILED ? nullptr : static_cast<std::atomic<std::uint64_t>*>(at);
}

// What a reader found in a machine's usage folder at its last look: the live entries of each GPU
// (and MIG device) folder, each kept open, so that a later query asks only whether each entry's
// process still holds its lock and how much memory it has. One per folder and loaded double,
// kept for the process's life; guarded by views_mutex.
struct UsageView {
  struct Entry {
    std::string name;  // its process's id
    unsigned pid = 0;
    Fd fd;
    dev_t dev = 0;
    ino_t ino = 0;
  };
  struct GpuFolder {
    Fd dir;
    std::vector<Entry> entries;
  };
  std::string path;   // usage_dir()
  std::string named;  // the report's note on GPUSEL_SIM_STATE_DIR, "" when it is not set
  Fd machine;         // the checked machine folder
  std::atomic<std::uint64_t>* generation = nullptr;  // nullptr: look again at every query
  std::uint64_t seen = 0;
  bool looked = false;
  std::set<std::string> names;            // the machine's GPU and MIG UUIDs
  std::map<std::string, GpuFolder> gpus;  // the folders holding live entries, by UUID
};

std::mutex views_mutex;
std::map<std::string, std::unique_ptr<UsageView>> views;  // by usage_dir()

// The view of `machine`'s folder, opening (and checking) it on first use; nullptr while the folder
// may not be used (reported once, as any level is). Called with views_mutex held.
UsageView* view_of(const SimMachine& machine, const std::string& folder, const char* library) {
  auto it = views.find(folder);
  if (it != views.end()) return it->second.get();
  Fd dir(open_usage_dir(machine, "", library));
  if (dir.get() < 0) return nullptr;  // asked again next time, as every query used to
  auto view = std::make_unique<UsageView>();
  view->path = folder;
  bool named = false;
  const std::string base = base_dir(&named);
  if (named) view->named = named_note(base);
  view->generation = map_generation(dir.get());
  view->machine = std::move(dir);
  // Every GPU of the machine file (a vendor's view of a machine with both has its own alone):
  // the folder is the machine's, shared by both vendors' libraries.
  for (const SimGpu& gpu : (machine.whole != nullptr ? *machine.whole : machine).gpus) {
    view->names.insert(gpu.uuid);
    for (const SimMig& mig : gpu.migs) view->names.insert(mig.uuid);
  }
  return views.emplace(folder, std::move(view)).first->second.get();
}

void bump_generation(const SimMachine& machine, const char* library) {
  std::lock_guard<std::mutex> lock(views_mutex);
  UsageView* view = view_of(machine, usage_dir(machine), library);
  if (view != nullptr && view->generation != nullptr) view->generation->fetch_add(1);
}

// The names in an opened folder (read through a descriptor of its own, so `dir` keeps its offset).
std::vector<std::string> folder_names(int dir) {
  std::vector<std::string> out;
  const int listing = openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (listing < 0) return out;
  DIR* d = fdopendir(listing);
  if (d == nullptr) {
    close(listing);
    return out;
  }
  while (dirent* e = readdir(d)) out.emplace_back(e->d_name);
  closedir(d);
  return out;
}

// Whether an entry's process is gone (nobody holds its lock); a gone process's entry is removed,
// where its name still names the file that was opened (a later process of the same id puts a file
// of its own in place).
bool entry_gone(int dir, const std::string& name, int fd, dev_t dev, ino_t ino) {
  if (flock(fd, LOCK_SH | LOCK_NB) != 0) return false;
  flock(fd, LOCK_UN);
  struct stat now {};
  if (fstatat(dir, name.c_str(), &now, AT_SYMLINK_NOFOLLOW) == 0 && now.st_dev == dev &&
      now.st_ino == ino) {
    unlinkat(dir, name.c_str(), 0);  // the name in this checked folder only
  }
  return true;
}

// Looks at every GPU folder of the machine: the live entries kept, dead ones removed, and a
// folder left with nothing in it removed too (a writer that loses its folder so makes it again),
// so that the next look finds the folders of GPUs in use only. Called with views_mutex held.
void look(UsageView& view, const char* library) {
  view.gpus.clear();
  if (view.generation != nullptr) view.seen = view.generation->load();
  view.looked = true;
  for (const std::string& uuid : folder_names(view.machine.get())) {
    if (view.names.count(uuid) == 0 || !detail::is_plain_file_name(uuid)) continue;
    Fd dir(
        openat(view.machine.get(), uuid.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    std::string why = dir.get() < 0
                          ? (errno == ENOENT ? std::string()
                             : errno == ELOOP || errno == ENOTDIR
                                 ? std::string("is a symbolic link or not a folder")
                                 : std::string("cannot be opened (") + std::strerror(errno) + ")")
                          : refuse_reason(dir.get());
    if (!why.empty()) {
      report_unusable(library, view.path + "/" + uuid, why, view.named);
      continue;
    }
    if (dir.get() < 0) continue;
    UsageView::GpuFolder folder;
    bool other = false;  // a name that is not a live entry (a writer's entry being made, say)
    for (const std::string& name : folder_names(dir.get())) {
      if (name == "." || name == "..") continue;
      if (name.empty() || name.size() > 10 ||
          name.find_first_not_of("0123456789") != std::string::npos) {
        other = true;
        continue;
      }
      Fd fd(openat(dir.get(), name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
      struct stat st {};
      if (fd.get() < 0 || fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
        other = true;
        continue;
      }
      if (entry_gone(dir.get(), name, fd.get(), st.st_dev, st.st_ino)) continue;
      UsageView::Entry entry;
      entry.name = name;
      entry.pid = static_cast<unsigned>(std::strtoul(name.c_str(), nullptr, 10));
      entry.fd = std::move(fd);
      entry.dev = st.st_dev;
      entry.ino = st.st_ino;
      folder.entries.push_back(std::move(entry));
    }
    if (!folder.entries.empty()) {
      folder.dir = std::move(dir);
      view.gpus.emplace(uuid, std::move(folder));
    } else if (!other) {
      unlinkat(view.machine.get(), uuid.c_str(), AT_REMOVEDIR);  // fails unless still empty
    }
  }
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
    // Made under a name readers skip, locked, then renamed into place: a reader never finds the
    // entry unlocked (and removes it as a dead process's) between its creation and its lock.
    // A reader removes a GPU's folder when it finds it empty: made again if that happened
    // between its opening here and the entry's creation.
    const std::string name = std::to_string(getpid());
    const std::string fresh = "." + name + ".new";
    Fd fd;
    for (int attempt = 0; attempt < 8 && fd.get() < 0; ++attempt) {
      Fd dir(open_gpu_dir(machine, uuid, library));
      if (dir.get() < 0) return;
      Fd made(openat(dir.get(), fresh.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
                     0600));
      if (made.get() < 0 && errno == ENOENT) continue;  // the folder went: made again
      struct stat st {};
      if (made.get() < 0 || fstat(made.get(), &st) != 0 || !S_ISREG(st.st_mode) ||
          flock(made.get(), LOCK_EX | LOCK_NB) != 0 ||
          renameat(dir.get(), fresh.c_str(), dir.get(), name.c_str()) != 0) {
        unlinkat(dir.get(), fresh.c_str(), 0);
        return;
      }
      fd = std::move(made);
    }
    if (fd.get() < 0) return;
    it = entries.emplace(key, fd.release()).first;
    bump_generation(machine, library);  // readers look again
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
  std::lock_guard<std::mutex> lock(views_mutex);
  UsageView* view = view_of(machine, usage_dir(machine), library);
  if (view == nullptr) return out;
  if (!view->looked || view->generation == nullptr || view->generation->load() != view->seen) {
    look(*view, library);
  }
  auto it = view->gpus.find(uuid);
  if (it == view->gpus.end()) return out;
  auto& seen = it->second.entries;
  for (auto e = seen.begin(); e != seen.end();) {
    if (entry_gone(it->second.dir.get(), e->name, e->fd.get(), e->dev, e->ino)) {
      e = seen.erase(e);
      continue;
    }
    char text[32] = {};
    const ssize_t got = pread(e->fd.get(), text, sizeof text - 1, 0);
    SimProcess p;
    p.pid = e->pid;
    p.used_memory = kContextBytes + (got > 0 ? std::strtoull(text, nullptr, 10) : 0);
    out.push_back(p);
    ++e;
  }
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
