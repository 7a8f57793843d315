// libFuzzer target: the CUDA_VISIBLE_DEVICES model and resolution never crash, never expose a
// device twice or out of range, and only fail with gpusel::Error. The first byte picks the
// machine, the device order and the MIG rule; the rest is the CUDA_VISIBLE_DEVICES value.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "fixtures.hpp"
#include "gpusel/error.hpp"
#include "gpusel/resolution.hpp"
#include "gpusel_detail.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::uint8_t selector = data[0];
  const std::string value(reinterpret_cast<const char*>(data) + 1, size - 1);
  const auto gpus = selector % 3 == 0   ? gpusel::test::four_same()
                    : selector % 3 == 1 ? gpusel::test::three_mixed()
                                        : gpusel::test::with_mig();
  gpusel::CudaEnv env;
  env.visible_devices = value;
  if (selector & 4) env.device_order = "PCI_BUS_ID";
  const auto rule = (selector & 8) ? gpusel::MigRule::Legacy : gpusel::MigRule::R570;
  const auto vs = gpusel::model_visible(gpus, env, nullptr, rule);
  if (!vs.known && !vs.devices.empty()) std::abort();
  if (vs.duplicate && !vs.devices.empty()) std::abort();
  for (std::size_t i = 0; i < vs.devices.size(); ++i) {
    const auto& d = vs.devices[i];
    if (d.gpu < 0 || static_cast<std::size_t>(d.gpu) >= gpus.size()) std::abort();
    if (d.mig >= static_cast<int>(gpus[static_cast<std::size_t>(d.gpu)].migs.size())) std::abort();
    for (std::size_t j = 0; j < i; ++j) {
      if (vs.devices[j] == d) std::abort();
    }
  }
  if (vs.used_entries > vs.entries.size()) std::abort();
  for (const char* spec : {"0", "1", "GPU-a", "GPU-0"}) {
    try {
      auto uuids = gpusel::resolve_entries(gpusel::read_gpu_request(spec).gpus, gpus, env);
      if (uuids.size() != 1) std::abort();
    } catch (const gpusel::Error&) {
    }
  }
  return 0;
}
