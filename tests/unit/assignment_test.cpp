// Which launcher's local rank counts: choose_local_rank and its helpers.
#include "gpusel/assignment.hpp"

#include <gtest/gtest.h>

#include "gpusel/error.hpp"
#include "gpusel_detail.hpp"

namespace gpusel {
namespace {

detail::RankCandidate cand(const char* variable, const char* value, int distance = -1,
                           bool exact = false, std::optional<std::string> size = std::nullopt) {
  detail::RankCandidate c;
  c.variable = variable;
  c.value = value;
  c.distance = distance;
  c.distance_exact = exact;
  c.size_value = std::move(size);
  return c;
}

TEST(Assignment, NoVariableNoRank) {
  EXPECT_FALSE(detail::choose_local_rank(detail::LauncherView{}).has_value());
}

TEST(Assignment, OneVariable) {
  detail::LauncherView v;
  v.candidates = {cand("LOCAL_RANK", "3", -1, false, "4")};
  auto r = detail::choose_local_rank(v);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->variable, "LOCAL_RANK");
  EXPECT_EQ(r->rank, 3);
  EXPECT_EQ(r->local_size, 4);
  EXPECT_EQ(r->size_variable, "LOCAL_WORLD_SIZE");
}

TEST(Assignment, BatchStepSlurmLocalIdDoesNotCount) {
  detail::LauncherView v;
  v.slurm_batch_step = true;
  v.candidates = {cand("SLURM_LOCALID", "0")};
  EXPECT_FALSE(detail::choose_local_rank(v).has_value());
  // sbatch + mpirun: the MPI rank counts, even though the batch step's 0 disagrees.
  v.candidates = {cand("OMPI_COMM_WORLD_LOCAL_RANK", "2"), cand("SLURM_LOCALID", "0")};
  auto r = detail::choose_local_rank(v);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->variable, "OMPI_COMM_WORLD_LOCAL_RANK");
  EXPECT_EQ(r->rank, 2);
  ASSERT_EQ(r->ignored.size(), 1u);
  EXPECT_NE(r->ignored[0].find("batch step"), std::string::npos);
}

TEST(Assignment, GpuselRunsWorkersCountItsLocalRankAlone) {
  // srun -n2 (two tasks on the node), each task a gpusel run of two workers: this is task 1's
  // worker 0. Without the marker the launchers nest (1 x 2 + 0 = 2 of 4).
  detail::LauncherView v;
  v.candidates = {cand("LOCAL_RANK", "0", 1, true, "2"), cand("SLURM_LOCALID", "1", 2, true, "2")};
  auto nested = detail::choose_local_rank(v);
  ASSERT_TRUE(nested);
  EXPECT_EQ(nested->rank, 2);
  detail::set_aside_outer_ranks(v, "SLURM_LOCALID=1");
  auto r = detail::choose_local_rank(v);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->variable, "LOCAL_RANK");
  EXPECT_EQ(r->rank, 0);
  EXPECT_EQ(r->local_size, 2);
  EXPECT_TRUE(r->levels.empty());
  ASSERT_EQ(r->ignored.size(), 1u);
  EXPECT_NE(r->ignored[0].find("SLURM_LOCALID=\"1\""), std::string::npos) << r->ignored[0];
  EXPECT_NE(r->ignored[0].find("GPUSEL_RUN_OUTER"), std::string::npos) << r->ignored[0];
}

TEST(Assignment, ALauncherInsideGpuselRunStillCounts) {
  // gpusel run under mpirun, and an mpirun inside a worker setting Open MPI's rank again: the
  // value differs from the one run named, so it counts (and nests with run's LOCAL_RANK).
  detail::LauncherView v;
  v.candidates = {cand("OMPI_COMM_WORLD_LOCAL_RANK", "1", 1, true, "2"),
                  cand("LOCAL_RANK", "0", 3, true, "1")};
  detail::set_aside_outer_ranks(v, "OMPI_COMM_WORLD_LOCAL_RANK=0,SLURM_LOCALID=0");
  ASSERT_EQ(v.candidates.size(), 2u);
  EXPECT_TRUE(v.ignored.empty());
}

TEST(Assignment, AgreeingVariablesNeedNoDistances) {
  detail::LauncherView v;
  v.candidates = {cand("OMPI_COMM_WORLD_LOCAL_RANK", "1"), cand("LOCAL_RANK", "01")};
  auto r = detail::choose_local_rank(v);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->variable, "OMPI_COMM_WORLD_LOCAL_RANK");
  EXPECT_EQ(r->rank, 1);
}

TEST(Assignment, NearestOfDisagreeingVariablesWins) {
  // mpirun with a LOCAL_RANK inherited from further out.
  detail::LauncherView v;
  v.candidates = {cand("OMPI_COMM_WORLD_LOCAL_RANK", "1", 1, true),
                  cand("LOCAL_RANK", "0", 3, true)};
  auto r = detail::choose_local_rank(v);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->variable, "OMPI_COMM_WORLD_LOCAL_RANK");
  EXPECT_EQ(r->rank, 1);
  // torchrun under mpirun: torchrun's LOCAL_RANK is nearer.
  v.candidates = {cand("OMPI_COMM_WORLD_LOCAL_RANK", "0", 2, true),
                  cand("LOCAL_RANK", "3", 1, true)};
  r = detail::choose_local_rank(v);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->variable, "LOCAL_RANK");
  EXPECT_EQ(r->rank, 3);
  ASSERT_EQ(r->ignored.size(), 1u);
  EXPECT_NE(r->ignored[0].find("OMPI_COMM_WORLD_LOCAL_RANK"), std::string::npos);
  // A lower bound further out than an exact distance still loses.
  v.candidates = {cand("SLURM_LOCALID", "1", 1, true), cand("LOCAL_RANK", "0", 2, false)};
  EXPECT_EQ(detail::choose_local_rank(v)->variable, "SLURM_LOCALID");
}

TEST(Assignment, DisagreementThatCannotBeToldIsRefused) {
  detail::LauncherView v;
  v.candidates = {cand("OMPI_COMM_WORLD_LOCAL_RANK", "1", 1, false),
                  cand("LOCAL_RANK", "0", 1, false)};
  try {
    detail::choose_local_rank(v);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::BadInput);
    const std::string m = e.what();
    EXPECT_NE(m.find("OMPI_COMM_WORLD_LOCAL_RANK=\"1\""), std::string::npos) << m;
    EXPECT_NE(m.find("LOCAL_RANK=\"0\""), std::string::npos) << m;
    EXPECT_NE(m.find("GPUSEL_GPU"), std::string::npos) << m;
  }
  // Same distance, both exact: still cannot be told.
  v.candidates = {cand("OMPI_COMM_WORLD_LOCAL_RANK", "1", 1, true),
                  cand("LOCAL_RANK", "0", 1, true)};
  EXPECT_THROW(detail::choose_local_rank(v), Error);
  // Not looked up at all.
  v.candidates = {cand("OMPI_COMM_WORLD_LOCAL_RANK", "1"), cand("LOCAL_RANK", "0")};
  EXPECT_THROW(detail::choose_local_rank(v), Error);
}

TEST(Assignment, MalformedValuesAreBadInput) {
  for (const char* bad : {"", "-1", "1.5", "abc", " 1", "99999999", "\xd9\xa1"}) {
    detail::LauncherView v;
    v.candidates = {cand("SLURM_LOCALID", bad)};
    EXPECT_THROW(detail::choose_local_rank(v), Error) << bad;
  }
  detail::LauncherView v;
  v.candidates = {cand("LOCAL_RANK", "2", -1, false, "x")};
  EXPECT_THROW(detail::choose_local_rank(v), Error);
  v.candidates = {cand("LOCAL_RANK", "2", -1, false, "2")};  // rank not below the size
  EXPECT_THROW(detail::choose_local_rank(v), Error);
}

TEST(Assignment, SlurmTasksPerNode) {
  EXPECT_EQ(detail::slurm_tasks_on_node("4", 0), 4);
  EXPECT_EQ(detail::slurm_tasks_on_node("2(x3),1", 0), 2);
  EXPECT_EQ(detail::slurm_tasks_on_node("2(x3),1", 2), 2);
  EXPECT_EQ(detail::slurm_tasks_on_node("2(x3),1", 3), 1);
  EXPECT_FALSE(detail::slurm_tasks_on_node("2(x3),1", 4));
  EXPECT_FALSE(detail::slurm_tasks_on_node("2(x3", 0));
  EXPECT_FALSE(detail::slurm_tasks_on_node("", 0));
  EXPECT_FALSE(detail::slurm_tasks_on_node("a", 0));
  detail::LauncherView v;
  v.slurm_node_id = 1;
  v.candidates = {cand("SLURM_LOCALID", "2", -1, false, "4,3")};
  auto r = detail::choose_local_rank(v);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->local_size, 3);
}

TEST(Assignment, SourceNames) {
  EXPECT_STREQ(source_name(AssignmentSource::GpuselGpus), "GPUSEL_GPUS");
  EXPECT_STREQ(source_name(AssignmentSource::Launcher), "launcher");
  EXPECT_STREQ(source_name(AssignmentSource::Single), "single");
  EXPECT_STREQ(source_name(AssignmentSource::Default), "default");
}

}  // namespace
}  // namespace gpusel
