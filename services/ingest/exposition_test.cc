#include "services/ingest/exposition.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "absl/strings/str_cat.h"

namespace goodput::ingest {
namespace {

using ::testing::HasSubstr;
using ::testing::Pair;
using ::testing::UnorderedElementsAre;

constexpr int64_t kScrapeMs = 1714564800000;

ExpositionOptions Options() {
  ExpositionOptions o;
  o.batch_id = "scrape-1";
  o.default_host = "endpoint-host";
  o.scrape_time_unix_ms = kScrapeMs;
  o.validation = {.catalog = &core::GpuCatalog::BuiltIn(), .now_unix_ms = kScrapeMs};
  return o;
}

// What dcgm-exporter 3.x serves for two H100s of a Slurm node with the HPC job mapping on,
// the driver version configured as a label-type field.
constexpr char kTwoH100s[] =
    R"(# HELP DCGM_FI_DEV_SM_CLOCK SM clock frequency (in MHz).
# TYPE DCGM_FI_DEV_SM_CLOCK gauge
DCGM_FI_DEV_SM_CLOCK{gpu="0",UUID="GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52",pci_bus_id="00000000:18:00.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-node-042",DCGM_FI_DRIVER_VERSION="535.129.03",hpc_job="4211873"} 1755
DCGM_FI_DEV_SM_CLOCK{gpu="1",UUID="GPU-1c3b6d0e-83a5-4d8e-a1a4-0d2b8e3e1f11",pci_bus_id="00000000:2A:00.0",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-node-042",DCGM_FI_DRIVER_VERSION="535.129.03",hpc_job="4211873"} 1410
# HELP DCGM_FI_DEV_MEM_CLOCK Memory clock frequency (in MHz).
# TYPE DCGM_FI_DEV_MEM_CLOCK gauge
DCGM_FI_DEV_MEM_CLOCK{gpu="0",UUID="GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52",pci_bus_id="00000000:18:00.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-node-042",DCGM_FI_DRIVER_VERSION="535.129.03",hpc_job="4211873"} 2619
# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).
# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52",pci_bus_id="00000000:18:00.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-node-042",DCGM_FI_DRIVER_VERSION="535.129.03",hpc_job="4211873"} 100
# HELP DCGM_FI_DEV_FB_USED Framebuffer memory used (in MiB).
# TYPE DCGM_FI_DEV_FB_USED gauge
DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52",pci_bus_id="00000000:18:00.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-node-042",DCGM_FI_DRIVER_VERSION="535.129.03",hpc_job="4211873"} 71234
# HELP DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION Total energy consumption since boot (in mJ).
# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter
DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu="0",UUID="GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52",pci_bus_id="00000000:18:00.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-node-042",DCGM_FI_DRIVER_VERSION="535.129.03",hpc_job="4211873"} 283915468133
# HELP DCGM_FI_PROF_PIPE_TENSOR_ACTIVE Ratio of cycles the tensor (HMMA) pipe is active.
# TYPE DCGM_FI_PROF_PIPE_TENSOR_ACTIVE gauge
DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{gpu="0",UUID="GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52",pci_bus_id="00000000:18:00.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-node-042",DCGM_FI_DRIVER_VERSION="535.129.03",hpc_job="4211873"} 0.412345
DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{gpu="1",UUID="GPU-1c3b6d0e-83a5-4d8e-a1a4-0d2b8e3e1f11",pci_bus_id="00000000:2A:00.0",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-node-042",DCGM_FI_DRIVER_VERSION="535.129.03",hpc_job="4211873"} 0.398
)";

TEST(ParseDcgmExposition, CombinesEachGpusLinesIntoOneSampleWithItsLabels) {
  ExpositionResult r = ParseDcgmExposition(kTwoH100s, Options());
  EXPECT_TRUE(r.refusals.empty()) << r.refusals[0].message;
  EXPECT_EQ(r.ignored_line_count, 1);  // DCGM_FI_DEV_MEM_CLOCK
  ASSERT_EQ(r.samples.size(), 2u);
  const Sample& gpu0 = r.samples[0].sample;
  EXPECT_EQ(gpu0.gpu.host, "gpu-node-042");
  EXPECT_EQ(gpu0.gpu.gpu_index, 0);
  EXPECT_EQ(gpu0.gpu.uuid, "GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52");
  EXPECT_EQ(gpu0.gpu_model, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(gpu0.time_unix_ms, kScrapeMs);
  EXPECT_DOUBLE_EQ(*gpu0.get(SampleField::kSmClockMhz), 1755);
  EXPECT_DOUBLE_EQ(*gpu0.get(SampleField::kTensorActive), 0.412345);
  EXPECT_DOUBLE_EQ(*gpu0.get(SampleField::kGpuUtil), 1.0);  // percent -> fraction
  EXPECT_DOUBLE_EQ(*gpu0.get(SampleField::kFbUsedMib), 71234);
  EXPECT_DOUBLE_EQ(*gpu0.get(SampleField::kTotalEnergyMj), 283915468133.0);
  EXPECT_EQ(gpu0.labels.at("hpc_job"), "4211873");
  EXPECT_EQ(gpu0.labels.at("DCGM_FI_DRIVER_VERSION"), "535.129.03");
  EXPECT_EQ(r.samples[0].line_count, 5);
  EXPECT_EQ(r.samples[0].first_line, 3);
  EXPECT_DOUBLE_EQ(*r.samples[1].sample.get(SampleField::kTensorActive), 0.398);
}

TEST(ParseDcgmExposition, RefusesMalformedLinesByNumberAndKeepsTheRest) {
  const std::string body = absl::StrCat(
      "# TYPE DCGM_FI_DEV_SM_CLOCK gauge\n",
      "DCGM_FI_DEV_SM_CLOCK{gpu=\"0\",Hostname=\"n1\"} 1500\n",
      "DCGM_FI_DEV_SM_CLOCK{gpu=\"1\",Hostname=\"n1\" 1500\n",             // line 3: no '}'
      "DCGM_FI_DEV_SM_CLOCK{gpu=\"2\",Hostname=\"n1\"} fast\n",            // line 4: value
      "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{gpu=\"3\",Hostname=\"n1\"} 1.7\n",  // line 5: range
      "DCGM_FI_DEV_SM_CLOCK{gpu=\"3\",Hostname=\"n1\"} 1400\n");
  ExpositionResult r = ParseDcgmExposition(body, Options());
  ASSERT_EQ(r.refusals.size(), 3u);
  EXPECT_EQ(r.refusals[0].line_number, 3);
  EXPECT_EQ(r.refusals[0].code, RefusalCode::kMalformed);
  EXPECT_THAT(r.refusals[0].message, HasSubstr("line 3 of batch scrape-1"));
  EXPECT_EQ(r.refusals[1].line_number, 4);
  EXPECT_THAT(r.refusals[1].message, HasSubstr("\"fast\" is not a number"));
  EXPECT_EQ(r.refusals[2].line_number, 5);
  EXPECT_EQ(r.refusals[2].message,
            "line 5 of batch scrape-1: DCGM_FI_PROF_PIPE_TENSOR_ACTIVE=1.7 is outside [0, 1]");
  EXPECT_EQ(r.refused_line_count, 3);
  ASSERT_EQ(r.samples.size(), 2u);  // GPU 0, and GPU 3 with its clock only
  EXPECT_FALSE(r.samples[1].sample.get(SampleField::kTensorActive).has_value());
}

TEST(ParseDcgmExposition, AcceptsLowercaseHostnameSpacesAfterCommasTimestampsAndEscapes) {
  const std::string body =
      "DCGM_FI_DEV_SM_CLOCK{gpu=\"0\", hostname=\"n7\", UUID=\"GPU-a\", "
      "err_msg=\"say \\\"hi\\\"\\nback\\\\slash\",} 1200 1714564790000\n";
  ExpositionResult r = ParseDcgmExposition(body, Options());
  ASSERT_TRUE(r.refusals.empty()) << r.refusals[0].message;
  ASSERT_EQ(r.samples.size(), 1u);
  EXPECT_EQ(r.samples[0].sample.gpu.host, "n7");
  EXPECT_EQ(r.samples[0].sample.time_unix_ms, 1714564790000);
  EXPECT_EQ(r.samples[0].sample.labels.at("err_msg"), "say \"hi\"\nback\\slash");
}

TEST(ParseDcgmExposition, SeparatesSamplesByTimestampAndMigSlice) {
  const std::string body =
      "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{gpu=\"0\",UUID=\"GPU-a\",Hostname=\"n\","
      "GPU_I_PROFILE=\"1g.10gb\",GPU_I_ID=\"7\"} 0.1 1714564700000\n"
      "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{gpu=\"0\",UUID=\"GPU-a\",Hostname=\"n\","
      "GPU_I_PROFILE=\"2g.20gb\",GPU_I_ID=\"3\"} 0.2 1714564700000\n"
      "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{gpu=\"0\",UUID=\"GPU-a\",Hostname=\"n\","
      "GPU_I_PROFILE=\"1g.10gb\",GPU_I_ID=\"7\"} 0.3 1714564710000\n";
  ExpositionResult r = ParseDcgmExposition(body, Options());
  ASSERT_EQ(r.samples.size(), 3u);
  ASSERT_TRUE(r.samples[0].sample.gpu.mig.has_value());
  EXPECT_EQ(r.samples[0].sample.gpu.mig->gpu_instance_id, 7);
  EXPECT_EQ(r.samples[0].sample.gpu.mig->profile, "1g.10gb");
  EXPECT_EQ(r.samples[1].sample.gpu.mig->gpu_instance_id, 3);
}

TEST(ParseDcgmExposition, KeepsKubernetesAndOsmoLabelsForAttribution) {
  const std::string body =
      "DCGM_FI_DEV_SM_CLOCK{gpu=\"2\",UUID=\"GPU-b\",Hostname=\"k8s-node-3\","
      "container=\"trainer\",namespace=\"research\",pod=\"wm-train-17-worker-0\","
      "osmo_workflow_id=\"wm-train-17\"} 1500\n";
  ExpositionResult r = ParseDcgmExposition(body, Options());
  ASSERT_EQ(r.samples.size(), 1u);
  EXPECT_THAT(r.samples[0].sample.labels,
              UnorderedElementsAre(Pair("container", "trainer"), Pair("namespace", "research"),
                                   Pair("pod", "wm-train-17-worker-0"),
                                   Pair("osmo_workflow_id", "wm-train-17")));
}

TEST(ParseDcgmExposition, UsesTheEndpointHostAndExtraLabelsWhenTheBodyHasNone) {
  ExpositionOptions options = Options();
  options.extra_labels = {{"rack", "r12"}, {"pod", "from-config"}};
  ExpositionResult r =
      ParseDcgmExposition("DCGM_FI_DEV_SM_CLOCK{gpu=\"0\",pod=\"from-body\"} 1500\n", options);
  ASSERT_EQ(r.samples.size(), 1u);
  EXPECT_EQ(r.samples[0].sample.gpu.host, "endpoint-host");
  EXPECT_EQ(r.samples[0].sample.labels.at("rack"), "r12");
  EXPECT_EQ(r.samples[0].sample.labels.at("pod"), "from-body");
}

TEST(ParseDcgmExposition, KeepsASampleOfAModelTheCatalogDoesNotKnow) {
  const std::string body =
      "DCGM_FI_DEV_SM_CLOCK{gpu=\"0\",Hostname=\"n\",modelName=\"Voodoo 5\"} 150\n"
      "DCGM_FI_DEV_GPU_TEMP{gpu=\"0\",Hostname=\"n\",modelName=\"Voodoo 5\"} 50\n";
  ExpositionResult r = ParseDcgmExposition(body, Options());
  ASSERT_EQ(r.samples.size(), 1u);
  EXPECT_EQ(r.samples[0].sample.gpu_model, "Voodoo 5");
  EXPECT_TRUE(r.refusals.empty());
}

TEST(ParseDcgmExposition, CountsDcgmBlanksAsMissingValuesAndKeepsTheRestOfTheSample) {
  const std::string labels = "{gpu=\"0\",Hostname=\"n\",modelName=\"NVIDIA H100 80GB HBM3\"}";
  const std::string body =
      absl::StrCat("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", labels, " 140737488355328.000000\n",
                   "DCGM_FI_DEV_GPU_UTIL", labels, " 2147483632\n",  // INT32 blank, before /100
                   "DCGM_FI_DEV_FB_USED", labels, " 9223372036854775792\n",
                   "DCGM_FI_DEV_POWER_USAGE", labels, " 69.437\n");
  ExpositionResult r = ParseDcgmExposition(body, Options());
  ASSERT_EQ(r.samples.size(), 1u);
  EXPECT_EQ(r.blank_value_count, 3);
  EXPECT_TRUE(r.refusals.empty());
  const Sample& s = r.samples[0].sample;
  EXPECT_EQ(s.get(SampleField::kPowerW), 69.437);
  EXPECT_FALSE(s.get(SampleField::kTensorActive).has_value());
  EXPECT_FALSE(s.get(SampleField::kGpuUtil).has_value());
  EXPECT_FALSE(s.get(SampleField::kFbUsedMib).has_value());
}

TEST(ParseDcgmExposition, RefusesFutureTimestampsAndLinesWithoutGpuIdentity) {
  const std::string body =
      "DCGM_FI_DEV_SM_CLOCK{gpu=\"0\",Hostname=\"n\"} 1500 1914564800000\n"
      "DCGM_FI_DEV_SM_CLOCK{Hostname=\"n\"} 1500\n";
  ExpositionResult r = ParseDcgmExposition(body, Options());
  EXPECT_TRUE(r.samples.empty());
  ASSERT_EQ(r.refusals.size(), 2u);
  EXPECT_EQ(r.refusals[0].code, RefusalCode::kMissingField);
  EXPECT_EQ(r.refusals[0].line_number, 2);
  EXPECT_EQ(r.refusals[1].code, RefusalCode::kFutureTimestamp);
  EXPECT_EQ(r.refusals[1].line_number, 1);
}

TEST(ParseDcgmExposition, RefusesInvalidUtf8LineByLine) {
  std::string body = "DCGM_FI_DEV_SM_CLOCK{gpu=\"0\",Hostname=\"n\xff\"} 1500\n";
  body += "DCGM_FI_DEV_SM_CLOCK{gpu=\"1\",Hostname=\"n\"} 1500\n";
  ExpositionResult r = ParseDcgmExposition(body, Options());
  ASSERT_EQ(r.refusals.size(), 1u);
  EXPECT_THAT(r.refusals[0].message, HasSubstr("UTF-8"));
  EXPECT_EQ(r.samples.size(), 1u);
}

TEST(ParsePromLine, ReadsSpecialValuesAndRejectsTrailingGarbage) {
  auto nan = ParsePromLine("m NaN");
  ASSERT_TRUE(nan.ok());
  EXPECT_TRUE(std::isnan(nan->value));
  auto inf = ParsePromLine("m{a=\"b\"} +Inf 12");
  ASSERT_TRUE(inf.ok());
  EXPECT_TRUE(std::isinf(inf->value));
  EXPECT_EQ(inf->timestamp_ms, 12);
  EXPECT_FALSE(ParsePromLine("m 1 2 3").ok());
  EXPECT_FALSE(ParsePromLine("m{a=\"b\",a=\"c\"} 1").ok());
  EXPECT_FALSE(ParsePromLine("m{a=\"\\q\"} 1").ok());
  EXPECT_FALSE(ParsePromLine("1m 1").ok());
}

// A clock line of GPU `gpu` on host n1 with `extra` more labels l0="v0", l1="v1", ...
std::string LineWithLabels(int gpu, int extra) {
  std::string line = absl::StrCat("DCGM_FI_DEV_SM_CLOCK{gpu=\"", gpu, "\",Hostname=\"n1\"");
  for (int i = 0; i < extra; ++i) absl::StrAppend(&line, ",l", i, "=\"v", i, "\"");
  absl::StrAppend(&line, "} 1500");
  return line;
}

TEST(ParsePromLine, ReadsALineOfAHundredThousandLabels) {
  absl::StatusOr<PromLine> parsed = ParsePromLine(LineWithLabels(0, 100'000));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_EQ(parsed->labels.size(), 100'002u);
  EXPECT_THAT(parsed->labels[2], Pair("l0", "v0"));
  EXPECT_THAT(parsed->labels[100'001], Pair("l99999", "v99999"));
  EXPECT_DOUBLE_EQ(parsed->value, 1500);
}

TEST(ParsePromLine, FindsALabelRepeatedAmongAHundredThousand) {
  std::string line = LineWithLabels(0, 100'000);
  line.insert(line.rfind('}'), ",l5=\"again\"");
  absl::StatusOr<PromLine> parsed = ParsePromLine(line);
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(parsed.status().message(), HasSubstr("label l5 appears twice"));
}

TEST(ParsePromLine, StopsAtTheLabelLimit) {
  EXPECT_TRUE(ParsePromLine(LineWithLabels(0, 126), 128).ok());
  absl::StatusOr<PromLine> parsed = ParsePromLine(LineWithLabels(0, 100'000), 128);
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(parsed.status().message(), "DCGM_FI_DEV_SM_CLOCK has more than 128 labels");
}

TEST(ParseDcgmExposition, RefusesALineWithTooManyLabelsAloneAndKeepsTheRest) {
  const std::string body = absl::StrCat(LineWithLabels(0, 3), "\n", LineWithLabels(1, 100'000),
                                        "\n", LineWithLabels(2, 3), "\n");
  ExpositionResult r = ParseDcgmExposition(body, Options());
  ASSERT_EQ(r.refusals.size(), 1u);
  EXPECT_EQ(r.refusals[0].line_number, 2);
  EXPECT_EQ(r.refusals[0].code, RefusalCode::kOutOfRange);
  EXPECT_EQ(r.refusals[0].message,
            "line 2 of batch scrape-1: DCGM_FI_DEV_SM_CLOCK has more than 128 labels, the most a "
            "series may have (ingest.max_labels_per_series)");
  EXPECT_EQ(r.refused_line_count, 1);
  ASSERT_EQ(r.samples.size(), 2u);
  EXPECT_EQ(r.samples[0].sample.gpu.gpu_index, 0);
  EXPECT_EQ(r.samples[1].sample.gpu.gpu_index, 2);

  // A higher limit takes the line with all its labels.
  ExpositionOptions options = Options();
  options.max_labels_per_series = 200'000;
  options.validation.max_labels = 200'000;  // the same key: ingest.max_labels_per_series
  r = ParseDcgmExposition(body, options);
  EXPECT_TRUE(r.refusals.empty());
  ASSERT_EQ(r.samples.size(), 3u);
  EXPECT_EQ(r.samples[1].sample.labels.size(), 100'000u);
  EXPECT_EQ(r.samples[1].sample.labels.at("l99999"), "v99999");
}

// Found by goodput_ingest_exposition_fuzzer: a parse error quoted the bad sample value raw, so
// a NUL or an escape sequence in it reached the refusal message (and the sender's terminal).
TEST(ParseDcgmExposition, RefusalMessagesShowBadBytesEscaped) {
  const std::string body = absl::StrCat(
      "DCGM_FI_DEV_SM_CLOCK{gpu=\"0\",Hostname=\"n1\"} 1", std::string("\0\x1b[2J", 5), "\n",
      "DCGM_FI_DEV_SM_CLOCK{gpu=\"1\",Hostname=\"n1\"} 1500 17\x07\n",
      "DCGM_FI_DEV_SM_CLOCK{gpu=\"2\",Hostname=\"n1\",x=\"\\\x01\"} 1500\n",
      "DCGM_FI_DEV_SM_CLOCK{gpu=\"3\",Hostname=\"n1\"} 1500\n");
  ExpositionResult r = ParseDcgmExposition(body, Options());
  ASSERT_EQ(r.refusals.size(), 3u);
  for (const Refusal& refusal : r.refusals) {
    for (unsigned char c : refusal.message) {
      EXPECT_GE(c, 0x20) << refusal.message;
    }
  }
  EXPECT_THAT(r.refusals[0].message, HasSubstr("sample value \"1\\x00\\x1b[2J\" is not a number"));
  EXPECT_THAT(r.refusals[1].message, HasSubstr("timestamp \"17\\x07\" is not an integer"));
  EXPECT_THAT(r.refusals[2].message, HasSubstr("invalid escape '\\\\x01'"));
  ASSERT_EQ(r.samples.size(), 1u);
  EXPECT_EQ(r.samples[0].sample.gpu.gpu_index, 3);
}

TEST(HostFromEndpoint, TakesTheHostOfAUrl) {
  EXPECT_EQ(HostFromEndpoint("http://gpu-node-042:9400/metrics"), "gpu-node-042");
  EXPECT_EQ(HostFromEndpoint("gpu-node-7:9400"), "gpu-node-7");
  EXPECT_EQ(HostFromEndpoint("http://[::1]:9400/metrics"), "::1");
}

TEST(ParseDcgmExposition, KeepsOneSeriesPerPodOfATimeSlicedGpu) {
  // One GPU shared by two pods: dcgm-exporter prints each line once per pod.
  const std::string labels =
      R"(gpu="0",UUID="GPU-1",modelName="NVIDIA H100 80GB HBM3",Hostname="n1",namespace="ml",)";
  ExpositionResult r = ParseDcgmExposition(
      absl::StrCat("DCGM_FI_DEV_SM_CLOCK{", labels, R"(pod="a"} 1755)", "\n",
                   "DCGM_FI_DEV_SM_CLOCK{", labels, R"(pod="b"} 1755)", "\n",
                   "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{", labels, R"(pod="a"} 0.5)", "\n",
                   "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{", labels, R"(pod="b"} 0.5)", "\n",
                   "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{", labels, R"(pod="b"} 0.6)", "\n"),
      Options());
  ASSERT_EQ(r.samples.size(), 2u);
  EXPECT_EQ(r.samples[0].sample.labels.at("pod"), "a");
  EXPECT_EQ(r.samples[1].sample.labels.at("pod"), "b");
  EXPECT_EQ(*r.samples[1].sample.get(SampleField::kTensorActive), 0.5);
  // Only the repeat within one pod's series is a duplicate.
  ASSERT_EQ(r.refusals.size(), 1u);
  EXPECT_EQ(r.refusals[0].code, RefusalCode::kDuplicate);

  std::vector<Sample> samples;
  for (ExpositionSample& s : r.samples) samples.push_back(std::move(s.sample));
  EXPECT_EQ(MarkSharedGpus(samples), 2);
  EXPECT_EQ(samples[0].labels.at(kSharedByLabel), "2");
  EXPECT_NE(SeriesKey(samples[0]), SeriesKey(samples[1]));
  EXPECT_EQ(GpuKey(samples[0].gpu), GpuKey(samples[1].gpu));
}

}  // namespace
}  // namespace goodput::ingest
