// gpusel resolve: a --gpu list to full GPU UUIDs, one per rank, as a launcher would pass them on.
#include <iostream>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "common.hpp"
#include "gpusel/cli11.hpp"
#include "gpusel/probe.hpp"

namespace gpusel::cli {

CLI::App* setup_resolve(CLI::App& app, ResolveOptions& options) {
  CLI::App* cmd = app.add_subcommand(
      "resolve", "resolve a --gpu list to full GPU UUIDs, one per line in rank order");
  add_gpu_option(*cmd, options.gpus)->required();
  cmd->add_flag("--json", options.json, "print {\"resolved\": ..., \"gpus\": [...]}");
  return cmd;
}

int run_resolve(const ResolveOptions& options) {
  const Resolution r =
      resolve_gpus(options.gpus, cuda_env_from_environment(), default_probe_helper());
  const std::vector<std::string>& out = r.gpus;
  const bool resolved = r.resolved;
  if (!resolved) {
    print_warning("NVML is unavailable (" + r.reason +
                  "); the UUIDs are passed on unresolved, and each worker will match its entry "
                  "against CUDA's own devices when it binds");
  }
  for (const std::string& note : r.notes) print_note(note);
  if (auto sim = simulated_machine(); sim && !options.json) {
    std::cerr << "gpusel: simulated machine: " << *sim << "\n";
  }
  if (options.json) {
    nlohmann::json j;
    j["resolved"] = resolved;
    j["through_cuda"] = r.through_cuda;
    j["notes"] = r.notes;
    j["gpus"] = out;
    std::cout << j.dump() << "\n";
  } else {
    for (const std::string& u : out) std::cout << u << "\n";
  }
  return 0;
}

}  // namespace gpusel::cli
