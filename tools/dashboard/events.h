// Live updates for the pages as Server-Sent Events. One EventSession per open page: it
// follows OfuService.StreamJobOfu for a job page and AlertService.SubscribeAlerts for every
// page, turning each into an event ("ofu", "alert"; "status" when a source is unavailable,
// e.g. its RPC not built yet). The hub polls the fleet's totals once for all fleet pages and
// sends them "fleet" when they change. The HTTP handler pulls the queued messages with Next();
// sources that fail for a passing reason are retried.
//
//   EventHub hub(&gateway);
//   absl::StatusOr<std::shared_ptr<EventSession>> s =
//       hub.Open({.cluster = "eos", .job_id = "42"}, request.remote_addr);
//   std::string message;
//   while ((*s)->Next(&message, absl::Seconds(15))) write(message);
//   hub.Close(*s);
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "tools/dashboard/gateway.h"

namespace goodput::dashboard {

struct EventFilter {
  std::string cluster = {};  // empty: the whole fleet
  std::string job_id = {};   // set (with cluster): a job page
  // The page may get the whole fleet's totals ("fleet" messages): false for a viewer limited
  // to clusters, a user or a team.
  bool fleet_totals = true;
};

struct EventOptions {
  // How often the fleet's totals are polled for changes (once for all open fleet pages).
  absl::Duration fleet_poll = absl::Seconds(5);
  // Wait before re-opening a stream that failed for a passing reason.
  absl::Duration retry = absl::Seconds(5);
  // Messages kept per session when the browser reads slower than they arrive.
  size_t max_queued = 500;
};

class EventSession {
 public:
  EventSession(Gateway* gateway, EventFilter filter, EventOptions options);
  ~EventSession();
  EventSession(const EventSession&) = delete;
  EventSession& operator=(const EventSession&) = delete;

  // Starts the source threads.
  void Start();
  // The next message, waiting up to `timeout`; false on time-out or once stopped.
  bool Next(std::string* message, absl::Duration timeout);
  // Cancels the streams and joins the threads. Idempotent; callable from several threads.
  void Stop();
  bool stopped();
  // A fleet page (no job).
  bool fleet_page() const { return filter_.job_id.empty(); }
  // A fleet page that gets the whole fleet's totals.
  bool fleet_totals() const { return fleet_page() && filter_.fleet_totals; }
  // Queues a message for the page (the oldest goes when max_queued are waiting).
  void Push(std::string message);

 private:
  // Sleeps up to `d`; false when the session stopped meanwhile.
  bool Pause(absl::Duration d);
  void FollowJobOfu();
  void FollowAlerts();

  Gateway* gateway_;
  EventFilter filter_;
  EventOptions options_;
  absl::Mutex mu_;
  std::deque<std::string> queue_ ABSL_GUARDED_BY(mu_);
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  // Open stream contexts, cancelled by Stop().
  std::set<grpc::ClientContext*> streams_ ABSL_GUARDED_BY(mu_);
  absl::Mutex join_mu_;
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(join_mu_);
};

// How many sessions may be open: in all, and per client (its address), so that one client
// cannot take every stream (and the connection threads that serve them).
struct SessionLimits {
  size_t max_sessions = 64;
  size_t max_sessions_per_client = 8;
};

// Keeps the open sessions so that shutdown can end them all; limits their number.
class EventHub {
 public:
  explicit EventHub(Gateway* gateway, EventOptions options = {}, SessionLimits limits = {})
      : gateway_(gateway), options_(options), limits_(limits) {}
  EventHub(const EventHub&) = delete;
  EventHub& operator=(const EventHub&) = delete;
  ~EventHub() { StopAll(); }

  // A started session for `client`. RESOURCE_EXHAUSTED when the client has
  // max_sessions_per_client open, UNAVAILABLE when max_sessions are open in all or the hub
  // is stopping; the message names the limit.
  absl::StatusOr<std::shared_ptr<EventSession>> Open(EventFilter filter, const std::string& client);
  // Forgets a session (after Stop()).
  void Close(const std::shared_ptr<EventSession>& session);
  // Stops every session (shutdown): their handlers return promptly.
  void StopAll();

 private:
  // While fleet pages are open: the fleet's GPU-hours and jobs over the last 24 hours every
  // fleet_poll; a change is sent to every fleet page. Started by the first fleet page.
  void PollFleet();

  Gateway* gateway_;
  EventOptions options_;
  SessionLimits limits_;
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // Open sessions and the client of each; sessions per client.
  std::map<std::shared_ptr<EventSession>, std::string> sessions_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, size_t> per_client_ ABSL_GUARDED_BY(mu_);
  std::thread fleet_poller_ ABSL_GUARDED_BY(mu_);
};

}  // namespace goodput::dashboard
