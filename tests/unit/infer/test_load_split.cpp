// Loading a split model (tensor or pipeline parallel) from a 16-bit checkpoint: the stored
// bf16/f16 weights are sliced as stored and converted to f32 after the split
// (Model::from_parameters_deferred, load_model), so a rank reads and holds its part only. The
// result is exactly what converting the whole model and then splitting it gives, for every
// family (GPT-2's Conv1D weights keep their (in, out) layout until converted), and the
// allocator's peak while loading one of two shards stays near the shard's size, not the whole
// model's.
#include <gtest/gtest.h>

#include "models/family.h"
#include "support/family_config.h"
#include "support/test_support.h"
#include "support/train_helpers.h"
#include "tfm/gguf_model.h"
#include "tfm/load.h"
#include "tfm/model.h"
#include "tfm/model_dir.h"
#include "tfm/ops.h"
#include "tfm/runtime.h"
#include "tfm/safetensors.h"

using namespace tfm;

namespace {

std::map<std::string, Tensor> stored_as(const std::map<std::string, Tensor>& params, DType type) {
  std::map<std::string, Tensor> out;
  for (const auto& [name, t] : params) out[name] = t.dtype() == DType::f32 ? cast(t, type) : t;
  return out;
}

void no_sum(Tensor&) {}  // sharding calls no sum; nothing here runs a forward pass
Model::PipeComm no_comm() { return {[](const Tensor&, int) {}, [](Tensor&, int) {}, [](Tensor&, int) {}}; }

// One way of splitting a model: pipeline stage and tensor-parallel rank (stages/ranks 1: none).
struct Split {
  int stage, stages, rank, ranks;
};
void split(Model& m, const Split& s) {
  if (s.stages > 1) m.shard_pipeline(s.stage, s.stages, no_comm());
  if (s.ranks > 1) m.shard_tensor_parallel(s.rank, s.ranks, no_sum);
}

std::size_t f32_bytes(const std::map<std::string, Tensor>& params) {
  std::size_t n = 0;
  for (const auto& [name, t] : params) n += static_cast<std::size_t>(t.numel()) * sizeof(float);
  return n;
}

}  // namespace

TEST(LoadSplit, ConvertingAfterTheSplitGivesWhatSplittingTheConvertedModelGives) {
  for (const Family& f : model_families()) {
    if (f.schema.base.text_tower.enabled()) continue;  // CLIP is not split
    SCOPED_TRACE(f.model_type);
    const ModelConfig c = test::small_family_config(f, 4, 4, 2);
    const Model whole = Model::create(c, 7);
    const bool pipelines = c.architecture == Architecture::decoder_only && c.head == HeadKind::lm && !c.retrieval.enabled();
    std::vector<Split> splits = {{0, 1, 0, 2}, {0, 1, 1, 2}};
    if (pipelines) splits.insert(splits.end(), {{1, 2, 0, 1}, {0, 2, 1, 2}});
    for (const DType type : {DType::bf16, DType::f16}) {
      const auto stored = stored_as(whole.parameters(), type);
      for (const Split& s : splits) {
        const std::string where = std::string(dtype_name(type)) + " stage " + std::to_string(s.stage) + "/" +
                                  std::to_string(s.stages) + " rank " + std::to_string(s.rank) + "/" + std::to_string(s.ranks);
        Model eager = Model::from_parameters(c, stored);
        split(eager, s);
        Model deferred = Model::from_parameters_deferred(c, stored);
        split(deferred, s);
        EXPECT_EQ(deferred.parameters().size(), eager.parameters().size()) << where;
        const std::string e = train_test::expect_error([&] { deferred.forward(ModelInputs{}); });
        EXPECT_NE(e.find("not converted yet"), std::string::npos) << where << ": " << e;
        deferred.convert_deferred_weights();
        for (const auto& [name, t] : eager.parameters()) {
          ASSERT_TRUE(deferred.parameters().count(name)) << where << " " << name;
          const Tensor& d = deferred.parameters().at(name);
          EXPECT_EQ(d.dtype(), DType::f32) << where << " " << name;
          test::expect_bitwise_equal(d, t, where + " " + name);
        }
      }
    }
  }
}

TEST(LoadSplit, AShardOfABf16CheckpointPeaksAtItsShareNotTheWholeModelInF32) {
  ModelConfig c = test::small_family_config(model_family("llama"), 4, 2, 2);
  c.d_model = 128;
  c.head_dim = 32;
  c.d_ff = 512;
  c.n_layers = 4;
  c.vocab_size = 512;
  c.tie_embeddings = false;
  const Model whole = Model::create(c, 5);
  const std::string dir = train_test::tmp_dir("load_split_bf16");
  TokenizerTrainOptions to;
  to.kind = TokenizerKind::char_level;
  save_model_description(dir, c, Tokenizer::train({"abcdefghijklmnopqrstuvwxyz"}, to));
  save_safetensors(dir + "/model.safetensors", stored_as(whole.parameters(), DType::bf16), {{"format", "pt"}});
  const double whole_bytes = static_cast<double>(f32_bytes(whole.parameters()));
  auto peak_loading = [&](const LoadOptions& o, std::int64_t& elements) {
    const std::size_t before = memory_stats().current_bytes;
    reset_peak_memory();
    LoadedModel lm = load_model(dir, o);
    elements = lm.model.parameter_count();
    return static_cast<double>(memory_stats().peak_bytes - before);
  };
  std::int64_t n_whole = 0, n_shard = 0, n_stage = 0;
  const double one = peak_loading({}, n_whole);
  LoadOptions shard;
  shard.tp_ranks = 2;
  shard.tp_sum = no_sum;
  const double half = peak_loading(shard, n_shard);
  LoadOptions stage;
  stage.pp_stages = 2;
  stage.pp_stage = 1;
  stage.pp_comm = no_comm();
  const double depth = peak_loading(stage, n_stage);
  EXPECT_EQ(n_whole, whole.parameter_count());
  EXPECT_GE(one, whole_bytes);
  // The shard: half of every matrix and of the vocabulary, norms whole; at its peak the last
  // stored slice is not yet let go. Converting first would peak at the whole model.
  const double shard_bytes = static_cast<double>(n_shard) * sizeof(float);
  EXPECT_LT(shard_bytes, 0.55 * whole_bytes);
  EXPECT_LT(half, 1.15 * shard_bytes) << "peak " << half << " bytes for a shard of " << shard_bytes;
  const double stage_bytes = static_cast<double>(n_stage) * sizeof(float);
  EXPECT_LT(depth, 1.15 * stage_bytes) << "peak " << depth << " bytes for a stage of " << stage_bytes;
}

// A GGUF file keeps its matrices in the stored type (f16 here); a split load views the file's
// mapping instead of copying the whole model out, so a shard's peak is its slices, and the
// shard equals the one cut from a model loaded whole.
TEST(LoadSplit, AShardOfAGgufFileCopiesOnlyItsSlices) {
  const ModelConfig c = parse_model_config(
      R"({"model_type": "gpt2", "vocab_size": 300, "n_embd": 128, "n_layer": 4, "n_head": 4, "n_positions": 64})", "t");
  TokenizerTrainOptions o;
  o.vocab_size = 300;
  const Tokenizer tok = Tokenizer::train({"the quick brown fox jumps over the lazy dog", "hello world, hello there"}, o);
  const std::string path = train_test::tmp_dir("load_split_gguf") + "/m.gguf";
  save_gguf_model(path, Model::create(c, 3), tok, {GgmlType::f16, "split", ""});
  double peak = 0;
  auto peak_loading = [&](const LoadOptions& opt) {
    const std::size_t before = memory_stats().current_bytes;
    reset_peak_memory();
    LoadedModel lm = load_model(path, opt);
    peak = static_cast<double>(memory_stats().peak_bytes - before);
    return lm;
  };
  LoadOptions shard;
  shard.tp_ranks = 2;
  shard.tp_sum = no_sum;
  shard.repack = false;
  LoadOptions whole_opt;
  whole_opt.repack = false;
  LoadedModel whole = peak_loading(whole_opt);
  const double whole_peak = peak;
  LoadedModel part = peak_loading(shard);
  const double part_peak = peak;
  whole.model.shard_tensor_parallel(0, 2, no_sum);
  for (const auto& [name, t] : whole.model.parameters()) {
    ASSERT_TRUE(part.model.parameters().count(name)) << name;
    EXPECT_EQ(part.model.parameters().at(name).dtype(), t.dtype()) << name;
    test::expect_bitwise_equal(part.model.parameters().at(name), t, name);
  }
  EXPECT_LT(part_peak, 0.6 * whole_peak) << "a shard's load peaked at " << part_peak << " bytes, the whole model's at " << whole_peak;
}
