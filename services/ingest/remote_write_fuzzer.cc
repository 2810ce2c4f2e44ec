// libFuzzer target: remote_write end to end without a database. The input is tried both as a
// snappy block (what senders post) and, compressed here, as a raw protobuf, so the fuzzer
// reaches the mapping code without having to learn snappy; every mapped batch then goes
// through the pipeline's validation and attribution (fuzz_pipeline.h).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "services/ingest/fuzz_pipeline.h"
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
  options.validation = fuzz::Validation();
  options.replica_labels = {"__replica__", "prometheus_replica", "replica"};
  for (RemoteWriteBatch& batch : MapWriteRequest(*request, options)) {
    for (const Sample& s : batch.samples) {
      if (s.gpu.host.empty() || !s.HasAnyValue()) std::abort();
    }
    for (const Refusal& r : batch.refusals) fuzz::CheckShowable(r.message);
    fuzz::FuzzIngest(std::move(batch.samples), batch.cluster, options.batch_id);
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
