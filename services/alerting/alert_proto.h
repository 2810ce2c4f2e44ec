// Alerts between the engine's names and the API's protos: kinds, severities, states, labels
// and label matchers. Pure.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "goodput/v1/alert.pb.h"
#include "services/alerting/alert_rules.h"

namespace goodput::alerting {

namespace v1 = ::goodput::v1;

v1::AlertKind KindToProto(Kind k);
std::optional<Kind> KindFromProto(v1::AlertKind k);  // nullopt for unspecified or unknown
v1::Severity SeverityToProto(Severity s);
std::string StateName(v1::AlertState s);  // "firing", ...; "" for unspecified
v1::AlertState StateFromName(const std::string& s);
Labels LabelsOf(const v1::Alert& a);

// Matcher operators as JSON names ("=", "!=", "=~", "!~", by Matcher::Op) and protos.
inline constexpr const char* kOpNames[] = {"=", "!=", "=~", "!~"};
Matcher::Op OpFromProto(v1::MatchOperator op);
v1::MatchOperator OpToProto(Matcher::Op op);
// INVALID_ARGUMENT naming `field`[i] for a matcher that is not one.
absl::StatusOr<std::vector<Matcher>> MatchersFromProto(
    const google::protobuf::RepeatedPtrField<v1::LabelMatcher>& in, const std::string& field);

}  // namespace goodput::alerting
