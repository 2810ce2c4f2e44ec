// MIG instances and time-sliced GPUs through the real path against a real PostgreSQL:
// samples stored as ingest stores them (MIG columns, the `gpu_shared_by` label), the ofu
// consumer and the OfuService queries. A MIG instance is a GPU of its own with the
// instance's OFU and counts its share of the GPU's SMs in GPU-hours; a GPU time-sliced between
// two jobs is flagged SHARED_GPU in both and counted once in the fleet; a job on a model the
// catalog lacks says why it has no OFU.

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/api/api_convert.h"
#include "services/ofu/ofu_live.h"
#include "services/ofu/ofu_service.h"
#include "tests/support/ofu_job_fixture.h"

namespace goodput::ofu {
namespace {

namespace v1 = ::goodput::v1;

using ::goodput::testing::kOfuJobStartMs;
using ::testing::Contains;
using ::testing::HasSubstr;

class OfuSharedGpus : public goodput::testing::OfuJobFixture {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(OfuJobFixture::SetUp());
    for (const char* id : {"mig-b", "ts-a", "ts-b"}) {
      Sql(absl::StrCat("INSERT INTO jobs (cluster, job_id, gpu_model) VALUES ('c1', '", id,
                       "', 'NVIDIA H100 80GB HBM3')"));
    }
    Sql("INSERT INTO jobs (cluster, job_id, gpu_model) VALUES ('c1', 'odd', 'NVIDIA Imaginary "
        "X1')");
    service_ = std::make_unique<OfuServiceImpl>(store_.get(), consumer_.get(), &cache_, &hub_,
                                                &core::GpuCatalog::BuiltIn(),
                                                OfuServiceOptions{.window_s = 60});
  }

  // Ten minutes of samples every 10 s: MIG instances 1 (job j1) and 2 (mig-b) of GPU n1/0,
  // 1g.10gb; GPU n2/0 time-sliced between ts-a and ts-b (one series per pod, as
  // dcgm-exporter prints it); GPU n3/0 of a model the catalog lacks (odd).
  void FeedAll() {
    std::vector<std::string> values;
    auto row = [&](int t, const std::string& host, const std::string& job, double tensor,
                   const std::string& mig, const std::string& labels) {
      values.push_back(absl::StrCat(
          "(timestamptz 'epoch' + ", kOfuJobStartMs + t * 1000, " * interval '1 millisecond', ",
          "'c1', '", host, "', 0, (SELECT id FROM jobs WHERE job_id = '", job, "'), ", tensor,
          ", 1830, ", mig, ", '", labels, "'::jsonb)"));
    };
    for (int t = 0; t < 600; t += 10) {
      row(t, "n1", "j1", 0.6, "1, '1g.10gb'", "{}");
      row(t, "n1", "mig-b", 0.3, "2, '1g.10gb'", "{}");
      row(t, "n2", "ts-a", 0.5, "NULL, NULL", R"({"exported_pod": "a", "gpu_shared_by": "2"})");
      row(t, "n2", "ts-b", 0.5, "NULL, NULL", R"({"exported_pod": "b", "gpu_shared_by": "2"})");
      row(t, "n3", "odd", 0.5, "NULL, NULL", "{}");
    }
    Sql(absl::StrCat("INSERT INTO samples (sample_time, cluster, host, gpu_index, job, "
                     "tensor_active, sm_clock_mhz, mig_instance_id, mig_profile, labels) VALUES ",
                     absl::StrJoin(values, ",")));
    for (int pass = 0; pass < 2; ++pass) {
      for (int i = 0; i < 100; ++i) {
        auto done = consumer_->StepOnce();
        ASSERT_TRUE(done.ok()) << done.status();
        if (*done) break;
      }
      now_ += 3'600'000;  // the jobs went quiet: their last windows are flushed and final
    }
  }

  v1::JobOfuSummary Summary(const std::string& job_id) {
    v1::GetJobSummaryRequest req;
    req.mutable_job()->set_cluster("c1");
    req.mutable_job()->set_job_id(job_id);
    v1::GetJobSummaryResponse resp;
    EXPECT_TRUE(service_->DoGetJobSummary(req, &resp).ok()) << job_id;
    return resp.summary();
  }

  std::vector<v1::OfuWindow> GpuWindows(const std::string& job_id) {
    v1::GetJobOfuRequest req;
    req.mutable_job()->set_cluster("c1");
    req.mutable_job()->set_job_id(job_id);
    req.set_include_per_gpu(true);
    req.set_page_size(1000);
    v1::GetJobOfuResponse resp;
    EXPECT_TRUE(service_->DoGetJobOfu(req, &resp).ok()) << job_id;
    return {resp.gpu_windows().begin(), resp.gpu_windows().end()};
  }

  LatestCache cache_{nullptr, absl::Hours(1)};
  StreamHub hub_;
  std::unique_ptr<OfuServiceImpl> service_;
};

TEST_F(OfuSharedGpus, MigInstancesAndTimeSlicedGpusCountTheirShareOfTheFleet) {
  ASSERT_NO_FATAL_FAILURE(FeedAll());

  // Each MIG job has its own instance's OFU (tensor x 1830 / 1830), not the GPU's.
  const v1::JobOfuSummary a = Summary("j1");
  const v1::JobOfuSummary b = Summary("mig-b");
  EXPECT_NEAR(a.ofu(), 0.6, 1e-6);
  EXPECT_NEAR(b.ofu(), 0.3, 1e-6);
  // Ten minutes of one 1g.10gb instance of an H100: 16/132 of a GPU.
  EXPECT_NEAR(a.gpu_hours(), 16.0 / 132 * 10 / 60, 1e-9);
  EXPECT_NEAR(a.effective_gpu_hours(), 0.6 * 16.0 / 132 * 10 / 60, 1e-6);
  const std::vector<v1::OfuWindow> gpus = GpuWindows("j1");
  ASSERT_FALSE(gpus.empty());
  EXPECT_EQ(gpus[0].gpu().host(), "n1");
  ASSERT_TRUE(gpus[0].gpu().has_mig());
  EXPECT_EQ(gpus[0].gpu().mig().gpu_instance_id(), 1);

  // The time-sliced GPU: both jobs see the device's OFU, flagged, each counts half a GPU.
  for (const char* id : {"ts-a", "ts-b"}) {
    const v1::JobOfuSummary s = Summary(id);
    EXPECT_NEAR(s.ofu(), 0.5, 1e-6) << id;
    EXPECT_THAT(s.flags(), Contains(v1::DATA_QUALITY_FLAG_SHARED_GPU)) << id;
    EXPECT_NEAR(s.gpu_hours(), 0.5 * 10 / 60, 1e-9) << id;
  }
  EXPECT_THAT(Summary("j1").flags(), ::testing::Not(Contains(v1::DATA_QUALITY_FLAG_SHARED_GPU)));

  // A model the catalog lacks: stored, counted, and the summary says why there is no OFU.
  const v1::JobOfuSummary odd = Summary("odd");
  EXPECT_THAT(odd.flags(), Contains(v1::DATA_QUALITY_FLAG_UNKNOWN_GPU_MODEL));
  EXPECT_THAT(odd.ofu_unavailable_reason(),
              HasSubstr("\"NVIDIA Imaginary X1\" is not in the GPU catalog"));
  EXPECT_THAT(odd.ofu_unavailable_reason(), HasSubstr("gpu_catalog.overrides"));
  EXPECT_EQ(a.ofu_unavailable_reason(), "");

  // The fleet: two instances (2 x 16/132), the shared GPU once, the unknown model's GPU.
  v1::GetFleetSummaryRequest req;
  *req.mutable_time_range()->mutable_start_time() = api::UnixMsToTimestamp(kOfuJobStartMs);
  *req.mutable_time_range()->mutable_end_time() =
      api::UnixMsToTimestamp(kOfuJobStartMs + 86'400'000);
  v1::GetFleetSummaryResponse fleet;
  ASSERT_TRUE(service_->DoGetFleetSummary(req, &fleet).ok());
  EXPECT_NEAR(fleet.total().gpu_hours(), (2 * 16.0 / 132 + 1 + 1) * 10 / 60, 1e-9);
}

}  // namespace
}  // namespace goodput::ofu
