#include "services/ingest/throughput_metrics.h"

#include <cmath>
#include <map>
#include <optional>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "goodput/v1/mfu.grpc.pb.h"
#include "services/ingest/remote_write.h"
#include "services/platform/grpc_client.h"

namespace goodput::ingest {
namespace {

std::optional<ThroughputForm> ParseForm(const std::string& s) {
  if (s == "mfu") return ThroughputForm::kMfu;
  if (s == "mfu_percent") return ThroughputForm::kMfuPercent;
  if (s == "model_tflops_per_gpu") return ThroughputForm::kModelTflopsPerGpu;
  if (s == "total_tflops") return ThroughputForm::kTotalTflops;
  return std::nullopt;
}

// "bf16", "BF16", "PRECISION_BF16" -> PRECISION_BF16; unspecified when unknown.
goodput::v1::Precision ParsePrecision(const std::string& text) {
  std::string upper = absl::AsciiStrToUpper(text);
  if (upper.rfind("PRECISION_", 0) != 0) upper = absl::StrCat("PRECISION_", upper);
  goodput::v1::Precision p = goodput::v1::PRECISION_UNSPECIFIED;
  if (!goodput::v1::Precision_Parse(upper, &p)) return goodput::v1::PRECISION_UNSPECIFIED;
  return p;
}

}  // namespace

std::vector<ThroughputMetric> DefaultThroughputMetrics() {
  return {
      {.name = "megatron_training_throughput_tflops",
       .form = ThroughputForm::kModelTflopsPerGpu,
       .framework = "megatron-lm"},
      {.name = "nemo_train_tflops_per_gpu",
       .form = ThroughputForm::kModelTflopsPerGpu,
       .framework = "nemo"},
      {.name = "megatron_training_mfu", .form = ThroughputForm::kMfu, .framework = "megatron-lm"},
  };
}

absl::StatusOr<std::vector<ThroughputMetric>> ParseThroughputMetrics(const YAML::Node& root) {
  if (!root.IsMap() || !root["ingest"] || !root["ingest"]["mfu_metrics"] ||
      !root["ingest"]["mfu_metrics"]["metrics"]) {
    return DefaultThroughputMetrics();
  }
  const YAML::Node list = root["ingest"]["mfu_metrics"]["metrics"];
  if (!list.IsSequence()) {
    return absl::InvalidArgumentError(
        "config key ingest.mfu_metrics.metrics must be a list of {name, form, job_labels, "
        "gpu_count_label, interval_s, precision, framework}");
  }
  std::vector<ThroughputMetric> out;
  for (size_t i = 0; i < list.size(); ++i) {
    const YAML::Node e = list[i];
    const std::string where = absl::StrCat("config key ingest.mfu_metrics.metrics[", i, "]");
    if (!e.IsMap()) return absl::InvalidArgumentError(absl::StrCat(where, " must be a mapping"));
    ThroughputMetric m;
    try {
      if (!e["name"] || e["name"].as<std::string>().empty()) {
        return absl::InvalidArgumentError(absl::StrCat(where, ".name is required"));
      }
      m.name = e["name"].as<std::string>();
      if (e["form"]) {
        const std::string form = e["form"].as<std::string>();
        std::optional<ThroughputForm> f = ParseForm(form);
        if (!f) {
          return absl::InvalidArgumentError(absl::StrCat(
              where, ".form=\"", form,
              "\" is not one of mfu, mfu_percent, model_tflops_per_gpu, total_tflops"));
        }
        m.form = *f;
      }
      if (e["job_labels"]) {
        m.job_labels.clear();
        for (const YAML::Node& l : e["job_labels"]) m.job_labels.push_back(l.as<std::string>());
        if (m.job_labels.empty()) {
          return absl::InvalidArgumentError(absl::StrCat(where, ".job_labels must not be empty"));
        }
      }
      if (e["gpu_count_label"]) m.gpu_count_label = e["gpu_count_label"].as<std::string>();
      if (e["interval_s"]) {
        m.interval_s = e["interval_s"].as<double>();
        if (!(m.interval_s >= 1 && m.interval_s <= 86400)) {
          return absl::InvalidArgumentError(
              absl::StrCat(where, ".interval_s=", m.interval_s, " is outside [1, 86400]"));
        }
      }
      if (e["precision"]) {
        const std::string p = e["precision"].as<std::string>();
        m.precision = ParsePrecision(p);
        if (m.precision == goodput::v1::PRECISION_UNSPECIFIED) {
          return absl::InvalidArgumentError(
              absl::StrCat(where, ".precision=\"", p, "\" is not a known precision"));
        }
      }
      if (e["framework"]) m.framework = e["framework"].as<std::string>();
    } catch (const YAML::Exception& ex) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": ", ex.what()));
    }
    out.push_back(std::move(m));
  }
  return out;
}

MappedReports MapThroughputSeries(const prometheus::WriteRequest& request,
                                  const std::vector<ThroughputMetric>& metrics,
                                  const std::string& default_cluster, const std::string& batch_id,
                                  size_t max_labels) {
  MappedReports out;
  for (int s = 0; s < request.timeseries_size(); ++s) {
    const prometheus::TimeSeries& series = request.timeseries(s);
    // The name first: other series' labels are not collected at all.
    std::string name;
    for (const prometheus::Label& l : series.labels()) {
      if (l.name() == "__name__") name = l.value();
    }
    const ThroughputMetric* metric = nullptr;
    for (const ThroughputMetric& m : metrics) {
      if (m.name == name) metric = &m;
    }
    if (metric == nullptr) continue;
    const size_t label_count = static_cast<size_t>(series.labels_size()) - 1;
    if (label_count > max_labels) {
      out.sample_count += series.samples_size();
      out.refused_count += series.samples_size();
      Refusal r;
      r.batch_id = batch_id;
      r.index = s;
      r.field = "labels";
      r.value = TruncateForRefusal(name);
      r.code = RefusalCode::kOutOfRange;
      r.message = absl::StrCat("series ", s, " of batch ", batch_id, " (", name, ", ",
                               series.samples_size(), " samples): has ", label_count,
                               " labels, more than the ", max_labels,
                               " a series may have (ingest.max_labels_per_series)");
      out.refusals.push_back(std::move(r));
      continue;
    }
    std::map<std::string, std::string> labels;
    for (const prometheus::Label& l : series.labels()) labels[l.name()] = l.value();
    std::string cluster = default_cluster;
    if (auto it = labels.find("cluster"); it != labels.end() && !it->second.empty()) {
      cluster = it->second;
    }
    std::string job_id;
    for (const std::string& l : metric->job_labels) {
      if (auto it = labels.find(l); it != labels.end() && !it->second.empty()) {
        job_id = it->second;
        break;
      }
    }
    int64_t gpu_count = 0;
    if (metric->form == ThroughputForm::kTotalTflops) {
      if (auto it = labels.find(metric->gpu_count_label); it != labels.end()) {
        if (!absl::SimpleAtoi(it->second, &gpu_count)) gpu_count = 0;
      }
    }
    goodput::v1::Precision precision = metric->precision;
    if (precision == goodput::v1::PRECISION_UNSPECIFIED) {
      if (auto it = labels.find("precision"); it != labels.end()) {
        precision = ParsePrecision(it->second);
      }
    }
    // The series identity for report ids: cluster and every label, in name order.
    std::string identity = cluster;
    for (const auto& [k, v] : labels) absl::StrAppend(&identity, "\x1f", k, "=", v);

    for (int k = 0; k < series.samples_size(); ++k) {
      const prometheus::Sample& sample = series.samples(k);
      if (IsStaleMarker(sample.value())) continue;
      ++out.sample_count;
      auto refuse = [&](std::string field, std::string value, RefusalCode code,
                        absl::string_view reason) {
        Refusal r;
        r.batch_id = batch_id;
        r.index = s;
        r.field = std::move(field);
        r.value = TruncateForRefusal(value);
        r.code = code;
        r.message = absl::StrCat("series ", s, " sample ", k, " of batch ", batch_id, " (", name,
                                 "): ", reason);
        out.refusals.push_back(std::move(r));
        ++out.refused_count;
      };
      if (cluster.empty()) {
        refuse("cluster", "", RefusalCode::kMissingField,
               "has no cluster label and no default cluster is configured "
               "(ingest.remote_write.cluster or ?cluster=)");
        continue;
      }
      if (job_id.empty()) {
        std::string names;
        for (const std::string& l : metric->job_labels)
          absl::StrAppend(&names, names.empty() ? "" : ", ", l);
        refuse(metric->job_labels.front(), "", RefusalCode::kMissingField,
               absl::StrCat("names no job: none of the labels ", names, " is set"));
        continue;
      }
      if (!std::isfinite(sample.value())) {
        refuse(name, absl::StrCat(sample.value()), RefusalCode::kNotFinite,
               absl::StrCat("value ", sample.value(), " is not a finite number"));
        continue;
      }
      if (metric->form == ThroughputForm::kTotalTflops && gpu_count <= 0) {
        refuse(metric->gpu_count_label, labels[metric->gpu_count_label], RefusalCode::kMissingField,
               absl::StrCat("a total throughput needs a positive GPU count in label ",
                            metric->gpu_count_label));
        continue;
      }
      goodput::v1::MfuReport r;
      r.set_report_id(
          absl::StrCat("metric-", ContentHash(absl::StrCat(identity, "\x1f", sample.timestamp()))));
      r.mutable_job()->set_cluster(cluster);
      r.mutable_job()->set_job_id(job_id);
      const int64_t end_ms = sample.timestamp();
      const int64_t start_ms =
          end_ms - static_cast<int64_t>(std::llround(metric->interval_s * 1000));
      r.mutable_interval()->mutable_start_time()->set_seconds(start_ms / 1000);
      r.mutable_interval()->mutable_start_time()->set_nanos(
          static_cast<int32_t>((start_ms % 1000) * 1000000));
      r.mutable_interval()->mutable_end_time()->set_seconds(end_ms / 1000);
      r.mutable_interval()->mutable_end_time()->set_nanos(
          static_cast<int32_t>((end_ms % 1000) * 1000000));
      switch (metric->form) {
        case ThroughputForm::kMfu:
          r.set_mfu(sample.value());
          break;
        case ThroughputForm::kMfuPercent:
          r.set_mfu(sample.value() / 100);
          break;
        case ThroughputForm::kModelTflopsPerGpu:
          r.set_model_tflops_per_gpu(sample.value());
          break;
        case ThroughputForm::kTotalTflops:
          r.mutable_total_throughput()->set_total_tflops(sample.value());
          r.mutable_total_throughput()->set_gpu_count(static_cast<int32_t>(gpu_count));
          break;
      }
      r.set_precision(precision);
      r.set_framework(metric->framework);
      r.set_source(goodput::v1::MFU_REPORT_SOURCE_METRIC);
      for (const auto& [key, value] : labels) {
        if (key != "__name__") (*r.mutable_labels())[key] = value;
      }
      out.reports.push_back(std::move(r));
    }
  }
  return out;
}

ReportSink MfuStreamSink(std::shared_ptr<grpc::Channel> channel, std::string bearer_token,
                         absl::Duration timeout) {
  std::shared_ptr<goodput::v1::MfuService::Stub> stub =
      goodput::v1::MfuService::NewStub(std::move(channel));
  return
      [stub, token = std::move(bearer_token), timeout](
          const std::string& batch_id,
          const std::vector<goodput::v1::MfuReport>& reports) -> absl::StatusOr<ReportSinkResult> {
        grpc::ClientContext ctx;
        platform::PrepareClientContext(&ctx, timeout, token);
        goodput::v1::StreamMfuReportsResponse response;
        std::unique_ptr<grpc::ClientWriter<goodput::v1::StreamMfuReportsRequest>> writer =
            stub->StreamMfuReports(&ctx, &response);
        // Stay well below the service's per-message limit.
        constexpr size_t kPerMessage = 1000;
        for (size_t i = 0; i < reports.size(); i += kPerMessage) {
          goodput::v1::StreamMfuReportsRequest message;
          message.set_batch_id(absl::StrCat(batch_id, "/", i / kPerMessage));
          for (size_t k = i; k < std::min(reports.size(), i + kPerMessage); ++k) {
            *message.add_reports() = reports[k];
          }
          if (!writer->Write(message)) break;  // Finish() says why
        }
        writer->WritesDone();
        grpc::Status s = writer->Finish();
        if (!s.ok()) {
          return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                              absl::StrCat("goodput-mfu: ", s.error_message()));
        }
        ReportSinkResult result{.stored = response.stored_count(),
                                .duplicates = response.duplicate_count(),
                                .refused = response.refused_count(),
                                .refusal_messages = {}};
        for (const goodput::v1::Refusal& r : response.refusals()) {
          result.refusal_messages.push_back(r.message());
        }
        return result;
      };
}

}  // namespace goodput::ingest
