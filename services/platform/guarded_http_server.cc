#include "services/platform/guarded_http_server.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
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

enum class Served : int { kKeep, kClose, kLinger };

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
// How often the readiness loop closes the connections past their deadline.
constexpr absl::Duration kSweepInterval = absl::Milliseconds(100);
// How long the loop stops accepting when the process has no file descriptor left and no
// waiting connection can give one back.
constexpr absl::Duration kAcceptPause = absl::Milliseconds(100);
// What the readiness loop reads from a socket at once, and a connection thread's buffer.
constexpr size_t kReadChunk = 16 << 10;
// Connections the loop accepts in a row before it serves the others again.
constexpr int kAcceptBurst = 256;
constexpr int kRetryAfterOverloadedS = 1;
constexpr char kTextPlain[] = "text/plain; charset=utf-8";

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
// error, or once `stopping` turns true.
bool WaitFor(int fd, short events, absl::Time deadline, const std::atomic<bool>& stopping) {
  while (true) {
    if (stopping) return false;
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return false;
    pollfd p{.fd = fd, .events = events, .revents = 0};
    const int ms = static_cast<int>(absl::ToInt64Milliseconds(std::min(left, kWaitSlice))) + 1;
    const int ready = poll(&p, 1, ms);
    if (ready > 0) return true;
    if (ready < 0 && errno != EINTR) return false;
  }
}

// The numeric address of a peer, without its port: what the per-client limits count by.
std::string ClientOf(const sockaddr_storage& address, socklen_t length) {
  std::array<char, NI_MAXHOST> host{};
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&address), length, host.data(), host.size(),
                  nullptr, 0, NI_NUMERICHOST) != 0) {
    return "?";
  }
  return host.data();
}

// Lets the process open as many files as its hard limit allows (once): every waiting
// connection holds one.
void RaiseOpenFileLimit() {
  static std::once_flag once;
  std::call_once(once, [] {
    rlimit limit{};
    if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
      limit.rlim_cur = limit.rlim_max;
      setrlimit(RLIMIT_NOFILE, &limit);
    }
  });
}

}  // namespace

// A limit a request broke, as its answer.
struct Problem {
  int status;
  std::string message;
};

// One client connection. The readiness loop reads its request line and headers without
// waiting (ReadWithoutWaiting); a connection thread then hands it to httplib, which reads and
// writes it as a Stream. Counts what each request consumes against its budget (headers, then
// body) and its deadlines, and remembers the limit a request broke, or the answer given from
// its headers, so that the handlers answer with it. Owns its socket and TLS session.
class Connection final : public httplib::Stream {
 public:
  // What a read without waiting found.
  enum class Progress { kHeaders, kMore, kClosed, kTooLarge };

  // `ssl` (may be null: plaintext) is a TLS session over `fd` whose handshake is still to
  // come; the connection owns both.
  Connection(socket_t fd, SSL* ssl, std::string client, const HttpLimits& limits,
             const std::atomic<bool>& stopping)
      : fd_(fd), ssl_(ssl), client_(std::move(client)), limits_(limits), stopping_(stopping) {}
  ~Connection() override {
    FreeTls();
    if (fd_ != INVALID_SOCKET) {
      shutdown(fd_, SHUT_RDWR);
      close(fd_);
    }
  }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  const std::string& client() const { return client_; }
  bool tls() const { return ssl_ != nullptr; }

  // The socket, for a lingering close; the connection lets go of it (and ends its TLS
  // session with one close_notify).
  socket_t Release() {
    FreeTls();
    const socket_t fd = fd_;
    fd_ = INVALID_SOCKET;
    return fd;
  }

  // --- The readiness loop's side.

  // Finishes the TLS handshake, then reads what the socket has until a request's headers are
  // in, the header budget is spent, the peer closed, or nothing more is there.
  Progress ReadWithoutWaiting(char* scratch, size_t size) {
    if (ssl_ != nullptr && !handshaken_) {
      ERR_clear_error();
      const int n = SSL_accept(ssl_);
      if (n != 1) return TlsProgress(n);
      handshaken_ = true;
      wants_write_ = false;
    }
    while (true) {
      if (HeadersIn()) return Progress::kHeaders;
      if (Pending() > static_cast<size_t>(limits_.max_header_bytes)) return Progress::kTooLarge;
      ssize_t n = 0;
      if (ssl_ != nullptr) {
        ERR_clear_error();
        const int r = SSL_read(ssl_, scratch, static_cast<int>(size));
        if (r <= 0) return TlsProgress(r);
        wants_write_ = false;
        n = r;
      } else {
        n = recv(fd_, scratch, size, MSG_DONTWAIT);
        if (n == 0) return Progress::kClosed;
        if (n < 0) {
          if (errno == EINTR) continue;
          return errno == EAGAIN || errno == EWOULDBLOCK ? Progress::kMore : Progress::kClosed;
        }
      }
      Append(scratch, static_cast<size_t>(n));
    }
  }

  // True while the TLS session waits for the socket to take data.
  bool wants_write() const { return wants_write_; }
  // True while the TLS handshake is still to be done.
  bool handshaking() const { return ssl_ != nullptr && !handshaken_; }
  // Bytes read and not yet handed to httplib.
  size_t Pending() const { return buffer_.size() - pos_; }

  // The next request begins waiting in the readiness loop at `now`: a new connection must
  // send its headers within http.header_timeout_s; a kept-alive one may stay idle for
  // http.idle_timeout_s first. `order` ranks it among the waiting connections (increasing).
  void WaitForRequest(absl::Time now, bool first, uint64_t order) {
    waiting_since_ = now;
    waiting_order_ = order;
    if (Pending() == 0) {
      std::string().swap(buffer_);
      pos_ = 0;
      scan_from_ = 0;
    }
    if (first || Pending() > 0) {
      RequestBegins(now);
    } else {
      idle_ = true;
      deadline_wait_ = now + limits_.idle_timeout;
    }
  }
  // Bytes arrived at `now`: an idle connection's request has begun.
  void Arrived(absl::Time now) {
    if (idle_ && Pending() > 0) RequestBegins(now);
  }
  bool idle() const { return idle_; }
  absl::Time waiting_since() const { return waiting_since_; }
  uint64_t waiting_order() const { return waiting_order_; }
  absl::Time wait_deadline() const { return deadline_wait_; }

  // Writes `response` if the socket takes it at once (a refusal from the readiness loop).
  void SendWithoutWaiting(const std::string& response) {
    if (ssl_ != nullptr) {
      if (!handshaken_) return;
      ERR_clear_error();
      (void)SSL_write(ssl_, response.data(), static_cast<int>(response.size()));
      ERR_clear_error();
      return;
    }
    (void)send(fd_, response.data(), response.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  }

  // True when a whole request line and headers are buffered.
  bool HeadersIn() {
    const size_t n = buffer_.size();
    size_t i = std::max(pos_, scan_from_);
    for (; i < n; ++i) {
      if (buffer_[i] != '\n') continue;
      if (i + 1 >= n) break;
      if (buffer_[i + 1] == '\n') return true;
      if (buffer_[i + 1] != '\r') continue;
      if (i + 2 >= n) break;
      if (buffer_[i + 2] == '\n') return true;
    }
    scan_from_ = i;
    return false;
  }

  // --- A connection thread's side.

  // A request whose headers are buffered is served: its deadline runs from its first byte
  // and its headers count against the header budget.
  void BeginRequest() {
    phase_ = Phase::kHeaders;
    consumed_ = 0;
    budget_ = limits_.max_header_bytes;
    deadline_ = request_started_ + limits_.request_timeout;
    timed_out_ = false;
    over_budget_ = false;
    wrote_ = false;
    refusal_.reset();
    early_.reset();
    close_after_early_ = false;
    answered_early_ = false;
    ++served_;
  }
  size_t served() const { return served_; }
  // The next request, already buffered, begins now (pipelined).
  void NextRequestBegins() { RequestBegins(absl::Now()); }

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

  // The request is answered `response`, decided from its headers, without reading its body
  // (nor sending "100 Continue"); the connection closes after when `close` (a body was
  // announced and is left unread).
  void AnswerEarly(httplib::Response response, bool close) {
    AllowBody(0, body_limit_, body_limit_key_);
    early_ = std::move(response);
    close_after_early_ = close;
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

  // The status the current request is answered with before its body, if any.
  std::optional<int> EarlyStatus() const {
    if (early_.has_value()) return early_->status;
    if (std::optional<Problem> problem = Broken()) return problem->status;
    return std::nullopt;
  }

  // Answers a request decided from its headers, or one that broke a limit, in `response`;
  // false when there is no such answer.
  bool Answer(httplib::Response& response) {
    if (early_.has_value()) {
      response = *std::move(early_);
      early_.reset();
      answered_early_ = true;
      if (close_after_early_ && !response.has_header("Connection")) {
        response.set_header("Connection", "close");
      }
      return true;
    }
    std::optional<Problem> problem = Broken();
    if (!problem.has_value()) return false;
    response.status = problem->status;
    response.set_content(absl::StrCat(problem->message, "\n"), kTextPlain);
    if (!response.has_header("Connection")) response.set_header("Connection", "close");
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

  bool must_close() const {
    return Broken().has_value() || ((early_.has_value() || answered_early_) && close_after_early_);
  }

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
    if (pos_ == buffer_.size()) {
      const ssize_t n = Fill();
      if (n <= 0) return n;
    }
    const size_t n = std::min({size, buffer_.size() - pos_, static_cast<size_t>(left)});
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

  // Bytes read but not yet handed to httplib, here or inside the TLS session.
  bool Buffered() const {
    return pos_ < buffer_.size() || (ssl_ != nullptr && SSL_pending(ssl_) > 0);
  }

 private:
  enum class Phase { kHeaders, kBody };

  void RequestBegins(absl::Time now) {
    idle_ = false;
    request_started_ = now;
    deadline_wait_ = now + limits_.header_timeout;
  }

  // What a TLS call that returned `n` means for the readiness loop.
  Progress TlsProgress(int n) {
    const int error = SSL_get_error(ssl_, n);
    wants_write_ = error == SSL_ERROR_WANT_WRITE;
    if (error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE) return Progress::kMore;
    ERR_clear_error();
    return Progress::kClosed;
  }

  void FreeTls() {
    if (ssl_ == nullptr) return;
    if (handshaken_) SSL_shutdown(ssl_);  // one close_notify, not waiting for the client's
    ERR_clear_error();
    SSL_free(ssl_);
    ssl_ = nullptr;
  }

  // Adds `n` bytes read by the readiness loop to the buffer, dropping what httplib consumed.
  void Append(const char* data, size_t n) {
    if (pos_ > 0) {
      buffer_.erase(0, pos_);
      scan_from_ -= std::min(scan_from_, pos_);
      pos_ = 0;
    }
    buffer_.append(data, n);
  }

  // After a TLS call failed with `error`: waits for the socket as the session needs it; false
  // when the call cannot be retried (a real error, the deadline, a shutdown).
  bool WaitForTls(int error, absl::Time deadline) const {
    if (error == SSL_ERROR_WANT_READ) return WaitFor(fd_, POLLIN, deadline, stopping_);
    if (error == SSL_ERROR_WANT_WRITE) return WaitFor(fd_, POLLOUT, deadline, stopping_);
    return false;
  }

  // Reads what the socket has into the (consumed) buffer, waiting within the request's
  // deadlines.
  ssize_t Fill() {
    const absl::Time deadline = std::min(absl::Now() + limits_.read_timeout, deadline_);
    buffer_.resize(kReadChunk);
    pos_ = 0;
    scan_from_ = 0;
    if (ssl_ != nullptr) {
      while (true) {
        ERR_clear_error();
        const int n = SSL_read(ssl_, buffer_.data(), static_cast<int>(buffer_.size()));
        buffer_.resize(n > 0 ? static_cast<size_t>(n) : 0);
        if (n > 0) return n;
        const int error = SSL_get_error(ssl_, n);
        if (error == SSL_ERROR_ZERO_RETURN) return 0;
        if (!WaitForTls(error, deadline)) {
          timed_out_ = (error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE) &&
                       absl::Now() >= deadline && !stopping_;
          return -1;
        }
        buffer_.resize(kReadChunk);
      }
    }
    while (true) {
      const ssize_t n = recv(fd_, buffer_.data(), buffer_.size(), MSG_DONTWAIT);
      if (n >= 0) {
        buffer_.resize(static_cast<size_t>(n));
        return n;
      }
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        buffer_.clear();
        return -1;
      }
      if (!WaitFor(fd_, POLLIN, deadline, stopping_)) {
        buffer_.clear();
        timed_out_ = !stopping_;
        return -1;
      }
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

  socket_t fd_;
  SSL* ssl_;
  const std::string client_;
  const HttpLimits& limits_;
  const std::atomic<bool>& stopping_;
  bool handshaken_ = false;
  bool wants_write_ = false;
  // Read and not yet consumed: buffer_[pos_, size()). Held only while a request is under
  // way, so that an idle connection costs no buffer.
  std::string buffer_;
  size_t pos_ = 0;
  // Where HeadersIn() goes on looking for the end of the headers.
  size_t scan_from_ = 0;

  // While waiting in the readiness loop.
  bool idle_ = false;
  absl::Time waiting_since_ = absl::InfinitePast();
  uint64_t waiting_order_ = 0;
  absl::Time deadline_wait_ = absl::InfiniteFuture();
  absl::Time request_started_ = absl::Now();
  size_t served_ = 0;

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
  std::optional<httplib::Response> early_;
  bool close_after_early_ = false;
  bool answered_early_ = false;
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

// A bounded pool of connection threads: `threads` connections are served at once and
// `max_queued` more wait; Run() refuses one beyond that.
class WorkerPool {
 public:
  WorkerPool(int threads, int max_queued)
      : capacity_(static_cast<size_t>(threads) + static_cast<size_t>(max_queued)) {
    for (int i = 0; i < threads; ++i) workers_.emplace_back([this] { Work(); });
  }
  ~WorkerPool() { Shutdown(); }
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Queues `fn`; false when the pool is full or stopping (`fn` is not run).
  bool Run(std::function<void()> fn) {
    absl::MutexLock lock(&mu_);
    if (stopping_ || busy_ + jobs_.size() >= capacity_) return false;
    jobs_.push_back(std::move(fn));
    return true;
  }

  // Runs what is queued, then joins the threads. Idempotent.
  void Shutdown() {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
    }
    for (std::thread& worker : workers_) {
      if (worker.joinable()) worker.join();
    }
  }

 private:
  void Work() {
    while (true) {
      std::function<void()> fn;
      {
        absl::MutexLock lock(&mu_);
        mu_.Await(absl::Condition(
            +[](WorkerPool* p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(p->mu_) {
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

// The readiness loop of one listener: accepts connections, keeps those waiting for a
// request's headers (new or kept alive) in one epoll set, enforces the connection limits and
// the header and idle deadlines, and hands a connection whose headers are in to the pool of
// connection threads, which gives it back when its response is written.
class Reactor {
 public:
  using ServeFn = std::function<Served(Connection&)>;

  Reactor(socket_t listener, const HttpLimits& limits, std::shared_ptr<HttpsContext> https,
          LingeringCloser* closer, ServeFn serve)
      : listener_(listener),
        limits_(limits),
        https_(std::move(https)),
        closer_(closer),
        serve_(std::move(serve)),
        epoll_(epoll_create1(EPOLL_CLOEXEC)),
        wake_fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)),
        pool_(limits.threads, limits.max_queued_connections),
        scratch_(kReadChunk) {
    Watch(wake_fd_, EPOLLIN);
    Watch(listener_, EPOLLIN);
    thread_ = std::thread([this] { Run(); });
  }

  ~Reactor() { Stop(); }
  Reactor(const Reactor&) = delete;
  Reactor& operator=(const Reactor&) = delete;

  // Stops accepting, closes the waiting connections, ends the ones being served and joins
  // the threads. Idempotent.
  void Stop() {
    if (stopping_.exchange(true)) return;
    Wake();
    if (thread_.joinable()) thread_.join();
    pool_.Shutdown();
    close(epoll_);
    close(wake_fd_);
  }

  const std::atomic<bool>& stopping() const { return stopping_; }

 private:
  void Watch(int fd, uint32_t events) {
    epoll_event event{};
    event.events = events;
    event.data.fd = fd;
    epoll_ctl(epoll_, EPOLL_CTL_ADD, fd, &event);
  }

  void Wake() {
    const uint64_t one = 1;
    (void)!::write(wake_fd_, &one, sizeof(one));
  }

  void Run() {
    std::vector<epoll_event> events(256);
    absl::Time next_sweep = absl::Now() + kSweepInterval;
    while (!stopping_) {
      const int n = epoll_wait(epoll_, events.data(), static_cast<int>(events.size()),
                               static_cast<int>(absl::ToInt64Milliseconds(kSweepInterval)));
      const absl::Time now = absl::Now();
      for (int i = 0; i < n; ++i) {
        const int fd = events[static_cast<size_t>(i)].data.fd;
        if (fd == wake_fd_) {
          uint64_t ignored;
          (void)!::read(wake_fd_, &ignored, sizeof(ignored));
        } else if (fd == listener_) {
          Accept(now);
        } else {
          OnReady(fd, now);
        }
      }
      TakeBack(now);
      if (now >= next_sweep) {
        Sweep(now);
        next_sweep = now + kSweepInterval;
      }
    }
    waiting_.clear();  // closes them
    std::vector<std::pair<Connection*, Served>> returned;
    {
      absl::MutexLock lock(&mu_);
      loop_done_ = true;
      returned.swap(returned_);
    }
    for (auto& [connection, how] : returned) delete connection;
  }

  // Accepts what the listener has, within the connection limits.
  void Accept(absl::Time now) {
    for (int i = 0; i < kAcceptBurst; ++i) {
      sockaddr_storage address{};
      socklen_t length = sizeof(address);
      const int fd = accept4(listener_, reinterpret_cast<sockaddr*>(&address), &length,
                             SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
          // Out of descriptors: the connection waiting longest makes room, or accepting
          // pauses (the listener would otherwise report the same connection at once again).
          if (Evict(nullptr, now)) continue;
          epoll_ctl(epoll_, EPOLL_CTL_DEL, listener_, nullptr);
          accept_paused_until_ = now + kAcceptPause;
        }
        return;
      }
      std::string client = ClientOf(address, length);
      const int yes = 1;
      // Headers and body are separate writes: do not let the body wait for the headers' ACK.
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof(yes));
      auto held = per_client_.find(client);
      if (held != per_client_.end() && held->second >= limits_.max_connections_per_client &&
          !Evict(&client, now)) {
        RefuseAtOnce(fd, absl::StrCat("overloaded: this client already holds ",
                                      limits_.max_connections_per_client,
                                      " connections, all of them in use "
                                      "(http.max_connections_per_client); retry later"));
        continue;
      }
      if (open_ >= static_cast<size_t>(limits_.max_connections) && !Evict(nullptr, now)) {
        RefuseAtOnce(fd, absl::StrCat("overloaded: ", limits_.max_connections,
                                      " connections are open, all of them in use "
                                      "(http.max_connections); retry later"));
        continue;
      }
      SSL* ssl = nullptr;
      if (https_ != nullptr) {
        std::shared_ptr<SSL_CTX> ctx = https_->Current();
        ssl = SSL_new(ctx.get());
        if (ssl == nullptr) {
          close(fd);
          continue;
        }
        SSL_set_fd(ssl, fd);
      }
      ++open_;
      ++per_client_[client];
      auto connection =
          std::make_unique<Connection>(fd, ssl, std::move(client), limits_, stopping_);
      connection->WaitForRequest(now, /*first=*/true, ++waits_);
      Hold(std::move(connection), now);
    }
  }

  // Answers a connection the limits have no room for 503 and closes it.
  void RefuseAtOnce(int fd, const std::string& message) {
    if (https_ != nullptr) {  // a TLS client cannot read a plaintext answer
      close(fd);
      return;
    }
    const std::string response = BareResponse(503, message, kRetryAfterOverloadedS);
    (void)send(fd, response.data(), response.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    closer_->Add(fd);
  }

  // Keeps `connection` waiting for its request's headers; hands it on when they are in
  // already.
  void Hold(std::unique_ptr<Connection> connection, absl::Time now) {
    const int fd = connection->socket();
    epoll_event event{};
    event.events = EPOLLIN | (connection->wants_write() ? EPOLLOUT : 0u);
    event.data.fd = fd;
    if (epoll_ctl(epoll_, EPOLL_CTL_ADD, fd, &event) != 0) {
      Finish(std::move(connection), Served::kClose);
      return;
    }
    waiting_[fd] = std::move(connection);
    // What a kept-alive connection already holds (a pipelined request, TLS records
    // decrypted ahead) would raise no readiness event.
    OnReady(fd, now);
  }

  // Removes a waiting connection from the set.
  std::unique_ptr<Connection> Unhold(int fd) {
    auto it = waiting_.find(fd);
    std::unique_ptr<Connection> connection = std::move(it->second);
    waiting_.erase(it);
    epoll_ctl(epoll_, EPOLL_CTL_DEL, fd, nullptr);
    return connection;
  }

  // Reads what a waiting connection sent.
  void OnReady(int fd, absl::Time now) {
    auto it = waiting_.find(fd);
    if (it == waiting_.end()) return;
    Connection& connection = *it->second;
    const bool wanted_write = connection.wants_write();
    const Connection::Progress progress =
        connection.ReadWithoutWaiting(scratch_.data(), scratch_.size());
    connection.Arrived(now);
    switch (progress) {
      case Connection::Progress::kHeaders:
        HandOff(Unhold(fd));
        return;
      case Connection::Progress::kMore:
        if (connection.wants_write() != wanted_write) {
          epoll_event event{};
          event.events = EPOLLIN | (connection.wants_write() ? EPOLLOUT : 0u);
          event.data.fd = fd;
          epoll_ctl(epoll_, EPOLL_CTL_MOD, fd, &event);
        }
        return;
      case Connection::Progress::kClosed:
        Finish(Unhold(fd), Served::kClose);
        return;
      case Connection::Progress::kTooLarge:
        connection.SendWithoutWaiting(BareResponse(
            431, absl::StrCat("the request line and headers are above ", limits_.max_header_bytes,
                              " bytes (http.max_header_bytes)")));
        Finish(Unhold(fd), Served::kLinger);
        return;
    }
  }

  // Gives a connection whose headers are in to a connection thread, or answers 503 when
  // every thread is busy and the queue full.
  void HandOff(std::unique_ptr<Connection> connection) {
    Connection* raw = connection.get();
    if (pool_.Run([this, raw] { GiveBack(raw, serve_(*raw)); })) {
      connection.release();
      return;
    }
    connection->SendWithoutWaiting(BareResponse(
        503,
        absl::StrCat("overloaded: ", limits_.threads, " connections are being served and ",
                     limits_.max_queued_connections,
                     " wait (http.threads, http.max_queued_connections); retry later"),
        kRetryAfterOverloadedS));
    Finish(std::move(connection), Served::kLinger);
  }

  // From a connection thread: the connection is served.
  void GiveBack(Connection* connection, Served how) {
    {
      absl::MutexLock lock(&mu_);
      if (!loop_done_) {
        returned_.emplace_back(connection, how);
        connection = nullptr;
      }
    }
    if (connection != nullptr) {
      delete connection;  // the loop has stopped: close
      return;
    }
    Wake();
  }

  // Takes back the connections the threads have served: kept alive, they wait for their
  // next request; otherwise they close.
  void TakeBack(absl::Time now) {
    std::vector<std::pair<Connection*, Served>> returned;
    {
      absl::MutexLock lock(&mu_);
      returned.swap(returned_);
    }
    for (auto& [raw, how] : returned) {
      std::unique_ptr<Connection> connection(raw);
      if (how != Served::kKeep) {
        Finish(std::move(connection), how);
        continue;
      }
      connection->WaitForRequest(now, /*first=*/false, ++waits_);
      Hold(std::move(connection), now);
    }
  }

  // Closes a connection for good (draining it first when `how` is kLinger).
  void Finish(std::unique_ptr<Connection> connection, Served how) {
    --open_;
    auto held = per_client_.find(connection->client());
    if (held != per_client_.end() && --held->second <= 0) per_client_.erase(held);
    if (how == Served::kLinger) closer_->Add(connection->Release());
  }

  // Makes room: closes the connection that has waited longest for its headers (of `client`
  // when given). False when none waits.
  bool Evict(const std::string* client, absl::Time now) {
    int oldest = -1;
    uint64_t order = UINT64_MAX;
    for (const auto& [fd, connection] : waiting_) {
      if (client != nullptr && connection->client() != *client) continue;
      if (connection->waiting_order() < order) {
        order = connection->waiting_order();
        oldest = fd;
      }
    }
    if (oldest < 0) return false;
    const absl::Time since = waiting_.at(oldest)->waiting_since();
    std::unique_ptr<Connection> connection = Unhold(oldest);
    // An answer is drained after, so that bytes still unread do not turn the close into a
    // reset that loses it.
    const Served how = connection->idle() ? Served::kClose : Served::kLinger;
    if (!connection->idle()) {
      connection->SendWithoutWaiting(BareResponse(
          503,
          absl::StrCat(
              "overloaded: this connection waited ", absl::FormatDuration(now - since),
              " for its headers and gave its place to a new one (",
              client != nullptr ? "http.max_connections_per_client" : "http.max_connections",
              "); retry later"),
          kRetryAfterOverloadedS));
    }
    Finish(std::move(connection), how);
    return true;
  }

  // Closes the connections past their deadline: 408 to a request whose headers did not
  // arrive in time, nothing to an idle kept-alive connection. Resumes accepting after a
  // pause.
  void Sweep(absl::Time now) {
    std::vector<int> late;
    for (const auto& [fd, connection] : waiting_) {
      if (now >= connection->wait_deadline()) late.push_back(fd);
    }
    for (int fd : late) {
      std::unique_ptr<Connection> connection = Unhold(fd);
      const Served how = connection->idle() ? Served::kClose : Served::kLinger;
      if (!connection->idle()) {
        connection->SendWithoutWaiting(
            BareResponse(408, absl::StrCat("the request line and headers did not arrive within ",
                                           absl::FormatDuration(limits_.header_timeout),
                                           " (http.header_timeout_s)")));
      }
      Finish(std::move(connection), how);
    }
    if (accept_paused_until_ != absl::InfinitePast() && now >= accept_paused_until_) {
      accept_paused_until_ = absl::InfinitePast();
      Watch(listener_, EPOLLIN);
    }
  }

  const socket_t listener_;
  const HttpLimits& limits_;
  const std::shared_ptr<HttpsContext> https_;
  LingeringCloser* const closer_;
  const ServeFn serve_;
  const int epoll_;
  const int wake_fd_;
  std::atomic<bool> stopping_{false};
  WorkerPool pool_;
  std::vector<char> scratch_;
  std::thread thread_;

  // The loop's own.
  absl::flat_hash_map<int, std::unique_ptr<Connection>> waiting_;
  size_t open_ = 0;  // waiting or being served
  absl::flat_hash_map<std::string, int> per_client_;
  absl::Time accept_paused_until_ = absl::InfinitePast();
  uint64_t waits_ = 0;  // connections that began waiting, for their order

  // Connections the threads have served, for the loop to take back.
  absl::Mutex mu_;
  std::vector<std::pair<Connection*, Served>> returned_ ABSL_GUARDED_BY(mu_);
  bool loop_done_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace http_internal

using http_internal::Connection;
using http_internal::Served;
using http_internal::t_connection;

GuardedHttpServer::GuardedHttpServer(HttpLimits limits)
    : limits_(limits), closer_(std::make_unique<http_internal::LingeringCloser>()) {
  // httplib's default also sets SO_REUSEPORT, which would let a second process share a busy
  // port silently; keep only SO_REUSEADDR (fast restarts) so that a taken port is an error.
  set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  // Only the Keep-Alive header uses these: the readiness loop waits by itself.
  set_keep_alive_max_count(http_internal::kMaxRequestsPerConnection);
  set_keep_alive_timeout(std::max<time_t>(1, absl::ToInt64Seconds(limits_.idle_timeout)));
  set_pre_routing_handler([](const httplib::Request&, httplib::Response& response) {
    return t_connection != nullptr && t_connection->Answer(response) ? HandlerResponse::Handled
                                                                     : HandlerResponse::Unhandled;
  });
  set_error_handler(HandlerWithResponse([](const httplib::Request&, httplib::Response& response) {
    return t_connection != nullptr && t_connection->Answer(response) ? HandlerResponse::Handled
                                                                     : HandlerResponse::Unhandled;
  }));
  // A client that waits for "100 Continue" gets the answer decided from its headers instead
  // (a refusal, the guard's answer), before sending a body.
  set_expect_100_continue_handler([](const httplib::Request&, httplib::Response& response) {
    if (t_connection == nullptr) return 100;
    std::optional<int> status = t_connection->EarlyStatus();
    if (!status.has_value()) return 100;
    // httplib writes `response` as it stands, without its body's length, except for an error,
    // which the error handler (above) fills in the way it answers any.
    response.status = *status;
    if (*status < 400 && t_connection->Answer(response)) {
      response.set_header("Content-Length", std::to_string(response.body.size()));
    }
    return *status;
  });
}

GuardedHttpServer::~GuardedHttpServer() { Shutdown(); }

void GuardedHttpServer::SetBodyLimit(const std::string& pattern, int64_t max_bytes,
                                     std::string config_key) {
  body_limits_.push_back({std::regex(pattern), max_bytes, std::move(config_key)});
}

absl::StatusOr<int> GuardedHttpServer::Start(const std::string& host, int port) {
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
  fcntl(svr_sock_, F_SETFL, fcntl(svr_sock_, F_GETFL) | O_NONBLOCK);
  http_internal::RaiseOpenFileLimit();
  reactor_ = std::make_unique<http_internal::Reactor>(
      svr_sock_, limits_, https_, closer_.get(),
      [this](Connection& connection) { return Serve(connection); });
  return bound;
}

void GuardedHttpServer::Shutdown() {
  if (reactor_ != nullptr) reactor_->Stop();
  if (svr_sock_ != INVALID_SOCKET) {
    close(svr_sock_);
    svr_sock_ = INVALID_SOCKET;
  }
}

Served GuardedHttpServer::Serve(Connection& connection) {
  if (reactor_->stopping()) return Served::kClose;
  t_connection = &connection;
  Served how = Served::kKeep;
  while (true) {
    connection.BeginRequest();
    const bool last = connection.served() >= http_internal::kMaxRequestsPerConnection;
    bool closed = false;
    const bool answered = process_request(
        connection, last, closed,
        [this, &connection](httplib::Request& request) { Admit(request, connection); });
    if (!answered) connection.AnswerDropped();
    if (connection.must_close()) {
      how = Served::kLinger;
      break;
    }
    if (!answered || closed || last || reactor_->stopping()) {
      how = Served::kClose;
      break;
    }
    // A pipelined request whose headers are in is served at once; anything else waits in the
    // readiness loop, costing no thread.
    if (!connection.HeadersIn()) break;
    connection.NextRequestBegins();
  }
  t_connection = nullptr;
  return how;
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
  }
  // Without a length httplib reads the body until the client closes.
  const bool until_close = !chunked && !has_length && http_internal::ReadsBody(request.method);
  const bool has_body = chunked || until_close || length > 0;
  // The guard (authentication) decides from the headers alone: a request it answers has its
  // body left unread, whatever its size.
  if (guard_) {
    httplib::Response answer;
    if (guard_(request, answer)) {
      if (answer.status == -1) answer.status = 200;
      return connection.AnswerEarly(std::move(answer), /*close=*/has_body);
    }
  }
  if (length > static_cast<uint64_t>(limit)) {
    return connection.Refuse(413, absl::StrCat("the body is ", length, " bytes; the limit is ",
                                               limit, " bytes (", limit_key, ")"));
  }
  if (!has_body) return;
  const std::string encoding = request.get_header_value("Content-Encoding");
  if (http_internal::Inflated(encoding)) {
    return connection.Refuse(
        415, absl::StrCat("Content-Encoding \"", encoding,
                          "\" is not accepted for request bodies; send the body uncompressed"));
  }
  connection.AllowBody(chunked || until_close ? limit : static_cast<int64_t>(length), limit,
                       limit_key);
}

void GuardedHttpServer::ServeTls(std::shared_ptr<HttpsContext> https) { https_ = std::move(https); }

}  // namespace goodput::platform
