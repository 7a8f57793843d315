#include "bench_ipc.hpp"

#include <cstdlib>
#include <filesystem>
#include <iterator>

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
  char dir_template[] = "/tmp/gpusel-bench-XXXXXX";
  if (mkdtemp(dir_template) == nullptr) throw failure("cannot make a temporary folder in /tmp");
  path_ = dir_template;
}

TempFolder::~TempFolder() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

void write_report(const std::string& folder, const std::string& gpu, const WorkerReport& report) {
  std::ofstream(report_file(folder, gpu)) << encode(report);
}

EventWriter::EventWriter(const std::string& folder, const std::string& gpu)
    : out_(events_file(folder, gpu), std::ios::app) {}

void EventWriter::write(const WorkerEvent& event) {
  out_ << encode(event) << "\n" << std::flush;
}

std::optional<WorkerReport> read_report(const std::string& folder, const std::string& gpu) {
  std::ifstream in(report_file(folder, gpu));
  if (!in) return std::nullopt;
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return decode_report(text);
}

EventReader::EventReader(const std::string& folder, const std::string& gpu)
    : path_(events_file(folder, gpu)) {}

std::vector<WorkerEvent> EventReader::read_new() {
  std::vector<WorkerEvent> out;
  std::ifstream in(path_, std::ios::binary);
  if (!in) return out;
  in.seekg(static_cast<std::streamoff>(offset_));
  std::string line;
  while (std::getline(in, line)) {
    if (in.eof()) break;  // a line still being written
    offset_ += line.size() + 1;
    if (auto e = decode_event(line)) out.push_back(std::move(*e));
  }
  return out;
}

}  // namespace gpusel::cli::bench
