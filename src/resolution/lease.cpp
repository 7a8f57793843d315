// Leases: one flock per GPU UUID in a shared folder; holders read from /proc.
#include "gpusel/lease.hpp"

#include <fcntl.h>
#include <pwd.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>

#include "env.hpp"
#include "gpusel/error.hpp"
#include "gpusel/resolve.hpp"
#include "text.hpp"

GPUSEL_BEGIN_NAMESPACE
namespace {

std::string errno_text(int e) {
  return std::strerror(e);
}

// A lease file's name: the UUID, which holds only letters, digits and dashes.
std::string lease_path(const std::string& dir, const std::string& uuid) {
  if (!detail::is_plain_file_name(uuid)) {
    throw failure(
        "cannot lease GPU " + quote_value(uuid) +
        ": not a GPU UUID (letters, digits and dashes), as the NVIDIA driver reported it");
  }
  return dir + "/" + uuid + ".lock";
}

// The pid holding an exclusive flock on (dev, ino), from /proc/locks.
std::optional<int> lock_owner(dev_t dev, ino_t ino) {
  std::ifstream locks("/proc/locks");
  std::string line;
  while (std::getline(locks, line)) {
    // "1: FLOCK  ADVISORY  WRITE 4242 08:01:1234 0 EOF"; blocked waiters have "->" after the id.
    std::istringstream in(line);
    std::string id, kind, mode, access, where;
    int pid = 0;
    if (!(in >> id >> kind)) continue;
    if (kind == "->") continue;
    if (kind != "FLOCK" || !(in >> mode >> access >> pid >> where)) continue;
    unsigned maj = 0, min = 0;
    unsigned long long inode = 0;
    if (std::sscanf(where.c_str(), "%x:%x:%llu", &maj, &min, &inode) != 3) continue;
    if (makedev(maj, min) == dev && inode == ino) return pid;
  }
  return std::nullopt;
}

}  // namespace

LeaseHolder process_details(int pid) {
  LeaseHolder h;
  h.pid = pid;
  const std::string proc = "/proc/" + std::to_string(pid);
  struct stat st {};
  if (stat(proc.c_str(), &st) == 0) {
    passwd pw{}, *found = nullptr;
    char buf[1024];
    if (getpwuid_r(st.st_uid, &pw, buf, sizeof buf, &found) == 0 && found != nullptr) {
      h.user = pw.pw_name;
    } else {
      h.user = "uid " + std::to_string(st.st_uid);
    }
  }
  std::ifstream cmdline(proc + "/cmdline", std::ios::binary);
  std::string args((std::istreambuf_iterator<char>(cmdline)), std::istreambuf_iterator<char>());
  if (args.size() > 200) args.resize(200);
  while (!args.empty() && args.back() == '\0') args.pop_back();
  for (char& c : args) {
    if (c == '\0') c = ' ';
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';  // nothing for a terminal
  }
  h.command = args;
  // Start time: field 22 of stat, in clock ticks after boot.
  std::ifstream statf(proc + "/stat");
  std::string stat_line;
  std::getline(statf, stat_line);
  const std::size_t paren = stat_line.rfind(')');
  if (paren != std::string::npos) {
    std::istringstream in(stat_line.substr(paren + 2));
    std::string field;
    unsigned long long start_ticks = 0;
    for (int i = 3; i <= 22 && in >> field; ++i) {
      if (i == 22) start_ticks = std::strtoull(field.c_str(), nullptr, 10);
    }
    std::ifstream uptime_file("/proc/uptime");
    double uptime = 0;
    const long hz = sysconf(_SC_CLK_TCK);
    if (start_ticks > 0 && hz > 0 && (uptime_file >> uptime)) {
      const std::time_t started =
          std::time(nullptr) - static_cast<std::time_t>(uptime) +
          static_cast<std::time_t>(start_ticks / static_cast<unsigned long long>(hz));
      std::tm tm{};
      char text[32];
      if (localtime_r(&started, &tm) != nullptr &&
          std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S", &tm) > 0) {
        h.started = text;
      }
    }
  }
  return h;
}

namespace {

// Opens the lease file of `uuid` read-only, creating it when absent, never through a link.
int open_lease_file(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0444);
  if (fd < 0 && errno == EACCES) fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    const int e = errno;
    if (e == ELOOP) {
      throw failure("the lease file " + path +
                    " is a symbolic link; gpusel never follows one there (someone may be trying to "
                    "redirect its leases): remove it, or use another GPUSEL_LEASE_DIR");
    }
    throw failure("cannot open the lease file " + path + ": " + errno_text(e) +
                  "; check the lease folder's permissions, or set GPUSEL_LEASE_DIR");
  }
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    throw failure("the lease file " + path +
                  " is not a regular file; remove it, or use another GPUSEL_LEASE_DIR");
  }
  return fd;
}

}  // namespace

std::string lease_directory() {
  if (auto dir = gpusel::detail::env_value("GPUSEL_LEASE_DIR"); dir && !dir->empty()) return *dir;
  return "/tmp/gpusel-leases";
}

void check_lease_directory(const std::string& dir) {
  struct stat st {};
  if (lstat(dir.c_str(), &st) != 0) {
    if (errno != ENOENT) {
      throw failure("cannot use the lease folder " + dir + ": " + errno_text(errno) +
                    "; set GPUSEL_LEASE_DIR to a folder you can use");
    }
    const mode_t old = umask(0);
    const int rc = mkdir(dir.c_str(), 01777);
    const int e = errno;
    umask(old);
    if (rc != 0 && e != EEXIST) {
      throw failure("cannot create the lease folder " + dir + ": " + errno_text(e) +
                    "; set GPUSEL_LEASE_DIR to a folder you can use");
    }
    if (lstat(dir.c_str(), &st) != 0) {
      throw failure("cannot use the lease folder " + dir + ": " + errno_text(errno));
    }
  }
  if (S_ISLNK(st.st_mode)) {
    throw failure("the lease folder " + dir +
                  " is a symbolic link; gpusel does not follow one there: use the real folder in "
                  "GPUSEL_LEASE_DIR");
  }
  if (!S_ISDIR(st.st_mode)) {
    throw failure("the lease folder " + dir + " is not a folder; set GPUSEL_LEASE_DIR to one");
  }
  if ((st.st_mode & S_IWOTH) && !(st.st_mode & S_ISVTX)) {
    throw failure("the lease folder " + dir +
                  " is writable by every user but lacks the sticky bit, so anyone could replace "
                  "another's lease files; run `chmod +t " +
                  dir + "`, or use another GPUSEL_LEASE_DIR");
  }
  if (st.st_uid != 0 && st.st_uid != geteuid()) {
    throw failure("the lease folder " + dir + " belongs to another user (uid " +
                  std::to_string(st.st_uid) +
                  "), who could remove the leases in it; use a folder owned by root or by you "
                  "(GPUSEL_LEASE_DIR)");
  }
  if (access(dir.c_str(), W_OK | X_OK) != 0) {
    throw failure("the lease folder " + dir + " is not writable: " + errno_text(errno) +
                  "; set GPUSEL_LEASE_DIR to a folder you can write");
  }
}

Lease& Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = other.fd_;
    uuid_ = std::move(other.uuid_);
    other.fd_ = -1;
  }
  return *this;
}

Lease::~Lease() {
  if (fd_ >= 0) close(fd_);  // the kernel drops the lock with the last descriptor
}

std::optional<Lease> try_lease(const std::string& dir, const std::string& uuid,
                               std::optional<LeaseHolder>* holder) {
  const std::string path = lease_path(dir, uuid);
  for (int attempt = 0; attempt < 8; ++attempt) {
    const int fd = open_lease_file(path);
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int e = errno;
      struct stat st {};
      const bool got_stat = fstat(fd, &st) == 0;
      close(fd);
      if (e != EWOULDBLOCK) {
        throw failure("cannot lock the lease file " + path + ": " + errno_text(e));
      }
      if (holder != nullptr) {
        std::optional<int> pid = got_stat ? lock_owner(st.st_dev, st.st_ino) : std::nullopt;
        *holder = pid ? std::optional<LeaseHolder>(process_details(*pid)) : std::nullopt;
      }
      return std::nullopt;
    }
    // The name must still lead to the file we locked (it is never removed by gpusel, but its
    // owner could remove it): otherwise another process may lock the new file too.
    struct stat held {
    }, named{};
    if (fstat(fd, &held) == 0 && lstat(path.c_str(), &named) == 0 && held.st_dev == named.st_dev &&
        held.st_ino == named.st_ino) {
      return Lease(fd, uuid);
    }
    close(fd);
  }
  throw failure("the lease file " + path + " keeps being replaced; check who writes to " + dir);
}

std::optional<LeaseHolder> lease_holder(const std::string& dir, const std::string& uuid) {
  // Read-only: /proc/locks, not a test lock, which would make a concurrent taker fail.
  if (!detail::is_plain_file_name(uuid)) return std::nullopt;  // never leasable, so never leased
  const std::string path = lease_path(dir, uuid);
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
  const std::optional<int> pid = lock_owner(st.st_dev, st.st_ino);
  if (!pid) return std::nullopt;
  return process_details(*pid);
}

GPUSEL_END_NAMESPACE
