// libFuzzer target: arbitrary bytes as a PushSamples message (goodput.v1.PushSamplesRequest),
// converted as IngestService does (proto_convert.h) and run through the pipeline's validation
// and attribution without a database (fuzz_pipeline.h); refusals must convert back to the API.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "goodput/v1/ingest.pb.h"
#include "services/ingest/fuzz_pipeline.h"
#include "services/ingest/proto_convert.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace goodput::ingest;
  goodput::v1::PushSamplesRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return 0;
  std::vector<Sample> samples;
  samples.reserve(request.samples_size());
  for (const goodput::v1::GpuSample& p : request.samples()) samples.push_back(SampleFromProto(p));
  BatchValidation v = ValidateBatch(samples, request.batch_id(), fuzz::Validation());
  for (const Refusal& r : v.refusals) {
    goodput::v1::Refusal out;
    RefusalToProto(r, &out);
  }
  fuzz::FuzzIngest(std::move(samples), request.cluster(), request.batch_id());
  return 0;
}
