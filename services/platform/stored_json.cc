#include "services/platform/stored_json.h"

#include <string>
#include <utility>

#include "services/core/bounded_document.h"

namespace goodput::platform {
using nlohmann::json;

absl::StatusOr<json> ParseStoredJson(std::string_view text, const StoredJsonLimits& limits) {
  return core::ParseBounded<json, nlohmann::detail::json_sax_dom_parser<json>>(
      text, limits, json::input_format_t::json, "JSON");
}

}  // namespace goodput::platform
