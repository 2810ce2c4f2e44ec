#include "services/api/alert_checks.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace goodput::api {
namespace {

using ::testing::HasSubstr;

TEST(CheckAckRequest, KeepsMarkupAsTextRefusesControlCharactersAndOversizedText) {
  v1::AckAlertRequest ack;
  ack.set_alert_id("17");
  ack.set_by("alice");
  ack.set_comment("<img src=x onerror=alert(1)> \"$(id)\"\nlooking");
  EXPECT_TRUE(CheckAckRequest(ack).ok());
  ack.set_by("alice\x1b[2J");
  EXPECT_EQ(CheckAckRequest(ack).message(),
            "by=\"alice\\x1b[2J\" contains the control character 0x1B at byte 5");
  ack.set_by("alice");
  ack.set_comment(std::string("a\0b", 3));
  EXPECT_THAT(std::string(CheckAckRequest(ack).message()), HasSubstr("comment=\"a\\x00b\""));
  ack.set_comment(std::string(kMaxAlertCommentBytes + 1, 'c'));
  EXPECT_THAT(std::string(CheckAckRequest(ack).message()),
              HasSubstr("is 4097 bytes; the limit is 4096"));
}

TEST(CheckSilence, BoundsMatchersAndTheirText) {
  v1::Silence silence;
  silence.set_created_by("bob");
  v1::LabelMatcher* m = silence.add_matchers();
  m->set_name("job_id");
  m->set_value("4211.*");
  EXPECT_TRUE(CheckSilence(silence).ok());
  m->set_value(std::string(kMaxMatcherValueBytes + 1, 'x'));
  EXPECT_THAT(std::string(CheckSilence(silence).message()),
              HasSubstr("silence.matchers[0].value=\"xxx"));
  m->set_value("1");
  m->set_name("job\nid");
  EXPECT_THAT(std::string(CheckSilence(silence).message()),
              HasSubstr("silence.matchers[0].name=\"job\\x0aid\" contains the control"));
  m->set_name("job_id");
  for (int i = 0; i < kMaxMatchers; ++i) *silence.add_matchers() = *m;
  EXPECT_EQ(CheckSilence(silence).message(),
            "silence.matchers has 65 matchers; the limit is 64");
}

}  // namespace
}  // namespace goodput::api
