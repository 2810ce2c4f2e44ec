#include "services/ingest/identity_rules.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace goodput::ingest {
namespace {

// An IPv4 address (digits and dots) or an IPv6 one (has a colon): its dots are not a domain.
bool IsAddress(absl::string_view host) {
  if (host.find(':') != absl::string_view::npos) return true;
  for (char c : host) {
    if (!absl::ascii_isdigit(c) && c != '.') return false;
  }
  return !host.empty();
}

std::string Normalize(absl::string_view host, bool keep_domain) {
  std::string out = absl::AsciiStrToLower(host);
  if (!out.empty() && out.back() == '.') out.pop_back();  // a rooted FQDN
  if (!keep_domain && !IsAddress(out)) {
    if (size_t dot = out.find('.'); dot != std::string::npos && dot > 0) out.resize(dot);
  }
  return out;
}

}  // namespace

std::vector<PodLabelPair> IdentityRules::DefaultPodLabels() {
  return {{"exported_pod", "exported_namespace"}, {"pod", "namespace"},
          {"pod_name", "pod_namespace"}};
}

std::string CanonicalHost(absl::string_view host, const IdentityRules& rules) {
  std::string canonical = Normalize(host, rules.keep_domain);
  if (auto it = rules.aliases.find(canonical); it != rules.aliases.end()) return it->second;
  return canonical;
}

absl::StatusOr<IdentityRules> ParseIdentityRules(const YAML::Node& root) {
  IdentityRules rules;
  if (!root.IsMap() || !root["ingest"]) return rules;
  const YAML::Node ingest = root["ingest"];
  try {
    if (const YAML::Node hosts = ingest["hosts"]; hosts) {
      if (!hosts.IsMap()) {
        return absl::InvalidArgumentError(
            "config key ingest.hosts must be a mapping of {keep_domain, aliases}");
      }
      if (hosts["keep_domain"]) rules.keep_domain = hosts["keep_domain"].as<bool>();
      if (const YAML::Node aliases = hosts["aliases"]; aliases) {
        if (!aliases.IsMap()) {
          return absl::InvalidArgumentError(
              "config key ingest.hosts.aliases must map a host name to the host it stands for");
        }
        for (const auto& entry : aliases) {
          const std::string from = entry.first.as<std::string>();
          const std::string to = entry.second.as<std::string>();
          if (from.empty() || to.empty()) {
            return absl::InvalidArgumentError(absl::StrCat(
                "config key ingest.hosts.aliases: \"", from, "\" -> \"", to, "\" has an empty name"));
          }
          rules.aliases[Normalize(from, rules.keep_domain)] = Normalize(to, rules.keep_domain);
        }
      }
    }
    if (const YAML::Node attribution = ingest["attribution"];
        attribution && attribution["pod_labels"]) {
      const YAML::Node list = attribution["pod_labels"];
      if (!list.IsSequence()) {
        return absl::InvalidArgumentError(
            "config key ingest.attribution.pod_labels must be a list of {pod, namespace}");
      }
      rules.pod_labels.clear();
      for (size_t i = 0; i < list.size(); ++i) {
        const YAML::Node e = list[i];
        if (!e.IsMap() || !e["pod"] || !e["namespace"]) {
          return absl::InvalidArgumentError(absl::StrCat(
              "config key ingest.attribution.pod_labels[", i, "] needs pod and namespace"));
        }
        rules.pod_labels.push_back({e["pod"].as<std::string>(), e["namespace"].as<std::string>()});
      }
    }
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("config key ingest.hosts or ingest.attribution: ", e.what()));
  }
  return rules;
}

}  // namespace goodput::ingest
