#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "machine.hpp"

using namespace gpusel::sim;

namespace {

const std::string kMachines = std::string(GPUSEL_SOURCE_DIR) + "/sim/machines";

std::string write_temp(const std::string& name, const std::string& text) {
  auto path = std::filesystem::temp_directory_path() / ("gpusel_machine_test_" + name + ".toml");
  std::ofstream(path) << text;
  return path.string();
}

const char* kGpu = R"(
[[gpu]]
uuid = "GPU-11111111-2222-3333-4444-555555555555"
name = "Test GPU"
pci_bus_id = "00000000:81:00.0"
memory_total = "16GiB"
compute_capability = "8.0"
sm_count = 10
numa_node = 0
cpus = "0-3"
pcie_h2d_gbps = 10
pcie_d2h_gbps = 11
memory_bandwidth_gbps = 100.5
)";

const char* kHead = "name = \"t\"\ndriver_version = \"1\"\ncuda_driver_version = 12000\n";

std::string load_error(const std::string& text) {
  try {
    load_machine(write_temp("bad", text));
  } catch (const MachineError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error for:\n" << text;
  return "";
}

}  // namespace

TEST(Machine, EveryBundledMachineLoads) {
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kMachines)) {
    SCOPED_TRACE(entry.path().string());
    SimMachine m = load_machine(entry.path().string());
    EXPECT_EQ(m.name, entry.path().stem().string());
    EXPECT_FALSE(m.description.empty());
    EXPECT_FALSE(m.gpus.empty());
    for (std::size_t i = 1; i < m.gpus.size(); ++i)
      EXPECT_LT(m.gpus[i - 1].pci_bus_id, m.gpus[i].pci_bus_id);
    ++count;
  }
  EXPECT_GE(count, 10);
}

TEST(Machine, DgxH100) {
  SimMachine m = load_machine(find_machine("dgx-h100", {kMachines}));
  ASSERT_EQ(m.gpus.size(), 8u);
  EXPECT_EQ(m.gpus[0].memory_total, 80ull << 30);
  EXPECT_EQ(m.gpus[0].cpus.size(), 112u);
  EXPECT_EQ(m.gpus[7].numa_node, 1);
  EXPECT_EQ(m.gpus[3].pci_bus_id, "00000000:5D:00.0");
  EXPECT_EQ(fastest_first_order(m), (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
}

TEST(Machine, MixedOrderDiffersFromPci) {
  SimMachine m = load_machine(find_machine("workstation-mixed", {kMachines}));
  // 4090 (8.9, 128 SMs) first, then A6000 (8.6, 84), then A4000 (8.6, 48).
  EXPECT_EQ(fastest_first_order(m), (std::vector<int>{1, 2, 0}));
  EXPECT_DOUBLE_EQ(m.gpus[1].speed, derived_speed(8, 9, 128));
}

TEST(Machine, SortsByPciAndHonoursSpeed) {
  std::string text = std::string(kHead) + kGpu;
  std::string second = kGpu;
  second.replace(second.find("81:00.0"), 7, "05:00.0");
  second.replace(second.find("55555555"), 8, "66666666");
  text += second + "speed = 1\n";
  SimMachine m = load_machine(write_temp("sort", text));
  ASSERT_EQ(m.gpus.size(), 2u);
  EXPECT_EQ(m.gpus[0].pci_bus_id, "00000000:05:00.0");
  EXPECT_TRUE(m.gpus[0].speed_given);
  EXPECT_EQ(fastest_first_order(m), (std::vector<int>{1, 0}));
}

TEST(Machine, ErrorsNameFileLineAndKey) {
  std::string gpu = kGpu;
  std::string no_sm = gpu;
  no_sm.erase(no_sm.find("sm_count = 10\n"), 14);
  std::string msg = load_error(std::string(kHead) + no_sm);
  EXPECT_NE(msg.find("gpusel_machine_test_bad.toml:5:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'sm_count'"), std::string::npos) << msg;

  msg = load_error(std::string(kHead) + gpu + "bogus = = 1\n");
  EXPECT_NE(msg.find(":17:"), std::string::npos) << msg;

  std::string bad_uuid = gpu;
  bad_uuid.replace(bad_uuid.find("GPU-1111"), 8, "GPU-xyz1");
  msg = load_error(std::string(kHead) + bad_uuid);
  EXPECT_NE(msg.find(":6:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'uuid'"), std::string::npos) << msg;

  msg = load_error(std::string("name = \"t\"\ncuda_driver_version = 1\n") + gpu);
  EXPECT_NE(msg.find("'driver_version'"), std::string::npos) << msg;

  std::string bad_size = gpu;
  bad_size.replace(bad_size.find("\"16GiB\""), 7, "\"lots\"");
  msg = load_error(std::string(kHead) + bad_size);
  EXPECT_NE(msg.find("'memory_total'"), std::string::npos) << msg;

  msg = load_error(std::string(kHead) + gpu + gpu);
  EXPECT_NE(msg.find("two GPUs share"), std::string::npos) << msg;

  msg = load_error(std::string(kHead) + "[faults]\nnvml = \"sometimes\"\n" + gpu);
  EXPECT_NE(msg.find("'faults.nvml'"), std::string::npos) << msg;

  msg = load_error(kHead);
  EXPECT_NE(msg.find("'gpu'"), std::string::npos) << msg;
}

TEST(Machine, FindMachine) {
  EXPECT_EQ(find_machine("dgx-h100", {"/nonexistent", kMachines}), kMachines + "/dgx-h100.toml");
  EXPECT_EQ(find_machine("./x.toml", {kMachines}), "./x.toml");
  try {
    find_machine("dgx-h1000", {kMachines});
    ADD_FAILURE();
  } catch (const MachineError& e) {
    EXPECT_NE(std::string(e.what()).find("gpusel sim list"), std::string::npos);
  }
}
