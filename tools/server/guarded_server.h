// cpp-httplib's Server with the guards against slow and crowding clients that 0.11.4 lacks
// (docs/server.md, "Limits and security"):
//   - a connection never waits for a worker: ElasticPool gives each its own thread, up to
//     max_connections at once, so idle keep-alive connections and slow senders cannot make
//     /health (or anything) wait behind them;
//   - a per-client limit: a peer address holding max_per_client connections gets a 503 and
//     the new connection is closed before anything is read;
//   - a header deadline: a request's line and headers must arrive within header_timeout of
//     its first byte (one byte every second no longer keeps a connection forever).
// It overrides Server::process_and_close_socket (virtual in 0.11.4) with the same keep-alive
// loop around Server::process_request, reading through DeadlineStream.
#pragma once

#include <chrono>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include <httplib.h>

namespace tfm::server {

// A thread per task, up to max_threads at once; past it tasks wait for the next free thread.
class ElasticPool : public httplib::TaskQueue {
 public:
  explicit ElasticPool(std::size_t max_threads);
  void enqueue(std::function<void()> fn) override;
  void shutdown() override;  // waits for every task
  struct State;              // shared with the threads: a finishing one may outlive the pool

 private:
  std::size_t max_;
  std::shared_ptr<State> st_;
};

struct ConnectionLimits {
  std::size_t max_connections = 1024;             // threads (connections served at once)
  std::size_t max_per_client = 256;               // connections one peer address may hold
  std::chrono::milliseconds header_timeout{5000}; // a request's head, from its first byte
};

class GuardedServer : public httplib::Server {
 public:
  explicit GuardedServer(ConnectionLimits limits);
  // After binding: the listen backlog (the packaged library compiles in 5, and a burst of
  // connections past it is dropped or answered with SYN cookies that lose data). Linux takes a
  // second listen() on the bound socket as the new backlog.
  void set_listen_backlog(int n);
  // Called by a handler that answers without reading the whole body (a 413): the connection
  // closes after this response instead of reading the unread body as the next request.
  static void close_after_response();

 private:
  bool process_and_close_socket(socket_t sock) override;
  ConnectionLimits limits_;
  std::mutex mu_;
  std::map<std::string, std::size_t> per_client_;
};

}  // namespace tfm::server
