#include "services/alerting/alert_proto.h"

#include <iterator>

#include "absl/strings/str_cat.h"

namespace goodput::alerting {

v1::AlertKind KindToProto(Kind k) { return static_cast<v1::AlertKind>(static_cast<int>(k) + 1); }
std::optional<Kind> KindFromProto(v1::AlertKind k) {
  // Every Kind, in the API's order (KindToProto): 1 .. the number of kinds.
  if (k < 1 || k > static_cast<int>(std::size(kAllKinds))) return std::nullopt;
  return static_cast<Kind>(static_cast<int>(k) - 1);
}
v1::Severity SeverityToProto(Severity s) { return static_cast<v1::Severity>(static_cast<int>(s)); }

std::string StateName(v1::AlertState s) {
  switch (s) {
    case v1::ALERT_STATE_FIRING:
      return "firing";
    case v1::ALERT_STATE_RESOLVED:
      return "resolved";
    case v1::ALERT_STATE_ACKNOWLEDGED:
      return "acknowledged";
    case v1::ALERT_STATE_SILENCED:
      return "silenced";
    default:
      return "";
  }
}
v1::AlertState StateFromName(const std::string& s) {
  if (s == "firing") return v1::ALERT_STATE_FIRING;
  if (s == "resolved") return v1::ALERT_STATE_RESOLVED;
  if (s == "acknowledged") return v1::ALERT_STATE_ACKNOWLEDGED;
  if (s == "silenced") return v1::ALERT_STATE_SILENCED;
  return v1::ALERT_STATE_UNSPECIFIED;
}

Labels LabelsOf(const v1::Alert& a) { return Labels(a.labels().begin(), a.labels().end()); }

Matcher::Op OpFromProto(v1::MatchOperator op) {
  switch (op) {
    case v1::MATCH_OPERATOR_NOT_EQUAL:
      return Matcher::Op::kNotEqual;
    case v1::MATCH_OPERATOR_REGEX:
      return Matcher::Op::kRegex;
    case v1::MATCH_OPERATOR_NOT_REGEX:
      return Matcher::Op::kNotRegex;
    default:
      return Matcher::Op::kEqual;
  }
}
v1::MatchOperator OpToProto(Matcher::Op op) {
  switch (op) {
    case Matcher::Op::kNotEqual:
      return v1::MATCH_OPERATOR_NOT_EQUAL;
    case Matcher::Op::kRegex:
      return v1::MATCH_OPERATOR_REGEX;
    case Matcher::Op::kNotRegex:
      return v1::MATCH_OPERATOR_NOT_REGEX;
    default:
      return v1::MATCH_OPERATOR_EQUAL;
  }
}

absl::StatusOr<std::vector<Matcher>> MatchersFromProto(
    const google::protobuf::RepeatedPtrField<v1::LabelMatcher>& in, const std::string& field) {
  std::vector<Matcher> out;
  for (int i = 0; i < in.size(); ++i) {
    absl::StatusOr<Matcher> m =
        Matcher::Create(in[i].name(), in[i].value(), OpFromProto(in[i].comparison()),
                        absl::StrCat(field, "[", i, "]"));
    if (!m.ok()) return m.status();
    out.push_back(*std::move(m));
  }
  return out;
}

}  // namespace goodput::alerting
