// The one analysis of a worker's placement (analyse_placement), which bind and doctor share: the
// cases of issue 29, on models built by hand.
#include <gtest/gtest.h>

#include "fixtures.hpp"
#include "gpusel_detail.hpp"

namespace gpusel {
namespace {

using detail::PlacementModel;

// Eight identical GPUs, nvidia-smi order.
std::vector<GpuInfo> eight() {
  std::vector<GpuInfo> out;
  for (unsigned i = 0; i < 8; ++i)
    out.push_back(test::make_gpu(i, "GPU-0000000" + std::to_string(i) + "-aaaa-bbbb-cccc-dddd"));
  return out;
}

std::vector<std::string> uuids(const std::vector<GpuInfo>& gpus, std::vector<unsigned> which) {
  std::vector<std::string> out;
  for (unsigned i : which) out.push_back(gpus[i].uuid);
  return out;
}

void rank(PlacementModel& m, const char* variable, const char* value, const char* size_value) {
  detail::RankCandidate c;
  c.variable = variable;
  c.value = value;
  if (size_value != nullptr) c.size_value = std::string(size_value);
  m.launchers.candidates.push_back(c);
}

PlacementModel on(const std::vector<GpuInfo>& gpus, std::vector<unsigned> visible) {
  PlacementModel m;
  m.nvml = gpus;
  m.visible = uuids(gpus, std::move(visible));
  return m;
}

TEST(Placement, APresetSlurmGaveIsFine) {
  // CUDA_VISIBLE_DEVICES=2 SLURM_JOB_ID=1 SLURM_JOB_GPUS=2: the batch step's one GPU.
  PlacementModel m = on(eight(), {2});
  m.cuda.visible_devices = "2";
  m.vars = {{"SLURM_JOB_ID", "1"}, {"SLURM_JOB_GPUS", "2"}};
  const auto v = detail::analyse_placement(m);
  EXPECT_TRUE(v.problems.empty()) << v.problems.front().message;
  EXPECT_TRUE(v.warnings.empty());
  EXPECT_EQ(v.uuid, eight()[2].uuid);
  EXPECT_EQ(v.source, AssignmentSource::Single);
}

TEST(Placement, MoreRanksThanThePresetShows) {
  PlacementModel m = on(eight(), {0, 1});
  m.cuda.visible_devices = "0,1";
  rank(m, "LOCAL_RANK", "1", "4");
  const auto v = detail::analyse_placement(m);
  ASSERT_EQ(v.problems.size(), 1u);
  EXPECT_EQ(v.problems[0].id, "ranks-share-gpus");
  EXPECT_FALSE(v.ordinal);
}

TEST(Placement, PerTaskGpusBindTheListedOneTheTaskSees) {
  const auto gpus = eight();
  PlacementModel m = on(gpus, {6});
  m.cuda.visible_devices = "6";
  m.vars = {
      {"GPUSEL_GPUS", gpus[4].uuid + "," + gpus[5].uuid + "," + gpus[6].uuid + "," + gpus[7].uuid},
      {"SLURM_JOB_ID", "7"},
      {"SLURM_STEP_ID", "0"},
      {"SLURM_STEP_GPUS", "6"}};
  rank(m, "SLURM_LOCALID", "2", "4");
  m.launchers.slurm_gpus_per_task = true;
  auto v = detail::analyse_placement(m);
  EXPECT_TRUE(v.problems.empty()) << v.problems.front().message;
  EXPECT_EQ(v.uuid, gpus[6].uuid);
  EXPECT_EQ(v.source, AssignmentSource::GpuselGpus);
  // A task that sees none of them is told so, naming --gpus-per-task, not a missing rank.
  m.visible = uuids(gpus, {1});
  m.cuda.visible_devices = "1";
  m.vars["SLURM_STEP_GPUS"] = "1";
  v = detail::analyse_placement(m);
  ASSERT_EQ(v.problems.size(), 1u);
  EXPECT_EQ(v.problems[0].id, "gpusel-gpus-not-here");
  EXPECT_NE(v.problems[0].message.find("--gpus-per-task"), std::string::npos);
  EXPECT_EQ(v.problems[0].message.find("no local rank"), std::string::npos);
}

TEST(Placement, ALostGpuIsNeverReplacedByItsNeighbour) {
  // SLURM_STEP_GPUS=1,2 and GPU 2 fell off the bus: CUDA reads "1,2" over 0,1,3, so task 1's
  // second device is nvidia-smi 3.
  auto gpus = test::four_same();
  gpus[2].failure = "GPU is lost";
  gpus[2].problem = Problem{ErrorCode::GpuLost, "nvmlDeviceGetHandleByIndex_v2", 15};
  gpus[2].uuid.clear();
  PlacementModel m = on(gpus, {1, 3});
  m.cuda.visible_devices = "1,2";
  m.cuda.device_order = "PCI_BUS_ID";
  m.vars = {{"SLURM_JOB_ID", "7"}, {"SLURM_STEP_ID", "0"}, {"SLURM_STEP_GPUS", "1,2"}};
  rank(m, "SLURM_LOCALID", "1", "2");
  auto v = detail::analyse_placement(m);
  ASSERT_EQ(v.problems.size(), 1u);
  EXPECT_EQ(v.problems[0].id, "slurm-gpu-lost");
  EXPECT_NE(v.problems[0].message.find("nvidia-smi 3"), std::string::npos) << v.problems[0].message;
  m.launchers.candidates.clear();
  rank(m, "SLURM_LOCALID", "0", "2");
  v = detail::analyse_placement(m);
  EXPECT_TRUE(v.problems.empty());
  EXPECT_EQ(v.uuid, gpus[1].uuid);
}

TEST(Placement, VariablesCarriedFromAnotherNodeAreCheckedAgainstThisNode) {
  // mpiexec.hydra carried the batch host's CUDA_VISIBLE_DEVICES=2,3,4,5 to a node whose step
  // (the proxy Slurm started there) holds GPUs 1-4.
  const auto gpus = eight();
  PlacementModel m = on(gpus, {2, 3, 4, 5});
  m.cuda.visible_devices = "2,3,4,5";
  m.vars = {{"SLURM_JOB_ID", "7"}, {"SLURM_JOB_GPUS", "2,3,4,5"}, {"SLURMD_NODENAME", "n1"}};
  m.slurm_task = std::map<std::string, std::string>{{"SLURM_JOB_ID", "7"},
                                                    {"SLURM_STEP_ID", "0"},
                                                    {"SLURM_STEP_GPUS", "1,2,3,4"},
                                                    {"CUDA_VISIBLE_DEVICES", "1,2,3,4"},
                                                    {"SLURMD_NODENAME", "n2"}};
  rank(m, "MPI_LOCALRANKID", "3", "4");
  auto v = detail::analyse_placement(m);
  ASSERT_EQ(v.problems.size(), 1u);
  EXPECT_EQ(v.problems[0].id, "slurm-carried");
  EXPECT_NE(v.problems[0].message.find("\"n1\""), std::string::npos);
  EXPECT_NE(v.problems[0].message.find("nvidia-smi 5"), std::string::npos);
  EXPECT_EQ(v.problems[0].remedy.find("PCI_BUS_ID"), std::string::npos);
}

TEST(Placement, AVisibleListAWrapperSetIsBlamedOnTheWrapper) {
  // sbatch gave GPUs 2,3; an MPI wrapper set CUDA_VISIBLE_DEVICES from its local rank.
  PlacementModel m = on(eight(), {0});
  m.cuda.visible_devices = "0";
  m.vars = {{"SLURM_JOB_ID", "7"}, {"SLURM_JOB_GPUS", "2,3"}};
  m.slurm_task = std::map<std::string, std::string>{
      {"SLURM_JOB_ID", "7"}, {"SLURM_JOB_GPUS", "2,3"}, {"CUDA_VISIBLE_DEVICES", "2,3"}};
  const auto v = detail::analyse_placement(m);
  ASSERT_EQ(v.problems.size(), 1u);
  EXPECT_EQ(v.problems[0].id, "slurm-visible-changed");
  EXPECT_NE(v.problems[0].message.find("not what Slurm set (\"2,3\")"), std::string::npos);
  EXPECT_NE(v.problems[0].message.find("mpirun -x CUDA_VISIBLE_DEVICES"), std::string::npos);
  EXPECT_NE(v.problems[0].remedy.find("mpirun's -x CUDA_VISIBLE_DEVICES"), std::string::npos);
  EXPECT_EQ(v.problems[0].remedy.find("PCI_BUS_ID"), std::string::npos);
}

TEST(Placement, MixedModelsUnderFastestFirstBlameTheOrder) {
  const auto gpus = test::three_mixed();
  PlacementModel m = on(gpus, {1});  // CUDA's device 0 under FASTEST_FIRST: the 4090
  m.cuda.visible_devices = "0";
  m.vars = {{"SLURM_JOB_ID", "7"}, {"SLURM_STEP_ID", "0"}, {"SLURM_STEP_GPUS", "0"}};
  const auto v = detail::analyse_placement(m);
  ASSERT_EQ(v.problems.size(), 1u);
  EXPECT_EQ(v.problems[0].id, "slurm-gpu-order");
  EXPECT_NE(v.problems[0].remedy.find("PCI_BUS_ID"), std::string::npos);
}

TEST(Placement, AnotherNodesUuidIsNamedAsSuch) {
  const auto gpus = eight();
  PlacementModel m = on(gpus, {0, 1, 2, 3, 4, 5, 6, 7});
  m.vars = {{"GPUSEL_GPU", "GPU-b2000002-1111-2222-3333-444455556666"}};
  const auto v = detail::analyse_placement(m);
  ASSERT_EQ(v.problems.size(), 1u);
  EXPECT_EQ(v.problems[0].id, "gpu-on-another-node");
  EXPECT_NE(v.problems[0].remedy.find("resolve GPUSEL_GPUS on each node"), std::string::npos);
  EXPECT_EQ(v.problems[0].message.find("CUDA_VISIBLE_DEVICES"), std::string::npos);
}

TEST(Placement, ATruncatedPresetIsRefused) {
  PlacementModel m = on(eight(), {0});
  m.cuda.visible_devices = "0,9";
  const auto v = detail::analyse_placement(m);
  ASSERT_EQ(v.problems.size(), 1u);
  EXPECT_EQ(v.problems[0].id, "visible-truncated");
}

}  // namespace
}  // namespace gpusel
