#include "services/platform/gpu_catalog_config.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "yaml-cpp/yaml.h"

namespace goodput::platform {
namespace {

constexpr char kKey[] = "gpu_catalog.overrides";

absl::Status Bad(size_t index, absl::string_view field, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("config key ", kKey, "[", index, "].", field, ": ", why));
}

absl::StatusOr<std::optional<double>> PositiveNumber(const YAML::Node& entry, size_t index,
                                                     const char* field) {
  const YAML::Node node = entry[field];
  if (!node) return std::optional<double>();
  try {
    double value = node.as<double>();
    if (!(value > 0)) return Bad(index, field, absl::StrCat("\"", node.Scalar(), "\" is not > 0"));
    return std::optional<double>(value);
  } catch (const YAML::Exception&) {
    return Bad(index, field, absl::StrCat("\"", node.Scalar(), "\" is not a number"));
  }
}

absl::StatusOr<core::GpuSpecOverride> ParseEntry(const YAML::Node& entry, size_t index) {
  if (!entry.IsMap()) return Bad(index, "", "each override is a mapping with at least `name`");
  static const std::vector<std::string> kKnown = {"name",
                                                  "base_model",
                                                  "model_names",
                                                  "sm_count",
                                                  "dense_flops_per_cycle_per_sm",
                                                  "tensor_max_clock_mhz",
                                                  "sm_boost_clock_mhz",
                                                  "hbm_capacity_gib",
                                                  "hbm_bandwidth_gb_per_s",
                                                  "board_power_w",
                                                  "source_note"};
  for (const auto& kv : entry) {
    std::string key = kv.first.as<std::string>();
    if (std::find(kKnown.begin(), kKnown.end(), key) == kKnown.end()) {
      return Bad(index, key, "unknown field");
    }
  }
  core::GpuSpecOverride out;
  try {
    if (!entry["name"] || entry["name"].as<std::string>().empty()) {
      return Bad(index, "name", "is required");
    }
    out.name = entry["name"].as<std::string>();
    if (entry["base_model"]) out.base_model = entry["base_model"].as<std::string>();
    if (entry["source_note"]) out.source_note = entry["source_note"].as<std::string>();
    if (const YAML::Node names = entry["model_names"]) {
      if (!names.IsSequence()) return Bad(index, "model_names", "is not a list");
      for (const auto& name : names) out.model_names.push_back(name.as<std::string>());
    }
  } catch (const YAML::Exception& e) {
    return Bad(index, "name", e.what());
  }
  if (const YAML::Node sms = entry["sm_count"]) {
    int value = 0;
    try {
      value = sms.as<int>();
    } catch (const YAML::Exception&) {
      return Bad(index, "sm_count", absl::StrCat("\"", sms.Scalar(), "\" is not an integer"));
    }
    if (value <= 0)
      return Bad(index, "sm_count", absl::StrCat("\"", sms.Scalar(), "\" is not > 0"));
    out.sm_count = value;
  }
  for (const char* field : {"tensor_max_clock_mhz", "sm_boost_clock_mhz", "hbm_capacity_gib",
                            "hbm_bandwidth_gb_per_s", "board_power_w"}) {
    absl::StatusOr<std::optional<double>> value = PositiveNumber(entry, index, field);
    if (!value.ok()) return value.status();
    if (!value->has_value()) continue;
    std::string f = field;
    if (f == "tensor_max_clock_mhz") out.tensor_max_clock_mhz = **value;
    if (f == "sm_boost_clock_mhz") out.sm_boost_clock_mhz = **value;
    if (f == "hbm_capacity_gib") out.hbm_capacity_gib = **value;
    if (f == "hbm_bandwidth_gb_per_s") out.hbm_bandwidth_gb_per_s = **value;
    if (f == "board_power_w") out.board_power_w = **value;
  }
  if (const YAML::Node flops = entry["dense_flops_per_cycle_per_sm"]) {
    if (!flops.IsMap()) {
      return Bad(index, "dense_flops_per_cycle_per_sm", "is not a mapping of precision: value");
    }
    for (const auto& kv : flops) {
      std::string precision_name = kv.first.as<std::string>();
      absl::StatusOr<core::Precision> precision = core::ParsePrecision(precision_name);
      std::string field = absl::StrCat("dense_flops_per_cycle_per_sm.", precision_name);
      if (!precision.ok()) return Bad(index, field, precision.status().message());
      double value = 0;
      try {
        value = kv.second.as<double>();
      } catch (const YAML::Exception&) {
        return Bad(index, field, absl::StrCat("\"", kv.second.Scalar(), "\" is not a number"));
      }
      out.dense_flops_per_cycle_per_sm.push_back({*precision, value});
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<core::GpuCatalog> LoadGpuCatalog(const ConfigTree& config) {
  core::GpuCatalog catalog = core::GpuCatalog::BuiltIn();
  const YAML::Node section = config.root()["gpu_catalog"];
  if (!section) return catalog;
  const YAML::Node list = section["overrides"];
  if (!list) return catalog;
  if (!list.IsSequence()) {
    return absl::InvalidArgumentError(absl::StrCat("config key ", kKey, ": is not a list"));
  }
  std::vector<core::GpuSpecOverride> overrides;
  for (size_t i = 0; i < list.size(); ++i) {
    absl::StatusOr<core::GpuSpecOverride> entry = ParseEntry(list[i], i);
    if (!entry.ok()) return entry.status();
    overrides.push_back(*std::move(entry));
  }
  if (absl::Status s = catalog.ApplyOverrides(overrides); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("config key ", kKey, ": ", s.message()));
  }
  return catalog;
}

}  // namespace goodput::platform
