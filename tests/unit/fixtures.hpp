// Small machines for the pure-logic tests.
#pragma once

#include <string>
#include <vector>

#include "gpusel/visible.hpp"

namespace gpusel::test {

inline GpuInfo make_gpu(unsigned index, std::string uuid,
                        std::string name = "NVIDIA H100 80GB HBM3", int major = 9, int minor = 0) {
  GpuInfo g;
  g.index = index;
  g.uuid = std::move(uuid);
  g.name = std::move(name);
  g.cc_major = major;
  g.cc_minor = minor;
  g.pci_bus_id = "00000000:" + std::to_string(10 + index) + ":00.0";
  return g;
}

// Four identical GPUs. UUID 0 and 1 share the prefix "GPU-aa".
inline std::vector<GpuInfo> four_same() {
  return {make_gpu(0, "GPU-aa11aaaa-0000-0000-0000-000000000000"),
          make_gpu(1, "GPU-aa22bbbb-0000-0000-0000-000000000001"),
          make_gpu(2, "GPU-cc33cccc-0000-0000-0000-000000000002"),
          make_gpu(3, "GPU-dd44dddd-0000-0000-0000-000000000003")};
}

// Three different models, in PCI order: A4000, 4090, A6000.
inline std::vector<GpuInfo> three_mixed() {
  return {make_gpu(0, "GPU-0a0a0a0a-0000-0000-0000-000000000000", "NVIDIA RTX A4000", 8, 6),
          make_gpu(1, "GPU-1b1b1b1b-0000-0000-0000-000000000001", "NVIDIA GeForce RTX 4090", 8, 9),
          make_gpu(2, "GPU-2c2c2c2c-0000-0000-0000-000000000002", "NVIDIA RTX A6000", 8, 6)};
}

// GPU 0 in MIG mode with two MIG devices, GPU 1 whole.
inline std::vector<GpuInfo> with_mig() {
  auto gpus = std::vector<GpuInfo>{
      make_gpu(0, "GPU-e0e0e0e0-0000-0000-0000-000000000000", "NVIDIA A100", 8, 0),
      make_gpu(1, "GPU-f1f1f1f1-0000-0000-0000-000000000001", "NVIDIA A100", 8, 0)};
  gpus[0].mig_enabled = true;
  gpus[0].migs = {
      {"MIG-11111111-0000-0000-0000-000000000000", 3, 0, "NVIDIA A100 MIG 3g.20gb", 20ull << 30},
      {"MIG-22222222-0000-0000-0000-000000000000", 4, 0, "NVIDIA A100 MIG 3g.20gb", 20ull << 30}};
  return gpus;
}

}  // namespace gpusel::test
