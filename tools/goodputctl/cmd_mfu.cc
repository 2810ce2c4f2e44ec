// MFU commands (MfuService): reconcile, fleet report.
#include <algorithm>
#include <cmath>
#include <iostream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "goodput/v1/mfu.grpc.pb.h"
#include "services/api/api_convert.h"
#include "tools/goodputctl/commands.h"
#include "tools/goodputctl/format.h"

namespace goodput::ctl {
namespace {

constexpr int kSparkWidth = 60;

std::unique_ptr<v1::MfuService::Stub> MfuStub(const Args& args) {
  return v1::MfuService::NewStub(ChannelTo(args, Service::kMfu));
}

std::string VerdictText(v1::Verdict v) {
  std::string text = EnumShort(v1::Verdict_Name(v), "VERDICT_");
  std::replace(text.begin(), text.end(), '_', ' ');
  return text;
}

std::string CauseText(v1::DivergenceCause c) {
  std::string text = EnumShort(v1::DivergenceCause_Name(c), "DIVERGENCE_CAUSE_");
  std::replace(text.begin(), text.end(), '_', ' ');
  return text;
}

std::string MixText(const google::protobuf::RepeatedPtrField<v1::PrecisionShare>& mix) {
  std::vector<std::string> parts;
  for (const v1::PrecisionShare& s : mix) {
    parts.push_back(absl::StrCat(EnumShort(v1::Precision_Name(s.precision()), "PRECISION_"), " ",
                                 Percent(s.flops_share(), 0)));
  }
  return parts.empty() ? "-" : absl::StrJoin(parts, " + ");
}

int Reconcile(const Args& args) {
  absl::StatusOr<v1::JobKey> key = JobArg(args, 1);
  if (!key.ok()) return UsageError(key.status().message());
  v1::GetReconciliationRequest request;
  *request.mutable_job() = *key;
  if (absl::Status s = SetJobWindow(args, request); !s.ok()) return UsageError(s.message());
  v1::GetReconciliationResponse response;
  grpc::Status status = MfuStub(args)->GetReconciliation(CallContext(args, absl::Seconds(60)).get(),
                                                         request, &response);
  if (!status.ok()) {
    return RpcFailure("reconcile", args, Service::kMfu, "GetReconciliation", status);
  }
  if (args.json) {
    PrintJson(response);
    return kExitOk;
  }
  const v1::Divergence& d = response.verdict();
  std::cout << "job          " << key->cluster() << "/" << key->job_id() << "\n"
            << "verdict      " << VerdictText(d.verdict()) << "\n";
  if (d.verdict() != v1::VERDICT_INSUFFICIENT_EVIDENCE && d.windows_used() > 0) {
    std::cout << "MFU / OFU    " << absl::StrFormat("%.2f", d.ratio()) << "  95% CI ["
              << absl::StrFormat("%.2f, %.2f", d.ratio_ci95_low(), d.ratio_ci95_high()) << "]"
              << "  confidence " << Percent(d.confidence(), 0) << "\n"
              << "app MFU      " << Percent(d.app_mfu_mean()) << "   OFU " << Percent(d.ofu_mean())
              << "   over " << d.windows_used() << " windows ("
              << ShortDuration(absl::Seconds(d.duration_s())) << ")\n";
    if (d.verdict() == v1::VERDICT_APP_FLOPS_OVERCOUNT ||
        d.verdict() == v1::VERDICT_APP_FLOPS_UNDERCOUNT) {
      std::cout << "correction   multiply the framework's FLOPs by "
                << absl::StrFormat("%.3f", d.correction_factor()) << "\n";
    }
  }
  if (!d.reason().empty()) std::cout << "why          " << d.reason() << "\n";
  if (!response.framework().empty()) {
    std::cout << "framework    " << response.framework()
              << (response.framework_version().empty() ? "" : " " + response.framework_version())
              << (response.flops_formula().empty() ? ""
                                                   : ", FLOPs formula: " + response.flops_formula())
              << "\n";
  }
  if (d.causes_size() > 0) {
    Table causes({{"CAUSE"}, {"EXPECTED RATIO"}, {"FIT", Align::kRight}, {"EXPLANATION"}});
    for (const v1::CauseFit& c : d.causes()) {
      causes.AddRow(
          {CauseText(c.cause()),
           absl::StrFormat("%.2f .. %.2f", c.expected_ratio_low(), c.expected_ratio_high()),
           Percent(c.fit_score(), 0), c.explanation()});
    }
    std::cout << "\n" << causes.Render();
  }
  if (response.points_size() > 0) {
    std::vector<std::optional<double>> mfu, ofu;
    double hi = 0;
    for (const v1::ReconciliationPoint& p : response.points()) {
      mfu.push_back(p.has_app_mfu() ? std::optional<double>(p.app_mfu()) : std::nullopt);
      ofu.push_back(p.has_ofu() ? std::optional<double>(p.ofu()) : std::nullopt);
      if (p.has_app_mfu()) hi = std::max(hi, p.app_mfu());
      if (p.has_ofu()) hi = std::max(hi, p.ofu());
    }
    if (hi <= 0) hi = 1;
    std::cout << "\nover " << response.points_size() << " intervals (one scale, 0 .. "
              << Percent(hi) << ")\n"
              << "  app MFU  " << Sparkline(mfu, 0, hi, kSparkWidth) << "\n"
              << "  OFU      " << Sparkline(ofu, 0, hi, kSparkWidth) << "\n";
  }
  if (response.intervals_size() > 1) {
    Table intervals({{"FROM (UTC)"}, {"TO"}, {"VERDICT"}, {"RATIO", Align::kRight}});
    for (const v1::IntervalDivergence& i : response.intervals()) {
      intervals.AddRow(
          {FormatUtc(FromProto(i.interval().start_time())),
           FormatUtc(FromProto(i.interval().end_time())), VerdictText(i.divergence().verdict()),
           i.divergence().windows_used() > 0 ? absl::StrFormat("%.2f", i.divergence().ratio())
                                             : std::string("-")});
    }
    std::cout << "\n" << intervals.Render();
  }
  for (const v1::PrecisionSwitch& s : response.precision_switches()) {
    std::cout << "\nprecision switch at " << FormatUtc(FromProto(s.time())) << ": "
              << MixText(s.before()) << " -> " << MixText(s.after()) << " (peak "
              << Number(s.peak_tflops_before()) << " -> " << Number(s.peak_tflops_after())
              << " TFLOP/s)";
  }
  if (response.precision_switches_size() > 0) std::cout << "\n";
  return kExitOk;
}

std::string RangeText(const v1::FleetStats& s) {
  if (s.max_gpu_count() == 0) return absl::StrCat(s.min_gpu_count(), "+");
  if (s.min_gpu_count() == s.max_gpu_count()) return absl::StrCat(s.min_gpu_count());
  return absl::StrCat(s.min_gpu_count(), "-", s.max_gpu_count());
}

std::string MeanSd(double mean, double sd) {
  return absl::StrFormat("%.1f ± %.1f", mean * 100, sd * 100);
}

std::vector<std::string> StatsCells(const std::string& label, const v1::FleetStats& s) {
  if (s.job_count() == 0) return {label, "0", "-", "-", "-", "-", "-", "-", "-"};
  return {label,
          absl::StrCat(s.job_count()),
          MeanSd(s.mfu_mean(), s.mfu_sd()),
          MeanSd(s.ofu_mean(), s.ofu_sd()),
          absl::StrFormat("%.1f ± %.1f", s.mae_pp(), s.abs_error_sd_pp()),
          s.has_pearson_r() ? absl::StrFormat("%.2f", s.pearson_r()) : "-",
          s.has_spearman_rho() ? absl::StrFormat("%.2f", s.spearman_rho()) : "-",
          Percent(s.share_within_10pp()),
          Percent(s.share_beyond_20pp())};
}

int FleetReport(const Args& args) {
  v1::GetFleetReportRequest request;
  absl::StatusOr<v1::TimeRange> range = TimeRangeFlags(args, "7d");
  if (!range.ok()) return UsageError(range.status().message());
  *request.mutable_time_range() = *range;
  request.set_cluster(args.Flag("cluster").value_or(""));
  request.set_gpu_model(args.Flag("gpu-model").value_or(""));
  request.set_team(args.Flag("team").value_or(""));
  request.set_framework(args.Flag("framework").value_or(""));
  if (auto groups = args.Flag("groups")) {
    for (absl::string_view g : absl::StrSplit(*groups, ',', absl::SkipWhitespace())) {
      int v = 0;
      if (!absl::SimpleAtoi(g, &v) || v <= 0) {
        return UsageError(absl::StrCat("--groups: \"", *groups,
                                       "\" is not ascending GPU counts such as 8,64,256,768"));
      }
      request.add_gpu_count_group_lower_bounds(v);
    }
  }
  const bool with_jobs = args.Has("jobs");
  request.set_include_jobs(with_jobs);
  request.set_page_size(1000);
  auto stub = MfuStub(args);
  v1::GetFleetReportResponse all;
  Progress progress(!args.json);
  for (int page = 0;; ++page) {
    v1::GetFleetReportResponse response;
    grpc::Status status =
        stub->GetFleetReport(CallContext(args, absl::Seconds(120)).get(), request, &response);
    if (!status.ok()) {
      return RpcFailure("fleet report", args, Service::kMfu, "GetFleetReport", status);
    }
    if (page == 0) {
      all = response;
    } else {
      all.mutable_jobs()->MergeFrom(response.jobs());
    }
    if (!with_jobs || response.next_page_token().empty()) break;
    request.set_page_token(response.next_page_token());
    progress.Show(absl::StrCat("fetched ", all.jobs_size(), " job points ..."));
  }
  progress.Done();
  all.clear_next_page_token();
  if (args.json) {
    PrintJson(all);
    return kExitOk;
  }
  std::cout << "App MFU vs OFU, jobs running " << FormatUtc(FromProto(range->start_time()))
            << " .. " << FormatUtc(FromProto(range->end_time())) << " UTC\n\n";
  Table table({{"GPUS"},
               {"JOBS", Align::kRight},
               {"MFU % (mean ± sd)", Align::kRight},
               {"OFU % (mean ± sd)", Align::kRight},
               {"MAE pp (± sd)", Align::kRight},
               {"PEARSON R", Align::kRight},
               {"SPEARMAN", Align::kRight},
               {"≤10 PP", Align::kRight},
               {">20 PP", Align::kRight}});
  for (const v1::FleetStats& s : all.by_gpu_count()) table.AddRow(StatsCells(RangeText(s), s));
  table.AddRow(StatsCells("all", all.overall()));
  table.AddRow(StatsCells(absl::StrCat("all w/o ", all.miscount_job_count(), " miscounts"),
                          all.excluding_miscounts()));
  std::cout << table.Render();
  const v1::FleetCoverage& c = all.coverage();
  std::cout << "\ncoverage: " << Number(c.gpu_hours_total()) << " GPU-hours; OFU for "
            << Percent(c.ofu_share()) << ", app MFU for " << Percent(c.app_mfu_share()) << "\n";
  if (with_jobs) {
    Table jobs({{"JOB"},
                {"GPUS", Align::kRight},
                {"APP MFU", Align::kRight},
                {"OFU", Align::kRight},
                {"VERDICT"},
                {"LIKELY CAUSE"}});
    for (const v1::FleetJobPoint& p : all.jobs()) {
      jobs.AddRow(
          {absl::StrCat(p.job().cluster(), "/", p.job().job_id()), absl::StrCat(p.gpu_count()),
           Percent(p.app_mfu()), Percent(p.ofu()), VerdictText(p.verdict()),
           p.top_cause() == v1::DIVERGENCE_CAUSE_UNSPECIFIED ? "-" : CauseText(p.top_cause())});
    }
    std::cout << "\n" << jobs.Render();
  }
  return kExitOk;
}

}  // namespace

std::vector<Command> MfuCommands() {
  return {
      {.words = {"reconcile"},
       .arguments = "CLUSTER/JOB_ID",
       .summary = "a job's app MFU vs OFU: verdict, ratio, likely causes, both over time",
       .details = "  --since D | --from T [--to T]   only points in this range [whole job]\n"
                  "  --resolution D                  bucket length of the points, e.g. 10m\n",
       .flags = {"cluster", "job-id", "since", "from", "to", "resolution"},
       .run = Reconcile},
      {.words = {"fleet", "report"},
       .summary = "fleet app MFU vs OFU by GPU count (correlation, MAE, agreement), miscounts",
       .details = "  --since D | --from T [--to T]   jobs running in this range [7d]\n"
                  "  --cluster C --gpu-model M --team T --framework F   filters\n"
                  "  --groups LIST                   GPU-count group bounds, e.g. 8,64,256,768\n"
                  "  --jobs                          also list every job's point\n",
       .flags = {"since", "from", "to", "cluster", "gpu-model", "team", "framework", "groups",
                 "jobs"},
       .run = FleetReport},
  };
}

}  // namespace goodput::ctl
