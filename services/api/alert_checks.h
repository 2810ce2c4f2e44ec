// Checks of what operators send to AlertService (acknowledgements, silences, matchers) before
// the engine stores or evaluates it: text PostgreSQL can hold, of a size a listing can show,
// and matchers of bounded number and length (a regex is compiled by RE2, linear time, but its
// size still costs memory). Each refusal names the field and the value, escaped.
//
//   if (absl::Status s = CheckAckRequest(*request); !s.ok()) return s;
#pragma once

#include <cstddef>

#include "absl/status/status.h"
#include "goodput/v1/alert.pb.h"

namespace goodput::api {

// Who acknowledged or silenced (`by`, `created_by`) and why (`comment`).
inline constexpr size_t kMaxAlertActorBytes = 256;
inline constexpr size_t kMaxAlertCommentBytes = 4096;
// Matchers of one silence or one listing, and the size of a matcher's name and value.
inline constexpr int kMaxMatchers = 64;
inline constexpr size_t kMaxMatcherNameBytes = 256;
inline constexpr size_t kMaxMatcherValueBytes = 1024;
// An alert or silence id.
inline constexpr size_t kMaxAlertIdBytes = 64;

absl::Status CheckAckRequest(const v1::AckAlertRequest& request);
absl::Status CheckSilence(const v1::Silence& silence);
// `field` names the list in messages ("silence.matchers", "matchers").
absl::Status CheckMatchers(const google::protobuf::RepeatedPtrField<v1::LabelMatcher>& matchers,
                           absl::string_view field);

}  // namespace goodput::api
