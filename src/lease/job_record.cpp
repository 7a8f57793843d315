// The job record (job_record.hpp): written by a process that leases GPUs in the shared store,
// read by whoever finds one of those leases held after that process has ended.
#include "job_record.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>

#include "ancestry.hpp"
#include "file_lock.hpp"
#include "file_text.hpp"
#include "gpusel_detail.hpp"

namespace gpusel::detail {
namespace {

constexpr off_t kMaxRecordSize = 8192;
constexpr std::size_t kMaxGroups = 512;  // 512 numbers and a 200-byte command fit the size
constexpr const char* kRecordHead = "gpusel job record 1\n";

struct RecordState {
  std::mutex mutex;
  int fd = -1;
  int maker = 0;  // the process that made the record: a forked child leaves it alone
  std::string path;
  int leases = 0;
  std::vector<int> groups;  // the workers'
  std::string command;
};

// Never destroyed: a lease released while the process exits still finds it.
RecordState& state() {
  static auto* s = new RecordState;
  return *s;
}

std::string record_text(const RecordState& s) {
  std::string out = kRecordHead;
  out += "groups";
  for (std::size_t i = 0; i < s.groups.size() && i < kMaxGroups; ++i) {
    out += " " + std::to_string(s.groups[i]);
  }
  out += "\ncommand " + s.command + "\n";
  return out;
}

void write_record(const RecordState& s) {
  const std::string text = record_text(s);
  if (pwrite(s.fd, text.data(), text.size(), 0) == static_cast<ssize_t>(text.size())) {
    if (ftruncate(s.fd, static_cast<off_t>(text.size())) != 0) return;  // a longer old text stays
  }
}

// The queue folder of store `store_dir`, when it is the shared store's own: root's, and closed
// to others' removals by the sticky bit where others may write it. Empty otherwise.
std::string trusted_queue(const std::string& store_dir) {
  const std::string queue = store_dir + "/queue";
  struct stat st {};
  if (lstat(queue.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != 0) return "";
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX)) return "";
  return queue;
}

// The name of the record of process `pid` of user `uid`: the owner's uid in the name, so that no
// other user can take the name first.
std::string record_name(uid_t uid, int pid) {
  return ".job-" + std::to_string(uid) + "-" + std::to_string(pid);
}

// Makes this process's record in `queue`. A record of an ended process of this user under the
// same name (the pid reused) is removed first; any other leaves this process without a record.
void make_record(RecordState& s, const std::string& queue) {
  const std::string path = queue + "/" + record_name(geteuid(), static_cast<int>(getpid()));
  for (int attempt = 0; attempt < 2; ++attempt) {
    // Readable by its owner alone until locked, so nobody else takes a lock on it first; the
    // descriptor is inherited by the workers, which keep the lock while they live.
    const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_NOCTTY, 0600);
    if (fd >= 0) {
      if (!try_lock_file(fd, LockMode::Shared) || fchmod(fd, 0644) != 0) {
        unlink(path.c_str());
        close(fd);
        return;
      }
      s.fd = fd;
      s.maker = static_cast<int>(getpid());
      s.path = path;
      s.command = process_command(getpid());  // its command line alone: no user or start time
      write_record(s);
      return;
    }
    if (errno != EEXIST) return;
    const int old = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    struct stat st {};
    const bool stale = old >= 0 && fstat(old, &st) == 0 && S_ISREG(st.st_mode) &&
                       st.st_uid == geteuid() && !file_locked(old);
    if (old >= 0) close(old);
    if (!stale || unlink(path.c_str()) != 0) return;
  }
}

}  // namespace

void job_record_lease_taken(const std::string& store_dir, bool shared) {
  RecordState& s = state();
  const std::lock_guard<std::mutex> lock(s.mutex);
  ++s.leases;
  if (s.fd >= 0 || !shared) return;
  if (const std::string queue = trusted_queue(store_dir); !queue.empty()) make_record(s, queue);
}

void job_record_lease_released() {
  RecordState& s = state();
  const std::lock_guard<std::mutex> lock(s.mutex);
  if (s.leases > 0) --s.leases;
  // A child forked by a program that leased (its copy of a Lease released) keeps its hands off
  // the parent's record.
  if (s.leases > 0 || s.fd < 0 || s.maker != static_cast<int>(getpid())) return;
  unlink(s.path.c_str());
  close(s.fd);
  s.fd = -1;
  s.path.clear();
}

void note_job_groups(const std::vector<int>& pids) {
  RecordState& s = state();
  const std::lock_guard<std::mutex> lock(s.mutex);
  if (s.fd < 0 || s.maker != static_cast<int>(getpid())) return;
  for (int pid : pids) {
    // Each worker leads a process group of its own (launch.cpp); what it starts stays in it
    // unless it moves itself.
    const int group = getpgid(pid);
    if (group > 0 && std::find(s.groups.begin(), s.groups.end(), group) == s.groups.end()) {
      s.groups.push_back(group);
    }
  }
  write_record(s);
}

namespace {

// The record in `name` (opened at `dir`) when it is live and well formed: locked, a plain file
// of one name, owned by the user its name gives.
std::optional<JobRecord> read_record(int dir, const std::string& name, uid_t named_owner) {
  const int fd =
      openat(dir, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  struct stat st {};
  std::string text;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_nlink == 1 && st.st_uid == named_owner &&
      st.st_size <= kMaxRecordSize && file_locked(fd)) {
    text.resize(static_cast<std::size_t>(st.st_size));
    const ssize_t got = pread(fd, text.data(), text.size(), 0);
    text.resize(got > 0 ? static_cast<std::size_t>(got) : 0);
  }
  close(fd);
  if (text.rfind(kRecordHead, 0) != 0) return std::nullopt;
  JobRecord r;
  r.owner = st.st_uid;
  r.dev = st.st_dev;
  r.ino = st.st_ino;
  const std::string_view body = std::string_view(text).substr(std::strlen(kRecordHead));
  std::size_t at = 0;
  while (const std::optional<std::string_view> line = detail::next_line(body, at)) {
    if (line->substr(0, 6) == "groups") {
      // Decimal group ids, blank-separated; the list ends at the first word that is not one.
      std::size_t word_at = 6;
      while (r.groups.size() < kMaxGroups) {
        const std::string_view word = detail::next_word(*line, word_at);
        long g = 0;
        const char* end = word.data() + word.size();
        const auto [ptr, ec] = std::from_chars(word.data(), end, g);
        if (word.empty() || ec != std::errc() || ptr != end) break;
        if (g > 0 && g < (1L << 22)) r.groups.push_back(static_cast<int>(g));
      }
    } else if (line->substr(0, 8) == "command ") {
      r.command = std::string(line->substr(8));
    }
  }
  return r;
}

}  // namespace

std::vector<JobRecord> read_job_records(const std::string& store_dir, int pid) {
  std::vector<JobRecord> out;
  const std::string queue = trusted_queue(store_dir);
  if (queue.empty() || pid <= 0) return out;
  DIR* d = opendir(queue.c_str());
  if (d == nullptr) return out;
  const std::string tail = "-" + std::to_string(pid);
  while (const dirent* e = readdir(d)) {
    // ".job-<uid>-<pid>"
    const std::string_view name(e->d_name);
    if (name.rfind(".job-", 0) != 0 || name.size() <= 5 + tail.size() ||
        name.substr(name.size() - tail.size()) != tail) {
      continue;
    }
    const std::string uid_text(name.substr(5, name.size() - 5 - tail.size()));
    char* end = nullptr;
    const unsigned long uid = std::strtoul(uid_text.c_str(), &end, 10);
    if (uid_text.empty() || *end != '\0' || uid > 0xFFFFFFFEUL) continue;
    if (std::optional<JobRecord> r =
            read_record(dirfd(d), std::string(name), static_cast<uid_t>(uid))) {
      r->folder = queue;
      out.push_back(std::move(*r));
    }
  }
  closedir(d);
  return out;
}

std::optional<int> oldest_process(
    const std::function<bool(int proc, const char* pid, int group)>& matches) {
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return std::nullopt;
  std::optional<int> best;
  unsigned long long best_start = 0;
  while (const dirent* e = readdir(proc)) {
    char* end = nullptr;
    const long pid = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || pid <= 0) continue;
    // A process that has ended and not been reaped holds no descriptor.
    const std::optional<ProcessStat> s = process_stat(static_cast<int>(pid));
    if (!s || s->state == 'Z' || s->state == 'X' || !matches(dirfd(proc), e->d_name, s->group)) {
      continue;
    }
    if (!best || s->start < best_start) {
      best = static_cast<int>(pid);
      best_start = s->start;
    }
  }
  closedir(proc);
  return best;
}

std::optional<int> oldest_in_groups(uid_t owner, const std::vector<int>& groups) {
  if (groups.empty()) return std::nullopt;
  return oldest_process([&](int proc, const char* pid, int group) {
    struct stat st {};
    return std::find(groups.begin(), groups.end(), group) != groups.end() &&
           fstatat(proc, pid, &st, 0) == 0 && st.st_uid == owner;
  });
}

}  // namespace gpusel::detail
