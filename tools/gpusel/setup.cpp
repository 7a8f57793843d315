// gpusel setup: makes the shared lease store (as root), so that leases bind every user.
#include <fmt/format.h>

#include "commands.hpp"
#include "common.hpp"
#include "gpusel/error.hpp"
#include "gpusel/lease.hpp"
#include "gpusel/nvml.hpp"
#include "gpusel/resolution.hpp"
#include "gpusel_detail.hpp"

namespace gpusel::cli {

SetupOptions read_setup(const CommandLine& line) {
  SetupOptions o;
  o.lease_dir = line.value("--lease-dir").value_or("");
  return o;
}

int run_setup(const SetupOptions& options) {
  const std::string dir = options.lease_dir.empty() ? kSharedLeaseStore : options.lease_dir;
  if (dir.empty() || dir[0] != '/') {
    throw bad_input(
        "--lease-dir " + detail::quote_value(dir) +
        " is not an absolute path; give the store's full path, as /var/lib/gpusel/leases");
  }
  // One lease file per GPU that NVML lists, MIG devices included.
  const NvmlSnapshot snap = query_nvml();
  std::vector<std::string> uuids;
  for (const GpuInfo& g : snap.gpus) {
    if (g.failed() || g.uuid.empty()) continue;
    uuids.push_back(g.uuid);
    for (const MigDevice& m : g.migs) uuids.push_back(m.uuid);
  }
  // No GPU to cover (no driver yet, as when a package is installed before it): a store made now
  // would cover no GPU and bind nothing, so none is made or changed.
  if (uuids.empty()) {
    const std::string why = snap.available ? std::string("NVML lists no GPU")
                                           : "NVML is unavailable (" + snap.reason + ")";
    print_error(
        "no NVIDIA GPU found: " + why + "; the shared lease store " + dir +
        " was not set up, since it would cover no GPU. Run `gpusel setup` as root " +
        "(sudo gpusel setup) once the NVIDIA driver is installed and nvidia-smi lists the GPUs");
    return 1;
  }
  const StoreSetup report = set_up_shared_store(dir, uuids);
  for (const std::string& change : report.changes) fmt::print("{}\n", detail::printable(change));
  for (const std::string& problem : report.problems) print_warning(problem);
  if (!report.problems.empty()) return 1;
  fmt::print(
      "the shared lease store {} is ready for {} GPU{}{}: leases taken there bind every "
      "user of this machine\n",
      dir, uuids.size(), uuids.size() == 1 ? "" : "s",
      report.changes.empty() ? " (nothing needed changing)" : "");
  return 0;
}

}  // namespace gpusel::cli
