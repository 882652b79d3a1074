// sloth::dist: data-parallel training over processes (and machines) with MPI, named after
// LibTorch's c10d. Run the same program on every rank:
//
//   sloth::dist::init();                        // mpirun -np 4 ./train, or ./train alone
//   sloth::dist::all_reduce(grad, sloth::dist::ReduceOp::kAvg);   // lazy: in the step graph
//   ...
//   sloth::dist::finalize();
//
// The collectives are ops of the table (core/ops.def, `---- distributed ----`): recorded like
// any op, functionalized (all_reduce and broadcast write their result into the tensor, as an
// in-place op), and run by the backend when the step graph runs, in program order. Every
// rank must issue the same collectives in the same order with the same shapes and dtypes.
//
// Started without mpirun (no MPI launcher in the environment), init() makes a 1-process
// world without touching MPI: rank 0 of 1, every collective returns its input. Set
// SLOTH_DIST_MPI=1 to call MPI_Init anyway (Open MPI's singleton mode).
//
// The in-place collectives do not record autograd history (as c10d's): they act on
// values, typically gradients. The ops themselves have derivatives (all_reduce <-> all_reduce,
// all_gather <-> reduce_scatter) for code that calls them differentiably.
//
// Errors throw sloth::Error naming the call and the fix; a collective that fails in MPI
// throws at the sync that runs it.
//
// Faults end the whole job instead of hanging it (docs/distributed.md, Faults): a collective
// or barrier that waits longer than SLOTH_DIST_TIMEOUT seconds (default 300) calls MPI_Abort
// after printing which ranks never reached it; after init(), an uncaught exception
// (std::terminate) or an exit without finalize() on any rank aborts the job at once, naming
// that rank. SLOTH_DIST_CHECK=1 compares every collective across the ranks first (sequence
// number, op, dtype, shape): a mismatch throws on every rank alike.
#pragma once

#include <vector>

#include "sloth/tensor.h"

namespace sloth::dist {

enum class ReduceOp { kSum, kAvg, kMax, kMin };

// Joins the job: MPI_Init_thread (MPI_THREAD_SERIALIZED) when launched by mpirun/mpiexec or
// when SLOTH_DIST_MPI=1; else a 1-process world. Calling it again does nothing. A program
// that initialized MPI itself keeps it (and finalizes it itself).
void init();
// Runs pending work (a pending collective needs MPI), then MPI_Finalize if init() started
// MPI. After it, collectives throw until init() is called again... which MPI forbids, so
// call it once, at exit.
void finalize();
bool is_initialized();
// This process's rank in [0, world_size()), and the number of processes; throw before init().
int rank();
int world_size();
// Blocks until every rank reaches it. It does not run pending lazy work (mark_step() first
// if the ranks' pending collectives must complete before it).
void barrier();

// t <- the reduction of t over all ranks (kAvg: the mean; floating dtypes only).
void all_reduce(Tensor& t, ReduceOp op = ReduceOp::kSum);
// t <- root's t, on every rank (every rank's t must have root's shape and dtype).
void broadcast(Tensor& t, int root = 0);
// Every rank's t, in rank order (each a view of one gathered tensor, [world * n, ...]).
std::vector<Tensor> all_gather(const Tensor& t);
// The reduction of t over all ranks as a new tensor; t is unchanged (as PyTorch's functional
// collectives, torch.distributed._functional_collectives.all_reduce). Cheaper than the
// in-place form when the result feeds other ops: no copy back into t, so the collective can
// stay in flight until its first reader (nn::DistributedDataParallel uses it). No autograd
// history.
Tensor all_reduced(const Tensor& t, ReduceOp op = ReduceOp::kSum);
// t's dim 0 is split into world_size() equal blocks; rank r gets block r reduced over ranks.
Tensor reduce_scatter(const Tensor& t, ReduceOp op = ReduceOp::kSum);

}  // namespace sloth::dist
