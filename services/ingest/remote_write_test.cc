#include "services/ingest/remote_write.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <limits>

#include "snappy.h"

namespace goodput::ingest {
namespace {

using ::testing::HasSubstr;
using ::testing::Pair;
using ::testing::UnorderedElementsAre;

constexpr int64_t kNowMs = 1714564800000;

void AddLabel(prometheus::TimeSeries* series, const std::string& name, const std::string& value) {
  prometheus::Label* label = series->add_labels();
  label->set_name(name);
  label->set_value(value);
}

// A series as Prometheus sends it after scraping dcgm-exporter on a Slurm node.
prometheus::TimeSeries* AddDcgmSeries(prometheus::WriteRequest* request, const std::string& metric,
                                      int gpu, double value, int64_t time_ms = kNowMs) {
  prometheus::TimeSeries* series = request->add_timeseries();
  AddLabel(series, "DCGM_FI_DRIVER_VERSION", "535.129.03");
  AddLabel(series, "Hostname", "gpu-node-042");
  AddLabel(series, "UUID", absl::StrCat("GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e5", gpu));
  AddLabel(series, "__name__", metric);
  AddLabel(series, "gpu", absl::StrCat(gpu));
  AddLabel(series, "hpc_job", "4211873");
  AddLabel(series, "instance", "gpu-node-042:9400");
  AddLabel(series, "job", "dcgm");
  AddLabel(series, "modelName", "NVIDIA H100 80GB HBM3");
  prometheus::Sample* sample = series->add_samples();
  sample->set_value(value);
  sample->set_timestamp(time_ms);
  return series;
}

RemoteWriteMapOptions MapOptions() {
  RemoteWriteMapOptions o;
  o.batch_id = "rw-1";
  o.default_cluster = "eos";
  o.validation = {.catalog = &core::GpuCatalog::BuiltIn(), .now_unix_ms = kNowMs};
  return o;
}

std::string Compress(const prometheus::WriteRequest& request) {
  std::string raw = request.SerializeAsString();
  std::string out;
  snappy::Compress(raw.data(), raw.size(), &out);
  return out;
}

TEST(DecodeWriteRequest, ReadsASnappyCompressedWriteRequest) {
  prometheus::WriteRequest request;
  AddDcgmSeries(&request, "DCGM_FI_DEV_SM_CLOCK", 0, 1755);
  absl::StatusOr<prometheus::WriteRequest> decoded = DecodeWriteRequest(Compress(request), 1 << 20);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  ASSERT_EQ(decoded->timeseries_size(), 1);
  EXPECT_EQ(decoded->timeseries(0).samples(0).value(), 1755);
}

TEST(DecodeWriteRequest, RefusesACorruptSnappyBodyWithTheReason) {
  prometheus::WriteRequest request;
  AddDcgmSeries(&request, "DCGM_FI_DEV_SM_CLOCK", 0, 1755);
  std::string body = Compress(request);
  body.resize(body.size() / 2);
  absl::StatusOr<prometheus::WriteRequest> decoded = DecodeWriteRequest(body, 1 << 20);
  EXPECT_EQ(decoded.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(decoded.status().message(), HasSubstr("snappy"));
}

TEST(DecodeWriteRequest, RefusesAnUncompressedProtobufBody) {
  prometheus::WriteRequest request;
  for (int i = 0; i < 8; ++i) AddDcgmSeries(&request, "DCGM_FI_DEV_SM_CLOCK", i, 1755);
  absl::StatusOr<prometheus::WriteRequest> decoded =
      DecodeWriteRequest(request.SerializeAsString(), 1 << 20);
  EXPECT_EQ(decoded.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(DecodeWriteRequest, RefusesABodyThatDecompressesAboveTheLimitNamingIt) {
  prometheus::WriteRequest request;
  for (int i = 0; i < 100; ++i) AddDcgmSeries(&request, "DCGM_FI_DEV_SM_CLOCK", i % 8, 1755);
  absl::StatusOr<prometheus::WriteRequest> decoded = DecodeWriteRequest(Compress(request), 1024);
  EXPECT_EQ(decoded.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(decoded.status().message(), HasSubstr("limit is 1024 bytes"));
}

TEST(ContentHash, IsStableAndTellsBodiesApart) {
  EXPECT_EQ(ContentHash("abc"), ContentHash("abc"));
  EXPECT_NE(ContentHash("abc"), ContentHash("abd"));
  EXPECT_EQ(ContentHash("abc").size(), 32u);
}

TEST(MapWriteRequest, CombinesTheSeriesOfOneGpuAndTimeIntoOneSampleWithItsLabels) {
  prometheus::WriteRequest request;
  AddDcgmSeries(&request, "DCGM_FI_DEV_SM_CLOCK", 0, 1755);
  AddDcgmSeries(&request, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", 0, 0.42);
  AddDcgmSeries(&request, "DCGM_FI_DEV_GPU_UTIL", 0, 100);
  AddDcgmSeries(&request, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", 1, 0.40);
  std::vector<RemoteWriteBatch> batches = MapWriteRequest(request, MapOptions());
  ASSERT_EQ(batches.size(), 1u);
  EXPECT_EQ(batches[0].cluster, "eos");
  EXPECT_TRUE(batches[0].refusals.empty());
  ASSERT_EQ(batches[0].samples.size(), 2u);
  const Sample& s = batches[0].samples[0];
  EXPECT_EQ(s.gpu.host, "gpu-node-042");
  EXPECT_EQ(s.gpu.gpu_index, 0);
  EXPECT_EQ(s.time_unix_ms, kNowMs);
  EXPECT_EQ(s.gpu_model, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(s.get(SampleField::kSmClockMhz), 1755);
  EXPECT_DOUBLE_EQ(*s.get(SampleField::kTensorActive), 0.42);
  EXPECT_DOUBLE_EQ(*s.get(SampleField::kGpuUtil), 1.0);
  EXPECT_EQ(s.labels.at("hpc_job"), "4211873");
  EXPECT_EQ(s.labels.at("DCGM_FI_DRIVER_VERSION"), "535.129.03");
}

TEST(MapWriteRequest, RefusesInvalidSamplesWithSeriesAndSampleAndKeepsTheRest) {
  prometheus::WriteRequest request;
  AddDcgmSeries(&request, "DCGM_FI_DEV_SM_CLOCK", 0, 1755);
  AddDcgmSeries(&request, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", 0, 1.7);
  AddDcgmSeries(&request, "DCGM_FI_DEV_SM_CLOCK", 1, -5);
  AddDcgmSeries(&request, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", 2, 0.3);
  std::vector<RemoteWriteBatch> batches = MapWriteRequest(request, MapOptions());
  ASSERT_EQ(batches.size(), 1u);
  EXPECT_EQ(batches[0].samples.size(), 2u);
  EXPECT_EQ(batches[0].refused_count, 2);
  ASSERT_EQ(batches[0].refusals.size(), 2u);
  EXPECT_THAT(batches[0].refusals[0].message,
              HasSubstr("series 1 sample 0 of batch rw-1: DCGM_FI_PROF_PIPE_TENSOR_ACTIVE=1.7"));
  EXPECT_THAT(batches[0].refusals[1].message, HasSubstr("series 2 sample 0 of batch rw-1"));
}

TEST(MapWriteRequest, IgnoresOtherMetricsAndStaleMarkers) {
  prometheus::WriteRequest request;
  AddDcgmSeries(&request, "up", 0, 1);
  AddDcgmSeries(&request, "scrape_duration_seconds", 0, 0.01);
  uint64_t stale_bits = 0x7ff0000000000002ULL;
  double stale = 0;
  std::memcpy(&stale, &stale_bits, sizeof stale);
  AddDcgmSeries(&request, "DCGM_FI_DEV_SM_CLOCK", 0, stale);
  AddDcgmSeries(&request, "DCGM_FI_DEV_SM_CLOCK", 1, std::numeric_limits<double>::quiet_NaN());
  std::vector<RemoteWriteBatch> batches = MapWriteRequest(request, MapOptions());
  ASSERT_EQ(batches.size(), 1u);
  EXPECT_EQ(batches[0].ignored_count, 3);
  EXPECT_TRUE(batches[0].samples.empty());
  ASSERT_EQ(batches[0].refusals.size(), 1u);  // the ordinary NaN is refused, not ignored
  EXPECT_THAT(batches[0].refusals[0].message, HasSubstr("series 3 sample 0"));
}

TEST(MapWriteRequest, GroupsByTheClusterLabelAndRefusesSeriesWithoutACluster) {
  prometheus::WriteRequest request;
  AddLabel(AddDcgmSeries(&request, "DCGM_FI_DEV_SM_CLOCK", 0, 1755), "cluster", "selene");
  AddDcgmSeries(&request, "DCGM_FI_DEV_SM_CLOCK", 1, 1755);
  RemoteWriteMapOptions options = MapOptions();
  std::vector<RemoteWriteBatch> batches = MapWriteRequest(request, options);
  ASSERT_EQ(batches.size(), 2u);
  EXPECT_EQ(batches[0].cluster, "eos");
  EXPECT_EQ(batches[1].cluster, "selene");

  options.default_cluster = "";
  batches = MapWriteRequest(request, options);
  ASSERT_EQ(batches.size(), 2u);
  EXPECT_EQ(batches[0].cluster, "selene");
  EXPECT_EQ(batches[1].cluster, "");
  ASSERT_EQ(batches[1].refusals.size(), 1u);
  EXPECT_THAT(batches[1].refusals[0].message, HasSubstr("no cluster label"));
}

// Two Prometheus replicas of an HA pair send the same series with `__replica__` a / b.
TEST(MapWriteRequest, DropsTheStandbyHaReplicaAndNeverStoresTheReplicaLabel) {
  prometheus::WriteRequest request;
  AddLabel(AddDcgmSeries(&request, "DCGM_FI_DEV_SM_CLOCK", 0, 1755), "__replica__", "prom-a");
  AddLabel(AddDcgmSeries(&request, "DCGM_FI_DEV_SM_CLOCK", 0, 1755, kNowMs - 7), "__replica__",
           "prom-b");
  RemoteWriteMapOptions options = MapOptions();
  options.replica_labels = {"__replica__", "replica"};
  options.dropped_replicas = {{"eos", "prom-b"}};
  std::vector<RemoteWriteBatch> batches = MapWriteRequest(request, options);
  ASSERT_EQ(batches.size(), 1u);
  ASSERT_EQ(batches[0].samples.size(), 1u);
  EXPECT_EQ(batches[0].ha_dropped_count, 1);
  EXPECT_EQ(batches[0].samples[0].time_unix_ms, kNowMs);
  EXPECT_FALSE(batches[0].samples[0].labels.contains("__replica__"));
  EXPECT_EQ(SeriesReplica(request.timeseries(1), options.replica_labels), "prom-b");
}

TEST(MapWriteRequest, RefusesLabelNamesTheTextFormatCannotCarry) {
  prometheus::WriteRequest request;
  AddLabel(AddDcgmSeries(&request, "DCGM_FI_DEV_SM_CLOCK", 0, 1755), "bad-name", "x");
  AddLabel(AddDcgmSeries(&request, "DCGM_FI_DEV_SM_CLOCK", 1, 1755), "note", "a \"quoted\"\\\n");
  std::vector<RemoteWriteBatch> batches = MapWriteRequest(request, MapOptions());
  ASSERT_EQ(batches.size(), 1u);
  ASSERT_EQ(batches[0].samples.size(), 1u);
  EXPECT_EQ(batches[0].samples[0].labels.at("note"), "a \"quoted\"\\\n");
  ASSERT_EQ(batches[0].refusals.size(), 1u);
  EXPECT_THAT(batches[0].refusals[0].message, HasSubstr("series 0 sample 0"));
}

TEST(MapWriteRequest, RefusesASeriesWithTooManyLabelsAloneAndKeepsTheRest) {
  prometheus::WriteRequest request;
  AddDcgmSeries(&request, "DCGM_FI_DEV_SM_CLOCK", 0, 1755);
  prometheus::TimeSeries* crowded = AddDcgmSeries(&request, "DCGM_FI_DEV_SM_CLOCK", 1, 1755);
  for (int i = 0; i < 100'000; ++i) AddLabel(crowded, absl::StrCat("l", i), absl::StrCat("v", i));
  AddDcgmSeries(&request, "DCGM_FI_DEV_SM_CLOCK", 2, 1755);

  std::vector<RemoteWriteBatch> batches = MapWriteRequest(request, MapOptions());
  ASSERT_EQ(batches.size(), 1u);
  ASSERT_EQ(batches[0].samples.size(), 2u);
  EXPECT_EQ(batches[0].samples[0].gpu.gpu_index, 0);
  EXPECT_EQ(batches[0].samples[1].gpu.gpu_index, 2);
  EXPECT_EQ(batches[0].refused_count, 1);
  ASSERT_EQ(batches[0].refusals.size(), 1u);
  EXPECT_EQ(batches[0].refusals[0].code, RefusalCode::kOutOfRange);
  EXPECT_EQ(batches[0].refusals[0].message,
            "series 1 of batch rw-1 (DCGM_FI_DEV_SM_CLOCK, 1 samples): has 100008 labels, more "
            "than the 128 a series may have (ingest.max_labels_per_series)");

  // A higher limit takes the series with all its labels.
  RemoteWriteMapOptions options = MapOptions();
  options.max_labels_per_series = 200'000;
  options.validation.max_labels = 200'000;  // the same key: ingest.max_labels_per_series
  batches = MapWriteRequest(request, options);
  ASSERT_EQ(batches.size(), 1u);
  EXPECT_TRUE(batches[0].refusals.empty());
  ASSERT_EQ(batches[0].samples.size(), 3u);
  EXPECT_EQ(batches[0].samples[1].labels.at("l99999"), "v99999");
}

class RemoteWriteReceiverTest : public ::testing::Test {
 protected:
  // Only paths that refuse before storing are exercised here; storage is tested with a real
  // PostgreSQL under tests/.
  IngestPipeline pipeline_{nullptr, &core::GpuCatalog::BuiltIn(), IngestOptions{},
                           [] { return kNowMs; }, nullptr};
};

TEST_F(RemoteWriteReceiverTest, AnswersTooLargeWithTheLimit) {
  RemoteWriteReceiver receiver(&pipeline_, {.default_cluster = "eos", .max_body_bytes = 2048});
  HttpReply reply = receiver.Handle(std::string(4096, 'x'), "snappy", "");
  EXPECT_EQ(reply.status, 413);
  EXPECT_THAT(reply.body, HasSubstr("limit is 2048 bytes"));
}

TEST_F(RemoteWriteReceiverTest, AnswersACorruptBodyWith400AndTheReason) {
  RemoteWriteReceiver receiver(&pipeline_, {.default_cluster = "eos"});
  HttpReply reply = receiver.Handle("\xff\xff\xff\xff\xff\xff not snappy", "snappy", "");
  EXPECT_EQ(reply.status, 400);
  EXPECT_THAT(reply.body, HasSubstr("snappy"));
}

TEST_F(RemoteWriteReceiverTest, RefusesAnotherContentEncoding) {
  RemoteWriteReceiver receiver(&pipeline_, {.default_cluster = "eos"});
  HttpReply reply = receiver.Handle("x", "gzip", "");
  EXPECT_EQ(reply.status, 400);
  EXPECT_THAT(reply.body, HasSubstr("gzip"));
}

}  // namespace
}  // namespace goodput::ingest
