// Internal: the queue of jobs waiting for GPUs, and waiting for a release (lease.cpp on Linux,
// lease_win.cpp on Windows; the ticket format in lease_common.cpp).
//
// A waiting job holds a ticket: a small file in the store's queue folder, locked while the job
// waits, that says which GPUs it may use and how many it needs. Tickets are served in the order
// of their last change (ctime), which only the kernel sets and their owner can move later, never
// earlier. A ticket counts only while its owner's process holds it locked, is not stopped, and
// takes what it asked for once it can (docs/leases.md, "The queue's threat model"): a forged,
// sniped, stopped or impossible ticket holds nobody back for long. acquire.cpp decides who goes.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "gpusel/lease.hpp"
#ifndef _WIN32
#include "dir_watch.hpp"
#endif

namespace gpusel::detail {

// What a ticket says.
struct TicketRequest {
  int need = 0;                   // GPUs wanted
  std::vector<std::string> gpus;  // the GPUs it may use (a named request: exactly these)
  std::string what;               // for messages: "free:2", "GPUs 3,5"
};

// The ticket's text, and back (nullopt: not a ticket gpusel wrote; it is then ignored).
std::string format_ticket(const TicketRequest& request);
std::optional<TicketRequest> parse_ticket(const std::string& text);

// A live waiter, from its ticket and the kernel's lock table.
struct Waiter {
  TicketRequest request;
  std::optional<LeaseHolder> who;  // the process holding the ticket, once name_waiters() ran
  int pid = 0;                     // the process holding the ticket, when the kernel says
  bool own = false;                // this process's own ticket
  std::string path;                // the ticket's file, for a watch on its departure
  std::string owner;               // the user who owns the ticket's file ("" when unknown)
  std::string key;                 // the ticket file's identity (device and inode), kept on rename
  long long arrived_ns = 0;        // its ctime, in ns since the epoch: its place in the queue
  bool stopped = false;            // its holder is stopped (SIGSTOP, ^Z): it takes nothing now
};

// This process's place in the queue; leaving it is destroying the ticket.
class Ticket {
 public:
  Ticket(const LeaseStore& store, const TicketRequest& request);
  Ticket(const Ticket&) = delete;
  Ticket& operator=(const Ticket&) = delete;
  ~Ticket();
  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
  friend std::vector<Waiter> waiters(const LeaseStore& store, const Ticket* own);
};

// The live waiters, in arrival order (this process's own ticket included, marked `own`).
// Files in the queue folder that are not live tickets gpusel wrote are ignored: unlocked ones,
// ones locked by a process of another user than the file's owner, and ones this process once saw
// dead (a ticket revived by a later lock keeps no place). This user's own dead tickets are removed.
// Liveness is the lock itself (a probe with LOCK_SH|LOCK_NB), so waiters in another pid namespace,
// whose locks /proc/locks does not list here, still count.
std::vector<Waiter> waiters(const LeaseStore& store, const Ticket* own);

// A waiter that can go now (enough of its GPUs free and kept for nobody earlier) is given this long
// to take them. One that has not by then is passed over: a forged ticket, or a job that cannot
// use what it asked for.
constexpr std::chrono::seconds kTakeGrace{2};

// What one waiting request remembers of the queue from look to look.
struct QueueMemory {
  // When each waiter (by key) was first seen able to go, while it still is.
  std::map<std::string, std::chrono::steady_clock::time_point> ready_since;
  // Owners of a waiter passed over: their tickets count for nothing to this request any more.
  std::set<std::string> passed_owners;
};

// How the earlier waiters stand toward one request, from one look at the queue and the leases.
struct QueuePlan {
  std::vector<Waiter> blockers;    // earlier waiters that keep some of this request's GPUs
  std::set<std::string> reserved;  // free GPUs kept for earlier waiters
  bool only_pending = false;       // every blocker can go now and is being given its moment
  std::optional<std::chrono::steady_clock::time_point> recheck;  // when the first moment ends
};

// Walks the earlier waiters of `queue` (those before this process's own ticket; all of them when
// it has none) in arrival order. Each keeps, from everyone after it, the free GPUs it could use,
// up to what it needs, so a large request is not starved by small ones; except a waiter that is
// stopped; one that could go but has not within kTakeGrace (and, from then on, every ticket of its
// owner); one that waits only for GPUs its own user holds; and one that can never go (it names
// fewer GPUs that exist here and can be leased than it needs). `machine`: the GPUs that exist
// here, with their lease `standing` (may be empty when nobody is earlier); `busy`: GPUs in use
// outside gpusel, not free to anyone. Pure: no I/O.
QueuePlan plan_queue(const std::vector<Waiter>& queue, const std::vector<std::string>& machine,
                     const std::vector<LeaseStanding>& standing, const std::set<std::string>& busy,
                     const std::vector<std::string>& wanted, QueueMemory& memory,
                     std::chrono::steady_clock::time_point now);

// Fills in `who` (the user, the command) of each waiter: /proc and the user database, read only
// when a message or a listing shows them, not at every look of a waiting job.
void name_waiters(std::vector<Waiter>& waiters);

// Wakes a waiting job when a lease may have been released or the queue has changed.
class ReleaseWatch {
 public:
  explicit ReleaseWatch(const LeaseStore& store);
  ReleaseWatch(const ReleaseWatch&) = delete;
  ReleaseWatch& operator=(const ReleaseWatch&) = delete;
  ~ReleaseWatch();
  // Returns true when something happened, false when `timeout` passed first. A lease file's
  // close counts only for the GPUs in `gpus` (all of them when it is empty): a try at another
  // GPU's lease by another waiter wakes nobody who does not want that GPU.
  bool wait(std::chrono::milliseconds timeout, const std::vector<std::string>& gpus = {});
  // With an earlier job ahead, nothing but that job's departure can let this one go: wait() then
  // wakes only when the ticket at `path` (the nearest job ahead) is removed or its holder ends,
  // not at every release and every other arrival or departure (a queue of n jobs would wake n
  // processes at each of n departures). An empty path: wake for releases again.
  void follow(const std::string& path);

 private:
  // Whether the lease file `name` in the folder watched as `wd` is still marked held (a close
  // that was someone's look at it, not a release). Asked through descriptors kept open while
  // this waits: closing them would wake the other waiters.
  bool still_held(int wd, const std::string& name);

#ifndef _WIN32
  DirWatch watch_{true};  // its descriptor reused: a woken waiter should not wait for a close
#endif
  std::map<int, std::string> lease_dirs_;  // the lease folders, by their watch
  std::map<std::string, int> looked_at_;   // lease files opened by still_held, by path
  std::vector<int> lease_watches_;
  std::vector<int> queue_watches_;
  int followed_ = -1;           // the watch on the ticket ahead, -1 when none
  bool followed_gone_ = false;  // the ticket ahead left before it could be watched
};

// The queue folder of a store, for messages and `doctor`; "" when the store has none usable.
std::string queue_directory(const LeaseStore& store);

}  // namespace gpusel::detail
