// Forwarding of OFU windows to mfu with catch-up, against a real PostgreSQL and a receiver
// that keeps its watermark in memory as the API describes: every committed job-level window
// arrives in sequence order; a receiver that was down is caught up when it returns; a
// receiver that lost its state reports a gap and is re-sent what it lacks; a restarted
// forwarder resumes from its recorded acknowledgement without re-sending.

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "goodput/v1/mfu.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "services/ofu/ofu_forwarder.h"
#include "services/ofu/ofu_store.h"
#include "services/platform/ordered_forwarder.h"
#include "tests/support/child_process.h"
#include "tests/support/free_port.h"
#include "tests/support/ofu_job_fixture.h"
#include "tests/support/ordered_receiver.h"

namespace goodput::ofu {
namespace {

namespace v1 = ::goodput::v1;

constexpr int64_t kStartMs = goodput::testing::kOfuJobStartMs;

// An mfu stand-in: applies pushes in order per producer, keeps the newest revision of each
// window, and counts what it applied.
class FakeMfu final : public v1::MfuService::CallbackService {
 public:
  grpc::ServerUnaryReactor* PushOfuWindows(grpc::CallbackServerContext* ctx,
                                           const v1::PushOfuWindowsRequest* req,
                                           v1::PushOfuWindowsResponse* resp) override {
    absl::MutexLock lock(&mu_);
    if (goodput::testing::AcceptInOrder(watermark_, req->position(), resp->mutable_ack())) {
      for (const v1::OfuWindow& w : req->windows()) {
        windows_[{w.job().job_id(), w.start_time().seconds()}] = w;
      }
      ++applied_;
    }
    auto* reactor = ctx->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
  std::map<std::pair<std::string, int64_t>, v1::OfuWindow> Windows() {
    absl::MutexLock lock(&mu_);
    return windows_;
  }
  int applied() {
    absl::MutexLock lock(&mu_);
    return applied_;
  }

 private:
  absl::Mutex mu_;
  std::map<std::string, int64_t> watermark_;
  std::map<std::pair<std::string, int64_t>, v1::OfuWindow> windows_;
  int applied_ = 0;
};

struct Receiver {
  explicit Receiver(int port) {
    grpc::ServerBuilder b;
    b.AddListeningPort(absl::StrCat("127.0.0.1:", port), grpc::InsecureServerCredentials());
    b.RegisterService(&service);
    server = b.BuildAndStart();
  }
  ~Receiver() { server->Shutdown(std::chrono::system_clock::now()); }
  FakeMfu service;
  std::unique_ptr<grpc::Server> server;
};

class OfuForwarding : public goodput::testing::OfuJobFixture {
 protected:
  std::unique_ptr<platform::OrderedForwarder> Forwarder(int port) {
    return std::make_unique<platform::OrderedForwarder>(
        ForwardLog(store_.get()),
        std::vector<platform::OrderedTarget>{
            MfuTarget(store_.get(),
                      grpc::CreateChannel(absl::StrCat("127.0.0.1:", port),
                                          grpc::InsecureChannelCredentials()),
                      "", absl::Seconds(2))},
        platform::OrderedForwarderOptions{}, platform::Logger());
  }

  // Job-level windows in PostgreSQL: start -> (revision, sample_count).
  std::map<int64_t, std::pair<int, int64_t>> Stored() {
    auto rows = store_->Windows(1, false, 0, kStartMs * 2, 0);
    EXPECT_TRUE(rows.ok());
    std::map<int64_t, std::pair<int, int64_t>> out;
    for (const StoredWindow& w : *rows) {
      out[w.result.start_ms / 1000] = {w.revision, w.result.sample_count};
    }
    return out;
  }
  static std::map<int64_t, std::pair<int, int64_t>> Received(FakeMfu& mfu) {
    std::map<int64_t, std::pair<int, int64_t>> out;
    for (const auto& [key, w] : mfu.Windows()) {
      out[key.second] = {w.revision(), w.sample_count()};
    }
    return out;
  }
};

TEST_F(OfuForwarding, DeliversEveryWindowInOrderAndCatchesUpAfterOutagesAndLostState) {
  auto port = goodput::testing::FreePort();
  ASSERT_TRUE(port.ok());
  auto receiver = std::make_unique<Receiver>(*port);
  ASSERT_NE(receiver->server, nullptr);
  auto forwarder = Forwarder(*port);

  Feed(0, 10);
  {
    absl::Status st = forwarder->StepOnce(0);
    ASSERT_TRUE(st.ok()) << st;
  }
  EXPECT_EQ(Received(receiver->service), Stored());
  EXPECT_GE(Stored().size(), 8u);

  // Receiver down: pushes fail, nothing is acknowledged, windows keep being committed.
  receiver.reset();
  Feed(10, 20);
  EXPECT_FALSE(forwarder->StepOnce(0).ok());

  // It comes back having lost its state: it reports a gap and gets everything again.
  // (The channel reconnects with a backoff, so the forwarder retries as its loop would.)
  receiver = std::make_unique<Receiver>(*port);
  ASSERT_TRUE(goodput::testing::PollUntil([&] { return forwarder->StepOnce(0).ok(); },
                                          absl::Seconds(30), absl::Milliseconds(200)));
  EXPECT_EQ(Received(receiver->service), Stored());

  // A restarted forwarder resumes from its recorded acknowledgement: nothing is re-applied.
  const int applied = receiver->service.applied();
  forwarder = Forwarder(*port);
  {
    absl::Status st = forwarder->StepOnce(0);
    ASSERT_TRUE(st.ok()) << st;
  }
  EXPECT_EQ(receiver->service.applied(), applied);

  // More windows, and the last ones finalized when the job goes quiet.
  Feed(20, 25);
  now_ += 3'600'000;
  Feed(25, 25);
  {
    absl::Status st = forwarder->StepOnce(0);
    ASSERT_TRUE(st.ok()) << st;
  }
  const auto received = Received(receiver->service);
  EXPECT_EQ(received, Stored());
  int64_t samples = 0;
  for (const auto& [start, w] : received) samples += w.second;
  EXPECT_EQ(samples, 25 * 6 * 4);
  for (const auto& [key, w] : receiver->service.Windows()) EXPECT_TRUE(w.finalized());
}

}  // namespace
}  // namespace goodput::ofu
