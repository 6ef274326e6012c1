#include "guarded_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <deque>
#include <cstring>
#include <memory>
#include <system_error>
#include <thread>

namespace tfm::server {
namespace {

using Clock = std::chrono::steady_clock;

// poll() for `events`, retried on EINTR; a hang-up or error counts as ready (the read or write
// that follows then reports it).
bool wait_for(int sock, short events, int timeout_ms) {
  pollfd p{sock, events, 0};
  int r = 0;
  do r = ::poll(&p, 1, std::max(timeout_ms, 0));
  while (r < 0 && errno == EINTR);
  return r > 0;
}

void address_of(int sock, bool remote, std::string& ip, int& port) {
  sockaddr_storage a{};
  socklen_t n = sizeof a;
  ip.clear();
  port = 0;
  if ((remote ? ::getpeername(sock, reinterpret_cast<sockaddr*>(&a), &n) : ::getsockname(sock, reinterpret_cast<sockaddr*>(&a), &n)) != 0)
    return;
  char buf[INET6_ADDRSTRLEN] = {};
  if (a.ss_family == AF_INET) {
    const auto* s = reinterpret_cast<const sockaddr_in*>(&a);
    ::inet_ntop(AF_INET, &s->sin_addr, buf, sizeof buf);
    port = ntohs(s->sin_port);
  } else if (a.ss_family == AF_INET6) {
    const auto* s = reinterpret_cast<const sockaddr_in6*>(&a);
    ::inet_ntop(AF_INET6, &s->sin6_addr, buf, sizeof buf);
    port = ntohs(s->sin6_port);
  }
  ip = buf;
}

// A request's stream: reads wait at most the read timeout, and until its head (request line
// and headers, up to the empty line) is in, never past the head's deadline.
class DeadlineStream : public httplib::Stream {
 public:
  DeadlineStream(int sock, Clock::time_point head_deadline, int read_ms, int write_ms)
      : sock_(sock), deadline_(head_deadline), read_ms_(read_ms), write_ms_(write_ms) {}
  bool expired() const { return expired_; }  // the head did not arrive in time
  bool is_readable() const override { return at_ < got_ || wait_for(sock_, POLLIN, read_wait_ms()); }
  bool is_writable() const override { return wait_for(sock_, POLLOUT, write_ms_); }
  ssize_t read(char* ptr, size_t size) override {
    if (at_ == got_) {
      // Past the head's deadline nothing more is read, however steadily the bytes come.
      if (!head_done_ && Clock::now() >= deadline_) {
        expired_ = true;
        return -1;
      }
      if (!wait_for(sock_, POLLIN, read_wait_ms())) {
        expired_ = !head_done_;  // a head that stopped coming closes the connection
        return -1;
      }
      ssize_t n = 0;
      do n = ::recv(sock_, buf_, sizeof buf_, 0);
      while (n < 0 && errno == EINTR);
      if (n <= 0) return n;
      at_ = 0;
      got_ = static_cast<std::size_t>(n);
    }
    const std::size_t n = std::min(size, got_ - at_);
    std::memcpy(ptr, buf_ + at_, n);
    for (std::size_t i = 0; i < n && !head_done_; ++i) {  // the head ends at the first empty line
      const char c = buf_[at_ + i];
      if (c == '\n') head_done_ = line_len_ == 0, line_len_ = 0;
      else if (c != '\r') ++line_len_;
    }
    at_ += n;
    return static_cast<ssize_t>(n);
  }
  ssize_t write(const char* ptr, size_t size) override {
    if (!wait_for(sock_, POLLOUT, write_ms_)) return -1;
    ssize_t n = 0;
    do n = ::send(sock_, ptr, size, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    return n;
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override { address_of(sock_, true, ip, port); }
  void get_local_ip_and_port(std::string& ip, int& port) const override { address_of(sock_, false, ip, port); }
  socket_t socket() const override { return sock_; }

 private:
  int read_wait_ms() const {
    if (head_done_) return read_ms_;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - Clock::now()).count();
    return static_cast<int>(std::clamp<std::int64_t>(left, 0, read_ms_));
  }
  int sock_;
  Clock::time_point deadline_;
  int read_ms_, write_ms_;
  bool head_done_ = false, expired_ = false;
  std::size_t line_len_ = 0;
  char buf_[4096];
  std::size_t at_ = 0, got_ = 0;
};

}  // namespace

// ---- ElasticPool ---------------------------------------------------------------------------

struct ElasticPool::State {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::function<void()>> waiting;
  std::size_t running = 0;
};

namespace {
void run_tasks(const std::shared_ptr<ElasticPool::State>& st, std::function<void()> fn) {
  for (;;) {
    fn();
    std::lock_guard lk(st->mu);
    if (st->waiting.empty()) {
      --st->running;
      st->cv.notify_all();
      return;
    }
    fn = std::move(st->waiting.front());
    st->waiting.pop_front();
  }
}
}  // namespace

ElasticPool::ElasticPool(std::size_t max_threads) : max_(std::max<std::size_t>(max_threads, 1)), st_(std::make_shared<State>()) {}

void ElasticPool::enqueue(std::function<void()> fn) {
  {
    std::lock_guard lk(st_->mu);
    if (st_->running >= max_) {
      st_->waiting.push_back(std::move(fn));
      return;
    }
    ++st_->running;
  }
  auto task = std::make_shared<std::function<void()>>(std::move(fn));
  try {
    std::thread([st = st_, task] { run_tasks(st, std::move(*task)); }).detach();
  } catch (const std::system_error&) {  // no thread to be had: the next one to finish takes it
    std::lock_guard lk(st_->mu);
    --st_->running;
    st_->waiting.push_back(std::move(*task));
  }
}

void ElasticPool::shutdown() {
  std::unique_lock lk(st_->mu);
  st_->cv.wait(lk, [&] { return st_->running == 0 && st_->waiting.empty(); });
}

// ---- GuardedServer -------------------------------------------------------------------------

GuardedServer::GuardedServer(ConnectionLimits limits) : limits_(limits) {
  const std::size_t n = limits_.max_connections;
  new_task_queue = [n] { return new ElasticPool(n); };
}

void GuardedServer::set_listen_backlog(int n) {
  const socket_t s = svr_sock_;
  if (s != INVALID_SOCKET) (void)::listen(s, n);
}

namespace {
thread_local bool close_requested = false;  // set by close_after_response on this connection's thread
}  // namespace

void GuardedServer::close_after_response() { close_requested = true; }

bool GuardedServer::process_and_close_socket(socket_t sock) {
  std::string ip;
  int port = 0;
  address_of(sock, true, ip, port);
  bool admitted = false;
  {
    std::lock_guard lk(mu_);
    std::size_t& n = per_client_[ip];
    admitted = n < limits_.max_per_client;
    if (admitted) ++n;
  }
  if (!admitted) {
    const std::string body =
        R"({"error":{"message":"too many connections from this address","type":"server_error","param":null,"code":"too_many_connections"}})";
    const std::string response = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\n"
                                 "Connection: close\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
    (void)::send(sock, response.data(), response.size(), MSG_NOSIGNAL);
    ::shutdown(sock, SHUT_RDWR);
    ::close(sock);
    return false;
  }
  const int read_ms = static_cast<int>(read_timeout_sec_ * 1000 + read_timeout_usec_ / 1000);
  const int write_ms = static_cast<int>(write_timeout_sec_ * 1000 + write_timeout_usec_ / 1000);
  bool ret = false;
  // httplib's keep-alive loop: up to keep_alive_max_count requests, each waited for at most
  // the keep-alive timeout (in short slices, so that stopping the server ends the wait).
  for (std::size_t left = keep_alive_max_count_; left > 0; --left) {
    const auto until = Clock::now() + std::chrono::seconds(keep_alive_timeout_sec_);
    bool ready = false;
    while (!ready && svr_sock_ != INVALID_SOCKET && Clock::now() < until) ready = wait_for(sock, POLLIN, 100);
    if (!ready) break;
    DeadlineStream strm(sock, Clock::now() + limits_.header_timeout, read_ms, write_ms);
    bool closed = false;
    close_requested = false;
    ret = process_request(strm, left == 1, closed, nullptr);
    if (!ret || closed || close_requested || strm.expired()) break;  // a head past its deadline closes the connection
  }
  if (close_requested) {
    // Answered before reading the body (a 413): closing now, with the client's upload unread in
    // the receive buffer, would send a reset that can destroy the response before the client
    // reads it (it then sees ECONNRESET, not the 413). So the response is ended with a FIN and
    // what the client still sends is read and dropped, for at most 2 s and 64 MiB, as nginx's
    // lingering close does.
    ::shutdown(sock, SHUT_WR);
    const auto until = Clock::now() + std::chrono::seconds(2);
    std::size_t drained = 0;
    char buf[16384];
    while (drained < (std::size_t{64} << 20) && Clock::now() < until && wait_for(sock, POLLIN, 100)) {
      const ssize_t n = ::recv(sock, buf, sizeof buf, 0);
      if (n <= 0) break;
      drained += static_cast<std::size_t>(n);
    }
  }
  {
    std::lock_guard lk(mu_);
    if (--per_client_[ip] == 0) per_client_.erase(ip);
  }
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
  return ret;
}

}  // namespace tfm::server
