// The process group of a data-parallel run: a thin layer over MPI that the rest of the code
// calls instead of MPI itself.
//
// MPI is initialised only when the process was started by an MPI launcher (mpirun sets
// OMPI_COMM_WORLD_SIZE / PMIX_RANK / PMI_SIZE): a plain `tfm ...` is a group of one, and no
// function here then makes an MPI call. Collectives must be called by every rank in the same
// order. Calls come from one thread at a time (MPI_THREAD_SERIALIZED: a server's scheduler
// thread makes them while the main thread waits).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tfm::dist {

// Starts MPI on the first call when launched by mpirun (throws when this build has no MPI).
int rank();
int size();

// The ranks that run a collective together: every rank of the job (world()), or one group of
// a model-parallel layout (the shards of one tensor-parallel model, the replicas that sum
// gradients). Every collective below takes one; the default is the whole job.
struct Group {
  int id = 0;    // 0: the whole job
  int rank = 0;  // this rank's index in the group
  int size = 1;
};
Group world();
// Cuts the job into groups (collective over every rank): the ranks that pass the same
// `color` form one, ordered by `key`. Groups live until finalize().
Group split(int color, int key);
bool launched();  // started by an MPI launcher (even with one rank)
// A short description of the group for start-up lines ("2 ranks on 1 host" ...).
std::string describe();

// Blocking collectives (no-ops on a group of one).
void allreduce_sum(float* data, std::size_t n, const Group& g = world());
void allreduce_sum(double* data, std::size_t n, const Group& g = world());
std::int64_t allreduce_max(std::int64_t v, const Group& g = world());
// An in-place sum over all ranks that leaves the same bits on every rank: every rank's values
// are gathered and added in rank order. (MPI_Allreduce may add in a different order on each
// rank; tensor parallelism's partial sums must agree exactly, or the ranks could pick
// different tokens.)
void allreduce_sum_ordered(float* data, std::size_t n, const Group& g = world());
void broadcast(void* data, std::size_t bytes, int root, const Group& g = world());
// Root's bytes on every rank. idle: the others wait for them sleeping between polls rather
// than spinning (a server's ranks waiting for requests).
std::string broadcast_bytes(const std::string& mine, int root, const Group& g = world(), bool idle = false);
// Every rank's bytes, in rank order, on every rank (each broadcasts its own in turn).
std::vector<std::string> allgather_bytes(const std::string& mine, const Group& g = world());
// send to and receive from `partner` at once (n floats each way).
void exchange(const float* send, float* recv, std::size_t n, int partner, const Group& g = world());
// n floats to rank `to`, and from rank `from` (blocking; a pipeline stage's activations).
// Messages between two ranks with the same tag arrive in the order they were sent.
void send(const float* data, std::size_t n, int to, const Group& g = world(), int tag = 8);
void recv(float* data, std::size_t n, int from, const Group& g = world(), int tag = 8);
void barrier(const Group& g = world());

// A started non-blocking operation (its MPI requests): wait() finishes it, test() lets MPI
// progress it; the destructor waits, so a request is never left dangling.
class Pending {
 public:
  Pending() = default;
  Pending(Pending&& o) noexcept;
  Pending& operator=(Pending&& o) noexcept;
  Pending(const Pending&) = delete;
  Pending& operator=(const Pending&) = delete;
  ~Pending();
  bool test();  // true when done
  void wait();

 protected:
  void settle() noexcept;        // wait() unless an exception is unwinding (then abandon)
  std::vector<void*> requests_;  // MPI_Request, one per chunk of at most 2^30 elements
};

// A non-blocking in-place sum over all ranks of a float buffer (MPI_Iallreduce). The buffer
// must stay untouched until wait() returns.
class Allreduce : public Pending {
 public:
  Allreduce() = default;
  Allreduce(float* data, std::size_t n, const Group& g = world());  // starts it
};

// A non-blocking send (MPI_Isend) of a buffer that it keeps until the send completes: a
// pipeline stage sends on and goes on with its next pass while the receiver is busy.
class Send : public Pending {
 public:
  Send(std::vector<float> data, int to, int tag, const Group& g = world());  // starts it
  Send(Send&& o) noexcept = default;  // (the buffer's storage moves with it)
  Send& operator=(Send&& o) noexcept;
  ~Send() { settle(); }  // before data_ goes

 private:
  std::vector<float> data_;
};

// Ends the MPI session after a successful run (every rank must call it).
void finalize();
// Ends the whole job after an error on this rank: prints `message` with the rank to stderr
// and makes the launcher stop every rank (MPI_Abort), so the others never wait forever in a
// collective. Only the CLI calls this; the library throws as everywhere else.
[[noreturn]] void abort_job(const std::string& message, int code);

}  // namespace tfm::dist
