// Table-driven tests of the CUDA_VISIBLE_DEVICES / CUDA_DEVICE_ORDER model, one row per rule of
// docs/driver-rules.md.
#include <gtest/gtest.h>

#include "fixtures.hpp"
#include "gpusel/visible.hpp"
#include "gpusel_detail.hpp"

using namespace gpusel;
using gpusel::test::four_same;
using gpusel::test::three_mixed;
using gpusel::test::with_mig;

namespace {

std::optional<std::string> opt(const char* s) {
  return s ? std::optional<std::string>(s) : std::nullopt;
}

// Whole-GPU positions of the visible devices, in ordinal order.
std::vector<int> whole(const VisibleSet& vs) {
  std::vector<int> out;
  for (const auto& d : vs.devices) out.push_back(d.mig < 0 ? d.gpu : 100 * (d.gpu + 1) + d.mig);
  return out;
}

struct Row {
  const char* name;
  const char* cvd;    // nullptr: unset
  const char* order;  // nullptr: unset
  std::vector<int> expected;
  const char* invalid = nullptr;  // the entry that ended the list
  bool duplicate = false;
};

}  // namespace

TEST(Visible, IntegerEntriesOnIdenticalGpus) {
  const auto gpus = four_same();
  const Row rows[] = {
      {"unset: every device in order", nullptr, nullptr, {0, 1, 2, 3}},
      {"set but empty: none", "", nullptr, {}, ""},
      {"list order gives the ordinals", "2,1", nullptr, {2, 1}},
      {"first invalid entry ends the list", "0,2,-1,1", nullptr, {0, 2}, "-1"},
      {"out of range is invalid", "1,4,2", nullptr, {1}, "4"},
      {"leading blanks are skipped", " 1,\t2", nullptr, {1, 2}},
      {"trailing text is ignored", "3abc,0x1", nullptr, {3, 0}},
      {"plus sign accepted", "+2", nullptr, {2}},
      {"minus zero reads as zero", "-0", nullptr, {0}},
      {"no digits is invalid", "a,1", nullptr, {}, "a"},
      {"blank entry is invalid", "1,,2", nullptr, {1}, ""},
      {"a UUID ends an integer list", "1,GPU-cc33", nullptr, {1}, "GPU-cc33"},
      {"huge numbers are invalid",
       "99999999999999999999999",
       nullptr,
       {},
       "99999999999999999999999"},
      {"ranges are not supported", "0-3", nullptr, {0}},  // strtoul reads the 0
      {"PCI_BUS_ID changes nothing here", "3,0", "PCI_BUS_ID", {3, 0}},
  };
  for (const Row& r : rows) {
    VisibleSet vs = model_visible(gpus, CudaEnv{opt(r.cvd), opt(r.order)});
    EXPECT_TRUE(vs.known) << r.name;
    EXPECT_EQ(whole(vs), r.expected) << r.name;
    EXPECT_EQ(vs.invalid_entry, opt(r.invalid)) << r.name;
    EXPECT_FALSE(vs.duplicate) << r.name;
  }
}

TEST(Visible, DuplicatesHideEverything) {
  const auto gpus = four_same();
  for (const char* cvd : {"1,1", "1,01", "2,+2", "GPU-cc,GPU-cc33", "GPU-aa11,GPU-aa11aaaa"}) {
    VisibleSet vs = model_visible(gpus, CudaEnv{opt(cvd), std::nullopt});
    EXPECT_TRUE(vs.duplicate) << cvd;
    EXPECT_TRUE(vs.devices.empty()) << cvd;
    EXPECT_TRUE(vs.known) << cvd;
  }
  // A duplicate after the first invalid entry is never read.
  VisibleSet vs = model_visible(gpus, CudaEnv{opt("1,x,1"), std::nullopt});
  EXPECT_FALSE(vs.duplicate);
  EXPECT_EQ(whole(vs), (std::vector<int>{1}));
}

TEST(Visible, UuidEntries) {
  const auto gpus = four_same();
  const Row rows[] = {
      {"full UUIDs in list order",
       "GPU-dd44dddd-0000-0000-0000-000000000003,GPU-aa11aaaa-0000-0000-0000-000000000000",
       nullptr,
       {3, 0}},
      {"unique prefixes", "GPU-cc,GPU-aa2", nullptr, {2, 1}},
      {"letter case after GPU- is ignored", "GPU-CC33", nullptr, {2}},
      // [OPEN] a prefix not written GPU- is no UUID: an invalid integer (uuid_case_problem
      // refuses it).
      {"a lower-case gpu- is no UUID", "gpu-CC33", nullptr, {}, "gpu-CC33"},
      {"nor a mixed-case one after a GPU- entry", "GPU-cc,Gpu-aa", nullptr, {2}, "Gpu-aa"},
      {"an ambiguous prefix is invalid", "GPU-cc,GPU-aa,GPU-dd", nullptr, {2}, "GPU-aa"},
      {"a prefix of nothing is invalid", "GPU-ff,GPU-cc", nullptr, {}, "GPU-ff"},
      {"an integer ends a UUID list", "GPU-dd,1", nullptr, {3}, "1"},
      {"blanks are not stripped around UUIDs", "GPU-dd, GPU-cc", nullptr, {3}, " GPU-cc"},
      {"a trailing blank spoils a UUID", "GPU-dd ", nullptr, {}, "GPU-dd "},
      {"a leading blank makes the list integers", " GPU-dd", nullptr, {}, " GPU-dd"},
      {"a MIG UUID ends a GPU UUID list", "GPU-aa1,MIG-1", nullptr, {0}, "MIG-1"},
  };
  for (const Row& r : rows) {
    VisibleSet vs = model_visible(gpus, CudaEnv{opt(r.cvd), opt(r.order)});
    EXPECT_TRUE(vs.known) << r.name;
    EXPECT_EQ(whole(vs), r.expected) << r.name;
    EXPECT_EQ(vs.invalid_entry, opt(r.invalid)) << r.name;
  }
  EXPECT_EQ(model_visible(gpus, CudaEnv{opt("GPU-cc"), std::nullopt}).mode, VisibleMode::GpuUuids);
  EXPECT_EQ(model_visible(gpus, CudaEnv{opt("MIG-cc"), std::nullopt}).mode, VisibleMode::MigUuids);
  EXPECT_EQ(model_visible(gpus, CudaEnv{opt("1"), std::nullopt}).mode, VisibleMode::Indices);
  EXPECT_EQ(model_visible(gpus, CudaEnv{std::nullopt, std::nullopt}).mode, VisibleMode::All);
}

TEST(Visible, MixedMachineOrder) {
  const auto gpus = three_mixed();
  // FASTEST_FIRST on a mixed machine: integer entries and the unset case cannot be known.
  for (const char* cvd : {static_cast<const char*>(nullptr), "0", "1,2"}) {
    for (const char* order : {static_cast<const char*>(nullptr), "FASTEST_FIRST", "fastest"}) {
      VisibleSet vs = model_visible(gpus, CudaEnv{opt(cvd), opt(order)});
      EXPECT_FALSE(vs.known) << (cvd ? cvd : "unset");
      EXPECT_TRUE(vs.devices.empty());
      EXPECT_NE(vs.unknown_reason.find("different models"), std::string::npos);
    }
  }
  // UUIDs, duplicates and the empty value do not depend on the order.
  EXPECT_EQ(whole(model_visible(gpus, CudaEnv{opt("GPU-2c,GPU-0a"), std::nullopt})),
            (std::vector<int>{2, 0}));
  EXPECT_TRUE(model_visible(gpus, CudaEnv{opt("1,1"), std::nullopt}).known);
  EXPECT_TRUE(model_visible(gpus, CudaEnv{opt(""), std::nullopt}).known);
  // PCI_BUS_ID makes integers nvidia-smi indices.
  EXPECT_EQ(whole(model_visible(gpus, CudaEnv{std::nullopt, opt("PCI_BUS_ID")})),
            (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(whole(model_visible(gpus, CudaEnv{opt("2,0"), opt("PCI_BUS_ID")})),
            (std::vector<int>{2, 0}));
  // With CUDA's own order (a probe or the simulator), integers are positions in that order.
  const std::vector<int> cuda_order{1, 2, 0};
  EXPECT_EQ(whole(model_visible(gpus, CudaEnv{std::nullopt, std::nullopt}, &cuda_order)),
            (std::vector<int>{1, 2, 0}));
  EXPECT_EQ(whole(model_visible(gpus, CudaEnv{opt("0"), std::nullopt}, &cuda_order)),
            (std::vector<int>{1}));
  EXPECT_EQ(whole(model_visible(gpus, CudaEnv{opt("2,1"), std::nullopt}, &cuda_order)),
            (std::vector<int>{0, 2}));
  EXPECT_FALSE(model_visible(gpus, CudaEnv{std::nullopt, std::nullopt}, &cuda_order).pci_order);
}

TEST(Visible, UnknownOrderValueIsNoted) {
  VisibleSet vs = model_visible(four_same(), CudaEnv{std::nullopt, opt("SLOWEST")});
  ASSERT_EQ(vs.notes.size(), 1u);
  EXPECT_NE(vs.notes[0].text.find("read as FASTEST_FIRST"), std::string::npos);
  EXPECT_EQ(vs.notes[0].code, "device-order-unknown");
  EXPECT_FALSE(model_visible(three_mixed(), CudaEnv{std::nullopt, opt("pci_bus_id")}).known);
}

TEST(Visible, Mig) {
  const auto gpus = with_mig();
  // R570: each MIG device, then the whole GPUs, in order.
  EXPECT_EQ(whole(model_visible(gpus, CudaEnv{})), (std::vector<int>{100, 101, 1}));
  // Before R570: one MIG device and nothing beside it.
  EXPECT_EQ(whole(model_visible(gpus, CudaEnv{}, nullptr, MigRule::Legacy)),
            (std::vector<int>{100}));
  EXPECT_EQ(whole(model_visible(gpus, CudaEnv{opt("1"), std::nullopt}, nullptr, MigRule::Legacy)),
            (std::vector<int>{1}));
  // MIG UUIDs, by prefix, and the old MIG-GPU-<uuid>/<gi>/<ci> form.
  EXPECT_EQ(whole(model_visible(gpus, CudaEnv{opt("MIG-2222,MIG-1111"), std::nullopt})),
            (std::vector<int>{101, 100}));
  EXPECT_EQ(
      whole(model_visible(
          gpus, CudaEnv{opt("MIG-GPU-e0e0e0e0-0000-0000-0000-000000000000/4/0"), std::nullopt})),
      (std::vector<int>{101}));
  EXPECT_EQ(whole(model_visible(gpus, CudaEnv{opt("MIG-2222,MIG-1111"), std::nullopt}, nullptr,
                                MigRule::Legacy)),
            (std::vector<int>{101}));
  // Naming a MIG-enabled GPU exposes its MIG devices.
  EXPECT_EQ(whole(model_visible(gpus, CudaEnv{opt("GPU-f1,GPU-e0"), std::nullopt})),
            (std::vector<int>{1, 100, 101}));
  EXPECT_EQ(whole(model_visible(gpus, CudaEnv{opt("0"), std::nullopt})),
            (std::vector<int>{100, 101}));
  // A MIG device named twice hides everything.
  EXPECT_TRUE(model_visible(gpus, CudaEnv{opt("MIG-1111,MIG-11111111"), std::nullopt}).duplicate);
}

TEST(Visible, ReadDriverInteger) {
  EXPECT_EQ(detail::read_driver_integer("12"), 12u);
  EXPECT_EQ(detail::read_driver_integer("  7x"), 7u);
  EXPECT_EQ(detail::read_driver_integer("+3"), 3u);
  EXPECT_EQ(detail::read_driver_integer("-0"), 0u);
  EXPECT_EQ(detail::read_driver_integer("-1"), std::nullopt);
  EXPECT_EQ(detail::read_driver_integer("+"), std::nullopt);
  EXPECT_EQ(detail::read_driver_integer(""), std::nullopt);
  EXPECT_EQ(detail::read_driver_integer("x1"), std::nullopt);
  EXPECT_EQ(detail::read_driver_integer("1 2"), 1u);
  EXPECT_EQ(detail::read_driver_integer("99999999999999999999999"),
            std::numeric_limits<std::uint64_t>::max());
}

TEST(Visible, UuidCaseProblem) {
  gpusel::CudaEnv env;
  EXPECT_FALSE(gpusel::detail::uuid_case_problem(env));
  env.visible_devices = "GPU-aa,1";
  EXPECT_FALSE(gpusel::detail::uuid_case_problem(env));
  env.visible_devices = "GPU-aa,gpu-bb";
  const auto p = gpusel::detail::uuid_case_problem(env);
  ASSERT_TRUE(p);
  EXPECT_NE(p->find("\"gpu-bb\""), std::string::npos) << *p;
  EXPECT_NE(p->find("GPU-bb instead"), std::string::npos) << *p;
  env.visible_devices = "mig-12";
  EXPECT_TRUE(gpusel::detail::uuid_case_problem(env));
}
