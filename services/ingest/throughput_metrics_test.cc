#include "services/ingest/throughput_metrics.h"

#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace goodput::ingest {
namespace {

prometheus::TimeSeries Series(const std::vector<std::pair<std::string, std::string>>& labels,
                              const std::vector<std::pair<int64_t, double>>& samples) {
  prometheus::TimeSeries s;
  for (const auto& [k, v] : labels) {
    prometheus::Label* l = s.add_labels();
    l->set_name(k);
    l->set_value(v);
  }
  for (const auto& [t, v] : samples) {
    prometheus::Sample* x = s.add_samples();
    x->set_timestamp(t);
    x->set_value(v);
  }
  return s;
}

double StaleNaN() {
  const uint64_t bits = 0x7ff0000000000002ULL;
  double v = 0;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}

TEST(ThroughputMetrics, MegatronThroughputBecomesPerGpuReportsOfTheLabelledJob) {
  prometheus::WriteRequest req;
  *req.add_timeseries() = Series({{"__name__", "megatron_training_throughput_tflops"},
                                  {"cluster", "eos"},
                                  {"job_id", "4211873"},
                                  {"instance", "node-1:9400"}},
                                 {{1'780'000'030'000, 412.5}, {1'780'000'060'000, StaleNaN()}});
  *req.add_timeseries() =
      Series({{"__name__", "DCGM_FI_DEV_SM_CLOCK"}, {"gpu", "0"}}, {{1'780'000'030'000, 1755}});
  MappedReports m = MapThroughputSeries(req, DefaultThroughputMetrics(), "", "b1");
  ASSERT_EQ(m.reports.size(), 1u);
  EXPECT_EQ(m.sample_count, 1);
  EXPECT_TRUE(m.refusals.empty());
  const goodput::v1::MfuReport& r = m.reports[0];
  EXPECT_EQ(r.job().cluster(), "eos");
  EXPECT_EQ(r.job().job_id(), "4211873");
  EXPECT_DOUBLE_EQ(r.model_tflops_per_gpu(), 412.5);
  EXPECT_EQ(r.interval().end_time().seconds(), 1'780'000'030);
  EXPECT_EQ(r.interval().start_time().seconds(), 1'780'000'000);  // 30 s default interval
  EXPECT_EQ(r.source(), goodput::v1::MFU_REPORT_SOURCE_METRIC);
  EXPECT_EQ(r.framework(), "megatron-lm");
  EXPECT_EQ(r.labels().at("instance"), "node-1:9400");

  // A retried request maps to the same report ids.
  MappedReports again = MapThroughputSeries(req, DefaultThroughputMetrics(), "", "b2");
  EXPECT_EQ(again.reports[0].report_id(), r.report_id());
}

TEST(ThroughputMetrics, ASeriesWithTooManyLabelsIsRefusedWithAllItsSamples) {
  std::vector<std::pair<std::string, std::string>> labels = {
      {"__name__", "megatron_training_throughput_tflops"}, {"cluster", "eos"}, {"job_id", "7"}};
  for (int i = 0; i < 200; ++i) labels.emplace_back("l" + std::to_string(i), "v");
  prometheus::WriteRequest req;
  *req.add_timeseries() = Series(labels, {{1'780'000'030'000, 400}, {1'780'000'060'000, 401}});
  MappedReports m = MapThroughputSeries(req, DefaultThroughputMetrics(), "", "b1", 128);
  EXPECT_TRUE(m.reports.empty());
  EXPECT_EQ(m.sample_count, 2);
  EXPECT_EQ(m.refused_count, 2);
  ASSERT_EQ(m.refusals.size(), 1u);
  EXPECT_EQ(m.refusals[0].field, "labels");
  EXPECT_NE(m.refusals[0].message.find("has 202 labels, more than the 128"), std::string::npos)
      << m.refusals[0].message;
}

TEST(ThroughputMetrics, SamplesNamingNoJobOrClusterAreRefusedWithTheLabels) {
  prometheus::WriteRequest req;
  *req.add_timeseries() =
      Series({{"__name__", "megatron_training_throughput_tflops"}, {"cluster", "eos"}},
             {{1'780'000'030'000, 400}});
  *req.add_timeseries() =
      Series({{"__name__", "megatron_training_throughput_tflops"}, {"hpc_job", "7"}},
             {{1'780'000'030'000, 400}});
  MappedReports m = MapThroughputSeries(req, DefaultThroughputMetrics(), "", "b1");
  EXPECT_TRUE(m.reports.empty());
  ASSERT_EQ(m.refusals.size(), 2u);
  EXPECT_EQ(m.refusals[0].field, "job_id");
  EXPECT_NE(m.refusals[0].message.find("job_id, hpc_job, slurm_job_id"), std::string::npos)
      << m.refusals[0].message;
  EXPECT_EQ(m.refusals[1].field, "cluster");
  // With a default cluster the second maps, by its hpc_job label.
  m = MapThroughputSeries(req, DefaultThroughputMetrics(), "eos", "b1");
  ASSERT_EQ(m.reports.size(), 1u);
  EXPECT_EQ(m.reports[0].job().job_id(), "7");
}

TEST(ThroughputMetrics, ConfiguredMappingsForTotalThroughputAndPercent) {
  YAML::Node root = YAML::Load(R"(
ingest:
  mfu_metrics:
    metrics:
      - name: train_total_tflops
        form: total_tflops
        job_labels: [slurm_job]
        gpu_count_label: world_size
        interval_s: 60
        precision: fp8
        framework: custom
      - name: train_mfu_pct
        form: mfu_percent
)");
  absl::StatusOr<std::vector<ThroughputMetric>> metrics = ParseThroughputMetrics(root);
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  ASSERT_EQ(metrics->size(), 2u);
  prometheus::WriteRequest req;
  *req.add_timeseries() =
      Series({{"__name__", "train_total_tflops"}, {"slurm_job", "9"}, {"world_size", "64"}},
             {{1'780'000'060'000, 25000}});
  *req.add_timeseries() =
      Series({{"__name__", "train_mfu_pct"}, {"job_id", "9"}}, {{1'780'000'060'000, 41}});
  MappedReports m = MapThroughputSeries(req, *metrics, "eos", "b");
  ASSERT_EQ(m.reports.size(), 2u);
  EXPECT_DOUBLE_EQ(m.reports[0].total_throughput().total_tflops(), 25000);
  EXPECT_EQ(m.reports[0].total_throughput().gpu_count(), 64);
  EXPECT_EQ(m.reports[0].precision(), goodput::v1::PRECISION_FP8);
  EXPECT_EQ(m.reports[0].interval().start_time().seconds(), 1'780'000'000);
  EXPECT_DOUBLE_EQ(m.reports[1].mfu(), 0.41);
}

TEST(ThroughputMetrics, BadConfigurationNamesTheKey) {
  absl::StatusOr<std::vector<ThroughputMetric>> m = ParseThroughputMetrics(
      YAML::Load("ingest: {mfu_metrics: {metrics: [{name: x, form: flops}]}}"));
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("ingest.mfu_metrics.metrics[0].form=\"flops\""),
            std::string::npos)
      << m.status();
  EXPECT_EQ(ParseThroughputMetrics(YAML::Load("ingest: {}"))->size(),
            DefaultThroughputMetrics().size());
}

}  // namespace
}  // namespace goodput::ingest
