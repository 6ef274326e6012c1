// Noticing that the client of a non-streamed request has gone. cpp-httplib 0.11 (Debian 12's)
// hands a handler neither its socket nor a liveness check, and a non-streamed answer writes
// nothing until generation ends, so a dropped connection would go unseen until then. The
// connection is still open in this process while the handler runs, so it can be found by its
// peer's address among the process's sockets and watched with a non-blocking peek.
#pragma once

#include <string>

namespace tfm::server {

class PeerSocket {
 public:
  // The connected socket whose peer is remote_addr:remote_port and whose local port is
  // local_port; invalid (never reports a close) when none is found.
  PeerSocket(const std::string& remote_addr, int remote_port, int local_port);
  bool valid() const { return fd_ >= 0; }
  // True once the peer has closed or reset the connection. Pending unread bytes (a pipelined
  // next request) count as alive.
  bool closed() const;

 private:
  int fd_ = -1;
};

}  // namespace tfm::server
