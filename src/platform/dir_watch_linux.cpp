#include "dir_watch.hpp"

#include <poll.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <algorithm>
#include <mutex>
#include <utility>

namespace gpusel::detail {

namespace {

constexpr std::pair<std::uint32_t, std::uint32_t> kEvents[] = {
    {watch::kClosedUnwritten, IN_CLOSE_NOWRITE},
    {watch::kClosedWritten, IN_CLOSE_WRITE},
    {watch::kCreated, IN_CREATE},
    {watch::kDeleted, IN_DELETE},
    {watch::kMovedOut, IN_MOVED_FROM},
    {watch::kAttributes, IN_ATTRIB},
    {watch::kSelfDeleted, IN_DELETE_SELF},
    {watch::kSelfMoved, IN_MOVE_SELF},
    {watch::kOverflow, IN_Q_OVERFLOW},
};

std::uint32_t to_inotify(std::uint32_t events) {
  std::uint32_t mask = 0;
  for (const auto& [ours, kernel] : kEvents) {
    if (events & ours) mask |= kernel;
  }
  return mask;
}

std::uint32_t from_inotify(std::uint32_t mask) {
  std::uint32_t events = 0;
  for (const auto& [ours, kernel] : kEvents) {
    if (mask & kernel) events |= ours;
  }
  return events;
}

// The descriptor a reusing DirWatch gave back: one per process (two watches at once are rare; the
// second closes its own).
std::mutex spare_mutex;
int spare_fd = -1;

int take_spare() {
  int fd = -1;
  {
    const std::lock_guard<std::mutex> lock(spare_mutex);
    std::swap(fd, spare_fd);
  }
  if (fd < 0) return -1;
  // What the last user left: the IN_IGNORED notices of its removed watches.
  alignas(inotify_event) char buf[4096];
  while (read(fd, buf, sizeof buf) > 0) {
  }
  return fd;
}

bool give_spare(int fd) {
  const std::lock_guard<std::mutex> lock(spare_mutex);
  if (spare_fd >= 0) return false;
  spare_fd = fd;
  return true;
}

}  // namespace

DirWatch::DirWatch(bool reuse) noexcept : reuse_(reuse) {
  if (reuse_) fd_ = take_spare();
  if (fd_ < 0) fd_ = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
}

DirWatch::~DirWatch() {
  if (fd_ < 0) return;
  if (reuse_) {
    for (const int w : watches_) inotify_rm_watch(fd_, w);
    if (give_spare(fd_)) return;
  }
  close(fd_);
}

int DirWatch::add(const std::string& path, std::uint32_t mask) noexcept {
  if (fd_ < 0) return -1;
  const int w = inotify_add_watch(fd_, path.c_str(), mask);
  if (w >= 0 && std::find(watches_.begin(), watches_.end(), w) == watches_.end())
    watches_.push_back(w);
  return w;
}

int DirWatch::add_folder(const std::string& path, std::uint32_t events) noexcept {
  return add(path, to_inotify(events) | IN_ONLYDIR);
}

int DirWatch::add_file(const std::string& path, std::uint32_t events) noexcept {
  return add(path, to_inotify(events) | IN_DONT_FOLLOW);
}

void DirWatch::remove(int watch) noexcept {
  const auto it = std::find(watches_.begin(), watches_.end(), watch);
  if (it == watches_.end()) return;
  watches_.erase(it);
  inotify_rm_watch(fd_, watch);
}

int DirWatch::wait(int timeout_ms) noexcept {
  if (fd_ < 0) return -1;
  pollfd p{fd_, POLLIN, 0};
  const int ready = poll(&p, 1, timeout_ms);
  return ready < 0 ? -1 : ready > 0 ? 1 : 0;
}

std::vector<WatchNotice> DirWatch::take() {
  std::vector<WatchNotice> out;
  if (fd_ < 0) return out;
  alignas(inotify_event) char buf[8192];
  while (true) {
    const ssize_t got = read(fd_, buf, sizeof buf);
    if (got <= 0) break;
    for (ssize_t at = 0; at < got;) {
      const auto* e = reinterpret_cast<const inotify_event*>(buf + at);
      at += static_cast<ssize_t>(sizeof(inotify_event) + e->len);
      WatchNotice n;
      n.watch = e->wd;
      n.events = from_inotify(e->mask);
      if (e->len > 0) n.name = e->name;  // NUL-padded
      out.push_back(std::move(n));
    }
  }
  return out;
}

}  // namespace gpusel::detail
