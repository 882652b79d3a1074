// The distributed collectives (core/ops.def, `---- distributed ----`) on the CPU: each kernel
// makes a fresh contiguous result and hands the buffers to MPI (MPI_COMM_WORLD). The ranks
// run the same program, so they reach the same collectives in the same order (the backend
// runs a plan's steps one after another, on the thread that called the sync).
//
// A 1-process world (CollectiveAttrs::world == 1) computes without MPI, so the op-table
// tests and programs started without mpirun need no MPI at all. ReduceOp::kAvg sums and
// divides by the world size (MPI has no average).
//
// Each kernel posts the non-blocking MPI call (MPI_Iallreduce, ...) under a comm::Collective
// (backends/mpi/comm.h), which waits for it with a deadline (SLOTH_DIST_TIMEOUT) and ends
// the job naming the ranks that never arrived, and with SLOTH_DIST_CHECK=1 compares the
// ranks' collectives first (mismatches fail on every rank with an error naming them).
#include <mpi.h>

#include <climits>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/op_kernels.h"
#include "backends/mpi/comm.h"
#include "core/error.h"
#include "core/op_attrs.h"
#include "lazy/profiler.h"

namespace sloth::cpu {
namespace {

MPI_Datatype mpi_type(DType t) {
  switch (t) {
    case DType::kBool: return MPI_C_BOOL;
    case DType::kInt32: return MPI_INT32_T;
    case DType::kInt64: return MPI_INT64_T;
    case DType::kFloat32: return MPI_FLOAT;
    case DType::kFloat64: return MPI_DOUBLE;
    case DType::kUInt8: return MPI_UINT8_T;
  }
  return MPI_DATATYPE_NULL;
}

MPI_Op mpi_op(int64_t reduce) {
  switch (reduce) {
    case CollectiveAttrs::kMax: return MPI_MAX;
    case CollectiveAttrs::kMin: return MPI_MIN;
    default: return MPI_SUM;  // kSum, and kAvg before its division
  }
}

// MPI counts are ints; bigger tensors would need chunking (not written yet).
absl::Status check_ready(const Instr& in, int64_t count) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized)
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s: MPI is %s; call sloth::dist::init() before the first collective and "
        "sloth::dist::finalize() after the last", op_name(in.op),
        finalized ? "already finalized" : "not initialized"));
  if (count > INT_MAX)
    return absl::UnimplementedError(absl::StrFormat(
        "%s: %d elements exceed MPI's int count; split the tensor into chunks of at most %d",
        op_name(in.op), count, INT_MAX));
  return absl::OkStatus();
}

// The collective's watch (sequence number, arrival exchange, deadline): backends/mpi/comm.h.
// On the heap: MPI holds the addresses of its records until it completes.
std::unique_ptr<comm::Collective> watch(const Instr& in, const DeviceData& x,
                                        const CollectiveAttrs& c) {
  const bool reduces = in.op == OpId::kAllReduce || in.op == OpId::kReduceScatter;
  return std::make_unique<comm::Collective>(static_cast<int64_t>(in.op), reduces ? c.reduce : 0,
                                            in.op == OpId::kBroadcast ? c.root : 0, x.dtype,
                                            x.layout.shape);
}

void divide(DeviceData& out, int64_t world);

// A collective in flight: the kernel returns once the MPI call is posted, and the executor
// finishes it when a later step reads the result (kernels.h, PendingWrite), so the data
// moves while the steps in between compute. It keeps its buffers alive until then.
class Inflight final : public PendingWrite {
 public:
  Inflight(const Instr& in, std::unique_ptr<comm::Collective> c, DeviceData send, DeviceData out,
           int64_t divide_by)
      : c_(std::move(c)), send_(std::move(send)), out_(std::move(out)), divide_by_(divide_by) {
    static const auto* infos = [] {
      auto* m = new std::shared_ptr<const lazy::profiling::KernelInfo>[4];
      const OpId ops[] = {OpId::kAllReduce, OpId::kBroadcast, OpId::kAllGather,
                          OpId::kReduceScatter};
      for (int i = 0; i < 4; ++i) {
        auto k = std::make_shared<lazy::profiling::KernelInfo>();
        k->name = "wait[" + std::string(op_name(ops[i])) + "]";
        m[i] = std::move(k);
      }
      return m;
    }();
    info_ = in.op == OpId::kAllReduce   ? infos[0]
            : in.op == OpId::kBroadcast ? infos[1]
            : in.op == OpId::kAllGather ? infos[2]
                                        : infos[3];
  }
  void poll() override { c_->test(); }
  absl::Status finish() override {
    lazy::profiling::Scope scope(lazy::profiling::Kind::kKernel, "", info_);
    c_->wait();
    if (divide_by_ > 1) divide(out_, divide_by_);
    return absl::OkStatus();
  }

 private:
  std::unique_ptr<comm::Collective> c_;
  DeviceData send_, out_;
  int64_t divide_by_;
  std::shared_ptr<const lazy::profiling::KernelInfo> info_;
};

void start(Env& env, const Instr& in, std::unique_ptr<comm::Collective> c, const DeviceData& send,
           const DeviceData& out, int64_t divide_by) {
  env.pending.push_back(
      Pending{{in.out}, std::make_unique<Inflight>(in, std::move(c), send, out, divide_by)});
}

DeviceData contiguous(Env& env, const Instr& in, int i) {
  const DeviceData& x = env.get(in.in[i]);
  return x.is_contiguous() ? x : make_contiguous(env, x, x.dtype);
}

void divide(DeviceData& out, int64_t world) {
  if (out.dtype == DType::kFloat32) {
    float* p = out.data<float>();
    const float w = static_cast<float>(world);
    for (int64_t i = 0, n = out.numel(); i < n; ++i) p[i] /= w;
  } else if (out.dtype == DType::kFloat64) {
    double* p = out.data<double>();
    const double w = static_cast<double>(world);
    for (int64_t i = 0, n = out.numel(); i < n; ++i) p[i] /= w;
  }
}

// all_reduce and broadcast: the result starts as a copy of the input and is reduced or
// overwritten in place (MPI_IN_PLACE), so no second buffer is needed.
absl::Status run_in_place(Env& env, const Instr& in) {
  const CollectiveAttrs c = CollectiveAttrs::of(in.attrs);
  const DeviceData x = contiguous(env, in, 0);
  DeviceData& out = env.alloc_to(in.out, in.shape, in.dtype);
  const int64_t n = out.numel();
  if (n > 0) std::memcpy(out.raw(), x.raw(), n * dtype_size(in.dtype));
  if (c.world == 1) return absl::OkStatus();
  SLOTH_RETURN_IF_ERROR(check_ready(in, n));
  auto w = watch(in, x, c);
  SLOTH_RETURN_IF_ERROR(w->check_matching());
  if (n > 0 && in.op == OpId::kBroadcast) {
    w->posted("MPI_Ibcast", MPI_Ibcast(out.raw(), static_cast<int>(n), mpi_type(in.dtype),
                                       static_cast<int>(c.root), MPI_COMM_WORLD, w->request()));
  } else if (n > 0) {
    w->posted("MPI_Iallreduce",
              MPI_Iallreduce(MPI_IN_PLACE, out.raw(), static_cast<int>(n), mpi_type(in.dtype),
                             mpi_op(c.reduce), MPI_COMM_WORLD, w->request()));
  }
  const bool avg = in.op == OpId::kAllReduce && c.reduce == CollectiveAttrs::kAvg;
  start(env, in, std::move(w), DeviceData{}, out, avg ? c.world : 1);
  return absl::OkStatus();
}

absl::Status run_all_gather(Env& env, const Instr& in) {
  const CollectiveAttrs c = CollectiveAttrs::of(in.attrs);
  const DeviceData x = contiguous(env, in, 0);
  DeviceData& out = env.alloc_to(in.out, in.shape, in.dtype);
  const int64_t n = x.numel();
  if (c.world == 1) {
    if (n > 0) std::memcpy(out.raw(), x.raw(), n * dtype_size(in.dtype));
    return absl::OkStatus();
  }
  SLOTH_RETURN_IF_ERROR(check_ready(in, out.numel()));
  auto w = watch(in, x, c);
  SLOTH_RETURN_IF_ERROR(w->check_matching());
  if (n > 0)
    w->posted("MPI_Iallgather",
              MPI_Iallgather(x.raw(), static_cast<int>(n), mpi_type(in.dtype), out.raw(),
                             static_cast<int>(n), mpi_type(in.dtype), MPI_COMM_WORLD, w->request()));
  start(env, in, std::move(w), x, out, 1);
  return absl::OkStatus();
}

absl::Status run_reduce_scatter(Env& env, const Instr& in) {
  const CollectiveAttrs c = CollectiveAttrs::of(in.attrs);
  const DeviceData x = contiguous(env, in, 0);
  DeviceData& out = env.alloc_to(in.out, in.shape, in.dtype);
  const int64_t n = out.numel();
  if (c.world == 1) {
    if (n > 0) std::memcpy(out.raw(), x.raw(), n * dtype_size(in.dtype));
    return absl::OkStatus();
  }
  SLOTH_RETURN_IF_ERROR(check_ready(in, x.numel()));
  auto w = watch(in, x, c);
  SLOTH_RETURN_IF_ERROR(w->check_matching());
  if (n > 0)
    w->posted("MPI_Ireduce_scatter_block",
              MPI_Ireduce_scatter_block(x.raw(), out.raw(), static_cast<int>(n), mpi_type(in.dtype),
                                        mpi_op(c.reduce), MPI_COMM_WORLD, w->request()));
  start(env, in, std::move(w), x, out, c.reduce == CollectiveAttrs::kAvg ? c.world : 1);
  return absl::OkStatus();
}

}  // namespace

SLOTH_CPU_OP_KERNEL(kAllReduce, run_in_place);
SLOTH_CPU_OP_KERNEL(kBroadcast, run_in_place);
SLOTH_CPU_OP_KERNEL(kAllGather, run_all_gather);
SLOTH_CPU_OP_KERNEL(kReduceScatter, run_reduce_scatter);

}  // namespace sloth::cpu
