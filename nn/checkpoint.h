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
