#include "services/core/gpu_catalog.h"

#include <cctype>
#include <cmath>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace goodput::core {
namespace {

constexpr int Index(Precision p) { return static_cast<int>(p); }

struct Rate {
  Precision precision;
  double flops_per_cycle_per_sm;
};

GpuSpec MakeSpec(std::string name, std::vector<std::string> model_names, int sm_count,
                 std::vector<Rate> rates, double tensor_max_clock_mhz, double sm_boost_clock_mhz,
                 double hbm_capacity_gib, double hbm_bandwidth_gb_per_s,
                 std::optional<double> board_power_w, std::string note) {
  GpuSpec spec;
  spec.name = std::move(name);
  spec.model_names = std::move(model_names);
  spec.sm_count = sm_count;
  for (const Rate& r : rates) {
    spec.dense_flops_per_cycle_per_sm[Index(r.precision)] = r.flops_per_cycle_per_sm;
  }
  spec.tensor_max_clock_mhz = tensor_max_clock_mhz;
  spec.sm_boost_clock_mhz = sm_boost_clock_mhz;
  spec.hbm_capacity_gib = hbm_capacity_gib;
  spec.hbm_bandwidth_gb_per_s = hbm_bandwidth_gb_per_s;
  spec.board_power_w = board_power_w;
  spec.source_note = std::move(note);
  return spec;
}

// Per-SM dense rates by architecture. FLOPs count a fused multiply-add as 2.
// Hopper (4th-gen tensor core): 1024 FP16 FMA/clk/SM.
std::vector<Rate> HopperRates(bool with_fp64) {
  std::vector<Rate> rates = {{Precision::kTf32, 2048},
                             {Precision::kFp16, 4096},
                             {Precision::kBf16, 4096},
                             {Precision::kFp8, 8192},
                             {Precision::kInt8, 8192}};
  // FP64 tensor: 128 FMA/clk/SM at the SM boost clock (H100 SXM: 132 x 256 x 1980 = 66.9 TF).
  if (with_fp64) rates.push_back({Precision::kFp64, 256});
  return rates;
}
// Ampere GA100 (3rd-gen tensor core): 512 FP16 FMA/clk/SM; no FP8.
std::vector<Rate> AmpereA100Rates() {
  return {{Precision::kFp64, 128},
          {Precision::kTf32, 1024},
          {Precision::kFp16, 2048},
          {Precision::kBf16, 2048},
          {Precision::kInt8, 4096}};
}
// Blackwell (5th-gen tensor core): 2x Hopper per SM; FP8 2x, NVFP4 4x FP16.
std::vector<Rate> BlackwellRates() {
  return {{Precision::kTf32, 4096}, {Precision::kFp16, 8192}, {Precision::kBf16, 8192},
          {Precision::kFp8, 16384}, {Precision::kFp4, 32768}, {Precision::kInt8, 16384}};
}
// Ada AD10x professional parts (FP16 with FP32 accumulate at full rate); no FP64 tensor path.
std::vector<Rate> AdaRates() {
  return {{Precision::kTf32, 512},
          {Precision::kFp16, 1024},
          {Precision::kBf16, 1024},
          {Precision::kFp8, 2048},
          {Precision::kInt8, 2048}};
}
// Multiplies every rate by `factor` (a part that runs a family's tensor path at a fraction of
// its per-SM rate).
std::vector<Rate> Scaled(std::vector<Rate> rates, double factor) {
  for (Rate& r : rates) r.flops_per_cycle_per_sm *= factor;
  return rates;
}
// Volta (1st-gen tensor core): 8 tensor cores/SM x 64 FP16 FMA/clk = 1024 FLOPs/clk/SM, FP16
// inputs only (no BF16, TF32 or INT8 tensor path; FP64 runs on the CUDA cores, not catalogued).
std::vector<Rate> VoltaRates() { return {{Precision::kFp16, 1024}}; }
// Turing (2nd gen): FP16 as Volta, INT8 2x; no BF16 or TF32.
std::vector<Rate> TuringRates() { return {{Precision::kFp16, 1024}, {Precision::kInt8, 2048}}; }
// Ampere GA102 datacenter parts (A10, A40): half of GA100's per-SM tensor rate; no FP64 tensor.
std::vector<Rate> AmpereGa102Rates() {
  return {{Precision::kTf32, 512},
          {Precision::kFp16, 1024},
          {Precision::kBf16, 1024},
          {Precision::kInt8, 2048}};
}
// Blackwell Ultra (B300, GB300): Blackwell's per-SM rates with NVFP4 at 6x FP16 instead of 4x;
// INT8 and FP64 are cut to a small fraction and not catalogued.
std::vector<Rate> BlackwellUltraRates() {
  return {{Precision::kTf32, 4096},
          {Precision::kFp16, 8192},
          {Precision::kBf16, 8192},
          {Precision::kFp8, 16384},
          {Precision::kFp4, 49152}};
}
// Blackwell GB202 professional parts (RTX PRO 6000): Ada's per-SM rates plus FP4 at 2x FP8.
std::vector<Rate> BlackwellRtxProRates() {
  std::vector<Rate> rates = AdaRates();
  rates.push_back({Precision::kFp4, 4096});
  return rates;
}

GpuCatalog MakeBuiltIn() {
  std::vector<GpuSpec> specs = {
      // DCGM_FI_DEV_MAX_SM_CLOCK reports 1980 here; the tensor formats peak at 1830 MHz
      // (domain eq. 6: 132 x 4096 x 1830 MHz = 989.4 TFLOP/s).
      MakeSpec("H100 SXM",
               {"NVIDIA H100 80GB HBM3", "H100 SXM5", "H100-SXM5-80GB", "NVIDIA H100 SXM5 80GB"},
               132, HopperRates(true), 1830, 1980, 80, 3350, 700,
               "NVIDIA H100 Tensor Core GPU datasheet and Hopper whitepaper: 132 SMs, dense "
               "BF16 989.4 TFLOP/s at 1830 MHz tensor clock, SM boost 1980 MHz; HBM3 3.35 TB/s"
               "; board power 700 W (datasheet: max TDP up to 700 W, configurable)"),
      MakeSpec("H100 PCIe", {"NVIDIA H100 PCIe", "H100-PCIE-80GB"}, 114, HopperRates(true), 1620,
               1755, 80, 2000, 350,
               "H100 datasheet (PCIe): 114 SMs, dense BF16 756 TFLOP/s = 114 x 4096 x 1620 MHz, "
               "FP8 1513, TF32 378; SM boost 1755 MHz; HBM2e 2.0 TB/s"
               "; board power 350 W (H100 PCIe product brief PB-11133: max TDP 350 W)"),
      // Tensor clock derived from the datasheet's sparse BF16 1,671 TFLOP/s / 2 / (132 x 4096).
      MakeSpec("H100 NVL", {"NVIDIA H100 NVL"}, 132, HopperRates(true), 1545, 1785, 94, 3900, 400,
               "H100 NVL datasheet: BF16 1,671 TFLOP/s sparse (835.5 dense) -> tensor clock "
               "1545 MHz derived; SM boost 1785 MHz; 94 GB HBM3, 3.9 TB/s"
               "; board power 400 W (datasheet: max TDP 350-400 W, configurable)"),
      // H800 SXM: the H100 SXM die with reduced NVLink and FP64 cut to ~1 TFLOP/s; the FP64
      // rate is therefore not catalogued.
      MakeSpec("H800 SXM", {"NVIDIA H800", "NVIDIA H800 80GB HBM3", "H800"}, 132,
               HopperRates(false), 1830, 1980, 80, 3350, std::nullopt,
               "H800 SXM5 = H100 SXM compute for tensor formats (domain: 989.4 TFLOP/s BF16); "
               "FP64 restricted, omitted"
               "; board power not set: no NVIDIA datasheet figure found"),
      MakeSpec("H800 PCIe", {"NVIDIA H800 PCIe"}, 114, HopperRates(false), 1620, 1755, 80, 2000,
               std::nullopt,
               "domain table: H800 PCIe = H100 PCIe (114 SMs, 1620 MHz, 756.5 TFLOP/s BF16); "
               "FP64 restricted, omitted"
               "; board power not set: no NVIDIA datasheet figure found"),
      MakeSpec("H200", {"NVIDIA H200", "NVIDIA H200 141GB HBM3e", "H200 SXM"}, 132,
               HopperRates(true), 1830, 1980, 141, 4800, 700,
               "H200 datasheet: H100 SXM compute (989.4 TFLOP/s BF16 dense), 141 GB HBM3e, "
               "4.8 TB/s"
               "; board power 700 W (datasheet: max TDP up to 700 W, configurable)"),
      MakeSpec("GH200", {"NVIDIA GH200 480GB", "GH200 480GB"}, 132, HopperRates(true), 1830, 1980,
               96, 4000, std::nullopt,
               "GH200 Grace Hopper datasheet: H100 SXM compute per domain table, 96 GB HBM3 at "
               "4.0 TB/s (480 GB is the Grace LPDDR5X)"
               "; board power not set: the datasheet's 450-1000 W module power covers CPU, GPU and "
               "memory together"),
      MakeSpec("GH200 144GB", {"NVIDIA GH200 144G HBM3e", "GH200 144G HBM3e"}, 132,
               HopperRates(true), 1830, 1980, 144, 4900, std::nullopt,
               "GH200 HBM3e variant: H100 SXM compute, 144 GB HBM3e at 4.9 TB/s"
               "; board power not set: the datasheet's module power covers CPU, GPU and memory "
               "together"),
      MakeSpec("A100 SXM 40GB", {"NVIDIA A100-SXM4-40GB", "A100-SXM4-40GB"}, 108, AmpereA100Rates(),
               1410, 1410, 40, 1555, 400,
               "A100 datasheet/Ampere whitepaper: 108 SMs at 1410 MHz boost (one clock for "
               "tensor and SM), BF16 312, TF32 156, INT8 624 TOPS dense, FP64 tensor 19.5; "
               "HBM2 1555 GB/s"
               "; board power 400 W (datasheet: max TDP 400 W)"),
      MakeSpec("A100 SXM 80GB", {"NVIDIA A100-SXM4-80GB", "A100-SXM4-80GB"}, 108, AmpereA100Rates(),
               1410, 1410, 80, 2039, 400,
               "A100 80GB SXM datasheet: as A100 40GB; HBM2e 2039 GB/s"
               "; board power 400 W (datasheet: max TDP 400 W)"),
      MakeSpec("A100 PCIe 40GB", {"NVIDIA A100-PCIE-40GB", "A100-PCIE-40GB"}, 108,
               AmpereA100Rates(), 1410, 1410, 40, 1555, 250,
               "A100 PCIe datasheet: 108 SMs at 1410 MHz, BF16 312 TFLOP/s dense; HBM2 1555 "
               "GB/s"
               "; board power 250 W (datasheet: max TDP 250 W)"),
      MakeSpec("A100 PCIe 80GB", {"NVIDIA A100 80GB PCIe", "A100 80GB PCIe"}, 108,
               AmpereA100Rates(), 1410, 1410, 80, 1935, 300,
               "A100 80GB PCIe datasheet: 108 SMs at 1410 MHz, BF16 312 TFLOP/s dense; HBM2e "
               "1935 GB/s"
               "; board power 300 W (datasheet: max TDP 300 W)"),
      // No separate tensor clock is published for GB200: the 2062 MHz SM boost is f_max.
      MakeSpec("GB200", {"NVIDIA GB200", "GB200 NVL72"}, 148, BlackwellRates(), 2062, 2062, 186,
               8000, std::nullopt,
               "GB200 NVL72 per GPU (domain eq. 7): 148 SMs x 8192 x 2062 MHz = 2500.0 TFLOP/s "
               "BF16 dense, FP8 2x, NVFP4 4x; 186 GB HBM3e, 8 TB/s. FP64 omitted: its "
               "published 45 TFLOP/s does not follow from these SM and clock figures"
               "; board power not set: the NVL72 datasheet gives no per-GPU figure"),
      // Tensor clock derived from the HGX B200 datasheet: 2.25 PFLOP/s BF16 dense.
      MakeSpec("B200", {"NVIDIA B200", "B200 SXM"}, 148, BlackwellRates(), 1856, 1965, 180, 8000,
               1000,
               "HGX B200 datasheet per GPU: BF16 2.25, FP8 4.5, FP4 9 PFLOP/s dense -> tensor "
               "clock 2.25e15 / (148 x 8192) = 1856 MHz derived; SM boost 1965 MHz; 180 GB "
               "HBM3e, 8 TB/s. FP64 omitted (as GB200)"
               "; board power 1000 W (HGX B200 datasheet: figures at up to 1,000 W per GPU)"),
      // The datasheet's 362.05 TFLOP/s dense BF16 is half its 733 sparse figure rounded at a
      // lower clock; 142 x 1024 x 2520 MHz = 366.4 is consistent with the sparse and FP8 rows.
      MakeSpec("L40S", {"NVIDIA L40S"}, 142, AdaRates(), 2520, 2520, 48, 864, 350,
               "L40S datasheet: 142 SMs, boost 2520 MHz, FP8 733 / BF16 366 TFLOP/s dense "
               "(sparse 1466 / 733), TF32 183; 48 GB GDDR6, 864 GB/s; no FP64 tensor path"
               "; board power 350 W (datasheet: max power consumption 350 W)"),
      MakeSpec("L4", {"NVIDIA L4"}, 58, AdaRates(), 2040, 2040, 24, 300, 72,
               "L4 datasheet: 58 SMs, boost 2040 MHz, BF16 121, FP8 242.5 TFLOP/s dense, "
               "TF32 60; 24 GB GDDR6, 300 GB/s; no FP64 tensor path"
               "; board power 72 W (datasheet: max thermal design power 72 W)"),

      // Volta. Its tensor cores run at the SM clock, so f_max is the boost clock. The datasheet
      // prints rounded-down tensor peaks (SXM2 125, PCIe 112 = 8x its rounded FP32 14, V100S
      // 130); the exact products at the boost clocks are 0.3-0.9% higher. A clock derived from the
      // printed figure (e.g. 1367 MHz on PCIe) would sit below
      // the clock the GPU reports at full boost and push OFU above tensor activity, so the boost
      // clock is kept. modelName strings: "Tesla V100-SXM2-32GB" in dcgm-exporter output quoted in
      // NVIDIA/dcgm-exporter#250 (tests/data/dcgm/v100_dcgm_exporter.prom),
      // "Tesla V100-SXM2-16GB" as a dcgm-exporter label in public exposition samples;
      // "Tesla V100-PCIE-16GB" in nvidia-smi and TensorFlow device logs (coreClock 1.38GHz,
      // coreCount 80); "Tesla V100-PCIE-32GB" in `nvidia-smi -q` output; "Tesla V100S-PCIE-32GB"
      // in TensorFlow device listings.
      MakeSpec("V100 SXM2 16GB", {"Tesla V100-SXM2-16GB"}, 80, VoltaRates(), 1530, 1530, 16, 900,
               300,
               "V100 datasheet and Volta whitepaper: 80 SMs, 640 tensor cores (8/SM x 64 FP16 "
               "FMA/clk = 1024 FLOPs/clk/SM), boost 1530 MHz -> FP16 tensor 125.3 TFLOP/s "
               "(printed 125); FP16 inputs only, no BF16; 16 GB HBM2, 900 GB/s"
               "; board power 300 W (datasheet: max power consumption 300 W)"),
      MakeSpec("V100 SXM2 32GB", {"Tesla V100-SXM2-32GB"}, 80, VoltaRates(), 1530, 1530, 32, 900,
               300,
               "V100 datasheet: as V100 SXM2 16GB with 32 GB HBM2, 900 GB/s; FP16 tensor "
               "125.3 TFLOP/s at 1530 MHz (printed 125)"
               "; board power 300 W (datasheet: max power consumption 300 W)"),
      MakeSpec("V100 PCIe 16GB", {"Tesla V100-PCIE-16GB"}, 80, VoltaRates(), 1380, 1380, 16, 900,
               250,
               "V100 datasheet (PCIe): 80 SMs, boost 1380 MHz -> FP16 tensor 80 x 1024 x 1380 "
               "MHz = 113.0 TFLOP/s; the datasheet prints 112 (8x its rounded FP32 14); 16 GB "
               "HBM2, 900 GB/s"
               "; board power 250 W (datasheet: max power consumption 250 W)"),
      MakeSpec("V100 PCIe 32GB", {"Tesla V100-PCIE-32GB"}, 80, VoltaRates(), 1380, 1380, 32, 900,
               250,
               "V100 datasheet (PCIe): as V100 PCIe 16GB with 32 GB HBM2; FP16 tensor 113.0 "
               "TFLOP/s at 1380 MHz (printed 112)"
               "; board power 250 W (datasheet: max power consumption 250 W)"),
      MakeSpec("V100S PCIe", {"Tesla V100S-PCIE-32GB"}, 80, VoltaRates(), 1597, 1597, 32, 1134, 250,
               "V100S datasheet: 80 SMs, boost 1597 MHz -> FP16 tensor 130.8 TFLOP/s (printed "
               "130); 32 GB HBM2, 1134 GB/s"
               "; board power 250 W (datasheet: max power consumption 250 W)"),
      // "Tesla T4" is the device name JAX/XLA match T4 hosts by.
      MakeSpec("T4", {"Tesla T4"}, 40, TuringRates(), 1590, 1590, 16, 320, 70,
               "T4 datasheet: 40 SMs (320 tensor cores), boost 1590 MHz, mixed-precision "
               "FP16/FP32 65 TFLOP/s (exact 65.1), INT8 130 TOPS; no BF16/TF32; 16 GB GDDR6, "
               "320 GB/s"
               "; board power 70 W (datasheet: max power consumption 70 W)"),
      // Ampere GA100 at A100's per-SM rates. "NVIDIA A30": dcgm-exporter modelName in public
      // KEDA/Prometheus queries (DCGM_FI_PROF_GR_ENGINE_ACTIVE{modelName="NVIDIA A30"}).
      MakeSpec("A30", {"NVIDIA A30"}, 56, AmpereA100Rates(), 1440, 1440, 24, 933, 165,
               "A30 datasheet: 56 SMs at 1440 MHz boost (one clock for tensor and SM), BF16 "
               "165 TFLOP/s dense (exact 165.2), TF32 82 (exact 82.6), FP64 tensor 10.3, INT8 "
               "330 TOPS; 24 GB HBM2, 933 GB/s"
               "; board power 165 W (datasheet: max thermal design power 165 W)"),
      // Ampere GA102: half of GA100's per-SM tensor rate. "NVIDIA A10" and "NVIDIA A40" as
      // nvidia-smi prints them (A40 in public nvidia-smi captures, A10 in JAX's device table).
      MakeSpec("A10", {"NVIDIA A10"}, 72, AmpereGa102Rates(), 1695, 1695, 24, 600, 150,
               "A10 datasheet: 72 SMs, boost 1695 MHz, BF16/FP16 125 TFLOP/s dense (exact "
               "124.97), TF32 62.5, INT8 250 TOPS; no FP64 tensor path; 24 GB GDDR6, 600 GB/s"
               "; board power 150 W (datasheet: max thermal design power 150 W)"),
      MakeSpec("A40", {"NVIDIA A40"}, 84, AmpereGa102Rates(), 1740, 1740, 48, 696, 300,
               "A40 datasheet: 84 SMs, boost 1740 MHz, BF16/FP16 149.7 TFLOP/s dense, TF32 "
               "74.8, INT8 299.3 TOPS; no FP64 tensor path; 48 GB GDDR6, 696 GB/s"
               "; board power 300 W (datasheet: max power consumption 300 W)"),
      // Ada AD102 at half the L40S/RTX 6000 Ada per-SM rate for FP32-accumulate formats: the
      // L40 datasheet lists BF16 181.05 and FP8 362 dense where the L40S lists 362 and 733.
      // "NVIDIA L40" as JAX's device table spells it.
      MakeSpec("L40", {"NVIDIA L40"}, 142, Scaled(AdaRates(), 0.5), 2490, 2490, 48, 864, 300,
               "L40 datasheet: 142 SMs, boost 2490 MHz, BF16/FP16 (FP32 accumulate) 181.05, FP8 "
               "362, TF32 90.5 TFLOP/s dense, INT8 362 TOPS; no FP64 tensor path; 48 GB GDDR6, "
               "864 GB/s"
               "; board power 300 W (datasheet: max power consumption 300 W)"),
      // "NVIDIA RTX 6000 Ada Generation": cudaGetDeviceProperties name in public device dumps
      // (142 multiprocessors).
      MakeSpec("RTX 6000 Ada", {"NVIDIA RTX 6000 Ada Generation"}, 142, AdaRates(), 2505, 2505, 48,
               960, 300,
               "RTX 6000 Ada datasheet: 142 SMs, boost 2505 MHz, tensor performance 1457 TFLOP/s "
               "(FP8 sparse) -> FP8 728.5 dense, BF16 half of that (364.2) as on L40S; 48 GB "
               "GDDR6, 960 GB/s; no FP64 tensor path"
               "; board power 300 W (datasheet: max power consumption 300 W)"),
      // GH100 cut for export: 78 SMs (a Geekbench device report), dense BF16 148, FP8 296, TF32
      // 74 TFLOP/s.
      // NVIDIA publishes no per-SM rate or tensor clock for it. The tensor path is taken as a
      // quarter of H100's per SM, which puts the derived tensor clock at 148e12 / (78 x 1024) =
      // 1853 MHz, within the GH100 clock range; H100's full per-SM rate would need 463 MHz,
      // which no GH100 part runs at. The SM boost clock is assumed equal to H100 SXM's. Confirm
      // both with tools/calibration on an H20 before trusting H20 OFU to a few percent.
      // "NVIDIA H20": dcgm-exporter modelName in a public exposition fixture.
      MakeSpec(
          "H20", {"NVIDIA H20"}, 78, Scaled(HopperRates(false), 0.25), 1853, 1980, 96, 4000,
          std::nullopt,
          "H20 (GH100, 78 SMs): BF16 148, FP8 296, TF32 74 TFLOP/s dense, INT8 296 TOPS, "
          "FP64 1 TFLOP/s (not catalogued); per-SM tensor rate taken as 1/4 of H100 -> "
          "tensor clock 1853 MHz derived; SM boost 1980 MHz assumed; 96 GB HBM3, 4.0 TB/s"
          "; board power not set: the 400 W in press reports has no NVIDIA datasheet behind it"),
      // Tensor clock derived as for H100 NVL: the datasheet's sparse BF16 1,671 TFLOP/s / 2 /
      // (132 x 4096). "NVIDIA H200 NVL" in public nvidia-smi/PyTorch logs, reported with 132 SMs
      // and a 1785 MHz max SM clock.
      MakeSpec("H200 NVL", {"NVIDIA H200 NVL"}, 132, HopperRates(true), 1545, 1785, 141, 4800, 600,
               "H200 NVL datasheet: BF16 1,671 TFLOP/s sparse (835.5 dense) -> tensor clock "
               "1545 MHz derived; SM boost 1785 MHz; FP64 tensor 60 TFLOP/s; 141 GB HBM3e, "
               "4.8 TB/s"
               "; board power 600 W (datasheet: max TDP up to 600 W, configurable)"),
      // Blackwell Ultra. B300 devices report 148 SMs (cudaGetDeviceProperties in public
      // benchmark reports) and a 2032 MHz default boost; the full die has 160 (Blackwell Ultra
      // architecture blog). Tensor clock derived from the HGX B300 datasheet: BF16 36 PFLOP/s
      // sparse per 8 GPUs = 2.25 PFLOP/s dense per GPU (as in NVIDIA/cosmos-framework#114) ->
      // 2.25e15 / (148 x 8192) = 1856 MHz, B200's figure. Dense FP4 follows the Blackwell Ultra
      // per-SM rate (6x BF16, which reproduces GB300's 15 PFLOP/s); secondary sources quote the
      // HGX B300 dense FP4 as 105 PFLOP/s per 8 GPUs (13.1 per GPU), 2.9% below 148 x 49152 x
      // 1856 MHz. modelName "NVIDIA B300 SXM6 AC": torch.cuda.get_device_name() on HGX B300
      // (NVIDIA/cosmos-framework#114, kokkos/kokkos#8791).
      MakeSpec("B300", {"NVIDIA B300 SXM6 AC"}, 148, BlackwellUltraRates(), 1856, 2032, 288, 8000,
               std::nullopt,
               "HGX B300 datasheet per GPU: BF16 2.25, FP8 4.5 PFLOP/s dense -> tensor clock "
               "2.25e15 / (148 x 8192) = 1856 MHz derived; 148 SMs as devices report them; SM "
               "boost 2032 MHz; FP4 at the Blackwell Ultra rate 6x BF16 (13.5); 288 GB HBM3e, "
               "8 TB/s. INT8 and FP64 cut, omitted"
               "; board power not set: the HGX B300 datasheet gives no per-GPU figure"),
      // GB300 devices report 152 SMs and a 2070 MHz clock (OpenXLA's GB300 device description,
      // xla/backends/gpu/target_config/specs/gb300.txtpb, name "NVIDIA GB300").
      MakeSpec("GB300", {"NVIDIA GB300"}, 152, BlackwellUltraRates(), 2008, 2070, 288, 8000,
               std::nullopt,
               "GB300 NVL72 datasheet per GPU (/72): BF16 2.5, FP8 5, NVFP4 15 PFLOP/s dense -> "
               "tensor clock 2.5e15 / (152 x 8192) = 2008 MHz derived; 152 SMs and 2070 MHz SM "
               "boost as devices report them; 288 GB HBM3e, 8 TB/s. INT8 and FP64 cut, omitted"
               "; board power not set: the GB300 NVL72 datasheet gives no per-GPU figure"),
      // GB202 with 188 SMs. NVIDIA publishes one tensor figure for the RTX PRO 6000 family,
      // 4,000 AI TOPS (FP4 with sparsity) -> 2,000 TFLOP/s dense FP4 -> tensor clock
      // 2e15 / (188 x 4096) = 2597 MHz; the per-SM rates are Ada's (FP32 accumulate at full rate,
      // as on professional parts) with FP4 at 2x FP8.
      // nvidia-smi on the Workstation Edition reports a 3090 MHz max SM clock, above the boost
      // clock, so the sm_clock_above_boost flag can fire on this family. modelName: the device
      // name in public benchmark reports (antirez/ds4#256).
      MakeSpec("RTX PRO 6000 Blackwell Server", {"NVIDIA RTX PRO 6000 Blackwell Server Edition"},
               188, BlackwellRtxProRates(), 2597, 2617, 96, 1600, 600,
               "RTX PRO 6000 Blackwell datasheet: 188 SMs (752 tensor cores), 4000 AI TOPS FP4 "
               "sparse -> FP4 2000, FP8 1000, BF16 500 TFLOP/s dense at a derived 2597 MHz tensor "
               "clock; boost 2617 MHz; Server Edition 96 GB GDDR7, 1.6 TB/s"
               "; board power 600 W (datasheet: max power consumption up to 600 W, configurable)"),
  };
  GpuCatalog catalog;
  for (GpuSpec& spec : specs) {
    absl::Status status = catalog.Upsert(std::move(spec));
    // The built-in table is checked by the unit tests; a bad entry is a programming error.
    if (!status.ok()) std::abort();
  }
  return catalog;
}

}  // namespace

absl::string_view PrecisionName(Precision precision) {
  switch (precision) {
    case Precision::kFp64:
      return "fp64";
    case Precision::kTf32:
      return "tf32";
    case Precision::kFp16:
      return "fp16";
    case Precision::kBf16:
      return "bf16";
    case Precision::kFp8:
      return "fp8";
    case Precision::kFp4:
      return "fp4";
    case Precision::kInt8:
      return "int8";
  }
  return "unknown";
}

absl::StatusOr<Precision> ParsePrecision(absl::string_view name) {
  const std::string n = absl::AsciiStrToLower(name);
  static const auto* const kNames = new absl::flat_hash_map<std::string, Precision>{
      {"fp64", Precision::kFp64},    {"float64", Precision::kFp64}, {"double", Precision::kFp64},
      {"tf32", Precision::kTf32},    {"fp16", Precision::kFp16},    {"float16", Precision::kFp16},
      {"half", Precision::kFp16},    {"bf16", Precision::kBf16},    {"bfloat16", Precision::kBf16},
      {"fp8", Precision::kFp8},      {"e4m3", Precision::kFp8},     {"e5m2", Precision::kFp8},
      {"fp8_e4m3", Precision::kFp8}, {"fp8_e5m2", Precision::kFp8}, {"fp4", Precision::kFp4},
      {"nvfp4", Precision::kFp4},    {"mxfp4", Precision::kFp4},    {"int8", Precision::kInt8},
  };
  auto it = kNames->find(n);
  if (it == kNames->end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "precision=\"", name, "\" is not one of fp64, tf32, fp16, bf16, fp8, fp4, int8"));
  }
  return it->second;
}

std::optional<double> GpuSpec::FlopsPerCyclePerSm(Precision precision) const {
  return dense_flops_per_cycle_per_sm[Index(precision)];
}

double GpuSpec::PeakClockMhz(Precision precision) const {
  return precision == Precision::kFp64 ? sm_boost_clock_mhz : tensor_max_clock_mhz;
}

absl::StatusOr<double> GpuSpec::PeakTflops(Precision precision) const {
  std::optional<double> rate = FlopsPerCyclePerSm(precision);
  if (!rate.has_value()) {
    return absl::NotFoundError(absl::StrCat("GPU model ", name, " has no dense ",
                                            PrecisionName(precision), " tensor rate"));
  }
  return sm_count * *rate * PeakClockMhz(precision) * 1e6 / 1e12;
}

double RoundTflopsForDisplay(double tflops) { return std::round(tflops * 10.0) / 10.0; }

std::string NormalizeModelName(absl::string_view model_name) {
  std::string out;
  out.reserve(model_name.size());
  for (char c : model_name) {
    if (c == ' ' || c == '-' || c == '_' || c == '.' || c == '\t') continue;
    out.push_back(absl::ascii_tolower(static_cast<unsigned char>(c)));
  }
  if (absl::StartsWith(out, "nvidia")) out.erase(0, 6);
  return out;
}

const GpuCatalog& GpuCatalog::BuiltIn() {
  static const GpuCatalog* const kCatalog = new GpuCatalog(MakeBuiltIn());
  return *kCatalog;
}

absl::StatusOr<const GpuSpec*> GpuCatalog::Find(absl::string_view model_name) const {
  auto it = index_.find(NormalizeModelName(model_name));
  if (it == index_.end()) {
    return absl::NotFoundError(absl::StrCat(
        "GPU model \"", model_name,
        "\" is not in the GPU catalog; add it with a catalog override (SM count, tensor "
        "FLOPs/cycle/SM, tensor max clock)"));
  }
  return &specs_[it->second];
}

absl::Status GpuCatalog::Validate(const GpuSpec& spec, int replacing_index) const {
  const std::string where = absl::StrCat("GPU model \"", spec.name, "\": ");
  if (NormalizeModelName(spec.name).empty()) {
    return absl::InvalidArgumentError("GPU model name is empty");
  }
  if (spec.sm_count <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, "sm_count=", spec.sm_count, " must be > 0"));
  }
  auto positive = [&](absl::string_view field, double v) -> absl::Status {
    if (!std::isfinite(v) || v <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(where, field, "=", v, " must be > 0"));
    }
    return absl::OkStatus();
  };
  if (auto s = positive("tensor_max_clock_mhz", spec.tensor_max_clock_mhz); !s.ok()) return s;
  if (auto s = positive("sm_boost_clock_mhz", spec.sm_boost_clock_mhz); !s.ok()) return s;
  if (spec.hbm_capacity_gib < 0 || !std::isfinite(spec.hbm_capacity_gib)) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, "hbm_capacity_gib=", spec.hbm_capacity_gib, " must be >= 0"));
  }
  if (spec.hbm_bandwidth_gb_per_s < 0 || !std::isfinite(spec.hbm_bandwidth_gb_per_s)) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, "hbm_bandwidth_gb_per_s=", spec.hbm_bandwidth_gb_per_s, " must be >= 0"));
  }
  if (spec.board_power_w.has_value()) {
    if (auto s = positive("board_power_w", *spec.board_power_w); !s.ok()) return s;
  }
  bool any = false;
  for (Precision p : kAllPrecisions) {
    std::optional<double> rate = spec.FlopsPerCyclePerSm(p);
    if (!rate.has_value()) continue;
    any = true;
    if (!std::isfinite(*rate) || *rate <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, "dense_flops_per_cycle_per_sm[", PrecisionName(p), "]=", *rate, " must be > 0"));
    }
  }
  if (!any) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, "dense_flops_per_cycle_per_sm has no precision"));
  }
  std::vector<std::string> keys = spec.model_names;
  keys.push_back(spec.name);
  for (const std::string& key : keys) {
    const std::string norm = NormalizeModelName(key);
    if (norm.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(where, "model name \"", key, "\" is empty"));
    }
    auto it = index_.find(norm);
    if (it != index_.end() && it->second != replacing_index) {
      return absl::InvalidArgumentError(absl::StrCat(where, "model name \"", key,
                                                     "\" already belongs to GPU model \"",
                                                     specs_[it->second].name, "\""));
    }
  }
  return absl::OkStatus();
}

void GpuCatalog::Reindex() {
  index_.clear();
  for (int i = 0; i < static_cast<int>(specs_.size()); ++i) {
    index_[NormalizeModelName(specs_[i].name)] = i;
    for (const std::string& alias : specs_[i].model_names) {
      index_[NormalizeModelName(alias)] = i;
    }
  }
}

absl::Status GpuCatalog::Upsert(GpuSpec spec) {
  int replacing = -1;
  if (auto it = index_.find(NormalizeModelName(spec.name)); it != index_.end()) {
    replacing = it->second;
  }
  if (absl::Status s = Validate(spec, replacing); !s.ok()) return s;
  if (replacing >= 0) {
    specs_[replacing] = std::move(spec);
  } else {
    specs_.push_back(std::move(spec));
  }
  Reindex();
  return absl::OkStatus();
}

absl::Status GpuCatalog::ApplyOverrides(const std::vector<GpuSpecOverride>& overrides) {
  GpuCatalog next = *this;
  for (size_t i = 0; i < overrides.size(); ++i) {
    const GpuSpecOverride& o = overrides[i];
    const std::string where = absl::StrCat("gpu override ", i, " (\"", o.name, "\"): ");
    if (NormalizeModelName(o.name).empty()) {
      return absl::InvalidArgumentError(absl::StrCat(where, "name is empty"));
    }
    GpuSpec spec;
    auto existing = next.index_.find(NormalizeModelName(o.name));
    if (existing != next.index_.end()) {
      spec = next.specs_[existing->second];
      if (o.base_model.has_value()) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, "base_model=\"", *o.base_model, "\" given for an existing model"));
      }
    } else if (o.base_model.has_value()) {
      absl::StatusOr<const GpuSpec*> base = next.Find(*o.base_model);
      if (!base.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, "base_model: ", base.status().message()));
      }
      spec = **base;
      spec.model_names.clear();  // the base's aliases keep pointing at the base
      spec.name = o.name;
    } else {
      spec.name = o.name;
    }
    for (const std::string& alias : o.model_names) spec.model_names.push_back(alias);
    if (o.sm_count) spec.sm_count = *o.sm_count;
    for (const auto& [precision, rate] : o.dense_flops_per_cycle_per_sm) {
      if (rate <= 0) {
        spec.dense_flops_per_cycle_per_sm[Index(precision)].reset();
      } else {
        spec.dense_flops_per_cycle_per_sm[Index(precision)] = rate;
      }
    }
    if (o.tensor_max_clock_mhz) spec.tensor_max_clock_mhz = *o.tensor_max_clock_mhz;
    if (o.sm_boost_clock_mhz) spec.sm_boost_clock_mhz = *o.sm_boost_clock_mhz;
    if (o.hbm_capacity_gib) spec.hbm_capacity_gib = *o.hbm_capacity_gib;
    if (o.hbm_bandwidth_gb_per_s) spec.hbm_bandwidth_gb_per_s = *o.hbm_bandwidth_gb_per_s;
    if (o.board_power_w) spec.board_power_w = *o.board_power_w;
    if (o.source_note) spec.source_note = *o.source_note;
    if (spec.source_note.empty()) spec.source_note = "operator override";
    if (absl::Status s = next.Upsert(std::move(spec)); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(where, s.message()));
    }
  }
  *this = std::move(next);
  return absl::OkStatus();
}

}  // namespace goodput::core
