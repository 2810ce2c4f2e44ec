#include "services/api/api_checks.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"

namespace goodput::api {

bool IsValidUtf8(absl::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    int extra = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0 && c >= 0xC2) {
      extra = 1;
    } else if ((c & 0xF0) == 0xE0) {
      extra = 2;
    } else if ((c & 0xF8) == 0xF0 && c <= 0xF4) {
      extra = 3;
    } else {
      return false;
    }
    if (i + extra >= text.size()) return false;
    for (int k = 1; k <= extra; ++k) {
      if ((static_cast<unsigned char>(text[i + k]) & 0xC0) != 0x80) return false;
    }
    i += extra + 1;
  }
  return true;
}

std::optional<std::string> CheckText(absl::string_view value, size_t max_bytes, TextKind kind) {
  if (value.size() > max_bytes) {
    return absl::StrCat("is ", value.size(), " bytes; the limit is ", max_bytes);
  }
  for (size_t i = 0; i < value.size(); ++i) {
    const auto c = static_cast<unsigned char>(value[i]);
    if (c == 0) return absl::StrCat("contains a NUL byte at byte ", i);
    if (kind == TextKind::kIdentity && (c < 0x20 || c == 0x7F)) {
      return absl::StrFormat("contains the control character 0x%02X at byte %d", c, i);
    }
  }
  if (!IsValidUtf8(value)) return std::string("is not valid UTF-8");
  return std::nullopt;
}

namespace {

std::optional<std::string> CheckChars(absl::string_view value, absl::string_view extra,
                                      absl::string_view what) {
  for (size_t i = 0; i < value.size(); ++i) {
    const auto c = static_cast<unsigned char>(value[i]);
    const bool alnum = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    if (alnum || (c < 0x80 && extra.find(static_cast<char>(c)) != absl::string_view::npos)) {
      if (i == 0 && c == '-') {
        return absl::StrCat("starts with '-', which a command would read as an option; a ",
                            what, " may not");
      }
      continue;
    }
    const std::string shown = c >= 0x20 && c < 0x7F ? absl::StrCat("'", std::string(1, c), "'")
                                                    : absl::StrFormat("the byte 0x%02X", c);
    std::string allowed;
    for (char e : extra) absl::StrAppend(&allowed, " ", std::string(1, e));
    return absl::StrCat("contains ", shown, " at byte ", i, ", not allowed in a ", what,
                        " (letters, digits and", allowed, " only)");
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> CheckJobIdChars(absl::string_view value) {
  return CheckChars(value, "._-+:/@=", "job id");
}

std::optional<std::string> CheckHostChars(absl::string_view value) {
  return CheckChars(value, "._-:[]%", "host");
}

std::string Sanitize(absl::string_view value) {
  constexpr size_t kMaxBytes = 200;
  std::string out;
  out.reserve(std::min(value.size(), kMaxBytes) + 8);
  size_t i = 0;
  while (i < value.size() && out.size() < kMaxBytes) {
    const auto c = static_cast<unsigned char>(value[i]);
    // A well-formed multi-byte UTF-8 character is copied whole; anything else that is not
    // printable ASCII is written as \xNN, so a refusal never carries raw control bytes.
    const int extra = c >= 0xF0 && c <= 0xF4   ? 3
                      : c >= 0xE0 && c < 0xF0 ? 2
                      : c >= 0xC2 && c < 0xE0 ? 1
                                              : 0;
    bool whole = extra > 0 && i + extra < value.size();
    for (int k = 1; whole && k <= extra; ++k) {
      whole = (static_cast<unsigned char>(value[i + k]) & 0xC0) == 0x80;
    }
    if (whole) {
      out.append(value.data() + i, extra + 1);
      i += extra + 1;
    } else if (c >= 0x20 && c < 0x7F) {
      out.push_back(static_cast<char>(c));
      ++i;
    } else {
      absl::StrAppend(&out, "\\x", absl::Hex(c, absl::kZeroPad2));
      ++i;
    }
  }
  if (i < value.size()) absl::StrAppend(&out, "...");
  return out;
}

std::optional<std::string> CheckApiTime(const google::protobuf::Timestamp& t) {
  if (t.nanos() < 0 || t.nanos() > 999'999'999) {
    return absl::StrCat("has nanos=", t.nanos(), " outside [0, 999999999]");
  }
  if (t.seconds() >= kMinApiTimeUnixS && t.seconds() < kMaxApiTimeUnixS) return std::nullopt;
  std::string when = t.seconds() > -62135596800 && t.seconds() < 253402300800
                         ? absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::FromUnixSeconds(t.seconds()),
                                            absl::UTCTimeZone())
                         : absl::StrCat(t.seconds(), " s since 1970");
  return t.seconds() < kMinApiTimeUnixS
             ? absl::StrCat("is ", when, ", before 2000-01-01 (unset or not a real time)")
             : absl::StrCat("is ", when, ", after 2100-01-01 (not a real time)");
}

}  // namespace goodput::api
