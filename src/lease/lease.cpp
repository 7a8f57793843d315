// Leases on Linux: flock on one file per GPU UUID in a store that only root (the shared store) or
// the user (the user's own store) can change; holders read from /proc; waiting jobs queue with
// locked tickets and are woken by inotify when a lease file is closed.
#include <dirent.h>
#include <fcntl.h>
#include <pwd.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <poll.h>
#include <signal.h>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <tuple>

#include "ancestry.hpp"
#include "dir_watch.hpp"
#include "env.hpp"
#include "file_lock.hpp"
#include "file_text.hpp"
#include "gpusel/error.hpp"
#include "gpusel/lease.hpp"
#include "gpusel_detail.hpp"
#include "job_record.hpp"
#include "lease_queue.hpp"
#include "process.hpp"
#include "text.hpp"

GPUSEL_BEGIN_NAMESPACE

// Locks on open files and watches on folders are the platform layer's (file_lock.hpp,
// dir_watch.hpp).
using detail::DirWatch;
using detail::WatchNotice;
namespace watch = detail::watch;
using detail::held_mark;
using detail::LockMode;
using detail::mark_held;
using detail::try_lock_file;

// Reaches LeaseStore's members from the queue code below.
struct LeaseStoreAccess {
  static bool own_primary(const LeaseStore& s) { return s.own_primary_; }
};

namespace {

std::string errno_text(int e) {
  return std::strerror(e);
}

std::string mode_text(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

std::string user_name(uid_t uid) {
  // Asked again at every look at the queue, a waiter's wake included (the user database read
  // and parsed each time): the names found are remembered, a user's name being as fixed as its
  // uid while a job runs. Per thread: no lock for a fork to catch held; a failed look-up (a
  // directory service's hiccup) is tried again next time.
  thread_local std::map<uid_t, std::string> known;
  if (auto it = known.find(uid); it != known.end()) return it->second;
  passwd pw{}, *found = nullptr;
  char buf[1024];
  if (getpwuid_r(uid, &pw, buf, sizeof buf, &found) == 0 && found != nullptr) {
    return known.emplace(uid, pw.pw_name).first->second;
  }
  return "uid " + std::to_string(uid);
}

// The kernel's table of flock locks (/proc/locks): which process holds a lock on which file. Read
// once per look at the store; locks of processes in other pid namespaces show no pid (0).
// The device of the mount that holds folder `dir`, as /proc/self/mountinfo gives it (the device
// the kernel's lock table names its files by); nullopt when not found. Kept per folder.
std::optional<dev_t> mount_device(const std::string& dir) {
  static std::mutex mutex;
  static std::map<std::string, std::optional<dev_t>> known;
  const std::lock_guard<std::mutex> lock(mutex);
  if (const auto it = known.find(dir); it != known.end()) return it->second;
  char* real = realpath(dir.c_str(), nullptr);
  if (real == nullptr) return std::nullopt;
  const std::string path = real;
  std::free(real);
  const std::string table = detail::read_file_text("/proc/self/mountinfo").value_or("");
  std::optional<dev_t> best;
  std::size_t best_length = 0;
  // "36 35 98:0 /mnt1 /mnt/parent rw,noatime master:1 - ext3 /dev/root rw": the 3rd field is
  // the device, the 5th the mount point (blanks and backslashes written as \ooo).
  std::size_t at = 0;
  while (const std::optional<std::string_view> line = detail::next_line(table, at)) {
    std::size_t word_at = 0;
    std::string_view fields[5];
    for (std::string_view& f : fields) f = detail::next_word(*line, word_at);
    if (fields[4].empty()) continue;
    const std::string device(fields[2]);
    const std::string_view point = fields[4];
    std::string mount;
    for (std::size_t i = 0; i < point.size(); ++i) {
      if (point[i] == '\\' && i + 3 < point.size()) {
        mount +=
            static_cast<char>(std::strtol(std::string(point.substr(i + 1, 3)).c_str(), nullptr, 8));
        i += 3;
      } else {
        mount += point[i];
      }
    }
    const bool inside = path == mount || mount == "/" ||
                        (path.size() > mount.size() && path.compare(0, mount.size(), mount) == 0 &&
                         path[mount.size()] == '/');
    unsigned maj = 0, min = 0;
    if (!inside || mount.size() < best_length ||
        std::sscanf(device.c_str(), "%u:%u", &maj, &min) != 2) {
      continue;
    }
    best = makedev(maj, min);  // a later mount on the same point hides an earlier one
    best_length = mount.size();
  }
  known[dir] = best;
  return best;
}

class LockTable {
 public:
  LockTable() {
    // "1: FLOCK  ADVISORY  WRITE 4242 08:01:1234 0 EOF"; blocked waiters have "->" after the id.
    const int fd = open("/proc/locks", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    std::string text;
    char buf[16384];
    for (ssize_t got; (got = read(fd, buf, sizeof buf)) > 0;)
      text.append(buf, static_cast<std::size_t>(got));
    close(fd);
    std::size_t at = 0;
    while (at < text.size()) {
      std::size_t end = text.find('\n', at);
      if (end == std::string::npos) end = text.size();
      parse_line(std::string_view(text).substr(at, end - at));
      at = end + 1;
    }
  }
  // nullopt: nobody holds a lock on it; 0: someone the table does not name.
  std::optional<int> holder(dev_t dev, ino_t ino) const {
    auto it = held_.lower_bound({dev, ino});  // the first the table lists
    if (it == held_.end() || it->first != std::make_pair(dev, ino)) return std::nullopt;
    return it->second;
  }
  // Whether process `pid` is among those the table lists as holding a lock on the file `st` in
  // folder `dir` (several hold shared locks on one file; anyone who may read it can add one).
  bool holds(const struct stat& st, const std::string& dir, int pid) const {
    for (const dev_t dev : {st.st_dev, mount_device(dir).value_or(st.st_dev)}) {
      const auto range = held_.equal_range({dev, st.st_ino});
      for (auto it = range.first; it != range.second; ++it) {
        if (it->second == pid) return true;
      }
    }
    return false;
  }
  // The same for the file `st` in folder `dir`, also where stat() reports another device than the
  // table (an overlay whose layers are on other file systems: each layer's files get a device of
  // their own, while the table names the overlay's).
  std::optional<int> holder(const struct stat& st, const std::string& dir) const {
    if (std::optional<int> pid = holder(st.st_dev, st.st_ino)) return pid;
    const std::optional<dev_t> mounted = mount_device(dir);
    if (!mounted || *mounted == st.st_dev) return std::nullopt;
    return holder(*mounted, st.st_ino);
  }

 private:
  // The words of a line, split at blanks.
  static std::vector<std::string_view> words(std::string_view line) {
    std::vector<std::string_view> out;
    std::size_t i = 0;
    while (i < line.size()) {
      while (i < line.size() && line[i] == ' ') ++i;
      const std::size_t start = i;
      while (i < line.size() && line[i] != ' ') ++i;
      if (i > start) out.push_back(line.substr(start, i - start));
    }
    return out;
  }

  void parse_line(std::string_view line) {
    const std::vector<std::string_view> w = words(line);
    if (w.size() < 6 || w[1] != "FLOCK") return;  // also skips "->" (a blocked waiter)
    const std::string pid(w[4]), where(w[5]);
    unsigned maj = 0, min = 0;
    unsigned long long inode = 0;
    if (std::sscanf(where.c_str(), "%x:%x:%llu", &maj, &min, &inode) != 3) return;
    held_.emplace(std::make_pair(makedev(maj, min), static_cast<ino_t>(inode)),
                  static_cast<int>(std::strtol(pid.c_str(), nullptr, 10)));
  }

  std::multimap<std::pair<dev_t, ino_t>, int> held_;
};

// Every lock gpusel takes on a lease or claim file carries a second one on the same open file: a
// read lock of the open file description (F_OFD_SETLK). Both belong to the open file, which every
// process that inherited the descriptor shares, so they live and end together; but where a flock
// can be seen only in the kernel's whole lock table (/proc/locks, a read that waits milliseconds on
// a loaded machine and grows with every lock on it), an OFD lock is asked of the kernel for one
// file (F_OFD_GETLK). A read lock needs only read access (anyone may add one to the root-owned
// files of the shared store, as anyone may add a shared flock): it keeps nobody out, since gpusel
// never takes a write lock there, and can only make a file look held, never free.
// (mark_held and held_mark: file_lock.hpp.)

// Whether the descriptor `fd` of process `proc_entry` carries a flock (its fdinfo lists the locks
// of its open file since Linux 3.8), an exclusive one when `exclusive`: a process that only has a
// lease file open (a waiter asking its mark, a shell's `exec 3<`), or that put another kind of lock
// on it (a read lock anyone who may read the file can add), holds no lease. False where fdinfo
// cannot be read or lists no such lock.
bool carries_flock(const std::string& proc_entry, const char* fd, bool exclusive) {
  const int info = open(("/proc/" + proc_entry + "/fdinfo/" + fd).c_str(), O_RDONLY | O_CLOEXEC);
  if (info < 0) return false;
  char buf[4096];
  const ssize_t got = read(info, buf, sizeof buf - 1);
  close(info);
  if (got <= 0) return false;
  buf[got] = '\0';
  // "lock:\t1: FLOCK  ADVISORY  WRITE 4242 08:01:1234 0 EOF"
  for (const char* line = std::strstr(buf, "\nlock:"); line != nullptr;
       line = std::strstr(line + 1, "\nlock:")) {
    const char* end = std::strchr(line + 1, '\n');
    const std::string_view text(
        line, end != nullptr ? static_cast<std::size_t>(end - line) : std::strlen(line));
    if (text.find(" FLOCK ") != std::string_view::npos &&
        (!exclusive || text.find(" WRITE ") != std::string_view::npos)) {
      return true;
    }
  }
  return false;
}

// Whether process `proc_entry` ("4242", "self") has the file (dev, ino) open with a flock on it
// (an exclusive one when `exclusive`): nullopt when its descriptors cannot be read (another user's
// process, or one that has ended).
std::optional<bool> has_open(const std::string& proc_entry, dev_t dev, ino_t ino,
                             bool exclusive = false) {
  const std::string dir = "/proc/" + proc_entry + "/fd";
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return std::nullopt;
  bool found = false;
  while (const dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    struct stat st {};
    // The descriptor's link leads to the open file itself, whatever its name is now.
    if (fstatat(dirfd(d), e->d_name, &st, 0) == 0 && st.st_dev == dev && st.st_ino == ino &&
        carries_flock(proc_entry, e->d_name, exclusive)) {
      found = true;
      break;
    }
  }
  closedir(d);
  return found;
}

// The oldest process this user may look at that has the file (dev, ino) open: after the process
// that took a lock has ended, the processes that inherited its descriptor hold the lock.
std::optional<int> oldest_holder(dev_t dev, ino_t ino) {
  return detail::oldest_process(
      [&](int, const char* pid, int) { return has_open(pid, dev, ino).value_or(false); });
}

// Who holds the lock on the file `st`. The kernel's table names the process that took it; that
// process may have ended while processes it started hold the lock through inherited descriptors
// (a job whose gpusel was SIGKILLed), or its pid may have been reused. Where this user can see a
// process's descriptors, the holder named is one that really has the file open.
std::optional<LeaseHolder> holder_of(const LockTable& table, const struct stat& st,
                                     const std::string& dir) {
  const std::optional<int> pid = table.holder(st, dir);
  if (!pid || *pid <= 0) return std::nullopt;
  const std::optional<bool> open = has_open(std::to_string(*pid), st.st_dev, st.st_ino);
  if (open.value_or(false)) return detail::process_details(*pid);
  // The record the process that took the lock left in the shared store: trusted only when
  // exactly one live record names that process and the lock table lists that process among the
  // holders of its lock (a file someone else wrote, or locked, names no one).
  std::optional<detail::JobRecord> record;
  std::vector<detail::JobRecord> records = detail::read_job_records(dir, *pid);
  records.erase(std::remove_if(records.begin(), records.end(),
                               [&](const detail::JobRecord& r) {
                                 struct stat rs {};
                                 rs.st_dev = r.dev;
                                 rs.st_ino = r.ino;
                                 return !table.holds(rs, r.folder, *pid);
                               }),
                records.end());
  if (records.size() == 1) record = std::move(records.front());
  struct stat proc {};
  if (!open && stat(("/proc/" + std::to_string(*pid)).c_str(), &proc) == 0 &&
      (!record || record->owner == proc.st_uid)) {
    return detail::process_details(*pid);  // alive, another user's: the kernel's word stands
  }
  // The process that took the lock has ended (or its pid now belongs to another user): the
  // processes it started hold it. This user's own are found by their descriptors; another
  // user's by the process groups the record lists.
  if (const std::optional<int> live = oldest_holder(st.st_dev, st.st_ino)) {
    return detail::process_details(*live);
  }
  if (!record) return std::nullopt;
  if (const std::optional<int> live = detail::oldest_in_groups(record->owner, record->groups)) {
    return detail::process_details(*live);
  }
  LeaseHolder h;  // the job's processes left its groups: its user and command are still known
  h.user = user_name(record->owner);
  h.command = record->command;
  return h;
}

// Why folder `dir` (its lstat in `st`) cannot hold leases that bind anyone, or "".
std::string folder_problem(const std::string& dir, const struct stat& st) {
  if (S_ISLNK(st.st_mode)) {
    return "the lease folder " + dir + " is a symbolic link, which gpusel never follows";
  }
  if (!S_ISDIR(st.st_mode)) return "the lease folder " + dir + " is not a folder";
  if (st.st_uid != 0 && st.st_uid != geteuid()) {
    return "the lease folder " + dir + " belongs to another user (" + user_name(st.st_uid) +
           "), who could remove or replace the leases in it";
  }
  if (st.st_mode & (S_IWGRP | S_IWOTH)) {
    return "the lease folder " + dir + " can be written by other users (mode " +
           mode_text(st.st_mode) + "), who could remove or replace the leases in it";
  }
  return "";
}

// Makes `dir` and any missing parent, mode 0700 for what is made. Returns errno, 0 on success.
int make_folders(const std::string& dir) {
  for (std::size_t slash = 1; slash != std::string::npos;) {
    slash = dir.find('/', slash + 1);
    const std::string part = dir.substr(0, slash);
    if (mkdir(part.c_str(), 0700) != 0 && errno != EEXIST) return errno;
  }
  return 0;
}

// Whether this user could make the folder `dir`: it exists, or its nearest existing parent is a
// folder this user may write. Makes nothing.
bool could_make(const std::string& dir) {
  std::string at = dir;
  while (!at.empty()) {
    struct stat st {};
    if (stat(at.c_str(), &st) == 0) {
      return S_ISDIR(st.st_mode) && access(at.c_str(), W_OK | X_OK) == 0;
    }
    if (errno != ENOENT) return false;
    const std::size_t slash = at.rfind('/');
    if (slash == std::string::npos) return false;
    at = slash == 0 ? "/" : at.substr(0, slash);
  }
  return false;
}

std::string own_store_dir_at_home();

// This user's own store: $XDG_STATE_HOME/gpusel/leases, else ~/.local/state/gpusel/leases; where
// that cannot be made (no HOME, a read-only one), /tmp/gpusel-UID/leases. Not made here. Root
// uses its passwd home where XDG_STATE_HOME or HOME is not a folder of root's alone.
std::string own_store_dir() {
  std::string dir = own_store_dir_at_home();
  if (could_make(dir)) return dir;
  return "/tmp/gpusel-" + std::to_string(geteuid()) + "/leases";
}

// Whether this user may keep its own store under `base` (an absolute path). Anyone may, but
// root: root's store goes only under a folder of root's that no one else can change, so that a
// HOME or XDG_STATE_HOME passed on from another user (`sudo -E`) never leads root into a folder
// that user controls (where links could send root's files anywhere).
bool may_keep_own_store_under(const std::optional<std::string>& base) {
  if (!base || base->empty() || (*base)[0] != '/') return false;
  if (geteuid() != 0) return true;
  struct stat st {};
  return lstat(base->c_str(), &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == 0 &&
         !(st.st_mode & (S_IWGRP | S_IWOTH));
}

std::string own_store_dir_at_home() {
  std::string base;
  if (auto state = detail::env_value("XDG_STATE_HOME"); may_keep_own_store_under(state)) {
    base = *state;
  } else {
    std::string home;
    if (auto h = detail::env_value("HOME"); may_keep_own_store_under(h)) {
      home = *h;
    } else {
      passwd pw{}, *found = nullptr;
      char buf[4096];
      if (getpwuid_r(geteuid(), &pw, buf, sizeof buf, &found) == 0 && found != nullptr &&
          found->pw_dir != nullptr && found->pw_dir[0] == '/') {
        home = found->pw_dir;
      }
    }
    if (home.empty() || home == "/") {
      return "/tmp/gpusel-" + std::to_string(geteuid()) + "/leases";
    }
    base = home + "/.local/state";
  }
  return base + "/gpusel/leases";
}

// Makes sure the store folder `dir`, which this user may make lease files in, exists (made when
// absent: mode 0700, or 0755 for root, whose folders other users lease in) and is safe; throws
// Error(Failure) when it cannot be.
void prepare_store_folder(const std::string& dir) {
  struct stat st {};
  if (lstat(dir.c_str(), &st) != 0) {
    if (errno != ENOENT) {
      throw failure("cannot use the lease folder " + dir + ": " + errno_text(errno) +
                        "; set GPUSEL_LEASE_DIR to a folder of yours",
                    about(Subject::Lease, {{"path", dir}}));
    }
    if (const int e = make_folders(dir); e != 0) {
      throw failure("cannot create the lease folder " + dir + ": " + errno_text(e) +
                        "; set GPUSEL_LEASE_DIR to a folder of yours",
                    about(Subject::Lease, {{"path", dir}}));
    }
    if (geteuid() == 0) chmod(dir.c_str(), 0755);
    if (lstat(dir.c_str(), &st) != 0) {
      throw failure("cannot use the lease folder " + dir + ": " + errno_text(errno),
                    about(Subject::Lease, {{"path", dir}}));
    }
  }
  std::string problem = folder_problem(dir, st);
  if (problem.empty() && st.st_uid != geteuid()) {
    problem = "the lease folder " + dir + " does not belong to you";
  }
  if (!problem.empty()) {
    throw failure(problem + "; set GPUSEL_LEASE_DIR to a folder of yours");
  }
}

// Why the lease file `path` (its lstat in `st`, in a store owned by `owner`) cannot be used, or
// "" when it is a regular file with one name, owned by the store's owner, that every user the
// store binds can open and nobody else can write.
std::string lease_file_problem(const std::string& path, const struct stat& st, uid_t owner,
                               bool shared) {
  const std::string remedy =
      shared ? "; `sudo gpusel setup` repairs it" : "; remove it, and gpusel makes a new one";
  if (S_ISLNK(st.st_mode)) return path + " is a symbolic link, which gpusel never follows" + remedy;
  if (!S_ISREG(st.st_mode)) return path + " is not a regular file" + remedy;
  if (st.st_nlink != 1) {
    return path + " has " + std::to_string(st.st_nlink) +
           " names (hard links), so one lock would stand for several GPUs" + remedy;
  }
  if (st.st_uid != owner) {
    return path + " belongs to " + user_name(st.st_uid) + ", not to the store's owner (" +
           user_name(owner) + ")" + remedy;
  }
  if (st.st_mode & (S_IWGRP | S_IWOTH)) {
    return path + " can be written by other users (mode " + mode_text(st.st_mode) + ")" + remedy;
  }
  const mode_t readable = shared ? (S_IRUSR | S_IRGRP | S_IROTH) : S_IRUSR;
  if ((st.st_mode & readable) != readable) {
    return path + " cannot be opened by " + (shared ? "every user" : "you") + " (mode " +
           mode_text(st.st_mode) + ")" + remedy;
  }
  return "";
}

std::string lease_name(const std::string& uuid) {
  return uuid + ".lock";
}

}  // namespace

Lease& Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) {
      close(fd_);
      detail::job_record_lease_released();
    }
    fd_ = other.fd_;
    uuid_ = std::move(other.uuid_);
    other.fd_ = -1;
  }
  return *this;
}

Lease::~Lease() {
  if (fd_ >= 0) {
    close(fd_);  // the kernel drops the lock with the last descriptor
    detail::job_record_lease_released();
  }
}

LeaseStore LeaseStore::at(const std::string& dir) {
  LeaseStore s;
  s.dir_ = dir;
  s.own_dir_ = own_store_dir();
  struct stat st {};
  if (lstat(dir.c_str(), &st) != 0) {
    if (errno != ENOENT) {
      throw failure("cannot use the lease folder " + dir + ": " + errno_text(errno) +
                        "; set GPUSEL_LEASE_DIR to a folder you can use",
                    about(Subject::Lease, {{"path", dir}}));
    }
    // Made by the first lease taken in it, as this user's.
    s.shared_ = geteuid() == 0;
    s.own_primary_ = true;
    s.own_dir_ = dir;
    return s;
  }
  if (const std::string problem = folder_problem(dir, st); !problem.empty()) {
    throw failure(problem + "; use a folder that only root (`sudo gpusel setup --lease-dir " + dir +
                      "`) or only you can write, in GPUSEL_LEASE_DIR",
                  about(Subject::Lease, {{"path", dir}}));
  }
  s.shared_ = st.st_uid == 0;
  s.own_primary_ = st.st_uid == geteuid();
  if (s.own_primary_) s.own_dir_ = dir;
  return s;
}

LeaseStore LeaseStore::locate() {
  if (auto dir = detail::env_value("GPUSEL_LEASE_DIR"); dir && !dir->empty()) return at(*dir);
  LeaseStore s;
  s.own_dir_ = own_store_dir();
  const std::string shared = kSharedLeaseStore;
  const std::string parent = shared.substr(0, shared.rfind('/'));
  struct stat st {
  }, pst{};
  std::string problem;
  if (lstat(shared.c_str(), &st) != 0) {
    problem = "no shared lease store is set up (" + shared + ")";
  } else if (lstat(parent.c_str(), &pst) != 0 || !S_ISDIR(pst.st_mode) || pst.st_uid != 0 ||
             (pst.st_mode & (S_IWGRP | S_IWOTH))) {
    problem = "the shared lease store's folder " + parent + " is not a folder only root can change";
  } else if (std::string p = folder_problem(shared, st); !p.empty() || st.st_uid != 0) {
    problem = p.empty() ? "the shared lease store " + shared + " does not belong to root" : p;
  }
  if (problem.empty()) {
    s.dir_ = shared;
    s.shared_ = true;
    s.own_primary_ = geteuid() == 0;
    return s;
  }
  s.dir_ = s.own_dir_;
  s.own_primary_ = true;
  s.scope_problem_ = problem;
  return s;
}

std::string LeaseStore::scope_note() const {
  if (scope_problem_.empty()) return "";
  return scope_problem_ + ", so leases bind only the jobs of user " + user_name(geteuid()) +
         (geteuid() == 0 ? "; `gpusel setup`" : "; `sudo gpusel setup`") +
         " makes them bind every user; GPUSEL_LEASE_DIR=" + own_dir_ + " silences this";
}

namespace {

// Where `uuid`'s lease file is, as looked at without taking it: the store's file. Fills `st`
// (lstat) when it exists. A GPU the shared store lacks (added after `gpusel setup`) has no file
// an ordinary user may make: `missing` then says why it cannot be leased or claimed, rather than
// leasing it in a store that binds only this user (two users would both hold it).
struct Located {
  std::string path;
  bool exists = false;
  bool shared = false;
  uid_t owner = 0;
  std::string missing;
};

// `present`, when given, holds the names in the store's folder, listed a moment ago: a name not
// among them is not looked up (a look at every GPU of a large machine then costs one listing of
// the folder instead of a system call per GPU).
Located locate_file(const LeaseStore& store, const std::string& name, struct stat& st,
                    const std::set<std::string>* present = nullptr) {
  Located l;
  l.path = store.dir() + "/" + name;
  l.shared = store.shared();
  l.owner = store.shared() ? 0 : geteuid();
  if ((present == nullptr || present->count(name) != 0) && lstat(l.path.c_str(), &st) == 0) {
    l.exists = true;
    return l;
  }
  if (LeaseStoreAccess::own_primary(store)) return l;  // made there when taken
  l.missing = "the shared lease store " + store.dir() + " has no lease file for " +
              name.substr(0, name.rfind('.')) +
              " (the GPU was added after the store was set up), so no job may hold it until "
              "`sudo gpusel setup` adds it; --share (GPUSEL_SHARE=1) runs beside other jobs on "
              "purpose";
  return l;
}

}  // namespace

namespace {

// The names in folder `dir` (none when it does not exist); nullopt when it cannot be listed (then
// each name is looked up).
std::optional<std::set<std::string>> folder_names(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) {
    return errno == ENOENT ? std::optional<std::set<std::string>>(std::in_place) : std::nullopt;
  }
  std::set<std::string> names;
  while (dirent* e = readdir(d)) names.emplace(e->d_name);
  closedir(d);
  return names;
}

// Above this many GPUs, standings() lists the store's folder once rather than looking up each
// GPU's file (either way the answer is the same).
constexpr std::size_t kListStoreFrom = 16;

}  // namespace

namespace {

// Lease files this process found locked without a mark (a gpusel from before the marks, another
// program's flock, or a mark the kernel refused): looked at through the lock table from then on,
// so that a waiter does not take them for free at every look and try them again and again.
std::mutex unmarked_mutex;
std::set<std::pair<dev_t, ino_t>> unmarked;

void remember_unmarked(const struct stat& st) {
  const std::lock_guard<std::mutex> lock(unmarked_mutex);
  if (unmarked.size() < 4096) unmarked.emplace(st.st_dev, st.st_ino);
}

bool known_unmarked(const struct stat& st) {
  const std::lock_guard<std::mutex> lock(unmarked_mutex);
  return unmarked.count({st.st_dev, st.st_ino}) != 0;
}

// What the lease file at `path` (`st`: its lstat) tells of its lease, one file at a time:
// whether it is marked and, with `ask_lock` (Look::Marks), whether a lock stands behind the mark,
// asked of the lock itself: a try for it, let go at once, which fails while any holder has it (a
// mark is anyone's to add; the lock, only a lease's). Unasked where the kernel cannot tell or
// the file was replaced since.
enum class MarkLook { Unasked, Unmarked, Marked, Held, MarkAlone };
MarkLook look_at_mark(const std::string& path, const struct stat& st, bool ask_lock) {
  if (known_unmarked(st)) return MarkLook::Unasked;
  const int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) return MarkLook::Unasked;
  struct stat opened {};
  MarkLook out = MarkLook::Unasked;
  if (fstat(fd, &opened) == 0 && opened.st_dev == st.st_dev && opened.st_ino == st.st_ino) {
    const std::optional<bool> marked = held_mark(fd);
    if (marked == false) {
      out = MarkLook::Unmarked;
    } else if (marked == true && !ask_lock) {
      out = MarkLook::Marked;
    } else if (marked == true) {
      if (try_lock_file(fd, LockMode::Exclusive)) {
        out = MarkLook::MarkAlone;  // the close below lets it go
      } else if (errno == EWOULDBLOCK) {
        out = MarkLook::Held;
      }
    }
  }
  // Closing it tells the waiters watching the store that a lease file was closed: they ask its
  // mark before they look again (ReleaseWatch::wait), so lookers never wake each other for ever.
  close(fd);
  return out;
}

}  // namespace

std::vector<LeaseStanding> LeaseStore::standings(const std::vector<std::string>& uuids,
                                                 Look look) const {
  std::optional<LockTable> table;  // read once, and only when some lease file exists
  std::vector<LeaseStanding> out;
  out.reserve(uuids.size());
  const std::optional<std::set<std::string>> present =
      uuids.size() > kListStoreFrom ? folder_names(dir()) : std::nullopt;
  for (const std::string& uuid : uuids) {
    LeaseStanding s;
    if (!detail::is_plain_file_name(uuid)) {
      out.push_back(std::move(s));  // never leasable (take() says why), so never held
      continue;
    }
    struct stat st {};
    const Located l = locate_file(*this, lease_name(uuid), st, present ? &*present : nullptr);
    s.path = l.path;
    s.shared = l.shared;
    if (!l.missing.empty()) {
      s.state = LeaseStanding::State::Unusable;
      s.problem = l.missing;
    } else if (l.exists) {
      s.problem = lease_file_problem(l.path, st, l.owner, l.shared);
      if (!s.problem.empty()) {
        s.state = LeaseStanding::State::Unusable;
      } else {
        // A few files are asked of the kernel one by one; many, or where it cannot say, the lock
        // table is read once (cheaper than three system calls a file at 1,024 GPUs).
        const MarkLook mark = look != Look::Thorough && !present
                                  ? look_at_mark(l.path, st, look == Look::Marks)
                                  : MarkLook::Unasked;
        const std::string dir = l.path.substr(0, l.path.rfind('/'));
        // Unmarked: free (a holder from a gpusel without marks is found by take()). Marked, or
        // not asked: held when the table lists a flock on it, as before the marks; a mark alone,
        // which anyone who may read the file can add, holds nothing. Look::Marks asked the lock
        // itself instead of the table (the holder then unnamed: that needs the table).
        if (mark == MarkLook::Held) {
          s.state = LeaseStanding::State::Held;
          s.by_mark = true;
        } else if (mark == MarkLook::Marked || mark == MarkLook::Unasked) {
          if (!table) table.emplace();
          if (table->holder(st, dir)) {
            s.state = LeaseStanding::State::Held;
            s.holder = holder_of(*table, st, dir);
          }
        }
      }
    }
    out.push_back(std::move(s));
  }
  return out;
}

namespace {

// try_lock_file for a take. A look at a marked lease file (look_at_mark, free:N) tries its
// lock and lets go at once; a take in that moment finds the lock held and the file unmarked
// (the look takes no mark, and a lease that has just gone leaves none). So a lock held without
// a mark is tried again, for up to 20 milliseconds: a look has let go by then, even on a machine
// so loaded that the looking process waits a few milliseconds for a CPU between its try and its
// letting go (2 ms was too short for one such test run), and a job that has just taken the lease
// has marked it (then it is held), while a lock of another program's stays (held, as before: the
// 20 ms are paid once, the file then being known as held without a mark). errno as
// try_lock_file leaves it.
bool take_lock(int fd, LockMode mode) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(20);
  for (;;) {
    if (try_lock_file(fd, mode)) return true;
    const int e = errno;
    if (e != EWOULDBLOCK || held_mark(fd) != false || std::chrono::steady_clock::now() >= until) {
      errno = e;
      return false;
    }
    usleep(50);
  }
}

// Locks the file `name` of `uuid` in `store` (made when it is this user's to make) without
// waiting: a descriptor, or -1 with `s` saying why (held, and by whom; or unusable).
int lock_lease_file(const LeaseStore& store, const std::string& uuid, const std::string& name,
                    LockMode mode, LeaseStanding& s) {
  s = LeaseStanding{};
  auto unusable = [&](std::string problem) {
    s.state = LeaseStanding::State::Unusable;
    s.problem = std::move(problem);
    return -1;
  };
  if (!detail::is_plain_file_name(uuid)) {
    return unusable(detail::quote_value(uuid) +
                    " is not a GPU UUID as the NVIDIA driver reports one");
  }
  for (int attempt = 0; attempt < 8; ++attempt) {
    struct stat st {};
    Located l = locate_file(store, name, st);
    s.path = l.path;
    s.shared = l.shared;
    if (!l.missing.empty()) return unusable(l.missing);
    if (!l.exists) {
      // This user's own file, made now: in the primary store when it is this user's (or root's,
      // for root), else in the user's own store.
      try {
        prepare_store_folder(l.path.substr(0, l.path.rfind('/')));
      } catch (const Error& e) {
        return unusable(e.what());
      }
      const int made = open(l.path.c_str(), O_RDONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                            l.shared ? 0444 : 0400);
      if (made >= 0) {
        close(made);
      } else if (errno != EEXIST) {
        return unusable("cannot create " + l.path + ": " + errno_text(errno));
      }
      continue;  // looked at again, as any other file
    }
    if (std::string problem = lease_file_problem(l.path, st, l.owner, l.shared); !problem.empty()) {
      return unusable(problem);
    }
    const int fd = open(l.path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
      if (errno == ENOENT) continue;  // removed meanwhile
      return unusable("cannot open " + l.path + ": " + errno_text(errno));
    }
    struct stat held {};
    if (fstat(fd, &held) != 0 || held.st_dev != st.st_dev || held.st_ino != st.st_ino) {
      close(fd);
      continue;  // replaced between the look and the open
    }
    if (!take_lock(fd, mode)) {
      const int e = errno;
      // Held without a mark: looked at through the table from now on.
      if (e == EWOULDBLOCK && held_mark(fd) == false) remember_unmarked(held);
      close(fd);
      if (e != EWOULDBLOCK) return unusable("cannot lock " + l.path + ": " + errno_text(e));
      s.state = LeaseStanding::State::Held;
      s.holder = holder_of(LockTable(), held, l.path.substr(0, l.path.rfind('/')));
      return -1;
    }
    // The name must still lead to the file locked (only the store's owner can change it):
    // otherwise another process may lock the new file too.
    struct stat named {};
    if (lstat(l.path.c_str(), &named) == 0 && named.st_dev == held.st_dev &&
        named.st_ino == held.st_ino && named.st_nlink == 1) {
      mark_held(fd);
      // Every process this one starts inherits the locked descriptor, so the lock lasts as long
      // as any process of the job lives, however the one that took it ends (SIGKILL included).
      if (fcntl(fd, F_SETFD, 0) != 0) {
        const int e = errno;
        close(fd);
        return unusable("cannot keep the lock on " + l.path + " for the job: " + errno_text(e));
      }
      return fd;
    }
    close(fd);
  }
  return unusable("the file " + name + " in " + store.dir() +
                  " keeps being replaced; check who changes that folder");
}

// Whether `pid` is this process or one of its ancestors.
bool ancestor_or_self(int pid) {
  for (int p = getpid(), depth = 0; p > 0 && depth < 64; ++depth) {
    if (p == pid) return true;
    if (p == 1) break;
    p = detail::parent_of(p);
  }
  return false;
}

// Whether this process holds the file `st` through a descriptor it has (inherited from the job
// that locked it, or taken by an earlier claim) that carries its flock (an exclusive one when
// `exclusive`): a descriptor without one (a waiter's, kept to ask the mark) holds nothing.
bool holds_inherited(const struct stat& st, bool exclusive) {
  return has_open("self", st.st_dev, st.st_ino, exclusive).value_or(false);
}

// Whether `holder` is another job rather than a process of the same launch: another user's
// process, or a gpusel command that leases GPUs for its job (run, bench).
bool another_job(const LeaseHolder& holder) {
  if (holder.pid <= 0) return true;  // known only by a job's record: no process of this one
  struct stat st {};
  const std::string proc = "/proc/" + std::to_string(holder.pid);
  if (stat(proc.c_str(), &st) == 0 && st.st_uid != geteuid()) return true;
  const std::string& c = holder.command;
  const std::size_t space = c.find(' ');
  const std::string program = c.substr(0, space);
  const std::string base = program.substr(program.rfind('/') + 1);
  if (base != "gpusel" || space == std::string::npos) return false;
  return c.find(" run ") != std::string::npos || c.find(" bench ") != std::string::npos;
}

// The claims this process holds: kept open until it ends.
std::vector<int> held_claims;
std::mutex held_claims_mutex;

}  // namespace

std::optional<Lease> LeaseStore::take(const std::string& uuid, LeaseStanding* standing) const {
  LeaseStanding local;
  LeaseStanding& s = standing != nullptr ? *standing : local;
  const int fd = lock_lease_file(*this, uuid, lease_name(uuid), LockMode::Exclusive, s);
  if (fd < 0) return std::nullopt;
  detail::job_record_lease_taken(s.path.substr(0, s.path.rfind('/')), s.shared);
  return Lease(fd, uuid);
}

ClaimResult LeaseStore::claim(const std::string& uuid, bool share) const {
  ClaimResult out;
  // Two locks. The GPU's lease file, in the store leases live in, keeps every other job off the
  // GPU (with the shared store, every other user's): a process started by a job that holds the
  // lease (gpusel run's workers and whatever they start) holds it already, through the descriptor
  // it inherited, or under an ancestor that holds it; any other process locks it itself. Then
  // <UUID>.claim (in this user's own store, unless this user may make files in the lease store)
  // keeps two processes of one job off one GPU.
  struct stat st {};
  const Located l = locate_file(*this, lease_name(uuid), st);
  bool job_holds = l.exists && l.missing.empty() && holds_inherited(st, !share);
  if (!job_holds) {
    LeaseStanding s;
    const int fd = lock_lease_file(*this, uuid, lease_name(uuid),
                                   share ? LockMode::Shared : LockMode::Exclusive, s);
    if (fd >= 0) {
      std::lock_guard<std::mutex> lock(held_claims_mutex);
      held_claims.push_back(fd);
      job_holds = true;
    } else if (s.state == LeaseStanding::State::Unusable) {
      out.unusable = unusable_claim(s.problem, s.path);
      return out;
    } else if (s.holder && ancestor_or_self(s.holder->pid)) {
      job_holds = true;
    } else if (!s.holder || another_job(*s.holder)) {
      out.leased_elsewhere = true;
      out.leased_by_other_job = s.holder;
      if (!share) return out;
    }
    // Else the holder is a process of this user's that bound the GPU outside any gpusel run
    // (another rank of the same launch, say): the claim below names it.
  }
  // Beside the lease where this user may make files (its own store, or root's shared one), else
  // in this user's own store.
  LeaseStore own;
  own.dir_ = own.own_dir_ = own_dir_;
  own.own_primary_ = true;
  LeaseStanding s;
  const int fd = lock_lease_file(own_primary_ ? *this : own, uuid, uuid + ".claim",
                                 share ? LockMode::Shared : LockMode::Exclusive, s);
  if (fd >= 0) {
    std::lock_guard<std::mutex> lock(held_claims_mutex);
    held_claims.push_back(fd);
    out.claimed = true;
    return out;
  }
  if (s.state == LeaseStanding::State::Unusable) {
    // The lease keeps other jobs off the GPU; only two processes of this job are not told apart.
    out.claimed = job_holds;
    out.unusable = unusable_claim(
        s.problem + " (two processes of one job on this GPU are not told apart)", s.path);
    return out;
  }
  out.other = s.holder;
  out.beside = share;  // sharing: run beside an exclusive claim
  return out;
}

namespace {

// A descriptor, closed when it goes.
class OwnedFd {
 public:
  explicit OwnedFd(int fd = -1) : fd_(fd) {}
  ~OwnedFd() { reset(); }
  OwnedFd(const OwnedFd&) = delete;
  OwnedFd& operator=(const OwnedFd&) = delete;
  OwnedFd(OwnedFd&& other) noexcept : fd_(other.release()) {}
  OwnedFd& operator=(OwnedFd&& other) noexcept {
    if (this != &other) reset(other.release());
    return *this;
  }
  int get() const { return fd_; }
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void reset(int fd = -1) {
    if (fd_ >= 0) close(fd_);
    fd_ = fd;
  }

 private:
  int fd_;
};

constexpr int kOpenFolder = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
constexpr mode_t kWritableByOthers = S_IWGRP | S_IWOTH;
const char* const kLocalRemedy =
    "keep the store on a local file system (ext4, xfs, tmpfs; not bindfs, FUSE or NFS) with "
    "`sudo gpusel setup --lease-dir DIR`";

// Why the entry `name` of the folder `at` could not be opened as a folder: a link, or not a folder.
std::string not_a_folder(int at, const char* name, const std::string& path, int err) {
  struct stat st {};
  if (fstatat(at, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode)) {
    return path +
           " is a symbolic link, which root never follows in the store's path; remove it, "
           "or give --lease-dir a path of folders only root can change";
  }
  if (err == ENOTDIR || err == ELOOP) {
    return path + " is not a folder; remove it, or give --lease-dir another path";
  }
  return "cannot open " + path + ": " + errno_text(err);
}

// Gives the folder `fd` (at `path`, its fstat in `st`; `made` by this setup) to root with exactly
// `mode`, and checks that the file system kept it. False (and a problem) when it did not.
bool settle_folder(int fd, const std::string& path, struct stat& st, mode_t mode, bool made,
                   StoreSetup& report) {
  if (st.st_gid != 0 && fchown(fd, 0, 0) != 0) {
    report.problems.push_back("cannot give " + path + " to root's group: " + errno_text(errno));
    return false;
  }
  if ((st.st_mode & 07777) != mode) {
    if (fchmod(fd, mode) != 0) {
      report.problems.push_back("cannot set the mode of " + path + ": " + errno_text(errno));
      return false;
    }
    if (!made) {
      report.changes.push_back("set the mode of " + path + " to " + mode_text(mode) + " (was " +
                               mode_text(st.st_mode) + ")");
    }
  }
  if (made) report.changes.push_back("made " + path + " (mode " + mode_text(mode) + ")");
  const mode_t was = st.st_mode;
  if (fstat(fd, &st) != 0) {
    report.problems.push_back("cannot look at " + path + ": " + errno_text(errno));
    return false;
  }
  if ((st.st_mode & 07777) == mode) return true;
  const bool sticky_lost = (mode & S_ISVTX) && !(st.st_mode & S_ISVTX);
  report.problems.push_back(
      "the file system under " + path + " does not keep " +
      (sticky_lost ? std::string("the sticky bit, so any user could remove another's place in "
                                 "the queue")
                   : "the modes set on it, so other users could change the store") +
      " (set " + mode_text(mode) + ", it shows " + mode_text(st.st_mode) + ", was " +
      mode_text(was) + "); " + kLocalRemedy);
  return false;
}

// Opens the entry `name` of the folder `at` as a folder, never following a link; made (mode 0700,
// for the caller to settle) when absent. -1 with errno on failure; `made` says whether it was made.
int open_or_make_folder(int at, const char* name, bool& made) {
  made = false;
  int fd = openat(at, name, kOpenFolder);
  if (fd >= 0 || errno != ENOENT) return fd;
  if (mkdirat(at, name, 0700) == 0) {
    made = true;
  } else if (errno != EEXIST) {  // EEXIST: a setup running beside this one made it
    return -1;
  }
  return openat(at, name, kOpenFolder);
}

// Opens the store folder `path` for root: one component at a time from "/", each through the
// descriptor of the one before and never following a link, so that nothing an ordinary user can
// change decides where root works. Missing folders are made. Every folder on the way must belong
// to root; one that others may write must be sticky (its entries then belong to their owners, and
// the next one must be root's). The last `managed` folders are the store's own (the store, and
// /var/lib/gpusel for the default one): set here to root's, mode 0755. -1 and a problem on
// refusal.
int open_store_path(const std::string& path, std::size_t managed, StoreSetup& report) {
  std::vector<std::string> names;
  for (std::size_t at = 0; at < path.size();) {
    std::size_t end = path.find('/', at);
    if (end == std::string::npos) end = path.size();
    if (end > at) names.push_back(path.substr(at, end - at));
    at = end + 1;
  }
  if (names.empty() || std::any_of(names.begin(), names.end(),
                                   [](const std::string& n) { return n == "." || n == ".."; })) {
    report.problems.push_back("the store's path " + path +
                              " must name a folder below / without . or .. in it");
    return -1;
  }
  OwnedFd fd(open("/", kOpenFolder));
  if (fd.get() < 0) {
    report.problems.push_back("cannot open /: " + errno_text(errno));
    return -1;
  }
  std::string at;
  for (std::size_t i = 0; i < names.size(); ++i) {
    const std::string next = at + "/" + names[i];
    bool made = false;
    OwnedFd child(open_or_make_folder(fd.get(), names[i].c_str(), made));
    struct stat st {};
    if (child.get() < 0 || fstat(child.get(), &st) != 0) {
      report.problems.push_back(not_a_folder(fd.get(), names[i].c_str(), next, errno));
      return -1;
    }
    if (st.st_uid != 0) {
      report.problems.push_back(
          next + " belongs to " + user_name(st.st_uid) +
          ", not root, so that user could swap what root makes in it for links to other files; "
          "remove it (`rm -r " +
          next +
          "`) and run `gpusel setup` again, or give --lease-dir a "
          "path of folders only root can change");
      return -1;
    }
    const bool own = i + managed >= names.size();
    if (own || made) {
      if (!settle_folder(child.get(), next, st, 0755, made, report)) return -1;
    } else if ((st.st_mode & kWritableByOthers) && !(st.st_mode & S_ISVTX)) {
      report.problems.push_back(next + " can be written by other users (mode " +
                                mode_text(st.st_mode) +
                                ", not sticky), who could swap what comes after it for a link; "
                                "give --lease-dir a path of folders only root can change");
      return -1;
    }
    fd = std::move(child);
    at = next;
  }
  return fd.release();
}

// What became of an entry gpusel set out to remove.
enum class Removal { removed, live, kept };

// Removes the entry `name` of the folder `dir` (`st`: its fstatat), never following a link. A
// regular file goes only when nobody holds a lock on it: decided on a descriptor (the lock is
// taken, and the name is checked to still lead to the file locked), not on a look at /proc/locks
// that a waiter could have locked its ticket since. A folder goes only when empty.
Removal remove_entry(int dir, const char* name, const struct stat& st, int& err) {
  err = 0;
  if (S_ISDIR(st.st_mode)) {
    if (unlinkat(dir, name, AT_REMOVEDIR) == 0) return Removal::removed;
    err = errno;
    return Removal::kept;
  }
  if (!S_ISREG(st.st_mode)) {
    if (unlinkat(dir, name, 0) == 0 || errno == ENOENT) return Removal::removed;
    err = errno;
    return Removal::kept;
  }
  const OwnedFd fd(openat(dir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  struct stat opened {
  }, now{};
  if (fd.get() < 0 || fstat(fd.get(), &opened) != 0 || opened.st_dev != st.st_dev ||
      opened.st_ino != st.st_ino) {
    err = fd.get() < 0 ? errno : ESTALE;
    return Removal::live;  // gone or replaced since it was looked at: left for the next setup
  }
  if (!try_lock_file(fd.get(), LockMode::Exclusive)) {
    err = errno;
    return Removal::live;
  }
  if (fstatat(dir, name, &now, AT_SYMLINK_NOFOLLOW) != 0 || now.st_dev != opened.st_dev ||
      now.st_ino != opened.st_ino) {
    return Removal::live;
  }
  if (unlinkat(dir, name, 0) != 0) {
    err = errno;
    return Removal::kept;
  }
  return Removal::removed;  // the lock goes with the descriptor
}

// Makes a lease file for each GPU in the store `dir` (open as `store`), replacing what stands at
// its name unless a job holds it.
void make_lease_files(int store, const std::string& dir, const std::vector<std::string>& uuids,
                      StoreSetup& report) {
  for (const std::string& uuid : uuids) {
    if (!detail::is_plain_file_name(uuid)) {
      report.problems.push_back(detail::quote_value(uuid) +
                                " is not a GPU UUID: no lease file made");
      continue;
    }
    const std::string name = lease_name(uuid), path = dir + "/" + name;
    struct stat st {};
    if (fstatat(store, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
      const std::string problem = lease_file_problem(path, st, 0, true);
      if (problem.empty()) continue;
      const std::string what = problem.substr(0, problem.find(';'));
      int err = 0;
      const Removal r = remove_entry(store, name.c_str(), st, err);
      if (r == Removal::live) {
        report.problems.push_back(what +
                                  ", and a job holds it; run `gpusel setup` again when it "
                                  "ends");
        continue;
      }
      if (r == Removal::kept) {
        report.problems.push_back("cannot remove " + path + ": " + errno_text(err));
        continue;
      }
      report.changes.push_back("removed " + path + ": " + what);
    }
    const OwnedFd fd(
        openat(store, name.c_str(), O_RDONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444));
    if (fd.get() < 0) {
      report.problems.push_back("cannot make " + path + ": " + errno_text(errno));
      continue;
    }
    fchmod(fd.get(), 0444);  // whatever the umask
    report.changes.push_back("made " + path);
  }
}

// Takes root's setup lock in the store (open as `store`): one setup at a time. The lock file is
// root's alone (mode 0600), so no user can hold it. Also checks that the file system's locks
// exclude: a second descriptor of the locked file must not get the lock. -1 and a problem when
// the lock cannot be had or locks do not work.
int take_setup_lock(int store, const std::string& dir, StoreSetup& report) {
  const char* const name = ".setup-lock";
  const std::string path = dir + "/" + name;
  OwnedFd fd(openat(store, name, O_RDWR | O_CREAT | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC, 0600));
  struct stat st {};
  if (fd.get() < 0 || fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != 0 ||
      st.st_nlink != 1) {
    report.problems.push_back(path + " cannot serve as setup's lock (" +
                              (fd.get() < 0 ? errno_text(errno) : "not a file of root's alone") +
                              "); remove it and run `gpusel setup` again");
    return -1;
  }
  if (!lock_file(fd.get(), LockMode::Exclusive)) {
    report.problems.push_back("cannot lock " + path + ": " + errno_text(errno) + "; " +
                              kLocalRemedy);
    return -1;
  }
  const OwnedFd second(openat(store, name, O_RDWR | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC));
  if (second.get() < 0) {
    report.problems.push_back("cannot open " + path + ": " + errno_text(errno));
    return -1;
  }
  if (try_lock_file(second.get(), LockMode::Exclusive) || errno != EWOULDBLOCK) {
    report.problems.push_back(
        "locks do not work on the file system under " + dir +
        " (a second lock on a locked file was " +
        (errno == EWOULDBLOCK ? std::string("granted") : "refused with " + errno_text(errno)) +
        "), so leases there would exclude no one; " + kLocalRemedy);
    return -1;
  }
  return fd.release();
}

// Why the file system under the folder `dir` (at `path`) would not wake waiting jobs: a file
// `probe` made there must raise inotify's IN_CREATE within a second. "" when it does, or when
// this user cannot make files there.
std::string events_problem(int dir, const std::string& path, const std::string& probe) {
  DirWatch changes;
  const std::string self = "/proc/self/fd/" + std::to_string(dir);
  if (!changes.usable() || changes.add_folder(self, watch::kCreated) < 0) {
    return "cannot watch " + path + " for changes (" + errno_text(errno) +
           "), so waiting jobs would not be woken";
  }
  unlinkat(dir, probe.c_str(), 0);  // one left by a setup or doctor that was killed
  const OwnedFd file(
      openat(dir, probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (file.get() < 0) return "";  // cannot make files here: nothing to tell
  unlinkat(dir, probe.c_str(), 0);
  for (int waited = 0; waited < 1000; waited += 50) {
    if (changes.wait(50) <= 0) continue;
    for (const WatchNotice& n : changes.take()) {
      if ((n.events & watch::kCreated) && n.name == probe) return "";
    }
  }
  return "the file system under " + path +
         " does not report changes to inotify (a file made there was not seen in 1 s), so "
         "waiting jobs would not be woken when a GPU comes free";
}

// What `gpusel doctor` reports about the file system under an existing store `dir`: modes that
// are not the ones setup sets, a queue without its sticky bit, locks that do not exclude, inotify
// that does not report. The probes (a hidden file, made and removed at once) need a queue this
// user may make files in.
std::vector<std::string> store_problems(const std::string& dir) {
  std::vector<std::string> out;
  const OwnedFd store(open(dir.c_str(), kOpenFolder));
  struct stat st {};
  if (store.get() < 0 || fstat(store.get(), &st) != 0 || st.st_uid != 0) return out;
  if (st.st_mode & kWritableByOthers) {
    out.push_back("the shared store " + dir + " shows mode " + mode_text(st.st_mode) +
                  ", not the 0755 `gpusel setup` sets: its file system does not keep modes, or "
                  "someone changed them, so other users could change the store");
  }
  const std::string queue = dir + "/queue";
  const OwnedFd q(openat(store.get(), "queue", kOpenFolder));
  if (q.get() < 0 || fstat(q.get(), &st) != 0) return out;
  if ((st.st_mode & kWritableByOthers) && !(st.st_mode & S_ISVTX)) {
    out.push_back(queue + " can be written by every user but has no sticky bit (mode " +
                  mode_text(st.st_mode) + "), so any user can remove another's place in the queue");
  }
  char probe[64];
  std::snprintf(probe, sizeof probe, ".doctor-probe-%d", static_cast<int>(getpid()));
  const OwnedFd a(openat(q.get(), probe, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (a.get() < 0) return out;  // this user cannot make files in the queue: nothing more to try
  const OwnedFd b(openat(q.get(), probe, O_RDWR | O_NOFOLLOW | O_CLOEXEC));
  unlinkat(q.get(), probe, 0);
  if (b.get() >= 0 && try_lock_file(a.get(), LockMode::Exclusive) &&
      (try_lock_file(b.get(), LockMode::Exclusive) || errno != EWOULDBLOCK)) {
    out.push_back("locks do not work on the file system under " + dir +
                  " (a second lock on a locked file was granted), so leases exclude no one");
  }
  if (std::string p = events_problem(q.get(), queue, probe); !p.empty()) out.push_back(p);
  return out;
}

// The queue folder of the store (open as `store`): root's, mode 1777, sticky bit kept by the file
// system. -1 and a problem when it cannot be.
int open_queue(int store, const std::string& queue, StoreSetup& report) {
  bool made = false;
  OwnedFd fd(open_or_make_folder(store, "queue", made));
  struct stat st {};
  if (fd.get() < 0 && (errno == ENOTDIR || errno == ELOOP) &&
      fstatat(store, "queue", &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISDIR(st.st_mode) &&
      unlinkat(store, "queue", 0) == 0) {
    report.changes.push_back("removed " + queue + " (not a folder)");
    fd.reset(open_or_make_folder(store, "queue", made));
  }
  if (fd.get() < 0 || fstat(fd.get(), &st) != 0) {
    report.problems.push_back("cannot open " + queue + ": " + errno_text(errno));
    return -1;
  }
  if (st.st_uid != 0) {
    report.problems.push_back(queue + " belongs to " + user_name(st.st_uid) +
                              ", not root; remove it (`rm -r " + queue +
                              "`) and run `gpusel setup` again");
    return -1;
  }
  if (!settle_folder(fd.get(), queue, st, 01777, made, report)) return -1;
  return fd.release();
}

// Removes the queue's dead tickets and whatever is not a ticket. Live tickets stay (see
// remove_entry), and so does a ticket still being written (a hidden name, under a minute old);
// what cannot be removed (another user's folder that is not empty) is left, and said.
void clean_queue(int queue_fd, const std::string& queue, StoreSetup& report) {
  DIR* d = fdopendir(dup(queue_fd));
  if (d == nullptr) {
    report.problems.push_back("cannot read " + queue + ": " + errno_text(errno));
    return;
  }
  const int at = dirfd(d);
  while (const dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    struct stat st {};
    if (fstatat(at, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    const bool ticket_like = S_ISREG(st.st_mode) && st.st_nlink == 1;
    if (name[0] == '.' && S_ISREG(st.st_mode) && st.st_mtime + 60 >= time(nullptr)) continue;
    int err = 0;
    const std::string path = queue + "/" + detail::printable(name);
    switch (remove_entry(at, name.c_str(), st, err)) {
      case Removal::removed:
        report.changes.push_back("removed " + path +
                                 (!ticket_like ? ""
                                  : name.rfind(".job-", 0) == 0
                                      ? " (the record of a job that has ended)"
                                      : " (a dead ticket)"));
        break;
      case Removal::kept:
        report.changes.push_back("left " + path + " in place (cannot remove it: " +
                                 errno_text(err) + "); it blocks no one");
        break;
      case Removal::live:
        break;  // a job waits
    }
  }
  closedir(d);
}

}  // namespace

StoreSetup set_up_shared_store(const std::string& dir, const std::vector<std::string>& uuids) {
  if (geteuid() != 0) {
    throw failure("only root can make the shared lease store " + dir +
                      " (a store any user could change would bind no one): run `sudo gpusel setup`",
                  about(Subject::Lease, {{"path", dir}}));
  }
  StoreSetup report;
  const OwnedFd store(open_store_path(dir, dir == kSharedLeaseStore ? 2 : 1, report));
  if (store.get() < 0) return report;
  const OwnedFd lock(take_setup_lock(store.get(), dir, report));
  if (lock.get() < 0) return report;
  if (std::string p = events_problem(store.get(), dir, ".setup-probe"); !p.empty()) {
    report.problems.push_back(p + "; " + kLocalRemedy);
    return report;
  }
  make_lease_files(store.get(), dir, uuids, report);
  const std::string queue = dir + "/queue";
  const OwnedFd q(open_queue(store.get(), queue, report));
  if (q.get() < 0) return report;
  clean_queue(q.get(), queue, report);
  return report;
}

GPUSEL_END_NAMESPACE

namespace gpusel::detail {

std::vector<std::string> store_file_system_problems(const std::string& dir) {
  return store_problems(dir);
}

}  // namespace gpusel::detail

// ---- the queue ---------------------------------------------------------------------------------

namespace gpusel::detail {
namespace {

constexpr std::size_t kMaxTicketSize = 1 << 20;

// The queue folder of `store` that this process may use, made when absent and this user may;
// "" when there is none (then waiting jobs of other users are not seen).
std::string usable_queue(const LeaseStore& store, bool make) {
  const std::string dir = store.dir() + "/queue";
  struct stat st {};
  if (lstat(dir.c_str(), &st) != 0) {
    if (errno != ENOENT || !make || !LeaseStoreAccess::own_primary(store)) return "";
    // Made private, then given its mode: the umask is the whole process's, never changed here.
    const mode_t mode = store.shared() ? 01777 : 0700;
    if (mkdir(dir.c_str(), 0700) == 0) {
      const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (fd >= 0) {
        fchmod(fd, mode);
        close(fd);
      }
    } else if (errno != EEXIST) {
      return "";
    }
    if (lstat(dir.c_str(), &st) != 0) return "";
  }
  if (!S_ISDIR(st.st_mode) || S_ISLNK(st.st_mode)) return "";
  const uid_t owner = store.shared() ? 0 : geteuid();
  if (st.st_uid != owner) return "";
  // Open to others only with the sticky bit, so no one removes another's ticket.
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX)) return "";
  return dir;
}

// When a ticket arrived: the time of its last change, which the kernel sets. A ticket is written,
// made readable and renamed into view before anyone can see it, and never changed after, so this
// is the moment it joined; its owner can only move it later (a write, a chmod), never earlier, and
// an empty file planted early and armed later is ordered from its arming. The inode breaks ties.
struct Arrival {
  long long sec = 0;
  long long nsec = 0;
  ino_t ino = 0;
  auto key() const { return std::tie(sec, nsec, ino); }
};

Arrival arrival_of(const struct stat& st) {
  return Arrival{st.st_ctim.tv_sec, st.st_ctim.tv_nsec, st.st_ino};
}

// Tickets this process has seen unlocked (dead): locked again later by anyone, they are not given
// back a place they held before the look. Forgotten once they leave the folder.
std::mutex seen_dead_mutex;
// A file, and its last change: a new file that reuses a dead one's inode number is another file.
using FileVersion = std::tuple<dev_t, ino_t, long long, long long>;
std::set<FileVersion> seen_dead;

FileVersion version_of(const struct stat& st) {
  return {st.st_dev, st.st_ino, st.st_ctim.tv_sec, st.st_ctim.tv_nsec};
}

void remember_dead(const struct stat& st) {
  const std::lock_guard<std::mutex> lock(seen_dead_mutex);
  seen_dead.insert(version_of(st));
}

// Forgets the dead tickets on device `dev` that are no longer in its queue folder (`present`):
// the memory stays as large as the folder, and nothing still there is forgotten.
void forget_dead_except(dev_t dev, const std::set<std::pair<dev_t, ino_t>>& present) {
  const std::lock_guard<std::mutex> lock(seen_dead_mutex);
  for (auto it = seen_dead.begin(); it != seen_dead.end();) {
    if (std::get<0>(*it) == dev && present.count({dev, std::get<1>(*it)}) == 0) {
      it = seen_dead.erase(it);
    } else {
      ++it;
    }
  }
}

bool once_dead(const struct stat& st) {
  const std::lock_guard<std::mutex> lock(seen_dead_mutex);
  return seen_dead.count(version_of(st)) != 0;
}

}  // namespace

struct Ticket::Impl {
  std::string dir, name;
  TicketRequest request;
  int fd = -1;
  dev_t dev = 0;
  ino_t ino = 0;
};

Ticket::Ticket(const LeaseStore& store, const TicketRequest& request) : impl_(new Impl) {
  std::string dir = usable_queue(store, true);
  if (dir.empty()) {
    // The shared store has no queue this user may use: wait in the user's own.
    prepare_store_folder(store.own_dir());
    dir = store.own_dir() + "/queue";
    if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
      throw failure("cannot join the queue of waiting jobs in " + dir + ": " + errno_text(errno),
                    about(Subject::Lease, {{"path", dir}}));
    }
  }
  unsigned char random[8] = {};
  if (getrandom(random, sizeof random, 0) != static_cast<ssize_t>(sizeof random)) {
    const auto t = static_cast<unsigned long long>(std::time(nullptr));
    std::memcpy(random, &t, sizeof t);
  }
  char name[64];
  std::snprintf(name, sizeof name, "%d-%02x%02x%02x%02x%02x%02x%02x%02x",
                static_cast<int>(getpid()), random[0], random[1], random[2], random[3], random[4],
                random[5], random[6], random[7]);
  impl_->dir = dir;
  impl_->name = name;
  impl_->request = request;
  // Made readable by its owner alone, locked, written, made readable to all, and renamed into
  // view (the same file and lock): nobody else can open it, and so take a lock on it, before its
  // owner holds one, and whatever the umask, others can read it once it is seen. A ticket others
  // can see is always locked, so no look takes a live waiter's ticket for a dead one.
  const std::string path = dir + "/" + name, hidden = dir + "/." + name;
  const int fd = open(hidden.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    throw failure("cannot join the queue of waiting jobs in " + dir + ": " + errno_text(errno),
                  about(Subject::Lease, {{"path", dir}}));
  }
  impl_->fd = fd;
  const std::string text = format_ticket(request);
  struct stat st {};
  errno = EIO;  // what a short write leaves to say
  if (!try_lock_file(fd, LockMode::Exclusive) ||
      write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size()) ||
      fchmod(fd, 0644) != 0 || rename(hidden.c_str(), path.c_str()) != 0 || fstat(fd, &st) != 0) {
    const int e = errno;
    unlink(hidden.c_str());
    close(fd);
    impl_->fd = -1;
    throw failure("cannot join the queue of waiting jobs in " + dir + ": " + errno_text(e),
                  about(Subject::Lease, {{"path", dir}}));
  }
  impl_->dev = st.st_dev;
  impl_->ino = st.st_ino;
}

Ticket::~Ticket() {
  if (impl_ && impl_->fd >= 0) {
    unlink((impl_->dir + "/" + impl_->name).c_str());  // removed first: seen dead, then gone
    close(impl_->fd);
  }
}

namespace {

// Another process's ticket `name` as a waiter, or nullopt when it is not a live ticket gpusel
// wrote: not a plain file of its own; not locked (dead: this user's own are removed); locked by a
// process of another user than the file's owner (a sniped ticket); seen dead before; unreadable.
std::optional<Waiter> other_waiter(int dirfd, const std::string& dir, const std::string& name,
                                   const struct stat& st, const LockTable& table) {
  if (!S_ISREG(st.st_mode) || st.st_nlink != 1 || st.st_size > static_cast<off_t>(kMaxTicketSize) ||
      once_dead(st)) {
    return std::nullopt;
  }
  const int fd =
      openat(dirfd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  struct stat opened {};
  if (fstat(fd, &opened) != 0 || opened.st_ino != st.st_ino || opened.st_dev != st.st_dev) {
    close(fd);
    return std::nullopt;
  }
  // The lock says whether it lives, wherever its holder runs (/proc/locks lists only the locks of
  // processes in this pid namespace): a shared lock is refused while its owner holds it.
  if (try_lock_file(fd, LockMode::Shared)) {
    close(fd);
    remember_dead(st);
    if (st.st_uid == geteuid()) unlinkat(dirfd, name.c_str(), 0);  // this user's dead ticket
    return std::nullopt;
  }
  Waiter w;
  if (const std::optional<int> pid = table.holder(st, dir); pid && *pid > 0) {
    // The owner of the process and whether it is stopped (/proc/PID/stat is readable by anyone).
    const std::optional<ProcessStat> p = process_stat(*pid);
    // Another user's process holds it, or the process that took the lock has ended and a child
    // it left holds it (a waiter's ticket is never inherited): not a waiter's own ticket. A
    // process hidden from this user (hidepid) that exists is given the benefit of the doubt.
    if ((p && p->owner != st.st_uid) || (!p && !detail::process_exists(*pid))) {
      close(fd);
      return std::nullopt;
    }
    w.pid = *pid;
    w.stopped = p && (p->state == 'T' || p->state == 't');
  }
  std::string text(static_cast<std::size_t>(opened.st_size), '\0');
  const ssize_t got = pread(fd, text.data(), text.size(), 0);
  close(fd);
  text.resize(got > 0 ? static_cast<std::size_t>(got) : 0);
  std::optional<TicketRequest> request = parse_ticket(text);
  if (!request) return std::nullopt;
  w.request = std::move(*request);
  return w;
}

}  // namespace

std::vector<Waiter> waiters(const LeaseStore& store, const Ticket* own) {
  std::vector<std::string> dirs;
  if (own != nullptr) {
    dirs.push_back(own->impl_->dir);
  } else if (std::string q = usable_queue(store, false); !q.empty()) {
    dirs.push_back(q);
  }
  // The lock table (which tickets are alive, and whose) is read once, after the listing, and only
  // when the queue holds a name besides this process's own ticket: reading /proc/locks can cost
  // the kernel a grace period (10-20 ms), which a lone waiter woken by a release need not pay.
  // A listed ticket is always locked already (Ticket writes it under a hidden name first).
  std::optional<LockTable> table;
  std::map<uid_t, std::string> names_of;
  std::vector<std::pair<Arrival, Waiter>> found;
  std::set<std::pair<dev_t, ino_t>> present;  // the files listed, dead tickets included
  for (const std::string& dir : dirs) {
    const int dirfd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dirfd < 0) continue;
    DIR* d = fdopendir(dirfd);
    if (d == nullptr) {
      close(dirfd);
      continue;
    }
    std::vector<std::string> names;
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] != '.') {
        names.emplace_back(e->d_name);
        continue;
      }
      // A ticket stays hidden for the moment between its writing and its rename: one of this
      // user's that is a minute old and unlocked was left by a process killed in that moment (or
      // is the record of a job that has ended: job_record.hpp; a live job's record is locked).
      struct stat st {};
      int err = 0;
      if (e->d_name[1] != '\0' && std::strcmp(e->d_name, "..") != 0 &&
          fstatat(dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
          st.st_uid == geteuid() && st.st_mtime + 60 < time(nullptr)) {
        remove_entry(dirfd, e->d_name, st, err);
      }
    }
    const bool others = std::any_of(names.begin(), names.end(), [&](const std::string& n) {
      return own == nullptr || n != own->impl_->name;
    });
    if (others && !table) table.emplace();
    for (const std::string& name : names) {
      struct stat st {};
      if (fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
      present.insert({st.st_dev, st.st_ino});
      const bool mine =
          own != nullptr && st.st_dev == own->impl_->dev && st.st_ino == own->impl_->ino;
      std::optional<Waiter> w;
      if (mine) {
        w.emplace();
        w->request = own->impl_->request;
        w->own = true;
      } else {
        if (!table) table.emplace();  // a ticket written since the listing
        w = other_waiter(dirfd, dir, name, st, *table);
      }
      if (!w) continue;
      w->path = dir + "/" + name;
      if (auto it = names_of.find(st.st_uid); it != names_of.end()) {
        w->owner = it->second;
      } else {
        w->owner = names_of[st.st_uid] = user_name(st.st_uid);
      }
      w->key = std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
      w->arrived_ns = static_cast<long long>(st.st_ctim.tv_sec) * 1000000000LL + st.st_ctim.tv_nsec;
      found.emplace_back(arrival_of(st), std::move(*w));
    }
    struct stat folder {};
    if (fstat(dirfd, &folder) == 0) forget_dead_except(folder.st_dev, present);
    closedir(d);
  }
  std::stable_sort(found.begin(), found.end(),
                   [](const auto& a, const auto& b) { return a.first.key() < b.first.key(); });
  std::vector<Waiter> out;
  out.reserve(found.size());
  for (auto& f : found) out.push_back(std::move(f.second));
  return out;
}

void name_waiters(std::vector<Waiter>& waiters) {
  for (Waiter& w : waiters) {
    if (w.pid > 0 && !w.who) w.who = detail::process_details(w.pid);
    // Held from another pid namespace: the process is not visible, its ticket's owner is.
    if (w.pid <= 0 && !w.who && !w.owner.empty()) w.who = LeaseHolder{0, w.owner, "", ""};
  }
}

ReleaseWatch::ReleaseWatch(const LeaseStore& store) {
  if (!watch_.usable()) return;  // wait() then sleeps for its timeout
  // A lease is released when its file's last descriptor closes: closed unwritten (files are
  // opened read-only). A waiter leaving the queue removes its ticket, or (killed) closes it
  // after writing: deleted, closed written. Looking at tickets and leases opens nothing for
  // writing and takes no lease, so waiters looking around do not wake each other.
  std::vector<std::string> dirs{store.dir()};
  if (store.own_dir() != store.dir()) dirs.push_back(store.own_dir());  // GPUSEL_LEASE_DIR: one
  for (const std::string& dir : dirs) {
    const int w = watch_.add_folder(dir, watch::kClosedUnwritten);
    if (w >= 0) {
      lease_watches_.push_back(w);
      lease_dirs_[w] = dir;
    }
    const int q = watch_.add_folder(dir + "/queue",
                                    watch::kClosedWritten | watch::kDeleted | watch::kMovedOut);
    if (q >= 0) queue_watches_.push_back(q);
  }
}

ReleaseWatch::~ReleaseWatch() {
  for (const auto& [path, fd] : looked_at_) close(fd);
}

void ReleaseWatch::follow(const std::string& path) {
  if (!watch_.usable()) return;
  const auto ours = [&](int wd) {
    return std::find(lease_watches_.begin(), lease_watches_.end(), wd) != lease_watches_.end() ||
           std::find(queue_watches_.begin(), queue_watches_.end(), wd) != queue_watches_.end();
  };
  followed_gone_ = false;
  int wd = -1;
  if (!path.empty()) {
    // The ticket's holder unlinks it (attributes: its link count drops) or ends (closed written:
    // the ticket was opened for writing); others only read it.
    wd = watch_.add_file(
        path, watch::kAttributes | watch::kClosedWritten | watch::kSelfDeleted | watch::kSelfMoved);
    if (wd < 0) followed_gone_ = true;  // gone already: look again at once
    if (ours(wd)) wd = -1;              // never a folder's watch (cannot be: a regular file)
  }
  if (followed_ >= 0 && followed_ != wd) watch_.remove(followed_);
  followed_ = wd;
}

bool ReleaseWatch::wait(std::chrono::milliseconds timeout, const std::vector<std::string>& gpus) {
  if (!watch_.usable()) {
    poll(nullptr, 0, static_cast<int>(std::min<long long>(timeout.count(), 50)));
    return true;  // without notifications, look again often
  }
  // Events that tell nothing (a folder listed, a lease file looked at) are read and waited past,
  // so that waiters looking around never wake each other, or themselves, for nothing.
  if (followed_gone_) return true;
  const bool following = followed_ >= 0;
  std::set<std::string> names;
  for (const std::string& uuid : gpus) names.insert(lease_name(uuid));
  using Clock = std::chrono::steady_clock;
  const auto until = Clock::now() + timeout;
  int fruitless = 0;  // notices in a row that told nothing
  // Closes of wanted lease files that were still marked when told: the kernel tells of a close
  // before it drops the closing file's locks, so a release can look held for a moment. Asked
  // again 3 ms later.
  std::set<std::pair<int, std::string>> recheck;
  auto recheck_at = Clock::time_point::max();
  const auto released_since = [&] {
    for (const auto& [wd, name] : recheck) {
      if (!still_held(wd, name)) return true;
    }
    recheck.clear();
    recheck_at = Clock::time_point::max();
    return false;
  };
  while (true) {
    if (!recheck.empty() && Clock::now() >= recheck_at && released_since()) return true;
    if (fruitless >= 3) {
      // Someone opens and closes lease files in a loop: its notices are gathered 20 ms at a time
      // rather than read one by one (a release among them is seen at most that much later).
      const auto pause = std::min<std::chrono::steady_clock::duration>(
          std::chrono::milliseconds(20), until - std::chrono::steady_clock::now());
      if (pause.count() > 0) std::this_thread::sleep_for(pause);
    }
    const auto left =
        std::chrono::ceil<std::chrono::milliseconds>(std::min(until, recheck_at) - Clock::now());
    const int ready =
        watch_.wait(static_cast<int>(std::clamp<long long>(left.count(), 0, 1 << 30)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) return false;
    if (ready == 0) {
      if (!recheck.empty() && released_since()) return true;
      if (Clock::now() >= until) return false;
      continue;
    }
    bool relevant = false;
    for (const WatchNotice& e : watch_.take()) {
      const bool lease_dir =
          std::find(lease_watches_.begin(), lease_watches_.end(), e.watch) != lease_watches_.end();
      const bool queue_dir =
          std::find(queue_watches_.begin(), queue_watches_.end(), e.watch) != queue_watches_.end();
      if (e.watch == followed_ && following) {
        relevant = true;  // the job ahead moved on: left the queue, or ended
      } else if (e.events & watch::kOverflow) {
        relevant = true;  // notices were lost
      } else if (following) {
        // Behind another job: no release and no other ticket concerns this one yet.
      } else if (queue_dir && !e.name.empty() && e.name[0] == '.') {
        // A ticket being written, renamed into view: a newcomer queues behind everyone.
      } else if (!lease_dir || queue_dir) {
        relevant = true;  // a ticket left the queue, or its holder died (or notices were lost)
      } else if (!e.name.empty() && !relevant) {
        const std::string& name = e.name;
        const bool wanted = names.empty()
                                ? name.size() > 5 && name.substr(name.size() - 5) == ".lock"
                                : names.count(name) != 0;
        if (wanted && !still_held(e.watch, name)) {
          relevant = true;
        } else if (wanted) {
          recheck.emplace(e.watch, name);
          recheck_at = std::min(recheck_at, Clock::now() + std::chrono::milliseconds(3));
        }
      }
    }
    if (relevant) return true;
    ++fruitless;
  }
}

bool ReleaseWatch::still_held(int wd, const std::string& name) {
  const auto dir = lease_dirs_.find(wd);
  if (dir == lease_dirs_.end()) return false;
  const std::string path = dir->second + "/" + name;
  // A file looked at before is asked again through the same descriptor while it is still linked
  // (only the store's owner unlinks or replaces lease files): two system calls an event, which a
  // loop opening the files as fast as it can makes thousands of a second.
  struct stat opened {};
  auto it = looked_at_.find(path);
  if (it != looked_at_.end() && (fstat(it->second, &opened) != 0 || opened.st_nlink == 0)) {
    close(it->second);
    looked_at_.erase(it);
    it = looked_at_.end();
  }
  if (it == looked_at_.end()) {
    struct stat named {};
    const int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) return false;
    if (lstat(path.c_str(), &named) != 0 || fstat(fd, &opened) != 0 ||
        opened.st_dev != named.st_dev || opened.st_ino != named.st_ino) {
      close(fd);
      return false;
    }
    // A waiter for every GPU of a large machine keeps at most 64 (a close of one dropped wakes
    // the others once).
    if (looked_at_.size() >= 64) {
      close(looked_at_.begin()->second);
      looked_at_.erase(looked_at_.begin());
    }
    it = looked_at_.emplace(path, fd).first;
  }
  // A file held without a mark: every close counts, as before the marks.
  if (known_unmarked(opened)) return false;
  return held_mark(it->second).value_or(false);
}

std::string queue_directory(const LeaseStore& store) {
  return usable_queue(store, false);
}

std::string process_command(int pid) {
  std::vector<std::string> args = process_args(pid);
  while (!args.empty() && args.back().empty()) args.pop_back();  // trailing empty arguments
  // The command line as a shell would take it back: a word with blanks or the shell's own
  // characters in single quotes (`sh -c 'sleep 5'`, not `sh -c sleep 5`). Raw otherwise:
  // describe_holder escapes what a terminal would act on.
  std::string command;
  for (std::size_t i = 0; i < args.size(); ++i) {
    command += (i == 0 ? "" : " ") + detail::shell_word(args[i], "_@%+=:,./-");
  }
  if (command.size() > 200) command = command.substr(0, 197) + "...";
  return command;
}

LeaseHolder process_details(int pid) {
  LeaseHolder h;
  h.pid = pid;
  const std::string proc = "/proc/" + std::to_string(pid);
  struct stat st {};
  if (stat(proc.c_str(), &st) == 0) h.user = user_name(st.st_uid);
  h.command = process_command(pid);
  // Start time, from the clock ticks after boot at which it started.
  const std::optional<ProcessStat> stat_fields = process_stat(pid);
  const unsigned long long ticks = stat_fields ? stat_fields->start : 0;
  // "/proc/uptime": "350735.47 234388.90", seconds since boot and idle; the whole seconds do.
  const std::string uptime_text = detail::read_first_line("/proc/uptime").value_or("");
  const std::optional<std::uint64_t> uptime = detail::read_decimal(
      std::string_view(uptime_text).substr(0, uptime_text.find_first_not_of("0123456789")),
      std::uint64_t{1} << 50);
  const long hz = sysconf(_SC_CLK_TCK);
  if (ticks > 0 && hz > 0 && uptime) {
    const std::time_t started =
        std::time(nullptr) - static_cast<std::time_t>(*uptime) +
        static_cast<std::time_t>(ticks / static_cast<unsigned long long>(hz));
    std::tm tm{};
    char text[32];
    if (localtime_r(&started, &tm) != nullptr &&
        std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S", &tm) > 0) {
      h.started = text;
    }
  }
  return h;
}

}  // namespace gpusel::detail
