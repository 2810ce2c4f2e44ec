#include "services/core/tile_quantization.h"

#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace goodput::core {
namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

absl::Status CheckPositive(absl::string_view field, int64_t v) {
  if (v <= 0) return absl::InvalidArgumentError(absl::StrCat(field, "=", v, " must be > 0"));
  return absl::OkStatus();
}

// Parses "<a>x<b>" with positive integers.
bool ParsePair(absl::string_view part, int64_t* a, int64_t* b) {
  std::vector<absl::string_view> ab = absl::StrSplit(part, 'x');
  if (ab.size() != 2 || ab[0].empty() || ab[1].empty()) return false;
  for (absl::string_view s : ab) {
    for (char c : s) {
      if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return false;
    }
  }
  return absl::SimpleAtoi(ab[0], a) && absl::SimpleAtoi(ab[1], b) && *a > 0 && *b > 0;
}

}  // namespace

absl::StatusOr<TileQuantization> ComputeTileQuantization(const GemmShape& shape,
                                                         const TileConfig& tile) {
  for (auto [field, v] : {std::pair<absl::string_view, int64_t>{"m", shape.m},
                          {"n", shape.n},
                          {"k", shape.k},
                          {"tile_m", tile.tile_m},
                          {"tile_n", tile.tile_n},
                          {"tile_k", tile.tile_k},
                          {"cluster_m", tile.cluster_m},
                          {"cluster_n", tile.cluster_n}}) {
    if (auto s = CheckPositive(field, v); !s.ok()) return s;
  }
  TileQuantization q;
  q.m_eff = CeilDiv(CeilDiv(shape.m, tile.tile_m), tile.cluster_m) * tile.cluster_m * tile.tile_m;
  q.n_eff = CeilDiv(CeilDiv(shape.n, tile.tile_n), tile.cluster_n) * tile.cluster_n * tile.tile_n;
  q.k_eff = CeilDiv(shape.k, tile.tile_k) * tile.tile_k;
  q.useful_flops = 2.0 * static_cast<double>(shape.m) * static_cast<double>(shape.n) *
                   static_cast<double>(shape.k);
  q.executed_flops = 2.0 * static_cast<double>(q.m_eff) * static_cast<double>(q.n_eff) *
                     static_cast<double>(q.k_eff);
  q.overhead_percent = (q.executed_flops - q.useful_flops) / q.useful_flops * 100.0;
  q.useful_fraction = q.useful_flops / q.executed_flops;
  return q;
}

absl::StatusOr<TileQuantization> ComputeTileQuantization(const std::vector<WeightedGemm>& gemms) {
  if (gemms.empty()) return absl::InvalidArgumentError("gemms is empty");
  TileQuantization total;
  total.useful_flops = 0;
  total.executed_flops = 0;
  for (size_t i = 0; i < gemms.size(); ++i) {
    if (gemms[i].count <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("gemms[", i, "].count=", gemms[i].count, " must be > 0"));
    }
    absl::StatusOr<TileQuantization> q = ComputeTileQuantization(gemms[i].shape, gemms[i].tile);
    if (!q.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("gemms[", i, "]: ", q.status().message()));
    }
    total.useful_flops += q->useful_flops * static_cast<double>(gemms[i].count);
    total.executed_flops += q->executed_flops * static_cast<double>(gemms[i].count);
  }
  total.overhead_percent = (total.executed_flops - total.useful_flops) / total.useful_flops * 100.0;
  total.useful_fraction = total.useful_flops / total.executed_flops;
  return total;
}

absl::StatusOr<double> AdjustedOfu(double ofu_fraction, const TileQuantization& quantization) {
  if (!std::isfinite(ofu_fraction) || ofu_fraction < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("ofu_fraction=", ofu_fraction, " must be a finite value >= 0"));
  }
  if (!(quantization.executed_flops > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("executed_flops=", quantization.executed_flops, " must be > 0"));
  }
  return ofu_fraction * quantization.useful_flops / quantization.executed_flops;
}

absl::StatusOr<NvjetKernel> ParseNvjetKernelName(absl::string_view kernel_name) {
  auto fail = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("kernel name \"", kernel_name, "\" is not an nvJet GEMM name: ", why));
  };
  std::vector<absl::string_view> parts = absl::StrSplit(kernel_name, '_');
  size_t i = 0;
  if (parts.empty() || parts[i] != "nvjet") return fail("does not start with \"nvjet_\"");
  ++i;
  NvjetKernel k;
  if (i < parts.size() && absl::StartsWith(parts[i], "sm") && parts[i].size() > 2) {
    bool digits = true;
    for (char c : parts[i].substr(2)) digits &= absl::ascii_isdigit(static_cast<unsigned char>(c));
    if (digits) k.arch = std::string(parts[i++]);
  }
  if (i >= parts.size() || parts[i].empty()) return fail("missing the type code (e.g. \"hsh\")");
  for (char c : parts[i]) {
    if (!absl::ascii_isalpha(static_cast<unsigned char>(c))) {
      return fail(absl::StrCat("type code \"", parts[i], "\" is not letters"));
    }
  }
  k.type_code = std::string(parts[i++]);
  if (i >= parts.size() || !ParsePair(parts[i], &k.tile.tile_m, &k.tile.tile_n)) {
    return fail("missing the <TM>x<TN> tile");
  }
  ++i;
  if (i >= parts.size() || !ParsePair(parts[i], &k.tile.tile_k, &k.stages)) {
    return fail("missing the <TK>x<stages> part");
  }
  ++i;
  if (i >= parts.size() || !ParsePair(parts[i], &k.tile.cluster_m, &k.tile.cluster_n)) {
    return fail("missing the <CM>x<CN> cluster");
  }
  ++i;
  for (; i < parts.size(); ++i) k.suffixes.emplace_back(parts[i]);
  return k;
}

}  // namespace goodput::core
