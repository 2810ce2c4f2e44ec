// Reading a stored document (a JSON column, a CBOR checkpoint) so that whatever bytes a row
// holds, the worst outcome is an error: nlohmann's readers and its DOM recurse once per
// nesting level, so a document nested a million levels deep would overflow the stack. The
// reader here builds the DOM through a SAX handler that counts nesting and values and stops
// at the first limit exceeded, before the recursion goes deeper than `max_depth`.
//
// Header-only and generic over the JSON type, so core stays free of nlohmann: detect (CBOR
// checkpoints) and platform (JSON columns, stored_json.h) instantiate it with nlohmann::json.
//
//   absl::StatusOr<nlohmann::json> j = core::ParseBounded<nlohmann::json>(
//       bytes, limits, nlohmann::json::input_format_t::cbor, "CBOR");
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace goodput::core {

struct DocumentLimits {
  size_t max_bytes = size_t{16} << 20;
  int max_depth = 32;
  size_t max_values = size_t{1} << 20;  // arrays, objects, keys and scalars together
};

namespace internal {

// nlohmann's DOM builder (`Dom`) behind a count of nesting and values.
template <class Json, class Dom>
class BoundedSax {
 public:
  BoundedSax(Json& out, const DocumentLimits& limits, absl::string_view format)
      : dom_(out, false), limits_(limits), format_(format) {}

  const std::string& error() const { return error_; }

  bool null() { return Value() && dom_.null(); }
  bool boolean(bool b) { return Value() && dom_.boolean(b); }
  bool number_integer(typename Json::number_integer_t n) {
    return Value() && dom_.number_integer(n);
  }
  bool number_unsigned(typename Json::number_unsigned_t n) {
    return Value() && dom_.number_unsigned(n);
  }
  bool number_float(typename Json::number_float_t f, const typename Json::string_t& s) {
    return Value() && dom_.number_float(f, s);
  }
  bool string(typename Json::string_t& s) { return Value() && dom_.string(s); }
  bool binary(typename Json::binary_t& b) { return Value() && dom_.binary(b); }
  bool key(typename Json::string_t& k) { return Value() && dom_.key(k); }
  bool start_object(std::size_t n) { return Open("object", n) && dom_.start_object(n); }
  bool end_object() {
    --depth_;
    return dom_.end_object();
  }
  bool start_array(std::size_t n) { return Open("array", n) && dom_.start_array(n); }
  bool end_array() {
    --depth_;
    return dom_.end_array();
  }
  template <class Exception>
  bool parse_error(std::size_t position, const std::string&, const Exception&) {
    // The reader's own message may quote the bytes around the error: the position says where.
    return Fail(absl::StrCat("not ", format_, " at byte ", position));
  }

 private:
  bool Value() {
    if (++values_ <= limits_.max_values) return true;
    return Fail(absl::StrCat("more than ", limits_.max_values, " values (max_values)"));
  }
  // An array or object of `n` elements (-1: of unknown length) opening one level deeper.
  bool Open(const char* what, std::size_t n) {
    if (!Value()) return false;
    if (++depth_ > limits_.max_depth) {
      return Fail(absl::StrCat("nested deeper than ", limits_.max_depth, " levels (max_depth)"));
    }
    if (n != static_cast<std::size_t>(-1) && n > limits_.max_values) {
      return Fail(absl::StrCat("an ", what, " of ", n, " elements is more than ",
                               limits_.max_values, " values (max_values)"));
    }
    return true;
  }
  bool Fail(std::string message) {
    if (error_.empty()) error_ = std::move(message);
    return false;
  }

  Dom dom_;
  const DocumentLimits& limits_;
  absl::string_view format_;
  int depth_ = 0;
  size_t values_ = 0;
  std::string error_;
};

}  // namespace internal

// `bytes` in `format` (Json::input_format_t) as a document, built by `Dom` (nlohmann's
// detail::json_sax_dom_parser<Json>); INVALID_ARGUMENT naming the limit exceeded (and its
// value) or where the bytes stop being `format_name`. Never echoes the bytes.
template <class Json, class Dom>
absl::StatusOr<Json> ParseBounded(std::string_view bytes, const DocumentLimits& limits,
                                  typename Json::input_format_t format,
                                  absl::string_view format_name) {
  if (bytes.size() > limits.max_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(bytes.size(), " bytes is more than ", limits.max_bytes, " bytes (max_bytes)"));
  }
  Json out;
  internal::BoundedSax<Json, Dom> sax(out, limits, format_name);
  bool ok = false;
  try {
    ok = Json::sax_parse(bytes.begin(), bytes.end(), &sax, format, /*strict=*/true);
  } catch (const typename Json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("not ", format_name, " (error ", e.id, ")"));
  }
  if (!ok || !sax.error().empty()) {
    return absl::InvalidArgumentError(sax.error().empty() ? absl::StrCat("not ", format_name)
                                                          : sax.error());
  }
  return out;
}

}  // namespace goodput::core
