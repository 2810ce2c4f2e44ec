#include "services/platform/stored_json.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace goodput::platform {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(ParseStoredJson, ReadsWhatTheServicesWrite) {
  absl::StatusOr<nlohmann::json> j = ParseStoredJson(R"({"team":"nlp","gpus":[1,2]})");
  ASSERT_TRUE(j.ok()) << j.status();
  EXPECT_EQ((*j)["team"], "nlp");
  EXPECT_EQ((*j)["gpus"].size(), 2u);
}

TEST(ParseStoredJson, NestingSizeAndCountBeyondTheLimitsAreErrorsNamingThem) {
  // A million levels: copying or dumping such a document would recurse a million deep.
  const std::string deep = std::string(1'000'000, '[') + std::string(1'000'000, ']');
  absl::StatusOr<nlohmann::json> j = ParseStoredJson(deep);
  ASSERT_EQ(j.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(j.status().message(), HasSubstr("nested deeper than 32 levels (max_depth)"));
  std::string objects;
  for (int i = 0; i < 100; ++i) objects += R"({"a":)";
  EXPECT_THAT(ParseStoredJson(objects, {.max_depth = 4}).status().message(),
              HasSubstr("nested deeper than 4 levels (max_depth)"));
  EXPECT_THAT(ParseStoredJson("[1,2,3,4]", {.max_values = 3}).status().message(),
              HasSubstr("more than 3 values (max_values)"));
  EXPECT_THAT(ParseStoredJson("\"0123456789\"", {.max_bytes = 8}).status().message(),
              HasSubstr("12 bytes is more than 8 bytes (max_bytes)"));
}

TEST(ParseStoredJson, ASyntaxErrorSaysWhereNotWhatTheRowHeld) {
  absl::StatusOr<nlohmann::json> j = ParseStoredJson(R"({"token":"s3cret)");
  ASSERT_EQ(j.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(j.status().message(), HasSubstr("not JSON at byte"));
  EXPECT_THAT(j.status().message(), Not(HasSubstr("s3cret")));
}

}  // namespace
}  // namespace goodput::platform
