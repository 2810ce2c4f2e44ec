#include "services/platform/ordered_forwarder.h"

#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace goodput::platform {
namespace {

// A producer log with commits 2, 3, 5 and a receiver keeping its watermark in memory.
struct Fixture {
  std::vector<int64_t> commits = {2, 3, 5};
  std::map<std::string, int64_t> acked;
  int64_t receiver_watermark = 0;
  std::vector<int64_t> applied;
  bool receiver_down = false;

  OrderedLog Log() {
    return {.acked_sequence = [this](const std::string& t) -> absl::StatusOr<int64_t> {
              return acked[t];
            },
            .set_acked_sequence =
                [this](const std::string& t, int64_t s) {
                  acked[t] = s;
                  return absl::OkStatus();
                },
            .pending = [this](int64_t after, int limit) -> absl::StatusOr<std::vector<int64_t>> {
              std::vector<int64_t> out;
              for (int64_t c : commits) {
                if (c > after && static_cast<int>(out.size()) < limit) out.push_back(c);
              }
              return out;
            }};
  }
  OrderedTarget Target() {
    return {.name = "alerting",
            .push = [this](int64_t seq, int64_t prev) -> absl::StatusOr<OrderedAck> {
              if (receiver_down) return absl::UnavailableError("connection refused");
              OrderedAck ack;
              if (seq <= receiver_watermark) {
                ack.duplicate = true;
              } else if (prev > receiver_watermark) {
                ack.gap_detected = true;
              } else {
                applied.push_back(seq);
                receiver_watermark = seq;
              }
              ack.watermark_sequence = receiver_watermark;
              return ack;
            }};
  }
};

TEST(OrderedForwarder, PushesEveryCommitInOrderWithThePreviousSequence) {
  Fixture f;
  OrderedForwarder forwarder(f.Log(), {f.Target()}, {.commits_per_step = 2}, Logger());
  ASSERT_TRUE(forwarder.StepOnce(0).ok());
  EXPECT_EQ(f.applied, (std::vector<int64_t>{2, 3, 5}));
  EXPECT_EQ(f.acked["alerting"], 5);
}

TEST(OrderedForwarder, ADownTargetIsCaughtUpLaterAndNothingIsSkipped) {
  Fixture f;
  OrderedForwarder forwarder(f.Log(), {f.Target()}, {}, Logger());
  f.receiver_down = true;
  absl::Status s = forwarder.StepOnce(0);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("push of sequence 2"), std::string::npos) << s;
  EXPECT_EQ(f.acked["alerting"], 0);
  f.receiver_down = false;
  f.commits.push_back(8);
  ASSERT_TRUE(forwarder.StepOnce(0).ok());
  EXPECT_EQ(f.applied, (std::vector<int64_t>{2, 3, 5, 8}));
}

TEST(OrderedForwarder, ATargetThatLostItsStateIsResentEverything) {
  Fixture f;
  OrderedForwarder forwarder(f.Log(), {f.Target()}, {}, Logger());
  ASSERT_TRUE(forwarder.StepOnce(0).ok());
  f.receiver_watermark = 0;  // restarted without storage
  f.applied.clear();
  f.commits.push_back(9);
  ASSERT_TRUE(forwarder.StepOnce(0).ok());
  EXPECT_EQ(f.applied, (std::vector<int64_t>{2, 3, 5, 9}));
  EXPECT_EQ(f.acked["alerting"], 9);
}

}  // namespace
}  // namespace goodput::platform
