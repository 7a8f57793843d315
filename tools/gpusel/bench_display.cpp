#include "bench_display.hpp"

#include <fmt/format.h>
#ifdef _WIN32
#include "win.hpp"
#else
#include <sys/ioctl.h>
#endif

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>

#include "bench_output.hpp"
#include "common.hpp"

namespace gpusel::cli::bench {
namespace {

std::string format_seconds(double s) {
  if (s < 60) return fmt::format("{:.0f} s", std::max(1.0, std::ceil(s)));
  // Rounded by hand, not with std::lround: that one function made the command load libm at every
  // start (docs/performance.md). Capped, so that no estimate (infinite, NaN) overflows the cast.
  const long total = static_cast<long>((s < 1e9 ? s : 1e9) + 0.5);
  if (total < 3600) return fmt::format("{} min {:02} s", total / 60, total % 60);
  return fmt::format("{} h {:02} min", total / 3600, (total % 3600) / 60);
}

}  // namespace

Display::Display(const std::string& folder, const std::vector<std::string>& gpus,
                 const std::vector<const GpuInfo*>& info, const BandwidthOptions& b, bool parallel,
                 bool rows, bool progress)
    : info_(info), b_(b), parallel_(parallel), rows_(rows), progress_(progress) {
  for (const std::string& gpu : gpus) state_.emplace_back(EventReader(folder, gpu));
}

Display::~Display() {
  stop();
}

void Display::start() {
  if (!rows_ && !progress_) return;
    // The supervisor reads INT, TERM, HUP, QUIT and CHLD from a signalfd: they must stay blocked
    // in this thread, or the kernel could deliver one here, where its default action applies.
    // (Windows has no signals to block: console control events run on a thread of their own.)
#ifdef _WIN32
  thread_ = std::thread([this] { loop(); });
#else
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  thread_ = std::thread([this] { loop(); });
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
#endif
}

void Display::stop() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
  poll();
  clear_line();
}

void Display::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    lock.unlock();
    poll();
    if (progress_) draw();
    lock.lock();
    wake_.wait_for(lock, std::chrono::milliseconds(200), [this] { return stopping_; });
  }
}

void Display::poll() {
  for (std::size_t i = 0; i < state_.size(); ++i) {
    PerGpu& p = state_[i];
    for (const WorkerEvent& e : p.events.read_new()) {
      if (e.result) {
        if (rows_) {
          clear_line();
          to_stdout() << text_row(make_row(e.gpu, *e.result, info_[i],
                                           find_gpu(info_, e.result->peer_uuid)))
                      << flushed;
        }
        ++p.rows;
        continue;
      }
      auto& [sum, n] = step_seconds_[{e.test, e.sample == 0}];
      sum += e.seconds;
      ++n;
      all_seconds_ += e.seconds;
      ++all_steps_;
      ++p.steps;
      p.test = e.test;
      p.sample = e.sample;
      last_event_ = std::chrono::steady_clock::now();
    }
  }
}

// Seconds left for GPU i, from the steps measured so far (per test, warm-up and samples apart).
std::optional<double> Display::left_for(std::size_t i) const {
  if (all_steps_ == 0) return std::nullopt;
  const double mean = all_seconds_ / static_cast<double>(all_steps_);
  double left = 0;
  std::size_t step = 0;
  for (const std::string& test : b_.tests) {
    for (std::size_t run = 0; run < runs_of(test); ++run) {
      for (int s = 0; s <= b_.samples; ++s, ++step) {
        if (step < state_[i].steps) continue;
        auto it = step_seconds_.find({test, s == 0});
        left += it != step_seconds_.end() ? it->second.first / it->second.second : mean;
      }
    }
  }
  return left;
}

void Display::draw() {
  const std::size_t gpus = state_.size();
  std::size_t per_gpu = 0;
  for (const std::string& test : b_.tests)
    per_gpu += runs_of(test) * static_cast<std::size_t>(b_.samples + 1);
  std::size_t done = 0;
  for (const PerGpu& p : state_) done += p.steps;
  const std::size_t total = per_gpu * gpus;
  std::optional<double> left;
  if (all_steps_ > 0) {
    double sum = 0, most = 0;
    for (std::size_t i = 0; i < gpus; ++i) {
      const double l = *left_for(i);
      sum += l;
      most = std::max(most, l);
    }
    const double since =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - last_event_).count();
    left = std::max(0.0, (parallel_ ? most : sum) - since);
  }
  std::string where;
  if (parallel_) {
    where = fmt::format("{} GPUs at once", gpus);
  } else {
    const std::size_t i = std::min<std::size_t>(current_, gpus - 1);
    const PerGpu& p = state_[i];
    where = fmt::format("GPU {}/{}", i + 1, gpus);
    if (info_[i] != nullptr) where += fmt::format(" (index {})", info_[i]->index);
    if (!p.test.empty()) {
      where += p.sample == 0 ? fmt::format(", {} warm-up done", p.test)
                             : fmt::format(", {} sample {}/{}", p.test, p.sample, b_.samples);
    }
  }
  std::string line =
      fmt::format("gpusel: measuring {}; {}% done, {}", where, total ? 100 * done / total : 0,
                  left ? "about " + format_seconds(*left) + " left" : "estimating the time left");
#ifdef _WIN32
  CONSOLE_SCREEN_BUFFER_INFO console{};
  if (GetConsoleScreenBufferInfo(GetStdHandle(STD_ERROR_HANDLE), &console)) {
    const int columns = console.srWindow.Right - console.srWindow.Left + 1;
    if (columns > 1 && line.size() >= static_cast<std::size_t>(columns)) line.resize(columns - 1);
  }
#else
  winsize ws{};
  if (ioctl(2, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 1 && line.size() >= ws.ws_col)
    line.resize(ws.ws_col - 1);
#endif
  to_stderr() << "\r" << line << "\33[K" << flushed;
  drawn_ = true;
}

std::size_t Display::runs_of(const std::string& test) const {
  return test == "p2p" ? (state_.empty() ? 0 : state_.size() - 1) : 1;
}

void Display::clear_line() {
  if (drawn_) to_stderr() << "\r\33[K" << flushed;
  drawn_ = false;
}

}  // namespace gpusel::cli::bench
