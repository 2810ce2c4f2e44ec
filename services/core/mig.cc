#include "services/core/mig.h"

#include <array>
#include <span>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"

namespace goodput::core {
namespace {

struct ProfileSms {
  absl::string_view profile;
  int sm_count;
};

// Profiles sharing one SM geometry, and the catalog entries (GpuSpec::name) that have it.
struct MigTable {
  std::span<const absl::string_view> gpu_names;
  std::span<const ProfileSms> profiles;
};

// A100 40GB: `nvidia-smi mig -lgip` on an A100-SXM4-40GB as the MIG user guide's "List GPU
// instance profiles" step prints it (SM column: 14, 14, 14, 28, 42, 56, 98); MIG mode leaves 98
// of the 108 SMs usable.
constexpr std::array<absl::string_view, 2> kA100_40Gpus = {"A100 SXM 40GB", "A100 PCIe 40GB"};
constexpr std::array<ProfileSms, 6> kA100_40 = {{{"1g.5gb", 14},
                                                 {"1g.10gb", 14},
                                                 {"2g.10gb", 28},
                                                 {"3g.20gb", 42},
                                                 {"4g.20gb", 56},
                                                 {"7g.40gb", 98}}};
// A100 80GB: the MIG user guide gives the 80GB profiles as the 40GB ones with the memory
// doubled (1g.10gb, 1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb): same compute slices, same SMs.
constexpr std::array<absl::string_view, 2> kA100_80Gpus = {"A100 SXM 80GB", "A100 PCIe 80GB"};
constexpr std::array<ProfileSms, 6> kA100_80 = {{{"1g.10gb", 14},
                                                 {"1g.20gb", 14},
                                                 {"2g.20gb", 28},
                                                 {"3g.40gb", 42},
                                                 {"4g.40gb", 56},
                                                 {"7g.80gb", 98}}};
// A30: `nvidia-smi mig -lgip` on an A30 (SM column 14, 28, 56 of 56); profiles per the MIG user
// guide's A30 table.
constexpr std::array<absl::string_view, 1> kA30Gpus = {"A30"};
constexpr std::array<ProfileSms, 3> kA30 = {{{"1g.6gb", 14}, {"2g.12gb", 28}, {"4g.24gb", 56}}};
// H100 80GB (SXM5): `nvidia-smi mig -lgip` on an H100 80GB HBM3 (SM column 16, 16, 26, 32, 60,
// 64, 132). The 1g.20gb profile has one compute slice but more SMs than 1g.10gb.
constexpr std::array<absl::string_view, 1> kH100_80Gpus = {"H100 SXM"};
constexpr std::array<ProfileSms, 6> kH100_80 = {{{"1g.10gb", 16},
                                                 {"1g.20gb", 26},
                                                 {"2g.20gb", 32},
                                                 {"3g.40gb", 60},
                                                 {"4g.40gb", 64},
                                                 {"7g.80gb", 132}}};
// H100 94GB (H100 NVL): profile names from the MIG user guide's H100 94GB table, with the same
// slice fractions as H100 80GB on the same 132-SM GH100; SM counts taken from the H100 80GB and
// H200 listings, which agree.
constexpr std::array<absl::string_view, 1> kH100_94Gpus = {"H100 NVL"};
constexpr std::array<ProfileSms, 6> kH100_94 = {{{"1g.12gb", 16},
                                                 {"1g.24gb", 26},
                                                 {"2g.24gb", 32},
                                                 {"3g.47gb", 60},
                                                 {"4g.47gb", 64},
                                                 {"7g.94gb", 132}}};
// H200 141GB (SXM and NVL): profile names from the MIG user guide's H200 table;
// `nvidia-smi mig -lgip` on an H200 shows 1g.18gb 16, 2g.35gb 32 and 7g.141gb 132 SMs, the H100
// 80GB geometry, which gives the remaining three.
constexpr std::array<absl::string_view, 2> kH200Gpus = {"H200", "H200 NVL"};
constexpr std::array<ProfileSms, 6> kH200 = {{{"1g.18gb", 16},
                                              {"1g.35gb", 26},
                                              {"2g.35gb", 32},
                                              {"3g.71gb", 60},
                                              {"4g.71gb", 64},
                                              {"7g.141gb", 132}}};
// B200: a 1g.23gb instance reports 18 SMs (OpenXLA's device description of "NVIDIA B200 MIG
// 1g.23gb", xla/backends/gpu/target_config/specs/b200_mig.txtpb). No SM listing of the other
// B200 profiles (1g.45gb, 2g.45gb, 3g.90gb, 4g.90gb, 7g.180gb) has been found, so they are not
// guessed.
constexpr std::array<absl::string_view, 1> kB200Gpus = {"B200"};
constexpr std::array<ProfileSms, 1> kB200 = {{{"1g.23gb", 18}}};

constexpr std::array<MigTable, 7> kTables = {{
    {kA100_40Gpus, kA100_40},
    {kA100_80Gpus, kA100_80},
    {kA30Gpus, kA30},
    {kH100_80Gpus, kH100_80},
    {kH100_94Gpus, kH100_94},
    {kH200Gpus, kH200},
    {kB200Gpus, kB200},
}};

const MigTable* TableFor(const GpuSpec& gpu) {
  const std::string key = NormalizeModelName(gpu.name);
  for (const MigTable& table : kTables) {
    for (absl::string_view name : table.gpu_names) {
      if (NormalizeModelName(name) == key) return &table;
    }
  }
  return nullptr;
}

// "MIG 1g.10gb+me" -> "1g.10gb". Suffixes after the memory size name extra engines.
std::string CanonicalProfile(absl::string_view profile) {
  std::string p = absl::AsciiStrToLower(absl::StripAsciiWhitespace(profile));
  absl::string_view view = p;
  if (absl::ConsumePrefix(&view, "mig")) view = absl::StripLeadingAsciiWhitespace(view);
  const size_t suffix = view.find_first_of("+-");
  if (suffix != absl::string_view::npos) view = view.substr(0, suffix);
  return std::string(view);
}

}  // namespace

double MigInstanceShape::SmShare() const {
  return gpu_sm_count > 0 ? static_cast<double>(instance_sm_count) / gpu_sm_count : 0;
}

double MigInstanceShape::GpuLevelOfu(double instance_ofu) const { return instance_ofu * SmShare(); }

absl::StatusOr<MigInstanceShape> FindMigProfile(const GpuSpec& gpu, absl::string_view profile) {
  const MigTable* table = TableFor(gpu);
  if (table == nullptr) {
    return absl::NotFoundError(absl::StrCat("MIG profile \"", profile, "\": GPU model ", gpu.name,
                                            " has no MIG profile table"));
  }
  const std::string wanted = CanonicalProfile(profile);
  for (const ProfileSms& p : table->profiles) {
    if (p.profile != wanted) continue;
    if (gpu.sm_count < p.sm_count) {
      return absl::FailedPreconditionError(absl::StrCat("MIG profile ", p.profile, " has ",
                                                        p.sm_count, " SMs but GPU model ", gpu.name,
                                                        " has sm_count=", gpu.sm_count));
    }
    return MigInstanceShape{std::string(p.profile), p.sm_count, gpu.sm_count};
  }
  std::vector<absl::string_view> known;
  for (const ProfileSms& p : table->profiles) known.push_back(p.profile);
  return absl::NotFoundError(absl::StrCat("MIG profile \"", profile,
                                          "\" is not known for GPU model ", gpu.name,
                                          " (known: ", absl::StrJoin(known, ", "), ")"));
}

std::vector<MigInstanceShape> MigProfilesFor(const GpuSpec& gpu) {
  std::vector<MigInstanceShape> out;
  const MigTable* table = TableFor(gpu);
  if (table == nullptr) return out;
  for (const ProfileSms& p : table->profiles) {
    out.push_back({std::string(p.profile), p.sm_count, gpu.sm_count});
  }
  return out;
}

}  // namespace goodput::core
