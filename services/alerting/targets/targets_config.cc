#include "services/alerting/targets/targets_config.h"

#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "services/alerting/targets/admin_comment_target.h"
#include "services/alerting/targets/alertmanager_target.h"
#include "services/alerting/targets/osmo_target.h"
#include "services/alerting/targets/slurm_target.h"
#include "services/alerting/targets/smtp_target.h"
#include "services/alerting/targets/webhook_target.h"

namespace goodput::alerting {
namespace {

using Headers = std::vector<std::pair<std::string, std::string>>;

// Reads one entry of alerting.targets, remembering which keys were used so that a typo is
// reported instead of silently ignored.
class Entry {
 public:
  Entry(const YAML::Node& node, std::string where) : node_(node), where_(std::move(where)) {}

  const std::string& where() const { return where_; }
  // Marks a key read elsewhere as known.
  void Known(const std::string& key) { used_.insert(key); }

  absl::Status Error(const std::string& key, const std::string& problem) const {
    return absl::InvalidArgumentError(absl::StrCat(where_, ".", key, ": ", problem));
  }

  absl::StatusOr<std::optional<std::string>> OptString(const std::string& key) {
    used_.insert(key);
    const YAML::Node v = node_[key];
    if (!v || v.IsNull()) return std::nullopt;
    if (!v.IsScalar()) return Error(key, "must be a single value");
    return v.as<std::string>();
  }
  absl::StatusOr<std::string> String(const std::string& key, const std::string& fallback) {
    absl::StatusOr<std::optional<std::string>> v = OptString(key);
    if (!v.ok()) return v.status();
    return v->value_or(fallback);
  }
  absl::StatusOr<std::string> Required(const std::string& key) {
    absl::StatusOr<std::optional<std::string>> v = OptString(key);
    if (!v.ok()) return v.status();
    if (!v->has_value() || (*v)->empty()) return Error(key, "is required");
    return **v;
  }
  absl::StatusOr<bool> Bool(const std::string& key, bool fallback) {
    absl::StatusOr<std::optional<std::string>> v = OptString(key);
    if (!v.ok()) return v.status();
    if (!v->has_value()) return fallback;
    const std::string s = absl::AsciiStrToLower(**v);
    if (s == "true" || s == "yes" || s == "on" || s == "1") return true;
    if (s == "false" || s == "no" || s == "off" || s == "0") return false;
    return Error(key, absl::StrCat("\"", **v, "\" is not true or false"));
  }
  absl::StatusOr<double> Positive(const std::string& key, double fallback) {
    absl::StatusOr<std::optional<std::string>> v = OptString(key);
    if (!v.ok()) return v.status();
    if (!v->has_value()) return fallback;
    double d = 0;
    if (!absl::SimpleAtod(**v, &d) || !(d > 0)) {
      return Error(key, absl::StrCat("\"", **v, "\" is not a number > 0"));
    }
    return d;
  }
  absl::StatusOr<std::vector<std::string>> StringList(const std::string& key,
                                                      std::vector<std::string> fallback) {
    used_.insert(key);
    const YAML::Node v = node_[key];
    if (!v || v.IsNull()) return fallback;
    if (!v.IsSequence() || v.size() == 0) return Error(key, "must be a non-empty list");
    std::vector<std::string> out;
    for (const YAML::Node& item : v) out.push_back(item.as<std::string>());
    return out;
  }
  absl::StatusOr<Headers> HeaderMap(const std::string& key) {
    used_.insert(key);
    Headers out;
    const YAML::Node v = node_[key];
    if (!v || v.IsNull()) return out;
    if (!v.IsMap()) return Error(key, "must be a map of header name to value");
    for (const auto& kv : v)
      out.emplace_back(kv.first.as<std::string>(), kv.second.as<std::string>());
    return out;
  }
  // A secret given inline (`key`), in a file (`key_file`, e.g. a mounted Kubernetes secret)
  // or in an environment variable (`key_env`); at most one of them.
  absl::StatusOr<std::string> Secret(const std::string& key, bool required) {
    absl::StatusOr<std::optional<std::string>> inline_value = OptString(key);
    if (!inline_value.ok()) return inline_value.status();
    absl::StatusOr<std::optional<std::string>> file = OptString(key + "_file");
    if (!file.ok()) return file.status();
    absl::StatusOr<std::optional<std::string>> env = OptString(key + "_env");
    if (!env.ok()) return env.status();
    const int given = inline_value->has_value() + file->has_value() + env->has_value();
    if (given > 1)
      return Error(key, absl::StrCat("give one of ", key, ", ", key, "_file, ", key, "_env"));
    std::string value;
    if (inline_value->has_value()) value = **inline_value;
    if (file->has_value()) {
      std::ifstream in(**file);
      if (!in) return Error(key + "_file", absl::StrCat("\"", **file, "\" cannot be read"));
      std::stringstream ss;
      ss << in.rdbuf();
      value = std::string(absl::StripTrailingAsciiWhitespace(ss.str()));
    }
    if (env->has_value()) {
      const char* v = std::getenv((*env)->c_str());
      if (v == nullptr) return Error(key + "_env", absl::StrCat("variable ", **env, " is not set"));
      value = v;
    }
    if (required && value.empty()) {
      return Error(key, absl::StrCat("is required (or ", key, "_file, ", key, "_env)"));
    }
    return value;
  }
  absl::Status CheckNoUnknownKeys() const {
    for (const auto& kv : node_) {
      const std::string key = kv.first.as<std::string>();
      if (!used_.count(key)) return Error(key, "is not a known key for this kind of target");
    }
    return absl::OkStatus();
  }

 private:
  YAML::Node node_;
  std::string where_;
  std::set<std::string> used_;
};

absl::Status CheckUrl(Entry& e, const std::string& key, const std::string& url) {
  if (url.rfind("http://", 0) != 0 && url.rfind("https://", 0) != 0) {
    return e.Error(key, absl::StrCat("\"", url, "\" is not an http:// or https:// URL"));
  }
  return absl::OkStatus();
}

absl::Status CheckSeverity(Entry& e, const std::string& key, const std::string& value) {
  if (value != "info" && value != "warning" && value != "critical") {
    return e.Error(key, absl::StrCat("\"", value, "\" is not info, warning or critical"));
  }
  return absl::OkStatus();
}

// url (without trailing slash), timeout_s, headers, bearer_token[_file|_env].
struct HttpCommon {
  std::string url;
  absl::Duration timeout;
  Headers headers;
};
absl::StatusOr<HttpCommon> ReadHttpCommon(Entry& e) {
  HttpCommon c;
  absl::StatusOr<std::string> url = e.Required("url");
  if (!url.ok()) return url.status();
  if (absl::Status s = CheckUrl(e, "url", *url); !s.ok()) return s;
  c.url = *url;
  while (!c.url.empty() && c.url.back() == '/') c.url.pop_back();
  absl::StatusOr<double> timeout_s = e.Positive("timeout_s", 10);
  if (!timeout_s.ok()) return timeout_s.status();
  c.timeout = absl::Seconds(*timeout_s);
  absl::StatusOr<Headers> headers = e.HeaderMap("headers");
  if (!headers.ok()) return headers.status();
  c.headers = *headers;
  absl::StatusOr<std::string> bearer = e.Secret("bearer_token", false);
  if (!bearer.ok()) return bearer.status();
  if (!bearer->empty()) c.headers.emplace_back("Authorization", absl::StrCat("Bearer ", *bearer));
  return c;
}

absl::StatusOr<std::unique_ptr<Target>> ReadWebhook(Entry& e, const std::string& name) {
  absl::StatusOr<HttpCommon> http = ReadHttpCommon(e);
  if (!http.ok()) return http.status();
  absl::StatusOr<std::string> secret = e.Secret("secret", true);
  if (!secret.ok()) return secret.status();
  return std::make_unique<WebhookTarget>(WebhookTargetConfig{.name = name,
                                                             .url = http->url,
                                                             .secret = *secret,
                                                             .headers = http->headers,
                                                             .timeout = http->timeout});
}

absl::StatusOr<std::unique_ptr<Target>> ReadAlertmanager(Entry& e, const std::string& name) {
  absl::StatusOr<HttpCommon> http = ReadHttpCommon(e);
  if (!http.ok()) return http.status();
  absl::StatusOr<double> resend_s = e.Positive("resend_interval_s", 300);
  if (!resend_s.ok()) return resend_s.status();
  return std::make_unique<AlertmanagerTarget>(
      AlertmanagerTargetConfig{.name = name,
                               .url = http->url,
                               .headers = http->headers,
                               .timeout = http->timeout,
                               .resend_interval = absl::Seconds(*resend_s)});
}

absl::StatusOr<std::unique_ptr<Target>> ReadOsmo(Entry& e, const std::string& name) {
  absl::StatusOr<HttpCommon> http = ReadHttpCommon(e);
  if (!http.ok()) return http.status();
  absl::StatusOr<std::string> cluster = e.Required("cluster");
  if (!cluster.ok()) return cluster.status();
  OsmoTargetConfig c{.name = name,
                     .cluster = *cluster,
                     .url = http->url,
                     .headers = http->headers,
                     .timeout = http->timeout};
  absl::StatusOr<std::vector<std::string>> keys =
      e.StringList("workflow_label_keys", c.workflow_label_keys);
  if (!keys.ok()) return keys.status();
  c.workflow_label_keys = *keys;
  absl::StatusOr<std::string> prefix = e.String("tag_prefix", c.tag_prefix);
  if (!prefix.ok()) return prefix.status();
  c.tag_prefix = *prefix;
  absl::StatusOr<bool> cancel = e.Bool("cancel", false);
  if (!cancel.ok()) return cancel.status();
  c.cancel = *cancel;
  absl::StatusOr<std::string> min = e.String("cancel_min_severity", c.cancel_min_severity);
  if (!min.ok()) return min.status();
  if (absl::Status s = CheckSeverity(e, "cancel_min_severity", *min); !s.ok()) return s;
  c.cancel_min_severity = *min;
  return std::make_unique<OsmoTarget>(std::move(c));
}

absl::StatusOr<std::unique_ptr<Target>> ReadSlurm(Entry& e, const std::string& name) {
  SlurmTargetConfig c{.name = name};
  absl::StatusOr<std::string> mode = e.String("mode", "scontrol");
  if (!mode.ok()) return mode.status();
  if (*mode == "rest") {
    c.mode = SlurmTargetConfig::Mode::kRest;
  } else if (*mode != "scontrol") {
    return e.Error("mode", absl::StrCat("\"", *mode, "\" is not scontrol or rest"));
  }
  // A scheduler target acts on the jobs of one cluster: job 777001 of another cluster is
  // another job.
  absl::StatusOr<std::string> cluster = e.Required("cluster");
  if (!cluster.ok()) return cluster.status();
  c.cluster = *cluster;
  absl::StatusOr<double> timeout_s = e.Positive("timeout_s", 10);
  if (!timeout_s.ok()) return timeout_s.status();
  c.timeout = absl::Seconds(*timeout_s);
  for (auto [key, field] : {std::pair{"notify", &c.notify}, std::pair{"comment", &c.comment},
                            std::pair{"requeue", &c.requeue}, std::pair{"hold", &c.hold}}) {
    absl::StatusOr<bool> b = e.Bool(key, *field);
    if (!b.ok()) return b.status();
    *field = *b;
  }
  absl::StatusOr<std::string> min = e.String("action_min_severity", c.action_min_severity);
  if (!min.ok()) return min.status();
  if (absl::Status s = CheckSeverity(e, "action_min_severity", *min); !s.ok()) return s;
  c.action_min_severity = *min;
  if (c.hold && !c.requeue) {
    return e.Error("hold", "needs requeue: true (a running job is held by requeuing it held)");
  }
  // Without it the job's owner could forge the marker that tells a retry the job has it.
  absl::StatusOr<std::string> marker_secret = e.Secret("marker_secret", c.comment);
  if (!marker_secret.ok()) return marker_secret.status();
  c.marker_secret = *marker_secret;
  if (c.mode == SlurmTargetConfig::Mode::kScontrol) {
    for (auto [key, field] :
         {std::pair{"scontrol_path", &c.scontrol_path}, std::pair{"squeue_path", &c.squeue_path}}) {
      absl::StatusOr<std::string> path = e.String(key, *field);
      if (!path.ok()) return path.status();
      *field = *path;
    }
    absl::StatusOr<std::string> conf = e.String("slurm_conf", "");
    if (!conf.ok()) return conf.status();
    c.slurm_conf = *conf;
    if (!c.notify && !c.comment)
      return e.Error("notify", "and comment are both off: nothing to send");
  } else {
    absl::StatusOr<std::string> url = e.Required("url");
    if (!url.ok()) return url.status();
    if (absl::Status s = CheckUrl(e, "url", *url); !s.ok()) return s;
    c.rest_url = *url;
    while (!c.rest_url.empty() && c.rest_url.back() == '/') c.rest_url.pop_back();
    absl::StatusOr<std::string> socket = e.String("unix_socket", "");
    if (!socket.ok()) return socket.status();
    c.rest_unix_socket = *socket;
    absl::StatusOr<std::string> user = e.String("user_name", "");
    if (!user.ok()) return user.status();
    absl::StatusOr<std::string> token = e.Secret("token", false);
    if (!token.ok()) return token.status();
    if (!user->empty()) c.headers.emplace_back("X-SLURM-USER-NAME", *user);
    if (!token->empty()) c.headers.emplace_back("X-SLURM-USER-TOKEN", *token);
    if (c.requeue) return e.Error("requeue", "is only available with mode: scontrol");
    if (!c.comment)
      return e.Error("comment", "cannot be off with mode: rest (the comment is all it sets)");
  }
  return std::make_unique<SlurmTarget>(std::move(c));
}

absl::StatusOr<std::unique_ptr<Target>> ReadAdminComment(Entry& e, const std::string& name) {
  AdminCommentTargetConfig c{.name = name};
  absl::StatusOr<std::string> cluster = e.Required("cluster");
  if (!cluster.ok()) return cluster.status();
  c.cluster = *cluster;
  absl::StatusOr<std::string> mode = e.String("mode", "sacctmgr");
  if (!mode.ok()) return mode.status();
  if (*mode == "scontrol") {
    c.mode = AdminCommentTargetConfig::Mode::kScontrol;
  } else if (*mode != "sacctmgr") {
    return e.Error("mode", absl::StrCat("\"", *mode, "\" is not sacctmgr or scontrol"));
  }
  for (auto [key, field] : {std::pair{"scontrol_path", &c.scontrol_path},
                            std::pair{"sacctmgr_path", &c.sacctmgr_path}}) {
    absl::StatusOr<std::string> path = e.String(key, *field);
    if (!path.ok()) return path.status();
    if (path->empty()) return e.Error(key, "must not be empty");
    *field = *path;
  }
  absl::StatusOr<std::string> conf = e.String("slurm_conf", "");
  if (!conf.ok()) return conf.status();
  c.slurm_conf = *conf;
  absl::StatusOr<double> timeout_s = e.Positive("timeout_s", 15);
  if (!timeout_s.ok()) return timeout_s.status();
  c.timeout = absl::Seconds(*timeout_s);
  return std::make_unique<AdminCommentTarget>(std::move(c));
}

absl::StatusOr<std::unique_ptr<Target>> ReadSmtp(Entry& e, const std::string& name,
                                                 std::string* warning) {
  SmtpTargetConfig c{.name = name};
  absl::StatusOr<std::string> url = e.Required("url");
  if (!url.ok()) return url.status();
  if (url->rfind("smtp://", 0) != 0 && url->rfind("smtps://", 0) != 0) {
    return e.Error("url", absl::StrCat("\"", *url, "\" is not an smtp:// or smtps:// URL"));
  }
  c.url = *url;
  absl::StatusOr<std::string> username = e.String("username", "");
  if (!username.ok()) return username.status();
  c.username = *username;
  absl::StatusOr<std::string> password = e.Secret("password", false);
  if (!password.ok()) return password.status();
  c.password = *password;
  if (!c.password.empty() && c.username.empty()) {
    return e.Error("username", "is required with a password");
  }
  // Credentials never cross the network in clear unless the configuration says so: with a
  // username, an smtp:// relay must offer STARTTLS unless `starttls: none` is given.
  const bool clear_text = url->rfind("smtp://", 0) == 0;
  const bool credentials = !c.username.empty();
  absl::StatusOr<std::optional<std::string>> starttls = e.OptString("starttls");
  if (!starttls.ok()) return starttls.status();
  const std::string mode = starttls->value_or(credentials ? "required" : "none");
  if (mode == "opportunistic") {
    c.starttls = SmtpTargetConfig::StartTls::kOpportunistic;
  } else if (mode == "required") {
    c.starttls = SmtpTargetConfig::StartTls::kRequired;
  } else if (mode == "none" || mode == "off") {
    c.starttls = SmtpTargetConfig::StartTls::kOff;
  } else {
    return e.Error("starttls",
                   absl::StrCat("\"", mode, "\" is not required, opportunistic or none (off)"));
  }
  if (credentials && clear_text && c.starttls != SmtpTargetConfig::StartTls::kRequired) {
    *warning = absl::StrCat("smtp target ", name, ": starttls: ", mode,
                            " sends the credentials of ", c.username, " to ", *url,
                            c.starttls == SmtpTargetConfig::StartTls::kOff
                                ? " in clear text"
                                : " in clear text whenever the relay does not offer STARTTLS",
                            " (the default with a username is starttls: required)");
  }
  absl::StatusOr<std::string> ca_file = e.String("ca_file", "");
  if (!ca_file.ok()) return ca_file.status();
  c.ca_file = *ca_file;
  absl::StatusOr<std::string> from = e.Required("from");
  if (!from.ok()) return from.status();
  if (absl::Status s = CheckMailAddress(*from); !s.ok()) {
    return e.Error("from", std::string(s.message()));
  }
  c.from = *from;
  absl::StatusOr<std::string> from_name = e.String("from_name", c.from_name);
  if (!from_name.ok()) return from_name.status();
  c.from_name = *from_name;
  absl::StatusOr<std::vector<std::string>> to = e.StringList("to", {});
  if (!to.ok()) return to.status();
  for (size_t i = 0; i < to->size(); ++i) {
    if (absl::Status s = CheckMailAddress((*to)[i]); !s.ok()) {
      return e.Error(absl::StrCat("to[", i, "]"), std::string(s.message()));
    }
  }
  c.to = *to;
  absl::StatusOr<double> timeout_s = e.Positive("timeout_s", 30);
  if (!timeout_s.ok()) return timeout_s.status();
  c.timeout = absl::Seconds(*timeout_s);
  return std::make_unique<SmtpTarget>(std::move(c));
}

}  // namespace

absl::StatusOr<std::vector<ConfiguredTarget>> ParseTargets(const platform::ConfigTree& config) {
  std::vector<ConfiguredTarget> out;
  const YAML::Node alerting = config.root()["alerting"];
  if (!alerting || !alerting.IsMap()) return out;
  const YAML::Node list = alerting["targets"];
  if (!list || list.IsNull()) return out;
  if (!list.IsSequence()) {
    return absl::InvalidArgumentError("alerting.targets: must be a list of {name, kind, ...}");
  }
  std::set<std::string> names;
  for (size_t i = 0; i < list.size(); ++i) {
    const YAML::Node node = list[i];
    std::string where = absl::StrCat("alerting.targets[", i, "]");
    if (!node.IsMap()) return absl::InvalidArgumentError(absl::StrCat(where, ": must be a map"));
    Entry e(node, where);
    absl::StatusOr<std::string> name = e.Required("name");
    if (!name.ok()) return name.status();
    e = Entry(node, absl::StrCat(where, " (", *name, ")"));
    e.Known("name");
    if (!names.insert(*name).second) {
      return e.Error("name", absl::StrCat("\"", *name, "\" is used by an earlier target"));
    }
    absl::StatusOr<std::string> kind = e.Required("kind");
    if (!kind.ok()) return kind.status();
    absl::StatusOr<std::unique_ptr<Target>> target;
    std::string warning;
    if (*kind == "slurm") {
      target = ReadSlurm(e, *name);
    } else if (*kind == "osmo") {
      target = ReadOsmo(e, *name);
    } else if (*kind == "alertmanager") {
      target = ReadAlertmanager(e, *name);
    } else if (*kind == "webhook") {
      target = ReadWebhook(e, *name);
    } else if (*kind == "smtp") {
      target = ReadSmtp(e, *name, &warning);
    } else if (*kind == "slurm_admin_comment") {
      target = ReadAdminComment(e, *name);
    } else {
      return e.Error("kind", absl::StrCat("\"", *kind,
                                          "\" is not one of slurm, osmo, alertmanager, webhook, "
                                          "smtp, slurm_admin_comment"));
    }
    if (!target.ok()) return target.status();
    ConfiguredTarget configured{.target = *std::move(target), .warning = std::move(warning)};
    if (const YAML::Node rl = node["rate_limit"]; rl && !rl.IsNull()) {
      if (!rl.IsMap()) return e.Error("rate_limit", "must be {per_minute, burst}");
      Entry r(rl, absl::StrCat(e.where(), ".rate_limit"));
      absl::StatusOr<double> per_minute = r.Positive("per_minute", 0);
      if (!per_minute.ok()) return per_minute.status();
      if (*per_minute <= 0) return r.Error("per_minute", "is required");
      absl::StatusOr<double> burst = r.Positive("burst", 1);
      if (!burst.ok()) return burst.status();
      if (*burst < 1) return r.Error("burst", absl::StrCat(*burst, " must be >= 1"));
      if (absl::Status s = r.CheckNoUnknownKeys(); !s.ok()) return s;
      configured.rate_limit = RateLimit{.per_minute = *per_minute, .burst = *burst};
    }
    e.Known("rate_limit");
    if (absl::Status s = e.CheckNoUnknownKeys(); !s.ok()) return s;
    out.push_back(std::move(configured));
  }
  return out;
}

}  // namespace goodput::alerting
