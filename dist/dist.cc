// sloth::dist on MPI: the process group (init, rank, world_size, barrier, finalize) and the
// public collectives, which record the ops of core/ops.def (`---- distributed ----`); the
// backends' kernels make the MPI calls when the step graph runs.
#include "dist/dist.h"

#include <mpi.h>

#include <cstdlib>
#include <exception>
#include <string>

#include "backends/mpi/comm.h"
#include "core/error.h"
#include "core/settings.h"
#include "core/op_attrs.h"
#include "sloth/autograd_api.h"
#include "sloth/dispatch.h"
#include "sloth/lazy_api.h"

namespace sloth::dist {
namespace {

struct World {
  bool initialized = false;
  bool uses_mpi = false;     // collectives and barrier go through MPI
  bool owns_mpi = false;     // init() called MPI_Init_thread, so finalize() ends it
  int rank = 0, size = 1;
};
World& world() {
  static World w;
  return w;
}

// Set by Open MPI's, MPICH's (hydra) and PMIx launchers in every process they start.
bool launched_by_mpirun() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS"})
    if (std::getenv(v) != nullptr) return true;
  return settings().dist_mpi;
}

// A rank that ends abnormally ends the job at once, naming itself, so the other ranks do not
// wait in their next collective until the timeout.
std::terminate_handler previous_terminate = nullptr;
[[noreturn]] void terminate_job() {
  std::string what = "an uncaught exception";
  if (std::exception_ptr e = std::current_exception()) {
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      what = std::string("an uncaught exception: ") + ex.what();
    } catch (...) {
      what = "an uncaught exception (not a std::exception)";
    }
  } else {
    what = "std::terminate (no exception)";
  }
  if (world().uses_mpi) {
    int down = 0;
    MPI_Finalized(&down);
    if (!down) comm::abort_job("stopped by " + what + "; ending the job");
  }
  if (previous_terminate) previous_terminate();
  std::abort();
}
// exit() (or a return from main) without finalize(): the others would wait for this rank.
void exit_without_finalize() {
  const World& w = world();
  if (!w.initialized || !w.uses_mpi || !w.owns_mpi) return;
  int down = 0;
  MPI_Finalized(&down);
  if (!down)
    comm::abort_job("exited without sloth::dist::finalize() (exit() or a return from main before "
                    "finalize); ending the job so the other ranks do not wait for it");
}

std::string mpi_message(int code) {
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, msg, &len);
  return std::string(msg, len);
}
void check_mpi(const char* what, int code) {
  if (code != MPI_SUCCESS)
    throw Error(std::string(what) + " failed: " + mpi_message(code) +
                " (check that every rank was started by the same mpirun and is still running)");
}

const World& need_init(const char* call) {
  const World& w = world();
  if (!w.initialized)
    throw Error(std::string("sloth::dist::") + call +
                ": the process group is not initialized; call sloth::dist::init() first");
  return w;
}

CollectiveAttrs attrs_for(const char* call, ReduceOp op = ReduceOp::kSum, int root = 0) {
  const World& w = need_init(call);
  CollectiveAttrs a;
  a.reduce = static_cast<int64_t>(op);
  a.root = root;
  a.world = w.size;
  a.rank = w.rank;
  return a;
}

void need_defined(const char* call, const Tensor& t) {
  if (!t.defined())
    throw Error(std::string("sloth::dist::") + call + ": the tensor is undefined; pass a tensor");
}

}  // namespace

static_assert(static_cast<int64_t>(ReduceOp::kSum) == CollectiveAttrs::kSum &&
              static_cast<int64_t>(ReduceOp::kAvg) == CollectiveAttrs::kAvg &&
              static_cast<int64_t>(ReduceOp::kMax) == CollectiveAttrs::kMax &&
              static_cast<int64_t>(ReduceOp::kMin) == CollectiveAttrs::kMin,
              "ReduceOp and CollectiveAttrs::Reduce must agree");

void init() {
  World& w = world();
  if (w.initialized) return;
  int mpi_up = 0, mpi_down = 0;
  MPI_Initialized(&mpi_up);
  MPI_Finalized(&mpi_down);
  if (mpi_down)
    throw Error("sloth::dist::init: MPI was already finalized in this process; MPI cannot start "
                "twice, so call init() once at start and finalize() once at exit");
  if (!mpi_up && !launched_by_mpirun()) {
    w = World{.initialized = true};  // a 1-process world, no MPI
    return;
  }
  if (!mpi_up) {
    // SERIALIZED: collectives run on whichever thread syncs, never two at a time.
    int provided = 0;
    check_mpi("sloth::dist::init: MPI_Init_thread",
              MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided));
    w.owns_mpi = true;
    if (provided < MPI_THREAD_SERIALIZED) {
      // Still correct while one thread at a time calls sloth, which is sloth's own rule.
    }
  }
  // Errors come back as codes (turned into sloth::Error) instead of aborting the job.
  check_mpi("sloth::dist::init: MPI_Comm_set_errhandler",
            MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  check_mpi("sloth::dist::init: MPI_Comm_rank", MPI_Comm_rank(MPI_COMM_WORLD, &w.rank));
  check_mpi("sloth::dist::init: MPI_Comm_size", MPI_Comm_size(MPI_COMM_WORLD, &w.size));
  w.uses_mpi = true;
  w.initialized = true;
  static bool hooks_installed = false;
  if (!hooks_installed) {
    hooks_installed = true;
    previous_terminate = std::set_terminate(terminate_job);
    std::atexit(exit_without_finalize);
  }
}

void finalize() {
  World& w = world();
  if (!w.initialized) return;
  mark_step();  // pending collectives need MPI
  if (w.owns_mpi) {
    int down = 0;
    MPI_Finalized(&down);
    if (!down) check_mpi("sloth::dist::finalize: MPI_Finalize", MPI_Finalize());
  }
  w = World{};
}

bool is_initialized() { return world().initialized; }
int rank() { return need_init("rank").rank; }
int world_size() { return need_init("world_size").size; }

void barrier() {
  const World& w = need_init("barrier");
  if (!w.uses_mpi || w.size == 1) return;
  comm::Collective c(comm::Collective::kBarrierOp, 0, 0, DType::kBool, {});
  if (absl::Status st = c.check_matching(); !st.ok())
    throw Error("sloth::dist::barrier: " + std::string(st.message()));
  c.posted("MPI_Ibarrier", MPI_Ibarrier(MPI_COMM_WORLD, c.request()));
  c.wait();
}

void all_reduce(Tensor& t, ReduceOp op) {
  need_defined("all_reduce", t);
  const CollectiveAttrs a = attrs_for("all_reduce", op);
  NoGradGuard no_grad;  // as c10d: a collective acts on values, not on autograd history
  Tensor r = call_op(OpId::kAllReduce, {t}, a);  // checks before anything is recorded
  t.copy_(r);
}

Tensor all_reduced(const Tensor& t, ReduceOp op) {
  need_defined("all_reduced", t);
  const CollectiveAttrs a = attrs_for("all_reduced", op);
  NoGradGuard no_grad;
  return call_op(OpId::kAllReduce, {t}, a);
}

void broadcast(Tensor& t, int root) {
  need_defined("broadcast", t);
  const CollectiveAttrs a = attrs_for("broadcast", ReduceOp::kSum, root);
  NoGradGuard no_grad;
  Tensor r = call_op(OpId::kBroadcast, {t}, a);
  t.copy_(r);
}

std::vector<Tensor> all_gather(const Tensor& t) {
  need_defined("all_gather", t);
  const CollectiveAttrs a = attrs_for("all_gather");
  Tensor g = call_op(OpId::kAllGather, {t}, a);
  std::vector<Tensor> parts;
  parts.reserve(a.world);
  if (t.dim() == 0) {
    for (int64_t r = 0; r < a.world; ++r) parts.push_back(g.select(0, r));
  } else {
    const int64_t n = t.size(0);
    for (int64_t r = 0; r < a.world; ++r) parts.push_back(g.narrow(0, r * n, n));
  }
  return parts;
}

Tensor reduce_scatter(const Tensor& t, ReduceOp op) {
  need_defined("reduce_scatter", t);
  return call_op(OpId::kReduceScatter, {t}, attrs_for("reduce_scatter", op));
}

}  // namespace sloth::dist
