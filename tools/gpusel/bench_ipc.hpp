// How `gpusel bench bw` and its workers talk: through files in a temporary folder the parent
// makes, one pair per GPU (named by the GPU as GPUSEL_GPU gives it to the worker):
//   <gpu>.json    the worker's report, written once as it ends
//   <gpu>.events  its progress, one event a line, appended as it goes
// The JSON in them is bench_schema.hpp's.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bench_schema.hpp"

namespace gpusel::cli::bench {

// A fresh folder under /tmp, removed with everything in it when this goes.
class TempFolder {
 public:
  TempFolder();  // throws Error(Failure) when it cannot
  ~TempFolder();
  TempFolder(const TempFolder&) = delete;
  TempFolder& operator=(const TempFolder&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// In the worker.
void write_report(const std::string& folder, const std::string& gpu, const WorkerReport& report);

class EventWriter {
 public:
  EventWriter(const std::string& folder, const std::string& gpu);
  void write(const WorkerEvent& event);  // a whole line, appended at once

 private:
  std::string path_;
};

// In the parent: the report, or nullopt when the worker left none (it died, or said why on
// stderr).
std::optional<WorkerReport> read_report(const std::string& folder, const std::string& gpu);

// Follows a worker's events file: each call returns the whole lines written since the last.
class EventReader {
 public:
  EventReader(const std::string& folder, const std::string& gpu);
  std::vector<WorkerEvent> read_new();

 private:
  std::string path_;
  std::uint64_t offset_ = 0;
};

}  // namespace gpusel::cli::bench
