// Prometheus remote_write 1.0 receiver: `POST /api/v1/write` with a snappy block-compressed
// protobuf `prometheus.WriteRequest`. Series are dcgm-exporter metrics as Prometheus scraped
// them; they are mapped to GPU samples by the same code as the text exposition
// (ParseDcgmExposition, so metric mapping, identity labels, `hpc_job`/`pod` labels and
// per-line validation are one piece of code), then stored through IngestPipeline.
//
// Status codes follow remote_write's retry rules:
//   200  everything usable was committed (other metrics such as `up` are ignored);
//   400  a corrupt snappy block or protobuf, or invalid samples or series (e.g. one with more
//        labels than ingest.max_labels_per_series; the valid ones of the same request are
//        committed; the body lists what was refused and why);
//   413  body or decompressed size above the limit (named in the body);
//   429  backpressure (IngestPipeline saturated): retry later;
//   503  PostgreSQL unavailable: retry later.
// A 2xx or 400 is sent only after the commit. A retried request is recognized by a hash of its
// decompressed content (the batch id), so it is not stored twice.
//
//   RemoteWriteReceiver receiver(&pipeline, {.default_cluster = "eos"});
//   http.Post("/api/v1/write", [&](const httplib::Request& req, httplib::Response& res) {
//     HttpReply reply = receiver.Handle(req.body, req.get_header_value("Content-Encoding"),
//                                       req.get_param_value("cluster"));
//     res.status = reply.status;
//     res.set_content(reply.body, "text/plain");
//   });
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "prometheus/remote.pb.h"
#include "services/ingest/exposition.h"
#include "services/ingest/ingest_service.h"
#include "services/ingest/sample.h"
#include "services/ingest/serving_store.h"
#include "services/ingest/throughput_metrics.h"

namespace goodput::ingest {

// Decompresses (snappy block format) and parses a WriteRequest. INVALID_ARGUMENT with the
// reason for a corrupt block or message; RESOURCE_EXHAUSTED naming the limit when the
// decompressed size is above `max_decompressed_bytes`.
absl::StatusOr<prometheus::WriteRequest> DecodeWriteRequest(absl::string_view body,
                                                            int64_t max_decompressed_bytes);

// Prometheus's stale marker: the NaN payload it sends for a series that disappeared.
bool IsStaleMarker(double value);

// A stable content hash of a decompressed body (32 hex digits), used as the batch id so
// that a retried request is recognized.
std::string ContentHash(absl::string_view data);

// The samples of one cluster in a request, mapped and validated.
struct RemoteWriteBatch {
  std::string cluster;
  std::vector<Sample> samples;
  std::vector<Refusal> refusals;  // located as "series S sample K of batch B"
  int64_t refused_count = 0;      // series samples refused
  int64_t ignored_count = 0;      // samples of metrics goodput does not use, stale markers
  int64_t blank_value_count = 0;  // DCGM blank values, kept as missing values
  int64_t ha_dropped_count = 0;   // samples of the HA replica that is not elected
};

// The replica label value of a series (the first of `replica_labels` it carries), or "".
std::string SeriesReplica(const prometheus::TimeSeries& series,
                          const std::vector<std::string>& replica_labels);

// The cluster a series belongs to: its `cluster` label, else `default_cluster`.
std::string SeriesCluster(const prometheus::TimeSeries& series,
                          const std::string& default_cluster);

struct RemoteWriteMapOptions {
  std::string batch_id;
  // Cluster of series without a `cluster` label; empty refuses such series.
  std::string default_cluster = {};
  ValidationOptions validation;
  // Labels naming the Prometheus replica of an HA pair: never stored as sample labels.
  std::vector<std::string> replica_labels = {};
  // (cluster, replica) pairs whose series are dropped: not the elected replica (HaOptions).
  absl::flat_hash_set<std::pair<std::string, std::string>> dropped_replicas = {};
  // A series with more labels (besides __name__) is refused alone.
  size_t max_labels_per_series = kDefaultMaxLabelsPerSeries;
};

// Maps every series sample through ParseDcgmExposition, grouped by cluster (the series'
// `cluster` label, else `default_cluster`). Stale markers are ignored, not refused.
std::vector<RemoteWriteBatch> MapWriteRequest(const prometheus::WriteRequest& request,
                                              const RemoteWriteMapOptions& options);

struct HttpReply {
  int status = 200;
  std::string body;
};

// Prometheus HA pairs: two replicas remote_write the same series, differing only in an
// external replica label. As Cortex's and Mimir's HA trackers do, one replica per cluster is
// elected and the other replica's samples are dropped (counted, not stored): the elected
// replica keeps its place while it sends, and once it has sent nothing for
// `failover_timeout_ms` the next replica that sends takes over. The election is kept in
// PostgreSQL (SampleStore::ElectHaReplica), so every ingest replica agrees. Series without a
// replica label are not affected.
struct HaOptions {
  std::vector<std::string> replica_labels = {"__replica__", "prometheus_replica", "replica"};
  int64_t failover_timeout_ms = 30'000;
};

// Elects the replica of `cluster` given that `replica` is sending now; returns the elected one.
using HaElector = std::function<absl::StatusOr<std::string>(const std::string& cluster,
                                                            const std::string& replica)>;

struct RemoteWriteOptions {
  // See RemoteWriteMapOptions::default_cluster.
  std::string default_cluster = {};
  // Compressed body limit and decompressed limit (413 above).
  int64_t max_body_bytes = 16 << 20;
  int64_t max_decompressed_bytes = 64 << 20;
  // Refusals listed in a 400 body (the count is always given).
  int max_listed_refusals = 100;
  // See RemoteWriteMapOptions::max_labels_per_series (ingest.max_labels_per_series).
  size_t max_labels_per_series = kDefaultMaxLabelsPerSeries;
  // Framework throughput series mapped to MFU reports (throughput_metrics.h) and delivered
  // through `report_sink` before answering: 503 when the sink fails, so the request is
  // retried. Without a sink such series are ignored like any other non-DCGM metric.
  std::vector<ThroughputMetric> throughput_metrics = {};
  ReportSink report_sink = nullptr;
  // Serving engines' series (vLLM, SGLang: serving_metrics.h) stored through this store
  // before answering (503 when it fails); without one they are ignored.
  ServingStore* serving_store = nullptr;
  // HA pair deduplication; off without an elector.
  HaOptions ha = {};
  HaElector ha_elector = nullptr;
};

class RemoteWriteReceiver {
 public:
  // `pipeline` must outlive the receiver.
  RemoteWriteReceiver(IngestPipeline* pipeline, RemoteWriteOptions options)
      : pipeline_(pipeline), options_(std::move(options)) {}

  // Handles one request body. `content_encoding` is the Content-Encoding header (empty or
  // "snappy"); `cluster_param` the `cluster` query parameter (overrides the default cluster).
  // With `cluster_allowed`, a request holding a series of a cluster it refuses is answered
  // 403 with its message before anything is stored (a token limited to clusters).
  HttpReply Handle(absl::string_view body, absl::string_view content_encoding,
                   absl::string_view cluster_param,
                   const std::function<absl::Status(absl::string_view cluster)>& cluster_allowed =
                       nullptr);

 private:
  IngestPipeline* pipeline_;
  RemoteWriteOptions options_;
};

}  // namespace goodput::ingest
