// The differential test of issue 10: gpusel's model of CUDA_VISIBLE_DEVICES / CUDA_DEVICE_ORDER
// (src/core/visible.cpp) against the simulated driver's own transcription of the rules
// (sim/cuda_rules.hpp), over many generated values on several bundled machines. Any difference
// fails, naming the machine, the variables and both answers.
#include <gtest/gtest.h>

#include <random>
#include <sstream>

#include "cuda_rules.hpp"
#include "gpusel/visible.hpp"
#include "machine.hpp"

namespace {

using gpusel::sim::SimMachine;
namespace rules = gpusel::sim::rules;

const std::string kMachines = std::string(GPUSEL_SOURCE_DIR) + "/sim/machines";

std::vector<rules::Gpu> oracle_gpus(const SimMachine& m) {
  std::vector<rules::Gpu> out;
  for (const auto& g : m.gpus) {
    rules::Gpu r;
    r.uuid = g.uuid;
    r.speed = g.speed;
    r.lost = g.lost;
    r.mig_enabled = g.mig_enabled;
    for (const auto& mig : g.migs)
      r.migs.push_back({mig.uuid, mig.gpu_instance, mig.compute_instance});
    out.push_back(r);
  }
  return out;
}

// The GPUs as gpusel reads them from NVML: a lost GPU keeps its index and has no UUID.
std::vector<gpusel::GpuInfo> model_gpus(const SimMachine& m) {
  std::vector<gpusel::GpuInfo> out;
  for (std::size_t i = 0; i < m.gpus.size(); ++i) {
    const auto& g = m.gpus[i];
    gpusel::GpuInfo info;
    info.index = static_cast<unsigned>(i);
    info.name = g.name;
    info.pci_bus_id = g.pci_bus_id;
    if (g.lost) {
      info.failure = "lost: GPU is lost";
      info.problem =
          gpusel::Problem{gpusel::ErrorCode::GpuLost, "nvmlDeviceGetHandleByIndex_v2", 15};
    } else {
      info.uuid = g.uuid;
      info.cc_major = g.cc_major;
      info.cc_minor = g.cc_minor;
      info.mig_enabled = g.mig_enabled;
      for (const auto& mig : g.migs)
        info.migs.push_back(
            {mig.uuid, mig.gpu_instance, mig.compute_instance, mig.name, mig.memory_total});
    }
    out.push_back(std::move(info));
  }
  return out;
}

std::string show(const std::vector<rules::Device>& devices) {
  std::ostringstream s;
  s << "[";
  for (const auto& d : devices)
    s << " " << d.gpu << (d.mig >= 0 ? "/" + std::to_string(d.mig) : "");
  s << " ]";
  return s.str();
}

std::string quoted(const std::optional<std::string>& v) {
  if (!v) return "(unset)";
  std::string out = "\"";
  for (char c : *v) {
    if (c == '\t') {
      out += "\\t";
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// Entries of every kind the rules speak of, for one machine.
std::vector<std::string> entry_pool(const SimMachine& m, std::mt19937& rng) {
  std::vector<std::string> pool = {"0",        "1",   "2",    "3",    "7",
                                   "8",        "-0",  "+1",   "+0",   " 2",
                                   "1 ",       "\t1", "3abc", "-1",   "",
                                   " ",        "x",   "1-3",  "0x1",  "99999999999999999999",
                                   "- 1",      "+",   "GPU-", "MIG-", "GPU-zz",
                                   "MIG-GPU-", "00",  "01"};
  auto prefixes = [&](const std::string& uuid) {
    std::uniform_int_distribution<std::size_t> len(4, uuid.size());
    pool.push_back(uuid);
    pool.push_back(uuid.substr(0, 5));
    pool.push_back(uuid.substr(0, len(rng)));
    pool.push_back(uuid.substr(0, len(rng)));
    std::string upper = uuid;
    for (std::size_t i = 4; i < upper.size(); ++i)
      upper[i] = static_cast<char>(std::toupper(static_cast<unsigned char>(upper[i])));
    pool.push_back(upper.substr(0, len(rng)));
    pool.push_back(" " + uuid);
    pool.push_back(uuid + " ");
    pool.push_back(uuid + "x");
    // [OPEN] prefixes not written GPU- / MIG-: both read them as no UUID.
    std::string lower = uuid;
    for (std::size_t i = 0; i < 3; ++i)
      lower[i] = static_cast<char>(std::tolower(static_cast<unsigned char>(lower[i])));
    pool.push_back(lower);
    pool.push_back(lower.substr(0, len(rng)));
    pool.push_back(lower.substr(0, 1) + uuid.substr(1));
  };
  for (const auto& g : m.gpus) {
    prefixes(g.uuid);
    for (const auto& mig : g.migs) {
      prefixes(mig.uuid);
      pool.push_back("MIG-" + g.uuid + "/" + std::to_string(mig.gpu_instance) + "/" +
                     std::to_string(mig.compute_instance));
    }
  }
  return pool;
}

void compare_on(const std::string& name, int values) {
  const SimMachine m = gpusel::sim::load_machine(kMachines + "/" + name + ".toml");
  const auto ogpus = oracle_gpus(m);
  const auto mgpus = model_gpus(m);
  std::mt19937 rng(12345u + static_cast<unsigned>(name.size()));
  const auto pool = entry_pool(m, rng);
  std::uniform_int_distribution<std::size_t> pick(0, pool.size() - 1);
  std::uniform_int_distribution<int> length(1, 5);
  const std::vector<std::optional<std::string>> orders = {
      std::nullopt, "PCI_BUS_ID", "FASTEST_FIRST", "pci_bus_id", "bogus", ""};
  int differences = 0;
  for (int i = 0; i < values && differences < 10; ++i) {
    std::optional<std::string> visible;
    if (i % 97 != 0) {  // now and then unset
      std::string v;
      const int n = length(rng);
      std::string previous;
      for (int k = 0; k < n; ++k) {
        // Duplicates on purpose now and then.
        std::string entry = (k > 0 && rng() % 6 == 0) ? previous : pool[pick(rng)];
        v += (k > 0 ? "," : "") + entry;
        previous = entry;
      }
      visible = v;
    }
    const auto& order = orders[static_cast<std::size_t>(i) % orders.size()];
    for (bool legacy : {false, true}) {
      const auto want = rules::enumerate(ogpus, visible, order, legacy);
      // CUDA's enumeration order before filtering, as the driver itself gives it.
      std::vector<rules::Gpu> plain = ogpus;
      for (auto& g : plain) g.mig_enabled = false;
      std::vector<int> cuda_order;
      for (const auto& d : rules::enumerate(plain, std::nullopt, order, false))
        cuda_order.push_back(d.gpu);
      const gpusel::CudaEnv env{visible, order};
      const auto vs = gpusel::model_visible(
          mgpus, env, &cuda_order, legacy ? gpusel::MigRule::Legacy : gpusel::MigRule::R570);
      std::vector<rules::Device> got;
      for (const auto& d : vs.devices) got.push_back({d.gpu, d.mig});
      if (!vs.known || got != want) {
        ++differences;
        ADD_FAILURE() << name << ": CUDA_VISIBLE_DEVICES=" << quoted(visible)
                      << " CUDA_DEVICE_ORDER=" << quoted(order)
                      << (legacy ? " (legacy MIG rule)" : "") << ": the driver's rules give "
                      << show(want) << ", gpusel's model gives "
                      << (vs.known ? show(got) : "unknown: " + vs.unknown_reason);
      }
    }
  }
}

TEST(Oracle, DgxH100) {
  compare_on("dgx-h100", 4000);
}
TEST(Oracle, WorkstationMixed) {
  compare_on("workstation-mixed", 4000);
}
TEST(Oracle, MigA100) {
  compare_on("mig-a100", 4000);
}
TEST(Oracle, LostGpu) {
  compare_on("lost-gpu", 3000);
}
TEST(Oracle, SingleL4) {
  compare_on("single-l4", 2000);
}

// The transcription itself, on the rules' own examples.
TEST(Oracle, RulesExamples) {
  const SimMachine m = gpusel::sim::load_machine(kMachines + "/dgx-h100.toml");
  const auto gpus = oracle_gpus(m);
  auto run = [&](const char* v) {
    std::vector<int> out;
    for (const auto& d : rules::enumerate(gpus, std::string(v), std::nullopt, false))
      out.push_back(d.gpu);
    return out;
  };
  EXPECT_EQ(run("2,1"), (std::vector<int>{2, 1}));
  EXPECT_EQ(run("0,2,-1,1"), (std::vector<int>{0, 2}));
  EXPECT_EQ(run("3abc"), (std::vector<int>{3}));
  EXPECT_EQ(run("-0,+2"), (std::vector<int>{0, 2}));
  EXPECT_EQ(run("1,0,1"), (std::vector<int>{}));
  EXPECT_EQ(run(""), (std::vector<int>{}));
  EXPECT_EQ(run("0-3"), (std::vector<int>{0}));
  EXPECT_EQ(run("1,GPU-0"), (std::vector<int>{1}));
}

}  // namespace
