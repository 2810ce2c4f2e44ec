#include "services/api/api_convert.h"

#include "gtest/gtest.h"

namespace goodput::api {
namespace {

TEST(ApiConvert, SchedulerNamesRoundTrip) {
  for (v1::SchedulerKind kind : {v1::SCHEDULER_KIND_SLURM, v1::SCHEDULER_KIND_OSMO,
                                 v1::SCHEDULER_KIND_KUBERNETES, v1::SCHEDULER_KIND_OTHER}) {
    EXPECT_EQ(SchedulerKindFromName(SchedulerKindName(kind)), kind);
  }
  EXPECT_EQ(SchedulerKindName(v1::SCHEDULER_KIND_SLURM), "slurm");
  EXPECT_EQ(SchedulerKindFromName("pbs"), v1::SCHEDULER_KIND_UNSPECIFIED);
}

TEST(ApiConvert, JobStateNamesRoundTripAndIgnoreCase) {
  EXPECT_EQ(JobStateName(v1::JOB_STATE_TIMED_OUT), "timed_out");
  EXPECT_EQ(JobStateFromName("Completed"), v1::JOB_STATE_COMPLETED);
  EXPECT_EQ(JobStateFromName("finished"), v1::JOB_STATE_UNSPECIFIED);
  EXPECT_EQ(JobStateName(v1::JOB_STATE_UNSPECIFIED), "");
}

TEST(ApiConvert, WorkloadKindNamesRoundTripAndTakeTheWordsLabelsUse) {
  for (v1::WorkloadKind kind : {v1::WORKLOAD_KIND_TRAINING, v1::WORKLOAD_KIND_INFERENCE,
                                v1::WORKLOAD_KIND_INTERACTIVE, v1::WORKLOAD_KIND_OTHER}) {
    EXPECT_EQ(WorkloadKindFromName(WorkloadKindName(kind)), kind);
  }
  EXPECT_EQ(WorkloadKindFromName(" Serving "), v1::WORKLOAD_KIND_INFERENCE);
  EXPECT_EQ(WorkloadKindFromName("notebook"), v1::WORKLOAD_KIND_INTERACTIVE);
  EXPECT_EQ(WorkloadKindFromName("pretraining"), v1::WORKLOAD_KIND_UNSPECIFIED);
  EXPECT_EQ(WorkloadKindName(v1::WORKLOAD_KIND_UNSPECIFIED), "");
  EXPECT_EQ(WorkloadKindSourceFromName(WorkloadKindSourceName(v1::WORKLOAD_KIND_SOURCE_LABEL)),
            v1::WORKLOAD_KIND_SOURCE_LABEL);
}

TEST(ApiConvert, EveryCorePrecisionHasAnApiValue) {
  for (core::Precision p : {core::Precision::kFp64, core::Precision::kTf32, core::Precision::kFp16,
                            core::Precision::kBf16, core::Precision::kFp8, core::Precision::kFp4,
                            core::Precision::kInt8}) {
    v1::Precision proto = PrecisionToProto(p);
    EXPECT_NE(proto, v1::PRECISION_UNSPECIFIED);
    EXPECT_EQ(PrecisionFromProto(proto), p);
  }
  EXPECT_EQ(PrecisionFromProto(v1::PRECISION_UNSPECIFIED), std::nullopt);
}

TEST(ApiConvert, MillisecondsRoundTripIncludingBeforeTheEpoch) {
  for (int64_t ms : {0LL, 1767225600123LL, -1LL, -1500LL}) {
    EXPECT_EQ(TimestampToUnixMs(UnixMsToTimestamp(ms)), ms);
  }
  google::protobuf::Timestamp t = UnixMsToTimestamp(-1500);
  EXPECT_EQ(t.seconds(), -2);
  EXPECT_EQ(t.nanos(), 500000000);
}

TEST(ApiConvert, MicrosecondsRoundTripIncludingBeforeTheEpoch) {
  for (int64_t us : {0LL, 1767225600123456LL, -1LL, -1500001LL}) {
    EXPECT_EQ(TimestampToUnixMicros(UnixMicrosToTimestamp(us)), us);
  }
  google::protobuf::Timestamp t = UnixMicrosToTimestamp(-1500001);
  EXPECT_EQ(t.seconds(), -2);
  EXPECT_EQ(t.nanos(), 499999000);
  t.set_seconds(3);
  t.set_nanos(999);  // below a microsecond: dropped
  EXPECT_EQ(TimestampToUnixMicros(t), 3000000);
}

}  // namespace
}  // namespace goodput::api
