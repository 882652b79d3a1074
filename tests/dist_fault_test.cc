// A job with a faulty rank, for tests/dist_fault_test.sh: `dist_fault_test MODE`. Rank 0
// (and any rank but 1) runs a few all-reduces; rank 1 misbehaves after the first one:
//   throw  an uncaught exception (dist's terminate handler ends the job at once);
//   exit   std::exit(0) without dist::finalize() (dist's atexit hook ends the job);
//   hang   sleeps instead of reaching the next collective (the others' collective times out
//          after SLOTH_DIST_TIMEOUT and ends the job naming rank 1);
//   kill   SIGKILL (mpirun notices and ends the job);
//   none   no fault (the job succeeds: the wrapper checks that the harness itself works).
// The wrapper checks the exit status, the message and the time it took.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>

#include "dist/dist.h"
#include "sloth/sloth.h"

int main(int argc, char** argv) {
  using namespace sloth;
  const std::string mode = argc > 1 ? argv[1] : "none";
  dist::init();
  const int r = dist::rank();
  Tensor t = tensor({1.0, 2.0, 3.0}, {3});
  dist::all_reduce(t);
  mark_step();
  if (r == 1) {
    if (mode == "throw") throw std::runtime_error("rank 1 failed on purpose");
    if (mode == "exit") std::exit(0);
    if (mode == "hang") std::this_thread::sleep_for(std::chrono::seconds(600));
    if (mode == "kill") std::raise(SIGKILL);
  }
  for (int k = 0; k < 3; ++k) {
    dist::all_reduce(t);
    mark_step();
  }
  const double expect = 1.0 * dist::world_size() * dist::world_size() * dist::world_size() *
                        dist::world_size();
  const bool ok = t.to_vector<float>()[0] == static_cast<float>(expect);
  std::printf("rank %d: %s\n", r, ok ? "done" : "wrong values");
  dist::finalize();
  return ok ? 0 : 1;
}
