#pragma once

// A local webhook endpoint for tests: an HTTP server on 127.0.0.1 that answers every POST to
// /hook with 200 "ok" and keeps each post's idempotency key, signature headers and body.
//
//   WebhookReceiver hooks(port);
//   ASSERT_TRUE(hooks.ok());
//   ... configure a webhook target at http://127.0.0.1:<port>/hook ...
//   EXPECT_EQ(hooks.keys().size(), 2u);

#include <string>
#include <thread>
#include <vector>

#include <httplib.h>

#include "absl/synchronization/mutex.h"

namespace goodput::testing {

class WebhookReceiver {
 public:
  struct Post {
    std::string idempotency_key;
    std::string timestamp;  // X-Goodput-Timestamp
    std::string signature;  // X-Goodput-Signature
    std::string body;
  };

  explicit WebhookReceiver(int port) {
    server_.Post("/hook", [this](const httplib::Request& req, httplib::Response& res) {
      absl::MutexLock lock(&mu_);
      posts_.push_back({.idempotency_key = req.get_header_value("Idempotency-Key"),
                        .timestamp = req.get_header_value("X-Goodput-Timestamp"),
                        .signature = req.get_header_value("X-Goodput-Signature"),
                        .body = req.body});
      res.set_content("ok", "text/plain");
    });
    ok_ = server_.bind_to_port("127.0.0.1", port);
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (ok_ && !server_.is_running()) std::this_thread::yield();
  }
  WebhookReceiver(const WebhookReceiver&) = delete;
  WebhookReceiver& operator=(const WebhookReceiver&) = delete;
  ~WebhookReceiver() {
    server_.stop();
    thread_.join();
  }

  // Whether the port could be bound.
  bool ok() const { return ok_; }

  std::vector<Post> posts() {
    absl::MutexLock lock(&mu_);
    return posts_;
  }

  // The idempotency key of every post, in arrival order.
  std::vector<std::string> keys() {
    absl::MutexLock lock(&mu_);
    std::vector<std::string> out;
    out.reserve(posts_.size());
    for (const Post& p : posts_) out.push_back(p.idempotency_key);
    return out;
  }

 private:
  httplib::Server server_;
  bool ok_ = false;
  std::thread thread_;
  absl::Mutex mu_;
  std::vector<Post> posts_;
};

}  // namespace goodput::testing
