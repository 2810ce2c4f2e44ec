// Label parsing cost: the text exposition (PushExposition, scrapes) and remote_write with
// many labels in one series against the same number of labels spread over ordinary series.
// The baseline is 1,000 lines of 100 labels (100k labels); each other case holds all its
// labels in one series, parsed with the label limit raised so that every label is read, and
// once more with the default limit (the series is refused). Linear parsing keeps the ratio
// per label near 1 whatever the labels per series. Median of several rounds; no timing is
// asserted.
//
//   goodput_label_bench [--rounds N]

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "services/core/gpu_catalog.h"
#include "services/ingest/exposition.h"
#include "services/ingest/remote_write.h"

namespace goodput {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int64_t kNowMs = 1'767'225'600'000;
constexpr size_t kNoLimit = 1 << 20;

// `lines` clock lines of distinct GPUs, each with `labels` labels besides its identity.
std::string Exposition(int lines, int labels) {
  std::string body;
  for (int g = 0; g < lines; ++g) {
    absl::StrAppend(&body, "DCGM_FI_DEV_SM_CLOCK{gpu=\"", g % 8, "\",Hostname=\"n", g / 8, "\"");
    for (int i = 0; i < labels; ++i) absl::StrAppend(&body, ",l", i, "=\"v", i, "\"");
    absl::StrAppend(&body, "} 1500\n");
  }
  return body;
}

prometheus::WriteRequest WriteRequest(int series, int labels) {
  prometheus::WriteRequest request;
  for (int g = 0; g < series; ++g) {
    prometheus::TimeSeries* s = request.add_timeseries();
    auto add = [s](std::string name, std::string value) {
      prometheus::Label* l = s->add_labels();
      l->set_name(std::move(name));
      l->set_value(std::move(value));
    };
    add("__name__", "DCGM_FI_DEV_SM_CLOCK");
    add("gpu", absl::StrCat(g % 8));
    add("Hostname", absl::StrCat("n", g / 8));
    for (int i = 0; i < labels; ++i) add(absl::StrCat("l", i), absl::StrCat("v", i));
    prometheus::Sample* sample = s->add_samples();
    sample->set_value(1500);
    sample->set_timestamp(kNowMs);
  }
  return request;
}

double MedianMs(int rounds, const std::function<void()>& run) {
  std::vector<double> ms;
  for (int r = 0; r < rounds; ++r) {
    const Clock::time_point start = Clock::now();
    run();
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

struct Case {
  const char* path;
  int series;
  int labels;
  size_t limit;
};

}  // namespace
}  // namespace goodput

int main(int argc, char** argv) {
  using namespace goodput;
  int rounds = 5;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--rounds") == 0 && absl::SimpleAtoi(argv[i + 1], &rounds)) ++i;
  }
  rounds = std::max(rounds, 1);
  const ingest::ValidationOptions validation{.catalog = &core::GpuCatalog::BuiltIn(),
                                             .now_unix_ms = kNowMs};
  const std::vector<Case> cases = {
      {"exposition", 1000, 100, kNoLimit},  // the baseline
      {"exposition", 1, 25'000, kNoLimit},
      {"exposition", 1, 50'000, kNoLimit},
      {"exposition", 1, 100'000, kNoLimit},
      {"exposition", 1, 100'000, ingest::kDefaultMaxLabelsPerSeries},
      {"remote_write", 1000, 100, kNoLimit},
      {"remote_write", 1, 25'000, kNoLimit},
      {"remote_write", 1, 50'000, kNoLimit},
      {"remote_write", 1, 100'000, kNoLimit},
      {"remote_write", 1, 100'000, ingest::kDefaultMaxLabelsPerSeries},
  };
  std::printf("%-13s %7s %8s %9s %10s %9s %11s %10s\n", "path", "series", "labels", "limit",
              "body_kb", "median_ms", "ns/label", "vs_base");
  double baseline_ns = 0;
  for (const Case& c : cases) {
    const int64_t total_labels = static_cast<int64_t>(c.series) * c.labels;
    size_t body_bytes = 0;
    int64_t refused = 0;
    double ms = 0;
    if (std::strcmp(c.path, "exposition") == 0) {
      const std::string body = Exposition(c.series, c.labels);
      body_bytes = body.size();
      ingest::ExpositionOptions options;
      options.batch_id = "bench";
      options.scrape_time_unix_ms = kNowMs;
      options.validation = validation;
      options.max_labels_per_series = c.limit;
      ms = MedianMs(
          rounds, [&] { refused = ingest::ParseDcgmExposition(body, options).refused_line_count; });
    } else {
      const prometheus::WriteRequest request = WriteRequest(c.series, c.labels);
      body_bytes = request.ByteSizeLong();
      ingest::RemoteWriteMapOptions options;
      options.batch_id = "bench";
      options.default_cluster = "eos";
      options.validation = validation;
      options.max_labels_per_series = c.limit;
      ms = MedianMs(rounds, [&] {
        refused = 0;
        for (const ingest::RemoteWriteBatch& b : ingest::MapWriteRequest(request, options)) {
          refused += b.refused_count;
        }
      });
    }
    const double ns_per_label = ms * 1e6 / static_cast<double>(total_labels);
    if (c.series == 1000) baseline_ns = ns_per_label;
    std::printf("%-13s %7d %8d %9s %10.1f %9.2f %11.1f %9.2fx%s\n", c.path, c.series, c.labels,
                c.limit == kNoLimit ? "raised" : absl::StrCat(c.limit).c_str(),
                static_cast<double>(body_bytes) / 1024, ms, ns_per_label,
                ns_per_label / baseline_ns, refused > 0 ? "  (refused)" : "");
  }
  return 0;
}
