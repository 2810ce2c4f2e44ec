#include "services/alerting/alert_rules.h"

#include "gtest/gtest.h"

namespace goodput::alerting {
namespace {

TEST(Fingerprint, IsStableAndSeparatesItsParts) {
  const std::string a = Fingerprint(Kind::kRegressionInJob, "eos", "4711");
  EXPECT_EQ(a, Fingerprint(Kind::kRegressionInJob, "eos", "4711"));
  EXPECT_EQ(a.rfind("regression_in_job-", 0), 0u);
  // A value fixed once: a fingerprint must not change between releases.
  EXPECT_EQ(a, "regression_in_job-" + a.substr(18));
  EXPECT_EQ(a.size(), 18u + 16u);
  EXPECT_NE(a, Fingerprint(Kind::kRegressionVsWorkload, "eos", "4711"));
  EXPECT_NE(a, Fingerprint(Kind::kRegressionInJob, "eos", "4712"));
  EXPECT_NE(Fingerprint(Kind::kStraggler, "a/b", "c"), Fingerprint(Kind::kStraggler, "a", "b/c"));
  EXPECT_NE(Fingerprint(Kind::kStraggler, "eos", "1", "n1/0/"),
            Fingerprint(Kind::kStraggler, "eos", "1", "n1/1/"));
}

TEST(Kinds, RoundTripByName) {
  for (Kind k : kAllKinds) EXPECT_EQ(KindFromName(KindName(k)), k);
  EXPECT_FALSE(KindFromName("regression").has_value());
}

TEST(Matcher, ComparesLabelsWithEveryOperator) {
  Labels l = {{"cluster", "eos"}, {"team", "llm-pretrain"}};
  auto eq = Matcher::Create("cluster", "eos", Matcher::Op::kEqual);
  auto ne = Matcher::Create("cluster", "eos", Matcher::Op::kNotEqual);
  auto re = Matcher::Create("team", "llm-.*", Matcher::Op::kRegex);
  auto nre = Matcher::Create("team", "llm", Matcher::Op::kNotRegex);
  auto absent = Matcher::Create("user", "bob", Matcher::Op::kNotEqual);
  ASSERT_TRUE(eq.ok() && ne.ok() && re.ok() && nre.ok() && absent.ok());
  EXPECT_TRUE(eq->Matches(l));
  EXPECT_FALSE(ne->Matches(l));
  EXPECT_TRUE(re->Matches(l));
  EXPECT_TRUE(nre->Matches(l));  // regex must match fully
  EXPECT_TRUE(absent->Matches(l));
  EXPECT_TRUE(MatchesAll({*eq, *re}, l));
  EXPECT_FALSE(MatchesAll({*eq, *ne}, l));
}

TEST(Matcher, RefusesABadRegexNamingTheField) {
  auto m = Matcher::Create("team", "llm-(", Matcher::Op::kRegex, "silence.matchers[2]");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(m.status().message().find("silence.matchers[2].value"), std::string::npos);
  EXPECT_NE(m.status().message().find("llm-("), std::string::npos);
  EXPECT_FALSE(Matcher::Create("", "x", Matcher::Op::kEqual).ok());
}

RoutingConfig Routing() {
  RoutingConfig r;
  r.routes.push_back({.match = {{"cluster", "eos"}, {"severity", "critical"}},
                      .targets = {"slurm-eos", "am-prod"},
                      .continue_matching = true});
  r.routes.push_back({.match = {{"team", "llm"}}, .targets = {"am-prod", "hook-llm"}});
  r.routes.push_back({.match = {{"kind", "data_quality"}}, .targets = {"hook-infra"}});
  r.default_targets = {"am-default"};
  return r;
}

TEST(Routing, FirstMatchStopsUnlessContinueAndTargetsAreListedOnce) {
  const RoutingConfig r = Routing();
  EXPECT_EQ(RouteTargets(r, {{"cluster", "eos"}, {"severity", "critical"}, {"team", "llm"}}),
            (std::vector<std::string>{"slurm-eos", "am-prod", "hook-llm"}));
  EXPECT_EQ(RouteTargets(r, {{"cluster", "eos"}, {"severity", "warning"}, {"team", "llm"}}),
            (std::vector<std::string>{"am-prod", "hook-llm"}));
  EXPECT_EQ(RouteTargets(r, {{"cluster", "eos"}, {"team", "llm"}, {"kind", "data_quality"}}),
            (std::vector<std::string>{"am-prod", "hook-llm"}));
}

TEST(Routing, UnmatchedAlertsGoToTheDefaultTargets) {
  EXPECT_EQ(RouteTargets(Routing(), {{"cluster", "selene"}}),
            (std::vector<std::string>{"am-default"}));
  EXPECT_TRUE(RouteTargets(RoutingConfig{}, {{"cluster", "selene"}}).empty());
}

TEST(Routing, ValidationNamesTheBadRoute) {
  EXPECT_TRUE(ValidateRouting(Routing()).ok());
  RoutingConfig bad = Routing();
  bad.routes[1].match["colour"] = "red";
  absl::Status s = ValidateRouting(bad);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("alerting.routes[1].match.colour"), std::string::npos) << s;
  bad = Routing();
  bad.routes[0].match["kind"] = "regresion";
  EXPECT_NE(ValidateRouting(bad).message().find("regresion"), std::string::npos);
  bad = Routing();
  bad.routes[2].targets.clear();
  EXPECT_NE(ValidateRouting(bad).message().find("alerting.routes[2].targets"), std::string::npos);
}

TEST(Severity, ConfiguredRulesComeFirstThenTheBuiltInOnes) {
  const Labels reg = {{"kind", "regression_in_job"}, {"team", "llm"}};
  EXPECT_EQ(DecideSeverity({}, reg, 2.5), Severity::kCritical);
  EXPECT_EQ(DecideSeverity({}, reg, 1.5), Severity::kWarning);
  EXPECT_EQ(DecideSeverity({}, {{"kind", "data_quality"}}, std::nullopt), Severity::kInfo);
  std::vector<SeverityRule> rules = {
      {.match = {{"team", "llm"}}, .min_factor = 1.4, .severity = Severity::kCritical}};
  EXPECT_TRUE(ValidateSeverityRules(rules).ok());
  EXPECT_EQ(DecideSeverity(rules, reg, 1.5), Severity::kCritical);
  EXPECT_EQ(DecideSeverity(rules, reg, 1.3), Severity::kWarning);
  rules[0].min_factor = -1;
  EXPECT_FALSE(ValidateSeverityRules(rules).ok());
}

}  // namespace
}  // namespace goodput::alerting
