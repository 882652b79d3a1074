// The watched collective (backends/mpi/comm.h).
#include "backends/mpi/comm.h"

#include <sched.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include "absl/strings/str_format.h"
#include "core/op_table.h"
#include "core/settings.h"

namespace sloth::comm {
namespace {

// A tag no other sloth traffic uses (MPI guarantees tags up to 32767).
constexpr int kArrivalTag = 0x5107;

int64_t& sequence() {
  static int64_t seq = 0;
  return seq;
}

std::string op_label(int64_t op) {
  if (op == Collective::kBarrierOp) return "barrier";
  return std::string(op_name(static_cast<OpId>(op)));
}

std::string describe_record(const Record& r) {
  if (r.op == Collective::kBarrierOp) return absl::StrFormat("collective #%d barrier()", r.seq);
  std::string shape = "[";
  for (int64_t d = 0; d < r.ndim && d < kMaxDims; ++d)
    shape += (d ? ", " : "") + std::to_string(r.dims[d]);
  shape += r.ndim > kMaxDims ? ", ...]" : "]";
  return absl::StrFormat("collective #%d %s(%s %s, reduce %d, root %d)", r.seq, op_label(r.op),
                         dtype_name(static_cast<DType>(r.dtype)), shape, r.reduce, r.root);
}

std::string mpi_message(int code) {
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, msg, &len);
  return std::string(msg, len);
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Between two polls: poll at full speed for 100 us (the peer is usually running, and Open
// MPI's non-blocking collectives advance only inside MPI calls), then give the core away
// (ranks often share cores and the one we wait for may need it): yields, then short sleeps,
// then longer ones, so a stuck job does not burn a core.
void nap(double waited) {
  if (waited < 1e-4) return;  // the peer is usually running: keep polling
  if (waited < 2e-3) sched_yield();
  else std::this_thread::sleep_for(std::chrono::microseconds(waited < 1 ? 10 : waited < 5 ? 100 : 1000));
}

}  // namespace

int mpi_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
int mpi_world() {
  int p = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  return p;
}
int64_t collectives_issued() { return sequence(); }

void abort_job(const std::string& message) {
  std::fprintf(stderr, "sloth::dist: rank %d of %d: %s\n", mpi_rank(), mpi_world(), message.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::_Exit(1);  // MPI_Abort does not return; if it did, end this rank at least
}

Collective::Collective(int64_t op, int64_t reduce, int64_t root, DType dtype, const Shape& shape)
    : rank_(mpi_rank()), world_(mpi_world()) {
  mine_.seq = sequence()++;
  mine_.op = op;
  mine_.reduce = reduce;
  mine_.root = root;
  mine_.dtype = static_cast<int64_t>(dtype);
  mine_.ndim = static_cast<int64_t>(shape.size());
  for (int64_t d = 0; d < mine_.ndim && d < kMaxDims; ++d) mine_.dims[d] = shape[d];
  start_time_ = now_s();
  theirs_.assign(world_, Record{});
  theirs_[rank_] = mine_;
  arrivals_.assign(world_, MPI_REQUEST_NULL);
  sends_.assign(world_, MPI_REQUEST_NULL);
  arrived_.assign(world_, 0);
  arrived_[rank_] = 1;
  // Point-to-point messages between a pair keep their order, so the k-th record from rank j
  // is about j's k-th collective.
  for (int r = 0; r < world_; ++r) {
    if (r == rank_) continue;
    posted("MPI_Irecv", MPI_Irecv(&theirs_[r], sizeof(Record), MPI_BYTE, r, kArrivalTag,
                                  MPI_COMM_WORLD, &arrivals_[r]));
    posted("MPI_Isend", MPI_Isend(&mine_, sizeof(Record), MPI_BYTE, r, kArrivalTag,
                                  MPI_COMM_WORLD, &sends_[r]));
  }
  started_ = true;
}

Collective::~Collective() {
  if (started_ && !finished_) wait();
}

std::string Collective::describe() const { return describe_record(mine_); }

void Collective::posted(const char* call, int code) {
  if (code != MPI_SUCCESS)
    fail(absl::StrFormat("%s failed: %s", call, mpi_message(code)));
}

bool Collective::arrivals_done() {
  for (int r = 0; r < world_; ++r) {
    if (arrived_[r]) continue;
    int flag = 0;
    posted("MPI_Test", MPI_Test(&arrivals_[r], &flag, MPI_STATUS_IGNORE));
    if (flag) arrived_[r] = 1;
  }
  for (int r = 0; r < world_; ++r)
    if (!arrived_[r]) return false;
  return true;
}

bool Collective::test() {
  int data_done = 1;
  if (request_ != MPI_REQUEST_NULL)
    posted("the collective's MPI_Test", MPI_Test(&request_, &data_done, MPI_STATUS_IGNORE));
  const bool arrived = arrivals_done();
  int sent = 0;
  posted("MPI_Testall", MPI_Testall(world_, sends_.data(), &sent, MPI_STATUSES_IGNORE));
  return data_done && arrived && sent;
}

void Collective::wait() {
  // Spin briefly (small collectives finish in microseconds), then poll between yields of
  // the core, then sleep in naps (see nap()).
  const double limit = settings().dist_timeout_s;
  for (int64_t spins = 0;; ++spins) {
    if (test()) break;
    if (spins < 200) continue;
    const double waited = now_s() - start_time_;
    if (waited > limit)
      fail(absl::StrFormat("did not complete within %.0f s (SLOTH_DIST_TIMEOUT)", limit));
    nap(waited);
  }
  finished_ = true;
}

absl::Status Collective::check_matching() {
  if (!settings().dist_check) return absl::OkStatus();
  const double limit = settings().dist_timeout_s;
  for (int64_t spins = 0; !arrivals_done(); ++spins) {
    if (spins < 200) continue;
    const double waited = now_s() - start_time_;
    if (waited > limit)
      fail(absl::StrFormat("the arrival check did not complete within %.0f s (SLOTH_DIST_TIMEOUT)",
                           limit));
    nap(waited);
  }
  for (int r = 1; r < world_; ++r) {
    Record a = theirs_[0], b = theirs_[r];
    if (std::memcmp(&a, &b, sizeof(Record)) != 0) {
      // No data moves: finish the sends and report, on every rank alike.
      finished_ = true;
      MPI_Waitall(world_, sends_.data(), MPI_STATUSES_IGNORE);
      return absl::FailedPreconditionError(absl::StrFormat(
          "%s: mismatched collectives: rank 0 issued %s but rank %d issued %s; every rank must "
          "issue the same collectives in the same order with the same shapes and dtypes",
          op_label(mine_.op), describe_record(a), r, describe_record(b)));
    }
  }
  return absl::OkStatus();
}

void Collective::fail(const std::string& why) {
  finished_ = true;
  std::string missing;
  int n_missing = 0;
  for (int r = 0; r < world_; ++r)
    if (!arrived_[r]) missing += (n_missing++ ? ", " : "") + std::to_string(r);
  std::string who =
      n_missing > 0
          ? absl::StrFormat("rank%s %s did not reach it (%s stopped, hangs elsewhere, or issued "
                            "other collectives)", n_missing > 1 ? "s" : "", missing,
                            n_missing > 1 ? "they" : "it")
          : std::string("every rank reached it, so a rank failed during it");
  abort_job(absl::StrFormat("%s %s after %.1f s: %s; ending the job", describe(), why,
                            now_s() - start_time_, who));
}

}  // namespace sloth::comm
