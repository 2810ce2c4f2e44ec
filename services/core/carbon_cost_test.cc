#include "services/core/carbon_cost.h"

#include <gtest/gtest.h>

#include <vector>

namespace goodput::core {
namespace {

TEST(CarbonCost, EveryFigureFromItsConfiguredInputsWithTheInputsInWords) {
  const SiteRates eos{.cluster = "eos",
                      .pue = 1.2,
                      .grid_gco2e_per_kwh = 380,
                      .currency = "USD",
                      .price_per_gpu_hour = 2.5,
                      .price_per_kwh = 0.12};
  const CarbonCost c = ComputeCarbonCost(eos, 64, 40.2, false);
  EXPECT_DOUBLE_EQ(*c.facility_kwh, 40.2 * 1.2);
  EXPECT_DOUBLE_EQ(*c.co2e_kg, 40.2 * 1.2 * 380 / 1000);
  EXPECT_DOUBLE_EQ(*c.cost, 64 * 2.5 + 40.2 * 1.2 * 0.12);
  EXPECT_EQ(c.currency, "USD");
  EXPECT_EQ(c.basis, "PUE 1.20; grid 380 gCO2e/kWh; USD 2.50/GPU-h + USD 0.120/kWh (site eos)");
  // Estimated energy is said so.
  EXPECT_EQ(ComputeCarbonCost(eos, 64, 40.2, true).basis,
            "PUE 1.20; grid 380 gCO2e/kWh; USD 2.50/GPU-h + USD 0.120/kWh; energy partly "
            "estimated (site eos)");
}

TEST(CarbonCost, NothingIsAssumedThatWasNotConfigured) {
  // No PUE: the GPUs' energy, said so.
  const SiteRates grid_only{.cluster = "*", .grid_gco2e_per_kwh = 50};
  CarbonCost c = ComputeCarbonCost(grid_only, 10, 8.0, false);
  EXPECT_FALSE(c.facility_kwh);
  EXPECT_DOUBLE_EQ(*c.co2e_kg, 0.4);
  EXPECT_FALSE(c.cost);
  EXPECT_EQ(c.basis, "the GPUs' energy only (no PUE); grid 50 gCO2e/kWh (site *)");
  // No energy telemetry: no emissions, but the GPU-hour price still applies.
  const SiteRates priced{.cluster = "*", .pue = 1.1, .grid_gco2e_per_kwh = 50,
                         .currency = "EUR", .price_per_gpu_hour = 2, .price_per_kwh = 0.2};
  c = ComputeCarbonCost(priced, 10, std::nullopt, false);
  EXPECT_FALSE(c.co2e_kg);
  EXPECT_FALSE(c.facility_kwh);
  EXPECT_DOUBLE_EQ(*c.cost, 20);
  EXPECT_EQ(c.basis, "EUR 2.00/GPU-h (site *)");
  // Nothing configured but the site: nothing at all.
  c = ComputeCarbonCost(SiteRates{}, 10, 8.0, false);
  EXPECT_FALSE(c.co2e_kg || c.cost || c.facility_kwh);
  EXPECT_EQ(c.basis, "");
}

TEST(CarbonCost, AClustersOwnRatesBeforeTheCatchAllAndBadRatesNamed) {
  const std::vector<SiteRates> sites = {{.cluster = "*", .pue = 1.5},
                                        {.cluster = "eos", .pue = 1.1}};
  EXPECT_EQ(RatesFor(sites, "eos")->pue, 1.1);
  EXPECT_EQ(RatesFor(sites, "other")->pue, 1.5);
  EXPECT_EQ(RatesFor({{.cluster = "eos"}}, "other"), nullptr);
  EXPECT_TRUE(ValidateSiteRates(sites[1], "alerting.reports.sites[1]").ok());
  EXPECT_EQ(ValidateSiteRates({.pue = 0.9}, "alerting.reports.sites[0]").message(),
            "alerting.reports.sites[0].pue: 0.9 is outside [1, 5] (facility energy / IT energy)");
  EXPECT_EQ(ValidateSiteRates({.price_per_kwh = -1}, "s").message(),
            "s.price_per_kwh: -1 must not be negative");
  EXPECT_EQ(ValidateSiteRates({.cluster = ""}, "s").message(),
            "s.cluster: must not be empty (\"*\" for every cluster)");
}

}  // namespace
}  // namespace goodput::core
