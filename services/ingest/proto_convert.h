// Translation between the API's telemetry messages (goodput.v1) and the ingest service's
// own types (sample.h). The only file of the domain's neighbourhood that knows protobuf.
#pragma once

#include "goodput/v1/common.pb.h"
#include "goodput/v1/ingest.pb.h"
#include "services/ingest/sample.h"

namespace goodput::ingest {

// Copies every field the message carries; unset optional fields stay unset.
Sample SampleFromProto(const v1::GpuSample& proto);

// The API's form of a refusal.
void RefusalToProto(const Refusal& refusal, v1::Refusal* proto);

}  // namespace goodput::ingest
