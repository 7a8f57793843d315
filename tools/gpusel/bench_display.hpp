// gpusel bench bw's live display: follows the workers' events while they run, prints each row as
// it is measured (text output) and a progress line with an estimate of the time left on stderr.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bench_ipc.hpp"
#include "gpusel/bandwidth.hpp"
#include "gpusel/probe.hpp"

namespace gpusel::cli::bench {

class Display {
 public:
  // `rows`: print rows as they come; `progress`: draw the progress line.
  Display(const std::string& folder, const std::vector<std::string>& gpus,
          const std::vector<const GpuInfo*>& info, const BandwidthOptions& b, bool parallel,
          bool rows, bool progress);
  ~Display();
  Display(const Display&) = delete;
  Display& operator=(const Display&) = delete;

  // Sequential runs: the GPU now being measured.
  void set_current(std::size_t i) { current_ = i; }

  void start();
  // Stops following, after a last look at the files (prints rows not printed yet).
  void stop();

  // Rows of GPU i already printed.
  std::size_t printed(std::size_t i) const { return state_[i].rows; }

 private:
  struct PerGpu {
    explicit PerGpu(EventReader r) : events(std::move(r)) {}
    EventReader events;
    std::size_t steps = 0;  // warm-ups and samples done
    std::size_t rows = 0;   // rows printed
    std::string test;       // where it stands
    int sample = 0;
  };

  void loop();
  void poll();
  std::optional<double> left_for(std::size_t i) const;
  // How many times a GPU runs `test`: once, or for p2p once per other GPU.
  std::size_t runs_of(const std::string& test) const;
  void draw();
  void clear_line();

  std::vector<const GpuInfo*> info_;
  BandwidthOptions b_;
  bool parallel_, rows_, progress_;
  std::vector<PerGpu> state_;
  std::atomic<std::size_t> current_{0};
  std::map<std::pair<std::string, bool>, std::pair<double, int>> step_seconds_;
  double all_seconds_ = 0;
  std::size_t all_steps_ = 0;
  std::chrono::steady_clock::time_point last_event_ = std::chrono::steady_clock::now();
  bool drawn_ = false;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace gpusel::cli::bench
