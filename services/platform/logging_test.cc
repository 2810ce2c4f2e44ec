#include "services/platform/logging.h"

#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "spdlog/sinks/ostream_sink.h"

namespace goodput::platform {
namespace {

using ::testing::HasSubstr;

TEST(Logger, WritesJsonLinesWithFields) {
  std::ostringstream out;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out);
  absl::StatusOr<Logger> logger =
      Logger::Create(LogConfig{.level = "info", .format = LogFormat::kJson}, "goodput-ofu", sink);
  ASSERT_TRUE(logger.ok()) << logger.status();
  logger->With({{"job", "c1/42"}})
      .Info("window \"done\"", {{"window_s", 60}, {"ofu", 0.5}, {"late", false}});
  logger->Flush();
  nlohmann::json line = nlohmann::json::parse(out.str());
  EXPECT_EQ(line["msg"], "window \"done\"");
  EXPECT_EQ(line["level"], "info");
  EXPECT_EQ(line["service"], "goodput-ofu");
  EXPECT_EQ(line["job"], "c1/42");
  EXPECT_EQ(line["window_s"], 60);
  EXPECT_EQ(line["ofu"], 0.5);
  EXPECT_EQ(line["late"], false);
  EXPECT_TRUE(line.contains("ts"));
}

TEST(Logger, WritesTextWithKeyValues) {
  std::ostringstream out;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out);
  absl::StatusOr<Logger> logger =
      Logger::Create(LogConfig{.level = "debug", .format = LogFormat::kText}, "svc", sink);
  ASSERT_TRUE(logger.ok());
  logger->Debug("hello", {{"rpc", "/a.B/C"}, {"reason", "two words"}});
  logger->Flush();
  EXPECT_THAT(out.str(), HasSubstr("hello service=svc rpc=/a.B/C reason=\"two words\""));
}

TEST(Logger, DropsLinesBelowLevel) {
  std::ostringstream out;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out);
  absl::StatusOr<Logger> logger = Logger::Create(LogConfig{.level = "warn"}, "svc", sink);
  ASSERT_TRUE(logger.ok());
  logger->Info("quiet");
  logger->Flush();
  EXPECT_EQ(out.str(), "");
  EXPECT_FALSE(logger->Enabled(spdlog::level::info));
}

TEST(Logger, RefusesUnknownLevel) {
  absl::StatusOr<Logger> logger = Logger::Create(LogConfig{.level = "loud"}, "svc");
  ASSERT_FALSE(logger.ok());
  EXPECT_THAT(logger.status().message(), HasSubstr("\"loud\""));
}

}  // namespace
}  // namespace goodput::platform
