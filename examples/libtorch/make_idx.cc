// Writes a small synthetic MNIST-format dataset for the cpp/mnist port's test:
//   make_idx DIR N_TRAIN N_TEST
// Each 28x28 image of class c (0..9) is noise in [0, 80) plus a bright 7x7 square at a
// position that depends on c, jittered by up to 2 pixels: learnable by the example's CNN, not
// trivially by one pixel. The training files are gzip-compressed (as Debian ships
// Fashion-MNIST), the test files are raw, so the port reads both.
#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>

namespace {

void put_be32(std::string& s, uint32_t v) {
  for (int k = 3; k >= 0; --k) s.push_back(char((v >> (8 * k)) & 0xff));
}

bool write(const std::string& path, const std::string& bytes, bool gz) {
  if (gz) {
    gzFile f = gzopen(path.c_str(), "wb");
    if (!f) return false;
    gzwrite(f, bytes.data(), unsigned(bytes.size()));
    return gzclose(f) == Z_OK;
  }
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), std::streamsize(bytes.size()));
  return bool(out);
}

bool make(const std::string& dir, const std::string& prefix, int n, bool gz, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string im, lb;
  put_be32(im, 2051);
  put_be32(im, uint32_t(n));
  put_be32(im, 28);
  put_be32(im, 28);
  put_be32(lb, 2049);
  put_be32(lb, uint32_t(n));
  for (int i = 0; i < n; ++i) {
    const int c = int(rng() % 10);
    const int r0 = 3 + (c / 5) * 12 + int(rng() % 5) - 2, c0 = 1 + (c % 5) * 5 + int(rng() % 3);
    for (int r = 0; r < 28; ++r)
      for (int q = 0; q < 28; ++q) {
        int v = int(rng() % 80);
        if (r >= r0 && r < r0 + 7 && q >= c0 && q < c0 + 7) v = 170 + int(rng() % 86);
        im.push_back(char(uint8_t(v)));
      }
    lb.push_back(char(c));
  }
  const std::string ext = gz ? ".gz" : "";
  return write(dir + "/" + prefix + "-images-idx3-ubyte" + ext, im, gz) &&
         write(dir + "/" + prefix + "-labels-idx1-ubyte" + ext, lb, gz);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: make_idx DIR N_TRAIN N_TEST\n");
    return 2;
  }
  const std::string dir = argv[1];
  if (!make(dir, "train", std::atoi(argv[2]), /*gz=*/true, 1) ||
      !make(dir, "t10k", std::atoi(argv[3]), /*gz=*/false, 2)) {
    std::fprintf(stderr, "make_idx: cannot write into %s\n", dir.c_str());
    return 1;
  }
  return 0;
}
