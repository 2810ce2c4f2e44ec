// Scraping dcgm-exporter endpoints: each configured target is fetched on its own interval by
// a background thread, parsed with ParseDcgmExposition (the scrape time stamps lines without
// a timestamp, the URL's host is the default `Hostname`) and stored through IngestPipeline as
// batch "scrape-<url>-<scrape time>". The status of each target (last scrape, samples,
// errors) is kept for ListScrapeTargets.
//
// dcgm-exporter's profiling fields are averages over DCGM's collection interval; scraping
// less often than every 30 s turns OFU into an average of averages over a longer span.
// Such targets are accepted with a warning (`interval_above_limit`).
//
//   ASSIGN_OR_RETURN(std::vector<ScrapeTarget> targets, ParseScrapeTargets(config.root()));
//   Scraper scraper(std::move(targets), &pipeline, CurlFetch, NowUnixMs, logger);
//   scraper.Start();  ...  scraper.Stop();
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "goodput/v1/ingest.pb.h"
#include "services/ingest/ingest_service.h"
#include "services/ingest/serving_store.h"
#include "services/platform/logging.h"
#include "yaml-cpp/yaml.h"

namespace goodput::ingest {

// Above this interval a scrape gives an average of averages (see the file comment).
inline constexpr int64_t kMaxAccurateScrapeIntervalS = 30;

struct ScrapeTarget {
  std::string url = {};      // "http://gpu-node-042:9400/metrics"
  std::string cluster = {};  // cluster its samples belong to
  absl::Duration interval = absl::Seconds(15);
  std::map<std::string, std::string> labels = {};  // added to every sample
  bool interval_above_limit() const {
    return interval > absl::Seconds(kMaxAccurateScrapeIntervalS);
  }
};

// Reads `ingest.scrape.targets` (a list of {url, cluster, interval_s, labels}) from the
// config document; an absent key is no targets. INVALID_ARGUMENT names the entry and key.
absl::StatusOr<std::vector<ScrapeTarget>> ParseScrapeTargets(const YAML::Node& root);

// The warning logged for a target scraped less often than every 30 s; empty otherwise.
std::string IntervalWarning(const ScrapeTarget& target);

// Fetches `url`; the body on HTTP 200, UNAVAILABLE naming the URL and the error otherwise.
using FetchFn =
    std::function<absl::StatusOr<std::string>(const std::string& url, absl::Duration timeout)>;

// Fetches with libcurl (http and https; at most 64 MiB).
absl::StatusOr<std::string> CurlFetch(const std::string& url, absl::Duration timeout);

class Scraper {
 public:
  // `pipeline` must outlive the scraper; `now_unix_ms` is the clock.
  Scraper(std::vector<ScrapeTarget> targets, IngestPipeline* pipeline, FetchFn fetch,
          std::function<int64_t()> now_unix_ms, platform::Logger logger);
  ~Scraper();
  Scraper(const Scraper&) = delete;
  Scraper& operator=(const Scraper&) = delete;

  // Stores the serving engines' lines of each scraped body (a vLLM or SGLang /metrics
  // endpoint is a target like dcgm-exporter) through `store`; call before Start.
  void set_serving_store(ServingStore* store) { serving_store_ = store; }

  // Starts one thread per target; the first scrape is immediate.
  void Start();
  // Stops the threads (a scrape in progress finishes first). Idempotent.
  void Stop();

  // Scrapes target `index` once, now, and records the outcome. Used by the threads and tests.
  void ScrapeOnce(size_t index);

  // Status of every target, ordered by URL (the ListScrapeTargets view).
  std::vector<v1::ScrapeTargetStatus> Status() const;

 private:
  struct State {
    int64_t last_scrape_unix_ms = 0;
    int64_t last_duration_ms = 0;
    std::string last_error;
    int64_t last_stored_count = 0;
    int64_t last_refused_count = 0;
    int64_t consecutive_failures = 0;
    int64_t scrapes = 0;
  };

  std::vector<ScrapeTarget> targets_;
  IngestPipeline* pipeline_;
  ServingStore* serving_store_ = nullptr;
  FetchFn fetch_;
  std::function<int64_t()> now_unix_ms_;
  platform::Logger logger_;
  mutable absl::Mutex mu_;
  std::vector<State> states_ ABSL_GUARDED_BY(mu_);
  absl::Notification stop_;
  std::vector<std::thread> threads_;
};

// IngestService with ListScrapeTargets answered from a Scraper; PushSamples and
// PushExposition are those of IngestServiceImpl. Every method is served with the callback API
// (no thread per call); the synchronous signatures are the same code, for in-process callers.
class ScrapingIngestService final
    : public v1::IngestService::WithRawCallbackMethod_PushSamples<
          v1::IngestService::CallbackService> {
 public:
  // Both must outlive the service; `scraper` may be null (no targets configured).
  ScrapingIngestService(IngestServiceImpl* ingest, const Scraper* scraper)
      : ingest_(ingest), scraper_(scraper) {}

  grpc::ServerReadReactor<grpc::ByteBuffer>* PushSamples(grpc::CallbackServerContext* context,
                                                         grpc::ByteBuffer* response) override {
    return ingest_->PushSamples(context, response);
  }
  grpc::ServerUnaryReactor* PushExposition(grpc::CallbackServerContext* context,
                                           const v1::PushExpositionRequest* request,
                                           v1::PushExpositionResponse* response) override {
    return Done(context, ingest_->PushExposition(context, request, response));
  }
  grpc::ServerUnaryReactor* ListScrapeTargets(grpc::CallbackServerContext* context,
                                              const v1::ListScrapeTargetsRequest* request,
                                              v1::ListScrapeTargetsResponse* response) override {
    return Done(context, ListScrapeTargets(static_cast<grpc::ServerContext*>(nullptr), request,
                                           response));
  }

  // Filters by cluster and health; pages by URL (page_token = last URL of the previous page).
  grpc::Status ListScrapeTargets(grpc::ServerContext* context,
                                 const v1::ListScrapeTargetsRequest* request,
                                 v1::ListScrapeTargetsResponse* response) override;

 private:
  static grpc::ServerUnaryReactor* Done(grpc::CallbackServerContext* context,
                                        const grpc::Status& status) {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(status);
    return reactor;
  }

  IngestServiceImpl* ingest_;
  const Scraper* scraper_;
};

}  // namespace goodput::ingest
