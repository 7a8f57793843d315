// gpusel bind: assign a GPU as a worker would, bind it, and show the worker's view.
#include <fmt/format.h>

#include <iostream>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "common.hpp"
#include "gpusel/cli11.hpp"
#include "gpusel/cuda.hpp"
#include "gpusel/launch.hpp"
#include "gpusel/units.hpp"
#include "gpusel/worker.hpp"

namespace gpusel::cli {

// `text` with control bytes and bytes that are not UTF-8 escaped as \xNN (defined in list.cpp).
std::string printable(std::string_view text);

CLI::App* setup_bind(CLI::App& app, BindOptions& options) {
  CLI::App* cmd = app.add_subcommand("bind",
                                     "bind this process's GPU as a worker does (from --gpu, else "
                                     "GPUSEL_GPUS and the local rank) and show it");
  add_single_gpu_option(*cmd, options.gpu, "--gpu",
                        "one GPU: an nvidia-smi index or a UUID (any unique prefix), or free:1; "
                        "without it, GPUSEL_GPU, GPUSEL_GPUS and the local rank decide");
  cmd->add_flag("--json", options.json, "print one JSON object");
  return cmd;
}

int run_bind(const BindOptions& options) {
  if (!options.gpu.empty()) assign_gpu(options.gpu);
  const int ordinal = bind_assigned_gpu();
  const std::optional<AssignmentInfo> info = assignment_info();
  std::optional<LocalRank> rank = info ? info->rank : std::nullopt;
  if (!rank) {
    try {
      rank = local_rank();  // for the report only: it did not pick the GPU
    } catch (const Error&) {
    }
  }
  const GpuIdentity id = gpu_identity(ordinal);
  const std::string cpus = format_cpu_list(own_cpus());
  const std::string cc = fmt::format("{}.{}", id.cc_major, id.cc_minor);
  if (options.json) {
    nlohmann::json j;
    j["rank"] = rank ? nlohmann::json(rank->rank) : nlohmann::json(nullptr);
    j["rank_variable"] = rank ? nlohmann::json(rank->variable) : nlohmann::json(nullptr);
    j["source"] = info ? source_name(info->source) : "default";
    j["ignored"] = rank ? rank->ignored : std::vector<std::string>{};
    j["uuid"] = id.uuid;
    j["index"] = id.index ? nlohmann::json(*id.index) : nlohmann::json(nullptr);
    j["cuda_ordinal"] = id.cuda_ordinal;
    j["name"] = id.name;
    j["total_bytes"] = id.total_bytes;
    j["compute_capability"] = cc;
    j["pci_bus_id"] = id.pci_bus_id;
    // The CUDA driver's own version (cuDriverGetVersion), "12.8"; null when it gave none.
    const int version = cuda_driver_version();
    j["cuda_driver_version"] =
        version > 0 ? nlohmann::json(cuda_version_text(version)) : nlohmann::json(nullptr);
    j["cpus"] = cpus;
    j["simulated"] =
        simulated_machine() ? nlohmann::json(*simulated_machine()) : nlohmann::json(nullptr);
    // Driver strings may hold bytes that are not UTF-8: they become U+FFFD.
    std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl;
    return 0;
  }
  const std::string who =
      rank ? fmt::format("rank {} ({}={})", rank->rank, rank->variable, rank->rank)
           : std::string("this process");
  fmt::print("{}{}: CUDA ordinal {} = {}\n", simulated_machine() ? "[simulated] " : "", who,
             id.cuda_ordinal, printable(id.uuid));
  fmt::print("  nvidia-smi index {}, {}, {}, compute capability {}, PCI {}\n",
             id.index ? std::to_string(*id.index) : std::string("unknown (no NVML)"),
             printable(id.name), format_bytes(id.total_bytes), cc,
             id.pci_bus_id.empty() ? "unknown" : printable(id.pci_bus_id));
  fmt::print("  CPUs {}; chosen by {}\n", cpus, info ? source_name(info->source) : "default");
  if (rank) {
    for (const std::string& why : rank->ignored) fmt::print("  not counted: {}\n", why);
  }
  return 0;
}

}  // namespace gpusel::cli
