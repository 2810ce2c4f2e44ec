#include "services/ingest/serving_metrics.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <bit>
#include <fstream>
#include <sstream>
#include <string>

namespace goodput::ingest {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string ReadData(const std::string& name) {
  std::ifstream in(std::string(GOODPUT_SOURCE_DIR) + "/tests/data/serving/" + name);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

ServingParseOptions Scrape() {
  return {.cluster = "eos",
          .batch_id = "scrape-1",
          .default_host = "gpu-node-042",
          .scrape_time_unix_ms = 1'700'000'000'000};
}

TEST(ServingMetrics, ReadsVllmLoadAndTokenCountersAsVllmPrintsThem) {
  ServingBatch a = ParseServingExposition(ReadData("vllm_0_7_production_stack_318.txt"), Scrape());
  ASSERT_EQ(a.samples.size(), 2u);  // running and waiting; the cache gauge is not used
  EXPECT_EQ(a.samples[0].engine, "vllm");
  EXPECT_EQ(a.samples[0].metric, ServingMetricKind::kRunning);
  EXPECT_EQ(a.samples[0].model, "Qwen/Qwen2.5-Coder-32B-Instruct");
  EXPECT_EQ(a.samples[0].host, "gpu-node-042");
  EXPECT_EQ(a.samples[0].time_unix_ms, 1'700'000'000'000);
  EXPECT_EQ(a.samples[1].metric, ServingMetricKind::kWaiting);

  ServingBatch b = ParseServingExposition(ReadData("vllm_ibm_pr18.txt"), Scrape());
  ASSERT_EQ(b.samples.size(), 2u);
  EXPECT_EQ(b.samples[0].metric, ServingMetricKind::kPromptTokens);
  EXPECT_EQ(b.samples[0].value, 1196.0);
  EXPECT_EQ(b.samples[1].metric, ServingMetricKind::kGenerationTokens);
  EXPECT_EQ(b.samples[1].value, 218152.0);
  EXPECT_TRUE(b.refusals.empty());
}

TEST(ServingMetrics, SkipsTheV1EnginesHistogramsItDoesNotUse) {
  ServingBatch batch =
      ParseServingExposition(ReadData("vllm_0_10_production_stack_617.txt"), Scrape());
  EXPECT_TRUE(batch.samples.empty());
  EXPECT_TRUE(batch.refusals.empty());
}

TEST(ServingMetrics, KeepsTheEngineIndexAndFinishReasonAsTheSeriesAndReadsTheFlopsEstimate) {
  ServingBatch batch = ParseServingExposition(ReadData("vllm_v1_from_source.txt"), Scrape());
  ASSERT_EQ(batch.samples.size(), 7u);
  EXPECT_EQ(batch.samples[0].series, "engine=0");
  EXPECT_EQ(batch.samples[4].metric, ServingMetricKind::kRequests);
  EXPECT_EQ(batch.samples[4].series, "engine=0,finished_reason=stop");
  EXPECT_EQ(batch.samples[5].series, "engine=0,finished_reason=length");
  EXPECT_EQ(batch.samples[6].metric, ServingMetricKind::kFlopsPerGpu);
  EXPECT_DOUBLE_EQ(batch.samples[6].value, 9.1e19);
}

TEST(ServingMetrics, ReadsSglangAsItsDocumentationShowsIt) {
  ServingBatch batch =
      ParseServingExposition(ReadData("sglang_docs_production_metrics.txt"), Scrape());
  ASSERT_EQ(batch.samples.size(), 2u);
  EXPECT_EQ(batch.samples[0].engine, "sglang");
  EXPECT_EQ(batch.samples[0].metric, ServingMetricKind::kPromptTokens);
  EXPECT_DOUBLE_EQ(batch.samples[0].value, 8.128902e6);
  EXPECT_EQ(batch.samples[1].metric, ServingMetricKind::kGenerationTokens);
  EXPECT_EQ(batch.samples[0].model, "meta-llama/Llama-3.1-8B-Instruct");
}

TEST(ServingMetrics, NamesTheJobFromJobLabelsOrThePodAndTheHostFromInstance) {
  ServingBatch batch = ParseServingExposition(
      "sglang:num_running_reqs{model_name=\"m\",tp_rank=\"0\",namespace=\"serving\","
      "pod=\"llama-7b-6d4f9-x2x\",instance=\"10.0.3.7:30000\"} 17\n"
      "vllm:num_requests_waiting{model_name=\"m\",engine=\"0\",hpc_job=\"4211873\","
      "instance=\"GPU-Node-042.eos.example.com:8000\"} 2 1700000001000\n",
      Scrape());
  ASSERT_EQ(batch.samples.size(), 2u);
  EXPECT_EQ(batch.samples[0].host, "10.0.3.7");
  EXPECT_EQ(batch.samples[0].pod, "serving/llama-7b-6d4f9-x2x");
  EXPECT_EQ(batch.samples[0].series, "tp_rank=0");
  EXPECT_THAT(batch.samples[0].job_ids,
              ElementsAre("serving/llama-7b-6d4f9-x2x", "serving/llama-7b-6d4f9",
                          "serving/llama-7b", "serving/llama"));
  EXPECT_EQ(batch.samples[1].host, "gpu-node-042");
  EXPECT_EQ(batch.samples[1].time_unix_ms, 1'700'000'001'000);
  EXPECT_THAT(batch.samples[1].job_ids, ElementsAre("4211873"));
}

TEST(ServingMetrics, RefusesABadLineOrValueNamingItsLineAndKeepsTheRest) {
  ServingBatch batch = ParseServingExposition(
      "vllm:num_requests_running{model_name=\"m\" 3\n"
      "vllm:num_requests_waiting{model_name=\"m\"} NaN\n"
      "vllm:prompt_tokens_total{model_name=\"m\"} 10\n",
      Scrape());
  ASSERT_EQ(batch.samples.size(), 1u);
  ASSERT_EQ(batch.refusals.size(), 2u);
  EXPECT_THAT(batch.refusals[0].message, HasSubstr("line 1 of batch scrape-1"));
  EXPECT_THAT(batch.refusals[1].message, HasSubstr("line 2"));
  EXPECT_THAT(batch.refusals[1].message, HasSubstr("not a finite number"));
}

TEST(ServingMetrics, MapsRemoteWriteSeriesPerClusterAndSkipsStaleMarkers) {
  prometheus::WriteRequest request;
  auto add = [&](const std::string& name, const std::string& cluster, double value, int64_t t) {
    prometheus::TimeSeries* s = request.add_timeseries();
    auto label = [&](const std::string& n, const std::string& v) {
      prometheus::Label* l = s->add_labels();
      l->set_name(n);
      l->set_value(v);
    };
    label("__name__", name);
    if (!cluster.empty()) label("cluster", cluster);
    label("model_name", "m");
    label("instance", "gpu-node-7:8000");
    prometheus::Sample* sample = s->add_samples();
    sample->set_value(value);
    sample->set_timestamp(t);
  };
  add("vllm:generation_tokens_total", "", 100, 1000);
  add("vllm:generation_tokens_total", "", std::bit_cast<double>(0x7ff0000000000002ULL), 2000);
  add("sglang:num_queue_reqs", "selene", 4, 1000);
  add("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "", 0.5, 1000);
  std::vector<ServingBatch> batches = MapServingSeries(request, {.cluster = "eos"});
  ASSERT_EQ(batches.size(), 2u);
  EXPECT_EQ(batches[0].cluster, "eos");
  ASSERT_EQ(batches[0].samples.size(), 1u);
  EXPECT_EQ(batches[0].samples[0].host, "gpu-node-7");
  EXPECT_EQ(batches[1].cluster, "selene");
  EXPECT_EQ(batches[1].samples[0].metric, ServingMetricKind::kWaiting);
}

TEST(ServingMetrics, AnHaPairsReplicaLabelIsNoSeriesAndTheStandbysSeriesAreSkipped) {
  prometheus::WriteRequest request;
  for (const char* replica : {"prom-a", "prom-b"}) {
    prometheus::TimeSeries* s = request.add_timeseries();
    for (auto [k, v] :
         std::vector<std::pair<std::string, std::string>>{{"__name__", "vllm:num_requests_running"},
                                                          {"engine", "0"},
                                                          {"__replica__", replica}}) {
      prometheus::Label* l = s->add_labels();
      l->set_name(k);
      l->set_value(v);
    }
    prometheus::Sample* sample = s->add_samples();
    sample->set_value(1);
    sample->set_timestamp(1000);
  }
  ServingParseOptions options = {.cluster = "eos", .replica_labels = {"__replica__"}};
  std::vector<ServingBatch> both = MapServingSeries(request, options);
  ASSERT_EQ(both.size(), 1u);
  ASSERT_EQ(both[0].samples.size(), 2u);
  EXPECT_EQ(both[0].samples[0].series, "engine=0");
  options.drop_series = [](const prometheus::TimeSeries& series, const std::string&) {
    return series.labels(2).value() == "prom-b";
  };
  std::vector<ServingBatch> elected = MapServingSeries(request, options);
  ASSERT_EQ(elected.size(), 1u);
  EXPECT_EQ(elected[0].samples.size(), 1u);
}

}  // namespace
}  // namespace goodput::ingest
