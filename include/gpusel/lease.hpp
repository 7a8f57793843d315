// gpusel: leases on GPUs, held for a job's lifetime with kernel file locks (flock) on one file per
// GPU UUID in a lease store.
//
// Trust. A store binds every user of the machine only when nobody but root can change it: the
// shared store (/var/lib/gpusel/leases, made by `gpusel setup` run as root) is a folder owned by
// root that no one else may write, holding one read-only file per GPU, made by root. An ordinary
// user can only open such a file read-only and lock it (flock needs no write access), so no user
// can remove, rename, replace or link another's lease; the kernel drops a lock when its holder
// exits, however it exits. Where no shared store is set up, leases live in the user's own store
// (~/.local/state/gpusel/leases), which binds only that user's jobs; gpusel says so. A GPU the
// shared store lacks is unusable (nobody but root may add its file) until `gpusel setup` adds it.
//
// The locked descriptor is inherited by every process the holder starts (FD_CLOEXEC is cleared),
// so a lease or claim lasts as long as any process of the job lives, however the holder ends. Who
// holds a lease is read from the kernel's lock table (/proc/locks) and the holder's /proc entry,
// never from a file's contents.
//
// A file in a store that gpusel did not make or cannot trust (a link, a folder, a FIFO, a file
// with several names, one owned by another user, one nobody can open) never blocks anything but
// that GPU: it is reported as unusable, with the remedy, and the other GPUs are leased as usual.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "gpusel/error.hpp"
#include "gpusel/export.h"

GPUSEL_BEGIN_NAMESPACE

// The shared store's default place.
inline constexpr const char* kSharedLeaseStore = "/var/lib/gpusel/leases";

// Who holds a lease (or waits for GPUs), from /proc.
struct LeaseHolder {
  int pid = 0;
  std::string user;     // empty when unknown
  std::string command;  // as the process was started, arguments joined by spaces; may hold any
                        // byte: show it through describe_holder, which escapes control bytes
  std::string started;  // local time the process started, "YYYY-MM-DD HH:MM:SS"; empty unknown
};

// "pid 4242 (user alice, command `python3 train.py`, since 2026-11-30 09:12:00)", with control
// bytes (C0, DEL, C1) and bytes that are not UTF-8 escaped as \xNN.
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

// A GPU's lease as it stands, looked at without taking it.
struct LeaseStanding {
  enum class State {
    Free,      // nobody holds it
    Held,      // another process holds it; `holder` says who when /proc tells
    Unusable,  // its file cannot be trusted or opened; `problem` says why and what fixes it
  };
  State state = State::Free;
  std::optional<LeaseHolder> holder;
  std::string problem;
  bool shared = false;   // lives in the shared store (binds every user), not in this user's own
  std::string path;      // the lease file
  bool by_mark = false;  // Held, told by its mark and lock without the lock table (Look::Marks)
};

// "leased by pid 4242 (...)", "leased by another job" or the problem: why a GPU is not free.
std::string describe_standing(const LeaseStanding& standing);

// A job waiting for GPUs (gpusel run --wait), as its place in the queue says.
struct WaitingJob {
  std::optional<LeaseHolder> who;  // the waiting process, when /proc tells
  std::string what;                // "free:2", "GPUs GPU-...,GPU-..."
  std::vector<std::string> gpus;   // the GPUs it may use (UUIDs)
};

// "pid 4242 (user ana, command `...`) waits for free:2".
std::string describe_waiting(const WaitingJob& job);

// What claiming a GPU found.
struct ClaimResult {
  bool claimed = false;  // this process holds the claim now (until it ends)
  // Another process's claim in the way (claimed false), or the exclusive claim a sharing process
  // runs beside (claimed false, `beside` true).
  std::optional<LeaseHolder> other;
  bool beside = false;
  // A lease on the GPU held by a job that did not start this process (and its holder).
  std::optional<LeaseHolder> leased_by_other_job;
  bool leased_elsewhere = false;
  // The claim file cannot be used (nothing was claimed, unless `claimed` says the job's lease
  // holds the GPU): why, with its data (subject Subject::Lease, the file's "path", "reason"
  // "unusable"); nullopt when it could be used.
  std::optional<Error> unusable;
};

// A claim's unusable file as an Error: `why`, about the file at `path`.
inline Error unusable_claim(const std::string& why, const std::string& path) {
  return failure(why, about(Subject::Lease, {{"path", path}, {"reason", "unusable"}}));
}

// Where this process's leases live. Looking at a store changes nothing on disk; the user's own
// store is made (mode 0700) the first time a lease is taken in it.
class LeaseStore {
 public:
  // GPUSEL_LEASE_DIR when set (it must be a folder owned by root or by this user that no one
  // else may write: else Error(Failure) naming it and the remedy), else the shared store when it
  // is set up and trustworthy, else this user's own store.
  static LeaseStore locate();

  // The store at `dir` (made when absent, if this user may), with this user's own store beside it
  // as locate() does. Throws as locate() does for a GPUSEL_LEASE_DIR.
  static LeaseStore at(const std::string& dir);

  // The primary store's folder, and whether it binds every user (owned by root).
  const std::string& dir() const noexcept { return dir_; }
  bool shared() const noexcept { return shared_; }
  // This user's own store (where leases live without a shared store).
  const std::string& own_dir() const noexcept { return own_dir_; }
  // Why leases bind only this user's jobs here, with the command that fixes it; "" when the
  // store is shared. (Per GPU, LeaseStanding::shared tells.) Written when asked for: it names
  // the user, a lookup in the user database that a worker's bind has no use for.
  std::string scope_note() const;

  // How standings() tells whether a lease is held.
  enum class Look {
    // From the kernel's lock table, read once: every flock on the file counts, gpusel's or not
    // (a gpusel before 0.1 took no mark), and each holder is named (doctor).
    Thorough,
    // Up to 16 files asked of the kernel one by one, by the mark every lease of gpusel carries
    // (no read of the whole table, whose cost grows with every lock on the machine); the table is
    // read only to name the holders of the GPUs found held, and for more files. For list and
    // named GPUs: a lease taken without the mark is found when it is taken (take() fails), as a
    // lease taken a moment after any look is.
    Quick,
    // As Quick, but a marked file's lock is asked of the lock itself, not of the table (whose
    // read waits a grace period: milliseconds, even on an idle machine): a try for it, let go at
    // once, fails while a lease holds it. Held then, with `by_mark` set and the holder unnamed;
    // a mark with no lock behind it (anyone who may read a lease file can add one) is free. For
    // picking free GPUs, which looks again with Quick to name the holders when too few are free.
    Marks,
  };
  // Each GPU's standing.
  std::vector<LeaseStanding> standings(const std::vector<std::string>& uuids,
                                       Look look = Look::Thorough) const;

  // Takes the lease on `uuid` without waiting. nullopt when it is held or unusable; `standing`
  // (when given) then says which, and by whom.
  std::optional<Lease> take(const std::string& uuid, LeaseStanding* standing = nullptr) const;

  // The jobs waiting for GPUs here, in the order they will be served.
  std::vector<WaitingJob> waiting() const;

  // Claims the GPU `uuid` for this process, which binds it: a lock on the GPU's lease file, held
  // until the last process that inherited it ends; already held when this process inherited the
  // job's locked descriptor. Exclusive, or shared when `share`. Also says whether another job (one
  // this process was not started by) holds the GPU.
  ClaimResult claim(const std::string& uuid, bool share) const;

 private:
  std::string dir_, own_dir_, scope_problem_;  // why the store is not shared, or ""
  bool shared_ = false;
  bool own_primary_ = false;  // this user may create lease files in dir_ (owns it)
  friend struct LeaseStoreAccess;
};

// What `gpusel setup` did to a shared store: one line per change, and what it could not fix.
struct StoreSetup {
  std::vector<std::string> changes;
  std::vector<std::string> problems;
};

// Makes (or repairs) the shared store at `dir` for the GPUs `uuids`: the folder (and, for the
// default place, /var/lib/gpusel) owned by root, mode 0755; a queue folder, mode 1777; one lease
// file per GPU, owned by root, mode 0444. Anything else at those names is replaced, unless a job
// holds it (then a problem says so). Dead tickets and entries that are not tickets are removed
// from the queue. Idempotent. Throws Error(Failure) when not run as root.
StoreSetup set_up_shared_store(const std::string& dir, const std::vector<std::string>& uuids);

GPUSEL_END_NAMESPACE
