// libFuzzer target: the remote_write decoder and series mapping on arbitrary bodies. The
// input is tried both as a snappy block (what senders post) and, compressed here, as a raw
// protobuf, so the fuzzer reaches the mapping code without having to learn snappy.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "services/core/gpu_catalog.h"
#include "services/ingest/remote_write.h"
#include "snappy.h"

namespace {

void Run(absl::string_view body) {
  using namespace goodput::ingest;
  absl::StatusOr<prometheus::WriteRequest> request = DecodeWriteRequest(body, 1 << 20);
  if (!request.ok()) return;
  RemoteWriteMapOptions options;
  options.batch_id = "fuzz";
  options.default_cluster = "fuzz";
  options.validation = {.catalog = &goodput::core::GpuCatalog::BuiltIn(),
                        .now_unix_ms = 1714564800000};
  for (const RemoteWriteBatch& batch : MapWriteRequest(*request, options)) {
    for (const Sample& s : batch.samples) {
      if (s.gpu.host.empty() || !s.HasAnyValue()) std::abort();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view input(reinterpret_cast<const char*>(data), size);
  Run(input);
  std::string compressed;
  snappy::Compress(input.data(), input.size(), &compressed);
  Run(compressed);
  return 0;
}
