// The supervisor's platform-neutral core (src/launch/launch_core.hpp): the job's shape, the
// workers' environments, --tag-output's tagging, the stop policy and the summary. Run on Linux and,
// in the mingw build, under wine: the same rules on both platforms.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "gpusel/error.hpp"
#include "launch_core.hpp"

using namespace gpusel;
using namespace gpusel::detail;
using namespace std::chrono_literals;

namespace {

const LaunchClock::time_point t0{};  // the tests' clock starts here

LaunchOptions two_gpus() {
  LaunchOptions o;
  o.command = {"train"};
  o.gpus = {"GPU-a", "GPU-b"};
  return o;
}

const std::string* find(const Variables& vars, const std::string& name) {
  for (const auto& [n, v] : vars) {
    if (n == name) return &v;
  }
  return nullptr;
}

}  // namespace

// --- the job ------------------------------------------------------------------------------------

TEST(LaunchCore, PlanCountsRanksAndSharing) {
  struct Case {
    int per_gpu;
    bool share;
    std::size_t workers;
    bool shared;
  };
  for (const Case& c :
       {Case{1, false, 2, false}, Case{1, true, 2, true}, Case{3, false, 6, true}}) {
    LaunchOptions o = two_gpus();
    o.ranks_per_gpu = c.per_gpu;
    o.share = c.share;
    const JobPlan plan = plan_job(o);
    EXPECT_EQ(plan.workers, c.workers) << c.per_gpu;
    EXPECT_EQ(plan.shared, c.shared) << c.per_gpu;
  }
  LaunchOptions o = two_gpus();
  o.ranks_per_gpu = 2;
  const JobPlan plan = plan_job(o);
  EXPECT_EQ(gpu_of(o, plan, 0), "GPU-a");
  EXPECT_EQ(gpu_of(o, plan, 1), "GPU-a");
  EXPECT_EQ(gpu_of(o, plan, 2), "GPU-b");
  EXPECT_EQ(gpu_of(o, plan, 3), "GPU-b");
}

TEST(LaunchCore, PlanTakesTheGracePeriod) {
  LaunchOptions o = two_gpus();
  o.grace_seconds = 0.5;
  EXPECT_EQ(plan_job(o).grace, std::chrono::duration_cast<LaunchClock::duration>(500ms));
  o.grace_seconds = 1e300;  // capped, not overflowed
  EXPECT_GT(plan_job(o).grace, std::chrono::duration_cast<LaunchClock::duration>(100000h));
}

TEST(LaunchCore, PlanRefusesBadOptions) {
  struct Case {
    int per_gpu;
    double grace;
    const char* message;
  };
  for (const Case& c : {Case{0, 10, "ranks per GPU must be from 1 to 4096, not 0"},
                        Case{4097, 10, "ranks per GPU must be from 1 to 4096, not 4097"},
                        Case{1, -1, "the grace period must be a finite number"},
                        Case{1, std::nan(""), "the grace period must be a finite number"},
                        Case{1, std::numeric_limits<double>::infinity(),
                             "the grace period must be a finite number"}}) {
    LaunchOptions o = two_gpus();
    o.ranks_per_gpu = c.per_gpu;
    o.grace_seconds = c.grace;
    try {
      plan_job(o);
      ADD_FAILURE() << "accepted " << c.per_gpu << " " << c.grace;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::BadInput);
      EXPECT_NE(std::string(e.what()).find(c.message), std::string::npos) << e.what();
    }
  }
}

// --- the workers' environments ------------------------------------------------------------------

TEST(LaunchCore, EnvironmentSetsRanksWorldAndGpus) {
  LaunchOptions o = two_gpus();
  int ports_asked = 0;
  const WorkerEnvironments env = worker_environments(
      o, plan_job(o), [](const std::string&) { return std::optional<std::string>(); },
      [&] {
        ++ports_asked;
        return 4242;
      });
  EXPECT_EQ(ports_asked, 1);
  EXPECT_EQ(env.removed, (std::vector<std::string>{"RANK", "LOCAL_RANK", "WORLD_SIZE",
                                                   "LOCAL_WORLD_SIZE", "GPUSEL_GPUS", "GPUSEL_GPU",
                                                   "GPUSEL_SHARE", "GPUSEL_RUN_OUTER"}));
  EXPECT_EQ(env.job, (Variables{{"MASTER_ADDR", "127.0.0.1"},
                                {"MASTER_PORT", "4242"},
                                {"WORLD_SIZE", "2"},
                                {"LOCAL_WORLD_SIZE", "2"},
                                {"GPUSEL_GPUS", "GPU-a,GPU-b"}}));
  ASSERT_EQ(env.ranks.size(), 2u);
  EXPECT_EQ(env.ranks[0], (Variables{{"RANK", "0"}, {"LOCAL_RANK", "0"}, {"GPUSEL_GPU", "GPU-a"}}));
  EXPECT_EQ(env.ranks[1], (Variables{{"RANK", "1"}, {"LOCAL_RANK", "1"}, {"GPUSEL_GPU", "GPU-b"}}));
}

TEST(LaunchCore, AmdWorkersArePlacedByRocrsVariable) {
  // AMD GPUs: each worker's ROCR_VISIBLE_DEVICES is its GPU's id, and the variables HIP would read
  // within it are removed; in job mode every GPU once, in rank order (ROCr ends a list at a
  // repeat).
  LaunchOptions o = two_gpus();
  o.amd = true;
  const auto nothing = [](const std::string&) { return std::optional<std::string>(); };
  const WorkerEnvironments own = worker_environments(o, plan_job(o), nothing, [] { return 1; });
  for (const char* name : {"CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"}) {
    EXPECT_NE(std::find(own.removed.begin(), own.removed.end(), name), own.removed.end()) << name;
  }
  EXPECT_EQ(find(own.job, "ROCR_VISIBLE_DEVICES"), nullptr);
  ASSERT_EQ(own.ranks.size(), 2u);
  ASSERT_NE(find(own.ranks[1], "ROCR_VISIBLE_DEVICES"), nullptr);
  EXPECT_EQ(*find(own.ranks[1], "ROCR_VISIBLE_DEVICES"), "GPU-b");
  EXPECT_EQ(find(own.ranks[1], "CUDA_VISIBLE_DEVICES"), nullptr);
  o.set_visible = SetVisible::Job;
  o.gpus = {"GPU-a", "GPU-b", "GPU-a"};
  o.share = true;
  const WorkerEnvironments job = worker_environments(o, plan_job(o), nothing, [] { return 1; });
  ASSERT_NE(find(job.job, "ROCR_VISIBLE_DEVICES"), nullptr);
  EXPECT_EQ(*find(job.job, "ROCR_VISIBLE_DEVICES"), "GPU-a,GPU-b");
  EXPECT_EQ(find(job.job, "CUDA_VISIBLE_DEVICES"), nullptr);
  EXPECT_EQ(find(job.ranks[2], "ROCR_VISIBLE_DEVICES"), nullptr);
}

TEST(LaunchCore, EnvironmentNamesTheOuterLaunchersRanks) {
  // Under srun and mpirun: their local ranks reach the workers unchanged, named in
  // GPUSEL_RUN_OUTER so that the workers count run's LOCAL_RANK alone. An outer LOCAL_RANK is
  // replaced by run's, and is not named.
  LaunchOptions o = two_gpus();
  const WorkerEnvironments env = worker_environments(
      o, plan_job(o),
      [](const std::string& name) -> std::optional<std::string> {
        if (name == "SLURM_LOCALID") return "1";
        if (name == "OMPI_COMM_WORLD_LOCAL_RANK") return "0";
        if (name == "LOCAL_RANK") return "3";
        if (name == "MPI_LOCALRANKID") return "1,2";  // not a rank: left out
        return std::nullopt;
      },
      [] { return 1; });
  const std::string* outer = find(env.job, "GPUSEL_RUN_OUTER");
  ASSERT_NE(outer, nullptr);
  EXPECT_EQ(*outer, "OMPI_COMM_WORLD_LOCAL_RANK=0,SLURM_LOCALID=1");
  // None around: no marker.
  const WorkerEnvironments alone = worker_environments(
      o, plan_job(o), [](const std::string&) { return std::optional<std::string>(); },
      [] { return 1; });
  EXPECT_EQ(find(alone.job, "GPUSEL_RUN_OUTER"), nullptr);
}

TEST(LaunchCore, EnvironmentKeepsTheUsersMasterAddressAndPort) {
  LaunchOptions o = two_gpus();
  const WorkerEnvironments env = worker_environments(
      o, plan_job(o),
      [](const std::string& name) {
        return name.rfind("MASTER_", 0) == 0 ? std::optional<std::string>("x") : std::nullopt;
      },
      []() -> int { throw std::logic_error("no port is needed"); });
  EXPECT_EQ(find(env.job, "MASTER_ADDR"), nullptr);
  EXPECT_EQ(find(env.job, "MASTER_PORT"), nullptr);
}

TEST(LaunchCore, EnvironmentSetsVisibleDevicesAndSharing) {
  struct Case {
    SetVisible visible;
    int per_gpu;
    const char* job_visible;    // nullptr: not set for every worker
    const char* rank3_visible;  // nullptr: not set for rank 3
    bool share;
  };
  for (const Case& c : {Case{SetVisible::None, 1, nullptr, nullptr, false},
                        Case{SetVisible::Job, 2, "GPU-a,GPU-b", nullptr, true},
                        Case{SetVisible::Own, 2, nullptr, "GPU-b", true}}) {
    LaunchOptions o = two_gpus();
    o.set_visible = c.visible;
    o.ranks_per_gpu = c.per_gpu;
    const WorkerEnvironments env = worker_environments(
        o, plan_job(o), [](const std::string&) { return std::optional<std::string>("1"); },
        [] { return 1; });
    const bool removed = std::find(env.removed.begin(), env.removed.end(),
                                   "CUDA_VISIBLE_DEVICES") != env.removed.end();
    EXPECT_EQ(removed, c.visible != SetVisible::None);
    const std::string* job = find(env.job, "CUDA_VISIBLE_DEVICES");
    EXPECT_EQ(job != nullptr, c.job_visible != nullptr);
    if (job && c.job_visible) {
      EXPECT_EQ(*job, c.job_visible);
    }
    if (c.per_gpu > 1) {
      ASSERT_EQ(env.ranks.size(), 4u);
      const std::string* own = find(env.ranks[3], "CUDA_VISIBLE_DEVICES");
      EXPECT_EQ(own != nullptr, c.rank3_visible != nullptr);
      if (own && c.rank3_visible) {
        EXPECT_EQ(*own, c.rank3_visible);
      }
      EXPECT_EQ(*find(env.ranks[3], "GPUSEL_GPU"), "GPU-b");
      EXPECT_EQ(*find(env.job, "WORLD_SIZE"), "4");
    }
    const std::string* share = find(env.job, "GPUSEL_SHARE");
    EXPECT_EQ(share != nullptr, c.share);
    if (share) {
      EXPECT_EQ(*share, "1");
    }
  }
}

// --- --tag-output -------------------------------------------------------------------------------

TEST(LaunchCore, TagPrefixNamesTheRank) {
  EXPECT_EQ(tag_prefix(0), "[rank 0] ");
  EXPECT_EQ(tag_prefix(12), "[rank 12] ");
}

// Each case: pieces the worker writes, each read at a time (ms), and what is written for each
// piece, then at `flush_at` (a flush_due), then at the end (flush).
TEST(LaunchCore, TaggerSplitsLinesAndFlushesPartialLinesAfterTheWait) {
  struct Piece {
    std::string data;
    int at_ms;
    std::string out;
  };
  struct Case {
    const char* name;
    std::vector<Piece> pieces;
    int flush_at_ms;
    std::string flushed;
    std::string at_end;
  };
  const std::vector<Case> cases = {
      {"whole lines", {{"a\nbb\n", 0, "[r] a\n[r] bb\n"}}, 1000, "", ""},
      {"empty lines", {{"\n\n", 0, "[r] \n[r] \n"}}, 1000, "", ""},
      {"no data", {{"", 0, ""}}, 1000, "", ""},
      {"a line in pieces, completed before the wait",
       {{"pro", 0, ""}, {"gress", 100, ""}, {" done\n", 199, "[r] progress done\n"}},
       1000,
       "",
       ""},
      {"a partial line shown after the wait", {{"50%", 0, ""}}, 200, "[r] 50%\n", ""},
      {"a partial line not yet due", {{"50%", 0, ""}}, 199, "", "[r] 50%\n"},
      {"the wait runs from the first byte, not the last",
       {{"1", 0, ""}, {"2", 150, ""}, {"3", 190, ""}},
       200,
       "[r] 123\n",
       ""},
      {"a line and a partial one", {{"x\ny", 0, "[r] x\n"}}, 250, "[r] y\n", ""},
      {"a line not flushed when due is written whole once complete",
       {{"50%", 0, ""}, {" 100%\n", 300, "[r] 50% 100%\n"}},
       1000,
       "",
       ""},
      {"a partial line at the end", {{"bye", 0, ""}}, 100, "", "[r] bye\n"},
      {"CRLF ends lines, the CR stays", {{"a\r\nb\r\n", 0, "[r] a\r\n[r] b\r\n"}}, 1000, "", ""},
      {"CRLF split across reads", {{"a\r", 0, ""}, {"\n", 10, "[r] a\r\n"}}, 1000, "", ""},
      {"carriage returns alone do not end lines",
       {{"10%\r20%\r", 0, ""}},
       200,
       "[r] 10%\r20%\r\n",
       ""},
  };
  for (const Case& c : cases) {
    LineTagger tagger("[r] ");
    for (const Piece& p : c.pieces) {
      EXPECT_EQ(tagger.feed(p.data, t0 + std::chrono::milliseconds(p.at_ms)), p.out) << c.name;
    }
    EXPECT_EQ(tagger.flush_due(t0 + std::chrono::milliseconds(c.flush_at_ms)), c.flushed) << c.name;
    EXPECT_EQ(tagger.flush(), c.at_end) << c.name;
    EXPECT_FALSE(tagger.holding()) << c.name;
  }
}

TEST(LaunchCore, TaggerSaysWhenThePartialLineIsDue) {
  LineTagger tagger("[rank 0] ", 50ms);
  EXPECT_FALSE(tagger.due());
  tagger.feed("abc", t0 + 10ms);
  ASSERT_TRUE(tagger.due());
  EXPECT_EQ(*tagger.due(), t0 + 60ms);
  tagger.feed("def", t0 + 40ms);  // still the first byte's time
  EXPECT_EQ(*tagger.due(), t0 + 60ms);
  EXPECT_EQ(tagger.flush_due(t0 + 59ms), "");
  EXPECT_EQ(tagger.flush_due(t0 + 60ms), "[rank 0] abcdef\n");
  EXPECT_FALSE(tagger.due());
  tagger.feed("g", t0 + 100ms);  // a new partial line waits anew
  EXPECT_EQ(*tagger.due(), t0 + 150ms);
  EXPECT_EQ(tagger.flush_due(t0 + 150ms), "[rank 0] g\n");
  // The rest of a line already shown is a line of its own.
  EXPECT_EQ(tagger.feed("h\n", t0 + 160ms), "[rank 0] h\n");
  EXPECT_FALSE(tagger.due());
}

TEST(LaunchCore, TaggerCutsLongLinesAtTheLimit) {
  struct Case {
    std::vector<std::string> pieces;
    std::string out;
    std::string rest;
  };
  // A limit of 4 bytes: a longer line is written in tagged pieces of 4.
  for (const Case& c : std::vector<Case>{
           {{"abcdefghij\n"}, "<abcd\n<efgh\n<ij\n", ""},
           {{"abcd"}, "<abcd\n", ""},
           {{"abcd\n"}, "<abcd\n", ""},  // exactly the limit, then its newline: one line
           {{"ab", "cdef", "gh"}, "<abcd\n<efgh\n", ""},
           {{"abc", "de\nf"}, "<abcd\n<e\n", "<f\n"},
       }) {
    LineTagger tagger("<", 1h, 4);
    std::string out;
    for (const std::string& p : c.pieces) out += tagger.feed(p, t0);
    EXPECT_EQ(out, c.out) << c.pieces[0];
    EXPECT_EQ(tagger.flush(), c.rest) << c.pieces[0];
  }
  // The default limit: 64 KiB.
  LineTagger tagger("[rank 1] ");
  const std::string big(kMaxPartialLine + 10, 'x');
  EXPECT_EQ(tagger.feed(big, t0), "[rank 1] " + std::string(kMaxPartialLine, 'x') + "\n");
  EXPECT_EQ(tagger.flush(), "[rank 1] " + std::string(10, 'x') + "\n");
  EXPECT_EQ(kPartialLineWait, 200ms);
}

// --- the stop policy ----------------------------------------------------------------------------

TEST(LaunchCore, StopPolicyFirstFailureStopsTheOthers) {
  StopPolicy p(3, 2s);
  EXPECT_EQ(p.running(), 3u);
  EXPECT_FALSE(p.kill_at());
  EXPECT_FALSE(p.worker_ended(0, false, t0));  // a success stops nothing
  EXPECT_FALSE(p.kill_at());
  EXPECT_TRUE(p.worker_ended(2, true, t0 + 1s));
  EXPECT_EQ(p.first_failure(), 2u);
  ASSERT_TRUE(p.kill_at());
  EXPECT_EQ(*p.kill_at(), t0 + 3s);
  EXPECT_FALSE(p.worker_ended(1, true, t0 + 2s));  // only the first failure counts
  EXPECT_EQ(p.first_failure(), 2u);
  EXPECT_EQ(*p.kill_at(), t0 + 3s);  // the grace period runs from the first stop
  EXPECT_EQ(p.running(), 0u);
}

TEST(LaunchCore, StopPolicySignalsAndViolationsTakePrecedence) {
  struct Case {
    const char* name;
    std::vector<std::string> events;  // "fail R", "ok R", "signal N", "violation"
    std::vector<bool> acts;           // each event's answer (stop the others / first signal)
    int first_failure;                // -1: none
    int stop_signal;
    std::size_t signalled;
  };
  const std::vector<Case> cases = {
      {"a failure after a signal is the signal's doing",
       {"signal 15", "fail 0"},
       {true, false},
       -1,
       15,
       2},
      {"the first signal counts, the workers it reached too",
       {"ok 1", "signal 2", "signal 15"},
       {false, true, false},
       -1,
       2,
       1},
      {"a failure, then a signal", {"fail 1", "signal 2"}, {true, true}, 1, 2, 1},
      {"a violation stops the job; a failure after it is its doing",
       {"violation", "fail 0"},
       {true, false},
       -1,
       0,
       0},
      {"a violation after a signal stops nothing more",
       {"signal 1", "violation"},
       {true, false},
       -1,
       1,
       2},
  };
  for (const Case& c : cases) {
    StopPolicy p(2, 1s);
    for (std::size_t i = 0; i < c.events.size(); ++i) {
      const std::string& e = c.events[i];
      const int arg = e.find(' ') == std::string::npos ? 0 : std::stoi(e.substr(e.find(' ') + 1));
      bool act = false;
      if (e.rfind("fail", 0) == 0) act = p.worker_ended(static_cast<std::size_t>(arg), true, t0);
      if (e.rfind("ok", 0) == 0) act = p.worker_ended(static_cast<std::size_t>(arg), false, t0);
      if (e.rfind("signal", 0) == 0) act = p.user_signal(arg, t0);
      if (e == "violation") act = p.placement_violation("rank 0 on GPU 1", t0);
      EXPECT_EQ(act, c.acts[i]) << c.name << ": " << e;
    }
    EXPECT_EQ(p.first_failure() ? static_cast<int>(*p.first_failure()) : -1, c.first_failure)
        << c.name;
    EXPECT_EQ(p.stop_signal(), c.stop_signal) << c.name;
    EXPECT_EQ(p.signalled(), c.signalled) << c.name;
    EXPECT_EQ(*p.kill_at(), t0 + 1s) << c.name;
  }
}

TEST(LaunchCore, StopPolicyKillsOnceAfterTheGracePeriod) {
  StopPolicy p(2, 500ms);
  EXPECT_FALSE(p.kill_due(t0 + 1h));  // nothing asked to stop
  p.user_signal(15, t0);
  EXPECT_FALSE(p.kill_due(t0 + 499ms));
  EXPECT_TRUE(p.kill_due(t0 + 500ms));
  p.count_killed(2);
  EXPECT_FALSE(p.kill_due(t0 + 600ms));
  EXPECT_FALSE(p.kill_at());
  p.user_signal(2, t0 + 700ms);  // the kill is not armed again
  EXPECT_FALSE(p.kill_at());
  EXPECT_EQ(p.killed(), 2u);
}

// --- the summary --------------------------------------------------------------------------------

TEST(LaunchCore, SummaryWordsTheEndAndPicksTheExitStatus) {
  EndWords posix;
  posix.failed_gpu = "GPU-b";
  posix.failed_how = "exited with status 3";
  posix.failed_code = 3;
  posix.signal = "SIGINT";
  posix.forwarded = "it";
  posix.killed_one = posix.killed_several = "got SIGKILL";
  EndWords windows = posix;
  windows.failed_how = "ended with exit code 3";
  windows.signal = "Ctrl-C";
  windows.forwarded = "CTRL_BREAK_EVENT";
  windows.killed_one = "was terminated";
  windows.killed_several = "were terminated";

  struct Case {
    const char* name;
    std::size_t workers;
    std::vector<std::string> events;  // as in the stop policy test, plus "kill N"
    const EndWords* words;
    std::string text;
    int exit_code;
  };
  const std::vector<Case> cases = {
      {"all succeed", 2, {"ok 0", "ok 1"}, &posix, "", 0},
      {"one fails",
       2,
       {"ok 0", "fail 1"},
       &posix,
       "gpusel: rank 1 (GPU GPU-b) exited with status 3; the other 1 worker was stopped\n",
       3},
      {"one fails, of three",
       3,
       {"fail 1"},
       &windows,
       "gpusel: rank 1 (GPU GPU-b) ended with exit code 3; the other 2 workers were stopped\n",
       3},
      {"the only worker fails",
       1,
       {"fail 0"},
       &posix,
       "gpusel: rank 0 (GPU GPU-b) exited with status 3; it was the only worker\n",
       3},
      {"a signal",
       2,
       {"signal 2"},
       &posix,
       "gpusel: stopped by SIGINT; it was forwarded to the 2 workers still running\n",
       130},
      {"a signal after every worker ended",
       1,
       {"ok 0", "signal 2"},
       &posix,
       "gpusel: stopped by SIGINT; it was forwarded to no worker (all had ended)\n",
       130},
      {"a signal, then a kill",
       2,
       {"signal 2", "kill 1"},
       &posix,
       "gpusel: stopped by SIGINT; it was forwarded to the 2 workers still running, and 1 worker "
       "still running after the grace period got SIGKILL\n",
       130},
      {"Ctrl-C, then terminated",
       3,
       {"ok 0", "signal 2", "kill 2"},
       &windows,
       "gpusel: stopped by Ctrl-C; CTRL_BREAK_EVENT was forwarded to the 2 workers still running, "
       "and 2 workers still running after the grace period were terminated\n",
       130},
      {"a failure, then a signal",
       2,
       {"fail 0", "signal 2"},
       &posix,
       "gpusel: rank 0 (GPU GPU-b) exited with status 3; the other 1 worker was stopped\n"
       "gpusel: stopped by SIGINT; it was forwarded to the 1 worker still running\n",
       130},
      {"a violation", 2, {"violation"}, &posix, "gpusel: rank 0 on GPU 1\n", 1},
      {"a failure, then a violation",
       2,
       {"fail 1", "violation"},
       &posix,
       "gpusel: rank 1 (GPU GPU-b) exited with status 3; the other 1 worker was stopped\n"
       "gpusel: rank 0 on GPU 1\n",
       1},
      {"a violation after a signal is not told",
       2,
       {"signal 2", "violation"},
       &posix,
       "gpusel: stopped by SIGINT; it was forwarded to the 2 workers still running\n",
       130},
  };
  for (const Case& c : cases) {
    StopPolicy p(c.workers, 1s);
    for (const std::string& e : c.events) {
      const int arg = e.find(' ') == std::string::npos ? 0 : std::stoi(e.substr(e.find(' ') + 1));
      if (e.rfind("fail", 0) == 0) p.worker_ended(static_cast<std::size_t>(arg), true, t0);
      if (e.rfind("ok", 0) == 0) p.worker_ended(static_cast<std::size_t>(arg), false, t0);
      if (e.rfind("signal", 0) == 0) p.user_signal(arg, t0);
      if (e.rfind("kill", 0) == 0) p.count_killed(static_cast<std::size_t>(arg));
      if (e == "violation") p.placement_violation("rank 0 on GPU 1", t0);
    }
    const Summary s = summarize(p, *c.words);
    EXPECT_EQ(s.text, c.text) << c.name;
    EXPECT_EQ(s.exit_code, c.exit_code) << c.name;
  }
}

namespace {

// Two ranks on GPUs "GPU-a" and "GPU-b"; NVML lists `listed` (pid, GPU) pairs.
struct CheckFixture {
  LaunchOptions options;
  JobPlan plan;
  std::vector<std::pair<unsigned, std::string>> listed;
  int asked = 0;
  CheckFixture() {
    options.command = {"prog"};
    options.gpus = {"GPU-a", "GPU-b"};
    options.gpu_processes = [this](std::string&) -> std::optional<std::vector<GpuProcesses>> {
      ++asked;
      std::vector<GpuProcesses> out;
      unsigned index = 0;
      for (const char* uuid : {"GPU-a", "GPU-b", "GPU-c"}) {
        GpuProcesses g;
        g.uuid = uuid;
        g.index = index++;
        g.pids.emplace();
        for (const auto& [pid, on] : listed) {
          if (on == uuid) g.pids->push_back(pid);
        }
        out.push_back(g);
      }
      return out;
    };
    plan = plan_job(options);
  }
};

// Pid 10 is rank 0's, 11 rank 1's, 12 a process the job left whose rank is unknown; 99 another
// job's; 500 a pid this system does not show.
ProcessFacts facts_of(unsigned pid) {
  ProcessFacts f;
  f.exists = pid != 500;
  f.description = "pid " + std::to_string(pid);
  if (pid == 10) f.member = JobMember{0, false};
  if (pid == 11) f.member = JobMember{1, false};
  if (pid == 12) f.member = JobMember{-1, true};
  return f;
}

}  // namespace

TEST(LaunchCore, PlacementCheckLooksSoonThenAtALowRate) {
  CheckFixture fx;
  const auto t0 = LaunchClock::time_point{};
  PlacementCheck check(fx.options, fx.plan, t0);
  EXPECT_FALSE(check.due(t0 + 499ms));
  EXPECT_TRUE(check.due(t0 + 500ms));
  auto now = t0 + 500ms;
  std::vector<long long> gaps;
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(check.look(facts_of, now), "");
    gaps.push_back(
        std::chrono::duration_cast<std::chrono::milliseconds>(check.next() - now).count());
    now = check.next();
  }
  EXPECT_EQ(gaps, (std::vector<long long>{1000, 2000, 4000, 5000, 5000, 5000}));
  EXPECT_EQ(fx.asked, 6);
}

TEST(LaunchCore, PlacementCheckFindsAProcessOfTheJobOnAnotherGpu) {
  CheckFixture fx;
  fx.listed = {{10, "GPU-a"}, {11, "GPU-b"}, {99, "GPU-c"}, {12, "GPU-b"}};
  PlacementCheck check(fx.options, fx.plan, LaunchClock::time_point{});
  EXPECT_EQ(check.look(facts_of, LaunchClock::time_point{}), "");
  EXPECT_EQ(check.violation(), "") << "every process of the job is on its own GPU";
  fx.listed.push_back({11, "GPU-a"});
  EXPECT_EQ(check.look(facts_of, LaunchClock::time_point{}), "");
  EXPECT_NE(check.violation().find("rank 1 (GPU GPU-b) opened a CUDA context on GPU 0 (GPU-a)"),
            std::string::npos)
      << check.violation();
  EXPECT_NE(check.violation().find("pid 11"), std::string::npos);
  EXPECT_FALSE(check.looking());
}

TEST(LaunchCore, PlacementCheckNamesALeftBehindProcessOnNoneOfTheJobsGpus) {
  CheckFixture fx;
  fx.listed = {{12, "GPU-c"}};
  PlacementCheck check(fx.options, fx.plan, LaunchClock::time_point{});
  check.look(facts_of, LaunchClock::time_point{});
  EXPECT_NE(check.violation().find("none of the job's (GPU-a,GPU-b)"), std::string::npos)
      << check.violation();
  EXPECT_NE(check.violation().find("orphaned"), std::string::npos);
}

TEST(LaunchCore, PlacementCheckTurnsItselfOffWhenItCannotSee) {
  CheckFixture fx;
  fx.listed = {{500, "GPU-c"}};
  PlacementCheck check(fx.options, fx.plan, LaunchClock::time_point{});
  EXPECT_EQ(check.look(facts_of, LaunchClock::time_point{}), "");
  EXPECT_NE(check.look(facts_of, LaunchClock::time_point{}).find("pid namespace"),
            std::string::npos);
  EXPECT_FALSE(check.looking());
  CheckFixture none;
  none.options.gpu_processes = [](std::string& why) -> std::optional<std::vector<GpuProcesses>> {
    why = "NVML is unavailable (test)";
    return std::nullopt;
  };
  PlacementCheck off(none.options, none.plan, LaunchClock::time_point{});
  EXPECT_EQ(off.look(facts_of, LaunchClock::time_point{}),
            "the placement check is off: NVML is unavailable (test)");
  EXPECT_FALSE(off.looking());
}
