#include "services/platform/guarded_http_server.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <deque>
#include <functional>
#include <optional>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "openssl/err.h"
#include "openssl/ssl.h"

namespace goodput::platform {
namespace http_internal {
namespace {

// Requests served on one kept-alive connection before it is closed.
constexpr size_t kMaxRequestsPerConnection = 100;
// A refused connection is drained (its answer written, our side shut) until the client
// closes, goes quiet for kLingerSilence, or kLingerTime has passed; at most kMaxLingering at
// once, beyond which they are closed at once.
constexpr absl::Duration kLingerTime = absl::Seconds(10);
constexpr absl::Duration kLingerSilence = absl::Seconds(2);
constexpr size_t kMaxLingering = 4096;
// Waits are cut into slices this long so that a shutdown is noticed.
constexpr absl::Duration kWaitSlice = absl::Milliseconds(100);
constexpr int kRetryAfterOverloadedS = 1;
constexpr char kTextPlain[] = "text/plain; charset=utf-8";

// Set on the accepting thread while it runs a connection the pool had no room for.
thread_local bool t_overloaded = false;
// The connection the current thread serves (for httplib's handlers, which only see the
// request and the response).
thread_local Connection* t_connection = nullptr;

const char* ReasonPhrase(int status) {
  switch (status) {
    case 400:
      return "Bad Request";
    case 408:
      return "Request Timeout";
    case 413:
      return "Payload Too Large";
    case 415:
      return "Unsupported Media Type";
    case 431:
      return "Request Header Fields Too Large";
    case 503:
      return "Service Unavailable";
    default:
      return "Error";
  }
}

// A whole response, for connections httplib does not answer itself.
std::string BareResponse(int status, absl::string_view message, int retry_after_s = 0) {
  std::string body = absl::StrCat(message, "\n");
  return absl::StrCat(
      "HTTP/1.1 ", status, " ", ReasonPhrase(status), "\r\n",
      retry_after_s > 0 ? absl::StrCat("Retry-After: ", retry_after_s, "\r\n") : std::string(),
      "Connection: close\r\nContent-Type: ", kTextPlain, "\r\nContent-Length: ", body.size(),
      "\r\n\r\n", body);
}

// Waits until `fd` has one of `events` or `deadline` passes; false on time-out, on a poll
// error, or once `stopping()` turns true.
bool WaitFor(int fd, short events, absl::Time deadline, const std::function<bool()>& stopping) {
  while (true) {
    if (stopping && stopping()) return false;
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return false;
    pollfd p{.fd = fd, .events = events, .revents = 0};
    const int ms = static_cast<int>(absl::ToInt64Milliseconds(std::min(left, kWaitSlice))) + 1;
    const int ready = poll(&p, 1, ms);
    if (ready > 0) return true;
    if (ready < 0 && errno != EINTR) return false;
  }
}

}  // namespace

// A limit a request broke, as its answer.
struct Problem {
  int status;
  std::string message;
};

// One client connection as httplib reads and writes it. Counts what each request consumes
// against its budget (headers, then body) and its deadlines, and remembers the limit a
// request broke so that the handlers answer with it.
class Connection final : public httplib::Stream {
 public:
  // `ssl` (may be null: plaintext) is a TLS session over `fd` whose handshake is done; the
  // caller owns it.
  Connection(socket_t fd, SSL* ssl, const HttpLimits& limits,
             const std::atomic<socket_t>* listener)
      : fd_(fd),
        ssl_(ssl),
        limits_(limits),
        stopping_([listener] { return *listener == INVALID_SOCKET; }) {}

  // Waits up to `wait` for the next request to begin; false when none did.
  bool AwaitRequest(absl::Duration wait) const {
    return Buffered() || WaitFor(fd_, POLLIN, absl::Now() + wait, stopping_);
  }

  // A request begins: its deadline runs and its headers count against the header budget.
  void BeginRequest() {
    phase_ = Phase::kHeaders;
    consumed_ = 0;
    budget_ = limits_.max_header_bytes;
    deadline_ = absl::Now() + limits_.request_timeout;
    timed_out_ = false;
    over_budget_ = false;
    wrote_ = false;
    refusal_.reset();
  }

  // The headers are read: `budget` bytes of body may follow; reading more means the body is
  // above `limit` (named by `limit_key`).
  void AllowBody(int64_t budget, int64_t limit, absl::string_view limit_key) {
    phase_ = Phase::kBody;
    consumed_ = 0;
    budget_ = budget;
    body_limit_ = limit;
    body_limit_key_ = std::string(limit_key);
  }

  // The request is answered `status` without reading its body; the connection closes after.
  void Refuse(int status, std::string message) {
    AllowBody(0, body_limit_, body_limit_key_);
    refusal_ = Problem{status, std::move(message)};
  }

  // The limit the current request broke, if any.
  std::optional<Problem> Broken() const {
    if (refusal_.has_value()) return refusal_;
    if (over_budget_ && phase_ == Phase::kHeaders) {
      return Problem{431, absl::StrCat("the request line and headers are above ",
                                       limits_.max_header_bytes, " bytes (http.max_header_bytes)")};
    }
    if (over_budget_) {
      return Problem{413,
                     absl::StrCat("the body is more than ", body_limit_, " bytes; the limit is ",
                                  body_limit_, " bytes (", body_limit_key_, ")")};
    }
    if (timed_out_) {
      return Problem{408, absl::StrCat("the request did not arrive in time: at most ",
                                       absl::FormatDuration(limits_.read_timeout),
                                       " of silence (http.read_timeout_s) and ",
                                       absl::FormatDuration(limits_.request_timeout),
                                       " in all (http.request_timeout_s)")};
    }
    return std::nullopt;
  }

  // Answers a broken request in `response`; false when the request broke nothing.
  bool Answer(httplib::Response& response) const {
    std::optional<Problem> problem = Broken();
    if (!problem.has_value()) return false;
    response.status = problem->status;
    response.set_content(absl::StrCat(problem->message, "\n"), kTextPlain);
    response.set_header("Connection", "close");
    return true;
  }

  // When httplib dropped a request without an answer (its request line broke a limit),
  // answers it here.
  void AnswerDropped() {
    std::optional<Problem> problem = Broken();
    if (wrote_ || !problem.has_value()) return;
    const std::string response = BareResponse(problem->status, problem->message);
    size_t sent = 0;
    while (sent < response.size()) {
      const ssize_t n = write(response.data() + sent, response.size() - sent);
      if (n <= 0) return;
      sent += static_cast<size_t>(n);
    }
  }

  bool must_close() const { return Broken().has_value(); }

  // httplib::Stream
  bool is_readable() const override {
    return Buffered() || WaitFor(fd_, POLLIN, absl::Now() + limits_.read_timeout, stopping_);
  }

  bool is_writable() const override {
    if (!WaitFor(fd_, POLLOUT, absl::Now() + limits_.write_timeout, stopping_)) return false;
    // A client that went away shows as readable with nothing to read.
    pollfd p{.fd = fd_, .events = POLLIN, .revents = 0};
    if (poll(&p, 1, 0) <= 0) return true;
    char byte;
    const ssize_t n = recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    return n > 0 || (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR));
  }

  ssize_t read(char* ptr, size_t size) override {
    const int64_t left = budget_ - consumed_;
    if (left <= 0) {
      over_budget_ = true;
      return -1;
    }
    if (pos_ == len_) {
      const ssize_t n = Fill();
      if (n <= 0) return n;
    }
    const size_t n = std::min({size, len_ - pos_, static_cast<size_t>(left)});
    std::memcpy(ptr, buffer_.data() + pos_, n);
    pos_ += n;
    consumed_ += static_cast<int64_t>(n);
    return static_cast<ssize_t>(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    wrote_ = true;
    const absl::Time deadline = absl::Now() + limits_.write_timeout;
    if (ssl_ != nullptr) {
      if (size == 0) return 0;
      while (true) {
        ERR_clear_error();
        const int n = SSL_write(ssl_, ptr, static_cast<int>(std::min<size_t>(size, 1 << 30)));
        if (n > 0) return n;
        if (!WaitForTls(SSL_get_error(ssl_, n), deadline)) return -1;
      }
    }
    while (true) {
      const ssize_t n = send(fd_, ptr, size, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n >= 0) return n;
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) return -1;
      if (!WaitFor(fd_, POLLOUT, deadline, stopping_)) return -1;
    }
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    Address(getpeername, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    Address(getsockname, ip, port);
  }
  socket_t socket() const override { return fd_; }

 private:
  enum class Phase { kHeaders, kBody };

  // Bytes read but not yet handed to httplib, here or inside the TLS session.
  bool Buffered() const { return pos_ < len_ || (ssl_ != nullptr && SSL_pending(ssl_) > 0); }

  // After a TLS call failed with `error`: waits for the socket as the session needs it; false
  // when the call cannot be retried (a real error, the deadline, a shutdown).
  bool WaitForTls(int error, absl::Time deadline) const {
    if (error == SSL_ERROR_WANT_READ) return WaitFor(fd_, POLLIN, deadline, stopping_);
    if (error == SSL_ERROR_WANT_WRITE) return WaitFor(fd_, POLLOUT, deadline, stopping_);
    return false;
  }

  // Reads what the socket has into the buffer, waiting within the request's deadlines.
  ssize_t Fill() {
    const absl::Time deadline = std::min(absl::Now() + limits_.read_timeout, deadline_);
    if (ssl_ != nullptr) {
      while (true) {
        ERR_clear_error();
        const int n = SSL_read(ssl_, buffer_.data(), static_cast<int>(buffer_.size()));
        pos_ = 0;
        len_ = n > 0 ? static_cast<size_t>(n) : 0;
        if (n > 0) return n;
        const int error = SSL_get_error(ssl_, n);
        if (error == SSL_ERROR_ZERO_RETURN) return 0;
        if (!WaitForTls(error, deadline)) {
          timed_out_ = (error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE) &&
                       absl::Now() >= deadline && !stopping_();
          return -1;
        }
      }
    }
    if (!WaitFor(fd_, POLLIN, deadline, stopping_)) {
      timed_out_ = !stopping_();
      return -1;
    }
    while (true) {
      const ssize_t n = recv(fd_, buffer_.data(), buffer_.size(), 0);
      if (n < 0 && errno == EINTR) continue;
      pos_ = 0;
      len_ = n > 0 ? static_cast<size_t>(n) : 0;
      return n;
    }
  }

  void Address(int (*get)(int, sockaddr*, socklen_t*), std::string& ip, int& port) const {
    sockaddr_storage address{};
    socklen_t length = sizeof(address);
    if (get(fd_, reinterpret_cast<sockaddr*>(&address), &length) != 0) return;
    std::array<char, NI_MAXHOST> host{};
    std::array<char, NI_MAXSERV> service{};
    if (getnameinfo(reinterpret_cast<sockaddr*>(&address), length, host.data(), host.size(),
                    service.data(), service.size(), NI_NUMERICHOST | NI_NUMERICSERV) == 0) {
      ip = host.data();
      port = std::atoi(service.data());
    }
  }

  const socket_t fd_;
  SSL* const ssl_;
  const HttpLimits& limits_;
  const std::function<bool()> stopping_;
  std::array<char, 16 << 10> buffer_{};
  size_t pos_ = 0;
  size_t len_ = 0;

  Phase phase_ = Phase::kHeaders;
  int64_t consumed_ = 0;
  int64_t budget_ = 0;
  absl::Time deadline_ = absl::InfiniteFuture();
  int64_t body_limit_ = 0;
  std::string body_limit_key_ = "http.max_body_bytes";
  bool timed_out_ = false;
  bool over_budget_ = false;
  bool wrote_ = false;
  std::optional<Problem> refusal_;
};

// Closes refused connections gently on a thread of its own: their answer is written and our
// side shut; what the client still sends is discarded until it closes, goes quiet or the
// linger time is over, so that it reads the answer rather than a connection reset.
class LingeringCloser {
 public:
  LingeringCloser() : wake_fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
    thread_ = std::thread([this] { Run(); });
  }
  ~LingeringCloser() {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
    }
    Wake();
    thread_.join();
    close(wake_fd_);
  }
  LingeringCloser(const LingeringCloser&) = delete;
  LingeringCloser& operator=(const LingeringCloser&) = delete;

  // Takes `fd` (its answer written) and closes it once drained.
  void Add(socket_t fd) {
    shutdown(fd, SHUT_WR);
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    {
      absl::MutexLock lock(&mu_);
      if (!stopping_ && count_ < kMaxLingering) {
        ++count_;
        incoming_.push_back(fd);
        fd = INVALID_SOCKET;
      }
    }
    if (fd != INVALID_SOCKET) {
      close(fd);
      return;
    }
    Wake();
  }

 private:
  struct Lingering {
    socket_t fd;
    absl::Time until;        // linger time over
    absl::Time quiet_until;  // silence over
  };

  void Wake() {
    const uint64_t one = 1;
    (void)!::write(wake_fd_, &one, sizeof(one));
  }

  void Run() {
    std::vector<Lingering> lingering;
    std::vector<pollfd> polled;
    std::array<char, 64 << 10> scratch{};
    while (true) {
      {
        absl::MutexLock lock(&mu_);
        const absl::Time now = absl::Now();
        for (socket_t fd : incoming_) {
          lingering.push_back({fd, now + kLingerTime, now + kLingerSilence});
        }
        incoming_.clear();
        if (stopping_) break;
      }
      absl::Time next = absl::Now() + absl::Seconds(1);
      polled.assign(1, pollfd{.fd = wake_fd_, .events = POLLIN, .revents = 0});
      for (const Lingering& l : lingering) {
        next = std::min({next, l.until, l.quiet_until});
        polled.push_back(pollfd{.fd = l.fd, .events = POLLIN, .revents = 0});
      }
      const int ms =
          static_cast<int>(std::max<int64_t>(0, absl::ToInt64Milliseconds(next - absl::Now())) + 1);
      if (poll(polled.data(), polled.size(), ms) < 0 && errno != EINTR) continue;
      if (polled[0].revents != 0) {
        uint64_t ignored;
        (void)!::read(wake_fd_, &ignored, sizeof(ignored));
      }
      const absl::Time now = absl::Now();
      size_t kept = 0;
      for (size_t i = 0; i < lingering.size(); ++i) {
        Lingering l = lingering[i];
        bool done = now >= l.until;
        if (!done && polled[i + 1].revents != 0) {
          const ssize_t n = recv(l.fd, scratch.data(), scratch.size(), 0);
          if (n > 0) {
            l.quiet_until = now + kLingerSilence;
          } else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
            done = true;
          }
        }
        if (!done && now >= l.quiet_until) done = true;
        if (done) {
          close(l.fd);
        } else {
          lingering[kept++] = l;
        }
      }
      const size_t closed = lingering.size() - kept;
      lingering.resize(kept);
      if (closed > 0) {
        absl::MutexLock lock(&mu_);
        count_ -= closed;
      }
    }
    for (const Lingering& l : lingering) close(l.fd);
    absl::MutexLock lock(&mu_);
    for (socket_t fd : incoming_) close(fd);
    incoming_.clear();
  }

  const int wake_fd_;
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  size_t count_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<socket_t> incoming_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

namespace {

// httplib's task queue with a bound: `threads` connections are served at once and
// `max_queued` more wait; a connection beyond that is run at once on the accepting thread
// with t_overloaded set, which answers it 503.
class BoundedPool final : public httplib::TaskQueue {
 public:
  BoundedPool(int threads, int max_queued)
      : capacity_(static_cast<size_t>(threads) + static_cast<size_t>(max_queued)) {
    for (int i = 0; i < threads; ++i) workers_.emplace_back([this] { Work(); });
  }

  void enqueue(std::function<void()> fn) override {
    {
      absl::MutexLock lock(&mu_);
      if (!stopping_ && busy_ + jobs_.size() < capacity_) {
        jobs_.push_back(std::move(fn));
        return;
      }
    }
    t_overloaded = true;
    fn();
    t_overloaded = false;
  }

  void shutdown() override {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
    }
    for (std::thread& worker : workers_) worker.join();
  }

 private:
  void Work() {
    while (true) {
      std::function<void()> fn;
      {
        absl::MutexLock lock(&mu_);
        mu_.Await(absl::Condition(
            +[](BoundedPool* p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(p->mu_) {
              return p->stopping_ || !p->jobs_.empty();
            },
            this));
        // Queued connections still run after a stop: they end at once and close.
        if (jobs_.empty()) return;
        fn = std::move(jobs_.front());
        jobs_.pop_front();
        ++busy_;
      }
      fn();
      absl::MutexLock lock(&mu_);
      --busy_;
    }
  }

  const size_t capacity_;
  absl::Mutex mu_;
  std::deque<std::function<void()>> jobs_ ABSL_GUARDED_BY(mu_);
  size_t busy_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> workers_;
};

// Why a path is refused, if it is: control characters (a NUL would end the file name that
// httplib opens, serving "/index.html%00.js" as JavaScript) and ".." segments.
std::optional<std::string> BadPath(const std::string& path) {
  for (unsigned char c : path) {
    if (c < 0x20 || c == 0x7f) {
      return absl::StrFormat("the path holds the control character %%%02X; it is refused", c);
    }
  }
  for (absl::string_view segment : absl::StrSplit(path, '/')) {
    if (segment == "..") return std::string("the path holds a \"..\" segment; it is refused");
  }
  return std::nullopt;
}

// Methods whose body httplib reads (httplib's detail::expect_content).
bool ReadsBody(const std::string& method) {
  return method == "POST" || method == "PUT" || method == "PATCH" || method == "DELETE" ||
         method == "PRI";
}

// Content encodings httplib inflates while reading a body.
bool Inflated(const std::string& encoding) {
  return encoding == "gzip" || encoding == "deflate" || absl::StrContains(encoding, "br");
}

}  // namespace
}  // namespace http_internal

using http_internal::Connection;
using http_internal::t_connection;

GuardedHttpServer::GuardedHttpServer(HttpLimits limits)
    : limits_(limits), closer_(std::make_unique<http_internal::LingeringCloser>()) {
  // httplib's default also sets SO_REUSEPORT, which would let a second process share a busy
  // port silently; keep only SO_REUSEADDR (fast restarts) so that a taken port is an error.
  set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  new_task_queue = [threads = limits_.threads, queued = limits_.max_queued_connections] {
    return new http_internal::BoundedPool(threads, queued);
  };
  // Only the Keep-Alive header uses these: Connection waits by itself.
  set_keep_alive_max_count(http_internal::kMaxRequestsPerConnection);
  set_keep_alive_timeout(std::max<time_t>(1, absl::ToInt64Seconds(limits_.idle_timeout)));
  set_pre_routing_handler([this](const httplib::Request& request, httplib::Response& response) {
    if (t_connection != nullptr && t_connection->Answer(response)) return HandlerResponse::Handled;
    if (guard_ && guard_(request, response)) return HandlerResponse::Handled;
    return HandlerResponse::Unhandled;
  });
  set_error_handler(HandlerWithResponse([](const httplib::Request&, httplib::Response& response) {
    return t_connection != nullptr && t_connection->Answer(response) ? HandlerResponse::Handled
                                                                     : HandlerResponse::Unhandled;
  }));
  // A client that waits for "100 Continue" gets the refusal instead, before sending a body.
  set_expect_100_continue_handler([](const httplib::Request&, httplib::Response&) {
    if (t_connection == nullptr) return 100;
    std::optional<http_internal::Problem> problem = t_connection->Broken();
    return problem.has_value() ? problem->status : 100;
  });
}

GuardedHttpServer::~GuardedHttpServer() { Shutdown(); }

void GuardedHttpServer::SetBodyLimit(const std::string& pattern, int64_t max_bytes,
                                     std::string config_key) {
  body_limits_.push_back({std::regex(pattern), max_bytes, std::move(config_key)});
}

absl::StatusOr<int> GuardedHttpServer::Start(const std::string& host, int port) {
  // bind_to_port/bind_to_any_port leave the socket listening, so connections made before the
  // serving thread runs wait in the backlog instead of failing.
  int bound = 0;
  if (port == 0) {
    bound = std::max(0, bind_to_any_port(host));
  } else {
    bound = bind_to_port(host, port) ? port : 0;
  }
  if (bound == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen for HTTP on ", host, ":", port,
                                               " (address in use or not local?)"));
  }
  // httplib listens with a backlog of 5: a burst of clients beyond it would wait for their
  // SYN to be retried (a second or more) instead of being accepted and answered.
  ::listen(svr_sock_, SOMAXCONN);
  thread_ = std::thread([this] { listen_after_bind(); });
  // stop() only acts on a running server: wait until the thread has entered its accept loop
  // (it sets the flag first thing), so that Shutdown() right after Start() cannot be lost.
  while (!is_running()) std::this_thread::yield();
  return bound;
}

void GuardedHttpServer::Shutdown() {
  stop();
  if (thread_.joinable()) thread_.join();
}

void GuardedHttpServer::Admit(const httplib::Request& request, Connection& connection) const {
  int64_t limit = limits_.max_body_bytes;
  std::string limit_key = "http.max_body_bytes";
  for (const BodyLimit& route : body_limits_) {
    if (std::regex_match(request.path, route.pattern)) {
      limit = route.max_bytes;
      limit_key = route.config_key;
      break;
    }
  }
  connection.AllowBody(0, limit, limit_key);
  if (std::optional<std::string> bad = http_internal::BadPath(request.path)) {
    return connection.Refuse(400, *std::move(bad));
  }
  const bool chunked =
      absl::EqualsIgnoreCase(request.get_header_value("Transfer-Encoding"), "chunked");
  const bool has_length = request.has_header("Content-Length");
  uint64_t length = 0;
  if (!chunked && has_length) {
    const std::string text = request.get_header_value("Content-Length");
    if (!absl::SimpleAtoi(text, &length)) {
      return connection.Refuse(400, absl::StrCat("Content-Length \"", text, "\" is not a number"));
    }
    if (length > static_cast<uint64_t>(limit)) {
      return connection.Refuse(413, absl::StrCat("the body is ", length, " bytes; the limit is ",
                                                 limit, " bytes (", limit_key, ")"));
    }
  }
  // Without a length httplib reads the body until the client closes.
  const bool until_close = !chunked && !has_length && http_internal::ReadsBody(request.method);
  if (!chunked && !until_close && length == 0) return;
  const std::string encoding = request.get_header_value("Content-Encoding");
  if (http_internal::Inflated(encoding)) {
    return connection.Refuse(
        415, absl::StrCat("Content-Encoding \"", encoding,
                          "\" is not accepted for request bodies; send the body uncompressed"));
  }
  connection.AllowBody(chunked || until_close ? limit : static_cast<int64_t>(length), limit,
                       limit_key);
}

void GuardedHttpServer::RefuseOverloaded(socket_t sock) {
  const std::string response = http_internal::BareResponse(
      503,
      absl::StrCat("overloaded: ", limits_.threads, " connections are being served and ",
                   limits_.max_queued_connections,
                   " wait (http.threads, http.max_queued_connections); retry later"),
      http_internal::kRetryAfterOverloadedS);
  // A fresh connection's send buffer takes this at once; never wait on the accepting thread.
  (void)send(sock, response.data(), response.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  closer_->Add(sock);
}

void GuardedHttpServer::ServeTls(std::shared_ptr<HttpsContext> https) {
  https_ = std::move(https);
}

SSL* GuardedHttpServer::Handshake(socket_t sock) {
  std::shared_ptr<SSL_CTX> ctx = https_->Current();
  SSL* ssl = SSL_new(ctx.get());
  if (ssl == nullptr) return nullptr;
  fcntl(sock, F_SETFL, fcntl(sock, F_GETFL) | O_NONBLOCK);
  SSL_set_fd(ssl, sock);
  const absl::Time deadline = absl::Now() + limits_.read_timeout;
  const std::function<bool()> stopping = [this] { return svr_sock_ == INVALID_SOCKET; };
  while (true) {
    ERR_clear_error();
    const int n = SSL_accept(ssl);
    if (n == 1) return ssl;
    const int error = SSL_get_error(ssl, n);
    const short events = error == SSL_ERROR_WANT_READ    ? POLLIN
                         : error == SSL_ERROR_WANT_WRITE ? POLLOUT
                                                         : 0;
    if (events == 0 || !http_internal::WaitFor(sock, events, deadline, stopping)) {
      ERR_clear_error();
      SSL_free(ssl);
      return nullptr;
    }
  }
}

bool GuardedHttpServer::process_and_close_socket(socket_t sock) {
  if (http_internal::t_overloaded) {
    // A TLS client cannot read a plaintext answer: it is only closed.
    if (https_ != nullptr) {
      close(sock);
    } else {
      RefuseOverloaded(sock);
    }
    return false;
  }
  // Headers and body are separate writes: do not let the body wait for the headers' ACK.
  int yes = 1;
  setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof(yes));
  SSL* ssl = nullptr;
  if (https_ != nullptr) {
    ssl = Handshake(sock);
    if (ssl == nullptr) {
      close(sock);
      return true;
    }
  }
  Connection connection(sock, ssl, limits_, &svr_sock_);
  t_connection = &connection;
  bool refused = false;
  for (size_t served = 0; served < http_internal::kMaxRequestsPerConnection; ++served) {
    if (svr_sock_ == INVALID_SOCKET) break;
    if (!connection.AwaitRequest(served == 0 ? limits_.read_timeout : limits_.idle_timeout)) {
      break;
    }
    connection.BeginRequest();
    bool closed = false;
    const bool answered = process_request(
        connection, served + 1 == http_internal::kMaxRequestsPerConnection, closed,
        [this, &connection](httplib::Request& request) { Admit(request, connection); });
    if (!answered) connection.AnswerDropped();
    refused = connection.must_close();
    if (!answered || closed || refused) break;
  }
  t_connection = nullptr;
  if (ssl != nullptr) {
    SSL_shutdown(ssl);  // one close_notify, not waiting for the client's
    SSL_free(ssl);
  }
  if (refused) {
    closer_->Add(sock);
  } else {
    shutdown(sock, SHUT_RDWR);
    close(sock);
  }
  return true;
}

}  // namespace goodput::platform
