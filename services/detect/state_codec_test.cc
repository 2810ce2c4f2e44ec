#include "services/detect/state_codec.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace goodput::detect {
namespace {

using ::testing::HasSubstr;

// `depth` CBOR arrays of one element each, around an empty array.
std::string NestedArrays(size_t depth) { return std::string(depth, '\x81') + '\x80'; }

TEST(StateCodec, ADetectorsStateGoesThroughCborAndBack) {
  InJobRegressionDetector detector;
  for (int m = 0; m < 90; ++m) {
    detector.Add({.start_s = m * 60, .end_s = m * 60 + 60, .ofu = m < 60 ? 0.5 : 0.2});
  }
  const nlohmann::json saved = StateCodec::Save(detector);
  absl::StatusOr<nlohmann::json> decoded = StateCodec::DecodeCbor(StateCodec::EncodeCbor(saved));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  InJobRegressionDetector restored;
  StateCodec::Load(*decoded, restored);
  EXPECT_EQ(StateCodec::Save(restored), saved);
}

TEST(StateCodec, NestingBeyondTheDepthLimitIsAnErrorNamingTheLimitNotACrash) {
  // A million levels: a reader that recursed per level would run out of stack.
  absl::StatusOr<nlohmann::json> deep = StateCodec::DecodeCbor(NestedArrays(1'000'000));
  ASSERT_EQ(deep.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(deep.status().message(), HasSubstr("nested deeper than 32 levels (max_depth)"));
  // Maps count as levels too.
  std::string maps;
  for (int i = 0; i < 100; ++i) maps += "\xa1\x61k";  // {"k": {"k": ...
  maps += '\x00';
  EXPECT_THAT(StateCodec::DecodeCbor(maps).status().message(), HasSubstr("max_depth"));
  // Within the limit, it decodes.
  EXPECT_TRUE(StateCodec::DecodeCbor(NestedArrays(31)).ok());
  EXPECT_TRUE(StateCodec::DecodeCbor(NestedArrays(9), {.max_depth = 10}).ok());
  EXPECT_FALSE(StateCodec::DecodeCbor(NestedArrays(10), {.max_depth = 10}).ok());
}

TEST(StateCodec, SizeAndValueLimitsAreErrorsNamingTheLimit) {
  const std::string big = StateCodec::EncodeCbor(nlohmann::json(std::string(2000, 'x')));
  absl::StatusOr<nlohmann::json> too_big = StateCodec::DecodeCbor(big, {.max_bytes = 1000});
  EXPECT_THAT(too_big.status().message(),
              HasSubstr("checkpoint: 2003 bytes is more than 1000 bytes (max_bytes)"));

  const std::string many = StateCodec::EncodeCbor(nlohmann::json(std::vector<int>(500, 1)));
  EXPECT_THAT(StateCodec::DecodeCbor(many, {.max_values = 100}).status().message(),
              HasSubstr("max_values"));
  EXPECT_TRUE(StateCodec::DecodeCbor(many, {.max_values = 501}).ok());

  // An array that declares 2^40 elements in 9 bytes is refused before anything is read.
  const std::string declared("\x9b\x00\x00\x01\x00\x00\x00\x00\x00", 9);
  EXPECT_THAT(StateCodec::DecodeCbor(declared).status().message(),
              HasSubstr("an array of 1099511627776 elements is more than"));
}

TEST(StateCodec, BytesThatAreNotCborAreAnErrorWithTheirPosition) {
  absl::StatusOr<nlohmann::json> truncated = StateCodec::DecodeCbor(std::string("\x83\x01", 2));
  ASSERT_EQ(truncated.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(truncated.status().message(), HasSubstr("checkpoint: not CBOR at byte"));
  EXPECT_FALSE(StateCodec::DecodeCbor("").ok());
  EXPECT_FALSE(StateCodec::DecodeCbor(std::string("\xff", 1)).ok());
}

}  // namespace
}  // namespace goodput::detect
