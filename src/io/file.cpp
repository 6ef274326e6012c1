// Whole-file read and atomic write (temp file in the same directory, fsync, rename, fsync dir).
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "tfm/error.h"
#include "tfm/safetensors.h"

namespace tfm {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  TFM_CHECK(in.good(), path, "cannot open: ", std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  TFM_CHECK(!in.bad(), path, "read error");
  return ss.str();
}

void write_file_atomic(const std::string& path, const std::string& bytes) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  TFM_CHECK(fd >= 0, path, "cannot create ", tmp, ": ", std::strerror(errno));
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t w = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      const int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      fail(path, "write failed: ", std::strerror(err));
    }
    done += static_cast<std::size_t>(w);
  }
  // Both always run (a failed fsync must not leak the descriptor); a full disk can surface
  // at either.
  const int synced = ::fsync(fd), sync_err = errno;
  const int closed = ::close(fd), close_err = errno;
  if (synced != 0 || closed != 0) {
    ::unlink(tmp.c_str());
    fail(path, synced != 0 ? "fsync" : "close", " failed: ", std::strerror(synced != 0 ? sync_err : close_err));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    fail(path, "rename failed: ", std::strerror(err));
  }
  // Make the rename itself durable.
  const std::string dir = path.find('/') == std::string::npos ? "." : path.substr(0, path.rfind('/') + 1);
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

}  // namespace tfm
