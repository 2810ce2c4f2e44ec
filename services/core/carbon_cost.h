// Carbon and cost of a job from the operator's rates per site (a cluster, or "*" for every
// cluster without its own): the facility's energy is the GPUs' energy x the site's PUE, its
// emissions that energy x the grid's carbon intensity, its cost GPU-hours x the price per
// GPU-hour plus facility kWh x the price per kWh. Nothing is assumed: a figure whose inputs
// the operator did not configure is left unset, and every figure comes with its inputs in
// words (`basis`), since a number of grams or dollars means nothing without them.
//
//   const SiteRates* rates = RatesFor(sites, "eos");
//   CarbonCost c = ComputeCarbonCost(*rates, /*gpu_hours=*/64, /*gpu_energy_kwh=*/40.2, false);
//   // c.facility_kwh 48.24 (PUE 1.2), c.co2e_kg 18.3 (380 g/kWh), c.cost 165.79 (USD)
//   // c.basis "PUE 1.20; grid 380 gCO2e/kWh; USD 2.50/GPU-h + USD 0.120/kWh (site eos)"
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace goodput::core {

struct SiteRates {
  std::string cluster = "*";  // the cluster these rates are for; "*": every other cluster
  std::optional<double> pue = {};                 // facility energy / IT energy, >= 1
  std::optional<double> grid_gco2e_per_kwh = {};  // the grid's carbon intensity
  std::string currency = "USD";
  std::optional<double> price_per_gpu_hour = {};  // what a GPU-hour costs (amortised, or list)
  std::optional<double> price_per_kwh = {};       // what a facility kWh costs
};

// INVALID_ARGUMENT naming `where`'s field and value: a PUE below 1, a negative intensity or
// price, an empty cluster or currency.
absl::Status ValidateSiteRates(const SiteRates& rates, const std::string& where);

// The rates of `cluster`, else those of "*", else null.
const SiteRates* RatesFor(const std::vector<SiteRates>& sites, const std::string& cluster);

struct CarbonCost {
  std::optional<double> facility_kwh = {};  // GPU energy x PUE (unset without both)
  std::optional<double> co2e_kg = {};       // facility kWh (GPU kWh without a PUE) x intensity
  std::optional<double> cost = {};          // in `currency`; unset when no price applies
  std::string currency = {};
  std::string basis = {};  // the inputs used, in words; empty when nothing was computed
};

// `gpu_energy_kwh` unset: the job had no energy telemetry (then only the GPU-hour price
// applies). `energy_estimated`: part of it is board power x time, said in the basis.
CarbonCost ComputeCarbonCost(const SiteRates& rates, double gpu_hours,
                             std::optional<double> gpu_energy_kwh, bool energy_estimated);

}  // namespace goodput::core
