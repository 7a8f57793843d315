// gpusel bind: assign a GPU as a worker would, bind it, and show the worker's view.
#include <fmt/format.h>

#include <cstdlib>
#include <iostream>
#include <nlohmann/json.hpp>

#ifdef _WIN32
#include <windows.h>
#endif

#include "commands.hpp"
#include "common.hpp"
#include "gpusel/cli11.hpp"
#include "gpusel/cuda.hpp"
#include "gpusel/launch.hpp"
#include "gpusel/worker.hpp"
#include "gpusel_detail.hpp"

namespace gpusel::cli {

CLI::App* setup_bind(CLI::App& app, BindOptions& options) {
  CLI::App* cmd = app.add_subcommand("bind",
                                     "bind this process's GPU as a worker does (from --gpu, else "
                                     "GPUSEL_GPUS and the local rank) and show it");
  add_single_gpu_option(*cmd, options.gpu, "--gpu",
                        "one GPU: an nvidia-smi index or a UUID (any unique prefix), or free:1; "
                        "without it, GPUSEL_GPU, GPUSEL_GPUS and the local rank decide");
  cmd->add_flag("--share", options.share,
                "share the GPU with other processes on purpose (as GPUSEL_SHARE=1): another "
                "process's claim on it is no error");
  cmd->add_flag("--json", options.json, "print one JSON object");
  return cmd;
}

int run_bind(const BindOptions& options) {
  if (options.share) {
#ifdef _WIN32
    SetEnvironmentVariableA("GPUSEL_SHARE", "1");
#else
    setenv("GPUSEL_SHARE", "1", 1);
#endif
  }
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
  const CudaDevice id = gpu_identity(ordinal);
  const std::string cpus = detail::format_cpu_list(own_cpus());
  const std::string cc = fmt::format("{}.{}", id.cc_major, id.cc_minor);
  if (options.json) {
    nlohmann::json j;
    j["rank"] = rank ? nlohmann::json(rank->rank) : nlohmann::json(nullptr);
    j["rank_variable"] = rank ? nlohmann::json(rank->variable) : nlohmann::json(nullptr);
    j["source"] = info ? source_name(info->source) : "default";
    j["ignored"] = rank ? rank->ignored : std::vector<std::string>{};
    j["uuid"] = id.uuid;
    // The two numberings under explicit names; "index" is the nvidia-smi index too (kept for
    // scripts written before the explicit name).
    j["nvidia_smi_index"] =
        id.nvidia_smi_index ? nlohmann::json(*id.nvidia_smi_index) : nlohmann::json(nullptr);
    j["index"] = j["nvidia_smi_index"];
    j["cuda_ordinal"] = id.cuda_ordinal;
    j["shared"] = info && info->shared;
    j["shared_with_pid"] =
        info && info->shared_with_pid ? nlohmann::json(*info->shared_with_pid) : nullptr;
    j["claim_note"] =
        info && !info->claim_note.empty() ? nlohmann::json(info->claim_note) : nullptr;
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
             id.cuda_ordinal, detail::printable(id.uuid));
  fmt::print(
      "  nvidia-smi index {}, {}, {}, compute capability {}, PCI {}\n",
      id.nvidia_smi_index ? std::to_string(*id.nvidia_smi_index) : std::string("unknown (no NVML)"),
      detail::printable(id.name), detail::format_bytes(id.total_bytes), cc,
      id.pci_bus_id.empty() ? "unknown" : detail::printable(id.pci_bus_id));
  fmt::print("  CPUs {}; chosen by {}\n", cpus, info ? source_name(info->source) : "default");
  if (info && info->shared) {
    fmt::print("  shared on purpose (GPUSEL_SHARE=1){}\n",
               info->shared_with_pid
                   ? fmt::format(", beside pid {}, which holds it alone", *info->shared_with_pid)
                   : std::string());
  }
  if (info && !info->claim_note.empty())
    fmt::print("  note: {}\n", detail::printable(info->claim_note));
  if (rank) {
    for (const std::string& why : rank->ignored) fmt::print("  not counted: {}\n", why);
  }
  return 0;
}

}  // namespace gpusel::cli
