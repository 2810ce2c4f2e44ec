#include "services/core/carbon_cost.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace goodput::core {

absl::Status ValidateSiteRates(const SiteRates& r, const std::string& where) {
  auto bad = [&](const char* field, const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat(where, ".", field, ": ", what));
  };
  if (r.cluster.empty()) return bad("cluster", "must not be empty (\"*\" for every cluster)");
  if (r.currency.empty()) return bad("currency", "must not be empty");
  if (r.pue && !(*r.pue >= 1.0 && *r.pue <= 5.0)) {
    return bad("pue", absl::StrCat(*r.pue, " is outside [1, 5] (facility energy / IT energy)"));
  }
  for (const auto& [field, v] : {std::pair{"grid_gco2e_per_kwh", r.grid_gco2e_per_kwh},
                                 std::pair{"price_per_gpu_hour", r.price_per_gpu_hour},
                                 std::pair{"price_per_kwh", r.price_per_kwh}}) {
    if (v && !(*v >= 0)) return bad(field, absl::StrCat(*v, " must not be negative"));
  }
  return absl::OkStatus();
}

const SiteRates* RatesFor(const std::vector<SiteRates>& sites, const std::string& cluster) {
  const SiteRates* any = nullptr;
  for (const SiteRates& s : sites) {
    if (s.cluster == cluster) return &s;
    if (s.cluster == "*" && any == nullptr) any = &s;
  }
  return any;
}

CarbonCost ComputeCarbonCost(const SiteRates& r, double gpu_hours,
                             std::optional<double> gpu_energy_kwh, bool energy_estimated) {
  CarbonCost c;
  std::vector<std::string> basis;
  // The energy the rates apply to: the facility's when the PUE is known, else the GPUs'.
  std::optional<double> kwh = gpu_energy_kwh;
  if (gpu_energy_kwh && r.pue) {
    c.facility_kwh = *gpu_energy_kwh * *r.pue;
    kwh = c.facility_kwh;
    basis.push_back(absl::StrFormat("PUE %.2f", *r.pue));
  } else if (gpu_energy_kwh && (r.grid_gco2e_per_kwh || r.price_per_kwh)) {
    basis.push_back("the GPUs' energy only (no PUE)");
  }
  if (kwh && r.grid_gco2e_per_kwh) {
    c.co2e_kg = *kwh * *r.grid_gco2e_per_kwh / 1000.0;
    basis.push_back(absl::StrFormat("grid %.0f gCO2e/kWh", *r.grid_gco2e_per_kwh));
  }
  std::vector<std::string> prices;
  double cost = 0;
  if (r.price_per_gpu_hour) {
    cost += gpu_hours * *r.price_per_gpu_hour;
    prices.push_back(absl::StrFormat("%s %.2f/GPU-h", r.currency, *r.price_per_gpu_hour));
  }
  if (kwh && r.price_per_kwh) {
    cost += *kwh * *r.price_per_kwh;
    prices.push_back(absl::StrFormat("%s %.3f/kWh", r.currency, *r.price_per_kwh));
  }
  if (!prices.empty()) {
    c.cost = cost;
    c.currency = r.currency;
    basis.push_back(absl::StrJoin(prices, " + "));
  }
  if (!c.co2e_kg && !c.cost && !c.facility_kwh) return CarbonCost{};
  if (energy_estimated && kwh) basis.push_back("energy partly estimated");
  c.basis = absl::StrCat(absl::StrJoin(basis, "; "), " (site ", r.cluster, ")");
  return c;
}

}  // namespace goodput::core
