#include "services/alerting/targets/render.h"

#include <cctype>

#include "absl/strings/str_cat.h"

namespace goodput::alerting {

std::string Rfc3339(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", t, absl::UTCTimeZone());
}

absl::Time ToAbslTime(std::chrono::system_clock::time_point t) { return absl::FromChrono(t); }

std::string OneLine(const std::string& text, size_t max_chars) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    // Every control character (NUL, escape sequences a terminal would run, DEL) becomes a
    // space: the line lands on a job's stderr and in scontrol's output.
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7F) c = ' ';
    if (c == ' ' && (out.empty() || out.back() == ' ')) continue;
    out.push_back(c);
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  if (out.size() <= max_chars) return out;
  size_t cut = max_chars > 3 ? max_chars - 3 : 0;
  // Do not split a UTF-8 sequence: back up over continuation bytes.
  while (cut > 0 && (static_cast<unsigned char>(out[cut]) & 0xC0) == 0x80) --cut;
  return absl::StrCat(out.substr(0, cut), "...");
}

std::string HumanMessage(const Notification& n, size_t max_chars) {
  if (n.state == "resolved") {
    return OneLine(absl::StrCat("goodput resolved: ", n.summary), max_chars);
  }
  std::string text = absl::StrCat("goodput ", n.severity, ": ", n.summary);
  if (!n.description.empty()) absl::StrAppend(&text, " -- ", n.description);
  if (!n.dashboard_url.empty()) absl::StrAppend(&text, " ", n.dashboard_url);
  return OneLine(text, max_chars);
}

std::string AlertName(const std::string& kind) {
  std::string out = "Goodput";
  bool upper = true;
  for (char c : kind) {
    if (c == '_' || c == '-' || c == '.') {
      upper = true;
      continue;
    }
    out.push_back(upper ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c);
    upper = false;
  }
  return out;
}

}  // namespace goodput::alerting
