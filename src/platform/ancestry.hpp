// Internal: what the kernel tells of a process: its parent (the ancestry of this process, for
// telling which launcher set a rank variable, worker.cpp), its starting environment, its command
// line (who holds a lease, which process a launcher left behind, whether a shell runs a script).
// Linux reads /proc (ancestry_linux.cpp); Windows cannot read another process's starting
// environment, so there every lookup fails and the distances stay lower bounds
// (ancestry_win.cpp): disagreeing rank variables are then refused, never guessed between.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace gpusel::detail {

// The environment process `pid` started with; nullopt when it cannot be read.
std::optional<std::map<std::string, std::string>> initial_environment(int pid);

// The file `name` of process `pid` in /proc ("cmdline"), whole up to `limit` bytes; nullopt when it
// cannot be read (the process has ended, or is another user's; always on Windows).
std::optional<std::string> process_file(int pid, const char* name, std::size_t limit = 1u << 20);

// The arguments process `pid` was started with (/proc/PID/cmdline), read up to `limit` bytes: each
// NUL ends a word, so an empty argument is an empty word; a last word without its NUL (cut at
// `limit`, or a process that rewrote its arguments) is a word too. Empty when it cannot be read
// (the process has ended, is a kernel thread or another user's hidden one; always on Windows).
std::vector<std::string> process_args(int pid, std::size_t limit = 1u << 20);

// What the kernel's /proc/PID/stat says of a process (fields 3, 4, 5 and 22), and who owns it.
struct ProcessStat {
  char state = 0;                // R, S, D, T (stopped), t (traced), Z (zombie), X (dead)...
  int parent = 0;                // its parent's pid
  int group = 0;                 // its process group
  unsigned long long start = 0;  // when it started, in clock ticks after boot
  unsigned owner = 0;            // the user id that owns its /proc entry
};

// Process `pid`'s /proc/PID/stat, read once; nullopt when it cannot be read (the process has ended
// and been reaped, or is hidden from this user; always on Windows).
std::optional<ProcessStat> process_stat(int pid);

// The parent of process `pid` (process_stat's); 0 when unknown.
int parent_of(int pid);

// This process's id (asked of the kernel once per process: a child made by fork() asks again).
int current_pid();

}  // namespace gpusel::detail
