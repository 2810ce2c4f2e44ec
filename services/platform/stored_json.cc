#include "services/platform/stored_json.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace goodput::platform {
namespace {

using nlohmann::json;

// nlohmann's DOM parser behind a count of nesting and values: the first limit exceeded stops
// the parser.
class BoundedSax {
 public:
  BoundedSax(json& out, const StoredJsonLimits& limits) : dom_(out, false), limits_(limits) {}

  const std::string& error() const { return error_; }

  bool null() { return Value() && dom_.null(); }
  bool boolean(bool b) { return Value() && dom_.boolean(b); }
  bool number_integer(json::number_integer_t n) { return Value() && dom_.number_integer(n); }
  bool number_unsigned(json::number_unsigned_t n) { return Value() && dom_.number_unsigned(n); }
  bool number_float(json::number_float_t f, const json::string_t& s) {
    return Value() && dom_.number_float(f, s);
  }
  bool string(json::string_t& s) { return Value() && dom_.string(s); }
  bool binary(json::binary_t& b) { return Value() && dom_.binary(b); }
  bool key(json::string_t& k) { return Value() && dom_.key(k); }
  bool start_object(std::size_t n) { return Open() && dom_.start_object(n); }
  bool end_object() {
    --depth_;
    return dom_.end_object();
  }
  bool start_array(std::size_t n) { return Open() && dom_.start_array(n); }
  bool end_array() {
    --depth_;
    return dom_.end_array();
  }
  bool parse_error(std::size_t position, const std::string&, const json::exception&) {
    // nlohmann's message quotes the text around the error: the position alone says where.
    return Fail(absl::StrCat("not JSON: syntax error at byte ", position));
  }

 private:
  bool Value() {
    if (++values_ <= limits_.max_values) return true;
    return Fail(absl::StrCat("more than ", limits_.max_values, " values (max_values)"));
  }
  bool Open() {
    if (!Value()) return false;
    if (++depth_ <= limits_.max_depth) return true;
    return Fail(absl::StrCat("nested deeper than ", limits_.max_depth, " levels (max_depth)"));
  }
  bool Fail(std::string message) {
    if (error_.empty()) error_ = std::move(message);
    return false;
  }

  nlohmann::detail::json_sax_dom_parser<json> dom_;
  const StoredJsonLimits& limits_;
  int depth_ = 0;
  size_t values_ = 0;
  std::string error_;
};

}  // namespace

absl::StatusOr<json> ParseStoredJson(std::string_view text, const StoredJsonLimits& limits) {
  if (text.size() > limits.max_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(text.size(), " bytes is more than ", limits.max_bytes, " bytes (max_bytes)"));
  }
  json out;
  BoundedSax sax(out, limits);
  bool ok = false;
  try {
    ok = json::sax_parse(text.begin(), text.end(), &sax);
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("not JSON (error ", e.id, ")"));
  }
  if (!ok || !sax.error().empty()) {
    return absl::InvalidArgumentError(sax.error().empty() ? "not JSON" : sax.error());
  }
  return out;
}

}  // namespace goodput::platform
