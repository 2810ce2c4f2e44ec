// libFuzzer target: the exposition path (PushExposition, scraping) end to end without a
// database: ParseDcgmExposition on arbitrary bodies must never crash, every sample it returns
// must carry a GPU identity and at least one value, and its samples then go through the
// pipeline's validation and attribution (fuzz_pipeline.h).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <utility>
#include <vector>

#include "services/ingest/exposition.h"
#include "services/ingest/fuzz_pipeline.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace goodput::ingest;
  ExpositionOptions options;
  options.batch_id = "fuzz";
  options.default_host = "fuzz-host";
  options.scrape_time_unix_ms = fuzz::kNowUnixMs;
  options.validation = fuzz::Validation();
  const absl::string_view body(reinterpret_cast<const char*>(data), size);
  ExpositionResult result = ParseDcgmExposition(body, options);
  std::vector<Sample> samples;
  for (ExpositionSample& s : result.samples) {
    if (s.sample.gpu.host.empty() || !s.sample.HasAnyValue()) std::abort();
    samples.push_back(std::move(s.sample));
  }
  if (result.refused_line_count + result.ignored_line_count > result.metric_line_count) {
    std::abort();
  }
  for (const Refusal& r : result.refusals) fuzz::CheckShowable(r.message);
  fuzz::FuzzIngest(std::move(samples), "fuzz", options.batch_id);
  return 0;
}
