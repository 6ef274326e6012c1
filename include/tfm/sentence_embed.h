// Sentence embeddings as sentence-transformers publishes them. A model directory that holds
// modules.json is a pipeline of stages, each in its folder:
//   Transformer  the model itself (path ""), with sentence_bert_config.json's max_seq_length
//                and do_lower_case; the text gets the tokenizer's special tokens ([CLS] .. [SEP])
//   Pooling      1_Pooling/config.json: cls / max / mean / mean_sqrt_len / weightedmean /
//                lasttoken over the valid tokens, the chosen modes concatenated in that order
//   Dense        2_Dense/config.json + model.safetensors ("linear.weight", "linear.bias"),
//                then its activation (Identity, Tanh, ReLU, GELU, Sigmoid)
//   Normalize    the vector scaled to unit L2 norm
// config_sentence_transformers.json adds named prompts ("query": "query: ") and the
// similarity function. load_model_dir reads all of it into LoadedModel::sentence, so `tfm
// embed`, `tfm index` and /v1/embeddings give the vectors SentenceTransformer.encode gives.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tfm/tensor.h"

namespace tfm {

struct SentencePooling {
  bool cls = false, max = false, mean = false, mean_sqrt_len = false, weighted_mean = false, last_token = false;
  bool include_prompt = true;  // false: the prompt's tokens are left out of the pooling
  std::int64_t word_dimension = 0;
  std::int64_t modes() const;  // how many are on (the pooled vector is modes() x word_dimension)
};

struct SentenceDense {
  Tensor weight, bias;  // (out, in), (out) or undefined
  enum class Activation { identity, tanh, relu, gelu, sigmoid } activation = Activation::identity;
};

struct SentencePipeline {
  std::int64_t max_seq_length = 0;  // 0: the model's max_positions
  bool do_lower_case = false;
  SentencePooling pooling;
  std::vector<SentenceDense> dense;
  bool normalize = false;
  std::map<std::string, std::string> prompts;  // name -> text put before the input
  std::string default_prompt_name, similarity = "cosine";

  std::int64_t dimension() const;  // the output vector's length
  // nullopt when dir has no modules.json; errors name the file and the key. hidden_size
  // checks the Pooling stage's word_embedding_dimension.
  static std::optional<SentencePipeline> load(const std::string& dir, std::int64_t hidden_size);

  // The pooled (and dense, normalised) vector of each row of hidden (B, T, C floats) with
  // lens[b] valid tokens, the first skip[b] of which are a prompt to leave out (include_prompt).
  std::vector<std::vector<float>> apply(const std::vector<float>& hidden, std::int64_t T, std::int64_t C,
                                        const std::vector<std::int64_t>& lens,
                                        const std::vector<std::int64_t>& skip) const;
};

// Each vector scaled to unit L2 norm (F.normalize's eps 1e-12).
void normalize_embeddings(std::vector<std::vector<float>>& vecs);
// Matryoshka truncation: the first `dimensions` numbers of each vector (0: all), scaled back to
// unit norm when `renormalize` (the vectors were normalised before). Errors when dimensions
// exceeds the vectors' length.
void truncate_embeddings(std::vector<std::vector<float>>& vecs, std::int64_t dimensions, bool renormalize);

}  // namespace tfm
