// Internal: watching folders and files for changes (Linux inotify), the platform's alone: waiting
// jobs are woken by a lease file's close or a ticket leaving the queue, and `gpusel setup` and
// `doctor` check that a store's file system reports changes at all. abi.layering refuses
// inotify outside this layer. (Windows waiters look again on a timer: lease_win.cpp.)
#pragma once

#ifndef _WIN32
#include <cstdint>
#include <string>
#include <vector>

namespace gpusel::detail {

// What a watch reports, as a set of these bits (inotify's events, by name).
namespace watch {
inline constexpr std::uint32_t kClosedUnwritten = 1u << 0;  // a file opened without writing closed
inline constexpr std::uint32_t kClosedWritten = 1u << 1;    // a file opened for writing closed
inline constexpr std::uint32_t kCreated = 1u << 2;          // a file was made in the folder
inline constexpr std::uint32_t kDeleted = 1u << 3;          // a file was unlinked from the folder
inline constexpr std::uint32_t kMovedOut = 1u << 4;         // a file was renamed out of the folder
inline constexpr std::uint32_t kAttributes = 1u << 5;       // its link count, mode or times changed
inline constexpr std::uint32_t kSelfDeleted = 1u << 6;      // the watched file itself is gone
inline constexpr std::uint32_t kSelfMoved = 1u << 7;        // the watched file itself was renamed
inline constexpr std::uint32_t kOverflow = 1u << 8;         // (reported only) notices were lost
}  // namespace watch

// One notice: the watch it came from (what add_folder or add_file returned), what happened (no
// bit at all: the watch was removed), and the name of the file in a watched folder it happened to
// ("" for the folder or file itself).
struct WatchNotice {
  int watch = -1;
  std::uint32_t events = 0;
  std::string name;
};

class DirWatch {
 public:
  // `reuse`: take the descriptor a DirWatch of this process gave back, and give this one back in
  // turn. Closing an inotify descriptor waits for the kernel to tear its marks down (an RCU grace
  // period, 10-20 ms measured), which a waiter that has just been woken should not pay; a spare
  // descriptor lasts until the process ends.
  explicit DirWatch(bool reuse = false) noexcept;
  ~DirWatch();
  DirWatch(const DirWatch&) = delete;
  DirWatch& operator=(const DirWatch&) = delete;

  // Whether notices can be had at all (inotify may be out of descriptors or watches).
  bool usable() const noexcept { return fd_ >= 0; }
  // Watches the folder `path` (never a file) or the file `path` (never through a symbolic link)
  // for `events`: the watch's number, or -1 with errno. Watching the same file again returns the
  // same number.
  int add_folder(const std::string& path, std::uint32_t events) noexcept;
  int add_file(const std::string& path, std::uint32_t events) noexcept;
  void remove(int watch) noexcept;
  // Waits until a notice is ready or `timeout_ms` has passed: 1, 0 when the time passed, -1 with
  // errno on an error (EINTR for a signal).
  int wait(int timeout_ms) noexcept;
  // Every notice ready now, without waiting; none when none is.
  std::vector<WatchNotice> take();

 private:
  int add(const std::string& path, std::uint32_t mask) noexcept;  // mask: inotify's bits

  int fd_ = -1;
  bool reuse_ = false;
  std::vector<int> watches_;
};

}  // namespace gpusel::detail
#endif
