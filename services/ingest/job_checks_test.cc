#include "services/ingest/job_checks.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace goodput::ingest {
namespace {

using ::testing::HasSubstr;

v1::Job GoodJob() {
  v1::Job job;
  job.mutable_key()->set_cluster("eos");
  job.mutable_key()->set_job_id("4211873");
  job.set_user("alice");
  job.set_name("pretrain");
  v1::GpuAllocation* a = job.add_allocations();
  a->mutable_gpu()->set_host("gpu-node-042");
  a->mutable_gpu()->set_gpu_index(0);
  return job;
}

TEST(CheckJob, AcceptsWhatASchedulerSends) {
  EXPECT_TRUE(CheckJob(GoodJob(), nullptr).ok());
  v1::Job array_task = GoodJob();
  array_task.mutable_key()->set_job_id("9100_3");
  EXPECT_TRUE(CheckJob(array_task, nullptr).ok());
  v1::Job pod = GoodJob();
  pod.mutable_key()->set_job_id("research/llm-pretrain");
  EXPECT_TRUE(CheckJob(pod, nullptr).ok());
}

TEST(CheckJob, TakesEachWorkloadKindAndRefusesAnUnknownOneNamingTheField) {
  v1::Job job = GoodJob();
  job.set_workload_kind(v1::WORKLOAD_KIND_INFERENCE);
  EXPECT_TRUE(CheckJob(job, nullptr).ok());
  job.set_workload_kind(static_cast<v1::WorkloadKind>(9));
  absl::Status s = CheckJob(job, nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("job.workload_kind=9 is not a WorkloadKind value"));
}

TEST(CheckJob, RefusesJobIdsAShellOrACommandLineWouldInterpretShowingThemEscaped) {
  struct Case {
    std::string job_id;
    std::string message;
  };
  const Case cases[] = {
      {"-1", "job.key.job_id=\"-1\" starts with '-', which a command would read as an option; a "
             "job id may not"},
      {"42;reboot", "job.key.job_id=\"42;reboot\" contains ';' at byte 2, not allowed in a job "
                    "id (letters, digits and . _ - + : / @ = only)"},
      {"4\n2", "job.key.job_id=\"4\\x0a2\" contains the control character 0x0A at byte 1"},
      {"$(id)", "job.key.job_id=\"$(id)\" contains '$' at byte 0"},
      {"`id`", "job.key.job_id=\"`id`\" contains '`' at byte 0"},
      {"a'b", "job.key.job_id=\"a'b\" contains ''' at byte 1"},
      {"<img src=x onerror=alert(1)>", "job.key.job_id=\"<img src=x onerror=alert(1)>\" contains "
                                      "'<' at byte 0"},
  };
  for (const Case& c : cases) {
    v1::Job job = GoodJob();
    job.mutable_key()->set_job_id(c.job_id);
    absl::Status s = CheckJob(job, nullptr);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.job_id;
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.message)) << c.job_id;
  }
  v1::EndJobRequest end;
  end.mutable_key()->set_cluster("eos");
  end.mutable_key()->set_job_id("--help");
  EXPECT_THAT(std::string(CheckJobEnd(end).message()),
              HasSubstr("key.job_id=\"--help\" starts with '-'"));
}

TEST(CheckJob, RefusesAllocationHostsWithUnsafeCharacters) {
  v1::Job job = GoodJob();
  job.mutable_allocations(0)->mutable_gpu()->set_host("node 1");
  EXPECT_THAT(std::string(CheckJob(job, nullptr).message()),
              HasSubstr("job.allocations[0].gpu.host=\"node 1\" contains ' ' at byte 4"));
  job.mutable_allocations(0)->mutable_gpu()->set_host("n1");
  job.mutable_allocations(0)->mutable_gpu()->mutable_mig()->set_profile("1g.10gb\x1b");
  EXPECT_THAT(std::string(CheckJob(job, nullptr).message()),
              HasSubstr("job.allocations[0].gpu.mig.profile=\"1g.10gb\\x1b\" contains the control"));
}

TEST(CheckJob, KeepsMarkupInFreeTextForTheDashboardToEscape) {
  v1::Job job = GoodJob();
  job.set_user("<img src=x onerror=alert(1)>");
  job.set_workload_fingerprint("\"'`$(x)");
  EXPECT_TRUE(CheckJob(job, nullptr).ok());
}

TEST(CheckJob, AppliesTheConfiguredLimits) {
  JobLimits limits;
  limits.max_labels = 2;
  limits.max_text_bytes = 10;
  limits.max_label_name_bytes = 3;
  limits.max_label_value_bytes = 5;
  v1::Job job = GoodJob();
  (*job.mutable_labels())["a"] = "1";
  (*job.mutable_labels())["b"] = "2";
  EXPECT_TRUE(CheckJob(job, nullptr, limits).ok());
  (*job.mutable_labels())["c"] = "3";
  EXPECT_EQ(CheckJob(job, nullptr, limits).message(),
            "job.labels has 3 entries; the limit is 2 (ingest.limits.max_job_labels)");

  v1::Job long_user = GoodJob();
  long_user.set_user("abcdefghijk");
  EXPECT_EQ(CheckJob(long_user, nullptr, limits).message(),
            "job.user=\"abcdefghijk\" is 11 bytes; the limit is 10");

  v1::Job long_label = GoodJob();
  (*long_label.mutable_labels())["team"] = "x";
  EXPECT_THAT(std::string(CheckJob(long_label, nullptr, limits).message()),
              HasSubstr("job.labels key=\"team\" is 4 bytes"));
  (*long_label.mutable_labels()).clear();
  (*long_label.mutable_labels())["t"] = "abcdef";
  EXPECT_EQ(CheckJob(long_label, nullptr, limits).message(),
            "job.labels[t]=\"abcdef\" is 6 bytes; the limit is 5");

  // A configured limit above what PostgreSQL holds is capped there.
  limits.max_text_bytes = 1 << 30;
  long_user.set_user(std::string(api::kMaxFreeTextBytes + 1, 'u'));
  EXPECT_EQ(CheckJob(long_user, nullptr, limits).code(), absl::StatusCode::kInvalidArgument);
}

TEST(CheckJobRequestSize, RefusesARequestAboveTheLimitNamingTheKey) {
  JobLimits limits;
  limits.max_request_bytes = 64;
  v1::RegisterJobRequest request;
  *request.mutable_job() = GoodJob();
  EXPECT_TRUE(CheckJobRequestSize(request, "RegisterJob", limits).ok());
  request.mutable_job()->set_name(std::string(100, 'n'));
  absl::Status s = CheckJobRequestSize(request, "RegisterJob", limits);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("bytes; the limit is 64 bytes (ingest.jobs.max_request_bytes)"));
}

}  // namespace
}  // namespace goodput::ingest
