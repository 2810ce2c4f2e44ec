#include "services/alerting/rate_limiter.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace goodput::alerting {
namespace {

// KEYS[1] bucket; ARGV: now_ms, tokens per ms, burst. Returns {allowed (0/1), wait_ms}.
// The caller's clock is used (not Redis TIME) so that every replica and the tests agree on
// what "now" is; replicas' clocks differ by far less than a token's interval.
constexpr char kTokenBucketScript[] = R"lua(
local now = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local burst = tonumber(ARGV[3])
local b = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(b[1])
local ts = tonumber(b[2])
if tokens == nil or ts == nil then
  tokens = burst
  ts = now
end
if now > ts then
  tokens = math.min(burst, tokens + (now - ts) * rate)
  ts = now
end
local allowed = 0
local wait = 0
if tokens >= 1 then
  tokens = tokens - 1
  allowed = 1
else
  wait = math.ceil((1 - tokens) / rate)
end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'ts', tostring(ts))
redis.call('PEXPIRE', KEYS[1], math.ceil(burst / rate) + 60000)
return {allowed, wait}
)lua";

}  // namespace

void RateLimiter::SetLimit(const std::string& target, RateLimit limit) {
  absl::MutexLock lock(&mu_);
  limits_[target] = limit;
  local_.erase(target);
  local_.emplace(target, TokenBucket(limit.per_minute / 60.0, limit.burst));
}

bool RateLimiter::using_fallback() const {
  absl::MutexLock lock(&mu_);
  return fallback_;
}

std::optional<absl::Duration> RateLimiter::Take(const std::string& target, absl::Time now) {
  RateLimit limit;
  {
    absl::MutexLock lock(&mu_);
    auto it = limits_.find(target);
    if (it == limits_.end()) return std::nullopt;
    limit = it->second;
  }
  if (redis_ != nullptr) {
    const double per_ms = limit.per_minute / 60000.0;
    absl::StatusOr<platform::RedisReply> reply = redis_->Command(
        {"EVAL", kTokenBucketScript, "1",
         absl::StrCat(redis_->options().key_prefix, "alerting:ratelimit:", target),
         absl::StrCat(absl::ToUnixMillis(now)), absl::StrCat(per_ms), absl::StrCat(limit.burst)});
    absl::StatusOr<std::vector<platform::RedisReply>> values =
        reply.ok() ? reply->AsArray()
                   : absl::StatusOr<std::vector<platform::RedisReply>>(reply.status());
    if (values.ok() && values->size() == 2 && (*values)[0].AsInt().ok() &&
        (*values)[1].AsInt().ok()) {
      {
        absl::MutexLock lock(&mu_);
        if (fallback_) logger_.Info("rate limits back in Redis");
        fallback_ = false;
        if (fallback_gauge_ != nullptr) fallback_gauge_->Set(0);
      }
      if (*(*values)[0].AsInt() == 1) return std::nullopt;
      return absl::Milliseconds(std::max<int64_t>(1, *(*values)[1].AsInt()));
    }
    absl::MutexLock lock(&mu_);
    if (!fallback_) {
      logger_.Warn(
          "rate limits fall back to this process: Redis is unavailable",
          {{"error", values.ok() ? "unexpected reply" : std::string(values.status().message())}});
    }
    fallback_ = true;
    if (fallback_gauge_ != nullptr) fallback_gauge_->Set(1);
  }
  absl::MutexLock lock(&mu_);
  return local_.at(target).Take(now);
}

}  // namespace goodput::alerting
