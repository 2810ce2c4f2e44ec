// goodput-demo: runs a simulated GPU fleet through a running goodput platform's real APIs —
// jobs registered as a scheduler would (JobService), telemetry pushed as a node agent would
// (IngestService.PushSamples), framework MFU reported through the C++ SDK — then prints what
// the platform made of it next to what the simulator injected.
//
//   goodput-demo --ingest 127.0.0.1:7101 --ofu 127.0.0.1:7102 --mfu 127.0.0.1:7103
//                --alerting 127.0.0.1:7104 [--seed 7] [--cluster demo] [--token T]
//                [--dashboard-url URL] [--ctl PATH]
//
// Jobs are registered when they start; their EndJob is sent once the platform has caught up
// with the replayed fleet (alerting opens alerts for running jobs only). It ends with a short
// summary: fleet OFU, the jobs with a regression (AlertService), the
// FLOPs-miscount verdicts (MfuService.GetReconciliation), the notifications delivered, and
// where to look (the dashboard, goodputctl commands). A part whose RPC is not served yet says
// so instead of failing.
//
// The fleet is placed in the recent past (it ends now), so its samples are inside retention.
// Exit code 0 when everything was delivered, 1 when the platform refused or lost something.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "goodput/v1/alert.grpc.pb.h"
#include "goodput/v1/ingest.grpc.pb.h"
#include "goodput/v1/job.grpc.pb.h"
#include "goodput/v1/mfu.grpc.pb.h"
#include "goodput/v1/ofu.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "sdk/cpp/reporter.h"
#include "tools/fleetsim/fleet_proto.h"
#include "tools/fleetsim/fleet_sim.h"
#include "tools/fleetsim/platform_sink.h"
#include "tools/goodputctl/format.h"

namespace goodput::demo {
namespace {

namespace v1 = ::goodput::v1;

struct Options {
  std::string ingest = "127.0.0.1:7101";
  std::string ofu = "127.0.0.1:7102";
  std::string mfu = "127.0.0.1:7103";
  std::string alerting = "127.0.0.1:7104";
  std::string cluster = "demo";
  std::string token;
  // Where the dashboard is, and how to call goodputctl, for the closing "where to look".
  std::string dashboard_url = "http://127.0.0.1:7300";
  std::string ctl = "goodputctl";
  uint64_t seed = 7;
  int batch_samples = 5000;
  bool report_mfu = true;
};

std::unique_ptr<grpc::ClientContext> Context(const Options& options, int timeout_s = 60) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(timeout_s));
  if (!options.token.empty()) ctx->AddMetadata("authorization", "Bearer " + options.token);
  return ctx;
}

// Progress on one line of stderr: simulated time covered, samples delivered.
class Progress {
 public:
  Progress(int64_t start_s, int64_t end_s) : start_s_(start_s), end_s_(end_s) {}
  void Update(int64_t now_s, int64_t samples, int64_t jobs) {
    double fraction = end_s_ > start_s_ ? double(now_s - start_s_) / double(end_s_ - start_s_) : 1;
    std::fprintf(stderr, "\r  %s  %lld jobs, %lld GPU-samples stored",
                 ctl::ProgressBar(fraction).c_str(), static_cast<long long>(jobs),
                 static_cast<long long>(samples));
    std::fflush(stderr);
  }
  void Done() { std::fprintf(stderr, "\n"); }

 private:
  int64_t start_s_, end_s_;
};

// Streams the simulated fleet into the platform; the epilogs' EndJob waits for EndJobs(), once
// the platform has caught up with the replayed fleet.
sim::PlatformSinkOptions SinkOptions(const Options& options) {
  auto channel = [](const std::string& address) {
    return grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  };
  sim::PlatformSinkOptions sink{
      .cluster = options.cluster,
      .ingest = {channel(options.ingest)},
      .token = options.token,
      .source = "goodput-demo",
      .batch_id_prefix = absl::StrCat(options.cluster, "/", options.seed, "/"),
      .batch_samples = options.batch_samples,
      .rpc_timeout = absl::Seconds(60)};
  if (options.report_mfu) {
    sink.mfu_endpoints = {options.mfu};
    sink.mfu_channels = {channel(options.mfu)};
  }
  sink.on_error = [errors = 0](const std::string& message) mutable {
    if (++errors <= 5) std::fprintf(stderr, "\ngoodput-demo: %s\n", message.c_str());
  };
  return sink;
}
using sim::PlatformSink;

// Waits until goodput-ofu has turned every pushed sample into windows (its job summaries
// count them all), showing progress; gives up after `timeout`. False on time-out.
bool WaitForOfu(const Options& options, const std::map<std::string, int64_t>& pushed,
                absl::Duration timeout) {
  auto ofu =
      v1::OfuService::NewStub(grpc::CreateChannel(options.ofu, grpc::InsecureChannelCredentials()));
  int64_t total = 0;
  for (const auto& [job, count] : pushed) total += count;
  absl::Time deadline = absl::Now() + timeout;
  while (true) {
    int64_t counted = 0;
    for (const auto& [job_id, count] : pushed) {
      v1::GetJobSummaryRequest request;
      request.mutable_job()->set_cluster(options.cluster);
      request.mutable_job()->set_job_id(job_id);
      v1::GetJobSummaryResponse response;
      grpc::Status status = ofu->GetJobSummary(Context(options, 10).get(), request, &response);
      if (status.error_code() == grpc::StatusCode::UNIMPLEMENTED) return false;
      if (status.ok()) counted += std::min(count, response.summary().sample_count());
    }
    std::fprintf(stderr, "\r  goodput-ofu has computed windows over %lld of %lld GPU-samples",
                 static_cast<long long>(counted), static_cast<long long>(total));
    if (counted >= total || absl::Now() >= deadline) {
      std::fprintf(stderr, "\n");
      return counted >= total;
    }
    absl::SleepFor(absl::Milliseconds(500));
  }
}

// True when the server at `addr` reports `service` SERVING within a few seconds.
bool Serving(const std::string& addr, const std::string& service) {
  auto stub = grpc::health::v1::Health::NewStub(
      grpc::CreateChannel(addr, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  ctx.set_wait_for_ready(true);
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse response;
  return stub->Check(&ctx, request, &response).ok() &&
         response.status() == grpc::health::v1::HealthCheckResponse::SERVING;
}

std::string Pct(double fraction) { return ctl::Percent(fraction); }

bool IsRegression(v1::AlertKind kind) {
  return kind == v1::ALERT_KIND_REGRESSION_IN_JOB || kind == v1::ALERT_KIND_REGRESSION_VS_WORKLOAD;
}

bool IsMiscount(v1::Verdict v) {
  return v == v1::VERDICT_APP_FLOPS_OVERCOUNT || v == v1::VERDICT_APP_FLOPS_UNDERCOUNT;
}

std::string Lower(const std::string& name, absl::string_view prefix) {
  std::string s = absl::StartsWith(name, prefix) ? name.substr(prefix.size()) : name;
  s = absl::AsciiStrToLower(s);
  std::replace(s.begin(), s.end(), '_', ' ');
  return s;
}

// Why a call failed, in one line: an RPC not built yet says so by name.
std::string Unavailable(const std::string& service, const std::string& method,
                        const grpc::Status& status) {
  if (status.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
    return absl::StrCat(service, " does not serve ", method, " yet");
  }
  return absl::StrCat(service, " ", method, ": ", status.error_message());
}

// Every alert of the demo's cluster; waits until the set and its deliveries stop changing
// (alerting decides as ofu's windows reach it) and, with `until_resolved`, until every alert
// is resolved (after the epilogs: alerting resolves an ended job's alerts at its next sweep,
// `alerting.sweep_interval_s`), at most `timeout`.
absl::StatusOr<std::vector<v1::Alert>> SettledAlerts(const Options& options, absl::Duration timeout,
                                                     bool until_resolved = false) {
  auto alerts = v1::AlertService::NewStub(
      grpc::CreateChannel(options.alerting, grpc::InsecureChannelCredentials()));
  absl::Time deadline = absl::Now() + timeout;
  std::string previous;
  int stable = 0;
  while (true) {
    std::vector<v1::Alert> all;
    v1::ListAlertsRequest request;
    request.set_cluster(options.cluster);
    request.set_page_size(1000);
    while (true) {
      v1::ListAlertsResponse page;
      grpc::Status status = alerts->ListAlerts(Context(options, 10).get(), request, &page);
      if (!status.ok()) {
        return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                            Unavailable("goodput-alerting", "ListAlerts", status));
      }
      all.insert(all.end(), page.alerts().begin(), page.alerts().end());
      if (page.next_page_token().empty()) break;
      request.set_page_token(page.next_page_token());
    }
    // A fingerprint of what matters for the summary: alerts, states and delivery states.
    std::string state;
    for (const v1::Alert& a : all) {
      absl::StrAppend(&state, a.alert_id(), ":", a.state(), ":");
      for (const v1::Delivery& d : a.deliveries()) absl::StrAppend(&state, d.state(), ",");
      state += ";";
    }
    stable = state == previous ? stable + 1 : 0;
    previous = state;
    size_t resolved = 0;
    for (const v1::Alert& a : all) resolved += a.state() == v1::ALERT_STATE_RESOLVED ? 1 : 0;
    if (until_resolved) {
      std::fprintf(stderr, "\r  goodput-alerting: %zu of %zu alerts resolved after the epilogs",
                   resolved, all.size());
    } else {
      std::fprintf(stderr, "\r  goodput-alerting: %zu alerts so far", all.size());
    }
    const bool done = stable >= 4 && (!until_resolved || resolved == all.size());
    if (done || absl::Now() >= deadline) {
      std::fprintf(stderr, "\n");
      return all;
    }
    absl::SleepFor(absl::Seconds(1));
  }
}

// Deliveries of `alerts` (GetAlert carries them) by target and state, once none is pending
// or retrying, or after `timeout`; returns how many were delivered.
int DeliveryTally(const Options& options, const std::vector<v1::Alert>& alerts,
                  absl::Duration timeout,
                  std::map<std::string, std::map<std::string, int>>* by_target) {
  auto stub = v1::AlertService::NewStub(
      grpc::CreateChannel(options.alerting, grpc::InsecureChannelCredentials()));
  absl::Time deadline = absl::Now() + timeout;
  while (true) {
    by_target->clear();
    int delivered = 0, in_flight = 0;
    for (const v1::Alert& a : alerts) {
      v1::GetAlertRequest request;
      request.set_alert_id(a.alert_id());
      v1::GetAlertResponse response;
      if (!stub->GetAlert(Context(options, 10).get(), request, &response).ok()) continue;
      for (const v1::Delivery& d : response.alert().deliveries()) {
        ++(*by_target)[d.target()][Lower(v1::DeliveryState_Name(d.state()), "DELIVERY_STATE_")];
        delivered += d.state() == v1::DELIVERY_STATE_DELIVERED ? 1 : 0;
        in_flight +=
            d.state() == v1::DELIVERY_STATE_PENDING || d.state() == v1::DELIVERY_STATE_RETRYING;
      }
    }
    if (in_flight == 0 || absl::Now() >= deadline) return delivered;
    absl::SleepFor(absl::Milliseconds(500));
  }
}

// A goodputctl command line for the summary, with --addr when the stack is not on the
// default port of that service.
std::string CtlLine(const Options& options, const std::string& words, const std::string& addr,
                    const std::string& default_addr) {
  std::string line = absl::StrCat(options.ctl, " ", words);
  if (addr != default_addr) absl::StrAppend(&line, " --addr ", addr);
  return line;
}

// What the platform concluded, job by job next to the simulator's ground truth, then the
// short summary: fleet OFU, regressions, miscount verdicts, notifications, where to look.
void PrintSummary(const Options& options, const sim::FleetSimulator& fleet, PlatformSink& sink) {
  // Alerts first, while the jobs still run (alerting opens alerts for running jobs only);
  // then the epilogs end the jobs, so that GPU-hours stop at each job's end.
  absl::StatusOr<std::vector<v1::Alert>> alerts = SettledAlerts(options, absl::Seconds(60));
  sink.EndJobs();
  // The epilogs resolve the ended jobs' alerts (at alerting's next sweep): wait for that and
  // for the deliveries it makes, so that the notification count does not depend on timing,
  // and before anything of the summary is printed, so that progress lines stay out of it.
  std::map<std::string, std::map<std::string, int>> by_target;  // target -> state -> count
  int delivered = 0;
  absl::StatusOr<std::vector<v1::Alert>> settled = alerts;
  if (alerts.ok()) {
    settled = SettledAlerts(options, absl::Seconds(150), /*until_resolved=*/true);
    if (settled.ok()) delivered = DeliveryTally(options, *settled, absl::Seconds(30), &by_target);
  }
  auto ofu =
      v1::OfuService::NewStub(grpc::CreateChannel(options.ofu, grpc::InsecureChannelCredentials()));
  auto mfu =
      v1::MfuService::NewStub(grpc::CreateChannel(options.mfu, grpc::InsecureChannelCredentials()));

  ctl::Table table({{"JOB"},
                    {"GPUS", ctl::Align::kRight},
                    {"GPU MODEL"},
                    {"OFU", ctl::Align::kRight},
                    {"SIM OFU", ctl::Align::kRight},
                    {"MFU VERDICT"},
                    {"INJECTED"}});
  std::string ofu_note, mfu_note;
  double gpu_hours = 0, effective_gpu_hours = 0;
  struct Miscounted {
    std::string job_id;
    v1::Divergence verdict;
    std::string injected;
  };
  std::vector<Miscounted> miscounts;
  int injected_miscounts = 0, injected_regressions = 0;
  std::set<std::string> regressed_truth;
  bool ask_mfu = true;
  for (const sim::JobTruth& job : fleet.jobs()) {
    std::string measured = "-", verdict = "-";
    v1::GetJobSummaryRequest request;
    request.mutable_job()->set_cluster(options.cluster);
    request.mutable_job()->set_job_id(job.job_id);
    v1::GetJobSummaryResponse response;
    grpc::Status status = ofu->GetJobSummary(Context(options, 10).get(), request, &response);
    if (status.ok()) {
      const v1::JobOfuSummary& summary = response.summary();
      measured = Pct(summary.has_steady_state_ofu() ? summary.steady_state_ofu() : summary.ofu());
      gpu_hours += summary.gpu_hours();
      effective_gpu_hours += summary.effective_gpu_hours();
    } else if (ofu_note.empty()) {
      ofu_note = Unavailable("goodput-ofu", "GetJobSummary", status);
    }
    if (ask_mfu) {
      v1::GetReconciliationRequest rec_request;
      rec_request.mutable_job()->set_cluster(options.cluster);
      rec_request.mutable_job()->set_job_id(job.job_id);
      v1::GetReconciliationResponse rec;
      status = mfu->GetReconciliation(Context(options, 10).get(), rec_request, &rec);
      if (status.ok()) {
        verdict = absl::StrCat(
            Lower(v1::Verdict_Name(rec.verdict().verdict()), "VERDICT_"),
            rec.verdict().ratio() > 0 ? absl::StrFormat(" %.2fx", rec.verdict().ratio()) : "");
        if (IsMiscount(rec.verdict().verdict())) {
          miscounts.push_back(
              {job.job_id, rec.verdict(),
               job.miscount == sim::Miscount::kNone ? "none" : sim::MiscountName(job.miscount)});
        }
      } else if (status.error_code() == grpc::StatusCode::UNIMPLEMENTED ||
                 status.error_code() == grpc::StatusCode::UNAVAILABLE) {
        // Not built, or the service is down: asking 40 more times says nothing new.
        mfu_note = Unavailable("goodput-mfu", "GetReconciliation", status);
        ask_mfu = false;
      } else {
        // About this job only (e.g. no reports yet): its row says so, the summary goes on.
        verdict = absl::StrCat("(",
                               absl::AsciiStrToLower(absl::StatusCodeToString(
                                   static_cast<absl::StatusCode>(status.error_code()))),
                               ")");
      }
    }
    std::vector<std::string> injected;
    if (job.debug_flag) injected.push_back(absl::StrFormat("debug flag %.1fx", job.debug_factor));
    for (const sim::InjectedDrop& d : job.drops) {
      injected.push_back(absl::StrFormat("drop %.1fx", d.factor));
    }
    if (job.debug_flag || !job.drops.empty()) {
      ++injected_regressions;
      regressed_truth.insert(job.job_id);
    }
    if (job.miscount != sim::Miscount::kNone) {
      injected.push_back(sim::MiscountName(job.miscount));
      ++injected_miscounts;
    }
    if (!job.idle_gpus.empty()) {
      injected.push_back(absl::StrCat(job.idle_gpus.size(), " idle GPUs"));
    }
    if (!job.straggler_gpus.empty()) {
      injected.push_back(absl::StrCat(job.straggler_gpus.size(), " stragglers"));
    }
    table.AddRow({job.job_id, absl::StrCat(job.gpu_count), job.gpu_model.substr(0, 22), measured,
                  Pct(job.steady_ofu), verdict,
                  injected.empty() ? "-" : absl::StrJoin(injected, ", ")});
  }
  std::printf("\n%s", table.Render().c_str());
  std::printf(
      "(OFU: steady-state OFU measured by goodput; SIM OFU: the simulator's steady level before\n"
      " checkpoints, evaluation passes, stalls, stragglers, idle GPUs and injected drops)\n");

  std::printf("\n\033[1mSummary\033[0m (cluster %s)\n", options.cluster.c_str());
  if (gpu_hours > 0) {
    std::printf("  fleet OFU       %s over %s GPU-hours (%s effective, %s wasted)\n",
                Pct(effective_gpu_hours / gpu_hours).c_str(), ctl::Number(gpu_hours, 0).c_str(),
                ctl::Number(effective_gpu_hours, 0).c_str(),
                ctl::Number(gpu_hours - effective_gpu_hours, 0).c_str());
  } else {
    std::printf("  fleet OFU       not available: %s\n",
                ofu_note.empty() ? "no windows yet" : ofu_note.c_str());
  }

  if (alerts.ok()) {
    std::map<std::string, std::vector<const v1::Alert*>> by_job;
    for (const v1::Alert& a : *alerts) {
      if (IsRegression(a.kind())) by_job[a.job().job_id()].push_back(&a);
    }
    int caught = 0;
    for (const auto& [job_id, list] : by_job) caught += regressed_truth.contains(job_id) ? 1 : 0;
    std::printf("  regressions     %zu jobs flagged (%d of %d injected regressions caught)\n",
                by_job.size(), caught, injected_regressions);
    for (const auto& [job_id, list] : by_job) {
      std::printf("    %-14s %s%s\n", job_id.c_str(), list.front()->summary().c_str(),
                  regressed_truth.contains(job_id) ? "" : "  [not injected]");
    }
  } else {
    std::printf("  regressions     not reported: %s (%d injected)\n",
                std::string(alerts.status().message()).c_str(), injected_regressions);
  }

  if (mfu_note.empty()) {
    int right = 0;
    for (const Miscounted& m : miscounts) right += m.injected != "none" ? 1 : 0;
    std::printf(
        "  miscounts       %zu jobs with a FLOPs miscount verdict (%d of %d injected found)\n",
        miscounts.size(), right, injected_miscounts);
    for (const Miscounted& m : miscounts) {
      std::string cause =
          m.verdict.causes_size() > 0
              ? Lower(v1::DivergenceCause_Name(m.verdict.causes(0).cause()), "DIVERGENCE_CAUSE_")
              : "no known cause";
      std::printf("    %-14s %s, MFU/OFU %.2f, likely %s (injected: %s)\n", m.job_id.c_str(),
                  Lower(v1::Verdict_Name(m.verdict.verdict()), "VERDICT_").c_str(),
                  m.verdict.ratio(), cause.c_str(), m.injected.c_str());
    }
  } else {
    std::printf("  miscounts       not reported: %s (%d injected)\n", mfu_note.c_str(),
                injected_miscounts);
  }

  if (settled.ok()) {
    std::printf("  notifications   %d delivered for %zu alerts", delivered, settled->size());
    if (by_target.empty() && !settled->empty()) std::printf(" (no delivery targets configured)");
    std::printf("\n");
    for (const auto& [target, states] : by_target) {
      std::vector<std::string> parts;
      for (const auto& [state, n] : states) parts.push_back(absl::StrCat(n, " ", state));
      std::printf("    %-14s %s\n", target.c_str(), absl::StrJoin(parts, ", ").c_str());
    }
  } else {
    std::printf("  notifications   not reported: %s\n",
                std::string(settled.status().message()).c_str());
  }

  // An interesting job to point at: a regression if one was found, else an injected one.
  std::string example = fleet.jobs().empty() ? "JOB" : fleet.jobs().front().job_id;
  if (!regressed_truth.empty()) example = *regressed_truth.begin();
  std::string miscount_example = miscounts.empty() ? example : miscounts.front().job_id;
  for (const sim::JobTruth& job : fleet.jobs()) {
    if (miscounts.empty() && job.miscount != sim::Miscount::kNone) {
      miscount_example = job.job_id;
      break;
    }
  }
  const std::string job_ref = absl::StrCat(options.cluster, "/", example);
  std::printf("\n\033[1mWhere to look\033[0m\n");
  std::printf("  dashboard       %s\n", options.dashboard_url.c_str());
  std::printf("  %s\n", CtlLine(options, absl::StrCat("fleet summary --cluster ", options.cluster),
                                options.ofu, "127.0.0.1:7102")
                            .c_str());
  std::printf(
      "  %s --per-gpu\n",
      CtlLine(options, absl::StrCat("ofu ", job_ref), options.ofu, "127.0.0.1:7102").c_str());
  std::printf("  %s\n",
              CtlLine(options, absl::StrCat("reconcile ", options.cluster, "/", miscount_example),
                      options.mfu, "127.0.0.1:7103")
                  .c_str());
  std::printf("  %s\n", CtlLine(options, "fleet report", options.mfu, "127.0.0.1:7103").c_str());
  std::printf("  %s\n", CtlLine(options, absl::StrCat("alerts list --cluster ", options.cluster),
                                options.alerting, "127.0.0.1:7104")
                            .c_str());
  // Job-end reports are goodput-alerting's (ReportService), written once the job has ended.
  std::printf("  %s\n",
              CtlLine(options, absl::StrCat("report ", job_ref), options.alerting, "127.0.0.1:7104")
                  .c_str());
  std::printf("  %s\n", CtlLine(options, absl::StrCat("jobs list --cluster ", options.cluster),
                                options.ingest, "127.0.0.1:7101")
                            .c_str());
}

int Run(const Options& options) {
  sim::FleetConfig config = sim::SmallFleetConfig(options.seed);
  // Plan once to learn the fleet's length, then place it so that it ends now.
  absl::StatusOr<std::unique_ptr<sim::FleetSimulator>> probe = sim::FleetSimulator::Create(config);
  if (!probe.ok()) {
    std::cerr << "goodput-demo: " << probe.status().message() << "\n";
    return 1;
  }
  int64_t length_s = (*probe)->end_s() - config.start_unix_s;
  config.start_unix_s = absl::ToUnixSeconds(absl::Now()) - length_s - 60;
  absl::StatusOr<std::unique_ptr<sim::FleetSimulator>> fleet = sim::FleetSimulator::Create(config);
  if (!fleet.ok()) {
    std::cerr << "goodput-demo: " << fleet.status().message() << "\n";
    return 1;
  }
  std::printf("Simulated fleet (seed %llu): %zu jobs of 8-32 GPUs over %.1f hours, sent to %s\n",
              static_cast<unsigned long long>(options.seed), (*fleet)->jobs().size(),
              double(length_s) / 3600, options.ingest.c_str());

  std::fflush(stdout);  // before the progress bar takes stderr
  if (!Serving(options.ingest, "goodput.v1.IngestService")) {
    std::cerr << "goodput-demo: goodput-ingest at " << options.ingest
              << " is not serving; start the platform first (./goodput up)\n";
    return 1;
  }
  Options run = options;
  run.report_mfu = Serving(options.mfu, "goodput.v1.MfuService");
  if (!run.report_mfu) {
    std::printf("goodput-mfu at %s is not serving: MFU reports are skipped\n", options.mfu.c_str());
  }
  PlatformSink sink(SinkOptions(run));
  Progress progress(config.start_unix_s, (*fleet)->end_s());
  int steps = 0;
  while ((*fleet)->Step(sink)) {
    if (++steps % 20 == 0) progress.Update((*fleet)->now_s(), sink.stored(), sink.jobs_started());
  }
  sink.Flush();
  progress.Update((*fleet)->end_s(), sink.stored(), sink.jobs_started());
  progress.Done();

  std::printf(
      "Delivered: %lld GPU-samples stored, %lld refused, %lld MFU reports through the SDK\n",
      static_cast<long long>(sink.stored()), static_cast<long long>(sink.refused()),
      static_cast<long long>(sink.mfu_reports()));
  std::fflush(stdout);
  for (const std::string& example : sink.refusal_examples()) {
    std::printf("  refused: %s\n", example.c_str());
  }
  if (!sink.mfu_error().empty()) std::printf("MFU reports: %s\n", sink.mfu_error().c_str());
  if (!WaitForOfu(options, sink.pushed_per_job(), absl::Minutes(3))) {
    std::printf("goodput-ofu has not processed every sample yet; figures below are partial\n");
  }
  PrintSummary(options, **fleet, sink);
  bool clean = sink.lost() == 0 && sink.refused() == 0 && sink.errors() == 0;
  return clean ? 0 : 1;
}

}  // namespace
}  // namespace goodput::demo

int main(int argc, char** argv) {
  goodput::demo::Options options;
  if (const char* url = std::getenv("GOODPUT_DASHBOARD_URL"); url != nullptr && *url != '\0') {
    options.dashboard_url = url;
  }
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::cerr << "goodput-demo: " << arg << " needs a value\n";
        std::exit(2);
      }
      return argv[++i];
    };
    if (arg == "--ingest") {
      options.ingest = next();
    } else if (arg == "--ofu") {
      options.ofu = next();
    } else if (arg == "--mfu") {
      options.mfu = next();
    } else if (arg == "--alerting") {
      options.alerting = next();
    } else if (arg == "--cluster") {
      options.cluster = next();
    } else if (arg == "--token") {
      options.token = next();
    } else if (arg == "--dashboard-url") {
      options.dashboard_url = next();
    } else if (arg == "--ctl") {
      options.ctl = next();
    } else if (arg == "--seed") {
      std::string value = next();
      if (!absl::SimpleAtoi(value, &options.seed)) {
        std::cerr << "goodput-demo: --seed: \"" << value << "\" is not a number\n";
        return 2;
      }
    } else if (arg == "--help" || arg == "-h") {
      std::cout << "usage: goodput-demo [--ingest ADDR] [--ofu ADDR] [--mfu ADDR] "
                   "[--alerting ADDR] [--cluster NAME] [--seed N] [--token T]\n"
                   "                    [--dashboard-url URL (default $GOODPUT_DASHBOARD_URL or "
                   "http://127.0.0.1:7300)] [--ctl PATH-TO-GOODPUTCTL]\n";
      return 0;
    } else {
      std::cerr << "goodput-demo: unknown argument '" << arg << "'\n";
      return 2;
    }
  }
  return goodput::demo::Run(options);
}
