// Internal, Windows only: the file locks gpusel's leases and its queue of waiters are made of
// (lease_win.cpp, acquire.cpp). A lock is LockFileEx on one byte far past the data of a file
// opened with every sharing mode; Windows drops it when the handle closes or the process ends
// (however it ends), as Linux drops a flock.
#pragma once

#include <optional>
#include <string>

#include "win.hpp"

namespace gpusel::detail::win {

// The byte that is locked: past anything written to the file (the holder's pid, at offset 0).
inline constexpr DWORD kLockOffset = 0x40000000;

// Opens (creating when absent) `path` for locking: read and, where permitted, write access, every
// sharing mode, never through a reparse point (a symbolic link or junction is refused: nullptr
// and `error` set). `created_or_opened` reports what happened in words for messages.
Handle open_lock_file(const std::string& path, bool create, std::string& error,
                      bool* writable = nullptr);

// Takes the lock without waiting: true when taken, false when another handle holds it.
// `exclusive` false: a shared lock, to test whether anyone holds the exclusive one.
bool try_lock(HANDLE file, bool exclusive, DWORD* error = nullptr);
void unlock(HANDLE file);

}  // namespace gpusel::detail::win
