#include "services/ingest/serving_metrics.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "services/ingest/attribution.h"
#include "services/ingest/exposition.h"
#include "services/ingest/remote_write.h"

namespace goodput::ingest {
namespace {

using Kind = ServingMetricKind;

// Exposed names (prometheus_client prints a Counter named "x" or "x_total" as "x_total").
const absl::flat_hash_map<std::string, ServingMetricMapping>& Mappings() {
  static const auto* m = new absl::flat_hash_map<std::string, ServingMetricMapping>{
      // vllm/v1/metrics/loggers.py
      {"vllm:prompt_tokens_total", {"vllm", Kind::kPromptTokens}},
      {"vllm:generation_tokens_total", {"vllm", Kind::kGenerationTokens}},
      {"vllm:request_success_total", {"vllm", Kind::kRequests}},
      {"vllm:num_requests_running", {"vllm", Kind::kRunning}},
      {"vllm:num_requests_waiting", {"vllm", Kind::kWaiting}},
      {"vllm:e2e_request_latency_seconds_sum", {"vllm", Kind::kLatencySumS}},
      {"vllm:e2e_request_latency_seconds_count", {"vllm", Kind::kLatencyCount}},
      // vllm/v1/metrics/perf.py (--enable-mfu-metrics)
      {"vllm:estimated_flops_per_gpu_total", {"vllm", Kind::kFlopsPerGpu}},
      // python/sglang/srt/metrics/collector.py
      {"sglang:prompt_tokens_total", {"sglang", Kind::kPromptTokens}},
      {"sglang:generation_tokens_total", {"sglang", Kind::kGenerationTokens}},
      {"sglang:num_requests_total", {"sglang", Kind::kRequests}},
      {"sglang:num_running_reqs", {"sglang", Kind::kRunning}},
      {"sglang:num_queue_reqs", {"sglang", Kind::kWaiting}},
      {"sglang:e2e_request_latency_seconds_sum", {"sglang", Kind::kLatencySumS}},
      {"sglang:e2e_request_latency_seconds_count", {"sglang", Kind::kLatencyCount}},
      {"sglang:estimated_flops_per_gpu_total", {"sglang", Kind::kFlopsPerGpu}},
  };
  return *m;
}

bool IsHostLabel(absl::string_view name) {
  return name == "Hostname" || name == "hostname" || name == "node" || name == "instance";
}

// Labels that say where a series comes from, not which engine series it is.
bool IsIdentityLabel(absl::string_view name) {
  if (IsHostLabel(name) || name == "cluster" || name == "job" || name == "model_name" ||
      name == "__name__" || name == "job_id" || name == "slurm_job_id" || name == "hpc_job") {
    return true;
  }
  for (absl::string_view pod : kWorkloadLabels) {
    if (name == pod) return true;
  }
  return false;
}

// Builds the sample of one series' value from its labels (name order not required).
ServingSample FromLabels(const std::map<std::string, std::string>& labels,
                         const ServingMetricMapping& mapping, const ServingParseOptions& options) {
  ServingSample out;
  out.engine = std::string(mapping.engine);
  out.metric = mapping.kind;
  std::string host;
  for (const char* name : {"Hostname", "hostname", "node", "instance"}) {
    if (auto it = labels.find(name); it != labels.end() && !it->second.empty()) {
      host = it->second;
      break;
    }
  }
  // "gpu-node-042:8000" -> "gpu-node-042"; a bracketed IPv6 address keeps its brackets.
  if (!host.empty() && host.front() != '[') {
    if (size_t colon = host.rfind(':'); colon != std::string::npos && host.find(':') == colon) {
      host.resize(colon);
    }
  } else if (!host.empty()) {
    if (size_t end = host.find(']'); end != std::string::npos) host.resize(end + 1);
  }
  if (host.empty()) host = options.default_host;
  out.host = host.empty() ? "" : CanonicalHost(host, options.identity);
  if (auto it = labels.find("model_name"); it != labels.end()) out.model = it->second;

  Sample probe;
  for (const auto& [k, v] : labels) probe.labels.emplace(k, v);
  for (const char* name : {"job_id", "slurm_job_id"}) {
    if (auto it = labels.find(name); it != labels.end() && !it->second.empty()) {
      out.job_ids.push_back(it->second);
    }
  }
  for (std::string& id : LabelJobIds(probe, options.identity.pod_labels)) {
    out.job_ids.push_back(std::move(id));
  }
  for (const PodLabelPair& pair : options.identity.pod_labels) {
    auto pod = labels.find(pair.pod);
    auto ns = labels.find(pair.ns);
    if (pod != labels.end() && ns != labels.end()) {
      out.pod = absl::StrCat(ns->second, "/", pod->second);
      break;
    }
  }
  for (const auto& [k, v] : labels) {
    if (IsIdentityLabel(k) ||
        std::find(options.replica_labels.begin(), options.replica_labels.end(), k) !=
            options.replica_labels.end()) {
      continue;
    }
    absl::StrAppend(&out.series, out.series.empty() ? "" : ",", k, "=", v);
  }
  return out;
}

}  // namespace

absl::string_view ServingMetricName(ServingMetricKind kind) {
  switch (kind) {
    case Kind::kPromptTokens:
      return "prompt_tokens";
    case Kind::kGenerationTokens:
      return "generation_tokens";
    case Kind::kRequests:
      return "requests";
    case Kind::kRunning:
      return "running";
    case Kind::kWaiting:
      return "waiting";
    case Kind::kFlopsPerGpu:
      return "flops_per_gpu";
    case Kind::kLatencySumS:
      return "latency_sum_s";
    case Kind::kLatencyCount:
      return "latency_count";
  }
  return "";
}

std::optional<ServingMetricMapping> MapServingMetric(absl::string_view name) {
  auto it = Mappings().find(name);
  if (it == Mappings().end()) return std::nullopt;
  return it->second;
}

ServingBatch ParseServingExposition(absl::string_view body, const ServingParseOptions& options) {
  ServingBatch batch;
  batch.cluster = options.cluster;
  int64_t line_number = 0;
  int64_t sample_index = 0;
  for (absl::string_view line : absl::StrSplit(body, '\n')) {
    ++line_number;
    line = absl::StripTrailingAsciiWhitespace(line);
    if (line.empty() || line.front() == '#') continue;
    // Only lines of serving metrics are read: the name ends at '{' or a blank.
    const size_t name_end = line.find_first_of("{ \t");
    const absl::string_view name = line.substr(0, name_end);
    std::optional<ServingMetricMapping> mapping = MapServingMetric(name);
    if (!mapping) continue;
    const int64_t index = sample_index++;
    auto refuse = [&](absl::string_view field, absl::string_view value, RefusalCode code,
                      absl::string_view reason) {
      Refusal r;
      r.batch_id = options.batch_id;
      r.index = index;
      r.line_number = line_number;
      r.field = std::string(field);
      r.value = TruncateForRefusal(value);
      r.code = code;
      r.message = absl::StrCat("line ", line_number, " of batch ", options.batch_id, " (", name,
                               "): ", reason);
      batch.refusals.push_back(std::move(r));
      ++batch.refused_count;
    };
    absl::StatusOr<PromLine> parsed = ParsePromLine(line, options.max_labels_per_series);
    if (!parsed.ok()) {
      refuse("line", line,
             parsed.status().code() == absl::StatusCode::kResourceExhausted
                 ? RefusalCode::kOutOfRange
                 : RefusalCode::kMalformed,
             parsed.status().message());
      continue;
    }
    if (!std::isfinite(parsed->value)) {
      refuse(name, absl::StrCat(parsed->value), RefusalCode::kNotFinite,
             absl::StrCat("value ", parsed->value, " is not a finite number"));
      continue;
    }
    std::map<std::string, std::string> labels = options.extra_labels;
    for (auto& [k, v] : parsed->labels) labels[k] = v;
    ServingSample sample = FromLabels(labels, *mapping, options);
    sample.time_unix_ms = parsed->timestamp_ms.value_or(options.scrape_time_unix_ms);
    sample.value = parsed->value;
    batch.samples.push_back(std::move(sample));
  }
  return batch;
}

std::vector<ServingBatch> MapServingSeries(const prometheus::WriteRequest& request,
                                           const ServingParseOptions& options) {
  std::map<std::string, ServingBatch> by_cluster;
  for (int s = 0; s < request.timeseries_size(); ++s) {
    const prometheus::TimeSeries& series = request.timeseries(s);
    std::string name;
    for (const prometheus::Label& l : series.labels()) {
      if (l.name() == "__name__") name = l.value();
    }
    std::optional<ServingMetricMapping> mapping = MapServingMetric(name);
    if (!mapping) continue;
    std::map<std::string, std::string> labels = options.extra_labels;
    for (const prometheus::Label& l : series.labels()) labels[l.name()] = l.value();
    std::string cluster = options.cluster;
    if (auto it = labels.find("cluster"); it != labels.end() && !it->second.empty()) {
      cluster = it->second;
    }
    if (options.drop_series && options.drop_series(series, cluster)) continue;
    ServingBatch& batch = by_cluster[cluster];
    batch.cluster = cluster;
    auto refuse = [&](int k, absl::string_view field, absl::string_view value, RefusalCode code,
                      absl::string_view reason) {
      Refusal r;
      r.batch_id = options.batch_id;
      r.index = s;
      r.field = std::string(field);
      r.value = TruncateForRefusal(value);
      r.code = code;
      r.message = absl::StrCat("series ", s, " sample ", k, " of batch ", options.batch_id, " (",
                               name, "): ", reason);
      batch.refusals.push_back(std::move(r));
      ++batch.refused_count;
    };
    if (static_cast<size_t>(series.labels_size()) - 1 > options.max_labels_per_series) {
      refuse(0, "labels", name, RefusalCode::kOutOfRange,
             absl::StrCat("has ", series.labels_size() - 1, " labels, more than the ",
                          options.max_labels_per_series,
                          " a series may have (ingest.max_labels_per_series)"));
      continue;
    }
    const ServingSample base = FromLabels(labels, *mapping, options);
    for (int k = 0; k < series.samples_size(); ++k) {
      const prometheus::Sample& sample = series.samples(k);
      if (IsStaleMarker(sample.value())) continue;
      if (cluster.empty()) {
        refuse(k, "cluster", "", RefusalCode::kMissingField,
               "has no cluster label and no default cluster is configured "
               "(ingest.remote_write.cluster or ?cluster=)");
        continue;
      }
      if (!std::isfinite(sample.value())) {
        refuse(k, name, absl::StrCat(sample.value()), RefusalCode::kNotFinite,
               absl::StrCat("value ", sample.value(), " is not a finite number"));
        continue;
      }
      ServingSample out = base;
      out.time_unix_ms = sample.timestamp();
      out.value = sample.value();
      batch.samples.push_back(std::move(out));
    }
  }
  std::vector<ServingBatch> out;
  for (auto& [cluster, batch] : by_cluster) out.push_back(std::move(batch));
  return out;
}

}  // namespace goodput::ingest
