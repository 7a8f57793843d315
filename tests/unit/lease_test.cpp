// The queue's tickets: what a waiting job writes, and what others accept from a file in the queue
// folder (anything else is ignored, so it can block nobody).
#include <gtest/gtest.h>

#include "lease_queue.hpp"

using gpusel::detail::format_ticket;
using gpusel::detail::parse_ticket;
using gpusel::detail::TicketRequest;

TEST(Ticket, RoundTrip) {
  const TicketRequest r{2, {"GPU-aaaa", "GPU-bbbb", "GPU-cccc"}, "free:2"};
  const auto back = parse_ticket(format_ticket(r));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->need, 2);
  EXPECT_EQ(back->gpus, r.gpus);
  EXPECT_EQ(back->what, "free:2");
}

TEST(Ticket, AnythingElseIsNotATicket) {
  for (const char* text : {
           "",
           "need 1\nwhat free:1\ngpu GPU-a\n",                           // no first line
           "gpusel-ticket 2\nneed 1\nwhat free:1\ngpu GPU-a\n",          // another version
           "gpusel-ticket 1\nneed 0\nwhat free:0\ngpu GPU-a\n",          // nothing needed
           "gpusel-ticket 1\nneed 2\nwhat free:2\ngpu GPU-a\n",          // more than it could use
           "gpusel-ticket 1\nneed 1\nwhat free:1\ngpu ../etc/passwd\n",  // not a UUID
           "gpusel-ticket 1\nneed 1\nwhat free:1\ngpu GPU-a",            // no final newline
           "gpusel-ticket 1\nneed 1\nneed 1\nwhat x\ngpu GPU-a\n",       // twice
           "gpusel-ticket 1\nneed 1\nwhat x\ngpu GPU-a\nextra line\n",   // unknown line
           "gpusel-ticket 1\nneed -1\nwhat x\ngpu GPU-a\n",
           "gpusel-ticket 1\nneed 99999\nwhat x\ngpu GPU-a\n",
       }) {
    EXPECT_FALSE(parse_ticket(text)) << text;
  }
}

TEST(Ticket, WhatIsEscapedForTerminals) {
  const auto t = parse_ticket("gpusel-ticket 1\nneed 1\nwhat \x1b[2J\xc2\x9b\ngpu GPU-a\n");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->what, "\\x1b[2J\\xc2\\x9b");
}

#ifndef _WIN32
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>  // mkdtemp (Scratch)
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "gpusel/lease.hpp"

namespace {

// A folder of the test's own under /tmp, removed with all it holds when the test ends (a child
// that _exits leaves it to the parent).
class Scratch {
 public:
  explicit Scratch(const std::string& name) : path_("/tmp/gpusel-" + name + "-XXXXXX") {
    if (mkdtemp(path_.data()) == nullptr) path_.clear();
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::vector<std::string> entries(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string n = e->d_name;
      if (n != "." && n != "..") out.push_back(n);
    }
    closedir(d);
  }
  return out;
}

}  // namespace

// A ticket others can see is locked already (it is written under a hidden name, locked, then
// renamed): a look never takes a live waiter for a dead one, and removes nothing of it.
TEST(Ticket, VisibleOnlyOnceLocked) {
  const Scratch scratch("ticket");
  ASSERT_FALSE(scratch.path().empty());
  const std::string dir = scratch.path() + "/leases";
  const gpusel::LeaseStore store = gpusel::LeaseStore::at(dir);
  {
    const gpusel::detail::Ticket first(store, TicketRequest{1, {"GPU-aaaa"}, "GPUs GPU-aaaa"});
    const gpusel::detail::Ticket second(store, TicketRequest{1, {"GPU-aaaa"}, "free:1"});
    const std::vector<std::string> names = entries(dir + "/queue");
    ASSERT_EQ(names.size(), 2u);
    for (const std::string& n : names) {
      EXPECT_NE(n.front(), '.') << n;
      const int fd = open((dir + "/queue/" + n).c_str(), O_RDONLY | O_CLOEXEC);
      ASSERT_GE(fd, 0);
      EXPECT_EQ(flock(fd, LOCK_SH | LOCK_NB), -1) << n << " is not locked";
      EXPECT_EQ(errno, EWOULDBLOCK);
      close(fd);
    }
    // Both seen, in arrival order, the second one's look naming itself as its own.
    const auto ws = gpusel::detail::waiters(store, &second);
    ASSERT_EQ(ws.size(), 2u);
    EXPECT_FALSE(ws[0].own);
    EXPECT_EQ(ws[0].pid, getpid());
    EXPECT_EQ(ws[0].request.what, "GPUs GPU-aaaa");
    EXPECT_TRUE(ws[1].own);
  }
  EXPECT_TRUE(entries(dir + "/queue").empty());  // left, nothing stays
}
// Behind another job, a waiter wakes for that job's departure alone: not for an earlier job's, not
// for a release (a queue of n jobs would otherwise wake n processes at each of n departures).
// At the head of the queue, a release wakes it.
TEST(ReleaseWatch, FollowsOnlyTheJobAhead) {
  const Scratch scratch("follow");
  ASSERT_FALSE(scratch.path().empty());
  const std::string dir = scratch.path() + "/leases";
  const gpusel::LeaseStore store = gpusel::LeaseStore::at(dir);
  const std::string lease = dir + "/GPU-aaaa.lock";
  const auto release = [&] {  // a lease file's last descriptor closes
    const int fd = open(lease.c_str(), O_RDONLY | O_CREAT | O_CLOEXEC, 0444);
    ASSERT_GE(fd, 0);
    close(fd);
  };
  std::optional<gpusel::detail::Ticket> first, second;
  first.emplace(store, TicketRequest{1, {"GPU-aaaa"}, "GPUs GPU-aaaa"});
  second.emplace(store, TicketRequest{1, {"GPU-aaaa"}, "free:1"});
  const gpusel::detail::Ticket third(store, TicketRequest{1, {"GPU-aaaa"}, "GPUs GPU-aaaa"});
  gpusel::detail::ReleaseWatch watch(store);
  auto ws = gpusel::detail::waiters(store, &third);
  ASSERT_EQ(ws.size(), 3u);
  watch.follow(ws[1].path);
  release();
  first.reset();
  EXPECT_FALSE(watch.wait(std::chrono::milliseconds(50))) << "woken by the first job or a release";
  second.reset();
  EXPECT_TRUE(watch.wait(std::chrono::milliseconds(5000))) << "not woken by the job ahead leaving";
  ws = gpusel::detail::waiters(store, &third);
  ASSERT_EQ(ws.size(), 1u);
  EXPECT_TRUE(ws[0].own);
  watch.follow("");  // the head of the queue: releases count again
  EXPECT_FALSE(watch.wait(std::chrono::milliseconds(20), {"GPU-aaaa"}));
  release();
  EXPECT_TRUE(watch.wait(std::chrono::milliseconds(5000), {"GPU-aaaa"}));
}
// A ticket left hidden by a process killed between its writing and its rename is removed once it
// is a minute old, by a look of the same user; a fresh one (being written now) is left alone.
TEST(Ticket, StaleHiddenTicketRemoved) {
  const Scratch scratch("hidden");
  ASSERT_FALSE(scratch.path().empty());
  const std::string dir = scratch.path() + "/leases";
  const gpusel::LeaseStore store = gpusel::LeaseStore::at(dir);
  std::optional<gpusel::detail::Ticket> t;
  t.emplace(store, TicketRequest{1, {"GPU-aaaa"}, "free:1"});  // makes the queue folder
  const std::string old_one = dir + "/queue/.1-old", new_one = dir + "/queue/.2-new";
  for (const std::string& p : {old_one, new_one}) {
    const int fd = open(p.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0);
    close(fd);
  }
  const timespec two_minutes_ago[2] = {{time(nullptr) - 120, 0}, {time(nullptr) - 120, 0}};
  ASSERT_EQ(utimensat(AT_FDCWD, old_one.c_str(), two_minutes_ago, 0), 0);
  EXPECT_EQ(gpusel::detail::waiters(store, &*t).size(), 1u);
  EXPECT_NE(access(old_one.c_str(), F_OK), 0) << "the stale hidden ticket stays";
  EXPECT_EQ(access(new_one.c_str(), F_OK), 0) << "a fresh hidden ticket was removed";
}
#endif

#ifndef _WIN32
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpusel/lease.hpp"

namespace {

std::string fresh_store(const Scratch& scratch) {
  EXPECT_FALSE(scratch.path().empty());
  return scratch.path() + "/leases";
}

// Looks at `uuid`'s lease until it is free (the kernel drops the lock once the last holder has
// exited; a reparented process is reaped by whoever adopts it), at most about 10 s.
bool becomes_free(const gpusel::LeaseStore& store, const std::string& uuid) {
  for (int i = 0; i < 1000; ++i) {
    if (store.standings({uuid}).front().state == gpusel::LeaseStanding::State::Free) return true;
    usleep(10000);
  }
  return false;
}

}  // namespace

// The kernel, not the process that took it, holds a lease: a program that process started (across
// exec) keeps it after the taker has ended, and is the holder named.
TEST(Lease, OutlivesItsTakerWhileAProcessItStartedRuns) {
  const Scratch scratch("inherit");
  const gpusel::LeaseStore store = gpusel::LeaseStore::at(fresh_store(scratch));
  int ends[2];
  ASSERT_EQ(pipe(ends), 0);
  const pid_t taker = fork();
  ASSERT_GE(taker, 0);
  if (taker == 0) {
    std::optional<gpusel::Lease> lease = store.take("GPU-aaaa");
    if (!lease) _exit(3);
    const pid_t left = fork();
    if (left == 0) {
      execl("/bin/sleep", "sleep", "60", static_cast<char*>(nullptr));
      _exit(4);
    }
    if (write(ends[1], &left, sizeof left) != sizeof left) _exit(5);
    _exit(0);  // like a SIGKILLed gpusel run: nothing of it releases anything
  }
  close(ends[1]);
  pid_t left = 0;
  ASSERT_EQ(read(ends[0], &left, sizeof left), static_cast<ssize_t>(sizeof left));
  close(ends[0]);
  int status = 0;
  ASSERT_EQ(waitpid(taker, &status, 0), taker);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  const gpusel::LeaseStanding s = store.standings({"GPU-aaaa"}).front();
  EXPECT_EQ(s.state, gpusel::LeaseStanding::State::Held);
  ASSERT_TRUE(s.holder);
  EXPECT_EQ(s.holder->pid, left) << "named the ended taker, not the live holder";
  EXPECT_FALSE(store.take("GPU-aaaa"));
  kill(left, SIGKILL);
  EXPECT_TRUE(becomes_free(store, "GPU-aaaa"));
  EXPECT_TRUE(store.take("GPU-aaaa"));
}

// A look at a marked lease file (free:N) tries its lock and lets go at once: a take in that
// moment waits it out rather than being refused. A lock held without a mark for longer (another
// program's) still refuses the take.
TEST(Lease, ATakeOutlastsALooksMomentaryTryForTheLock) {
  const Scratch scratch("try");
  const gpusel::LeaseStore store = gpusel::LeaseStore::at(fresh_store(scratch));
  ASSERT_TRUE(store.take("GPU-aaaa"));  // the lease file made, then let go
  const std::string path = store.standings({"GPU-aaaa"}).front().path;
  for (int round = 0; round < 5; ++round) {
    const int look = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(look, 0);
    ASSERT_EQ(flock(look, LOCK_EX | LOCK_NB), 0);
    std::thread lets_go([look] {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
      close(look);
    });
    std::optional<gpusel::Lease> lease = store.take("GPU-aaaa");
    lets_go.join();
    EXPECT_TRUE(lease) << "round " << round << ": refused while a look tried the lock";
  }
  const int other = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(other, 0);
  ASSERT_EQ(flock(other, LOCK_EX | LOCK_NB), 0);
  gpusel::LeaseStanding s;
  EXPECT_FALSE(store.take("GPU-aaaa", &s));
  EXPECT_EQ(s.state, gpusel::LeaseStanding::State::Held);
  close(other);
}

// A claim is the GPU's lease: while a process has claimed a GPU, no job can lease it.
TEST(Claim, KeepsLeasesOff) {
  const Scratch scratch("claim");
  const gpusel::LeaseStore store = gpusel::LeaseStore::at(fresh_store(scratch));
  int ends[2];
  ASSERT_EQ(pipe(ends), 0);
  const pid_t worker = fork();
  ASSERT_GE(worker, 0);
  if (worker == 0) {
    const char ok = store.claim("GPU-bbbb", false).claimed ? 'y' : 'n';
    if (write(ends[1], &ok, 1) != 1) _exit(5);
    pause();
    _exit(0);
  }
  close(ends[1]);
  char ok = 0;
  ASSERT_EQ(read(ends[0], &ok, 1), 1);
  close(ends[0]);
  EXPECT_EQ(ok, 'y');
  gpusel::LeaseStanding s;
  EXPECT_FALSE(store.take("GPU-bbbb", &s)) << "a job leased a GPU a process had claimed";
  EXPECT_EQ(s.state, gpusel::LeaseStanding::State::Held);
  ASSERT_TRUE(s.holder);
  EXPECT_EQ(s.holder->pid, worker);
  kill(worker, SIGKILL);
  waitpid(worker, nullptr, 0);
  EXPECT_TRUE(store.take("GPU-bbbb"));
}

// A process started under a job's lease holds the GPU through the descriptor it inherited: its
// claim succeeds, and a second process of the same job claiming the same GPU is refused.
TEST(Claim, UnderTheJobsLeaseOneProcessPerGpu) {
  const Scratch scratch("job");
  const gpusel::LeaseStore store = gpusel::LeaseStore::at(fresh_store(scratch));
  std::optional<gpusel::Lease> lease = store.take("GPU-cccc");
  ASSERT_TRUE(lease);
  int ends[2];
  ASSERT_EQ(pipe(ends), 0);
  const pid_t first = fork();
  ASSERT_GE(first, 0);
  if (first == 0) {
    const char ok = store.claim("GPU-cccc", false).claimed ? 'y' : 'n';
    if (write(ends[1], &ok, 1) != 1) _exit(5);
    pause();
    _exit(0);
  }
  char ok = 0;
  ASSERT_EQ(read(ends[0], &ok, 1), 1);
  EXPECT_EQ(ok, 'y');
  const pid_t second = fork();
  ASSERT_GE(second, 0);
  if (second == 0) {
    const gpusel::ClaimResult c = store.claim("GPU-cccc", false);
    _exit(c.claimed ? 1 : (c.other && c.other->pid == first && !c.leased_elsewhere) ? 0 : 2);
  }
  int status = 0;
  ASSERT_EQ(waitpid(second, &status, 0), second);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  kill(first, SIGKILL);
  waitpid(first, nullptr, 0);
  close(ends[0]);
  close(ends[1]);
}
#endif

// ---- who goes first: plan_queue, on made-up queues (no files, no clock) ----------------------

namespace {

using gpusel::LeaseHolder;
using gpusel::LeaseStanding;
using gpusel::detail::kTakeGrace;
using gpusel::detail::QueueMemory;
using gpusel::detail::QueuePlan;
using gpusel::detail::Waiter;
using Clock = std::chrono::steady_clock;

const std::vector<std::string> kMachine{"G0", "G1", "G2", "G3"};

Waiter waiter(const std::string& path, const std::string& owner, int need,
              std::vector<std::string> gpus, bool own = false) {
  Waiter w;
  w.request = TicketRequest{need, std::move(gpus), "test"};
  w.path = w.key = path;
  w.owner = owner;
  w.own = own;
  return w;
}

// The machine's standing: "" free, "!" unusable, else held by that user.
std::vector<LeaseStanding> standing(const std::vector<std::string>& holders) {
  std::vector<LeaseStanding> out;
  for (const std::string& h : holders) {
    LeaseStanding s;
    if (h == "!") {
      s.state = LeaseStanding::State::Unusable;
      s.problem = "missing";
    } else if (!h.empty()) {
      s.state = LeaseStanding::State::Held;
      s.holder = LeaseHolder{42, h, "job", ""};
    }
    out.push_back(s);
  }
  return out;
}

QueuePlan plan(const std::vector<Waiter>& q, const std::vector<std::string>& holders,
               const std::vector<std::string>& wanted, QueueMemory& memory, Clock::time_point now,
               const std::set<std::string>& busy = {}) {
  return gpusel::detail::plan_queue(q, kMachine, standing(holders), busy, wanted, memory, now);
}

std::vector<std::string> paths(const QueuePlan& p) {
  std::vector<std::string> out;
  for (const Waiter& w : p.blockers) out.push_back(w.path);
  return out;
}

const std::vector<std::string> kAllFree{"", "", "", ""};

}  // namespace

TEST(QueuePlan, AWaiterThatCannotGoKeepsTheFreeGpusItCouldUse) {
  // alice waits for all four while carol holds G0: she keeps G1-G3 from a later request.
  QueueMemory memory;
  const QueuePlan p = plan({waiter("a", "alice", 4, kMachine)}, {"carol", "", "", ""}, {"G2"},
                           memory, Clock::now());
  EXPECT_EQ(p.reserved, (std::set<std::string>{"G1", "G2", "G3"}));
  EXPECT_EQ(paths(p), std::vector<std::string>{"a"});
  EXPECT_FALSE(p.only_pending);
  EXPECT_FALSE(p.recheck);
}

TEST(QueuePlan, ItKeepsNoMoreThanItNeeds) {
  // alice needs two of the four (G0 held by carol): she keeps G1 and G2, not G3.
  QueueMemory memory;
  const QueuePlan p = plan({waiter("a", "alice", 2, kMachine)}, {"carol", "", "", ""}, {"G3"},
                           memory, Clock::now());
  EXPECT_EQ(p.reserved, (std::set<std::string>{"G1", "G2"}));
  EXPECT_TRUE(p.blockers.empty());  // G3 is nobody's: the request goes ahead
}

TEST(QueuePlan, AWaiterThatCouldGoIsGivenItsMomentThenPassedOverWithItsOwnersTickets) {
  QueueMemory memory;
  const auto t0 = Clock::now();
  const std::vector<Waiter> q{waiter("bob-1", "bob", 1, {"G1"}), waiter("bob-2", "bob", 1, {"G1"}),
                              waiter("me", "alice", 1, {"G1"}, true)};
  QueuePlan p = plan(q, kAllFree, {"G1"}, memory, t0);
  EXPECT_EQ(paths(p), std::vector<std::string>{"bob-1"});
  EXPECT_TRUE(p.only_pending);
  ASSERT_TRUE(p.recheck);
  EXPECT_EQ(*p.recheck, t0 + kTakeGrace);
  // Just before its moment ends it still goes first.
  p = plan(q, kAllFree, {"G1"}, memory, t0 + kTakeGrace - std::chrono::milliseconds(1));
  EXPECT_EQ(paths(p), std::vector<std::string>{"bob-1"});
  // Then neither it nor bob's later ticket (which could go in its place) holds alice back...
  p = plan(q, kAllFree, {"G1"}, memory, t0 + kTakeGrace);
  EXPECT_TRUE(p.blockers.empty()) << paths(p).size();
  EXPECT_TRUE(p.reserved.empty());
  // ...nor does a ticket bob makes (or renames) later: his tickets are passed over from now on.
  const std::vector<Waiter> renamed{waiter("bob-3", "bob", 1, {"G1"}),
                                    waiter("me", "alice", 1, {"G1"}, true)};
  p = plan(renamed, kAllFree, {"G1"}, memory, t0 + kTakeGrace + std::chrono::milliseconds(1));
  EXPECT_TRUE(p.blockers.empty());
}

TEST(QueuePlan, TheMomentStartsAgainWhenTheWaiterCouldNotGoInBetween) {
  QueueMemory memory;
  const auto t0 = Clock::now();
  const std::vector<Waiter> q{waiter("bob-1", "bob", 1, {"G1"})};
  plan(q, kAllFree, {"G1"}, memory, t0);
  // G1 taken by someone: bob cannot go, and his clock stops.
  plan(q, {"", "carol", "", ""}, {"G1"}, memory, t0 + std::chrono::seconds(1));
  const auto t1 = t0 + std::chrono::seconds(5);
  const QueuePlan p = plan(q, kAllFree, {"G1"}, memory, t1);
  EXPECT_EQ(paths(p), std::vector<std::string>{"bob-1"});
  ASSERT_TRUE(p.recheck);
  EXPECT_EQ(*p.recheck, t1 + kTakeGrace);
}

TEST(QueuePlan, StoppedWaitersAndWaitsForOnesOwnGpusKeepNothing) {
  QueueMemory memory;
  Waiter stopped = waiter("s", "bob", 4, kMachine);
  stopped.stopped = true;
  // alice holds G3 and waits for it again: nobody else can help her.
  const std::vector<Waiter> q{stopped, waiter("a", "alice", 1, {"G3"}),
                              waiter("c", "carol", 2, {"G2", "G3"})};
  const QueuePlan p = plan(q, {"", "", "", "alice"}, {"G0", "G1"}, memory, Clock::now());
  // carol needs G3 too (held by alice, not by carol): she keeps G2, which no one else wants.
  EXPECT_EQ(p.reserved, std::set<std::string>{"G2"});
  EXPECT_TRUE(p.blockers.empty());
}

TEST(QueuePlan, ATicketThatCanNeverGoKeepsNothing) {
  QueueMemory memory;
  // Needs 4 of GPUs that do not exist or cannot be leased (G3's lease file is unusable), or
  // names one GPU twice: it can never go, so it never keeps the free ones.
  const std::vector<Waiter> q{waiter("fake", "bob", 4, {"G0", "G1", "G2", "GPU-nowhere"}),
                              waiter("twice", "bob", 2, {"G1", "G1"}),
                              waiter("unusable", "bob", 4, kMachine)};
  const QueuePlan p = plan(q, {"carol", "", "", "!"}, {"G1"}, memory, Clock::now());
  EXPECT_TRUE(p.blockers.empty());
  EXPECT_TRUE(p.reserved.empty());
}

TEST(QueuePlan, AGpuInUseOutsideGpuselIsFreeToNobody) {
  // G1 has no lease but is busy (NVML): bob, waiting for it, cannot go, so his moment does not
  // start and nobody passes him for it; he keeps nothing he could not use.
  QueueMemory memory;
  const auto t0 = Clock::now();
  const std::vector<Waiter> q{waiter("bob-1", "bob", 1, {"G1"})};
  QueuePlan p = plan(q, kAllFree, {"G1"}, memory, t0, {"G1"});
  EXPECT_FALSE(p.recheck);
  p = plan(q, kAllFree, {"G1"}, memory, t0 + std::chrono::seconds(10), {"G1"});
  EXPECT_TRUE(memory.passed_owners.empty());
  // Free at last: bob goes first.
  p = plan(q, kAllFree, {"G1"}, memory, t0 + std::chrono::seconds(11));
  EXPECT_EQ(paths(p), std::vector<std::string>{"bob-1"});
}

TEST(QueuePlan, WaitersAfterOnesOwnTicketCountForNothing) {
  QueueMemory memory;
  const std::vector<Waiter> q{waiter("me", "alice", 1, {"G1"}, true),
                              waiter("later", "bob", 4, kMachine)};
  const QueuePlan p = plan(q, {}, {"G1"}, memory, Clock::now());
  EXPECT_TRUE(p.blockers.empty());
  EXPECT_TRUE(p.reserved.empty());
  EXPECT_TRUE(memory.ready_since.empty());
}
