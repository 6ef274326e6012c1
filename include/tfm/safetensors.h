// The safetensors format (Hugging Face): an 8-byte little-endian header length N, N bytes
// of JSON {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
// "__metadata__": {"k": "v"}}, then the raw little-endian tensor bytes. Readers here check
// every length and offset before trusting it.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "tfm/tensor.h"

namespace tfm {

struct SafetensorsFile {
  std::map<std::string, Tensor> tensors;
  std::map<std::string, std::string> metadata;
};

// Read a whole file. Throws tfm::Error naming the file and the problem on any defect.
SafetensorsFile load_safetensors(const std::string& path);
// Parse from memory (`where` names the source in errors).
SafetensorsFile parse_safetensors(const std::string& bytes, const std::string& where);

// A sharded set's index (model.safetensors.index.json: {"metadata": {...}, "weight_map":
// {tensor: shard file}}): each shard file with the tensors assigned to it. Every file must be a
// plain name in the index's directory (no '/', '.' or '..'); throws naming the index otherwise,
// on malformed JSON, or when the map is empty.
std::map<std::string, std::vector<std::string>> read_safetensors_index(const std::string& index_path);

// Write atomically (temp file, fsync, rename): a crash leaves the old file or the new one.
// Tensors are written contiguous, in name order, data aligned to 8 bytes.
void save_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                      const std::map<std::string, std::string>& metadata = {});
std::string serialize_safetensors(const std::map<std::string, Tensor>& tensors,
                                  const std::map<std::string, std::string>& metadata = {});

// Atomic whole-file write used by every writer of the engine.
void write_file_atomic(const std::string& path, const std::string& bytes);
std::string read_file(const std::string& path);  // throws if missing/unreadable

}  // namespace tfm
