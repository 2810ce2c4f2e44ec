#include "services/ingest/remote_write.h"

#include <cmath>
#include <cstring>
#include <map>
#include <utility>

#include "absl/algorithm/container.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "snappy.h"

namespace goodput::ingest {
namespace {

// Prometheus marks a series that disappeared with this NaN payload.
constexpr uint64_t kStaleNaNBits = 0x7ff0000000000002ULL;

// A label value in the text format's escaping.
void AppendEscaped(absl::string_view value, std::string* out) {
  for (char c : value) {
    if (c == '\\') {
      out->append("\\\\");
    } else if (c == '"') {
      out->append("\\\"");
    } else if (c == '\n') {
      out->append("\\n");
    } else {
      out->push_back(c);
    }
  }
}

void AppendValue(double value, std::string* out) {
  if (std::isnan(value)) {
    out->append("NaN");
  } else if (std::isinf(value)) {
    out->append(value > 0 ? "+Inf" : "-Inf");
  } else {
    absl::StrAppendFormat(out, "%.17g", value);
  }
}

// One cluster's series rendered as exposition text, and where each line came from.
struct Rendered {
  std::string text;
  std::vector<std::pair<int64_t, int64_t>> origin;  // line - 1 -> (series, sample)
  std::vector<Refusal> refusals;
  int64_t refused_count = 0;
  int64_t ignored_count = 0;
  int64_t ha_dropped_count = 0;
};

// "line N of batch B" -> "series S sample K of batch B" in a refusal from the parser.
void Relocate(const Rendered& rendered, const std::string& batch_id, Refusal* r) {
  if (r->line_number <= 0 || r->line_number > static_cast<int64_t>(rendered.origin.size())) {
    return;
  }
  const auto [series, sample] = rendered.origin[r->line_number - 1];
  const std::string old_prefix = absl::StrCat("line ", r->line_number, " of batch ", batch_id);
  const std::string new_prefix =
      absl::StrCat("series ", series, " sample ", sample, " of batch ", batch_id);
  if (absl::StartsWith(r->message, old_prefix)) {
    r->message = absl::StrCat(new_prefix, r->message.substr(old_prefix.size()));
  }
  r->line_number = 0;
}

}  // namespace

bool IsStaleMarker(double value) {
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  return bits == kStaleNaNBits;
}

absl::StatusOr<prometheus::WriteRequest> DecodeWriteRequest(absl::string_view body,
                                                            int64_t max_decompressed_bytes) {
  size_t length = 0;
  if (!snappy::GetUncompressedLength(body.data(), body.size(), &length)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the body (", body.size(),
        " bytes) is not a snappy block: its length header is corrupt (remote_write bodies are "
        "snappy block-compressed, not framed)"));
  }
  if (static_cast<int64_t>(length) > max_decompressed_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the body decompresses to ", length, " bytes; the limit is ", max_decompressed_bytes,
        " bytes (ingest.remote_write.max_decompressed_bytes): send smaller requests"));
  }
  std::string raw;
  if (!snappy::Uncompress(body.data(), body.size(), &raw)) {
    return absl::InvalidArgumentError(absl::StrCat("the body (", body.size(),
                                                   " bytes) is a corrupt snappy block: it "
                                                   "does not decompress"));
  }
  prometheus::WriteRequest request;
  if (!request.ParseFromString(raw)) {
    return absl::InvalidArgumentError(
        absl::StrCat("the decompressed body (", raw.size(),
                     " bytes) is not a valid prometheus.WriteRequest protobuf"));
  }
  return request;
}

std::string ContentHash(absl::string_view data) {
  // Two 64-bit FNV-1a hashes with different offset bases; stable across processes and
  // builds (unlike absl::Hash), which is what a retry must match.
  uint64_t a = 0xcbf29ce484222325ULL;
  uint64_t b = 0x84222325cbf29ce4ULL ^ static_cast<uint64_t>(data.size());
  for (unsigned char c : data) {
    a = (a ^ c) * 0x100000001b3ULL;
    b = (b ^ c) * 0x100000001b3ULL;
    b ^= b >> 29;
  }
  return absl::StrFormat("%016x%016x", a, b);
}

std::string SeriesReplica(const prometheus::TimeSeries& series,
                          const std::vector<std::string>& replica_labels) {
  for (const std::string& name : replica_labels) {
    for (const prometheus::Label& label : series.labels()) {
      if (label.name() == name && !label.value().empty()) return label.value();
    }
  }
  return "";
}

std::string SeriesCluster(const prometheus::TimeSeries& series,
                          const std::string& default_cluster) {
  for (const prometheus::Label& label : series.labels()) {
    if (label.name() == "cluster" && !label.value().empty()) return label.value();
  }
  return default_cluster;
}

std::vector<RemoteWriteBatch> MapWriteRequest(const prometheus::WriteRequest& request,
                                              const RemoteWriteMapOptions& options) {
  std::map<std::string, Rendered> by_cluster;
  std::vector<Refusal> unclustered;
  int64_t unclustered_count = 0;
  for (int s = 0; s < request.timeseries_size(); ++s) {
    const prometheus::TimeSeries& series = request.timeseries(s);
    std::string name;
    const std::string cluster = SeriesCluster(series, options.default_cluster);
    size_t label_count = 0;  // besides __name__
    for (const prometheus::Label& label : series.labels()) {
      if (label.name() == "__name__") {
        name = label.value();
      } else {
        ++label_count;
      }
    }
    if (!options.dropped_replicas.empty() &&
        options.dropped_replicas.contains(
            std::make_pair(cluster, SeriesReplica(series, options.replica_labels)))) {
      by_cluster[cluster].ha_dropped_count += series.samples_size();
      continue;
    }
    if (!name.empty() && !MapDcgmMetric(name).has_value() &&
        !core::FaultSignalForMetric(name).has_value()) {
      by_cluster[cluster].ignored_count += series.samples_size();
      continue;
    }
    auto refuse_series = [&](std::vector<Refusal>* into, RefusalCode code, std::string field,
                             absl::string_view reason) {
      Refusal r;
      r.batch_id = options.batch_id;
      r.index = s;
      r.field = std::move(field);
      r.value = TruncateForRefusal(name);
      r.code = code;
      r.message = absl::StrCat("series ", s, " of batch ", options.batch_id, " (", r.value, ", ",
                               series.samples_size(), " samples): ", reason);
      into->push_back(std::move(r));
    };
    if (cluster.empty()) {
      unclustered_count += series.samples_size();
      refuse_series(&unclustered, RefusalCode::kMissingField, "cluster",
                    "has no cluster label and no default cluster is configured "
                    "(ingest.remote_write.cluster or ?cluster=)");
      continue;
    }
    if (auto reason = CheckText(cluster, api::kMaxClusterBytes)) {
      unclustered_count += series.samples_size();
      refuse_series(&unclustered, RefusalCode::kMalformed, "cluster",
                    absl::StrCat("has cluster=\"", TruncateForRefusal(cluster), "\", which ",
                                 *reason));
      continue;
    }
    Rendered& out = by_cluster[cluster];
    if (name.empty()) {
      out.refused_count += series.samples_size();
      refuse_series(&out.refusals, RefusalCode::kMissingField, "__name__",
                    "has no __name__ label (metric name)");
      continue;
    }
    // Refused before its labels are rendered once per sample.
    if (label_count > options.max_labels_per_series) {
      out.refused_count += series.samples_size();
      refuse_series(&out.refusals, RefusalCode::kOutOfRange, "labels",
                    absl::StrCat("has ", label_count, " labels, more than the ",
                                 options.max_labels_per_series,
                                 " a series may have (ingest.max_labels_per_series)"));
      continue;
    }
    std::string prefix = name;
    bool first = true;
    for (const prometheus::Label& label : series.labels()) {
      if (label.name() == "__name__") continue;
      if (absl::c_linear_search(options.replica_labels, label.name())) continue;
      absl::StrAppend(&prefix, first ? "{" : ",", label.name(), "=\"");
      AppendEscaped(label.value(), &prefix);
      prefix.push_back('"');
      first = false;
    }
    if (!first) prefix.push_back('}');
    for (int k = 0; k < series.samples_size(); ++k) {
      const prometheus::Sample& sample = series.samples(k);
      if (IsStaleMarker(sample.value())) {
        ++out.ignored_count;
        continue;
      }
      absl::StrAppend(&out.text, prefix, " ");
      AppendValue(sample.value(), &out.text);
      absl::StrAppend(&out.text, " ", sample.timestamp(), "\n");
      out.origin.emplace_back(s, k);
    }
  }

  std::vector<RemoteWriteBatch> batches;
  for (auto& [cluster, rendered] : by_cluster) {
    if (cluster.empty()) continue;  // only ignored series were counted here
    ExpositionOptions parse_options;
    parse_options.batch_id = options.batch_id;
    parse_options.validation = options.validation;
    // Every rendered line has its timestamp; this only guards against a sample without.
    parse_options.scrape_time_unix_ms = options.validation.now_unix_ms;
    parse_options.max_labels_per_series = options.max_labels_per_series;
    ExpositionResult parsed = ParseDcgmExposition(rendered.text, parse_options);
    RemoteWriteBatch batch;
    batch.cluster = cluster;
    batch.samples.reserve(parsed.samples.size());
    for (ExpositionSample& s : parsed.samples) batch.samples.push_back(std::move(s.sample));
    batch.refusals = std::move(rendered.refusals);
    for (Refusal& r : parsed.refusals) {
      Relocate(rendered, options.batch_id, &r);
      batch.refusals.push_back(std::move(r));
    }
    batch.refused_count = rendered.refused_count + parsed.refused_line_count;
    batch.ignored_count = rendered.ignored_count + parsed.ignored_line_count;
    batch.blank_value_count = parsed.blank_value_count;
    batch.ha_dropped_count = rendered.ha_dropped_count;
    batches.push_back(std::move(batch));
  }
  if (!unclustered.empty()) {
    RemoteWriteBatch batch;  // refusals only; no cluster to store under
    batch.refusals = std::move(unclustered);
    batch.refused_count = unclustered_count;
    batches.push_back(std::move(batch));
  }
  return batches;
}

HttpReply RemoteWriteReceiver::Handle(
    absl::string_view body, absl::string_view content_encoding, absl::string_view cluster_param,
    const std::function<absl::Status(absl::string_view cluster)>& cluster_allowed) {
  if (static_cast<int64_t>(body.size()) > options_.max_body_bytes) {
    return {413, absl::StrCat("the body is ", body.size(), " bytes; the limit is ",
                              options_.max_body_bytes,
                              " bytes (ingest.remote_write.max_body_bytes): send smaller "
                              "requests (queue_config.max_samples_per_send)\n")};
  }
  if (!content_encoding.empty() && !absl::EqualsIgnoreCase(content_encoding, "snappy")) {
    return {400, absl::StrCat("Content-Encoding \"", content_encoding,
                              "\" is not supported; remote_write bodies are snappy\n")};
  }
  absl::StatusOr<prometheus::WriteRequest> request =
      DecodeWriteRequest(body, options_.max_decompressed_bytes);
  if (!request.ok()) {
    const int status = request.status().code() == absl::StatusCode::kResourceExhausted ? 413 : 400;
    return {status, absl::StrCat(request.status().message(), "\n")};
  }
  RemoteWriteMapOptions map_options;
  // The hash of the parsed request's canonical bytes would differ from the body's only for
  // senders that re-encode a retry; hashing the body is what a retry repeats exactly.
  map_options.batch_id = absl::StrCat("remote_write-", ContentHash(body));
  map_options.default_cluster =
      cluster_param.empty() ? options_.default_cluster : std::string(cluster_param);
  map_options.validation = pipeline_->validation_options();
  if (cluster_allowed) {
    absl::flat_hash_set<std::string> checked;
    for (const prometheus::TimeSeries& series : request->timeseries()) {
      std::string cluster = SeriesCluster(series, map_options.default_cluster);
      if (cluster.empty() || !checked.insert(cluster).second) continue;
      if (absl::Status s = cluster_allowed(cluster); !s.ok()) {
        return {403, absl::StrCat("not stored: ", s.message(), "\n")};
      }
    }
  }
  if (options_.ha_elector) {
    map_options.replica_labels = options_.ha.replica_labels;
    absl::flat_hash_set<std::pair<std::string, std::string>> seen;
    for (const prometheus::TimeSeries& series : request->timeseries()) {
      std::string replica = SeriesReplica(series, options_.ha.replica_labels);
      if (replica.empty()) continue;
      std::pair<std::string, std::string> key(SeriesCluster(series, map_options.default_cluster),
                                              std::move(replica));
      if (key.first.empty() || !seen.insert(key).second) continue;
      absl::StatusOr<std::string> elected = options_.ha_elector(key.first, key.second);
      if (!elected.ok()) {
        return {503, absl::StrCat("not stored: electing the HA replica failed: ",
                                  elected.status().message(), " (retryable)\n")};
      }
      if (*elected != key.second) map_options.dropped_replicas.insert(std::move(key));
    }
  }
  map_options.max_labels_per_series = options_.max_labels_per_series;
  std::vector<RemoteWriteBatch> batches = MapWriteRequest(*request, map_options);

  int64_t stored = 0;
  int64_t refused = 0;
  int64_t ignored = 0;
  int64_t ha_dropped = 0;
  int64_t unattributed = 0;
  std::vector<Refusal> refusals;
  for (RemoteWriteBatch& batch : batches) {
    ignored += batch.ignored_count;
    ha_dropped += batch.ha_dropped_count;
    pipeline_->CountSetAside("remote_write", batch.ignored_count, batch.blank_value_count,
                             batch.ha_dropped_count);
    if (batch.cluster.empty()) {
      refused += batch.refused_count;
      for (Refusal& r : batch.refusals) refusals.push_back(std::move(r));
      continue;
    }
    // One batch id per cluster, so a request split over clusters is still idempotent.
    const std::string batch_id = batches.size() == 1
                                     ? map_options.batch_id
                                     : absl::StrCat(map_options.batch_id, "-", batch.cluster);
    const int64_t refused_here = batch.refused_count;
    absl::StatusOr<BatchOutcome> outcome =
        pipeline_->Ingest(batch.cluster, batch_id, "remote_write", std::move(batch.samples),
                          /*already_validated=*/true, std::move(batch.refusals), refused_here);
    if (!outcome.ok()) {
      const absl::StatusCode code = outcome.status().code();
      const int status = code == absl::StatusCode::kResourceExhausted ? 429
                         : code == absl::StatusCode::kInvalidArgument ? 400
                                                                      : 503;
      return {status, absl::StrCat("not stored: ", outcome.status().message(),
                                   status == 400 ? "\n" : " (retryable)\n")};
    }
    stored += outcome->result.stored_count;
    unattributed += outcome->result.unattributed_count;
    if (!outcome->result.duplicate) refused += outcome->result.refused_count;
    for (Refusal& r : outcome->refusals) refusals.push_back(std::move(r));
  }
  int64_t serving_stored = 0;
  if (options_.serving_store != nullptr) {
    ServingParseOptions serving_options;
    serving_options.cluster = map_options.default_cluster;
    serving_options.batch_id = map_options.batch_id;
    serving_options.identity = pipeline_->options().identity;
    serving_options.max_labels_per_series = options_.max_labels_per_series;
    serving_options.replica_labels = options_.ha.replica_labels;
    if (!map_options.dropped_replicas.empty()) {
      serving_options.drop_series = [&map_options](const prometheus::TimeSeries& series,
                                                   const std::string& cluster) {
        return map_options.dropped_replicas.contains(
            std::make_pair(cluster, SeriesReplica(series, map_options.replica_labels)));
      };
    }
    for (ServingBatch& batch : MapServingSeries(*request, serving_options)) {
      ignored -= static_cast<int64_t>(batch.samples.size()) + batch.refused_count;
      refused += batch.refused_count;
      for (Refusal& r : batch.refusals) refusals.push_back(std::move(r));
      if (batch.cluster.empty() || batch.samples.empty()) continue;
      absl::StatusOr<ServingOutcome> stored_serving =
          options_.serving_store->Store(batch, absl::StrCat(map_options.batch_id, "-serving"));
      if (!stored_serving.ok()) {
        return {503, absl::StrCat("GPU samples stored; serving samples not stored: ",
                                  stored_serving.status().message(), " (retryable)\n")};
      }
      serving_stored += stored_serving->stored + stored_serving->duplicates;
      refused += stored_serving->refused;
      for (Refusal& r : stored_serving->refusals) refusals.push_back(std::move(r));
    }
  }
  int64_t reports_stored = 0;
  if (options_.report_sink && !options_.throughput_metrics.empty()) {
    MappedReports mapped =
        MapThroughputSeries(*request, options_.throughput_metrics, map_options.default_cluster,
                            map_options.batch_id, options_.max_labels_per_series);
    ignored -= mapped.sample_count;
    refused += mapped.refused_count;
    for (Refusal& r : mapped.refusals) refusals.push_back(std::move(r));
    if (!mapped.reports.empty()) {
      // Acknowledge only what goodput-mfu has committed; the GPU samples above are stored
      // under the request's batch id, so a retry does not store them twice.
      absl::StatusOr<ReportSinkResult> sent =
          options_.report_sink(map_options.batch_id, mapped.reports);
      if (!sent.ok()) {
        const absl::StatusCode code = sent.status().code();
        const int status = code == absl::StatusCode::kResourceExhausted ? 429
                           : code == absl::StatusCode::kInvalidArgument ? 400
                                                                        : 503;
        return {status, absl::StrCat("GPU samples stored; MFU reports not stored: ",
                                     sent.status().message(),
                                     status == 400 ? "\n" : " (retryable)\n")};
      }
      reports_stored = sent->stored + sent->duplicates;
      refused += sent->refused;
      for (std::string& message : sent->refusal_messages) {
        Refusal r;
        r.batch_id = map_options.batch_id;
        r.message = std::move(message);
        refusals.push_back(std::move(r));
      }
    }
  }
  std::string summary = absl::StrCat(
      "stored ", stored, " GPU samples (", unattributed, " not yet attributed to a job), ",
      serving_stored, " serving samples and ", reports_stored, " MFU reports, refused ", refused,
      " series samples, ignored ", ignored,
      ha_dropped > 0 ? absl::StrCat(", dropped ", ha_dropped, " of a standby HA replica") : "",
      "\n");
  if (refusals.empty()) return {200, std::move(summary)};
  HttpReply reply{400, std::move(summary)};
  int listed = 0;
  for (const Refusal& r : refusals) {
    if (listed++ == options_.max_listed_refusals) {
      absl::StrAppend(&reply.body, "... and ", refusals.size() - options_.max_listed_refusals,
                      " more refusals\n");
      break;
    }
    absl::StrAppend(&reply.body, r.message, "\n");
  }
  return reply;
}

}  // namespace goodput::ingest
