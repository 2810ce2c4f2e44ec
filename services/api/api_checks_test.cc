#include "services/api/api_checks.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace goodput::api {
namespace {

using ::testing::HasSubstr;

TEST(CheckText, AcceptsWhatPostgresStoresExactly) {
  EXPECT_EQ(CheckText("gpu-node-042.eos.example.com", kMaxHostBytes), std::nullopt);
  EXPECT_EQ(CheckText("Zürich-1", kMaxHostBytes), std::nullopt);
  EXPECT_EQ(CheckText("", kMaxHostBytes), std::nullopt);
  EXPECT_EQ(CheckText("line\tbreak\n", kMaxLabelValueBytes, TextKind::kFreeText), std::nullopt);
}

TEST(CheckText, RefusesNulControlCharactersBadUtf8AndLength) {
  EXPECT_THAT(CheckText(std::string("job\0x", 5), kMaxJobIdBytes).value_or(""),
              HasSubstr("NUL byte at byte 3"));
  EXPECT_THAT(CheckText(std::string("a\0", 2), 10, TextKind::kFreeText).value_or(""),
              HasSubstr("NUL byte at byte 1"));
  EXPECT_THAT(CheckText("a\x1b[31m", 10).value_or(""), HasSubstr("control character 0x1B"));
  EXPECT_THAT(CheckText("\xc3\x28", 10).value_or(""), HasSubstr("not valid UTF-8"));
  EXPECT_THAT(CheckText("\xe2\x82", 10).value_or(""), HasSubstr("not valid UTF-8"));
  EXPECT_THAT(CheckText(std::string(256, 'h'), kMaxHostBytes).value_or(""),
              HasSubstr("is 256 bytes; the limit is 255"));
}

TEST(Sanitize, EscapesControlBytesKeepsUtf8AndCapsTheLength) {
  EXPECT_EQ(Sanitize(std::string("a\0b\x1b", 4)), "a\\x00b\\x1b");
  EXPECT_EQ(Sanitize("Zürich"), "Zürich");
  EXPECT_EQ(Sanitize("\xff"), "\\xff");
  const std::string long_text = Sanitize(std::string(10'000, 'x'));
  EXPECT_EQ(long_text.size(), 203u);
  EXPECT_THAT(long_text, ::testing::EndsWith("..."));
}

TEST(CheckJobIdChars, AcceptsSchedulerIdsRefusesShellAndOptionCharacters) {
  for (const char* ok : {"4211873", "9100_3", "9200+1", "research/llm-pretrain", "wf-7:a@b=c"}) {
    EXPECT_EQ(CheckJobIdChars(ok), std::nullopt) << ok;
  }
  EXPECT_EQ(CheckJobIdChars("-1").value_or(""),
            "starts with '-', which a command would read as an option; a job id may not");
  EXPECT_EQ(CheckJobIdChars("42$(reboot)").value_or(""),
            "contains '$' at byte 2, not allowed in a job id (letters, digits and . _ - + : / @ = "
            "only)");
  for (const char* bad : {"42 43", "4'2", "4\"2", "4`id`", "4;x", "<img>", "a\\b", "a\nb",
                          "Zürich"}) {
    EXPECT_NE(CheckJobIdChars(bad), std::nullopt) << bad;
  }
  EXPECT_THAT(CheckJobIdChars("a b").value_or(""), HasSubstr("contains ' ' at byte 1"));
  EXPECT_THAT(CheckJobIdChars("a\x7f").value_or(""), HasSubstr("the byte 0x7F at byte 1"));
}

TEST(CheckHostChars, AcceptsDnsNamesAndAddressesRefusesTheRest) {
  for (const char* ok : {"gpu-node-042.eos.example.com", "10.0.0.7", "[fe80::1%eth0]", "r6i3n0",
                         "node_7"}) {
    EXPECT_EQ(CheckHostChars(ok), std::nullopt) << ok;
  }
  EXPECT_THAT(CheckHostChars("-oProxyCommand=x").value_or(""), HasSubstr("starts with '-'"));
  EXPECT_THAT(CheckHostChars("node/../x").value_or(""), HasSubstr("contains '/' at byte 4"));
  EXPECT_THAT(CheckHostChars("<b>n</b>").value_or(""), HasSubstr("contains '<' at byte 0"));
}

TEST(CheckApiTime, RefusesUnsetAncientAndFarFutureTimes) {
  google::protobuf::Timestamp t;
  EXPECT_THAT(CheckApiTime(t).value_or(""), HasSubstr("1970-01-01T00:00:00Z, before 2000-01-01"));
  t.set_seconds(-62135596800);  // 0001-01-01
  EXPECT_THAT(CheckApiTime(t).value_or(""), HasSubstr("before 2000-01-01"));
  t.set_seconds(32503680000);  // 3000-01-01
  EXPECT_THAT(CheckApiTime(t).value_or(""), HasSubstr("3000-01-01T00:00:00Z, after 2100-01-01"));
  t.set_seconds(1764115200);  // 2025-11-26
  EXPECT_EQ(CheckApiTime(t), std::nullopt);
  t.set_nanos(-1);
  EXPECT_THAT(CheckApiTime(t).value_or(""), HasSubstr("nanos=-1"));
}

}  // namespace
}  // namespace goodput::api
