// The dashboard's view of the platform: each method asks the services over gRPC and answers
// the JSON one page needs (shapes in views.h). A service that cannot answer a part — its RPC
// not built yet (UNIMPLEMENTED) or the service down — turns that part into an
// `"available": false` section instead of failing the page; only the registry lookup that
// names the job fails the request (NOT_FOUND for an unknown job).
//
//   Gateway gateway({.ingest = ..., .ofu = ..., .mfu = ..., .alerting = ...}, {.token = t});
//   absl::StatusOr<Json> page = gateway.Job("eos", "4211873");
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "goodput/v1/alert.grpc.pb.h"
#include "goodput/v1/job.grpc.pb.h"
#include "goodput/v1/mfu.grpc.pb.h"
#include "goodput/v1/ofu.grpc.pb.h"
#include "goodput/v1/report.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "tools/dashboard/views.h"

namespace goodput::dashboard {

// Channels to the four services.
struct Backends {
  std::shared_ptr<grpc::Channel> ingest;    // JobService
  std::shared_ptr<grpc::Channel> ofu;       // OfuService
  std::shared_ptr<grpc::Channel> mfu;       // MfuService
  std::shared_ptr<grpc::Channel> alerting;  // AlertService
};

struct GatewayOptions {
  // Bearer token sent to the services (the operator role) when authentication is on.
  std::string token = {};
  // Deadline of one unary call.
  absl::Duration rpc_timeout = absl::Seconds(10);
  // Job pages keep at most about this many points per series (longer jobs are downsampled).
  int max_points = 360;
};

// The fleet page's filters (each empty: all) and time range.
struct FleetQuery {
  absl::Time start = {};
  absl::Time end = {};
  std::string cluster = {};
  std::string user = {};
  std::string team = {};
  std::string gpu_model = {};
};

struct JobsQuery {
  std::string cluster = {};     // empty: all clusters
  std::string user = {};        // empty: all users
  std::string team = {};        // empty: all teams
  std::string gpu_model = {};   // empty: all GPU models
  absl::Time active_from = {};  // jobs running at some point in [active_from, active_to)
  absl::Time active_to = {};
  int limit = 100;  // at most 1000
};

class Gateway {
 public:
  Gateway(Backends backends, GatewayOptions options);

  // The whole fleet's figures over [start, end), without groups (one summary: what the live
  // poll compares).
  grpc::Status FleetTotal(absl::Time start, absl::Time end, v1::FleetGroup* total);
  // Fleet summary over the query's range with its filters: total, by cluster, by GPU model,
  // users and teams ranked by wasted GPU-hours (four summaries, asked at once).
  Json Fleet(const FleetQuery& query);
  // Jobs (newest first) with their OFU, GPU-hours and open alerts. UNAVAILABLE (or the
  // registry's error) when the job registry cannot answer.
  absl::StatusOr<Json> Jobs(const JobsQuery& query);
  // One job's page: registry entry, summary, OFU series, reconciliation, alerts, job-end
  // report (ReportService on the alerting channel). NOT_FOUND
  // for a job the registry does not know.
  absl::StatusOr<Json> Job(const std::string& cluster, const std::string& job_id);
  // Alerts of a cluster (or the whole fleet) open at some point in [start, end), resolved
  // ones included, most recently changed first, as a section.
  Json Alerts(const std::string& cluster, absl::Time start, absl::Time end);

  // For the live streams: a context with the token and no deadline.
  std::unique_ptr<grpc::ClientContext> StreamContext() const;
  v1::OfuService::Stub& ofu() { return *ofu_; }
  v1::AlertService::Stub& alerts() { return *alerts_; }

 private:
  std::unique_ptr<grpc::ClientContext> Context() const;

  GatewayOptions options_;
  std::unique_ptr<v1::JobService::Stub> jobs_;
  std::unique_ptr<v1::OfuService::Stub> ofu_;
  std::unique_ptr<v1::MfuService::Stub> mfu_;
  std::unique_ptr<v1::AlertService::Stub> alerts_;
  std::unique_ptr<v1::ReportService::Stub> reports_;  // served by goodput-alerting
};

}  // namespace goodput::dashboard
