// XID catalog: what an NVIDIA XID code means, whose fault it is, and what to do about it.
//
// The NVIDIA driver reports GPU faults as XID codes (kernel log `NVRM: Xid ...`); DCGM holds
// the last one per GPU (field 230, DCGM_FI_DEV_XID_ERRORS) and dcgm-exporter prints it as a
// gauge. The catalog tells an operator whether the code points at the application (an illegal
// memory access, an engine exception: restart the job, fix the code), at the hardware (ECC,
// NVLink, a GPU off the bus: drain and reset or replace) or at the driver/firmware (GSP
// timeouts: reset, update the driver). Each entry names its public source, like the GPU
// catalog: NVIDIA's Xid catalog for Ampere and newer GPUs ("Resolution Bucket (Immediate
// Action)") and the XID messages document.
//
//   const XidInfo* info = FindXid(79);  // "GPU has fallen off the bus", kHardware
//   if (info == nullptr) { /* a code the catalog does not know: show the number */ }
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace goodput::core {

// Whose fault an XID is, as NVIDIA's documentation assigns it.
enum class XidBlame {
  kApplication,    // the workload (illegal address, engine exception): restart, check the code
  kHardware,       // memory, NVLink, PCIe, the board: drain, reset, replace
  kDriver,         // driver or GSP firmware: reset the GPU, update the driver
  kInformational,  // a notice that needs no action on its own (e.g. a channel torn down)
};

// "application", "hardware", "driver", "informational".
std::string_view XidBlameName(XidBlame blame);

struct XidInfo {
  int code = 0;
  std::string_view mnemonic;  // NVIDIA's mnemonic, e.g. "ROBUST_CHANNEL_GR_EXCEPTION"
  std::string_view meaning;   // NVIDIA's description, e.g. "Graphics Engine Exception"
  XidBlame blame = XidBlame::kHardware;
  std::string_view action;  // the recommended action in a sentence
  std::string_view source;  // where the meaning and action come from
};

// The catalog entry of `code`, or nullptr when the catalog does not know it.
const XidInfo* FindXid(int64_t code);

// Every entry, in code order.
const std::vector<XidInfo>& XidCatalog();

}  // namespace goodput::core
