#include "sdk/cpp/reporter.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace goodput::sdk {
namespace {

using goodput::v1::MfuReport;

// An in-process MfuService: stores reports by report_id, refuses non-positive TFLOP/s, and
// can be told to fail the next calls.
class FakeMfuService final : public goodput::v1::MfuService::Service {
 public:
  grpc::Status ReportMfu(grpc::ServerContext* context, const goodput::v1::ReportMfuRequest* request,
                         goodput::v1::ReportMfuResponse* response) override {
    if (auto injected = NextFailure(context); !injected.ok()) return injected;
    if (const std::string reason = RefusalReason(request->report()); !reason.empty()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, reason);
    }
    response->set_report_id(request->report().report_id());
    response->set_duplicate(!Store(request->report()));
    return grpc::Status::OK;
  }

  grpc::Status StreamMfuReports(grpc::ServerContext* context,
                                grpc::ServerReader<goodput::v1::StreamMfuReportsRequest>* reader,
                                goodput::v1::StreamMfuReportsResponse* response) override {
    if (stream_unimplemented) {
      return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "StreamMfuReports: not built yet");
    }
    if (auto injected = NextFailure(context); !injected.ok()) return injected;
    goodput::v1::StreamMfuReportsRequest batch;
    while (reader->Read(&batch)) {
      for (int i = 0; i < batch.reports_size(); ++i) {
        const MfuReport& report = batch.reports(i);
        if (const std::string reason = RefusalReason(report); !reason.empty()) {
          response->set_refused_count(response->refused_count() + 1);
          auto* refusal = response->add_refusals();
          refusal->set_batch_id(batch.batch_id());
          refusal->set_index(i);
          refusal->set_item_id(report.report_id());
          refusal->set_message(reason);
        } else if (Store(report)) {
          response->set_stored_count(response->stored_count() + 1);
        } else {
          response->set_duplicate_count(response->duplicate_count() + 1);
        }
      }
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (!fail_after_store.empty()) {
      const grpc::StatusCode code = fail_after_store.front();
      fail_after_store.erase(fail_after_store.begin());
      return grpc::Status(code, "injected after storing");
    }
    return grpc::Status::OK;
  }

  std::vector<MfuReport> Reports() {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<MfuReport> out;
    for (const auto& [id, report] : reports_) out.push_back(report);
    std::sort(out.begin(), out.end(),
              [](const MfuReport& a, const MfuReport& b) { return a.step() < b.step(); });
    return out;
  }

  std::string LastAuthorization() {
    std::lock_guard<std::mutex> lock(mu_);
    return last_authorization_;
  }

  void FailNext(std::vector<grpc::StatusCode> codes) {
    std::lock_guard<std::mutex> lock(mu_);
    fail_next_ = std::move(codes);
  }

  bool stream_unimplemented = false;
  std::vector<grpc::StatusCode> fail_after_store;  // guarded by mu_

 private:
  static std::string RefusalReason(const MfuReport& report) {
    if (report.measurement_case() == MfuReport::MEASUREMENT_NOT_SET) {
      return "report has no measurement";
    }
    if (report.has_model_tflops_per_gpu() && report.model_tflops_per_gpu() <= 0) {
      return absl::StrCat("report ", report.report_id(),
                          ": model_tflops_per_gpu=", report.model_tflops_per_gpu(), " is not > 0");
    }
    return "";
  }

  grpc::Status NextFailure(grpc::ServerContext* context) {
    std::lock_guard<std::mutex> lock(mu_);
    const auto& metadata = context->client_metadata();
    if (auto it = metadata.find("authorization"); it != metadata.end()) {
      last_authorization_ = std::string(it->second.data(), it->second.size());
    }
    if (fail_next_.empty()) return grpc::Status::OK;
    const grpc::StatusCode code = fail_next_.front();
    fail_next_.erase(fail_next_.begin());
    return grpc::Status(code, "injected");
  }

  // True when newly stored, false for a known report_id.
  bool Store(const MfuReport& report) {
    std::lock_guard<std::mutex> lock(mu_);
    return reports_.emplace(report.report_id(), report).second;
  }

  std::mutex mu_;
  std::map<std::string, MfuReport> reports_;
  std::vector<grpc::StatusCode> fail_next_;
  std::string last_authorization_;
};

class TestServer {
 public:
  explicit TestServer(int port = 0) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort(absl::StrCat("127.0.0.1:", port), grpc::InsecureServerCredentials(),
                             &port_);
    builder.RegisterService(&service);
    server_ = builder.BuildAndStart();
  }
  ~TestServer() { Stop(); }
  void Stop() {
    if (server_) {
      server_->Shutdown(std::chrono::system_clock::now());
      server_->Wait();
      server_.reset();
    }
  }
  int port() const { return port_; }
  std::string endpoint() const { return absl::StrCat("127.0.0.1:", port_); }
  bool running() const { return server_ != nullptr && port_ > 0; }

  FakeMfuService service;

 private:
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

ReporterOptions FastOptions(const std::string& endpoint) {
  ReporterOptions options;
  options.endpoint = endpoint;
  options.cluster = "eos";
  options.job_id = "4211873";
  options.framework = "megatron-lm";
  options.flush_interval = absl::Milliseconds(50);
  options.initial_backoff = absl::Milliseconds(20);
  options.max_backoff = absl::Milliseconds(200);
  options.rpc_timeout = absl::Seconds(5);
  options.close_timeout = absl::Seconds(5);
  return options;
}

std::unique_ptr<Reporter> MakeReporter(const ReporterOptions& options) {
  auto reporter = Reporter::Create(options);
  EXPECT_TRUE(reporter.ok()) << reporter.status();
  return reporter.ok() ? std::move(*reporter) : nullptr;
}

int FreePortWithoutServer() {
  TestServer server;
  return server.port();
}

TEST(Reporter, ReportsLandWithTheirFields) {
  TestServer server;
  ASSERT_TRUE(server.running());
  ReporterOptions options = FastOptions(server.endpoint());
  options.token = "sdk-secret";
  auto reporter = MakeReporter(options);
  ASSERT_NE(reporter, nullptr);

  EXPECT_TRUE(reporter->Report({.tflops_per_gpu = 412.5,
                                .step = 1,
                                .tokens_per_s = 9e5,
                                .precision_mix = {{goodput::v1::PRECISION_BF16, 0.75},
                                                  {goodput::v1::PRECISION_FP8, 0.25}}}));
  EXPECT_TRUE(reporter->Report({.total_tflops = 3300, .gpu_count = 8, .step = 2}));
  EXPECT_TRUE(reporter->Report({.flops_per_step = 4.2e15, .step_time_s = 1.5, .step = 3}));
  EXPECT_TRUE(reporter->Report({.mfu = 0.41, .step = 4, .interval_s = 2.0}));
  ASSERT_TRUE(reporter->Flush(absl::Seconds(10)));

  const std::vector<MfuReport> reports = server.service.Reports();
  ASSERT_EQ(reports.size(), 4u);
  std::set<std::string> ids;
  for (const MfuReport& r : reports) {
    ids.insert(r.report_id());
    EXPECT_EQ(r.job().cluster(), "eos");
    EXPECT_EQ(r.job().job_id(), "4211873");
    EXPECT_EQ(r.framework(), "megatron-lm");
    EXPECT_EQ(r.source(), goodput::v1::MFU_REPORT_SOURCE_SDK);
    const auto& interval = r.interval();
    EXPECT_LT(std::make_pair(interval.start_time().seconds(), interval.start_time().nanos()),
              std::make_pair(interval.end_time().seconds(), interval.end_time().nanos()));
  }
  EXPECT_EQ(ids.size(), 4u);
  EXPECT_EQ(reports[0].model_tflops_per_gpu(), 412.5);
  EXPECT_EQ(reports[0].tokens_per_s(), 9e5);
  ASSERT_EQ(reports[0].precision_mix_size(), 2);
  EXPECT_EQ(reports[0].precision_mix(1).precision(), goodput::v1::PRECISION_FP8);
  EXPECT_EQ(reports[1].total_throughput().gpu_count(), 8);
  EXPECT_EQ(reports[2].step_flops().step_time_s(), 1.5);
  EXPECT_EQ(reports[3].mfu(), 0.41);
  EXPECT_EQ(
      reports[3].interval().end_time().seconds() - reports[3].interval().start_time().seconds(), 2);
  // Consecutive reports cover consecutive intervals.
  EXPECT_EQ(reports[1].interval().start_time().SerializeAsString(),
            reports[0].interval().end_time().SerializeAsString());
  EXPECT_EQ(server.service.LastAuthorization(), "Bearer sdk-secret");
  const ReporterStats stats = reporter->Stats();
  EXPECT_EQ(stats.sent, 4);
  EXPECT_EQ(stats.queued, 0);
}

TEST(Reporter, ServiceDownDoesNotBlockAndNothingIsLostOnceItReturns) {
  const int port = FreePortWithoutServer();
  ASSERT_GT(port, 0);
  auto reporter = MakeReporter(FastOptions(absl::StrCat("127.0.0.1:", port)));
  ASSERT_NE(reporter, nullptr);
  const auto start = std::chrono::steady_clock::now();
  for (int step = 0; step < 10000; ++step) {
    reporter->Report({.tflops_per_gpu = 400.0, .step = step});
  }
  const double elapsed_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  std::printf("10,000 Report() calls with the service down: %.1f ms total\n", elapsed_ms);
  EXPECT_EQ(reporter->Stats().dropped, 0);

  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (reporter->Stats().retries == 0 && absl::Now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_GT(reporter->Stats().retries, 0);

  TestServer server(port);
  ASSERT_TRUE(server.running());
  ASSERT_TRUE(reporter->Flush(absl::Seconds(30)));
  const std::vector<MfuReport> reports = server.service.Reports();
  ASSERT_EQ(reports.size(), 10000u);
  for (int step = 0; step < 10000; ++step) EXPECT_EQ(reports[step].step(), step);
  EXPECT_EQ(reporter->Stats().sent, 10000);
}

TEST(Reporter, FullQueueDropsAndCounts) {
  TestServer server;
  ReporterOptions options = FastOptions(server.endpoint());
  options.queue_capacity = 5;
  options.batch_size = 100;
  options.flush_interval = absl::Seconds(60);  // the sender stays asleep
  auto reporter = MakeReporter(options);
  std::vector<bool> accepted;
  for (int i = 0; i < 8; ++i) accepted.push_back(reporter->Report({.mfu = 0.4}));
  EXPECT_EQ(accepted, std::vector<bool>({true, true, true, true, true, false, false, false}));
  EXPECT_EQ(reporter->Stats().dropped, 3);
  EXPECT_EQ(reporter->Stats().queued, 5);
  ASSERT_TRUE(reporter->Flush(absl::Seconds(10)));
  EXPECT_EQ(reporter->Stats().sent, 5);
}

TEST(Reporter, RefusedReportsAreCountedAndNotRetried) {
  TestServer server;
  auto reporter = MakeReporter(FastOptions(server.endpoint()));
  reporter->Report({.tflops_per_gpu = -5.0});
  reporter->Report({.tflops_per_gpu = 300.0});
  ASSERT_TRUE(reporter->Flush(absl::Seconds(10)));
  const ReporterStats stats = reporter->Stats();
  EXPECT_EQ(stats.sent, 1);
  EXPECT_EQ(stats.refused, 1);
  EXPECT_EQ(stats.retries, 0);
}

TEST(Reporter, FallsBackToUnaryCallsWhenStreamingIsNotServed) {
  TestServer server;
  server.service.stream_unimplemented = true;
  auto reporter = MakeReporter(FastOptions(server.endpoint()));
  reporter->Report({.tflops_per_gpu = -5.0});
  reporter->Report({.tflops_per_gpu = 300.0, .step = 1});
  reporter->Report({.mfu = 0.3, .step = 2});
  ASSERT_TRUE(reporter->Flush(absl::Seconds(10)));
  EXPECT_EQ(reporter->Stats().sent, 2);
  EXPECT_EQ(reporter->Stats().refused, 1);
  EXPECT_EQ(server.service.Reports().size(), 2u);
}

TEST(Reporter, RetriesTransientErrorsWithoutCountingTwice) {
  TestServer server;
  server.service.FailNext({grpc::StatusCode::UNAVAILABLE});
  server.service.fail_after_store = {grpc::StatusCode::DEADLINE_EXCEEDED};
  auto reporter = MakeReporter(FastOptions(server.endpoint()));
  for (int step = 0; step < 5; ++step) reporter->Report({.tflops_per_gpu = 300.0, .step = step});
  ASSERT_TRUE(reporter->Flush(absl::Seconds(10)));
  EXPECT_EQ(server.service.Reports().size(), 5u);
  const ReporterStats stats = reporter->Stats();
  EXPECT_EQ(stats.sent, 5);
  EXPECT_EQ(stats.duplicates, 5);  // the stored-but-unanswered batch came back as duplicates
  EXPECT_EQ(stats.retries, 2);
}

TEST(Reporter, GivesUpOnPermanentErrors) {
  TestServer server;
  server.service.FailNext({grpc::StatusCode::UNAUTHENTICATED});
  auto reporter = MakeReporter(FastOptions(server.endpoint()));
  reporter->Report({.mfu = 0.4});
  reporter->Report({.mfu = 0.5});
  ASSERT_TRUE(reporter->Flush(absl::Seconds(10)));
  EXPECT_EQ(reporter->Stats().failed, 2);
  EXPECT_EQ(reporter->Stats().retries, 0);
}

TEST(Reporter, RejectsFiguresWithoutExactlyOneMeasurement) {
  TestServer server;
  auto reporter = MakeReporter(FastOptions(server.endpoint()));
  EXPECT_FALSE(reporter->Report({.step = 3}));
  EXPECT_FALSE(reporter->Report({.mfu = 0.3, .tflops_per_gpu = 100}));
  EXPECT_FALSE(reporter->Report({.total_tflops = 100}));
  EXPECT_EQ(reporter->Stats().invalid, 3);
}

TEST(Reporter, DestructorDeliversWhatIsQueued) {
  TestServer server;
  {
    ReporterOptions options = FastOptions(server.endpoint());
    options.flush_interval = absl::Seconds(60);
    auto reporter = MakeReporter(options);
    for (int step = 0; step < 3; ++step) reporter->Report({.mfu = 0.4, .step = step});
  }
  EXPECT_EQ(server.service.Reports().size(), 3u);
}

TEST(Reporter, CloseGivesUpAfterItsTimeLimit) {
  auto reporter = MakeReporter(FastOptions(absl::StrCat("127.0.0.1:", FreePortWithoutServer())));
  for (int i = 0; i < 3; ++i) reporter->Report({.mfu = 0.4});
  EXPECT_FALSE(reporter->Close(absl::Milliseconds(200)));
  EXPECT_EQ(reporter->Stats().abandoned, 3);
  EXPECT_EQ(reporter->Stats().queued, 0);
  EXPECT_FALSE(reporter->Report({.mfu = 0.4}));
  EXPECT_EQ(reporter->Stats().dropped, 1);
}

TEST(ReporterOptions, EnvironmentFillsWhatIsLeftEmpty) {
  const std::map<std::string, std::string> env = {
      {"GOODPUT_ENDPOINT", "mfu:7004"},  {"GOODPUT_TOKEN", "t"},
      {"SLURM_CLUSTER_NAME", "eos"},     {"SLURM_JOB_ID", "4211880"},
      {"SLURM_ARRAY_JOB_ID", "4211873"}, {"SLURM_ARRAY_TASK_ID", "7"}};
  auto getenv = [&env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  ReporterOptions options = WithEnvironment({}, getenv);
  EXPECT_EQ(options.endpoint, "mfu:7004");
  EXPECT_EQ(options.token, "t");
  EXPECT_EQ(options.cluster, "eos");
  EXPECT_EQ(options.job_id, "4211873_7");
  EXPECT_EQ(WithEnvironment({.job_id = "9"}, getenv).job_id, "9");
  EXPECT_EQ(WithEnvironment({},
                            [](const char* name) -> const char* {
                              return std::string(name) == "OSMO_WORKFLOW_ID" ? "train-3" : nullptr;
                            })
                .job_id,
            "train-3");
}

TEST(ReporterOptions, CreateNamesWhatIsMissing) {
  auto no_endpoint = Reporter::Create(ReporterOptions{.job_id = "1"});
  EXPECT_EQ(no_endpoint.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(no_endpoint.status().message()), ::testing::HasSubstr("endpoint"));
  auto no_job = Reporter::Create(ReporterOptions{.endpoint = "127.0.0.1:1"});
  EXPECT_THAT(std::string(no_job.status().message()), ::testing::HasSubstr("job_id"));
  auto bad = Reporter::Create(ReporterOptions{.endpoint = "http://", .job_id = "1"});
  EXPECT_THAT(std::string(bad.status().message()), ::testing::HasSubstr("endpoint=\"http://\""));
}

}  // namespace
}  // namespace goodput::sdk
