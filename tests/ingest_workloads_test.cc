// Workload kinds and serving engines' metrics in goodput-ingest against a real PostgreSQL: a
// job's kind from its registration, from a Kubernetes pod label, or inferred once a running
// job sends vLLM metrics; the kind filter of ListJobs; vLLM's /metrics scraped and SGLang's
// series remote_written, stored as serving samples attributed to the job by host or by label.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "goodput/v1/job.grpc.pb.h"
#include "google/protobuf/field_mask.pb.h"
#include "grpcpp/grpcpp.h"
#include "httplib.h"
#include "prometheus/remote.pb.h"
#include "services/alerting/report_store.h"
#include "services/platform/pg_pool.h"
#include "snappy.h"
#include "tests/support/child_process.h"
#include "tests/support/postgres_server.h"
#include "tests/support/service_process.h"
#include "tests/support/test_steps.h"

namespace goodput {
namespace {

using ::goodput::testing::PollUntil;
using ::goodput::testing::PostgresServer;
using ::goodput::testing::ServiceProcess;
using ::testing::HasSubstr;

int64_t NowMs() { return absl::ToUnixMillis(absl::Now()); }

void SetTime(int64_t ms, google::protobuf::Timestamp* t) {
  t->set_seconds(ms / 1000);
  t->set_nanos(static_cast<int32_t>((ms % 1000) * 1000000));
}

std::string ReadData(const std::string& name) {
  std::ifstream in((testing::SourceDir() / "tests/data/serving" / name).string());
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class WorkloadsIntegration : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(testing::StartPostgres(&pg_)); }
  void TearDown() override {
    if (engine_ != nullptr) engine_->stop();
    if (engine_thread_.joinable()) engine_thread_.join();
  }

  void StartIngest(const std::string& extra_config, int maintenance_interval_s = 3600) {
    ASSERT_NO_FATAL_FAILURE(testing::StartService(
        {.binary = testing::BuiltBinary("services/ingest/goodput-ingest"),
         .config_yaml = absl::StrCat(testing::PostgresConfigYaml(*pg_), "redis:\n  host: \"\"\n",
                                     "ingest:\n  maintenance_interval_s: ", maintenance_interval_s,
                                     "\n", "  remote_write:\n    cluster: eos\n", extra_config),
         .extra_args = testing::MigrateArgs()},
        &ingest_));
    jobs_ = v1::JobService::NewStub(ingest_->Channel());
  }

  // A serving engine's /metrics endpoint on loopback answering `body(n)` to its n-th scrape.
  void StartEngine(std::function<std::string(int)> body) {
    engine_ = std::make_unique<httplib::Server>();
    engine_->Get("/metrics", [this, body](const httplib::Request&, httplib::Response& res) {
      res.set_content(body(++scrapes_), "text/plain; version=0.0.4");
    });
    engine_port_ = engine_->bind_to_any_port("127.0.0.1");
    engine_thread_ = std::thread([this] { engine_->listen_after_bind(); });
  }

  std::string Query(const std::string& sql) { return testing::QueryScalar(*pg_, sql); }

  grpc::Status Register(const v1::Job& job, v1::RegisterJobResponse* response) {
    grpc::ClientContext ctx;
    v1::RegisterJobRequest request;
    *request.mutable_job() = job;
    return jobs_->RegisterJob(&ctx, request, response);
  }

  v1::Job Get(const std::string& id) {
    grpc::ClientContext ctx;
    v1::GetJobRequest request;
    request.mutable_key()->set_cluster("eos");
    request.mutable_key()->set_job_id(id);
    v1::GetJobResponse response;
    grpc::Status s = jobs_->GetJob(&ctx, request, &response);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return response.job();
  }

  std::vector<std::string> ListIds(v1::WorkloadKind kind) {
    grpc::ClientContext ctx;
    v1::ListJobsRequest request;
    request.set_cluster("eos");
    request.set_workload_kind(kind);
    v1::ListJobsResponse response;
    grpc::Status s = jobs_->ListJobs(&ctx, request, &response);
    EXPECT_TRUE(s.ok()) << s.error_message();
    std::vector<std::string> ids;
    for (const v1::Job& j : response.jobs()) ids.push_back(j.key().job_id());
    std::sort(ids.begin(), ids.end());
    return ids;
  }

  static v1::Job Job(const std::string& id, const std::string& host, int gpu, int64_t start_ms) {
    v1::Job job;
    job.mutable_key()->set_cluster("eos");
    job.mutable_key()->set_job_id(id);
    job.set_scheduler(v1::SCHEDULER_KIND_KUBERNETES);
    SetTime(start_ms, job.mutable_start_time());
    auto* a = job.add_allocations();
    a->mutable_gpu()->set_host(host);
    a->mutable_gpu()->set_gpu_index(gpu);
    return job;
  }

  std::unique_ptr<PostgresServer> pg_;
  std::unique_ptr<ServiceProcess> ingest_;
  std::unique_ptr<v1::JobService::Stub> jobs_;
  std::unique_ptr<httplib::Server> engine_;
  std::thread engine_thread_;
  int engine_port_ = 0;
  std::atomic<int> scrapes_ = 0;
};

TEST_F(WorkloadsIntegration, KindComesFromTheRegistrationOrAPodLabelAndListJobsFiltersByIt) {
  ASSERT_NO_FATAL_FAILURE(
      StartIngest("  jobs:\n    workload_kind_labels: [app.kubernetes.io/component]\n"));
  const int64_t start = NowMs() - 60'000;
  v1::RegisterJobResponse r;
  v1::Job train = Job("train-1", "node-1", 0, start);
  train.set_workload_kind(v1::WORKLOAD_KIND_TRAINING);
  ASSERT_TRUE(Register(train, &r).ok());
  EXPECT_EQ(r.job().workload_kind(), v1::WORKLOAD_KIND_TRAINING);
  EXPECT_EQ(r.job().workload_kind_source(), v1::WORKLOAD_KIND_SOURCE_REGISTERED);

  v1::Job serve = Job("serving/llama-7b", "node-1", 1, start);
  (*serve.mutable_labels())["app.kubernetes.io/component"] = "Serving";
  ASSERT_TRUE(Register(serve, &r).ok());
  EXPECT_EQ(r.job().workload_kind(), v1::WORKLOAD_KIND_INFERENCE);
  EXPECT_EQ(r.job().workload_kind_source(), v1::WORKLOAD_KIND_SOURCE_LABEL);

  ASSERT_TRUE(Register(Job("plain-1", "node-1", 2, start), &r).ok());
  EXPECT_EQ(r.job().workload_kind(), v1::WORKLOAD_KIND_UNSPECIFIED);

  // Another node's prolog with another kind is refused; the scheduler's kind beats a label's.
  v1::Job conflicting = Job("train-1", "node-2", 0, start);
  conflicting.set_workload_kind(v1::WORKLOAD_KIND_INTERACTIVE);
  grpc::Status refused = Register(conflicting, &r);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_THAT(refused.error_message(), HasSubstr("workload_kind=training, not interactive"));
  v1::Job registered = Job("serving/llama-7b", "node-2", 1, start);
  registered.set_workload_kind(v1::WORKLOAD_KIND_OTHER);
  ASSERT_TRUE(Register(registered, &r).ok());
  EXPECT_EQ(r.job().workload_kind(), v1::WORKLOAD_KIND_OTHER);
  EXPECT_EQ(r.job().workload_kind_source(), v1::WORKLOAD_KIND_SOURCE_REGISTERED);

  // UpdateJob changes it.
  {
    grpc::ClientContext ctx;
    v1::UpdateJobRequest update;
    update.mutable_job()->mutable_key()->set_cluster("eos");
    update.mutable_job()->mutable_key()->set_job_id("serving/llama-7b");
    update.mutable_job()->set_workload_kind(v1::WORKLOAD_KIND_INFERENCE);
    update.mutable_update_mask()->add_paths("workload_kind");
    v1::UpdateJobResponse response;
    grpc::Status s = jobs_->UpdateJob(&ctx, update, &response);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(response.job().workload_kind(), v1::WORKLOAD_KIND_INFERENCE);
  }
  // A kind that is none is refused naming the field.
  v1::Job bad = Job("bad-1", "node-3", 0, start);
  bad.set_workload_kind(static_cast<v1::WorkloadKind>(7));
  grpc::Status invalid = Register(bad, &r);
  EXPECT_EQ(invalid.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(invalid.error_message(), HasSubstr("job.workload_kind=7"));

  EXPECT_EQ(ListIds(v1::WORKLOAD_KIND_INFERENCE), std::vector<std::string>{"serving/llama-7b"});
  EXPECT_EQ(ListIds(v1::WORKLOAD_KIND_TRAINING), (std::vector<std::string>{"plain-1", "train-1"}));
  EXPECT_TRUE(ListIds(v1::WORKLOAD_KIND_INTERACTIVE).empty());
}

// A scraped vLLM endpoint on a host whose GPU one job holds: its lines land as serving
// samples of that job, and the job, registered without a kind an hour ago, is inference.
TEST_F(WorkloadsIntegration, ScrapedVllmMetricsAreAttributedByHostAndMakeTheJobInference) {
  // The real lines first (their counters fixed), then counters that grow with each scrape
  // in another engine-core series.
  const std::string real =
      ReadData("vllm_v1_from_source.txt") + ReadData("vllm_0_10_production_stack_617.txt");
  StartEngine([real](int n) {
    const std::string labels = "{engine=\"1\",model_name=\"meta-llama/Llama-3.1-8B-Instruct\"}";
    return absl::StrCat(real, "vllm:prompt_tokens_total", labels, " ", 1000 * n, "\n",
                        "vllm:generation_tokens_total", labels, " ", 3000 * n, "\n",
                        "vllm:request_success_total", labels, " ", 10 * n, "\n",
                        "vllm:estimated_flops_per_gpu_total", labels, " ", 1e15 * n, "\n");
  });
  ASSERT_NO_FATAL_FAILURE(StartIngest(
      absl::StrCat("  scrape:\n    targets:\n      - url: http://127.0.0.1:", engine_port_,
                   "/metrics\n        cluster: eos\n        interval_s: 1\n")));
  v1::RegisterJobResponse r;
  ASSERT_TRUE(Register(Job("vllm-svc", "127.0.0.1", 0, NowMs() - 3'600'000), &r).ok());
  ASSERT_TRUE(PollUntil(
      [&] {
        return std::stoi(Query("SELECT count(DISTINCT sample_time) FROM serving_samples s "
                               "JOIN jobs j ON j.id = s.job WHERE j.job_id = 'vllm-svc'")) >= 3;
      },
      absl::Seconds(60)))
      << Query("SELECT count(*) FROM serving_samples");
  EXPECT_EQ(Query("SELECT string_agg(DISTINCT metric, ',' ORDER BY metric) FROM serving_samples"),
            "flops_per_gpu,generation_tokens,prompt_tokens,requests,running,waiting");
  EXPECT_EQ(Query("SELECT DISTINCT engine || ' ' || model || ' ' || host FROM serving_samples"),
            "vllm meta-llama/Llama-3.1-8B-Instruct 127.0.0.1");
  EXPECT_EQ(Query("SELECT value FROM serving_samples WHERE metric = 'flops_per_gpu' "
                  "AND series = 'engine=0' LIMIT 1"),
            "9.1e+19");
  // Scrapes before the job was registered stay unattributed; none after.
  EXPECT_EQ(Query("SELECT count(*) FROM serving_samples s JOIN jobs j ON j.cluster = s.cluster "
                  "WHERE s.job IS NULL AND s.sample_time >= j.created_at + interval '1 second'"),
            "0");
  v1::Job job = Get("vllm-svc");
  EXPECT_EQ(job.workload_kind(), v1::WORKLOAD_KIND_INFERENCE);
  EXPECT_EQ(job.workload_kind_source(), v1::WORKLOAD_KIND_SOURCE_INFERRED);

  // What the job report reads: the counters' increases over the job, the real series' fixed
  // counters adding nothing; the FLOPs estimate is per GPU, averaged over the series.
  auto pool = platform::PgPool::Create({.dsn = pg_->Dsn("goodput")});
  ASSERT_TRUE(pool.ok()) << pool.status();
  alerting::ReportStore reports(pool->get());
  absl::StatusOr<alerting::ReportJobInfo> info = reports.JobInfo("eos", "vllm-svc");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->job.workload_kind(), v1::WORKLOAD_KIND_INFERENCE);
  ASSERT_TRUE(info->serving.has_value());
  const alerting::ServingTotals& t = *info->serving;
  EXPECT_EQ(t.engines, "vllm");
  EXPECT_GT(t.prompt_tokens, 0);
  EXPECT_DOUBLE_EQ(t.generation_tokens, 3 * t.prompt_tokens);
  EXPECT_DOUBLE_EQ(t.requests, t.prompt_tokens / 100);
  ASSERT_TRUE(t.has_flops);
  EXPECT_DOUBLE_EQ(t.flops_per_gpu, 1e12 * t.prompt_tokens / 2);  // two series, one grows
  EXPECT_GT(t.served_s, 0);
}

// SGLang's series through remote_write: attributed by the job label, a job that started a
// minute ago is not (yet) inferred to be a service, and a retried request stores nothing twice.
TEST_F(WorkloadsIntegration, RemoteWrittenSglangSeriesAreAttributedByLabelAndStoredOnce) {
  ASSERT_NO_FATAL_FAILURE(StartIngest(""));
  v1::RegisterJobResponse r;
  ASSERT_TRUE(Register(Job("4211873", "gpu-node-9", 0, NowMs() - 60'000), &r).ok());
  prometheus::WriteRequest request;
  const int64_t t = NowMs();
  auto add = [&](const std::string& name, double value, const std::string& job_label) {
    prometheus::TimeSeries* s = request.add_timeseries();
    for (auto [k, v] : std::vector<std::pair<std::string, std::string>>{
             {"__name__", name},
             {"model_name", "meta-llama/Llama-3.1-8B-Instruct"},
             {"instance", "10.0.0.5:30000"},
             {"tp_rank", "0"},
             {"hpc_job", job_label}}) {
      prometheus::Label* l = s->add_labels();
      l->set_name(k);
      l->set_value(v);
    }
    prometheus::Sample* sample = s->add_samples();
    sample->set_value(value);
    sample->set_timestamp(t);
  };
  add("sglang:prompt_tokens_total", 8.128902e+06, "4211873");
  add("sglang:generation_tokens_total", 7.557572e+06, "4211873");
  add("sglang:num_running_reqs", 162, "4211873");
  add("sglang:num_queue_reqs", 3, "4211873");
  add("sglang:num_requests_total", 9000, "999");  // no such job: stored unattributed
  std::string raw = request.SerializeAsString();
  std::string body;
  snappy::Compress(raw.data(), raw.size(), &body);
  for (int attempt = 0; attempt < 2; ++attempt) {
    httplib::Client client("127.0.0.1", ingest_->http_port());
    client.set_read_timeout(30, 0);
    httplib::Result res = client.Post("/api/v1/write", {{"Content-Encoding", "snappy"}}, body,
                                      "application/x-protobuf");
    ASSERT_TRUE(res) << httplib::to_string(res.error());
    EXPECT_EQ(res->status, 200) << res->body;
    EXPECT_THAT(res->body, HasSubstr("5 serving samples"));
  }
  EXPECT_EQ(Query("SELECT count(*) FROM serving_samples"), "5");
  EXPECT_EQ(Query("SELECT count(*) FROM serving_samples s JOIN jobs j ON j.id = s.job "
                  "WHERE j.job_id = '4211873' AND s.engine = 'sglang' AND s.series = 'tp_rank=0'"),
            "4");
  EXPECT_EQ(Query("SELECT value FROM serving_samples WHERE metric = 'prompt_tokens'"), "8128902");
  EXPECT_EQ(Get("4211873").workload_kind(), v1::WORKLOAD_KIND_UNSPECIFIED);
}

// Serving samples are kept as long as GPU samples (ingest.retention_days).
TEST_F(WorkloadsIntegration, ServingSamplesOlderThanTheRetentionAreDeleted) {
  ASSERT_NO_FATAL_FAILURE(StartIngest("  retention_days: 7\n", /*maintenance_interval_s=*/1));
  testing::ExecuteAll(*pg_,
                      {"INSERT INTO serving_samples (cluster, engine, metric, sample_time, value, "
                       "batch_id) VALUES ('eos', 'vllm', 'running', now() - interval '8 days', 3, "
                       "'old'), ('eos', 'vllm', 'running', now() - interval '6 days', 4, 'kept')"});
  ASSERT_TRUE(PollUntil([&] { return Query("SELECT count(*) FROM serving_samples") == "1"; },
                        absl::Seconds(30)));
  EXPECT_EQ(Query("SELECT batch_id FROM serving_samples"), "kept");
}

}  // namespace
}  // namespace goodput
