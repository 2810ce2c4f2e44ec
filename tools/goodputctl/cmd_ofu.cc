// OFU commands (OfuService): ofu, fleet summary, gemm-overhead, gpus.
#include <algorithm>
#include <cmath>
#include <iostream>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "goodput/v1/ofu.grpc.pb.h"
#include "google/protobuf/util/json_util.h"
#include "nlohmann/json.hpp"
#include "services/api/api_convert.h"
#include "tools/goodputctl/commands.h"
#include "tools/goodputctl/format.h"

namespace goodput::ctl {
namespace {

constexpr int kSparkWidth = 60;

std::unique_ptr<v1::OfuService::Stub> OfuStub(const Args& args) {
  return v1::OfuService::NewStub(ChannelTo(args, Service::kOfu));
}

std::string FlagsText(const google::protobuf::RepeatedField<int>& flags) {
  std::vector<std::string> names;
  for (int f : flags) {
    names.push_back(EnumShort(v1::DataQualityFlag_Name(static_cast<v1::DataQualityFlag>(f)),
                              "DATA_QUALITY_FLAG_"));
  }
  return names.empty() ? "-" : absl::StrJoin(names, ",");
}

std::string GpuName(const v1::GpuRef& gpu) {
  std::string text = gpu.host();
  if (gpu.has_gpu_index()) {
    absl::StrAppend(&text, ":", gpu.gpu_index());
  } else if (!gpu.uuid().empty()) {
    absl::StrAppend(&text, ":", gpu.uuid());
  }
  if (gpu.has_mig()) absl::StrAppend(&text, "/mig", gpu.mig().gpu_instance_id());
  return text;
}

std::string Ci(double low, double high) {
  return absl::StrCat("[", Percent(low), ", ", Percent(high), "]");
}

// Sparkline of a window series scaled from 0 to its highest value, with the scale stated.
std::string OfuTrend(const std::vector<std::optional<double>>& series) {
  double hi = 0;
  for (const auto& v : series) {
    if (v && !std::isnan(*v)) hi = std::max(hi, *v);
  }
  if (hi <= 0) hi = 1;
  return absl::StrCat(Sparkline(series, 0, hi, kSparkWidth), "  (0 .. ", Percent(hi), ")");
}

int JobOfu(const Args& args) {
  absl::StatusOr<v1::JobKey> key = JobArg(args, 1);
  if (!key.ok()) return UsageError(key.status().message());
  v1::GetJobOfuRequest request;
  *request.mutable_job() = *key;
  if (absl::Status s = SetJobWindow(args, request); !s.ok()) return UsageError(s.message());
  const bool per_gpu = args.Has("per-gpu");
  request.set_include_per_gpu(per_gpu);
  request.set_page_size(1000);
  auto stub = OfuStub(args);

  v1::GetJobSummaryRequest summary_request;
  *summary_request.mutable_job() = *key;
  v1::GetJobSummaryResponse summary;
  grpc::Status status = stub->GetJobSummary(CallContext(args).get(), summary_request, &summary);
  if (!status.ok()) return RpcFailure("ofu", args, Service::kOfu, "GetJobSummary", status);

  v1::GetJobOfuResponse all;
  Progress progress(!args.json);
  while (true) {
    v1::GetJobOfuResponse page;
    status = stub->GetJobOfu(CallContext(args).get(), request, &page);
    if (!status.ok()) return RpcFailure("ofu", args, Service::kOfu, "GetJobOfu", status);
    all.mutable_windows()->MergeFrom(page.windows());
    all.mutable_gpu_windows()->MergeFrom(page.gpu_windows());
    all.set_effective_window_s(page.effective_window_s());
    if (page.next_page_token().empty()) break;
    request.set_page_token(page.next_page_token());
    progress.Show(absl::StrCat("fetched ", all.windows_size(), " windows ..."));
  }
  progress.Done();
  if (args.json) {
    // One object for scripts: the summary next to the windows.
    std::string summary_json, windows_json;
    google::protobuf::util::JsonPrintOptions options;
    options.preserve_proto_field_names = true;
    (void)google::protobuf::util::MessageToJsonString(summary.summary(), &summary_json, options);
    (void)google::protobuf::util::MessageToJsonString(all, &windows_json, options);
    nlohmann::json out = nlohmann::json::parse(windows_json);
    out["summary"] = nlohmann::json::parse(summary_json);
    std::cout << out.dump() << "\n";
    return kExitOk;
  }

  const v1::JobOfuSummary& s = summary.summary();
  std::cout << "job          " << key->cluster() << "/" << key->job_id() << "\n"
            << "gpus         " << s.gpus_allocated() << " x "
            << (s.gpu_model().empty() ? "-" : s.gpu_model()) << "\n"
            << "time         " << FormatUtc(FromProto(s.time_range().start_time())) << " .. "
            << FormatUtc(FromProto(s.time_range().end_time()))
            << (s.finalized() ? "  (final)" : "  (running)") << "\n"
            << "OFU          "
            << (s.ofu_unavailable_reason().empty()
                    ? absl::StrCat(Percent(s.ofu()), "  95% CI ",
                                   Ci(s.ofu_ci95_low(), s.ofu_ci95_high()))
                    : std::string("unavailable (see below)"))
            << "\n"
            << "steady state "
            << (s.has_steady_state_ofu() ? Percent(s.steady_state_ofu())
                                         : std::string("(in warm-up)"))
            << "\n"
            << "GPU-hours    " << Number(s.gpu_hours()) << " allocated, "
            << Number(s.effective_gpu_hours()) << " effective, " << Number(s.idle_gpu_hours())
            << " idle\n"
            << "coverage     " << Percent(s.gpu_coverage()) << " of GPUs reporting, "
            << s.sample_count() << " samples\n";
  if (s.has_spatial_imbalance() || s.has_temporal_imbalance()) {
    std::cout << "imbalance    spatial "
              << (s.has_spatial_imbalance() ? absl::StrFormat("%.2f", s.spatial_imbalance()) : "-")
              << ", temporal "
              << (s.has_temporal_imbalance() ? absl::StrFormat("%.2f", s.temporal_imbalance())
                                             : "-")
              << "\n";
  }
  if (s.roofline_class() != v1::ROOFLINE_CLASS_UNSPECIFIED) {
    std::cout << "roofline     "
              << EnumShort(v1::RooflineClass_Name(s.roofline_class()), "ROOFLINE_CLASS_") << "\n";
  }
  if (s.stragglers_size() > 0) {
    std::vector<std::string> names;
    for (const v1::Straggler& st : s.stragglers()) {
      names.push_back(absl::StrFormat("%s (%.2f)", GpuName(st.gpu()), st.score()));
    }
    std::cout << "stragglers   " << absl::StrJoin(names, ", ") << "\n";
  }
  if (s.idle_gpus_size() > 0) {
    std::vector<std::string> names;
    for (const v1::GpuRef& g : s.idle_gpus()) names.push_back(GpuName(g));
    std::cout << "idle GPUs    " << absl::StrJoin(names, ", ") << "\n";
  }
  if (s.flags_size() > 0) std::cout << "data quality " << FlagsText(s.flags()) << "\n";
  if (s.fault_event_count() > 0) {
    // The first fault, and where to see them all.
    const v1::FaultEvent& first = s.fault_events(0);
    std::string what =
        first.xid() != 0 ? absl::StrCat("XID ", first.xid()) : first.signal_description();
    if (!first.xid_meaning().empty()) absl::StrAppend(&what, " ", first.xid_meaning());
    std::cout << "GPU faults   " << s.fault_event_count() << ", first " << what << " on "
              << GpuName(first.gpu()) << " at " << FormatUtc(FromProto(first.time()))
              << " (goodputctl faults " << key->cluster() << "/" << key->job_id() << ")\n";
  }
  if (!s.ofu_unavailable_reason().empty()) {
    std::cout << "no OFU       " << s.ofu_unavailable_reason() << "\n";
  }

  std::vector<std::optional<double>> series;
  for (const v1::OfuWindow& w : all.windows()) {
    series.push_back(w.sample_count() > 0 ? std::optional<double>(w.ofu()) : std::nullopt);
  }
  std::cout << "\nOFU over " << all.windows_size() << " windows of "
            << ShortDuration(absl::Seconds(all.effective_window_s())) << "\n  "
            << (series.empty() ? std::string("(no windows yet)") : OfuTrend(series)) << "\n";

  if (per_gpu && all.gpu_windows_size() > 0) {
    std::map<std::string, std::vector<std::optional<double>>> by_gpu;
    std::map<std::string, std::pair<double, int64_t>> mean;  // sum, samples
    std::map<int64_t, size_t> column;                        // window start -> index
    for (const v1::OfuWindow& w : all.windows()) {
      column.emplace(w.start_time().seconds(), column.size());
    }
    for (const v1::OfuWindow& w : all.gpu_windows()) {
      auto& line = by_gpu[GpuName(w.gpu())];
      line.resize(column.size());
      auto it = column.find(w.start_time().seconds());
      if (it != column.end() && w.sample_count() > 0) line[it->second] = w.ofu();
      mean[GpuName(w.gpu())].first += w.ofu() * static_cast<double>(w.sample_count());
      mean[GpuName(w.gpu())].second += w.sample_count();
    }
    // One scale for every GPU, so that a straggler's line is visibly lower than the others.
    double hi = 0;
    for (const v1::OfuWindow& w : all.gpu_windows()) hi = std::max(hi, w.ofu());
    if (hi <= 0) hi = 1;
    Table table(
        {{"GPU"}, {"OFU", Align::kRight}, {absl::StrCat("OVER TIME (0 .. ", Percent(hi), ")")}});
    for (const auto& [gpu, line] : by_gpu) {
      const auto& [sum, n] = mean[gpu];
      table.AddRow({gpu, n > 0 ? Percent(sum / static_cast<double>(n)) : "-",
                    Sparkline(line, 0, hi, kSparkWidth)});
    }
    std::cout << "\n" << table.Render();
  }

  if (args.Has("windows")) {
    Table table({{"START (UTC)"},
                 {"OFU", Align::kRight},
                 {"95% CI"},
                 {"GPUS", Align::kRight},
                 {"COVERAGE", Align::kRight},
                 {"SAMPLES", Align::kRight},
                 {"STATE"},
                 {"FLAGS"}});
    for (const v1::OfuWindow& w : all.windows()) {
      std::string state = w.warmup() ? "warm-up" : "";
      if (w.finalized()) state += state.empty() ? "final" : ",final";
      if (w.revision() > 0) absl::StrAppend(&state, state.empty() ? "" : ",", "rev ", w.revision());
      table.AddRow({FormatUtc(FromProto(w.start_time())), Percent(w.ofu()),
                    Ci(w.ofu_ci95_low(), w.ofu_ci95_high()),
                    absl::StrCat(w.gpus_reporting(), "/", w.gpus_allocated()),
                    Percent(w.gpu_coverage(), 0), absl::StrCat(w.sample_count()),
                    state.empty() ? "-" : state, FlagsText(w.flags())});
    }
    std::cout << "\n" << table.Render();
  }
  return kExitOk;
}

absl::StatusOr<v1::FleetGroupBy> ParseGroupBy(absl::string_view name) {
  std::string n = absl::AsciiStrToLower(absl::StripAsciiWhitespace(name));
  if (n == "cluster") return v1::FLEET_GROUP_BY_CLUSTER;
  if (n == "gpu_model" || n == "gpu-model" || n == "model") return v1::FLEET_GROUP_BY_GPU_MODEL;
  if (n == "team") return v1::FLEET_GROUP_BY_TEAM;
  if (n == "scheduler") return v1::FLEET_GROUP_BY_SCHEDULER;
  if (n == "user") return v1::FLEET_GROUP_BY_USER;
  if (n == "workload") return v1::FLEET_GROUP_BY_WORKLOAD;
  return absl::InvalidArgumentError(absl::StrCat(
      "--group-by: \"", name, "\" is not user, team, workload, cluster, gpu-model or scheduler"));
}

int FleetSummary(const Args& args) {
  v1::GetFleetSummaryRequest request;
  absl::StatusOr<v1::TimeRange> range = TimeRangeFlags(args, "24h");
  if (!range.ok()) return UsageError(range.status().message());
  *request.mutable_time_range() = *range;
  std::vector<v1::FleetGroupBy> group_by;
  for (absl::string_view name : absl::StrSplit(args.Flag("group-by").value_or("cluster,gpu_model"),
                                               ',', absl::SkipWhitespace())) {
    if (name == "none") continue;
    absl::StatusOr<v1::FleetGroupBy> g = ParseGroupBy(name);
    if (!g.ok()) return UsageError(g.status().message());
    request.add_group_by(*g);
    group_by.push_back(*g);
  }
  request.set_cluster(args.Flag("cluster").value_or(""));
  request.set_gpu_model(args.Flag("gpu-model").value_or(""));
  request.set_team(args.Flag("team").value_or(""));
  request.set_user(args.Flag("user").value_or(""));
  request.set_workload_fingerprint(args.Flag("workload").value_or(""));
  if (auto t = args.Flag("threshold")) {
    double v = 0;
    if (!absl::SimpleAtod(*t, &v) || v <= 0 || v >= 1) {
      return UsageError(absl::StrCat("--threshold: \"", *t, "\" is not an OFU fraction in (0, 1)"));
    }
    request.set_low_efficiency_ofu_threshold(v);
  }
  v1::GetFleetSummaryResponse response;
  grpc::Status status = OfuStub(args)->GetFleetSummary(CallContext(args, absl::Seconds(120)).get(),
                                                       request, &response);
  if (!status.ok()) {
    return RpcFailure("fleet summary", args, Service::kOfu, "GetFleetSummary", status);
  }
  if (args.json) {
    PrintJson(response);
    return kExitOk;
  }
  std::vector<Column> columns;
  for (v1::FleetGroupBy g : group_by) {
    columns.push_back({EnumShort(v1::FleetGroupBy_Name(g), "FLEET_GROUP_BY_")});
    absl::AsciiStrToUpper(&columns.back().title);
    std::replace(columns.back().title.begin(), columns.back().title.end(), '_', ' ');
  }
  for (Column c : std::vector<Column>{{"JOBS", Align::kRight},
                                      {"GPU-H", Align::kRight},
                                      {"EFFECTIVE GPU-H", Align::kRight},
                                      {"OFU", Align::kRight},
                                      {"IDLE GPU-H", Align::kRight},
                                      {"LOW-OFU GPU-H", Align::kRight},
                                      {"WASTED GPU-H", Align::kRight},
                                      {"OFU DISTRIBUTION 0..100%"}}) {
    columns.push_back(c);
  }
  Table table(columns);
  auto row = [&](const v1::FleetGroup& g, bool total) {
    std::vector<std::string> cells;
    for (size_t i = 0; i < group_by.size(); ++i) {
      if (total) {
        cells.push_back(i == 0 ? "TOTAL" : "");
        continue;
      }
      switch (group_by[i]) {
        case v1::FLEET_GROUP_BY_CLUSTER:
          cells.push_back(g.cluster());
          break;
        case v1::FLEET_GROUP_BY_GPU_MODEL:
          cells.push_back(g.gpu_model());
          break;
        case v1::FLEET_GROUP_BY_TEAM:
          cells.push_back(g.team().empty() ? "-" : g.team());
          break;
        case v1::FLEET_GROUP_BY_USER:
          cells.push_back(g.user().empty() ? "-" : g.user());
          break;
        case v1::FLEET_GROUP_BY_WORKLOAD:
          cells.push_back(g.workload_fingerprint().empty() ? "-" : g.workload_fingerprint());
          break;
        default:
          cells.push_back(api::SchedulerKindName(g.scheduler()));
      }
    }
    double hi = 0;
    for (double h : g.gpu_hours_by_ofu_decile()) hi = std::max(hi, h);
    std::vector<double> deciles(g.gpu_hours_by_ofu_decile().begin(),
                                g.gpu_hours_by_ofu_decile().end());
    cells.insert(cells.end(), std::initializer_list<std::string>{
                                  absl::StrCat(g.job_count()), Number(g.gpu_hours()),
                                  Number(g.effective_gpu_hours()), Percent(g.ofu_mean()),
                                  Number(g.idle_gpu_hours()), Number(g.low_efficiency_gpu_hours()),
                                  Number(g.gpu_hours() - g.effective_gpu_hours()),
                                  deciles.empty() ? "-" : Sparkline(deciles, 0, hi > 0 ? hi : 1)});
    table.AddRow(cells);
  };
  // Grouped by people or workloads, the waste is what one acts on: most wasted first.
  std::vector<v1::FleetGroup> groups(response.groups().begin(), response.groups().end());
  const bool by_waste = std::any_of(group_by.begin(), group_by.end(), [](v1::FleetGroupBy g) {
    return g == v1::FLEET_GROUP_BY_USER || g == v1::FLEET_GROUP_BY_TEAM ||
           g == v1::FLEET_GROUP_BY_WORKLOAD;
  });
  if (by_waste) {
    std::stable_sort(groups.begin(), groups.end(), [](const v1::FleetGroup& a, const v1::FleetGroup& b) {
      return a.wasted_gpu_hours() > b.wasted_gpu_hours();
    });
  }
  for (const v1::FleetGroup& g : groups) row(g, false);
  if (!group_by.empty()) row(response.total(), true);
  if (group_by.empty()) row(response.total(), false);
  std::cout << "Fleet " << FormatUtc(FromProto(range->start_time())) << " .. "
            << FormatUtc(FromProto(range->end_time())) << " UTC\n\n"
            << table.Render() << "\nWASTED = GPU-hours x (1 - OFU); LOW-OFU = windows below "
            << Percent(response.low_efficiency_ofu_threshold(), 0)
            << " OFU; distribution = GPU-hours per OFU decile\n";
  return kExitOk;
}

// "0.42", "42%", "42.0%" -> 0.42.
absl::StatusOr<double> ParseFraction(absl::string_view flag, absl::string_view text) {
  absl::string_view t = absl::StripAsciiWhitespace(text);
  bool pct = absl::ConsumeSuffix(&t, "%");
  double v = 0;
  if (absl::SimpleAtod(t, &v)) {
    if (pct || v > 1) v /= 100;
    if (v >= 0 && v <= 1) return v;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--", flag, ": \"", text, "\" is not a fraction (0.42) or percentage (42%)"));
}

std::string TileText(const v1::TileConfig& t) {
  return absl::StrCat(t.tile_m(), "x", t.tile_n(), "x", t.tile_k(), " cl ",
                      std::max(1, t.cluster_m()), "x", std::max(1, t.cluster_n()));
}

int GemmOverhead(const Args& args) {
  v1::EstimateGemmOverheadRequest request;
  std::string kernel = args.Flag("kernel").value_or(args.Word(1));
  if (!kernel.empty()) {
    request.set_nvjet_kernel_name(kernel);
  } else if (auto tile = args.Flag("tile")) {
    absl::StatusOr<std::vector<int>> dims = ParseDims("tile", *tile, 3, 3);
    if (!dims.ok()) return UsageError(dims.status().message());
    v1::TileConfig* t = request.mutable_tile();
    t->set_tile_m((*dims)[0]);
    t->set_tile_n((*dims)[1]);
    t->set_tile_k((*dims)[2]);
    if (auto cl = args.Flag("cluster-shape")) {
      absl::StatusOr<std::vector<int>> c = ParseDims("cluster-shape", *cl, 2, 2);
      if (!c.ok()) return UsageError(c.status().message());
      t->set_cluster_m((*c)[0]);
      t->set_cluster_n((*c)[1]);
    }
  } else {
    return UsageError(
        "gemm-overhead needs an nvJet kernel name (e.g. nvjet_sm90_hsh_256x160_64x4_2x1) or "
        "--tile MxNxK [--cluster-shape AxB]");
  }
  std::vector<std::string> shapes = args.Flags("shape");
  if (shapes.empty()) return UsageError("gemm-overhead needs at least one --shape MxNxK[xCOUNT]");
  for (const std::string& text : shapes) {
    absl::StatusOr<GemmShape> shape = ParseGemmShape(text);
    if (!shape.ok()) return UsageError(shape.status().message());
    v1::GemmCall* call = request.add_calls();
    call->set_m(shape->m);
    call->set_n(shape->n);
    call->set_k(shape->k);
    call->set_count(shape->count);
  }
  if (auto ofu = args.Flag("ofu")) {
    absl::StatusOr<double> v = ParseFraction("ofu", *ofu);
    if (!v.ok()) return UsageError(v.status().message());
    request.set_ofu(*v);
  }
  v1::EstimateGemmOverheadResponse response;
  grpc::Status status =
      OfuStub(args)->EstimateGemmOverhead(CallContext(args).get(), request, &response);
  if (!status.ok()) {
    return RpcFailure("gemm-overhead", args, Service::kOfu, "EstimateGemmOverhead", status);
  }
  if (args.json) {
    PrintJson(response);
    return kExitOk;
  }
  Table table({{"M", Align::kRight},
               {"N", Align::kRight},
               {"K", Align::kRight},
               {"COUNT", Align::kRight},
               {"TILE"},
               {"M_EFF", Align::kRight},
               {"N_EFF", Align::kRight},
               {"K_EFF", Align::kRight},
               {"OVERHEAD", Align::kRight}});
  for (const v1::GemmOverhead& g : response.calls()) {
    table.AddRow({absl::StrCat(g.call().m()), absl::StrCat(g.call().n()),
                  absl::StrCat(g.call().k()), absl::StrCat(std::max<int64_t>(1, g.call().count())),
                  TileText(g.tile()), absl::StrCat(g.m_eff()), absl::StrCat(g.n_eff()),
                  absl::StrCat(g.k_eff()), absl::StrFormat("%.2f%%", g.overhead_pct())});
  }
  std::cout << table.Render() << "\ntotal tile-quantization overhead "
            << absl::StrFormat("%.2f%%", response.total_overhead_pct())
            << " (executed FLOPs above 2·M·N·K)\n";
  if (response.has_adjusted_ofu()) {
    std::cout << "OFU " << Percent(request.ofu())
              << " adjusted for it: " << Percent(response.adjusted_ofu()) << "\n";
  }
  return kExitOk;
}

int Gpus(const Args& args) {
  v1::ListGpuSpecsRequest request;
  request.set_model(args.Flag("model").value_or(args.Word(1)));
  v1::ListGpuSpecsResponse response;
  grpc::Status status = OfuStub(args)->ListGpuSpecs(CallContext(args).get(), request, &response);
  if (!status.ok()) return RpcFailure("gpus", args, Service::kOfu, "ListGpuSpecs", status);
  if (args.json) {
    PrintJson(response);
    return kExitOk;
  }
  Table table({{"MODEL"},
               {"SMS", Align::kRight},
               {"TENSOR MHZ", Align::kRight},
               {"BOOST MHZ", Align::kRight},
               {"BF16 TFLOP/S", Align::kRight},
               {"FP8", Align::kRight},
               {"TF32", Align::kRight},
               {"HBM GIB", Align::kRight},
               {"HBM GB/S", Align::kRight},
               {"SOURCE"}});
  for (const v1::GpuSpec& g : response.specs()) {
    std::map<v1::Precision, double> peaks;
    for (const v1::PrecisionPeak& p : g.peaks()) peaks[p.precision()] = p.peak_tflops();
    auto peak = [&](v1::Precision p) {
      auto it = peaks.find(p);
      return it == peaks.end() ? std::string("-") : Number(it->second, 1);
    };
    table.AddRow({g.model(), absl::StrCat(g.sm_count()), Number(g.tensor_max_clock_mhz(), 0),
                  Number(g.sm_boost_clock_mhz(), 0), peak(v1::PRECISION_BF16),
                  peak(v1::PRECISION_FP8), peak(v1::PRECISION_TF32),
                  Number(g.hbm_capacity_mib() / 1024, 0), Number(g.hbm_bandwidth_gb_per_s(), 0),
                  g.operator_override() ? "operator override" : g.source_note().substr(0, 40)});
  }
  std::cout << table.Render()
            << "(dense peaks; OFU divides by the tensor clock, not the boost clock)\n";
  return kExitOk;
}

}  // namespace

std::vector<Command> OfuCommands() {
  return {
      {.words = {"ofu"},
       .arguments = "CLUSTER/JOB_ID",
       .summary = "a job's OFU: summary, a sparkline of its windows, per GPU on request",
       .details = "  --since D | --from T [--to T]   only windows in this range [whole job]\n"
                  "  --resolution D                  merge windows into buckets, e.g. 10m\n"
                  "  --per-gpu                       a sparkline per GPU\n"
                  "  --windows                       a table of the windows\n",
       .flags = {"cluster", "job-id", "since", "from", "to", "resolution", "per-gpu", "windows"},
       .run = JobOfu},
      {.words = {"fleet", "summary"},
       .summary = "fleet OFU and GPU-hours (allocated, effective, idle, wasted) by group",
       .details = "  --since D | --from T [--to T]   time range [24h]\n"
                  "  --group-by LIST                 user,team,workload,cluster,gpu-model,scheduler "
                  "or none [cluster,gpu_model]; by user, team or workload most wasted first\n"
                  "  --cluster C --gpu-model M --team T --user U --workload W   filters\n"
                  "  --threshold F                   low-efficiency OFU threshold [server: 0.2]\n",
       .flags = {"since", "from", "to", "group-by", "cluster", "gpu-model", "team", "user",
                 "workload", "threshold"},
       .run = FleetSummary},
      {.words = {"gemm-overhead"},
       .arguments = "[NVJET_KERNEL_NAME]",
       .summary = "tile-quantization overhead of GEMM shapes, and OFU adjusted for it",
       .details = "  --shape MxNxK[xCOUNT]           a GEMM (repeatable, required)\n"
                  "  --kernel NAME                   nvJet kernel, e.g. "
                  "nvjet_sm90_hsh_256x160_64x4_2x1\n"
                  "  --tile MxNxK [--cluster-shape AxB]   explicit tile instead of a kernel\n"
                  "  --ofu F                         a measured OFU (0.42 or 42%) to adjust\n",
       .flags = {"shape", "kernel", "tile", "cluster-shape", "ofu"},
       .run = GemmOverhead},
      {.words = {"gpus"},
       .arguments = "[MODEL]",
       .summary = "the GPU catalog: SMs, tensor clock, dense peaks, HBM",
       .details = "  --model M     only the entry this model string resolves to\n",
       .flags = {"model"},
       .run = Gpus},
  };
}

}  // namespace goodput::ctl
