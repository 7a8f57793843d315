#include <gtest/gtest.h>

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
