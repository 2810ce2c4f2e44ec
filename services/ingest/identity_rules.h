// How real exporters and schedulers name the same machine and pod, reconciled before a sample
// is stored or an allocation registered, so that attribution compares like with like.
//
// Hosts: dcgm-exporter prints `Hostname` as the node's short name, an FQDN, or (on
// Kubernetes) the node name; Slurm prologs send `hostname -s` or `hostname -f`; case varies.
// CanonicalHost lower-cases the name and, unless `keep_domain`, drops the domain ("GPU-Node-042
// .eos.example.com" -> "gpu-node-042"; IP addresses are kept whole), then applies the
// operator's aliases (e.g. a Kubernetes node name -> the Slurm host name).
//
// Pods: with Prometheus' default `honor_labels: false` (dcgm-exporter's Helm chart
// ServiceMonitor), the workload's pod arrives as `exported_pod`/`exported_namespace` while
// `pod`/`namespace` name the exporter's own pod; dcgm-exporter before 2.0 printed
// `pod_name`/`pod_namespace`. PodLabelPairs lists the pairs to try, most trusted first.
//
//   IdentityRules rules;
//   rules.aliases["ip-10-0-1-17"] = "gpu-node-042";
//   CanonicalHost("IP-10-0-1-17.ec2.internal", rules);  // "gpu-node-042"
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "yaml-cpp/yaml.h"

namespace goodput::ingest {

struct PodLabelPair {
  std::string pod;
  std::string ns;
};

struct IdentityRules {
  // Keep the DNS domain of host names (sites whose short names repeat across domains).
  bool keep_domain = false;
  // Canonical host -> canonical host it stands for, both already canonical (see Parse).
  absl::flat_hash_map<std::string, std::string> aliases;
  // Label pairs naming a Kubernetes pod, most trusted first.
  std::vector<PodLabelPair> pod_labels = DefaultPodLabels();

  static std::vector<PodLabelPair> DefaultPodLabels();
};

// The host name samples and allocations are stored and matched under.
std::string CanonicalHost(absl::string_view host, const IdentityRules& rules);

// Reads `ingest.hosts.keep_domain`, `ingest.hosts.aliases` (a map) and
// `ingest.attribution.pod_labels` (a list of {pod, namespace}) from the config root;
// INVALID_ARGUMENT naming the key for a malformed value.
absl::StatusOr<IdentityRules> ParseIdentityRules(const YAML::Node& root);

}  // namespace goodput::ingest
