// gpusel resolve: a --gpu list to full GPU UUIDs, one per rank, as a launcher would pass them on.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "common.hpp"
#include "gpusel/probe.hpp"
#include "gpusel/spec.hpp"
#include "gpusel_detail.hpp"
#include "interface.hpp"
#include "problem_json.hpp"

namespace gpusel::cli {
namespace {

// A value as one shell word: as it is when the shell reads it literally (every UUID and index),
// else single-quoted, so that `eval` never runs any of it.
std::string env_word(const std::string& value) {
  return detail::shell_word(value, "-,_.:/");
}

}  // namespace

ResolveOptions read_resolve(const CommandLine& line) {
  ResolveOptions o;
  o.gpus = read_gpu_list(line);
  o.choice = read_choice_options(line);
  o.json = line.flag("--json");
  o.format = line.value("--format").value_or("lines");
  return o;
}

int run_resolve(const ResolveOptions& options) {
  const Acquisition picked = acquire(options.gpus, options.choice, false);  // leases nothing
  const Resolution& r = picked.resolution;
  const std::vector<std::string>& out = r.gpus;
  const bool resolved = r.resolved;
  if (!resolved) {
    print_warning("NVML is unavailable (" + r.reason +
                  "); the UUIDs are passed on unresolved, and each worker will match its entry "
                  "against CUDA's own devices when it binds");
  }
  for (const Note& note : r.notes) print_note(note.text);
  if (auto sim = simulated_machine(); sim && !options.json) {
    to_stderr() << "gpusel: simulated machine: " << *sim << "\n";
  }
  if (options.json) {
    nlohmann::json j;
    j["resolved"] = resolved;
    j["through_cuda"] = r.through_cuda;
    // Why NVML is unavailable, as data (null when it answered): {"code", "call", "result"}.
    j["nvml_problem"] = problem_json(r.nvml_problem);
    j["notes"] = nlohmann::json::array();
    j["note_codes"] = nlohmann::json::array();  // note_codes[i] is the code of notes[i]
    for (const Note& note : r.notes) {
      j["notes"].push_back(said(note.text));
      j["note_codes"].push_back(note.code);
    }
    if (!picked.why.empty()) j["picked"] = said(picked.why);
    j["gpus"] = out;
    to_stdout() << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else if (options.format == "csv") {
    to_stdout() << detail::join_entries(out) << "\n";
  } else if (options.format == "env") {
    to_stdout() << "GPUSEL_GPUS=" << env_word(detail::join_entries(out)) << "\n";
  } else {
    std::string lines;               // one write, not two per GPU
    lines.reserve(out.size() * 41);  // a UUID and its line's end
    for (const std::string& u : out) lines.append(u).push_back('\n');
    to_stdout() << lines;
  }
  return 0;
}

}  // namespace gpusel::cli
