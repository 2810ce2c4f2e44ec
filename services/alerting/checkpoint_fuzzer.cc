// libFuzzer target: a detector checkpoint row as goodput-alerting reads it back from
// alert_job_state.checkpoint. Whatever the bytes, the codec (StateCodec::DecodeCbor) and
// JobEvaluator::Restore answer with a state or an error, never a crash; a state they accept
// takes further windows and checkpoints again to bytes that restore to the same state.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include "services/alerting/job_evaluator.h"
#include "services/detect/state_codec.h"

namespace {

using goodput::alerting::JobEvaluator;
using goodput::alerting::JobWindow;
using goodput::detect::StateCodec;

void Check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);

  // The codec alone: what it decodes encodes and decodes again to the same bytes.
  absl::StatusOr<nlohmann::json> decoded = StateCodec::DecodeCbor(bytes);
  if (decoded.ok()) {
    const std::string again = StateCodec::EncodeCbor(*decoded);
    absl::StatusOr<nlohmann::json> redecoded = StateCodec::DecodeCbor(again);
    Check(redecoded.ok() && StateCodec::EncodeCbor(*redecoded) == again);
  } else {
    Check(!decoded.status().message().empty());
  }

  // The evaluator: a restored state goes on with the job's next windows.
  absl::StatusOr<std::unique_ptr<JobEvaluator>> restored = JobEvaluator::Restore({}, bytes);
  if (!restored.ok()) return 0;
  JobEvaluator& ev = **restored;
  const int64_t step =
      ev.last_end_s() > ev.last_start_s() ? ev.last_end_s() - ev.last_start_s() : 60;
  for (int i = 1; i <= 3; ++i) {
    JobWindow w;
    w.window.start_s = ev.last_start_s() + i * step;
    w.window.end_s = w.window.start_s + step;
    w.window.ofu = i == 2 ? 0.1 : 0.5;
    w.gpus_allocated = 8;
    w.gpus_reporting = 7;
    w.gpu_ofu_median = 0.5;
    w.stragglers.push_back({"n0/1/", 0.2, 0.4});
    w.idle_gpus.push_back("n0/2/");
    ev.AddWindow(w);
    ev.TakeEnded();
  }
  const std::string checkpoint = ev.Checkpoint();
  absl::StatusOr<std::unique_ptr<JobEvaluator>> again = JobEvaluator::Restore({}, checkpoint);
  Check(again.ok() && (*again)->Checkpoint() == checkpoint);
  return 0;
}
