#include "services/api/alert_checks.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "services/api/api_checks.h"

namespace goodput::api {
namespace {

absl::Status CheckField(absl::string_view field, absl::string_view value, size_t max_bytes,
                        TextKind kind) {
  if (auto reason = CheckText(value, max_bytes, kind)) {
    return absl::InvalidArgumentError(absl::StrCat(field, "=\"", Sanitize(value), "\" ", *reason));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckMatchers(const google::protobuf::RepeatedPtrField<v1::LabelMatcher>& matchers,
                           absl::string_view field) {
  if (matchers.size() > kMaxMatchers) {
    return absl::InvalidArgumentError(absl::StrCat(field, " has ", matchers.size(),
                                                   " matchers; the limit is ", kMaxMatchers));
  }
  for (int i = 0; i < matchers.size(); ++i) {
    const std::string where = absl::StrCat(field, "[", i, "]");
    if (absl::Status s = CheckField(absl::StrCat(where, ".name"), matchers[i].name(),
                                    kMaxMatcherNameBytes, TextKind::kIdentity);
        !s.ok()) {
      return s;
    }
    if (absl::Status s = CheckField(absl::StrCat(where, ".value"), matchers[i].value(),
                                    kMaxMatcherValueBytes, TextKind::kFreeText);
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status CheckAckRequest(const v1::AckAlertRequest& request) {
  if (absl::Status s =
          CheckField("alert_id", request.alert_id(), kMaxAlertIdBytes, TextKind::kIdentity);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckField("by", request.by(), kMaxAlertActorBytes, TextKind::kIdentity);
      !s.ok()) {
    return s;
  }
  return CheckField("comment", request.comment(), kMaxAlertCommentBytes, TextKind::kFreeText);
}

absl::Status CheckSilence(const v1::Silence& silence) {
  if (absl::Status s = CheckField("silence.created_by", silence.created_by(),
                                  kMaxAlertActorBytes, TextKind::kIdentity);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckField("silence.comment", silence.comment(), kMaxAlertCommentBytes,
                                  TextKind::kFreeText);
      !s.ok()) {
    return s;
  }
  return CheckMatchers(silence.matchers(), "silence.matchers");
}

}  // namespace goodput::api
