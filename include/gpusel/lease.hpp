// gpusel: leases on GPUs, held for a job's lifetime with kernel file locks (flock) on one file per
// GPU UUID in a lease directory shared by every user of the machine.
//
// Threat model: the directory may be writable by all (then it must have the sticky bit, so no
// user can remove or replace another's files); gpusel never follows a symbolic link there, opens
// lease files read-only and never writes them, and decides only by the kernel's lock (taken and
// released atomically, and dropped by the kernel when the holder dies, even by SIGKILL). Who holds
// a lease is read from /proc (the locking process's pid, user, command and start time), never from
// a file's contents, so it cannot be faked by writing a file.
#pragma once

#include <optional>
#include <string>

#include "gpusel/export.h"

GPUSEL_BEGIN_NAMESPACE

// The lease directory: GPUSEL_LEASE_DIR, else /tmp/gpusel-leases.
std::string lease_directory();

// Makes sure `dir` is a safe lease directory, creating it (mode 1777) when absent. Throws
// Error(Failure) naming the folder and what is wrong: a symbolic link, not a folder, writable by
// others without the sticky bit, owned by another user who is not root, or not writable.
void check_lease_directory(const std::string& dir);

// Who holds a lease, from /proc.
struct LeaseHolder {
  int pid = 0;
  std::string user;     // empty when unknown
  std::string command;  // empty when unknown
  std::string started;  // local time the process started, "YYYY-MM-DD HH:MM:SS"; empty unknown
};

// Who a process is, from /proc (for lease holders and the processes NVML lists); fields stay empty
// where /proc does not tell. The command has control characters replaced.
LeaseHolder process_details(int pid);

// "pid 4242 (user alice, command `python3 train.py`, since 2026-11-30 09:12:00)".
std::string describe_holder(const LeaseHolder& holder);

// One held lease; releasing is closing the descriptor (the destructor).
class Lease {
 public:
  Lease() = default;
  Lease(int fd, std::string uuid) : fd_(fd), uuid_(std::move(uuid)) {}
  Lease(Lease&& other) noexcept : fd_(other.fd_), uuid_(std::move(other.uuid_)) { other.fd_ = -1; }
  Lease& operator=(Lease&& other) noexcept;
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;
  ~Lease();
  const std::string& uuid() const noexcept { return uuid_; }
  bool held() const noexcept { return fd_ >= 0; }

 private:
  int fd_ = -1;
  std::string uuid_;
};

// Takes the lease on `uuid` without waiting. nullopt when another process holds it; `holder`
// then says who, when /proc tells. Throws Error(Failure) when the lease file is unsafe (a symbolic
// link, not a regular file) or cannot be opened.
std::optional<Lease> try_lease(const std::string& dir, const std::string& uuid,
                               std::optional<LeaseHolder>* holder = nullptr);

// Who holds the lease on `uuid` now, without taking it; nullopt when nobody does.
std::optional<LeaseHolder> lease_holder(const std::string& dir, const std::string& uuid);

GPUSEL_END_NAMESPACE
