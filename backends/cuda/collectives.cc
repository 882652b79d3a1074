// The distributed collectives (core/ops.def, `---- distributed ----`) on CUDA.
// - With NCCL (SLOTH_HAVE_NCCL: the toolkit has include/nccl.h and lib64/libnccl.so, see
//   third_party/cuda.BUILD): the collective runs on device buffers, enqueued on the backend's
//   one stream (so it is ordered with the kernels before and after it, and the host does not
//   wait for it). The NCCL communicator is made at the first collective: rank 0's
//   ncclUniqueId goes to every rank over MPI. Every rank uses device 0 of what it sees: give
//   each rank its own GPU with CUDA_VISIBLE_DEVICES (README, several GPUs per machine).
// - Without NCCL: staged through host memory (operand to the host, MPI on host buffers,
//   result back).
// Either way the collective is numbered and its arrival exchanged over MPI first
// (backends/mpi/comm.h): a rank that never arrives is named when the others time out
// (SLOTH_DIST_TIMEOUT), and SLOTH_DIST_CHECK compares the ranks' collectives. With NCCL the
// transfer itself is not watched (it runs on the stream after the arrival exchange): a rank
// that dies during it is caught by mpirun. Compiled under --config=cuda; never run here (no
// GPU on the build machines). A 1-process world copies on the device and calls no MPI.
#include <mpi.h>

#include <climits>
#include <cstring>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "backends/cuda/host_staging.h"
#include "backends/cuda/op_kernels.h"
#include "backends/mpi/comm.h"
#include "core/error.h"
#include "core/op_attrs.h"

#ifdef SLOTH_HAVE_NCCL
#include <nccl.h>

#include "backends/cuda/cuda_runtime.h"
#endif

namespace sloth::cuda {
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
  return reduce == CollectiveAttrs::kMax   ? MPI_MAX
         : reduce == CollectiveAttrs::kMin ? MPI_MIN
                                           : MPI_SUM;
}

template <typename T>
void divide(std::vector<char>& buf, int64_t world) {
  T* p = reinterpret_cast<T*>(buf.data());
  for (size_t i = 0; i < buf.size() / sizeof(T); ++i) p[i] /= static_cast<T>(world);
}

#ifdef SLOTH_HAVE_NCCL
ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::kBool: return ncclUint8;
    case DType::kInt32: return ncclInt32;
    case DType::kInt64: return ncclInt64;
    case DType::kFloat32: return ncclFloat32;
    case DType::kFloat64: return ncclFloat64;
    case DType::kUInt8: return ncclUint8;
  }
  return ncclUint8;
}
ncclRedOp_t nccl_op(int64_t reduce) {
  switch (reduce) {
    case CollectiveAttrs::kMax: return ncclMax;
    case CollectiveAttrs::kMin: return ncclMin;
    case CollectiveAttrs::kAvg: return ncclAvg;  // NCCL >= 2.10
    default: return ncclSum;
  }
}
absl::Status nccl_status(const Instr& in, const char* call, ncclResult_t r) {
  if (r == ncclSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrFormat("%s: %s failed: %s", op_name(in.op), call,
                                             ncclGetErrorString(r)));
}

// The job's NCCL communicator, made by the first collective (every rank reaches it at the
// same point of its program, so the MPI broadcast of the id matches).
absl::StatusOr<ncclComm_t> nccl_comm(const Instr& in, int rank, int world) {
  static ncclComm_t comm = nullptr;
  if (comm != nullptr) return comm;
  ncclUniqueId id{};
  if (rank == 0) SLOTH_RETURN_IF_ERROR(nccl_status(in, "ncclGetUniqueId", ncclGetUniqueId(&id)));
  {
    comm::Collective w(comm::Collective::kBarrierOp, 0, 0, DType::kBool, {});
    w.posted("MPI_Ibcast", MPI_Ibcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD, w.request()));
    w.wait();
  }
  (void)DeviceContext::get();  // device 0 is current
  SLOTH_RETURN_IF_ERROR(
      nccl_status(in, "ncclCommInitRank", ncclCommInitRank(&comm, world, id, rank)));
  return comm;
}

absl::Status run_nccl(RunEnv& env, const Instr& in, const DeviceData& x, DeviceData out,
                      const CollectiveAttrs& c) {
  const bool reduces = in.op == OpId::kAllReduce || in.op == OpId::kReduceScatter;
  comm::Collective w(static_cast<int64_t>(in.op), reduces ? c.reduce : 0,
                     in.op == OpId::kBroadcast ? c.root : 0, x.dtype, x.layout.shape);
  SLOTH_RETURN_IF_ERROR(w.check_matching());
  w.wait();  // every rank arrived: the NCCL call will not wait for a missing one
  absl::StatusOr<ncclComm_t> comm_or = nccl_comm(in, static_cast<int>(c.rank), static_cast<int>(c.world));
  if (!comm_or.ok()) return comm_or.status();
  ncclComm_t nc = *comm_or;
  cudaStream_t stream = DeviceContext::get().stream;
  const ncclDataType_t t = nccl_type(in.dtype);
  const size_t nx = static_cast<size_t>(x.numel()), nout = static_cast<size_t>(out.numel());
  switch (in.op) {
    case OpId::kAllReduce:
      SLOTH_RETURN_IF_ERROR(nccl_status(in, "ncclAllReduce", ncclAllReduce(x.raw(), out.raw(), nx, t,
                                                                           nccl_op(c.reduce), nc, stream)));
      break;
    case OpId::kBroadcast:
      SLOTH_RETURN_IF_ERROR(nccl_status(in, "ncclBroadcast", ncclBroadcast(x.raw(), out.raw(), nx, t,
                                                                           static_cast<int>(c.root), nc, stream)));
      break;
    case OpId::kAllGather:
      SLOTH_RETURN_IF_ERROR(nccl_status(in, "ncclAllGather",
                                        ncclAllGather(x.raw(), out.raw(), nx, t, nc, stream)));
      break;
    case OpId::kReduceScatter:
      SLOTH_RETURN_IF_ERROR(nccl_status(in, "ncclReduceScatter",
                                        ncclReduceScatter(x.raw(), out.raw(), nout, t, nccl_op(c.reduce),
                                                          nc, stream)));
      break;
    default: return absl::InternalError("cuda backend: not a collective");
  }
  env.set(in.out, std::move(out));
  return absl::OkStatus();
}
#endif  // SLOTH_HAVE_NCCL

absl::Status run_staged(RunEnv& env, const Instr& in) {
  const CollectiveAttrs c = CollectiveAttrs::of(in.attrs);
  DeviceData x = env.get(in.in[0]);
  if (!x.is_contiguous()) x = make_contiguous(env, x, x.dtype);
  DeviceData out = env.alloc(in.shape, in.dtype);
  const size_t es = dtype_size(in.dtype);
  const int64_t nx = x.numel(), nout = out.numel();
  if (c.world == 1 || nout == 0) {  // every collective of one process returns its input
    if (nout > 0) copy_into(out, x);
    env.set(in.out, std::move(out));
    return absl::OkStatus();
  }
  int up = 0;
  MPI_Initialized(&up);
  if (!up)
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s: MPI is not initialized; call sloth::dist::init() first", op_name(in.op)));
#ifdef SLOTH_HAVE_NCCL
  return run_nccl(env, in, x, std::move(out), c);
#endif
  if (std::max(nx, nout) > INT_MAX)
    return absl::UnimplementedError(absl::StrFormat(
        "%s: %d elements exceed MPI's int count; split the tensor", op_name(in.op), nx));
  std::vector<char> send(nx * es), recv(nout * es);
  host_staging().to_host(x.raw(), send.data(), send.size());
  const MPI_Datatype t = mpi_type(in.dtype);
  const bool reduces = in.op == OpId::kAllReduce || in.op == OpId::kReduceScatter;
  comm::Collective w(static_cast<int64_t>(in.op), reduces ? c.reduce : 0,
                     in.op == OpId::kBroadcast ? c.root : 0, x.dtype, x.layout.shape);
  SLOTH_RETURN_IF_ERROR(w.check_matching());
  switch (in.op) {
    case OpId::kAllReduce:
      w.posted("MPI_Iallreduce", MPI_Iallreduce(send.data(), recv.data(), static_cast<int>(nx), t,
                                                mpi_op(c.reduce), MPI_COMM_WORLD, w.request()));
      break;
    case OpId::kBroadcast:
      recv = std::move(send);
      w.posted("MPI_Ibcast", MPI_Ibcast(recv.data(), static_cast<int>(nx), t,
                                        static_cast<int>(c.root), MPI_COMM_WORLD, w.request()));
      break;
    case OpId::kAllGather:
      w.posted("MPI_Iallgather", MPI_Iallgather(send.data(), static_cast<int>(nx), t, recv.data(),
                                                static_cast<int>(nx), t, MPI_COMM_WORLD, w.request()));
      break;
    case OpId::kReduceScatter:
      w.posted("MPI_Ireduce_scatter_block",
               MPI_Ireduce_scatter_block(send.data(), recv.data(), static_cast<int>(nout), t,
                                         mpi_op(c.reduce), MPI_COMM_WORLD, w.request()));
      break;
    default: return absl::InternalError("cuda backend: not a collective");
  }
  w.wait();
  if (c.reduce == CollectiveAttrs::kAvg && (in.op == OpId::kAllReduce || in.op == OpId::kReduceScatter)) {
    if (in.dtype == DType::kFloat32) divide<float>(recv, c.world);
    else if (in.dtype == DType::kFloat64) divide<double>(recv, c.world);
  }
  host_staging().to_device(recv.data(), out.raw(), recv.size());
  env.set(in.out, std::move(out));
  return absl::OkStatus();
}

}  // namespace

SLOTH_CUDA_OP_KERNEL(kAllReduce, run_staged);
SLOTH_CUDA_OP_KERNEL(kBroadcast, run_staged);
SLOTH_CUDA_OP_KERNEL(kAllGather, run_staged);
SLOTH_CUDA_OP_KERNEL(kReduceScatter, run_staged);

}  // namespace sloth::cuda
