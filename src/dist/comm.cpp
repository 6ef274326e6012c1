// MPI behind tfm::dist (comm.h). Built without MPI (TFM_HAVE_MPI undefined) the group is
// always one process and a launch under mpirun is an error that says so.
#include "dist/comm.h"

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <chrono>
#include <exception>
#include <thread>
#include <utility>
#include <vector>

#include "tfm/error.h"

#ifdef TFM_HAVE_MPI
#include <mpi.h>
#endif

namespace tfm::dist {
namespace {

bool env_set(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0';
}

// MPI counts are ints: big buffers go in chunks.
constexpr std::size_t kChunk = std::size_t{1} << 30;

struct Job {
  bool launched = false;
  bool initialised = false;
  bool finalised = false;
  int rank = 0, size = 1;
};

Job& group() {
  static Job g = [] {
    Job x;
    x.launched = env_set("OMPI_COMM_WORLD_SIZE") || env_set("PMIX_RANK") || env_set("PMI_SIZE");
    if (!x.launched) return x;
#ifdef TFM_HAVE_MPI
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
    // Errors come back as codes (checked below) instead of killing the job from inside MPI,
    // so each one is reported with what was being done.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &x.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &x.size);
    x.initialised = true;
#else
    fail("distributed", "started by an MPI launcher, but this tfm was built without MPI (install libopenmpi-dev "
         "and rebuild)");
#endif
    return x;
  }();
  return g;
}

bool many() { return group().size > 1; }

#ifdef TFM_HAVE_MPI
// The communicators of split() groups; id 0 is MPI_COMM_WORLD.
std::vector<MPI_Comm>& comms() {
  static std::vector<MPI_Comm> c{MPI_COMM_WORLD};
  return c;
}
MPI_Comm comm(const Group& g) {
  TFM_CHECK(g.id >= 0 && static_cast<std::size_t>(g.id) < comms().size(), "distributed", "no process group ", g.id);
  return comms()[static_cast<std::size_t>(g.id)];
}
#endif

#ifdef TFM_HAVE_MPI
void check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  fail("distributed", what, " failed on rank ", group().rank, ": ", std::string(text, static_cast<std::size_t>(len)));
}
#endif

}  // namespace

int rank() { return group().rank; }
int size() { return group().size; }
bool launched() { return group().launched; }

Group world() { return {0, group().rank, group().size}; }

Group split(int color, int key) {
  if (!many()) return world();
#ifdef TFM_HAVE_MPI
  MPI_Comm c = MPI_COMM_NULL;
  check(MPI_Comm_split(MPI_COMM_WORLD, color, key, &c), "splitting the ranks into groups");
  MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
  Group g;
  g.id = static_cast<int>(comms().size());
  comms().push_back(c);
  MPI_Comm_rank(c, &g.rank);
  MPI_Comm_size(c, &g.size);
  return g;
#else
  (void)color;
  (void)key;
  return world();
#endif
}

std::string describe() {
  const Job& g = group();
  if (!g.launched) return "1 rank (no MPI launch)";
  std::string s = std::to_string(g.size) + (g.size == 1 ? " rank" : " ranks");
#ifdef TFM_HAVE_MPI
  // Hosts: rank 0 counts the distinct processor names.
  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int len = 0;
  MPI_Get_processor_name(name, &len);
  std::vector<char> all(static_cast<std::size_t>(g.size) * MPI_MAX_PROCESSOR_NAME);
  check(MPI_Allgather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all.data(), MPI_MAX_PROCESSOR_NAME, MPI_CHAR,
                      MPI_COMM_WORLD),
        "gathering host names");
  std::vector<std::string> hosts;
  for (int r = 0; r < g.size; ++r) {
    std::string h(all.data() + static_cast<std::size_t>(r) * MPI_MAX_PROCESSOR_NAME);
    bool seen = false;
    for (const auto& x : hosts) seen = seen || x == h;
    if (!seen) hosts.push_back(h);
  }
  s += " on " + std::to_string(hosts.size()) + (hosts.size() == 1 ? " host" : " hosts");
#endif
  return s;
}

void allreduce_sum(float* data, std::size_t n, const Group& g) {
  if (g.size <= 1) return;
#ifdef TFM_HAVE_MPI
  for (std::size_t i = 0; i < n; i += kChunk)
    check(MPI_Allreduce(MPI_IN_PLACE, data + i, static_cast<int>(std::min(kChunk, n - i)), MPI_FLOAT, MPI_SUM,
                        comm(g)),
          "all-reduce");
#endif
}

void allreduce_sum(double* data, std::size_t n, const Group& g) {
  if (g.size <= 1) return;
#ifdef TFM_HAVE_MPI
  for (std::size_t i = 0; i < n; i += kChunk)
    check(MPI_Allreduce(MPI_IN_PLACE, data + i, static_cast<int>(std::min(kChunk, n - i)), MPI_DOUBLE, MPI_SUM,
                        comm(g)),
          "all-reduce");
#endif
}

std::int64_t allreduce_max(std::int64_t v, const Group& g) {
  if (g.size <= 1) return v;
#ifdef TFM_HAVE_MPI
  long long x = v;
  check(MPI_Allreduce(MPI_IN_PLACE, &x, 1, MPI_LONG_LONG, MPI_MAX, comm(g)), "all-reduce (max)");
  return x;
#else
  return v;
#endif
}

void allreduce_sum_ordered(float* data, std::size_t n, const Group& g) {
  if (g.size <= 1) return;
#ifdef TFM_HAVE_MPI
  const auto ranks = static_cast<std::size_t>(g.size);
  TFM_CHECK(n * ranks < kChunk, "distributed", "ordered all-reduce of ", n, " values is too large");
  std::vector<float> all(n * ranks);
  check(MPI_Allgather(data, static_cast<int>(n), MPI_FLOAT, all.data(), static_cast<int>(n), MPI_FLOAT, comm(g)),
        "all-gather");
  std::copy(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(n), data);
  for (std::size_t r = 1; r < ranks; ++r)
    for (std::size_t i = 0; i < n; ++i) data[i] += all[r * n + i];
#endif
}

void broadcast(void* data, std::size_t bytes, int root, const Group& g) {
  if (g.size <= 1) return;
#ifdef TFM_HAVE_MPI
  auto* p = static_cast<char*>(data);
  for (std::size_t i = 0; i < bytes; i += kChunk)
    check(MPI_Bcast(p + i, static_cast<int>(std::min(kChunk, bytes - i)), MPI_BYTE, root, comm(g)),
          "broadcast");
#endif
}

std::string broadcast_bytes(const std::string& mine, int root, const Group& g, bool idle) {
  if (g.size <= 1) return mine;
  std::int64_t n = g.rank == root ? static_cast<std::int64_t>(mine.size()) : 0;
#ifdef TFM_HAVE_MPI
  // The length goes non-blocking on every rank (a blocking and a non-blocking collective never
  // match), so that an idle rank can wait for it without spinning a core.
  MPI_Request req = MPI_REQUEST_NULL;
  check(MPI_Ibcast(&n, 1, MPI_INT64_T, root, comm(g), &req), "broadcast");
  // Sleeps growing from 10 us to 2 ms: prompt while a server decodes, near-idle while it waits.
  for (int done = 0, pause_us = 10;; pause_us = std::min(2 * pause_us, 2000)) {
    check(MPI_Test(&req, &done, MPI_STATUS_IGNORE), "broadcast");
    if (done) break;
    if (idle && g.rank != root) std::this_thread::sleep_for(std::chrono::microseconds(pause_us));
  }
#endif
  std::string b = g.rank == root ? mine : std::string(static_cast<std::size_t>(n), '\0');
  broadcast(b.data(), b.size(), root, g);
  return b;
}

std::vector<std::string> allgather_bytes(const std::string& mine, const Group& g) {
  std::vector<std::string> out;
  for (int r = 0; r < g.size; ++r) out.push_back(broadcast_bytes(r == g.rank ? mine : std::string(), r, g));
  return out;
}

void exchange(const float* send, float* recv, std::size_t n, int partner, const Group& g) {
  if (g.size <= 1) return;
#ifdef TFM_HAVE_MPI
  for (std::size_t i = 0; i < n; i += kChunk) {
    const int c = static_cast<int>(std::min(kChunk, n - i));
    check(MPI_Sendrecv(send + i, c, MPI_FLOAT, partner, 7, recv + i, c, MPI_FLOAT, partner, 7, comm(g),
                       MPI_STATUS_IGNORE),
          "exchange");
  }
#endif
}

void send(const float* data, std::size_t n, int to, const Group& g, int tag) {
  if (g.size <= 1) return;
#ifdef TFM_HAVE_MPI
  for (std::size_t i = 0; i < n; i += kChunk)
    check(MPI_Send(data + i, static_cast<int>(std::min(kChunk, n - i)), MPI_FLOAT, to, tag, comm(g)), "send");
#else
  (void)data, (void)n, (void)to, (void)tag;
#endif
}

void recv(float* data, std::size_t n, int from, const Group& g, int tag) {
  if (g.size <= 1) return;
#ifdef TFM_HAVE_MPI
  for (std::size_t i = 0; i < n; i += kChunk)
    check(MPI_Recv(data + i, static_cast<int>(std::min(kChunk, n - i)), MPI_FLOAT, from, tag, comm(g),
                   MPI_STATUS_IGNORE),
          "receive");
#else
  (void)data, (void)n, (void)from, (void)tag;
#endif
}

void barrier(const Group& g) {
  if (g.size <= 1) return;
#ifdef TFM_HAVE_MPI
  check(MPI_Barrier(comm(g)), "barrier");
#endif
}

Allreduce::Allreduce(float* data, std::size_t n, const Group& g) {
  if (g.size <= 1) return;
#ifdef TFM_HAVE_MPI
  for (std::size_t i = 0; i < n; i += kChunk) {
    auto* req = new MPI_Request;
    check(MPI_Iallreduce(MPI_IN_PLACE, data + i, static_cast<int>(std::min(kChunk, n - i)), MPI_FLOAT, MPI_SUM,
                         comm(g), req),
          "starting an all-reduce");
    requests_.push_back(req);
  }
#else
  (void)data;
  (void)n;
  (void)g;
#endif
}

Send::Send(std::vector<float> data, int to, int tag, const Group& g) : data_(std::move(data)) {
  if (g.size <= 1) return;
#ifdef TFM_HAVE_MPI
  for (std::size_t i = 0; i < data_.size(); i += kChunk) {
    auto* req = new MPI_Request;
    check(MPI_Isend(data_.data() + i, static_cast<int>(std::min(kChunk, data_.size() - i)), MPI_FLOAT, to, tag,
                    comm(g), req),
          "starting a send");
    requests_.push_back(req);
  }
#else
  (void)to;
  (void)tag;
#endif
}

Send& Send::operator=(Send&& o) noexcept {
  if (this != &o) {
    settle();  // this send's buffer must outlive its requests
    requests_ = std::exchange(o.requests_, {});
    data_ = std::move(o.data_);
  }
  return *this;
}

Pending::Pending(Pending&& o) noexcept : requests_(std::exchange(o.requests_, {})) {}

Pending& Pending::operator=(Pending&& o) noexcept {
  if (this != &o) {
    settle();
    requests_ = std::exchange(o.requests_, {});
  }
  return *this;
}

Pending::~Pending() { settle(); }

void Pending::settle() noexcept {
  // While an exception unwinds, the other ranks may never answer this request: waiting would
  // hang the job that the error path is about to stop, so the request is abandoned.
  if (std::uncaught_exceptions() > 0) return;
  try {
    wait();
  } catch (...) {
  }
}

bool Pending::test() {
#ifdef TFM_HAVE_MPI
  bool done = true;
  for (void* r : requests_) {
    int flag = 0;
    check(MPI_Test(static_cast<MPI_Request*>(r), &flag, MPI_STATUS_IGNORE), "a non-blocking operation");
    done = done && flag != 0;
  }
  return done;
#else
  return true;
#endif
}

void Pending::wait() {
#ifdef TFM_HAVE_MPI
  std::vector<void*> reqs = std::exchange(requests_, {});
  for (void* r : reqs) {
    auto* req = static_cast<MPI_Request*>(r);
    const int rc = MPI_Wait(req, MPI_STATUS_IGNORE);
    delete req;
    check(rc, "a non-blocking operation");
  }
#endif
}

void finalize() {
  Job& g = group();
  if (!g.initialised || g.finalised) return;
#ifdef TFM_HAVE_MPI
  MPI_Finalize();
#endif
  g.finalised = true;
}

void abort_job(const std::string& message, int code) {
  const Job& g = group();
  if (g.size > 1)
    std::fprintf(stderr, "error (rank %d of %d): %s; stopping all ranks\n", g.rank, g.size, message.c_str());
  else
    std::fprintf(stderr, "error: %s\n", message.c_str());
  std::fflush(stderr);
#ifdef TFM_HAVE_MPI
  if (g.initialised && !g.finalised) MPI_Abort(MPI_COMM_WORLD, code);
#endif
  std::exit(code);
}

}  // namespace tfm::dist
