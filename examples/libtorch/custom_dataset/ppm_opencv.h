// The few OpenCV calls pytorch/examples cpp/custom-dataset makes (cv::imread, cv::resize,
// cv::split, cv::Mat, cv::Size), for binary PPM (P6) and PGM (P5) files only. OpenCV is not a
// dependency of sloth or its CI; this stand-in lets the port run unchanged apart from its one
// include line. Like OpenCV, imread gives 8-bit BGR (3 channels), resize is bilinear with
// half-pixel centres (INTER_LINEAR), split gives one single-channel Mat per channel.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

namespace cv {

enum InterpolationFlags { INTER_NEAREST = 0, INTER_LINEAR = 1, INTER_CUBIC = 2 };

struct Size {
  int width = 0, height = 0;
  Size() = default;
  Size(int w, int h) : width(w), height(h) {}
};

// Rows of interleaved 8-bit channels; copies share the pixels, as cv::Mat's header copies do.
class Mat {
 public:
  Mat() = default;
  Mat(int rows, int cols, int channels)
      : rows(rows), cols(cols), channels_(channels),
        data_(std::make_shared<std::vector<uint8_t>>(size_t(rows) * cols * channels)) {}
  bool empty() const { return !data_ || data_->empty(); }
  int channels() const { return channels_; }
  uint8_t* ptr(int row = 0) { return data_->data() + size_t(row) * cols * channels_; }
  const uint8_t* ptr(int row = 0) const { return data_->data() + size_t(row) * cols * channels_; }
  int rows = 0, cols = 0;

 private:
  int channels_ = 0;
  std::shared_ptr<std::vector<uint8_t>> data_;
};

namespace ppm_detail {
// The next header number, skipping whitespace and # comments.
inline bool read_number(std::istream& in, int* v) {
  for (int c = in.peek(); c != EOF; c = in.peek()) {
    if (c == '#') {
      std::string line;
      std::getline(in, line);
    } else if (std::isspace(c)) {
      in.get();
    } else {
      break;
    }
  }
  return static_cast<bool>(in >> *v);
}
}  // namespace ppm_detail

// An empty Mat when the file is missing or not an 8-bit binary PPM/PGM (as cv::imread).
inline Mat imread(const std::string& path, int /*flags*/ = 1) {
  std::ifstream in(path, std::ios::binary);
  std::string magic;
  if (!(in >> magic) || (magic != "P6" && magic != "P5")) return Mat();
  int w = 0, h = 0, maxval = 0;
  if (!ppm_detail::read_number(in, &w) || !ppm_detail::read_number(in, &h) ||
      !ppm_detail::read_number(in, &maxval) || w <= 0 || h <= 0 || maxval != 255)
    return Mat();
  in.get();  // the single whitespace after maxval
  const int src_ch = magic == "P6" ? 3 : 1;
  std::vector<uint8_t> px(size_t(w) * h * src_ch);
  if (!in.read(reinterpret_cast<char*>(px.data()), std::streamsize(px.size()))) return Mat();
  Mat m(h, w, 3);
  uint8_t* o = m.ptr();
  for (size_t i = 0; i < size_t(w) * h; ++i) {
    const uint8_t* p = &px[i * src_ch];
    o[3 * i + 0] = src_ch == 3 ? p[2] : p[0];  // BGR, as OpenCV
    o[3 * i + 1] = src_ch == 3 ? p[1] : p[0];
    o[3 * i + 2] = p[0];
  }
  return m;
}

inline void resize(const Mat& src, Mat& dst, Size size, double = 0, double = 0,
                   int interpolation = INTER_LINEAR) {
  const int ch = src.channels(), w = size.width, h = size.height;
  Mat out(h, w, ch);
  const double sx = double(src.cols) / w, sy = double(src.rows) / h;
  for (int y = 0; y < h; ++y) {
    const double fy = std::max(0.0, (y + 0.5) * sy - 0.5);
    const int y0 = std::min(int(fy), src.rows - 1), y1 = std::min(y0 + 1, src.rows - 1);
    const double ay = fy - y0;
    for (int x = 0; x < w; ++x) {
      const double fx = std::max(0.0, (x + 0.5) * sx - 0.5);
      const int x0 = std::min(int(fx), src.cols - 1), x1 = std::min(x0 + 1, src.cols - 1);
      const double ax = fx - x0;
      for (int c = 0; c < ch; ++c) {
        auto at = [&](int yy, int xx) { return double(src.ptr(yy)[xx * ch + c]); };
        double v;
        if (interpolation == INTER_NEAREST)
          v = at(std::min(int(y * sy), src.rows - 1), std::min(int(x * sx), src.cols - 1));
        else
          v = (1 - ay) * ((1 - ax) * at(y0, x0) + ax * at(y0, x1)) +
              ay * ((1 - ax) * at(y1, x0) + ax * at(y1, x1));
        out.ptr(y)[x * ch + c] = uint8_t(std::lround(std::clamp(v, 0.0, 255.0)));
      }
    }
  }
  dst = out;
}

inline void split(const Mat& src, std::vector<Mat>& channels) {
  const int ch = src.channels();
  channels.assign(size_t(ch), Mat());
  for (int c = 0; c < ch; ++c) {
    Mat m(src.rows, src.cols, 1);
    const uint8_t* s = src.ptr();
    uint8_t* d = m.ptr();
    for (size_t i = 0; i < size_t(src.rows) * src.cols; ++i) d[i] = s[i * ch + c];
    channels[size_t(c)] = m;
  }
}

}  // namespace cv
