#include "file_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>

#include <cerrno>

namespace gpusel::detail {

namespace {
int operation(LockMode mode) {
  return mode == LockMode::Shared ? LOCK_SH : LOCK_EX;
}
}  // namespace

bool try_lock_file(int fd, LockMode mode) noexcept {
  return flock(fd, operation(mode) | LOCK_NB) == 0;
}

bool lock_file(int fd, LockMode mode) noexcept {
  int rc;
  while ((rc = flock(fd, operation(mode))) != 0 && errno == EINTR) {
  }
  return rc == 0;
}

bool file_locked(int fd) noexcept {
  if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
    flock(fd, LOCK_UN);
    return false;
  }
  return errno == EWOULDBLOCK;
}

void mark_held(int fd) noexcept {
  struct flock mark {};
  mark.l_type = F_RDLCK;
  mark.l_whence = SEEK_SET;  // the whole file
  (void)fcntl(fd, F_OFD_SETLK, &mark);
}

std::optional<bool> held_mark(int fd) noexcept {
  struct flock ask {};
  ask.l_type = F_WRLCK;  // conflicts with any lock but this open file's own
  ask.l_whence = SEEK_SET;
  if (fcntl(fd, F_OFD_GETLK, &ask) != 0) return std::nullopt;
  return ask.l_type != F_UNLCK;
}

}  // namespace gpusel::detail
