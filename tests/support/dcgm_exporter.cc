#include "tests/support/dcgm_exporter.h"

#include <atomic>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "httplib.h"

namespace goodput::testing {

std::string DcgmExporterText(absl::string_view host, absl::string_view job_id) {
  struct Metric {
    const char* name;
    const char* type;
    const char* help;
  };
  const Metric metrics[] = {
      {"DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz)."},
      {"DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz)."},
      {"DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C)."},
      {"DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."},
      {"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter",
       "Total energy consumption since boot (in mJ)."},
      {"DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."},
      {"DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB)."},
      {"DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB)."},
      {"DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", "Ratio of time the graphics engine is active."},
      {"DCGM_FI_PROF_SM_ACTIVE", "gauge", "The ratio of cycles an SM has at least 1 warp."},
      {"DCGM_FI_PROF_SM_OCCUPANCY", "gauge", "The ratio of number of warps resident on an SM."},
      {"DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge",
       "Ratio of cycles the tensor (HMMA) pipe is active."},
      {"DCGM_FI_PROF_DRAM_ACTIVE", "gauge",
       "Ratio of cycles the device memory interface is active."},
  };
  std::string out;
  for (const Metric& m : metrics) {
    absl::StrAppend(&out, "# HELP ", m.name, " ", m.help, "\n# TYPE ", m.name, " ", m.type, "\n");
    for (int g = 0; g < kDcgmExporterGpus; ++g) {
      const std::string name = m.name;
      std::string value;
      if (name == "DCGM_FI_DEV_SM_CLOCK") value = "1755";
      if (name == "DCGM_FI_DEV_MEM_CLOCK") value = "2619";
      if (name == "DCGM_FI_DEV_GPU_TEMP") value = absl::StrCat(48 + g);
      if (name == "DCGM_FI_DEV_POWER_USAGE") value = "612.347";
      if (name == "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION") value = "83745239814";
      if (name == "DCGM_FI_DEV_GPU_UTIL") value = "100";
      if (name == "DCGM_FI_DEV_FB_FREE") value = "2349";
      if (name == "DCGM_FI_DEV_FB_USED") value = "78729";
      if (name == "DCGM_FI_PROF_GR_ENGINE_ACTIVE") value = "0.982143";
      if (name == "DCGM_FI_PROF_SM_ACTIVE") value = "0.913512";
      if (name == "DCGM_FI_PROF_SM_OCCUPANCY") value = "0.251870";
      if (name == "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE")
        value = absl::StrFormat("%.6f", 0.40 + 0.01 * g);
      if (name == "DCGM_FI_PROF_DRAM_ACTIVE") value = "0.358421";
      absl::StrAppend(&out, DcgmExporterLine(host, job_id, g, m.name, value));
    }
  }
  return out;
}

std::string DcgmExporterLine(absl::string_view host, absl::string_view job_id, int gpu,
                             absl::string_view metric, absl::string_view value,
                             absl::string_view extra_labels) {
  return absl::StrFormat(
      "%s{gpu=\"%d\",UUID=\"GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e5%d\","
      "pci_bus_id=\"00000000:%02X:00.0\",device=\"nvidia%d\",modelName=\"NVIDIA H100 80GB "
      "HBM3\",Hostname=\"%s\",DCGM_FI_DRIVER_VERSION=\"535.129.03\",hpc_job=\"%s\"%s} %s\n",
      metric, gpu, gpu, 0x18 + 0x11 * gpu, gpu, host, job_id, extra_labels, value);
}

struct DcgmExporterServer::Impl {
  httplib::Server server;
  std::thread thread;
  std::atomic<int> served_to_ingest{0};
  int port = 0;
  absl::Mutex mu;
  std::string extra ABSL_GUARDED_BY(mu);
};

DcgmExporterServer::DcgmExporterServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

absl::StatusOr<std::unique_ptr<DcgmExporterServer>> DcgmExporterServer::Start(std::string host,
                                                                              std::string job_id) {
  auto impl = std::make_unique<Impl>();
  Impl* raw = impl.get();
  const std::string text = DcgmExporterText(host, job_id);
  raw->server.Get("/metrics", [raw, text](const httplib::Request& req, httplib::Response& res) {
    std::string body = text;
    {
      absl::MutexLock lock(&raw->mu);
      body += raw->extra;
    }
    if (req.get_header_value("User-Agent") == "goodput-ingest") ++raw->served_to_ingest;
    res.set_content(body, "text/plain; version=0.0.4");
  });
  raw->port = raw->server.bind_to_any_port("127.0.0.1");
  if (raw->port <= 0) return absl::UnavailableError("dcgm-exporter stand-in: no loopback port");
  raw->thread = std::thread([raw] { raw->server.listen_after_bind(); });
  return std::unique_ptr<DcgmExporterServer>(new DcgmExporterServer(std::move(impl)));
}

DcgmExporterServer::~DcgmExporterServer() {
  impl_->server.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

int DcgmExporterServer::port() const { return impl_->port; }

void DcgmExporterServer::SetExtraText(std::string text) {
  absl::MutexLock lock(&impl_->mu);
  impl_->extra = std::move(text);
}

int DcgmExporterServer::served_to_ingest() const { return impl_->served_to_ingest.load(); }

}  // namespace goodput::testing
