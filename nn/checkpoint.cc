#include "nn/checkpoint.h"

#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

namespace sloth::nn {
namespace {

static_assert(std::endian::native == std::endian::little,
              "safetensors I/O assumes a little-endian host");

const char* st_dtype(DType d) {
  switch (d) {
    case DType::kFloat32: return "F32";
    case DType::kFloat64: return "F64";
    case DType::kInt64: return "I64";
    case DType::kInt32: return "I32";
    case DType::kBool: return "BOOL";
    case DType::kUInt8: return "U8";
  }
  fail("safetensors: unsupported dtype %s", dtype_name(d));
}

bool parse_dtype(const std::string& s, DType* d) {
  if (s == "F32") *d = DType::kFloat32;
  else if (s == "F64") *d = DType::kFloat64;
  else if (s == "I64") *d = DType::kInt64;
  else if (s == "I32") *d = DType::kInt32;
  else if (s == "BOOL") *d = DType::kBool;
  else if (s == "U8") *d = DType::kUInt8;
  else return false;
  return true;
}

// The tensor's bytes, row-major (the tensor must already be materialized for speed).
std::string tensor_bytes(const Tensor& t) {
  std::string out;
  auto put = [&](const auto& v) {
    out.assign(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(v[0]));
  };
  switch (t.dtype()) {
    case DType::kFloat32: put(t.to_vector<float>()); break;
    case DType::kFloat64: put(t.to_vector<double>()); break;
    case DType::kInt64: put(t.to_vector<int64_t>()); break;
    case DType::kInt32: put(t.to_vector<int32_t>()); break;
    case DType::kUInt8: put(t.to_vector<uint8_t>()); break;
    case DType::kBool: {
      std::vector<uint8_t> v = t.to_vector<uint8_t>();
      for (auto& b : v) b = b ? 1 : 0;
      put(v);
      break;
    }
  }
  return out;
}

Tensor tensor_from_bytes(const char* p, const Shape& shape, DType d) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  auto get = [&](auto tag) {
    using T = decltype(tag);
    std::vector<T> v(static_cast<size_t>(n));
    if (n) std::memcpy(v.data(), p, v.size() * sizeof(T));
    return from_vector<T>(v, shape, TensorOptions(d));
  };
  switch (d) {
    case DType::kFloat32: return get(float{});
    case DType::kFloat64: return get(double{});
    case DType::kInt64: return get(int64_t{});
    case DType::kInt32: return get(int32_t{});
    case DType::kUInt8: return get(uint8_t{});
    case DType::kBool: {
      std::vector<bool> v(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) v[i] = p[i] != 0;
      return from_vector<bool>(v, shape, TensorOptions(d));
    }
  }
  fail("safetensors: unsupported dtype");
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail("cannot open '%s' for reading: %s", path, std::strerror(errno));
  std::ostringstream ss;
  ss << f.rdbuf();
  if (f.bad()) fail("error reading '%s'", path);
  return ss.str();
}

}  // namespace

const Tensor* SafetensorsFile::find(const std::string& name) const {
  for (const auto& [n, t] : tensors)
    if (n == name) return &t;
  return nullptr;
}

void save_safetensors(const NamedTensors& tensors, const std::string& path,
                      const Metadata& metadata) {
  std::set<std::string> names;
  std::vector<Tensor> all;
  for (const auto& [n, t] : tensors) {
    if (n.empty() || n == "__metadata__") fail("save_safetensors: invalid tensor name '%s'", n);
    if (!names.insert(n).second) fail("save_safetensors: duplicate tensor name '%s'", n);
    if (!t.defined()) fail("save_safetensors: tensor '%s' is undefined", n);
    st_dtype(t.dtype());
    all.push_back(t);
  }
  sync(all);  // one graph for everything still pending
  nlohmann::json header = nlohmann::json::object();
  std::vector<std::string> blobs;
  uint64_t offset = 0;
  for (const auto& [n, t] : tensors) {
    blobs.push_back(tensor_bytes(t));
    uint64_t end = offset + blobs.back().size();
    header[n] = {{"dtype", st_dtype(t.dtype())}, {"shape", t.shape()}, {"data_offsets", {offset, end}}};
    offset = end;
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::string h = header.dump();
  while (h.size() % 8) h.push_back(' ');
  uint64_t len = h.size();

  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) fail("save: cannot create '%s': %s", tmp, std::strerror(errno));
  bool ok = std::fwrite(&len, 8, 1, f) == 1 && std::fwrite(h.data(), 1, h.size(), f) == h.size();
  for (const auto& b : blobs) ok = ok && std::fwrite(b.data(), 1, b.size(), f) == b.size();
  ok = std::fflush(f) == 0 && ok;
  ok = ::fsync(::fileno(f)) == 0 && ok;
  ok = std::fclose(f) == 0 && ok;
  if (!ok) {
    std::remove(tmp.c_str());
    fail("save: writing '%s' failed: %s", tmp, std::strerror(errno));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    int e = errno;
    std::remove(tmp.c_str());
    fail("save: cannot rename '%s' to '%s': %s", tmp, path, std::strerror(e));
  }
}

SafetensorsFile parse_safetensors(const std::string& bytes, const std::string& what) {
  if (bytes.size() < 8)
    fail("%s: not a safetensors file (truncated: %d bytes, the 8-byte header length is missing)",
         what, int64_t(bytes.size()));
  uint64_t len;
  std::memcpy(&len, bytes.data(), 8);
  if (len > bytes.size() - 8)
    fail("%s: truncated or corrupt safetensors file: header length %d exceeds the file size "
         "(%d bytes)",
         what, int64_t(std::min<uint64_t>(len, INT64_MAX)), int64_t(bytes.size()));
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(bytes.begin() + 8, bytes.begin() + 8 + len);
  } catch (const std::exception& e) {
    fail("%s: corrupt safetensors header (invalid JSON: %s)", what, e.what());
  }
  if (!header.is_object()) fail("%s: corrupt safetensors header (not a JSON object)", what);
  const uint64_t data_size = bytes.size() - 8 - len;
  const char* data = bytes.data() + 8 + len;

  SafetensorsFile out;
  struct Entry { std::string name; DType dtype; Shape shape; uint64_t begin, end; };
  std::vector<Entry> entries;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    const auto& v = it.value();
    if (name == "__metadata__") {
      if (!v.is_object()) fail("%s: __metadata__ must be an object of strings", what);
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string())
          fail("%s: __metadata__ entry '%s' is not a string", what, m.key());
        out.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    auto bad = [&](const std::string& why) -> void {
      fail("%s: tensor '%s': %s", what, name, why);
    };
    if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") ||
        !v.contains("data_offsets"))
      bad("header entry must have dtype, shape and data_offsets");
    Entry e;
    e.name = name;
    if (!v["dtype"].is_string() || !parse_dtype(v["dtype"].get<std::string>(), &e.dtype))
      bad("unsupported dtype " + v["dtype"].dump() + " (supported: F32, F64, I64, I32, BOOL)");
    if (!v["shape"].is_array()) bad("shape must be an array");
    uint64_t n = 1;
    for (const auto& d : v["shape"]) {
      if (!d.is_number_unsigned()) bad("shape " + v["shape"].dump() + " has a non-integer or negative size");
      uint64_t s = d.get<uint64_t>();
      if (s > (uint64_t(1) << 40)) bad("shape " + v["shape"].dump() + " is too large");
      e.shape.push_back(int64_t(s));
      n *= s;
      if (n > (uint64_t(1) << 40)) bad("shape " + v["shape"].dump() + " is too large");
    }
    const auto& off = v["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() ||
        !off[1].is_number_unsigned())
      bad("data_offsets must be [begin, end]");
    e.begin = off[0].get<uint64_t>();
    e.end = off[1].get<uint64_t>();
    if (e.end < e.begin) bad("data_offsets " + off.dump() + " end before begin");
    uint64_t expect = n * dtype_size(e.dtype);
    if (e.end - e.begin != expect)
      bad("data_offsets " + off.dump() + " span " + std::to_string(e.end - e.begin) +
          " bytes but shape " + v["shape"].dump() + " of " + v["dtype"].get<std::string>() +
          " needs " + std::to_string(expect));
    if (e.end > data_size)
      bad("data_offsets " + off.dump() + " reach past the end of the data (" +
          std::to_string(data_size) + " bytes): the file is truncated");
    entries.push_back(std::move(e));
  }
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.begin < b.begin || (a.begin == b.begin && a.end < b.end); });
  for (size_t i = 1; i < entries.size(); ++i)
    if (entries[i].begin < entries[i - 1].end)
      fail("%s: tensors '%s' and '%s' overlap in the data section", what, entries[i - 1].name,
           entries[i].name);
  for (const Entry& e : entries)
    out.tensors.emplace_back(e.name, tensor_from_bytes(data + e.begin, e.shape, e.dtype));
  return out;
}

SafetensorsFile load_safetensors(const std::string& path) {
  return parse_safetensors(read_file(path), "'" + path + "'");
}

namespace {
void collect_state(const Module& m, const std::string& prefix, NamedTensors* out,
                   std::set<std::string>* buffer_names) {
  for (auto& [n, p] : m.named_parameters(false)) out->emplace_back(prefix + n, p);
  for (auto& [n, b] : m.named_buffers(false)) {
    out->emplace_back(prefix + n, b);
    if (buffer_names) buffer_names->insert(prefix + n);
  }
  for (auto& [n, c] : m.named_children()) collect_state(*c, prefix + n + ".", out, buffer_names);
}
}  // namespace

NamedTensors state_dict(const Module& module) {
  NamedTensors out;
  collect_state(module, "", &out, nullptr);
  return out;
}

void save(const Module& module, const std::string& path, const Metadata& metadata) {
  save_safetensors(state_dict(module), path, metadata);
}

Metadata load(Module& module, const std::string& path) {
  SafetensorsFile f = load_safetensors(path);
  const std::string what = "load '" + path + "'";
  NamedTensors state;
  std::set<std::string> buffer_names;
  collect_state(module, "", &state, &buffer_names);
  std::set<std::string> expected;
  for (const auto& [n, p] : state) {
    expected.insert(n);
    const char* kind = buffer_names.count(n) ? "buffer" : "parameter";
    const Tensor* t = f.find(n);
    if (!t)
      fail("%s: missing tensor '%s' (the module's %s of shape %s); the file has %d tensors",
           what, n, kind, shape_str(p.shape()), int64_t(f.tensors.size()));
    if (t->shape() != p.shape())
      fail("%s: tensor '%s' has shape %s in the file but the module's %s has shape %s", what, n,
           shape_str(t->shape()), kind, shape_str(p.shape()));
    if (t->dtype() != p.dtype())
      fail("%s: tensor '%s' has dtype %s in the file but the module's %s has dtype %s", what, n,
           st_dtype(t->dtype()), kind, st_dtype(p.dtype()));
  }
  for (const auto& [n, t] : f.tensors)
    if (!expected.count(n))
      fail("%s: unexpected tensor '%s' in the file (the module has no parameter or buffer of "
           "that name)",
           what, n);
  NoGradGuard g;
  std::vector<Tensor> updated;
  for (auto& [n, p] : state) {
    p.copy_(*f.find(n));
    updated.push_back(p);
  }
  sync(updated);
  return f.metadata;
}

}  // namespace sloth::nn

namespace sloth {

void save(const std::vector<Tensor>& tensors, const std::string& path) {
  nn::NamedTensors named;
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (!tensors[i].defined())
      fail("save(%s): tensor %d of %d is undefined; only defined tensors can be saved", path, i,
           tensors.size());
    named.emplace_back(std::to_string(i), tensors[i]);
  }
  nn::save_safetensors(named, path);
}
void save(const Tensor& tensor, const std::string& path) {
  save(std::vector<Tensor>{tensor}, path);
}

void load(std::vector<Tensor>& tensors, const std::string& path) {
  nn::SafetensorsFile file = nn::load_safetensors(path);
  std::vector<Tensor> out(file.tensors.size());
  for (auto& [name, t] : file.tensors) {
    size_t i = 0;
    const bool numbered = !name.empty() && name.size() < 10 &&
                          name.find_first_not_of("0123456789") == std::string::npos &&
                          (i = std::stoul(name)) < out.size() && !out[i].defined();
    if (!numbered)
      fail("load(%s): tensor '%s' is not one of \"0\" .. \"%d\": the file was not written by "
           "sloth::save of tensors (load a module's checkpoint into the module)", path, name,
           out.size() - 1);
    out[i] = t;
  }
  tensors = std::move(out);
}
void load(Tensor& tensor, const std::string& path) {
  std::vector<Tensor> ts;
  load(ts, path);
  if (ts.size() != 1)
    fail("load(%s): the file holds %d tensors, not one; load it into a std::vector<Tensor>",
         path, ts.size());
  tensor = ts[0];
}

}  // namespace sloth
