#include "services/alerting/delivery_policy.h"

#include "gtest/gtest.h"

namespace goodput::alerting {
namespace {

TEST(BackoffDelay, DoublesFromTheInitialDelayUpToTheCap) {
  RetryPolicy p{.initial_backoff = absl::Seconds(5), .max_backoff = absl::Seconds(60), .jitter = 0};
  EXPECT_EQ(BackoffDelay(p, 1, 0.9), absl::Seconds(5));
  EXPECT_EQ(BackoffDelay(p, 2, 0.9), absl::Seconds(10));
  EXPECT_EQ(BackoffDelay(p, 4, 0.9), absl::Seconds(40));
  EXPECT_EQ(BackoffDelay(p, 5, 0.9), absl::Seconds(60));
  EXPECT_EQ(BackoffDelay(p, 500, 0.9), absl::Seconds(60));
}

TEST(BackoffDelay, JitterSpreadsTheDelayBetweenItsFloorAndTheFullDelay) {
  RetryPolicy p{
      .initial_backoff = absl::Seconds(8), .max_backoff = absl::Seconds(600), .jitter = 0.5};
  EXPECT_EQ(BackoffDelay(p, 2, 0.0), absl::Seconds(8));  // half of 16 s
  EXPECT_EQ(BackoffDelay(p, 2, 0.5), absl::Seconds(12));
  EXPECT_EQ(BackoffDelay(p, 2, 1.0), absl::Seconds(16));
}

TEST(ShouldGiveUp, AfterMaxAttemptsOrMaxAge) {
  RetryPolicy p{.max_attempts = 3, .max_age = absl::Hours(1)};
  const absl::Time created = absl::FromUnixSeconds(1'800'000'000);
  EXPECT_FALSE(ShouldGiveUp(p, 2, created, created + absl::Minutes(59)));
  EXPECT_TRUE(ShouldGiveUp(p, 3, created, created + absl::Minutes(1)));
  EXPECT_TRUE(ShouldGiveUp(p, 1, created, created + absl::Hours(1)));
}

TEST(ValidateRetryPolicy, NamesTheBadField) {
  RetryPolicy p{.jitter = 1.5};
  absl::Status s = ValidateRetryPolicy(p);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("alerting.delivery.jitter: 1.5"), std::string::npos) << s;
  EXPECT_TRUE(ValidateRetryPolicy(RetryPolicy{}).ok());
}

TEST(IsPermanentError, RetriesOutagesAndCredentialsButNotRefusals) {
  EXPECT_FALSE(IsPermanentError(absl::UnavailableError("down")));
  EXPECT_FALSE(IsPermanentError(absl::DeadlineExceededError("slow")));
  EXPECT_FALSE(IsPermanentError(absl::PermissionDeniedError("token")));
  EXPECT_TRUE(IsPermanentError(absl::InvalidArgumentError("400")));
  EXPECT_TRUE(IsPermanentError(absl::NotFoundError("no such job")));
}

TEST(TokenBucket, AllowsABurstThenOneSendPerInterval) {
  TokenBucket bucket(/*rate_per_s=*/0.5, /*burst=*/2);
  const absl::Time t0 = absl::FromUnixSeconds(1'800'000'000);
  EXPECT_FALSE(bucket.Take(t0).has_value());
  EXPECT_FALSE(bucket.Take(t0).has_value());
  std::optional<absl::Duration> wait = bucket.Take(t0);
  ASSERT_TRUE(wait.has_value());
  EXPECT_EQ(*wait, absl::Seconds(2));
  EXPECT_TRUE(bucket.Take(t0 + absl::Seconds(1)).has_value());
  EXPECT_FALSE(bucket.Take(t0 + absl::Seconds(2)).has_value());
  // A long pause refills only up to the burst.
  EXPECT_FALSE(bucket.Take(t0 + absl::Hours(1)).has_value());
  EXPECT_FALSE(bucket.Take(t0 + absl::Hours(1)).has_value());
  EXPECT_TRUE(bucket.Take(t0 + absl::Hours(1)).has_value());
}

}  // namespace
}  // namespace goodput::alerting
