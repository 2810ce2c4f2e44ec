// Conversions between goodput-ofu's plain window types and the goodput.v1 messages.
#pragma once

#include <string>

#include "goodput/v1/ofu.pb.h"
#include "services/ofu/ofu_store.h"
#include "services/ofu/window_engine.h"

namespace goodput::ofu {

// Adds the DataQualityFlag values of a window flag mask (bit n is flag n) to `out`.
void AddFlags(uint32_t flags, google::protobuf::RepeatedField<int>* out);

// The GpuRef a GPU key ("host/index/uuid[/migN]") stands for.
v1::GpuRef GpuRefFromKey(const std::string& key);
// The GPU key of a GpuRef.
std::string GpuKeyFromRef(const v1::GpuRef& gpu);

// A window as the API shows it. `warmup` marks windows before steady state.
v1::OfuWindow WindowToProto(const WindowResult& w, int32_t window_s, int32_t revision,
                            const std::string& cluster, const std::string& job_id,
                            const std::string& workload_fingerprint, bool warmup = false);

}  // namespace goodput::ofu
