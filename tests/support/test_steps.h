// Steps the integration tests share on top of the launchers. Each fails the test where it
// fails; call the void ones under ASSERT_NO_FATAL_FAILURE when later steps depend on them.
//
//   std::unique_ptr<PostgresServer> pg;
//   ASSERT_NO_FATAL_FAILURE(StartPostgres(&pg));   // with an empty `goodput` database
//   std::unique_ptr<ServiceProcess> mfu;
//   ASSERT_NO_FATAL_FAILURE(StartService({.binary = BuiltBinary("services/mfu/goodput-mfu"),
//                                         .config_yaml = PostgresConfigYaml(*pg),
//                                         .extra_args = MigrateArgs()},
//                                        &mfu));
//   EXPECT_EQ(QueryScalar(*pg, "SELECT count(*) FROM mfu_reports"), "0");
#pragma once

#include <chrono>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "goodput/v1/job.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/support/postgres_server.h"
#include "tests/support/redis_server.h"
#include "tests/support/service_process.h"

namespace goodput::testing {

// The database every service of the platform uses.
inline constexpr char kDatabase[] = "goodput";

// A PostgreSQL server with an empty database `goodput`.
inline void StartPostgres(std::unique_ptr<PostgresServer>* pg, PostgresServerOptions options = {}) {
  absl::StatusOr<std::unique_ptr<PostgresServer>> server = PostgresServer::Create(options);
  ASSERT_TRUE(server.ok()) << server.status();
  *pg = *std::move(server);
  absl::Status created = (*pg)->CreateDatabase(kDatabase);
  ASSERT_TRUE(created.ok()) << created;
}

// A Redis server.
inline void StartRedis(std::unique_ptr<RedisServer>* redis) {
  absl::StatusOr<std::unique_ptr<RedisServer>> server = RedisServer::Create();
  ASSERT_TRUE(server.ok()) << server.status();
  *redis = *std::move(server);
}

// The service started and ready (ServiceProcess::Start).
inline void StartService(ServiceProcessOptions options, std::unique_ptr<ServiceProcess>* service) {
  absl::StatusOr<std::unique_ptr<ServiceProcess>> started =
      ServiceProcess::Start(std::move(options));
  ASSERT_TRUE(started.ok()) << started.status();
  *service = *std::move(started);
}

// The start of most test configurations: `postgres.dsn` of the goodput database, text logs.
inline std::string PostgresConfigYaml(const PostgresServer& pg) {
  return absl::StrCat("postgres:\n  dsn: \"", pg.Dsn(kDatabase), "\"\nlog:\n  format: text\n");
}

// The command-line arguments that make a service apply this repository's migrations first.
inline std::vector<std::string> MigrateArgs() {
  return {"--migrate", "--migrations-dir", (SourceDir() / "migrations").string()};
}

// `binary` (a path in this build tree) on the goodput database of `pg` with text logs, the
// migrations applied first, started and ready.
inline void StartMigratedService(absl::string_view binary, const PostgresServer& pg,
                                 std::unique_ptr<ServiceProcess>* service) {
  StartService({.binary = BuiltBinary(binary),
                .config_yaml = PostgresConfigYaml(pg),
                .extra_args = MigrateArgs()},
               service);
}

// The `redis` section of a test configuration (to add to PostgresConfigYaml).
inline std::string RedisConfigYaml(const RedisServer& redis) {
  return absl::StrCat("redis:\n  host: ", redis.host(), "\n  port: ", redis.port(), "\n");
}

// A GPU model the tests use, and its dense BF16 peak (the catalog's figure).
inline constexpr char kH100[] = "NVIDIA H100 80GB HBM3";
inline constexpr double kH100Bf16PeakTflops = 989.42976;

// The shape of a job whose OFU regresses, as its DCGM samples.
struct RegressingJobShape {
  int gpus = 4;
  int minutes = 170;
  int drop_minute = 110;  // OFU is 2.5x lower from here on
  int interval_s = 20;    // between samples of one GPU
};

// The statements that store job `job_id` of cluster c1 (Slurm, team llm, on GPUs 0.. of
// node-1, an H100 each) and its samples from `start_ms`: warm-up, steady near 50% tensor
// activity, then 2.5x lower from the drop minute on. Run them in order on the goodput
// database.
inline std::vector<std::string> RegressingJobSql(const std::string& job_id, int64_t start_ms,
                                                 RegressingJobShape shape = {}) {
  std::vector<std::string> sql;
  sql.push_back(absl::StrCat("SELECT samples_create_partitions(timestamptz 'epoch' + ", start_ms,
                             " * interval '1 millisecond', now() + interval '1 day')"));
  sql.push_back(absl::StrCat(
      "INSERT INTO jobs (cluster, job_id, scheduler, team, gpu_model, start_time) VALUES "
      "('c1', '",
      job_id, "', 'slurm', 'llm', 'NVIDIA H100 80GB HBM3', now() - interval '1 day')"));
  for (int g = 0; g < shape.gpus; ++g) {
    sql.push_back(
        absl::StrCat("INSERT INTO job_gpus (job, cluster, host, gpu_index, valid) SELECT id, "
                     "'c1', 'node-1', ",
                     g, ", tstzrange(now() - interval '2 days', NULL) FROM jobs"));
  }
  std::vector<std::string> values;
  for (int64_t t = 0; t < int64_t{shape.minutes} * 60; t += shape.interval_s) {
    const double m = t / 60.0;
    const double ramp = m < 8 ? 0.1 + 0.9 * m / 8.0 : 1.0;
    const double level = 0.5 * ramp * (m >= shape.drop_minute ? 0.4 : 1.0);
    for (int g = 0; g < shape.gpus; ++g) {
      values.push_back(absl::StrFormat(
          "(timestamptz 'epoch' + %d * interval '1 millisecond', 'c1', 'node-1', %d, "
          "'NVIDIA H100 80GB HBM3', (SELECT id FROM jobs WHERE job_id = '%s'), %.6f, 1755)",
          start_ms + t * 1000 + g * 13, g, job_id, level * (1.0 + 0.02 * std::sin(t / 70.0 + g))));
    }
  }
  sql.push_back(
      absl::StrCat("INSERT INTO samples (sample_time, cluster, host, gpu_index, "
                   "gpu_model, job, tensor_active, sm_clock_mhz) VALUES ",
                   absl::StrJoin(values, ",")));
  return sql;
}

// Runs `statements` in order on the goodput database, failing the test at the first error.
inline void ExecuteAll(PostgresServer& pg, const std::vector<std::string>& statements) {
  for (const std::string& sql : statements) {
    absl::Status s = pg.Execute(kDatabase, sql);
    ASSERT_TRUE(s.ok()) << s << "\n" << sql.substr(0, 200);
  }
}

// The first column of the first row `sql` returns in the goodput database; "error" (and a
// test failure naming the status) when the query fails.
inline std::string QueryScalar(PostgresServer& pg, const std::string& sql) {
  absl::StatusOr<std::string> value = pg.QueryValue(kDatabase, sql);
  EXPECT_TRUE(value.ok()) << value.status() << "\n" << sql;
  return value.ok() ? *value : "error";
}

// A client deadline `timeout` from now.
inline std::chrono::system_clock::time_point Deadline(absl::Duration timeout = absl::Seconds(30)) {
  return absl::ToChronoTime(absl::Now() + timeout);
}

// A Slurm job of user alice holding GPUs 0..gpus-1 of `host` (`gpu_model`), started an hour
// ago (whole seconds).
inline goodput::v1::Job SlurmTestJob(const std::string& cluster, const std::string& job_id,
                                     const std::string& host, int gpus,
                                     const std::string& gpu_model = "NVIDIA H100 80GB HBM3") {
  goodput::v1::Job job;
  job.mutable_key()->set_cluster(cluster);
  job.mutable_key()->set_job_id(job_id);
  job.set_scheduler(goodput::v1::SCHEDULER_KIND_SLURM);
  job.set_user("alice");
  job.set_gpu_model(gpu_model);
  const int64_t start_ms = absl::ToUnixMillis(absl::Now()) - 3'600'000;
  job.mutable_start_time()->set_seconds(start_ms / 1000);
  for (int g = 0; g < gpus; ++g) {
    goodput::v1::GpuAllocation* a = job.add_allocations();
    a->mutable_gpu()->set_host(host);
    a->mutable_gpu()->set_gpu_index(g);
  }
  return job;
}

// JobService.RegisterJob of `job`.
inline grpc::Status RegisterJob(goodput::v1::JobService::Stub& jobs, const goodput::v1::Job& job,
                                goodput::v1::RegisterJobResponse* response) {
  grpc::ClientContext ctx;
  ctx.set_deadline(Deadline());
  goodput::v1::RegisterJobRequest request;
  *request.mutable_job() = job;
  return jobs.RegisterJob(&ctx, request, response);
}

}  // namespace goodput::testing
