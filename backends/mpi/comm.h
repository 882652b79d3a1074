// One collective on MPI_COMM_WORLD, watched: every collective sloth issues through MPI
// (the backends' collective kernels, dist::barrier) goes through a Collective, which
//   - numbers it (a per-process sequence: every rank issues the same collectives in the same
//     order, so the k-th collective of every rank is the same one);
//   - posts an arrival exchange: a small record (sequence number, op, reduce op, root, dtype,
//     shape) sent point-to-point to every other rank (tag kArrivalTag on MPI_COMM_WORLD; MPI
//     keeps point-to-point and collective traffic apart), so each rank knows which peers
//     reached this collective;
//   - with the check on (SLOTH_DIST_CHECK=1) waits for every record and compares them before
//     the data moves: mismatched collectives fail on every rank alike with an error naming
//     the ranks, and the job can go on;
//   - waits for the non-blocking MPI call (MPI_Iallreduce, ...) by polling it with a deadline
//     (SLOTH_DIST_TIMEOUT seconds, default 300). Past the deadline, or when MPI reports an
//     error, it prints which ranks never reached the collective and calls MPI_Abort, so the
//     whole job ends instead of hanging: a rank that stopped, hangs elsewhere or issued other
//     collectives is named.
// Used by one thread at a time (sloth's rule, and MPI_THREAD_SERIALIZED).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/dtype.h"
#include "core/shape.h"

namespace sloth::comm {

constexpr int kMaxDims = 8;
// What each rank tells the others about the collective it reached.
struct Record {
  int64_t seq, op, reduce, root, dtype, ndim, dims[kMaxDims];
};

class Collective {
 public:
  // Takes the next sequence number and posts the arrival exchange. `op` is an OpId (or
  // kBarrierOp); reduce/root only where they matter (0 otherwise).
  static constexpr int64_t kBarrierOp = -1;
  Collective(int64_t op, int64_t reduce, int64_t root, DType dtype, const Shape& shape);
  // Waits (to the end of the job on timeout) if the collective was started but not finished.
  ~Collective();
  Collective(const Collective&) = delete;
  Collective& operator=(const Collective&) = delete;

  // With the check on: waits for every rank's record and compares; a mismatch is an error
  // (every rank sees the same records, so every rank fails alike). Off: nothing.
  absl::Status check_matching();
  // The request of the MPI call that moves the data (one per collective).
  MPI_Request* request() { return &request_; }
  // An MPI call's return code: an error ends the job with a message naming the call.
  void posted(const char* call, int code);
  // Polls the data request and the arrivals once (progress for MPI); true when all are done.
  bool test();
  // Waits for the data request and the arrivals with the deadline (see above).
  void wait();

  const Record& mine() const { return mine_; }
  std::string describe() const;

 private:
  [[noreturn]] void fail(const std::string& why);
  bool arrivals_done();

  Record mine_{};
  std::vector<Record> theirs_;           // by rank (mine included)
  std::vector<MPI_Request> arrivals_;    // receives, by rank (MPI_REQUEST_NULL: mine / done)
  std::vector<MPI_Request> sends_;
  std::vector<char> arrived_;            // by rank
  MPI_Request request_ = MPI_REQUEST_NULL;
  int rank_ = 0, world_ = 1;
  bool started_ = false, finished_ = false;
  double start_time_ = 0;
};

// The process's rank and world size in MPI_COMM_WORLD (MPI must be initialized).
int mpi_rank();
int mpi_world();
// Prints "sloth::dist: rank R of P: <message>" to stderr and ends the whole job.
[[noreturn]] void abort_job(const std::string& message);
// How many collectives this process has issued through MPI.
int64_t collectives_issued();

}  // namespace sloth::comm
