// Internal: locks on open files (POSIX), the platform's alone: flock(2) locks, which leases,
// claims, queue tickets and job records are made of, and the open file description's read lock
// that marks a lease as held (F_OFD_SETLK), asked of the kernel one file at a time (F_OFD_GETLK).
// abi.layering refuses flock outside this layer. On Windows the same locks are LockFileEx
// (win_lock.hpp).
#pragma once

#ifndef _WIN32
#include <optional>

namespace gpusel::detail {

enum class LockMode { Shared, Exclusive };

// Locks the open file `fd` without waiting: true when it is taken (or, with Shared, shared); false
// when another open file holds a lock in the way (errno EWOULDBLOCK) or on any other error (errno
// says which).
bool try_lock_file(int fd, LockMode mode) noexcept;
// Waits for the lock (a signal does not end the wait): true when taken, else false with errno.
bool lock_file(int fd, LockMode mode) noexcept;
// Whether any other open file holds a lock on the file open as `fd`: a probe for an exclusive lock
// fails with EWOULDBLOCK (the probe is let go at once when it succeeds).
bool file_locked(int fd) noexcept;

// Adds the mark: a read lock of the open file description `fd` on the whole file. It lives and
// ends with the open file, as a flock on it does. Where the kernel or file system has none, nothing
// happens (held_mark then says nullopt).
void mark_held(int fd) noexcept;
// Whether a mark (a lock of any other open file) is on the file open as `fd`: nullopt where the
// kernel cannot tell (no OFD locks on this kernel or file system).
std::optional<bool> held_mark(int fd) noexcept;

}  // namespace gpusel::detail
#endif
