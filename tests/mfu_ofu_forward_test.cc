// ofu's forwarder pushing OFU windows into a real goodput-mfu process, both on one real
// PostgreSQL: every job-level window ofu commits is stored by mfu exactly once (same values,
// newest revision) across an mfu restart, across ofu losing its record of acknowledgements
// (catch-up re-sends; mfu counts nothing twice), and across mfu losing its windows (it reports
// a gap and is re-sent everything).
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "goodput/v1/mfu.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "services/ofu/ofu_forwarder.h"
#include "services/platform/ordered_forwarder.h"
#include "tests/support/child_process.h"
#include "tests/support/free_port.h"
#include "tests/support/ofu_job_fixture.h"
#include "tests/support/service_process.h"
#include "tests/support/test_steps.h"

namespace goodput::testing {
namespace {

namespace v1 = ::goodput::v1;

class MfuFromOfu : public OfuJobFixture {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(OfuJobFixture::SetUp());
    absl::StatusOr<int> port = FreePort();
    ASSERT_TRUE(port.ok());
    mfu_port_ = *port;
    StartMfu();
    forwarder_ = std::make_unique<platform::OrderedForwarder>(
        ofu::ForwardLog(store_.get()),
        std::vector<platform::OrderedTarget>{
            ofu::MfuTarget(store_.get(),
                           grpc::CreateChannel(absl::StrCat("127.0.0.1:", mfu_port_),
                                               grpc::InsecureChannelCredentials()),
                           "", absl::Seconds(5))},
        platform::OrderedForwarderOptions{}, platform::Logger());
  }

  void StartMfu() {
    mfu_.reset();
    ASSERT_NO_FATAL_FAILURE(StartService(
        {.binary = BuiltBinary("services/mfu/goodput-mfu"),
         .config_yaml = absl::StrCat(PostgresConfigYaml(*pg_), "grpc:\n  port: ", mfu_port_, "\n")},
        &mfu_));
  }

  std::string Value(const std::string& sql) { return QueryScalar(*pg_, sql); }

  // Pushes until the forwarder has nothing left (the channel reconnects with a backoff after
  // mfu restarts, so it retries as its loop would).
  void Forward() {
    ASSERT_TRUE(PollUntil([&] { return forwarder_->StepOnce(0).ok(); }, absl::Seconds(30),
                          absl::Milliseconds(100)));
  }

  // What ofu committed and what mfu holds, start -> "revision/ofu", job-level windows only.
  std::string OfuSide() {
    return Value(
        "SELECT string_agg(extract(epoch FROM start_time)::bigint || '=' || revision || '/' || "
        "round(ofu::numeric, 12), ',' ORDER BY start_time) FROM ofu_windows WHERE gpu = ''");
  }
  std::string MfuSide() {
    return Value(
        "SELECT string_agg(extract(epoch FROM start_time)::bigint || '=' || revision || '/' || "
        "round(ofu::numeric, 12), ',' ORDER BY start_time) FROM mfu_ofu_windows");
  }

  std::unique_ptr<platform::OrderedForwarder> forwarder_;
  std::unique_ptr<ServiceProcess> mfu_;
  int mfu_port_ = 0;
};

TEST_F(MfuFromOfu, EveryCommittedWindowIsStoredOnceThroughRestartsAndCatchUp) {
  Feed(0, 10);
  Forward();
  EXPECT_EQ(MfuSide(), OfuSide());
  EXPECT_NE(OfuSide(), "");

  // mfu restarts; ofu loses its record of what mfu acknowledged and re-sends everything from
  // the start along with new windows: mfu answers the old pushes as duplicates.
  StartMfu();
  ASSERT_TRUE(store_->SetAckedSequence("mfu", 0).ok());
  Feed(10, 20);
  Forward();
  EXPECT_EQ(MfuSide(), OfuSide());
  EXPECT_EQ(Value("SELECT sequence FROM mfu_delivery_watermarks"),
            Value("SELECT max(commit_seq) FROM ofu_windows WHERE gpu = ''"));

  // mfu loses its windows and watermark (restored from an old backup): the next push is a gap,
  // and ofu re-sends everything above the watermark mfu reports.
  Sql("DELETE FROM mfu_ofu_windows; DELETE FROM mfu_delivery_watermarks");
  Feed(20, 25);
  Forward();
  EXPECT_EQ(MfuSide(), OfuSide());

  // And the windows reach the reconciliation of the job.
  auto stub = v1::MfuService::NewStub(mfu_->Channel());
  v1::GetReconciliationRequest req;
  req.mutable_job()->set_cluster("c1");
  req.mutable_job()->set_job_id("j1");
  v1::GetReconciliationResponse rec;
  grpc::ClientContext ctx;
  ASSERT_TRUE(stub->GetReconciliation(&ctx, req, &rec).ok());
  EXPECT_EQ(std::to_string(rec.points_size()),
            Value("SELECT count(*) FROM ofu_windows WHERE gpu = ''"));
}

}  // namespace
}  // namespace goodput::testing
