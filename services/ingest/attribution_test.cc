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

TEST(Attributor, AMigInstanceAllocationCoversOnlyThatInstance) {
  Attributor a({{.job_row_id = 4, .host = "n1", .gpu_index = 0, .uuid = "GPU-a",
                 .start_unix_ms = 0, .mig_instance = 3},
                {.job_row_id = 5, .host = "n1", .gpu_index = 0, .uuid = "GPU-a",
                 .start_unix_ms = 0, .mig_instance = 4}},
               {});
  auto slice = [](std::string uuid, int instance) {
    Sample s = At("n1", 0, std::move(uuid), 10);
    s.gpu.mig = MigSlice{.gpu_instance_id = instance, .profile = "1g.6gb"};
    return s;
  };
  EXPECT_EQ(a.Attribute(slice("GPU-a", 3)), 4);
  EXPECT_EQ(a.Attribute(slice("GPU-a", 4)), 5);
  EXPECT_EQ(a.Attribute(slice("", 4)), 5);  // by host and index
  EXPECT_EQ(a.Attribute(slice("GPU-a", 5)), std::nullopt);
  EXPECT_EQ(a.Attribute(At("n1", 0, "GPU-a", 10)), std::nullopt);  // the whole GPU is not theirs
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

// dcgm-exporter's Helm chart ServiceMonitor keeps Prometheus' `honor_labels: false`: the
// workload's pod arrives as exported_pod/exported_namespace, and pod/namespace then name the
// exporter's own pod (e.g. gpu-operator/nvidia-dcgm-exporter-x7k2p).
TEST(LabelJobIds, PrefersExportedPodLabelsOverTheExportersOwnPod) {
  Sample s = At("n", 0, "", 1);
  s.labels["namespace"] = "gpu-operator";
  s.labels["pod"] = "nvidia-dcgm-exporter-x7k2p";
  s.labels["exported_namespace"] = "research";
  s.labels["exported_pod"] = "llm-0";
  EXPECT_THAT(LabelJobIds(s), ElementsAre("research/llm-0", "research/llm"));
}

TEST(LabelJobIds, ReadsTheLabelsOfOldExportersAndAConfiguredPair) {
  Sample old = At("n", 0, "", 1);
  old.labels["pod_namespace"] = "ns";
  old.labels["pod_name"] = "job-1";
  EXPECT_THAT(LabelJobIds(old), ElementsAre("ns/job-1", "ns/job"));
  Sample custom = At("n", 0, "", 1);
  custom.labels["k8s_pod"] = "p";
  custom.labels["k8s_ns"] = "ns";
  EXPECT_THAT(LabelJobIds(custom, {{"k8s_pod", "k8s_ns"}}), ElementsAre("ns/p"));
  EXPECT_TRUE(LabelJobIds(custom).empty());
}

TEST(CanonicalHost, OneNameForShortFqdnUpperCaseAndAliases) {
  IdentityRules rules;
  EXPECT_EQ(CanonicalHost("gpu-node-042", rules), "gpu-node-042");
  EXPECT_EQ(CanonicalHost("GPU-Node-042.eos.example.com", rules), "gpu-node-042");
  EXPECT_EQ(CanonicalHost("gpu-node-042.eos.example.com.", rules), "gpu-node-042");
  EXPECT_EQ(CanonicalHost("10.0.1.17", rules), "10.0.1.17");
  EXPECT_EQ(CanonicalHost("fe80::1", rules), "fe80::1");
  rules.aliases["ip-10-0-1-17"] = "gpu-node-042";
  EXPECT_EQ(CanonicalHost("ip-10-0-1-17.ec2.internal", rules), "gpu-node-042");
  IdentityRules keep;
  keep.keep_domain = true;
  EXPECT_EQ(CanonicalHost("GPU-1.A.example", keep), "gpu-1.a.example");
}

TEST(Attributor, MatchesAnAllocationWhateverFormOfTheHostEachSidePrinted) {
  Attributor a({{.job_row_id = 7, .host = "GPU-NODE-042.eos.example.com", .gpu_index = 3,
                 .start_unix_ms = 0}},
               {});
  EXPECT_EQ(a.Attribute(At("gpu-node-042", 3, "", 10)), 7);
  EXPECT_EQ(a.Attribute(At("Gpu-Node-042.EOS", 3, "", 10)), 7);
  EXPECT_EQ(a.Attribute(At("gpu-node-043", 3, "", 10)), std::nullopt);
}

TEST(ParseIdentityRules, ReadsAliasesAndPodLabelsAndNamesABadKey) {
  absl::StatusOr<IdentityRules> rules = ParseIdentityRules(YAML::Load(
      "ingest:\n  hosts:\n    aliases: {K8S-GPU-17.cluster.local: gpu-node-042}\n"
      "  attribution:\n    pod_labels: [{pod: exported_pod, namespace: exported_namespace}]\n"));
  ASSERT_TRUE(rules.ok()) << rules.status();
  EXPECT_EQ(CanonicalHost("k8s-gpu-17", *rules), "gpu-node-042");
  ASSERT_EQ(rules->pod_labels.size(), 1u);
  EXPECT_EQ(rules->pod_labels[0].ns, "exported_namespace");
  absl::StatusOr<IdentityRules> bad =
      ParseIdentityRules(YAML::Load("ingest:\n  attribution:\n    pod_labels: [{pod: p}]\n"));
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), ::testing::HasSubstr("pod_labels[0]"));
}

}  // namespace
}  // namespace goodput::ingest
