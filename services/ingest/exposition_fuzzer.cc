// libFuzzer target: ParseDcgmExposition on arbitrary bodies must never crash, and every
// sample it returns must carry a GPU identity and at least one value.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "services/core/gpu_catalog.h"
#include "services/ingest/exposition.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace goodput::ingest;
  ExpositionOptions options;
  options.batch_id = "fuzz";
  options.default_host = "fuzz-host";
  options.scrape_time_unix_ms = 1714564800000;
  options.validation = {.catalog = &goodput::core::GpuCatalog::BuiltIn(),
                        .now_unix_ms = 1714564800000};
  const absl::string_view body(reinterpret_cast<const char*>(data), size);
  ExpositionResult result = ParseDcgmExposition(body, options);
  for (const ExpositionSample& s : result.samples) {
    if (s.sample.gpu.host.empty() || !s.sample.HasAnyValue()) std::abort();
  }
  if (result.refused_line_count + result.ignored_line_count > result.metric_line_count) {
    std::abort();
  }
  return 0;
}
