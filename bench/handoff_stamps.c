// Preloaded into the two `gpusel run` jobs of a hand-off (bench/handoff_split.py): stamps, with
// the wall clock, the calls that mark its steps, one line each to $HANDOFF_STAMPS ("SECONDS PID
// STEP"). It takes itself out of LD_PRELOAD as it loads, so the workers run without it.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

static int out_fd = -1;

static void stamp(const char* step) {
  if (out_fd < 0) return;
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  char line[96];
  const int n = snprintf(line, sizeof line, "%ld.%09ld %d %s\n", (long)t.tv_sec, t.tv_nsec,
                         (int)getpid(), step);
  if (n > 0 && write(out_fd, line, (size_t)n) < 0) return;
}

// Whether `fd` is a lease file (GPU-....lock).
static int is_lease_file(int fd) {
  char link[64], path[4096];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  const ssize_t n = readlink(link, path, sizeof path - 1);
  if (n < 5) return 0;
  path[n] = '\0';
  return strcmp(path + n - 5, ".lock") == 0;
}

// Waking: a wait of the supervision loop (the holder) or of the queue (the waiter) returns.
int poll(struct pollfd* fds, nfds_t n, int timeout) {
  static int (*real)(struct pollfd*, nfds_t, int);
  if (real == NULL) real = (int (*)(struct pollfd*, nfds_t, int))dlsym(RTLD_NEXT, "poll");
  const int r = real(fds, n, timeout);
  if (timeout > 50) stamp("wake");
  return r;
}

// The waiter's take: a lease file locked for itself.
int flock(int fd, int operation) {
  static int (*real)(int, int);
  if (real == NULL) real = (int (*)(int, int))dlsym(RTLD_NEXT, "flock");
  const int r = real(fd, operation);
  if (r == 0 && (operation & LOCK_EX) && is_lease_file(fd)) stamp("take");
  return r;
}

// A worker started (gpusel starts each with clone, sharing its memory until the exec).
int clone(int (*fn)(void*), void* stack, int flags, void* arg, ...) {
  static int (*real)(int (*)(void*), void*, int, void*, ...);
  if (real == NULL)
    real = (int (*)(int (*)(void*), void*, int, void*, ...))dlsym(RTLD_NEXT, "clone");
  stamp("start");
  return real(fn, stack, flags, arg);
}

// The holder's release: its lease file closed, its workers gone.
int close(int fd) {
  static int (*real)(int);
  if (real == NULL) real = (int (*)(int))dlsym(RTLD_NEXT, "close");
  if (fd >= 0 && fd != out_fd && is_lease_file(fd)) stamp("close");
  return real(fd);
}

__attribute__((constructor)) static void loaded(void) {
  unsetenv("LD_PRELOAD");
  const char* path = getenv("HANDOFF_STAMPS");
  if (path != NULL) out_fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
}
