// The smtp target against a real SMTP server (aiosmtpd, tests/support/smtp_sink.py) that
// offers STARTTLS with a test certificate and requires AUTH inside TLS: with a username and no
// `starttls` key the target starts TLS, logs in and delivers; the same relay refuses a target
// configured with `starttls: none`, whose credentials never reach it. (A relay that does not
// offer STARTTLS at all: targets/smtp_target_test.cc.)

#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/alerting/targets/targets_config.h"
#include "services/platform/config.h"
#include "services/platform/test_pki.h"
#include "tests/support/child_process.h"
#include "tests/support/free_port.h"
#include "tests/support/service_process.h"
#include "tests/support/temp_dir.h"

namespace goodput::alerting {
namespace {

using ::goodput::testing::ChildProcess;
using ::goodput::testing::PollUntil;
using ::goodput::testing::SourceDir;
using ::testing::HasSubstr;

class SmtpStarttls : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<platform::TestPki> pki = platform::TestPki::Create();
    ASSERT_TRUE(pki.ok()) << pki.status();
    pki_.emplace(*std::move(pki));
    ASSERT_TRUE(pki_->MakeCa("ca").ok());
    ASSERT_TRUE(pki_->Issue("ca", "relay").ok());
    absl::StatusOr<goodput::testing::TempDir> dir = goodput::testing::TempDir::Create("smtp-tls");
    ASSERT_TRUE(dir.ok()) << dir.status();
    dir_ = std::make_unique<goodput::testing::TempDir>(*std::move(dir));
    absl::StatusOr<int> port = goodput::testing::FreePort();
    ASSERT_TRUE(port.ok());
    port_ = *port;
    absl::StatusOr<std::unique_ptr<ChildProcess>> sink = ChildProcess::Start(
        {.argv = {"/usr/bin/python3", (SourceDir() / "tests/support/smtp_sink.py").string(),
                  "--port", absl::StrCat(port_), "--dir", dir_->path().string(), "--tls-cert",
                  pki_->crt("relay"), "--tls-key", pki_->key("relay"), "--auth", "alice:s3cret"},
         .log_path = dir_->path() / "sink.log"});
    ASSERT_TRUE(sink.ok()) << sink.status();
    sink_ = *std::move(sink);
    ASSERT_TRUE(PollUntil([&] { return std::filesystem::exists(dir_->path() / "ready"); },
                          absl::Seconds(30)))
        << sink_->LogTail();
  }

  // The smtp target `mail` with a username, as configuration gives it (`extra`: more keys).
  ConfiguredTarget Mail(const std::string& extra) {
    absl::StatusOr<platform::ConfigTree> tree = platform::ConfigTree::LoadString(absl::StrCat(
        "alerting:\n  targets:\n    - {name: mail, kind: smtp, url: \"smtp://127.0.0.1:", port_,
        "\", username: alice, password: s3cret, ca_file: \"", pki_->crt("ca"),
        "\", from: goodput@example.org, to: [ops@example.org], timeout_s: 20", extra, "}\n"));
    EXPECT_TRUE(tree.ok()) << tree.status();
    absl::StatusOr<std::vector<ConfiguredTarget>> targets = ParseTargets(*tree);
    EXPECT_TRUE(targets.ok()) << targets.status();
    return std::move(targets->front());
  }

  absl::Status Send(Target& target) {
    Notification n;
    n.alert_id = 7;
    n.kind = "idle_gpus";
    n.severity = "warning";
    n.state = "firing";
    n.cluster = "eos";
    n.job_id = "4711";
    n.summary = "3 of 8 GPUs idle";
    return target.Send(
        {.notification = &n, .idempotency_key = "7:mail:firing", .now = absl::Now()});
  }

  std::vector<nlohmann::json> Messages() const {
    std::vector<nlohmann::json> out;
    for (int n = 1;; ++n) {
      std::ifstream in(dir_->path() / absl::StrCat(n, ".json"));
      if (!in) break;
      out.push_back(nlohmann::json::parse(in));
    }
    return out;
  }

  std::optional<platform::TestPki> pki_;
  std::unique_ptr<goodput::testing::TempDir> dir_;
  std::unique_ptr<ChildProcess> sink_;
  int port_ = 0;
};

TEST_F(SmtpStarttls, WithAUsernameTheTargetStartsTlsByDefaultThenLogsInAndDelivers) {
  ConfiguredTarget mail = Mail("");
  EXPECT_EQ(mail.warning, "");
  absl::Status sent = Send(*mail.target);
  ASSERT_TRUE(sent.ok()) << sent << "\n" << sink_->LogTail();
  std::vector<nlohmann::json> messages = Messages();
  ASSERT_EQ(messages.size(), 1u);
  EXPECT_EQ(messages[0]["tls"], true);
  EXPECT_EQ(messages[0]["login"], "alice");
  EXPECT_EQ(messages[0]["subject"], "goodput warning: 3 of 8 GPUs idle");
}

TEST_F(SmtpStarttls, StarttlsNoneIsAnExplicitChoiceThatThisRelayRefuses) {
  ConfiguredTarget mail = Mail(", starttls: none");
  EXPECT_THAT(mail.warning, HasSubstr("smtp target mail: starttls: none sends the credentials"));
  absl::Status sent = Send(*mail.target);
  EXPECT_FALSE(sent.ok());
  EXPECT_THAT(std::string(sent.message()), HasSubstr("smtp target mail: smtp://127.0.0.1:"));
  EXPECT_TRUE(Messages().empty());
}

}  // namespace
}  // namespace goodput::alerting
