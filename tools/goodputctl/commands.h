// goodputctl's commands, one group per file (jobs and setup, OFU, MFU, alerts), each declared
// with its words, its help and the flags it accepts, so that main can dispatch, print help per
// command and refuse unknown flags the same way for all.
#pragma once

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "tools/goodputctl/cli.h"

namespace goodput::v1 {
class FaultEvent;
}

namespace goodput::ctl {

struct Command {
  // The words that select it: {"alerts", "silence", "create"}.
  std::vector<std::string> words = {};
  // Arguments after the words, for the usage line: "CLUSTER/JOB".
  std::string arguments = {};
  // One line for the command list.
  std::string summary = {};
  // Flag lines for `--help` ("  --state S   only alerts in state S (repeatable)").
  std::string details = {};
  // Flags it accepts besides the global ones (--addr, --<service>-addr, --token, --json).
  std::set<std::string> flags = {};
  std::function<int(const Args&)> run = {};
};

std::vector<Command> JobCommands();    // migrate, health, register-job, end-job, jobs list|show
std::vector<Command> OfuCommands();    // ofu, fleet summary, gemm-overhead, gpus
std::vector<Command> MfuCommands();    // reconcile, fleet report
std::vector<Command> AlertCommands();  // alerts list|show|ack, alerts silence create|list|delete
std::vector<Command> ReportCommands();  // report
std::vector<Command> FaultCommands();   // faults
std::vector<Command> ActionCommands();  // actions list|show|undo

// One fault event in a line (cmd_faults.cc), as `faults`, reports and alerts print it:
// "2026-11-28 14:02:05  gpu-node-042:3  XID 79 GPU has fallen off the bus (hardware)".
std::string FaultEventLine(const v1::FaultEvent& e);

}  // namespace goodput::ctl
