#include <gtest/gtest.h>

#include <set>

#include "fixtures.hpp"
#include "gpusel/error.hpp"
#include "gpusel/resolution.hpp"
#include "gpusel/spec.hpp"
#include "gpusel_detail.hpp"

using namespace gpusel;
using gpusel::test::four_same;
using gpusel::test::three_mixed;
using gpusel::test::with_mig;
using Uuids = std::vector<std::string>;

namespace {

std::optional<std::string> opt(const char* s) {
  return s ? std::optional<std::string>(s) : std::nullopt;
}

Uuids resolve(const char* spec, const std::vector<GpuInfo>& gpus, const char* cvd = nullptr,
              const char* order = nullptr, const std::vector<int>* cuda_order = nullptr) {
  return resolve_entries(read_gpu_request(spec, false).gpus, gpus, CudaEnv{opt(cvd), opt(order)},
                         cuda_order);
}

// The message of the BadInput error, checked to contain every piece in `must`.
void expect_error(const std::vector<std::string>& must, const char* spec,
                  const std::vector<GpuInfo>& gpus, const char* cvd = nullptr,
                  const char* order = nullptr) {
  try {
    Uuids got = resolve(spec, gpus, cvd, order);
    ADD_FAILURE() << spec << " resolved to " << detail::join_entries(got);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::BadInput);
    const std::string msg = e.what();
    for (const std::string& piece : must)
      EXPECT_NE(msg.find(piece), std::string::npos) << "missing [" << piece << "] in: " << msg;
  }
}

const auto kGpus = four_same();
const std::string U0 = kGpus[0].uuid, U1 = kGpus[1].uuid, U2 = kGpus[2].uuid, U3 = kGpus[3].uuid;

}  // namespace

TEST(Resolve, NoPresetIndicesAreNvidiaSmiIndices) {
  EXPECT_EQ(resolve("0,3", kGpus), (Uuids{U0, U3}));
  EXPECT_EQ(resolve("2,1,0", kGpus), (Uuids{U2, U1, U0}));
  EXPECT_EQ(resolve("003", kGpus), (Uuids{U3}));
  expect_error({"\"4\"", "out of range", "4 GPUs", "indices 0 to 3", "gpusel list"}, "4", kGpus);
  expect_error({"\"99999999999\"", "out of range"}, "99999999999", kGpus);
}

TEST(Resolve, NoPresetUuidPrefixes) {
  EXPECT_EQ(resolve("GPU-cc", kGpus), (Uuids{U2}));
  EXPECT_EQ(resolve("gpu-AA22,GPU-dd44dddd-0000-0000-0000-000000000003", kGpus), (Uuids{U1, U3}));
  expect_error({"\"GPU-aa\"", "prefix of 2 GPUs", U0, U1, "enough characters"}, "GPU-aa", kGpus);
  expect_error({"\"GPU-ff\"", "matches no GPU", "typo", "gpusel list"}, "GPU-ff", kGpus);
  expect_error({"both name GPU " + U2}, "GPU-cc,GPU-cc33", kGpus);
}

TEST(Resolve, PresetIndicesCountWithinThePreset) {
  EXPECT_EQ(resolve("0", kGpus, "2,3"), (Uuids{U2}));
  EXPECT_EQ(resolve("1,0", kGpus, "2,3"), (Uuids{U3, U2}));
  expect_error({"\"2\"", "CUDA_VISIBLE_DEVICES=\"2,3\"", "exposes 2 devices", "count within"}, "2",
               kGpus, "2,3");
  // Deviation 1: the raw list is not indexed; the driver stops at -1, so only 0 and 2 exist.
  EXPECT_EQ(resolve("1", kGpus, "0,2,-1,1"), (Uuids{U2}));
  expect_error({"\"2\"", "exposes 2 devices", "stops reading at the invalid entry \"-1\""}, "2",
               kGpus, "0,2,-1,1");
  expect_error({"exposes 0 devices"}, "0", kGpus, "");
}

TEST(Resolve, PresetUuids) {
  const char* preset = "GPU-cc33,GPU-aa11aaaa-0000-0000-0000-000000000000";
  EXPECT_EQ(resolve("0", kGpus, preset), (Uuids{U2}));
  EXPECT_EQ(resolve("1", kGpus, preset), (Uuids{U0}));
  // Both directions of prefix: a short --gpu entry, and a --gpu entry longer than the preset's.
  EXPECT_EQ(resolve("GPU-aa", kGpus, preset), (Uuids{U0}));
  EXPECT_EQ(resolve("GPU-cc33cccc-0000", kGpus, preset), (Uuids{U2}));
  expect_error({"\"GPU-dd\"", "not one of the GPUs", preset, "GPU 3 exists, outside that list"},
               "GPU-dd", kGpus, preset);
  expect_error({"\"GPU-ee\"", "matches no GPU on this machine"}, "GPU-ee", kGpus, preset);
  // A UUID the driver never reads (after an invalid entry) is outside the quota.
  expect_error({"GPU 2 exists", "invalid entry \"GPU-zz\""}, "GPU-cc", kGpus,
               "GPU-dd,GPU-zz,GPU-cc");
  // A --gpu longer than the preset's entry must still match the GPU.
  expect_error({"not one of the GPUs"}, "GPU-cc39", kGpus, "GPU-cc");
}

TEST(Resolve, PresetKindsThatCannotServe) {
  // A UUID under a preset of indices is placed where the order is known (one model, PCI_BUS_ID
  // or a probed order), and must be one of the GPUs the preset exposes.
  EXPECT_EQ(resolve("GPU-cc", kGpus, "1,2"), (Uuids{kGpus[2].uuid}));
  EXPECT_EQ(resolve("GPU-dd,GPU-aa2", kGpus, "3,1"), (Uuids{kGpus[3].uuid, kGpus[1].uuid}));
  expect_error({"GPU-dd", "not one of the GPUs", "CUDA_VISIBLE_DEVICES=\"1,2\"", "GPU 3 exists"},
               "GPU-dd", kGpus, "1,2");
  const auto mixed = three_mixed();
  expect_error({"is a UUID", "lists GPUs by index", "different models", "PCI_BUS_ID"}, "GPU-2c",
               mixed, "1,2");
  EXPECT_EQ(resolve("GPU-2c", mixed, "1,2", "PCI_BUS_ID"), (Uuids{mixed[2].uuid}));
  expect_error({"selects MIG devices", "CUDA_VISIBLE_DEVICES=\"MIG-1111\""}, "0", with_mig(),
               "MIG-1111");
  expect_error({"names one GPU twice", "no device at all"}, "0", kGpus, "1,01");
}

TEST(Resolve, MixedMachineNeedsAKnownOrder) {
  const auto gpus = three_mixed();
  // Without a preset, indices are nvidia-smi indices: no order question.
  EXPECT_EQ(resolve("1", gpus), (Uuids{gpus[1].uuid}));
  expect_error(
      {"different models", "CUDA_VISIBLE_DEVICES=\"0\"", "UUIDs", "CUDA_DEVICE_ORDER=PCI_BUS_ID"},
      "0", gpus, "0");
  EXPECT_EQ(resolve("0", gpus, "0", "PCI_BUS_ID"), (Uuids{gpus[0].uuid}));
  const std::vector<int> cuda_order{1, 2, 0};
  EXPECT_EQ(resolve("0,1", gpus, "2,0", nullptr, &cuda_order), (Uuids{gpus[0].uuid, gpus[1].uuid}));
  // UUIDs never depend on the order.
  EXPECT_EQ(resolve("GPU-2c", gpus, "GPU-2c,GPU-0a"), (Uuids{gpus[2].uuid}));
}

TEST(Resolve, MigEnabledGpusAreRefused) {
  const auto gpus = with_mig();
  expect_error({"\"0\"", "MIG enabled", gpus[0].uuid}, "0", gpus);
  expect_error({"MIG enabled"}, "GPU-e0", gpus);
  expect_error({"MIG enabled"}, "GPU-e0", gpus, "GPU-e0,GPU-f1");
  EXPECT_EQ(resolve("1", gpus), (Uuids{gpus[1].uuid}));
  // Under a preset naming GPU 0 by index, CUDA sees its MIG devices first.
  expect_error({"MIG enabled"}, "0", gpus, "0,1");
  EXPECT_EQ(resolve("2", gpus, "0,1"), (Uuids{gpus[1].uuid}));
}

TEST(Resolve, QuoteValue) {
  EXPECT_EQ(detail::quote_value("a\"b\\c\n"), "\"a\\\"b\\\\c\\x0a\"");
  EXPECT_EQ(detail::describe_preset(CudaEnv{}), "CUDA_VISIBLE_DEVICES (unset)");
}

TEST(Resolve, FailedGpusKeepTheirIndexAndAreRefused) {
  auto gpus = four_same();
  gpus[2].uuid.clear();
  gpus[2].failure = "lost: nvmlDeviceGetHandleByIndex_v2 failed: NVML error 15 (GPU is lost)";
  gpus[2].problem = Problem{ErrorCode::GpuLost, "nvmlDeviceGetHandleByIndex_v2", 15};
  // nvidia-smi indices keep their meaning around the failed GPU.
  EXPECT_EQ(resolve("3,1", gpus), (Uuids{gpus[3].uuid, gpus[1].uuid}));
  expect_error({"\"2\"", "GPU 2", "lost", "pick another GPU"}, "2", gpus);
  // CUDA does not enumerate it: under a preset of indices, positions count over the others.
  EXPECT_EQ(resolve("2", gpus, "0,1,2", "PCI_BUS_ID"), (Uuids{gpus[3].uuid}));
  EXPECT_EQ(resolve("GPU-dd", gpus, "GPU-dd"), (Uuids{gpus[3].uuid}));
}

TEST(Resolve, OutOfRangeUnderAPresetNamesItsGpus) {
  expect_error({"\"2\"", "exposes 2 devices", "nvidia-smi 3,1"}, "2", kGpus, "3,1");
}

// Each refusal as data: what it is about and the values it names, so that a caller decides from
// them and never from the message's words.
namespace {

Problem refusal(const char* spec, const std::vector<GpuInfo>& gpus, const char* cvd = nullptr) {
  try {
    resolve(spec, gpus, cvd);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::BadInput) << spec;
    return e.problem();
  }
  ADD_FAILURE() << spec << " resolved";
  return {};
}

std::string field(const Problem& p, const char* name) {
  const std::string* value = p.field(name);
  return value != nullptr ? *value : "(none)";
}

}  // namespace

TEST(ResolveData, EachRefusalSaysWhatItIsAbout) {
  struct Case {
    const char* spec;
    const char* cvd;
    Subject subject;
    const char* reason;
    const char* entry;  // the field naming the value: "entry" for an entry, else "request"
  };
  const Case cases[] = {
      {"9", nullptr, Subject::GpuEntry, "out-of-range", "9"},
      {"GPU-ffff", nullptr, Subject::GpuEntry, "no-match", "GPU-ffff"},
      {"GPU-", nullptr, Subject::GpuEntry, "ambiguous-prefix", "GPU-"},
      {"2", "0,1", Subject::GpuEntry, "out-of-range", "2"},
      {"0,x", nullptr, Subject::GpuEntry, "unreadable", "x"},
      {"0,0", nullptr, Subject::GpuRequest, "same-gpu-twice", "0,0"},
      {"0,GPU-1", nullptr, Subject::GpuRequest, "mixed-kinds", "0,GPU-1"},
      {"", nullptr, Subject::GpuRequest, "empty", ""},
      {"0", "1,1", Subject::VisibleDevices, "duplicate", nullptr},
  };
  for (const Case& c : cases) {
    const Problem p = refusal(c.spec, kGpus, c.cvd);
    EXPECT_EQ(p.subject, c.subject) << c.spec << ": " << subject_name(p.subject);
    EXPECT_EQ(field(p, "reason"), c.reason) << c.spec;
    if (c.subject == Subject::GpuEntry) {
      EXPECT_EQ(field(p, "entry"), c.entry) << c.spec;
    }
    if (c.subject == Subject::GpuRequest) {
      EXPECT_EQ(field(p, "request"), c.entry) << c.spec;
    }
    if (c.subject == Subject::VisibleDevices) {
      EXPECT_EQ(field(p, "variable"), "CUDA_VISIBLE_DEVICES");
      EXPECT_EQ(field(p, "value"), c.cvd);
    }
  }
  // A GPU the entry names is named by UUID and index.
  const Problem outside = refusal(U1.substr(0, 12).c_str(), kGpus, "0,2");
  EXPECT_EQ(field(outside, "reason"), "outside-preset");
  EXPECT_EQ(field(outside, "gpu"), U1);
  EXPECT_EQ(field(outside, "index"), "1");
  const Problem twice = refusal(("1," + U1.substr(0, 12)).c_str(), kGpus);
  EXPECT_EQ(twice.subject, Subject::GpuRequest);  // mixed kinds, before resolution
}

TEST(ResolveData, SubjectsHaveNamesOfTheirOwn) {
  std::set<std::string> names;
  for (int s = 0; s <= static_cast<int>(Subject::Probe); ++s) {
    const std::string name = subject_name(static_cast<Subject>(s));
    EXPECT_NE(name, "unknown") << s;
    EXPECT_TRUE(names.insert(name).second) << name << " named twice";
  }
  // An error given a subject and no code takes its code from its kind and keeps the rest.
  const Error e = bad_input("x", about(Subject::Lease, {{"path", "/p"}}));
  EXPECT_EQ(e.code(), ErrorCode::BadInput);
  EXPECT_EQ(e.problem().subject, Subject::Lease);
  EXPECT_EQ(*e.problem().field("path"), "/p");
}
