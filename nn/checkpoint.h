// Checkpoints in the safetensors format (readable by Python's `safetensors`):
//   8 bytes   little-endian uint64 N, the header's length
//   N bytes   JSON: {"<name>": {"dtype": "F32"|"F64"|"I64"|"I32"|"BOOL", "shape": [...],
//                               "data_offsets": [begin, end]}, ..., "__metadata__": {str: str}}
//             (padded with spaces to a multiple of 8 bytes)
//   the data  raw little-endian bytes; offsets are relative to the end of the header.
// Writing is atomic: the file is written to "<path>.tmp.<pid>" and renamed over `path`, so a
// crash mid-save never destroys the previous checkpoint.
// Reading checks everything (header length, JSON, dtypes, shapes, offsets against the file
// size) and throws sloth::Error naming the file, the tensor and the problem.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "nn/module.h"
#include "sloth/sloth_core.h"

namespace sloth::nn {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;
using Metadata = std::map<std::string, std::string>;

struct SafetensorsFile {
  NamedTensors tensors;   // in file order (by data offset)
  Metadata metadata;
  const Tensor* find(const std::string& name) const;
};

// Low level: any named tensors (dense, CPU-readable; they are synced first, in one graph).
void save_safetensors(const NamedTensors& tensors, const std::string& path,
                      const Metadata& metadata = {});
SafetensorsFile load_safetensors(const std::string& path);
// Parses bytes already in memory (`what` names the source in errors).
SafetensorsFile parse_safetensors(const std::string& bytes, const std::string& what);

// A module's parameters and buffers, named and ordered as PyTorch's state_dict(): each
// module's own parameters, then its own buffers, then its children's ("bn1.weight",
// "bn1.bias", "bn1.running_mean", "bn1.running_var", "bn1.num_batches_tracked", ...).
NamedTensors state_dict(const Module& module);

// A module's state_dict(): parameters and buffers.
void save(const Module& module, const std::string& path, const Metadata& metadata = {});
// Loads a module's parameters and buffers (strict: the file must hold exactly the names of
// state_dict(), with equal shapes and dtypes; a checkpoint of parameters only therefore loads
// into a module without buffers, as before). On any mismatch or a corrupt file it throws
// sloth::Error and the module is unchanged; on success values are copied into the existing
// tensors (copy_ under NoGradGuard), so parameters stay the same leaves and references to
// buffers stay valid. Returns the file's metadata.
Metadata load(Module& module, const std::string& path);

}  // namespace sloth::nn

namespace sloth {

// LibTorch's torch::save / torch::load spellings over the checkpoints above: a model (holder
// or shared_ptr), an optimizer, a tensor or a vector of tensors. The file is safetensors, not
// a TorchScript archive: it round-trips within sloth (and reads in Python's safetensors), it
// does not load into LibTorch. Loading a model is strict and changes nothing on a mismatch.
template <class H>
  requires nn::is_module_holder_v<H>
void save(const H& module, const std::string& path) { nn::save(*module, path); }
template <class H>
  requires nn::is_module_holder_v<H>
void load(H& module, const std::string& path) { nn::load(*module, path); }
template <class M>
  requires std::is_base_of_v<nn::Module, M>
void save(const std::shared_ptr<M>& module, const std::string& path) { nn::save(*module, path); }
template <class M>
  requires std::is_base_of_v<nn::Module, M>
void load(const std::shared_ptr<M>& module, const std::string& path) { nn::load(*module, path); }
// An optimizer (its own save/load: state, step counts, learning rate).
template <class O>
  requires requires(O& o, const std::string& p) { o.save(p); o.load(p); }
void save(const O& optimizer, const std::string& path) { optimizer.save(path); }
template <class O>
  requires requires(O& o, const std::string& p) { o.save(p); o.load(p); }
void load(O& optimizer, const std::string& path) { optimizer.load(path); }
// Tensors are stored as "0", "1", ...; load replaces `tensor` (or the vector's contents) by
// what the file holds, as LibTorch's torch::load assigns.
void save(const Tensor& tensor, const std::string& path);
void save(const std::vector<Tensor>& tensors, const std::string& path);
void load(Tensor& tensor, const std::string& path);
void load(std::vector<Tensor>& tensors, const std::string& path);

}  // namespace sloth
