// dcgm-exporter as the ingest tests see it: the text version 3.x serves for an 8-GPU H100
// node with the Slurm job mapping on, and an HTTP endpoint on a free loopback port serving it.
//
//   ASSERT_OK_AND_ASSIGN(auto exporter, DcgmExporterServer::Start("gpu-node-042", "4211873"));
//   // scrape http://127.0.0.1:<exporter->port()>/metrics
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace goodput::testing {

// The GPUs of the node.
inline constexpr int kDcgmExporterGpus = 8;

// Every metric of an 8-GPU H100 node `host` running Slurm job `job_id` (label `hpc_job`);
// tensor activity differs per GPU (0.40 + 0.01 * gpu) so rows can be told apart.
std::string DcgmExporterText(absl::string_view host, absl::string_view job_id);

// One line of dcgm-exporter metric `metric` (a fault field such as DCGM_FI_DEV_XID_ERRORS)
// for GPU `gpu` of that node, with the labels DcgmExporterText prints for it plus `extra_labels`
// (`,xid="79",window_size_in_ms="300000"`), and `value`.
std::string DcgmExporterLine(absl::string_view host, absl::string_view job_id, int gpu,
                             absl::string_view metric, absl::string_view value,
                             absl::string_view extra_labels = "");

// Serves DcgmExporterText on /metrics until destroyed.
class DcgmExporterServer {
 public:
  static absl::StatusOr<std::unique_ptr<DcgmExporterServer>> Start(std::string host,
                                                                   std::string job_id);
  ~DcgmExporterServer();

  int port() const;
  // Lines served after DcgmExporterText from the next response on (fault metrics that change
  // while the exporter runs); empty: none.
  void SetExtraText(std::string text);
  // Responses served to goodput-ingest's scraper (its User-Agent), so far.
  int served_to_ingest() const;

 private:
  struct Impl;
  explicit DcgmExporterServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace goodput::testing
