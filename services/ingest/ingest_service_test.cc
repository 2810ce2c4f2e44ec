#include "services/ingest/ingest_service.h"

#include <gtest/gtest.h>

namespace goodput::ingest {
namespace {

TEST(InflightLimiter, RefusesWorkBeyondTheBoundUntilSomeIsReleased) {
  InflightLimiter limiter(10);
  EXPECT_TRUE(limiter.TryAcquire(6));
  EXPECT_FALSE(limiter.TryAcquire(5));
  EXPECT_TRUE(limiter.TryAcquire(4));
  limiter.Release(6);
  EXPECT_TRUE(limiter.TryAcquire(5));
  EXPECT_EQ(limiter.inflight(), 9);
}

TEST(InflightLimiter, AdmitsOneOversizedRequestWhenIdleSoItCannotStarve) {
  InflightLimiter limiter(10);
  EXPECT_TRUE(limiter.TryAcquire(25));
  EXPECT_FALSE(limiter.TryAcquire(1));
  limiter.Release(25);
  EXPECT_EQ(limiter.inflight(), 0);
}

}  // namespace
}  // namespace goodput::ingest
