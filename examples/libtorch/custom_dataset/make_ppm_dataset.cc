// Writes a tiny two-class image dataset in the layout cpp/custom-dataset reads: binary PPM
// files under <dir>/dataset/<class>/ and <dir>/info.txt ("path label train|test" per line, no
// trailing newline: the example's reader would repeat the last entry after one). Class 0
// images are dark with a bright vertical bar, class 1 bright with a dark horizontal bar, with
// per-image noise, so a network can tell them apart in a few steps.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s DIR TRAIN_PER_CLASS TEST_PER_CLASS\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  const int n_train = std::atoi(argv[2]), n_test = std::atoi(argv[3]);
  const int size = 16;
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> noise(-20, 20);
  std::ofstream info(dir + "/info.txt");
  bool first = true;
  for (int label = 0; label < 2; ++label) {
    const std::string cls = label == 0 ? "dark" : "bright";
    std::filesystem::create_directories(dir + "/dataset/" + cls);
    for (int i = 0; i < n_train + n_test; ++i) {
      const std::string rel = cls + "/image_" + std::to_string(i) + ".ppm";
      std::ofstream f(dir + "/dataset/" + rel, std::ios::binary);
      f << "P6\n# generated\n" << size << " " << size << "\n255\n";
      for (int y = 0; y < size; ++y)
        for (int x = 0; x < size; ++x)
          for (int c = 0; c < 3; ++c) {
            int v = label == 0 ? (x == 7 || x == 8 ? 220 : 30) : (y == 7 || y == 8 ? 40 : 210);
            v += noise(rng) + 10 * c;
            f.put(char(v < 0 ? 0 : v > 255 ? 255 : v));
          }
      info << (first ? "" : "\n") << rel << " " << label << " " << (i < n_train ? "train" : "test");
      first = false;
    }
  }
  return 0;
}
