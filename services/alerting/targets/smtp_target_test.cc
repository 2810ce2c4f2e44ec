#include "services/alerting/targets/smtp_target.h"

#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/time/civil_time.h"
#include "gtest/gtest.h"

namespace goodput::alerting {
namespace {

// Decodes quoted-printable as a mail reader does (soft breaks joined, =XX decoded).
std::string DecodeQuotedPrintable(const std::string& qp) {
  std::string out;
  for (size_t i = 0; i < qp.size(); ++i) {
    if (qp[i] == '=' && i + 2 < qp.size() + 1 && qp.compare(i, 3, "=\r\n") == 0) {
      i += 2;
    } else if (qp[i] == '=' && i + 2 < qp.size()) {
      out.push_back(static_cast<char>(std::stoi(qp.substr(i + 1, 2), nullptr, 16)));
      i += 2;
    } else if (qp.compare(i, 2, "\r\n") == 0) {
      out.push_back('\n');
      ++i;
    } else {
      out.push_back(qp[i]);
    }
  }
  return out;
}

// Decodes one header's RFC 2047 B encoded-words (UTF-8), unfolding it first.
std::string DecodeHeader(std::string value) {
  value = absl::StrReplaceAll(value, {{"\r\n ", " "}});
  std::string out;
  for (absl::string_view word : absl::StrSplit(value, ' ')) {
    if (absl::ConsumePrefix(&word, "=?UTF-8?B?") && absl::ConsumeSuffix(&word, "?=")) {
      std::string bytes;
      EXPECT_TRUE(absl::Base64Unescape(word, &bytes));
      out += bytes;  // adjacent encoded-words join without the space between them
    } else {
      if (!out.empty()) out += ' ';
      out += std::string(word);
    }
  }
  return out;
}

// The value of header `name` (folded lines included) in a rendered message.
std::string Header(const std::string& mail, const std::string& name) {
  const std::string head = mail.substr(0, mail.find("\r\n\r\n"));
  std::vector<std::string> lines = absl::StrSplit(head, "\r\n");
  std::string value;
  bool in = false;
  for (const std::string& line : lines) {
    if (absl::StartsWith(line, name + ": ")) {
      value = line.substr(name.size() + 2);
      in = true;
    } else if (in && absl::StartsWith(line, " ")) {
      value += "\r\n" + line;
    } else {
      in = false;
    }
  }
  return value;
}

MailMessage Message() {
  return MailMessage{
      .from = "goodput@example.org",
      .from_name = "goodput",
      .to = {"alice@example.org"},
      .subject = "GPU efficiency digest for alice (user)",
      .body = "Jobs ended: 3\nGPU-hours wasted: 24.00\n",
      .date = absl::FromCivil(absl::CivilSecond(2026, 11, 26, 9, 5, 7), absl::UTCTimeZone()),
      .message_id =
          MessageIdFor("digest:user:alice:2026-11-23T00:00:00Z:mail", "goodput@example.org")};
}

TEST(RenderMail, HasTheHeadersOfAnRfc5322MimeMessage) {
  const std::string mail = RenderMail(Message());
  EXPECT_EQ(Header(mail, "Date"), "Thu, 26 Nov 2026 09:05:07 +0000");
  EXPECT_EQ(Header(mail, "From"), "\"goodput\" <goodput@example.org>");
  EXPECT_EQ(Header(mail, "To"), "alice@example.org");
  EXPECT_EQ(Header(mail, "Subject"), "GPU efficiency digest for alice (user)");
  EXPECT_EQ(Header(mail, "MIME-Version"), "1.0");
  EXPECT_EQ(Header(mail, "Content-Type"), "text/plain; charset=UTF-8");
  EXPECT_EQ(Header(mail, "Content-Transfer-Encoding"), "quoted-printable");
  EXPECT_EQ(Header(mail, "Auto-Submitted"), "auto-generated");
  const std::string id = Header(mail, "Message-ID");
  EXPECT_TRUE(absl::StartsWith(id, "<") && absl::EndsWith(id, "@example.org>")) << id;
  // Every attempt of a row has the same Message-ID; another row another one.
  EXPECT_EQ(id, MessageIdFor("digest:user:alice:2026-11-23T00:00:00Z:mail", "goodput@example.org"));
  EXPECT_NE(id, MessageIdFor("digest:user:bob:2026-11-23T00:00:00Z:mail", "goodput@example.org"));
  EXPECT_EQ(DecodeQuotedPrintable(mail.substr(mail.find("\r\n\r\n") + 4)),
            "Jobs ended: 3\nGPU-hours wasted: 24.00\n\n");
  for (absl::string_view line : absl::StrSplit(mail, "\r\n")) {
    EXPECT_LE(line.size(), 78u) << line;
    EXPECT_FALSE(absl::StrContains(line, "\n")) << "bare LF in: " << line;
  }
}

TEST(RenderMail, EncodesNonAsciiNamesAsEncodedWordsThatDecodeBack) {
  MailMessage m = Message();
  m.from_name = "goodput – Jülich";
  m.subject =
      "GPU efficiency digest for Jürgen Müller (user), 2026-11-23 00:00 to 2026-11-30 00:00 UTC "
      "— 漢字のチーム";
  const std::string mail = RenderMail(m);
  const std::string subject = Header(mail, "Subject");
  EXPECT_TRUE(absl::StartsWith(subject, "=?UTF-8?B?")) << subject;
  EXPECT_EQ(DecodeHeader(subject), m.subject);
  for (absl::string_view word :
       absl::StrSplit(absl::StrReplaceAll(subject, {{"\r\n ", " "}}), ' ')) {
    EXPECT_LE(word.size(), 75u) << word;
  }
  const std::string from = Header(mail, "From");
  EXPECT_TRUE(absl::EndsWith(from, " <goodput@example.org>")) << from;
  EXPECT_EQ(DecodeHeader(from.substr(0, from.find(" <"))), "goodput – Jülich");
  for (absl::string_view line : absl::StrSplit(mail, "\r\n")) EXPECT_LE(line.size(), 78u) << line;
}

TEST(RenderMail, AHeaderCannotBeInjectedThroughTheSubject) {
  MailMessage m = Message();
  m.subject = "digest\r\nBcc: everyone@example.org";
  const std::string mail = RenderMail(m);
  EXPECT_EQ(Header(mail, "Bcc"), "");
  EXPECT_EQ(Header(mail, "Subject"), "digest  Bcc: everyone@example.org");
}

TEST(RenderMail, LongLinesAndNonAsciiBodiesAreQuotedPrintableWithin76Characters) {
  MailMessage m = Message();
  std::string long_line;
  for (int i = 0; i < 40; ++i) long_line += "wasted GPU-hours = 12.5; ";
  m.body = absl::StrCat("Grüße, Jürgen\n", long_line, "\n.a line that starts with a dot\n",
                        "trailing space \n");
  const std::string mail = RenderMail(m);
  const std::string body = mail.substr(mail.find("\r\n\r\n") + 4);
  for (absl::string_view line : absl::StrSplit(body, "\r\n")) {
    EXPECT_LE(line.size(), 76u) << line;
    for (char c : line) EXPECT_TRUE(c >= 0x20 && c < 0x7f) << line;
    EXPECT_FALSE(absl::EndsWith(line, " ")) << "trailing space survives transport badly";
  }
  EXPECT_TRUE(absl::StrContains(body, "Gr=C3=BC=C3=9Fe"));
  EXPECT_EQ(DecodeQuotedPrintable(body), m.body + "\n");
}

TEST(EncodeHeaderText, FoldsLongAsciiAtSpaces) {
  std::string subject;
  for (int i = 0; i < 12; ++i) subject += "efficiency ";
  subject += "digest";
  const std::string folded = EncodeHeaderText(subject, 9);
  for (absl::string_view line : absl::StrSplit(folded, "\r\n")) EXPECT_LE(line.size(), 76u);
  EXPECT_EQ(absl::StrReplaceAll(folded, {{"\r\n ", " "}}), subject);
}

TEST(AlertMail, SaysWhatFiredOnWhichJob) {
  Notification n;
  n.alert_id = 7;
  n.kind = "idle_gpus";
  n.severity = "warning";
  n.state = "firing";
  n.cluster = "eos";
  n.job_id = "4711";
  n.user = "alice";
  n.summary = "3 of 8 GPUs idle";
  n.description = "GPUs 5-7 did nothing for 2 hours.";
  n.dashboard_url = "https://goodput.example.org/#/job/eos/4711";
  MailMessage m = AlertMail(n);
  EXPECT_EQ(m.subject, "goodput warning: 3 of 8 GPUs idle");
  EXPECT_TRUE(absl::StrContains(m.body, "Job: eos/4711\n"));
  EXPECT_TRUE(absl::StrContains(m.body, "GPUs 5-7 did nothing for 2 hours."));
  n.state = "resolved";
  EXPECT_EQ(AlertMail(n).subject, "goodput resolved: 3 of 8 GPUs idle");
}

}  // namespace
}  // namespace goodput::alerting
