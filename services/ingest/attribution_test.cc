#include "services/ingest/attribution.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace goodput::ingest {
namespace {

using ::testing::ElementsAre;

Sample At(std::string host, std::optional<int> index, std::string uuid, int64_t time_ms) {
  Sample s;
  s.gpu = {.host = std::move(host), .gpu_index = index, .uuid = std::move(uuid)};
  s.time_unix_ms = time_ms;
  return s;
}

TEST(Attributor, GivesASampleToTheJobHoldingItsGpuAtThatTime) {
  Attributor a(
      {{.job_row_id = 1, .host = "n1", .gpu_index = 0, .start_unix_ms = 100, .end_unix_ms = 200},
       {.job_row_id = 2, .host = "n1", .gpu_index = 0, .start_unix_ms = 200}},
      {});
  EXPECT_EQ(a.Attribute(At("n1", 0, "", 150)), 1);
  EXPECT_EQ(a.Attribute(At("n1", 0, "", 200)), 2);  // [start, end): the boundary is job 2's
  EXPECT_EQ(a.Attribute(At("n1", 0, "", 99)), std::nullopt);
  EXPECT_EQ(a.Attribute(At("n1", 1, "", 150)), std::nullopt);
  EXPECT_EQ(a.Attribute(At("n2", 0, "", 150)), std::nullopt);
}

TEST(Attributor, MatchesByUuidAndNeverAcrossDifferentUuids) {
  Attributor a(
      {{.job_row_id = 7, .host = "n1", .gpu_index = 0, .uuid = "GPU-a", .start_unix_ms = 0}}, {});
  EXPECT_EQ(a.Attribute(At("n1", std::nullopt, "GPU-a", 5)), 7);
  EXPECT_EQ(a.Attribute(At("n1", 0, "", 5)), 7);
  // Index 0 after a re-enumeration is a different device.
  EXPECT_EQ(a.Attribute(At("n1", 0, "GPU-z", 5)), std::nullopt);
}

TEST(Attributor, CoversMigSlicesOfAnAllocatedGpu) {
  Attributor a({{.job_row_id = 3, .host = "n1", .gpu_index = 1, .start_unix_ms = 0}}, {});
  Sample s = At("n1", 1, "", 10);
  s.gpu.mig = MigSlice{.gpu_instance_id = 7, .profile = "1g.10gb"};
  EXPECT_EQ(a.Attribute(s), 3);
}

TEST(Attributor, FallsBackToHpcJobOsmoAndPodLabels) {
  Attributor a({}, {{"4211873", 11}, {"wm-train-17", 12}, {"research/llm-pretrain", 13}});
  Sample slurm = At("n", 0, "", 1);
  slurm.labels["hpc_job"] = "4211873";
  EXPECT_EQ(a.Attribute(slurm), 11);

  Sample osmo = At("n", 0, "", 1);
  osmo.labels["osmo_workflow_id"] = "wm-train-17";
  EXPECT_EQ(a.Attribute(osmo), 12);

  Sample k8s = At("n", 0, "", 1);
  k8s.labels["namespace"] = "research";
  k8s.labels["pod"] = "llm-pretrain-worker-3";
  EXPECT_EQ(a.Attribute(k8s), 13);

  Sample nobody = At("n", 0, "", 1);
  nobody.labels["hpc_job"] = "999";
  EXPECT_EQ(a.Attribute(nobody), std::nullopt);
}

TEST(Attributor, PrefersTheSchedulersAllocationOverLabels) {
  Attributor a({{.job_row_id = 1, .host = "n", .gpu_index = 0, .start_unix_ms = 0}},
               {{"4211873", 11}});
  Sample s = At("n", 0, "", 1);
  s.labels["hpc_job"] = "4211873";
  EXPECT_EQ(a.Attribute(s), 1);
}

TEST(LabelJobIds, ListsPodNamePrefixesLongestFirst) {
  Sample s = At("n", 0, "", 1);
  s.labels["namespace"] = "ns";
  s.labels["pod"] = "a-b-0";
  EXPECT_THAT(LabelJobIds(s), ElementsAre("ns/a-b-0", "ns/a-b", "ns/a"));
}

}  // namespace
}  // namespace goodput::ingest
