// The distributed collectives (core/ops.def, `---- distributed ----`) on CUDA, staged through
// host memory: the operand is copied to the host, MPI runs on host buffers, the result is
// copied back. NCCL is not installed on the build machines, so this is the only path for now;
// a NCCL path (device buffers, the backend's stream) would replace run_staged's body behind
// a define once NCCL is available. A 1-process world copies on the device and calls no MPI.
#include <mpi.h>

#include <climits>
#include <cstring>
#include <vector>

#include "absl/strings/str_format.h"
#include "backends/cuda/host_staging.h"
#include "backends/cuda/op_kernels.h"
#include "core/op_attrs.h"

namespace sloth::cuda {
namespace {

MPI_Datatype mpi_type(DType t) {
  switch (t) {
    case DType::kBool: return MPI_C_BOOL;
    case DType::kInt32: return MPI_INT32_T;
    case DType::kInt64: return MPI_INT64_T;
    case DType::kFloat32: return MPI_FLOAT;
    case DType::kFloat64: return MPI_DOUBLE;
  }
  return MPI_DATATYPE_NULL;
}
MPI_Op mpi_op(int64_t reduce) {
  return reduce == CollectiveAttrs::kMax   ? MPI_MAX
         : reduce == CollectiveAttrs::kMin ? MPI_MIN
                                           : MPI_SUM;
}

absl::Status mpi_status(const Instr& in, const char* call, int code) {
  if (code == MPI_SUCCESS) return absl::OkStatus();
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, msg, &len);
  return absl::InternalError(
      absl::StrFormat("%s: %s failed: %s", op_name(in.op), call, std::string(msg, len)));
}

template <typename T>
void divide(std::vector<char>& buf, int64_t world) {
  T* p = reinterpret_cast<T*>(buf.data());
  for (size_t i = 0; i < buf.size() / sizeof(T); ++i) p[i] /= static_cast<T>(world);
}

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
  if (std::max(nx, nout) > INT_MAX)
    return absl::UnimplementedError(absl::StrFormat(
        "%s: %d elements exceed MPI's int count; split the tensor", op_name(in.op), nx));
  std::vector<char> send(nx * es), recv(nout * es);
  host_staging().to_host(x.raw(), send.data(), send.size());
  const MPI_Datatype t = mpi_type(in.dtype);
  absl::Status st;
  switch (in.op) {
    case OpId::kAllReduce:
      st = mpi_status(in, "MPI_Allreduce", MPI_Allreduce(send.data(), recv.data(), static_cast<int>(nx),
                                                         t, mpi_op(c.reduce), MPI_COMM_WORLD));
      break;
    case OpId::kBroadcast:
      recv = std::move(send);
      st = mpi_status(in, "MPI_Bcast", MPI_Bcast(recv.data(), static_cast<int>(nx), t,
                                                 static_cast<int>(c.root), MPI_COMM_WORLD));
      break;
    case OpId::kAllGather:
      st = mpi_status(in, "MPI_Allgather", MPI_Allgather(send.data(), static_cast<int>(nx), t, recv.data(),
                                                         static_cast<int>(nx), t, MPI_COMM_WORLD));
      break;
    case OpId::kReduceScatter:
      st = mpi_status(in, "MPI_Reduce_scatter_block",
                      MPI_Reduce_scatter_block(send.data(), recv.data(), static_cast<int>(nout), t,
                                               mpi_op(c.reduce), MPI_COMM_WORLD));
      break;
    default: return absl::InternalError("cuda backend: not a collective");
  }
  if (!st.ok()) return st;
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
