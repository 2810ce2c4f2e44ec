#include "services/ingest/validation.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace goodput::ingest {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr int64_t kNowMs = 1714564800000;  // 2024-05-01T12:00:00Z

ValidationOptions Options() {
  return ValidationOptions{.catalog = &core::GpuCatalog::BuiltIn(),
                           .now_unix_ms = kNowMs,
                           .max_future_skew_ms = 60'000,
                           .max_age_ms = 7LL * 86'400'000};
}

Sample GoodSample() {
  Sample s;
  s.gpu = {.host = "gpu-node-042", .gpu_index = 3};
  s.time_unix_ms = kNowMs - 1000;
  s.gpu_model = "NVIDIA H100 80GB HBM3";
  s.set(SampleField::kTensorActive, 0.42);
  s.set(SampleField::kSmClockMhz, 1755);
  return s;
}

TEST(ValidateSample, AcceptsAPlausibleH100Sample) {
  EXPECT_EQ(ValidateSample(GoodSample(), {"b-3", 0}, Options()), std::nullopt);
}

TEST(ValidateSample, RefusesTensorActiveAboveOneNamingSampleBatchFieldAndValue) {
  Sample s = GoodSample();
  s.set(SampleField::kTensorActive, 1.7);
  auto refusal = ValidateSample(s, {"b-3", 17}, Options());
  ASSERT_TRUE(refusal.has_value());
  EXPECT_EQ(refusal->message, "sample 17 of batch b-3: tensor_active=1.7 is outside [0, 1]");
  EXPECT_EQ(refusal->field, "tensor_active");
  EXPECT_EQ(refusal->value, "1.7");
  EXPECT_EQ(refusal->code, RefusalCode::kOutOfRange);
  EXPECT_EQ(refusal->index, 17);
  EXPECT_EQ(refusal->batch_id, "b-3");
}

TEST(ValidateSample, RefusesNaNAndInfinity) {
  Sample nan = GoodSample();
  nan.set(SampleField::kSmActive, std::numeric_limits<double>::quiet_NaN());
  auto r1 = ValidateSample(nan, {"b", 0}, Options());
  ASSERT_TRUE(r1.has_value());
  EXPECT_EQ(r1->code, RefusalCode::kNotFinite);
  EXPECT_THAT(r1->message, HasSubstr("sm_active=nan is NaN"));

  Sample inf = GoodSample();
  inf.set(SampleField::kPowerW, std::numeric_limits<double>::infinity());
  auto r2 = ValidateSample(inf, {"b", 1}, Options());
  ASSERT_TRUE(r2.has_value());
  EXPECT_EQ(r2->code, RefusalCode::kNotFinite);
  EXPECT_EQ(r2->field, "power_w");
}

TEST(ValidateSample, RefusesNegativeClock) {
  Sample s = GoodSample();
  s.set(SampleField::kSmClockMhz, -5);
  auto r = ValidateSample(s, {"b", 2}, Options());
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->message, "sample 2 of batch b: sm_clock_mhz=-5 is negative");
}

TEST(ValidateSample, RefusesAnSmClockFarAboveTheModelsBoostClock) {
  Sample s = GoodSample();
  s.set(SampleField::kSmClockMhz, 4000);
  auto r = ValidateSample(s, {"b", 0}, Options());
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->code, RefusalCode::kOutOfRange);
  EXPECT_THAT(r->message, HasSubstr("boost clock of 1980 MHz"));
}

TEST(ValidateSample, KeepsAnSmClockSlightlyAboveBoostForOfuToFlag) {
  Sample s = GoodSample();
  s.set(SampleField::kSmClockMhz, 2000);
  EXPECT_EQ(ValidateSample(s, {"b", 0}, Options()), std::nullopt);
}

TEST(ValidateSample, KeepsAGpuModelTheCatalogDoesNotKnow) {
  Sample s = GoodSample();
  s.gpu_model = "NVIDIA Quantum Abacus 9000";
  EXPECT_EQ(ValidateSample(s, {"b", 4}, Options()), std::nullopt);
}

TEST(ValidateSample, RefusesTextPostgresCannotStoreNamingTheFieldAndEscapingTheValue) {
  Sample nul_host = GoodSample();
  nul_host.gpu.host = std::string("n1\0x", 4);
  auto r = ValidateSample(nul_host, {"b", 1}, Options());
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->field, "gpu.host");
  EXPECT_EQ(r->value, "n1\\x00x");
  EXPECT_EQ(r->message, "sample 1 of batch b: gpu.host=n1\\x00x contains a NUL byte at byte 2");

  Sample long_uuid = GoodSample();
  long_uuid.gpu.uuid = std::string(5000, 'u');
  r = ValidateSample(long_uuid, {"b", 2}, Options());
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->field, "gpu.uuid");
  EXPECT_THAT(r->message, HasSubstr("is 5000 bytes; the limit is 128"));
  EXPECT_LT(r->message.size(), 300u);

  Sample bell_model = GoodSample();
  bell_model.gpu_model = "H100\a";
  r = ValidateSample(bell_model, {"b", 3}, Options());
  ASSERT_TRUE(r.has_value());
  EXPECT_THAT(r->message, HasSubstr("control character 0x07 at byte 4"));

  Sample bad_utf8_label = GoodSample();
  bad_utf8_label.labels["pod"] = "\xff\xfe";
  r = ValidateSample(bad_utf8_label, {"b", 4}, Options());
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->field, "labels.pod");
  EXPECT_THAT(r->message, HasSubstr("not valid UTF-8"));

  Sample tab_in_label = GoodSample();  // free text: only NUL is refused
  tab_in_label.labels["note"] = "a\tb";
  EXPECT_EQ(ValidateSample(tab_in_label, {"b", 5}, Options()), std::nullopt);
}

TEST(ValidateSample, RefusesAHostWithShellOrMarkupCharactersShowingItEscaped) {
  Sample s = GoodSample();
  s.gpu.host = "node$(reboot)";
  auto r = ValidateSample(s, {"b", 6}, Options());
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->field, "gpu.host");
  EXPECT_EQ(r->message,
            "sample 6 of batch b: gpu.host=node$(reboot) contains '$' at byte 4, not allowed in "
            "a host (letters, digits and . _ - : [ ] % only)");
  s.gpu.host = "-oProxyCommand=x";
  r = ValidateSample(s, {"b", 7}, Options());
  ASSERT_TRUE(r.has_value());
  EXPECT_THAT(r->message, HasSubstr("starts with '-'"));
}

TEST(ValidateSample, RefusesMoreLabelsOrLongerLabelsThanConfigured) {
  ValidationOptions options = Options();
  options.max_labels = 3;
  options.max_label_name_bytes = 8;
  options.max_label_value_bytes = 16;
  Sample s = GoodSample();
  s.labels = {{"a", "1"}, {"b", "2"}, {"c", "3"}};
  EXPECT_EQ(ValidateSample(s, {"b", 0}, options), std::nullopt);
  s.labels["d"] = "4";
  auto r = ValidateSample(s, {"b", 1}, options);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->field, "labels");
  EXPECT_EQ(r->message,
            "sample 1 of batch b: labels=4 labels are more than the 3 a sample may carry "
            "(ingest.max_labels_per_series)");

  Sample long_name = GoodSample();
  long_name.labels["namespace"] = "x";
  r = ValidateSample(long_name, {"b", 2}, options);
  ASSERT_TRUE(r.has_value());
  EXPECT_THAT(r->message, HasSubstr("is 9 bytes; the limit is 8 (ingest.limits.max_label_name_bytes)"));

  Sample long_value = GoodSample();
  long_value.labels["pod"] = std::string(17, 'p');
  r = ValidateSample(long_value, {"b", 3}, options);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->field, "labels.pod");
  EXPECT_THAT(r->message,
              HasSubstr("is 17 bytes; the limit is 16 (ingest.limits.max_label_value_bytes)"));

  // The configured limit never exceeds what PostgreSQL holds.
  options.max_label_value_bytes = 1 << 20;
  long_value.labels["pod"] = std::string(api::kMaxLabelValueBytes + 1, 'p');
  EXPECT_TRUE(ValidateSample(long_value, {"b", 4}, options).has_value());
}

TEST(ValidateBatch, KeepsTheGoodSamplesAndNamesEachBadOne) {
  std::vector<Sample> samples(4, GoodSample());
  for (int i = 0; i < 4; ++i) samples[i].gpu.gpu_index = i;
  samples[1].gpu.host = "<img src=x onerror=alert(1)>";
  samples[3].labels["job"] = std::string("a\0b", 3);
  BatchValidation v = ValidateBatch(samples, "b-9", Options());
  EXPECT_THAT(v.kept, ElementsAre(0, 2));
  ASSERT_EQ(v.refusals.size(), 2u);
  EXPECT_EQ(v.refusals[0].index, 1);
  EXPECT_EQ(v.refusals[0].field, "gpu.host");
  EXPECT_THAT(v.refusals[0].message, HasSubstr("contains '<' at byte 0"));
  EXPECT_EQ(v.refusals[1].field, "labels.job");
  EXPECT_EQ(v.refusals[1].value, "a\\x00b");
}

TEST(ValidateSample, RefusesValuesBeyondWhatARealColumnHolds) {
  for (double v : {1e39, -1e39, 1e300}) {
    Sample s = GoodSample();
    s.set(SampleField::kPowerW, v);
    auto r = ValidateSample(s, {"b", 0}, Options());
    ASSERT_TRUE(r.has_value()) << v;
    EXPECT_EQ(r->field, "power_w");
    EXPECT_EQ(r->code, RefusalCode::kOutOfRange);
  }
  Sample energy = GoodSample();  // double precision column: a large value fits
  energy.set(SampleField::kTotalEnergyMj, 1e39);
  EXPECT_EQ(ValidateSample(energy, {"b", 0}, Options()), std::nullopt);
  Sample tiny = GoodSample();  // stored as 0 by the float conversion, not refused
  tiny.set(SampleField::kTensorActive, 5e-324);
  EXPECT_EQ(ValidateSample(tiny, {"b", 0}, Options()), std::nullopt);
}

// The sentinels of DCGM's dcgm_structs.h, as dcgm-exporter prints them.
TEST(DropDcgmBlanks, RemovesEveryBlankKindAndKeepsRealValues) {
  Sample s = GoodSample();
  s.set(SampleField::kPowerW, 140737488355328.0);             // DCGM_FP64_BLANK
  s.set(SampleField::kDramActive, 140737488355331.0);         // DCGM_FP64_NOT_PERMISSIONED
  s.set(SampleField::kFbUsedMib, 9223372036854775792.0);      // DCGM_INT64_BLANK
  s.set(SampleField::kGpuTempC, 2147483632.0);                // DCGM_INT32_BLANK
  s.set(SampleField::kNvlinkTxBytesPerS, 9223372036854775792.0);
  s.set(SampleField::kTotalEnergyMj, 2147483633.0);           // a real reading of an int64 counter
  EXPECT_EQ(DropDcgmBlanks(s), 5);
  EXPECT_FALSE(s.get(SampleField::kPowerW).has_value());
  EXPECT_FALSE(s.get(SampleField::kDramActive).has_value());
  EXPECT_FALSE(s.get(SampleField::kFbUsedMib).has_value());
  EXPECT_FALSE(s.get(SampleField::kGpuTempC).has_value());
  EXPECT_FALSE(s.get(SampleField::kNvlinkTxBytesPerS).has_value());
  EXPECT_EQ(s.get(SampleField::kTotalEnergyMj), 2147483633.0);
  EXPECT_TRUE(s.get(SampleField::kTensorActive).has_value());
  EXPECT_FALSE(IsDcgmBlank(SampleField::kPowerW, 140737488355327.0));
  EXPECT_FALSE(IsDcgmBlank(SampleField::kPowerW, 140737488355344.0));
  EXPECT_FALSE(IsDcgmBlank(SampleField::kPowerW, 1e39));  // garbage, refused as out of range
  EXPECT_TRUE(IsDcgmBlank(SampleField::kPcieTxBytesPerS, 9223372036854775807.0));
  EXPECT_FALSE(IsDcgmBlank(SampleField::kSmClockMhz, 2147483631.0));
}

TEST(ValidateSample, AcceptsAnEmptyModelToBeTakenFromTheJob) {
  Sample s = GoodSample();
  s.gpu_model.clear();
  EXPECT_EQ(ValidateSample(s, {"b", 0}, Options()), std::nullopt);
}

TEST(ValidateSample, RefusesTimestampsBeyondTheAllowedSkewUsingTheInjectedClock) {
  Sample s = GoodSample();
  s.time_unix_ms = kNowMs + 3'600'000;
  auto r = ValidateSample(s, {"b", 0}, Options());
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->code, RefusalCode::kFutureTimestamp);
  EXPECT_THAT(r->message, HasSubstr("3600.0 s in the future"));

  s.time_unix_ms = kNowMs + 30'000;  // within 60 s of skew
  EXPECT_EQ(ValidateSample(s, {"b", 0}, Options()), std::nullopt);
}

TEST(ValidateSample, RefusesTimestampsOlderThanRetention) {
  Sample s = GoodSample();
  s.time_unix_ms = kNowMs - 8LL * 86'400'000;
  auto r = ValidateSample(s, {"b", 0}, Options());
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->code, RefusalCode::kTooOld);
}

TEST(ValidateSample, RefusesMissingGpuIdentity) {
  Sample no_host = GoodSample();
  no_host.gpu.host.clear();
  auto r1 = ValidateSample(no_host, {"b", 0}, Options());
  ASSERT_TRUE(r1.has_value());
  EXPECT_EQ(r1->code, RefusalCode::kMissingField);
  EXPECT_EQ(r1->field, "gpu.host");

  Sample no_device = GoodSample();
  no_device.gpu.gpu_index.reset();
  auto r2 = ValidateSample(no_device, {"b", 0}, Options());
  ASSERT_TRUE(r2.has_value());
  EXPECT_THAT(r2->message, HasSubstr("needs gpu_index or uuid"));

  Sample by_uuid = no_device;
  by_uuid.gpu.uuid = "GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52";
  EXPECT_EQ(ValidateSample(by_uuid, {"b", 0}, Options()), std::nullopt);
}

TEST(ValidateSample, RefusesASampleWithoutMeasurements) {
  Sample s = GoodSample();
  s.values = {};
  auto r = ValidateSample(s, {"b", 0}, Options());
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->code, RefusalCode::kMissingField);
}

TEST(ValidateBatch, KeepsGoodSamplesAndRefusesEachBadOneAndRepeats) {
  std::vector<Sample> samples(4, GoodSample());
  samples[1].set(SampleField::kTensorActive, 1.7);
  samples[2].time_unix_ms -= 1000;
  // samples[3] repeats samples[0]'s GPU and time.
  BatchValidation v = ValidateBatch(samples, "b-3", Options());
  EXPECT_THAT(v.kept, ElementsAre(0, 2));
  ASSERT_EQ(v.refusals.size(), 2u);
  EXPECT_EQ(v.refusals[0].index, 1);
  EXPECT_EQ(v.refusals[1].index, 3);
  EXPECT_EQ(v.refusals[1].code, RefusalCode::kDuplicate);
}

TEST(CheckFieldValue, UtilizationsAreFractionsAndRatesNonNegative) {
  const ValidationOptions options = Options();
  EXPECT_EQ(CheckFieldValue(SampleField::kGpuUtil, 1.0, nullptr, options), std::nullopt);
  EXPECT_TRUE(CheckFieldValue(SampleField::kGpuUtil, 87, nullptr, options).has_value());
  EXPECT_TRUE(CheckFieldValue(SampleField::kNvlinkTxBytesPerS, -1, nullptr, options));
  EXPECT_TRUE(CheckFieldValue(SampleField::kClockThrottleReasons, 1.5, nullptr, options));
  EXPECT_EQ(CheckFieldValue(SampleField::kClockThrottleReasons, 0x44, nullptr, options),
            std::nullopt);
}

}  // namespace
}  // namespace goodput::ingest
