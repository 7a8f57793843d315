#include "bench_ipc.hpp"

#include <cstdlib>
#include <filesystem>
#ifdef _WIN32
#include <random>
#endif

#include "file_text.hpp"
#include "gpusel/error.hpp"

namespace gpusel::cli::bench {
namespace {

std::string report_file(const std::string& folder, const std::string& gpu) {
  return folder + "/" + gpu + ".json";
}

std::string events_file(const std::string& folder, const std::string& gpu) {
  return folder + "/" + gpu + ".events";
}

}  // namespace

TempFolder::TempFolder() {
#ifdef _WIN32
  // Windows: a new folder under %TEMP% (no mkdtemp there); create_directory fails on a name
  // that exists, so the name is tried afresh.
  std::error_code ec;
  const auto base = std::filesystem::temp_directory_path(ec);
  std::random_device random;
  for (int attempt = 0; attempt < 100 && path_.empty(); ++attempt) {
    const auto dir = base / ("gpusel-bench-" + std::to_string(random()));
    if (std::filesystem::create_directory(dir, ec)) path_ = dir.string();
  }
  if (path_.empty()) throw failure("cannot make a temporary folder in " + base.string());
#else
  char dir_template[] = "/tmp/gpusel-bench-XXXXXX";
  if (mkdtemp(dir_template) == nullptr) throw failure("cannot make a temporary folder in /tmp");
  path_ = dir_template;
#endif
}

TempFolder::~TempFolder() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

void write_report(const std::string& folder, const std::string& gpu, const WorkerReport& report) {
  // (A report that cannot be written is missed by the parent, which says the worker left none.)
  detail::write_file_text(report_file(folder, gpu), encode(report));
}

EventWriter::EventWriter(const std::string& folder, const std::string& gpu)
    : path_(events_file(folder, gpu)) {}

void EventWriter::write(const WorkerEvent& event) {
  detail::write_file_text(path_, encode(event) + "\n", true);
}

std::optional<WorkerReport> read_report(const std::string& folder, const std::string& gpu) {
  const std::optional<std::string> text = detail::read_file_text(report_file(folder, gpu));
  if (!text) return std::nullopt;
  return decode_report(*text);
}

EventReader::EventReader(const std::string& folder, const std::string& gpu)
    : path_(events_file(folder, gpu)) {}

std::vector<WorkerEvent> EventReader::read_new() {
  std::vector<WorkerEvent> out;
  const std::optional<std::string> text =
      detail::read_file_text(path_, std::size_t{64} << 20, offset_);
  if (!text) return out;
  // Whole lines only: one without its '\n' is still being written.
  for (std::size_t at = 0, end; (end = text->find('\n', at)) != std::string::npos; at = end + 1) {
    offset_ += end - at + 1;
    if (auto e = decode_event(text->substr(at, end - at))) out.push_back(std::move(*e));
  }
  return out;
}

}  // namespace gpusel::cli::bench
