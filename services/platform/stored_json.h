// JSON read back from storage (a PostgreSQL json/jsonb/text column, a Redis value): whatever
// a row holds, parsing it is an error at worst, never a crash. The text is parsed within
// StoredJsonLimits (size, nesting depth, number of values), so what comes back can be copied,
// compared and dumped (nlohmann recurses once per level for those) without running out of
// stack, and the caller logs a bad row by its key and skips it.
//
//   absl::StatusOr<nlohmann::json> labels = ParseStoredJson(row[12].as<std::string>());
//   if (!labels.ok()) logger.Warn("job labels skipped", {{"job", id}, {"error", ...}});
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string_view>

#include "absl/status/statusor.h"
#include "services/core/bounded_document.h"

namespace goodput::platform {

using StoredJsonLimits = core::DocumentLimits;

// `text` as a JSON document; INVALID_ARGUMENT naming the limit exceeded (and its value) or
// the syntax error's position. Never echoes the text.
absl::StatusOr<nlohmann::json> ParseStoredJson(std::string_view text,
                                               const StoredJsonLimits& limits = {});

}  // namespace goodput::platform
