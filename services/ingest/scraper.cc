#include "services/ingest/scraper.h"

#include <curl/curl.h>

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "google/protobuf/util/time_util.h"
#include "services/ingest/exposition.h"

namespace goodput::ingest {
namespace {

constexpr size_t kMaxScrapeBytes = 64 << 20;
constexpr absl::Duration kScrapeTimeout = absl::Seconds(10);

size_t AppendBody(char* data, size_t size, size_t count, void* user) {
  auto* body = static_cast<std::string*>(user);
  if (body->size() + size * count > kMaxScrapeBytes) return 0;  // aborts the transfer
  body->append(data, size * count);
  return size * count;
}

}  // namespace

absl::StatusOr<std::vector<ScrapeTarget>> ParseScrapeTargets(const YAML::Node& root) {
  std::vector<ScrapeTarget> targets;
  if (!root.IsMap() || !root["ingest"] || !root["ingest"]["scrape"] ||
      !root["ingest"]["scrape"]["targets"]) {
    return targets;
  }
  const YAML::Node list = root["ingest"]["scrape"]["targets"];
  if (!list.IsSequence()) {
    return absl::InvalidArgumentError(
        "config key ingest.scrape.targets must be a list of {url, cluster, interval_s}");
  }
  for (size_t i = 0; i < list.size(); ++i) {
    const YAML::Node entry = list[i];
    const std::string where = absl::StrCat("ingest.scrape.targets[", i, "]");
    if (!entry.IsMap()) {
      return absl::InvalidArgumentError(absl::StrCat("config key ", where, " must be a mapping"));
    }
    ScrapeTarget target;
    try {
      if (!entry["url"] || entry["url"].as<std::string>().empty()) {
        return absl::InvalidArgumentError(absl::StrCat("config key ", where, ".url is required"));
      }
      target.url = entry["url"].as<std::string>();
      if (target.url.rfind("http://", 0) != 0 && target.url.rfind("https://", 0) != 0) {
        return absl::InvalidArgumentError(absl::StrCat("config key ", where, ".url=\"", target.url,
                                                       "\" must start with http:// or https://"));
      }
      if (!entry["cluster"] || entry["cluster"].as<std::string>().empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("config key ", where, ".cluster is required"));
      }
      target.cluster = entry["cluster"].as<std::string>();
      if (entry["interval_s"]) {
        const double interval_s = entry["interval_s"].as<double>();
        if (!(interval_s >= 0.1 && interval_s <= 3600)) {
          return absl::InvalidArgumentError(absl::StrCat(
              "config key ", where, ".interval_s=", interval_s, " is outside [0.1, 3600]"));
        }
        target.interval = absl::Seconds(interval_s);
      }
      if (entry["labels"]) {
        if (!entry["labels"].IsMap()) {
          return absl::InvalidArgumentError(
              absl::StrCat("config key ", where, ".labels must be a mapping"));
        }
        for (const auto& kv : entry["labels"]) {
          target.labels[kv.first.as<std::string>()] = kv.second.as<std::string>();
        }
      }
    } catch (const YAML::Exception& e) {
      return absl::InvalidArgumentError(
          absl::StrCat("config key ", where, " is not valid: ", e.what()));
    }
    for (const ScrapeTarget& other : targets) {
      if (other.url == target.url) {
        return absl::InvalidArgumentError(
            absl::StrCat("config key ", where, ".url=\"", target.url, "\" is listed twice"));
      }
    }
    targets.push_back(std::move(target));
  }
  return targets;
}

std::string IntervalWarning(const ScrapeTarget& target) {
  if (!target.interval_above_limit()) return "";
  return absl::StrCat("scrape target ", target.url,
                      " has interval_s=", absl::ToDoubleSeconds(target.interval), ", above ",
                      kMaxAccurateScrapeIntervalS,
                      " s: DCGM profiling fields are averages over their collection interval, so "
                      "samples this far apart give an average of averages and OFU loses "
                      "accuracy; use an interval of at most ",
                      kMaxAccurateScrapeIntervalS, " s");
}

absl::StatusOr<std::string> CurlFetch(const std::string& url, absl::Duration timeout) {
  CURL* curl = curl_easy_init();
  if (curl == nullptr) return absl::InternalError("curl_easy_init failed");
  std::string body;
  char error[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, AppendBody);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &body);
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS,
                   static_cast<long>(std::max<int64_t>(1, absl::ToInt64Milliseconds(timeout))));
  curl_easy_setopt(curl, CURLOPT_ACCEPT_ENCODING, "");  // gzip when the exporter offers it
  curl_easy_setopt(curl, CURLOPT_USERAGENT, "goodput-ingest");
  const CURLcode rc = curl_easy_perform(curl);
  long http_status = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &http_status);
  curl_easy_cleanup(curl);
  if (rc != CURLE_OK) {
    return absl::UnavailableError(absl::StrCat(
        "GET ", url, " failed: ", error[0] != 0 ? error : curl_easy_strerror(rc),
        rc == CURLE_WRITE_ERROR ? absl::StrCat(" (body above ", kMaxScrapeBytes, " bytes)") : ""));
  }
  if (http_status != 200) {
    return absl::UnavailableError(absl::StrCat("GET ", url, " answered HTTP ", http_status));
  }
  return body;
}

Scraper::Scraper(std::vector<ScrapeTarget> targets, IngestPipeline* pipeline, FetchFn fetch,
                 std::function<int64_t()> now_unix_ms, platform::Logger logger)
    : targets_(std::move(targets)),
      pipeline_(pipeline),
      fetch_(std::move(fetch)),
      now_unix_ms_(std::move(now_unix_ms)),
      logger_(std::move(logger)),
      states_(targets_.size()) {}

Scraper::~Scraper() { Stop(); }

void Scraper::Start() {
  for (size_t i = 0; i < targets_.size(); ++i) {
    if (std::string warning = IntervalWarning(targets_[i]); !warning.empty()) {
      logger_.Warn(warning, {{"url", targets_[i].url}});
    }
    threads_.emplace_back([this, i] {
      do {
        ScrapeOnce(i);
      } while (!stop_.WaitForNotificationWithTimeout(targets_[i].interval));
    });
  }
}

void Scraper::Stop() {
  if (!stop_.HasBeenNotified()) stop_.Notify();
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
}

void Scraper::ScrapeOnce(size_t index) {
  const ScrapeTarget& target = targets_[index];
  const int64_t start_ms = now_unix_ms_();
  // Scrapes of one target never overlap (the next is due an interval after this one ends),
  // so a slow endpoint only delays the next scrape; 10 s bounds how long.
  absl::StatusOr<std::string> body = fetch_(target.url, kScrapeTimeout);
  absl::Status status = body.status();
  int64_t stored = 0;
  int64_t refused = 0;
  if (body.ok()) {
    ExpositionOptions options;
    options.batch_id = absl::StrCat("scrape-", target.url, "-", start_ms);
    options.default_host = HostFromEndpoint(target.url);
    options.scrape_time_unix_ms = start_ms;
    options.extra_labels = target.labels;
    options.validation = pipeline_->validation_options();
    options.max_labels_per_series = pipeline_->options().max_labels_per_series;
    ExpositionResult parsed = ParseDcgmExposition(*body, options);
    pipeline_->CountSetAside("scrape", parsed.ignored_line_count, parsed.blank_value_count);
    std::vector<Sample> samples;
    samples.reserve(parsed.samples.size());
    for (ExpositionSample& s : parsed.samples) samples.push_back(std::move(s.sample));
    absl::StatusOr<BatchOutcome> outcome = pipeline_->Ingest(
        target.cluster, options.batch_id, "scrape", std::move(samples),
        /*already_validated=*/true, std::move(parsed.refusals), parsed.refused_line_count);
    status = outcome.status();
    if (outcome.ok() && serving_store_ != nullptr) {
      ServingParseOptions serving_options;
      serving_options.cluster = target.cluster;
      serving_options.batch_id = options.batch_id;
      serving_options.default_host = options.default_host;
      serving_options.scrape_time_unix_ms = start_ms;
      serving_options.extra_labels = target.labels;
      serving_options.identity = pipeline_->options().identity;
      serving_options.max_labels_per_series = options.max_labels_per_series;
      ServingBatch serving = ParseServingExposition(*body, serving_options);
      absl::StatusOr<ServingOutcome> served = serving_store_->Store(serving, options.batch_id);
      if (!served.ok()) {
        status = served.status();
      } else {
        stored += served->stored;
        refused += serving.refused_count + served->refused;
      }
    }
    if (outcome.ok()) {
      stored += outcome->result.stored_count;
      refused += outcome->result.refused_count;
      if (!outcome->refusals.empty()) {
        logger_.Warn("scrape refused lines", {{"url", target.url},
                                              {"refused", absl::StrCat(refused)},
                                              {"first", outcome->refusals.front().message}});
      }
    }
  }
  const int64_t duration_ms = now_unix_ms_() - start_ms;
  absl::MutexLock lock(&mu_);
  State& state = states_[index];
  state.last_scrape_unix_ms = start_ms;
  state.last_duration_ms = duration_ms;
  state.last_stored_count = stored;
  state.last_refused_count = refused;
  ++state.scrapes;
  if (status.ok()) {
    state.last_error.clear();
    state.consecutive_failures = 0;
  } else {
    if (state.consecutive_failures == 0) {
      logger_.Warn("scrape failed", {{"url", target.url}, {"error", status.ToString()}});
    }
    state.last_error = std::string(status.message());
    ++state.consecutive_failures;
  }
}

std::vector<v1::ScrapeTargetStatus> Scraper::Status() const {
  std::vector<v1::ScrapeTargetStatus> out;
  absl::MutexLock lock(&mu_);
  for (size_t i = 0; i < targets_.size(); ++i) {
    const ScrapeTarget& target = targets_[i];
    const State& state = states_[i];
    v1::ScrapeTargetStatus s;
    s.set_url(target.url);
    s.set_cluster(target.cluster);
    *s.mutable_interval() = google::protobuf::util::TimeUtil::MillisecondsToDuration(
        absl::ToInt64Milliseconds(target.interval));
    s.set_interval_above_limit(target.interval_above_limit());
    for (const auto& [k, v] : target.labels) (*s.mutable_labels())[k] = v;
    if (state.scrapes > 0) {
      s.set_health(state.consecutive_failures == 0 ? v1::SCRAPE_HEALTH_UP : v1::SCRAPE_HEALTH_DOWN);
      *s.mutable_last_scrape_time() =
          google::protobuf::util::TimeUtil::MillisecondsToTimestamp(state.last_scrape_unix_ms);
      *s.mutable_last_scrape_duration() =
          google::protobuf::util::TimeUtil::MillisecondsToDuration(state.last_duration_ms);
      s.set_last_error(state.last_error);
      s.set_last_stored_count(state.last_stored_count);
      s.set_last_refused_count(state.last_refused_count);
      s.set_consecutive_failures(state.consecutive_failures);
    }
    out.push_back(std::move(s));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.url() < b.url(); });
  return out;
}

grpc::Status ScrapingIngestService::ListScrapeTargets(grpc::ServerContext* context,
                                                      const v1::ListScrapeTargetsRequest* request,
                                                      v1::ListScrapeTargetsResponse* response) {
  if (scraper_ == nullptr) return grpc::Status::OK;
  int page_size = request->page_size() <= 0 ? 100 : std::min(request->page_size(), 1000);
  for (v1::ScrapeTargetStatus& s : scraper_->Status()) {
    if (!request->cluster().empty() && s.cluster() != request->cluster()) continue;
    if (request->health() != v1::SCRAPE_HEALTH_UNSPECIFIED && s.health() != request->health()) {
      continue;
    }
    if (!request->page_token().empty() && s.url() <= request->page_token()) continue;
    if (response->targets_size() == page_size) {
      response->set_next_page_token(response->targets(page_size - 1).url());
      break;
    }
    *response->add_targets() = std::move(s);
  }
  return grpc::Status::OK;
}

}  // namespace goodput::ingest
