#include "services/core/xid_catalog.h"

#include <algorithm>

namespace goodput::core {
namespace {

// NVIDIA's Xid catalog for Ampere and newer GPUs: mnemonic, description and "Resolution
// Bucket" per code.
constexpr std::string_view kXidCatalog =
    "NVIDIA Xid catalog (docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html)";
// The per-code explanations of NVIDIA's XID messages document ("Xid Error Listing",
// "Common XID Errors").
constexpr std::string_view kXidMessages =
    "NVIDIA XID Errors document (docs.nvidia.com/deploy/xid-errors/), Xid error listing";
// Row remapping and contained/uncontained ECC errors on A100 and newer.
constexpr std::string_view kMemoryErrorManagement =
    "NVIDIA GPU Memory Error Management (docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/)";
// XID 48/63/64 on GPUs with dynamic page retirement (before A100).
constexpr std::string_view kPageRetirement =
    "NVIDIA Dynamic Page Retirement, Visibility "
    "(docs.nvidia.com/deploy/dynamic-page-retirement/visibility.html)";

std::vector<XidInfo> Build() {
  std::vector<XidInfo> c = {
      {8, "ROBUST_CHANNEL_FIFO_ERROR_IDLE_TIMEOUT", "GPU stopped processing",
       XidBlame::kApplication,
       "restart the application (immediate action RESTART_APP); contact support if it recurs",
       kXidCatalog},
      {11, "ROBUST_CHANNEL_GR_ERROR_MISSING_HW", "Invalid or corrupted push buffer stream",
       XidBlame::kApplication,
       "restart the application (RESTART_APP) and check the application and CUDA version",
       kXidCatalog},
      {13, "ROBUST_CHANNEL_GR_EXCEPTION", "Graphics Engine Exception", XidBlame::kApplication,
       "restart the application (RESTART_APP): usually an out-of-bounds access or illegal "
       "instruction in the workload; run compute-sanitizer if it recurs",
       kXidCatalog},
      {31, "ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT", "GPU memory page fault", XidBlame::kApplication,
       "restart the application: an illegal memory access by the workload (MMU fault), "
       "almost always an application or framework bug",
       kXidMessages},
      {32, "ROBUST_CHANNEL_PBDMA_ERROR", "Invalid or corrupted push buffer stream",
       XidBlame::kDriver,
       "restart the application; a recurring error points at the PCIe bus or driver: check "
       "the node",
       kXidMessages},
      {38, "ROBUST_CHANNEL_FECS_ERR_UNIMPL_FIRMWARE_METHOD", "Driver firmware error",
       XidBlame::kDriver, "reset the GPU; update the driver if it recurs", kXidMessages},
      {43, "ROBUST_CHANNEL_RESETCHANNEL_VERIF_ERROR", "GPU stopped processing",
       XidBlame::kApplication,
       "restart the application: the channel was stopped after a fault of the workload; the "
       "GPU itself is healthy",
       kXidMessages},
      {45, "ROBUST_CHANNEL_PREEMPTIVE_REMOVAL", "Preemptive cleanup, due to previous errors",
       XidBlame::kInformational,
       "none by itself: channels torn down after the process ended or an earlier XID; look at "
       "the XID before it",
       kXidMessages},
      {48, "DBE (Double Bit Error) ECC Error", "Double Bit ECC Error", XidBlame::kHardware,
       "the affected application is stopped; reset the GPU (or reboot) to retire the memory "
       "and drain the node if DBEs recur",
       kPageRetirement},
      {61, "PMU_BREAKPOINT", "Internal micro-controller breakpoint/warning", XidBlame::kDriver,
       "reset the GPU; contact support if it recurs", kXidMessages},
      {62, "PMU_HALT_ERROR", "Internal micro-controller halt", XidBlame::kDriver,
       "reset the GPU; contact support if it recurs", kXidMessages},
      {63, "INFOROM_DRAM_RETIREMENT_EVENT", "ECC page retirement or row remapping recording event",
       XidBlame::kHardware,
       "reset the GPU when it is idle to activate the remapped row (row remap pending); "
       "not fatal alone, trend it",
       kMemoryErrorManagement},
      {64, "INFOROM_DRAM_RETIREMENT_FAILURE",
       "ECC page retirement or row remapper recording failure", XidBlame::kHardware,
       "reset the GPU (RESET_GPU), then contact support (CONTACT_SUPPORT): a row remapping "
       "failure is a replacement criterion",
       kXidCatalog},
      {68, "NVDEC0_EXCEPTION", "NVDEC0 Exception", XidBlame::kApplication,
       "restart the application; check the video decode workload", kXidMessages},
      {69, "ROBUST_CHANNEL_GR_CLASS_ERROR", "Graphics Engine class error", XidBlame::kApplication,
       "restart the application", kXidMessages},
      {74, "NVLINK_ERROR", "NVLINK Error", XidBlame::kHardware,
       "reset the GPU; drain the node and check the NVLink/NVSwitch fabric if it recurs",
       kXidMessages},
      {79, "GPU_HAS_FALLEN_OFF_THE_BUS", "GPU has fallen off the bus", XidBlame::kHardware,
       "drain the node and reboot it (the GPU is no longer reachable on PCIe); replace the "
       "GPU if it recurs",
       kXidMessages},
      {92, "EXCESSIVE_SBE_INTERRUPTS", "High single-bit ECC error rate", XidBlame::kHardware,
       "no immediate action: the errors were corrected; trend the GPU's ECC counters and "
       "replace it if the rate keeps rising",
       kXidMessages},
      {94, "ROBUST_CHANNEL_CONTAINED_ERROR", "Contained ECC error", XidBlame::kHardware,
       "restart the affected application; the GPU keeps serving others; reset it when idle "
       "to remap the row",
       kMemoryErrorManagement},
      {95, "ROBUST_CHANNEL_UNCONTAINED_ERROR", "Uncontained ECC error", XidBlame::kHardware,
       "drain the GPU and reset it: every application on it is affected", kMemoryErrorManagement},
      {109, "ROBUST_CHANNEL_CTXSW_TIMEOUT_ERROR", "Context Switch Timeout Error", XidBlame::kDriver,
       "restart the application; reset the GPU if it recurs", kXidMessages},
      {119, "GSP_RPC_TIMEOUT", "GSP RPC Timeout", XidBlame::kDriver,
       "reset the GPU (or reboot the node); update the driver if it recurs", kXidMessages},
      {120, "GSP_ERROR", "GSP Error", XidBlame::kDriver,
       "reset the GPU (or reboot the node); update the driver if it recurs", kXidMessages},
      {140, "UNRECOVERED_ECC_ERROR", "Unrecovered ECC Error", XidBlame::kHardware,
       "drain the GPU and reset it", kXidMessages},
      {143, "GPU_INIT_FAILURE", "GPU Initialization Failure", XidBlame::kHardware,
       "reset the GPU or reboot the node; replace it if it does not come back", kXidMessages},
  };
  std::sort(c.begin(), c.end(), [](const XidInfo& a, const XidInfo& b) { return a.code < b.code; });
  return c;
}

}  // namespace

std::string_view XidBlameName(XidBlame blame) {
  switch (blame) {
    case XidBlame::kApplication:
      return "application";
    case XidBlame::kHardware:
      return "hardware";
    case XidBlame::kDriver:
      return "driver";
    case XidBlame::kInformational:
      return "informational";
  }
  return "hardware";
}

const std::vector<XidInfo>& XidCatalog() {
  static const auto* const kCatalog = new std::vector<XidInfo>(Build());
  return *kCatalog;
}

const XidInfo* FindXid(int64_t code) {
  const std::vector<XidInfo>& c = XidCatalog();
  auto it = std::lower_bound(c.begin(), c.end(), code,
                             [](const XidInfo& info, int64_t v) { return info.code < v; });
  if (it == c.end() || it->code != code) return nullptr;
  return &*it;
}

}  // namespace goodput::core
