// GPU fault commands (OfuService.ListFaultEvents): faults CLUSTER/JOB, faults --cluster C.
#include <iostream>

#include "absl/strings/str_cat.h"
#include "goodput/v1/ofu.grpc.pb.h"
#include "tools/goodputctl/commands.h"
#include "tools/goodputctl/format.h"

namespace goodput::ctl {
namespace {

std::string GpuText(const v1::GpuRef& gpu) {
  std::string text = gpu.host();
  if (gpu.has_gpu_index()) {
    absl::StrAppend(&text, ":", gpu.gpu_index());
  } else if (!gpu.uuid().empty()) {
    absl::StrAppend(&text, ":", gpu.uuid());
  }
  if (gpu.has_mig()) absl::StrAppend(&text, "/mig", gpu.mig().gpu_instance_id());
  return text;
}

// "XID 79 GPU has fallen off the bus", "double-bit ECC errors (volatile) +2 (7)".
std::string WhatText(const v1::FaultEvent& e) {
  if (e.signal() == v1::FAULT_SIGNAL_XID || e.signal() == v1::FAULT_SIGNAL_XID_COUNT) {
    std::string text = absl::StrCat("XID ", e.xid());
    if (!e.xid_meaning().empty()) absl::StrAppend(&text, " ", e.xid_meaning());
    if (e.signal() == v1::FAULT_SIGNAL_XID_COUNT)
      absl::StrAppend(&text, " x", Number(e.count(), 0));
    return text;
  }
  std::string text = e.signal_description();
  if (e.count() != 1 || e.has_previous_value()) {
    absl::StrAppend(&text, " +", Number(e.count(), 0), " (now ", Number(e.value(), 0), ")");
  }
  if (e.counter_reset()) absl::StrAppend(&text, ", after a counter reset");
  return text;
}

int Faults(const Args& args) {
  v1::ListFaultEventsRequest request;
  const std::optional<std::string> cluster = args.Flag("cluster");
  if (args.positional.size() > 1) {
    absl::StatusOr<v1::JobKey> key = JobArg(args, 1);
    if (!key.ok()) return UsageError(key.status().message());
    *request.mutable_job() = *key;
  } else if (cluster.has_value()) {
    request.set_cluster(*cluster);
    request.set_host(args.Flag("host").value_or(""));
    absl::StatusOr<v1::TimeRange> range = TimeRangeFlags(args, "24h");
    if (!range.ok()) return UsageError(range.status().message());
    *request.mutable_range() = *range;
  } else {
    return UsageError("faults: give CLUSTER/JOB_ID, or --cluster C [--host H] [--since 24h]");
  }
  auto stub = v1::OfuService::NewStub(ChannelTo(args, Service::kOfu));
  std::vector<v1::FaultEvent> events;
  while (true) {
    v1::ListFaultEventsResponse response;
    grpc::Status status = stub->ListFaultEvents(CallContext(args).get(), request, &response);
    if (!status.ok()) return RpcFailure("faults", args, Service::kOfu, "ListFaultEvents", status);
    for (const v1::FaultEvent& e : response.events()) events.push_back(e);
    if (response.next_page_token().empty()) break;
    request.set_page_token(response.next_page_token());
  }
  if (args.json) {
    v1::ListFaultEventsResponse all;
    for (const v1::FaultEvent& e : events) *all.add_events() = e;
    PrintJson(all);
    return kExitOk;
  }
  if (events.empty()) {
    std::cout << "no GPU fault events\n";
    return kExitOk;
  }
  Table table({{"TIME (UTC)"}, {"GPU"}, {"JOB"}, {"FAULT"}, {"BLAME"}, {"ACTION"}});
  for (const v1::FaultEvent& e : events) {
    table.AddRow({FormatUtc(FromProto(e.time())), GpuText(e.gpu()),
                  e.has_job() ? e.job().job_id() : "-", WhatText(e),
                  e.blame().empty() ? "-" : e.blame(),
                  e.recommended_action().empty() ? "-" : e.recommended_action()});
  }
  std::cout << table.Render();
  return kExitOk;
}

}  // namespace

std::string FaultEventLine(const v1::FaultEvent& e) {
  return Printable(absl::StrCat(FormatUtc(FromProto(e.time())), "  ", GpuText(e.gpu()), "  ",
                                WhatText(e), e.blame().empty() ? "" : " (" + e.blame() + ")"));
}

std::vector<Command> FaultCommands() {
  return {
      {.words = {"faults"},
       .arguments = "[CLUSTER/JOB_ID]",
       .summary = "GPU fault events (XID, ECC, row remapping, NVLink, PCIe, slowdowns) of a "
                  "job, or of a cluster or host",
       .details = "  --cluster C                     a cluster's events instead of a job's\n"
                  "  --host H                        with --cluster: that host's only\n"
                  "  --since D | --from T [--to T]   with --cluster: the range (default 24h)\n"
                  "  --json                          the events as JSON\n",
       .flags = {"cluster", "job-id", "host", "since", "from", "to"},
       .run = Faults},
  };
}

}  // namespace goodput::ctl
