// A job's record in the shared lease store (Linux): who holds a lease once the process that took
// it has ended.
//
// The kernel's lock table names the process that took a lock, and keeps naming it after it has
// ended while processes it started hold the lock through inherited descriptors (a SIGKILLed
// `gpusel run` whose workers' children run on). The same user finds those processes by their
// descriptors; another user cannot read them. So a process that leases GPUs in the shared store
// leaves a record beside the queue, `queue/.job-<uid>-<pid>`: its owner is the file's owner (only
// that user can write it), it lists the process groups of the job (the workers', set when they
// start), and it is locked through a descriptor the workers inherit, so it is live exactly while
// the job is. /proc, readable by every user, then tells which processes of those groups still run.
#pragma once

#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace gpusel::detail {

// This process took a lease in the store `store_dir` (`shared`: the shared store, root's). The
// first such lease in the shared store makes the record; later ones count.
void job_record_lease_taken(const std::string& store_dir, bool shared);

// One of those leases was released; the record goes with the last.
void job_record_lease_released();

// A job's record as another process reads it.
struct JobRecord {
  uid_t owner = 0;          // the file's owner, which its name gives too
  std::vector<int> groups;  // the process groups of the job's workers
  std::string command;      // the command line of the process that leased
  dev_t dev = 0;            // the record file itself, to ask the lock table who holds it
  ino_t ino = 0;
  std::string folder;  // the folder it is in (for LockTable)
};

// The live records left by a process `pid` in the store `store_dir`: each locked, a plain file of
// the expected size, owned by the user its name gives, in the shared store's own queue folder.
// More than one (another user's file named for the same pid) leaves the caller none to trust.
std::vector<JobRecord> read_job_records(const std::string& store_dir, int pid);

// The oldest live process (by its start) for which `matches` holds, given /proc open as `proc`,
// the process's entry name and its process group; nullopt when none does. Processes that have
// ended but are not yet reaped are passed over.
std::optional<int> oldest_process(
    const std::function<bool(int proc, const char* pid, int group)>& matches);

// The oldest process of user `owner` whose process group is one of `groups`, or nullopt.
std::optional<int> oldest_in_groups(uid_t owner, const std::vector<int>& groups);

}  // namespace gpusel::detail
