// The memory planner (tfm info -m DIR): its KV figure is exactly what the cache allocates,
// the weights are the parameter count in f32, and the activation estimate grows with the
// batch / context as its formula says.
#include <gtest/gtest.h>

#include <algorithm>

#include "tfm/error.h"
#include "tfm/kv_cache.h"
#include "tfm/memory_plan.h"
#include "tfm/model.h"

using namespace tfm;

namespace {

ModelConfig tiny(const std::string& preset) {
  ModelConfig c = model_preset(preset);
  c.vocab_size = 31; c.d_model = 32; c.n_heads = 4; c.d_ff = 48; c.n_layers = 2; c.max_positions = 40;
  if (c.architecture == Architecture::encoder_decoder) c.n_decoder_layers = 3;
  if (c.n_kv_heads > c.n_heads) c.n_kv_heads = 0;
  return c;
}

}  // namespace

TEST(MemoryPlan, KvEqualsTheCacheItPlansFor) {
  for (const char* preset : {"gpt2", "llama", "vaswani", "t5"}) {
    ModelConfig c = tiny(preset);
    if (std::string(preset) == "llama") c.n_kv_heads = 2;  // GQA stores fewer heads
    for (std::int64_t B : {1, 3}) {
      const MemoryPlan p = plan_memory(c, 24, B);
      const bool ed = c.architecture == Architecture::encoder_decoder;
      EXPECT_EQ(p.kv_bytes, KVCache::bytes_needed(c, B, 24, ed ? B : 0, ed ? c.max_positions : 0)) << preset;
      EXPECT_EQ(p.kv_self_bytes, KVCache::bytes_needed(c, B, 24)) << preset;
      // ... and what a cache of that size really holds.
      const KVCache cache(c, B, 24, ed ? B : 0, ed ? c.max_positions : 0);
      EXPECT_EQ(p.kv_bytes, cache.bytes()) << preset;
      EXPECT_EQ(p.kv_cross_bytes > 0, ed) << preset;
    }
  }
}

TEST(MemoryPlan, WeightsAreTheParametersInF32) {
  const ModelConfig c = tiny("gpt2");
  const MemoryPlan p = plan_memory(c, 0, 1);
  EXPECT_EQ(p.ctx_size, c.max_positions);  // 0: the model's context
  EXPECT_EQ(p.weight_bytes, 4 * Model::create(c, 1).parameter_count());
  std::int64_t sum = 0;
  for (const auto& [part, b] : p.weights) sum += b;
  EXPECT_EQ(sum, p.weight_bytes);
  EXPECT_EQ(p.total_bytes, p.weight_bytes + p.kv_bytes + std::max(p.prefill_bytes, p.decode_bytes));
}

// A tensor-parallel shard's weights (heads, KV heads, FFN units and the vocabulary split; 31
// tokens over 2 ranks: rank 0 holds 16 rows) are exactly what rank 0's shard holds.
TEST(MemoryPlan, AShardsWeightsAreWhatRankZerosShardHolds) {
  for (const char* preset : {"gpt2", "llama", "vaswani", "t5"}) {
    ModelConfig c = tiny(preset);
    if (c.n_kv_heads > 0) c.n_kv_heads = 2;  // (GQA: KV heads that divide by 2)
    for (const bool tied : {true, false}) {
      c.tie_embeddings = tied;
      Model shard = Model::create(c, 1);
      shard.shard_tensor_parallel(0, 2, [](Tensor&) {});  // (sums nothing: only the sizes are read)
      EXPECT_EQ(plan_memory(tensor_parallel_config(c, 2), 0, 1, 2).weight_bytes, 4 * shard.parameter_count())
          << preset << (tied ? " tied" : " untied");
    }
  }
  // More ranks than tokens: the vocabulary stays whole, as the shards keep it.
  EXPECT_EQ(plan_memory(tiny("gpt2"), 0, 1, 32).weight_bytes, plan_memory(tiny("gpt2"), 0, 1).weight_bytes);
  ModelConfig vit = model_preset("vit-b16");  // no vocabulary at all
  vit.n_layers = 1;
  EXPECT_EQ(plan_memory(tensor_parallel_config(vit, 2), 0, 1, 2).weight_bytes, plan_memory(tensor_parallel_config(vit, 2), 0, 1).weight_bytes);
}

TEST(MemoryPlan, ActivationEstimateFollowsTheShapes) {
  const ModelConfig c = tiny("gpt2");  // C 32, H 4, Dh 8, d_ff 48, V 31, gelu (not gated)
  const std::int64_t per_row = 3 * 32 + (4 + 8) * 8 + 4 * 8 + 2 * 48;
  EXPECT_EQ(plan_memory(c, 20, 1).prefill_bytes, 4 * (20 * per_row + 31));
  EXPECT_EQ(plan_memory(c, 20, 5).decode_bytes, 4 * 5 * (per_row + 31));
}

TEST(MemoryPlan, BadInputIsAnError) {
  const ModelConfig c = tiny("gpt2");  // learned positions: 40
  EXPECT_THROW(plan_memory(c, 41, 1), Error);
  EXPECT_THROW(plan_memory(c, 10, 0), Error);
  EXPECT_THROW(plan_memory(c, -1, 1), Error);
}

// Pipeline stages balanced by memory: under 1F1B stage s keeps stages - s micro-batches'
// activations, so where activations outweigh the layers' weights the first stages take fewer
// layers; the largest planned stage is then below the even split's, whose own plan is the
// same formula over pipeline_layers. With one micro-batch alive everywhere and weights that
// dominate, the split stays even.
TEST(MemoryPlan, PipelineStagesBalanceTheActivationsEachStageKeeps) {
  ModelConfig c = model_preset("gpt2");
  c.vocab_size = 31; c.d_model = 32; c.n_heads = 4; c.d_ff = 64; c.n_layers = 8; c.max_positions = 256;
  const std::vector<std::int64_t> one_f_one_b{4, 3, 2, 1};
  const PipelineStagePlan balanced = plan_pipeline_stages(c, one_f_one_b, 16, 256, 2);
  const PipelineStagePlan even = plan_pipeline_stages(c, one_f_one_b, 16, 256, 2, false, /*even=*/true);
  ASSERT_EQ(balanced.bounds.size(), 5u);
  EXPECT_EQ(even.bounds, (std::vector<std::int64_t>{0, 2, 4, 6, 8}));
  EXPECT_EQ(balanced.bounds.front(), 0);
  EXPECT_EQ(balanced.bounds.back(), 8);
  for (std::size_t s = 1; s < balanced.bounds.size(); ++s) EXPECT_GT(balanced.bounds[s], balanced.bounds[s - 1]);
  EXPECT_LT(balanced.bounds[1] - balanced.bounds[0], balanced.bounds[4] - balanced.bounds[3]) << "stage 0 keeps 4 micro-batches";
  const auto worst = [](const PipelineStagePlan& p) { return *std::max_element(p.stage_bytes.begin(), p.stage_bytes.end()); };
  EXPECT_LT(worst(balanced), worst(even));
  EXPECT_EQ(even.stage_bytes[0], *std::max_element(even.stage_bytes.begin(), even.stage_bytes.end()));
  // A stage holds the embeddings and head, its layers' weights, gradients and AdamW state and
  // its activations: the one-stage plan is plan_training_memory's.
  const PipelineStagePlan whole = plan_pipeline_stages(c, {1}, 16, 256, 2);
  EXPECT_EQ(whole.stage_bytes[0], plan_training_memory(c, 16, 256, 2).total_bytes);
  // Weights that outweigh one micro-batch's activations, one alive per stage: even.
  c.d_model = 256; c.d_ff = 1024; c.n_heads = 8;
  EXPECT_EQ(plan_pipeline_stages(c, {1, 1, 1}, 1, 8, 2).bounds, (std::vector<std::int64_t>{0, 3, 6, 8}));
  EXPECT_THROW(plan_pipeline_stages(c, std::vector<std::int64_t>(9, 1), 1, 8, 2), Error);  // more stages than layers
}

// An encoder-decoder's stages split both stacks at once, weighing each stack's layers by the
// graphs of it that the stage keeps alive: with 4 encoder graphs and 1 decoder graph alive on
// stage 0, and 1 of each on stage 1, stage 0 takes fewer encoder layers and the largest stage
// falls below the even split's; the bounds are the encoder's, then the decoder's. One stage's
// plan is plan_training_memory's; weights that dominate keep both stacks even.
TEST(MemoryPlan, EncoderDecoderStagesBalanceBothStacks) {
  ModelConfig c = model_preset("vaswani");
  c.vocab_size = 31; c.d_model = 32; c.n_heads = 4; c.d_ff = 64; c.max_positions = 256;
  c.n_layers = 6; c.n_decoder_layers = 4;
  const std::vector<std::vector<std::pair<std::int64_t, std::int64_t>>> alive = {{{4, 1}, {3, 2}}, {{1, 1}}};
  const PipelineStagePlan balanced = plan_encoder_decoder_stages(c, alive, 16, 256, 2);
  const PipelineStagePlan even = plan_encoder_decoder_stages(c, alive, 16, 256, 2, false, /*even=*/true);
  EXPECT_EQ(even.bounds, (std::vector<std::int64_t>{0, 3, 6, 0, 2, 4}));
  ASSERT_EQ(balanced.bounds.size(), 6u);
  EXPECT_EQ(balanced.bounds[0], 0);
  EXPECT_EQ(balanced.bounds[2], 6);
  EXPECT_EQ(balanced.bounds[3], 0);
  EXPECT_EQ(balanced.bounds[5], 4);
  EXPECT_LT(balanced.bounds[1], 3) << "stage 0 keeps 4 encoder graphs";
  EXPECT_GE(balanced.bounds[1], 1);
  EXPECT_GE(balanced.bounds[4], 1);
  EXPECT_LT(balanced.bounds[4], 4);
  const auto worst = [](const PipelineStagePlan& p) { return *std::max_element(p.stage_bytes.begin(), p.stage_bytes.end()); };
  EXPECT_LT(worst(balanced), worst(even));
  const PipelineStagePlan whole = plan_encoder_decoder_stages(c, {{{1, 1}}}, 16, 256, 2);
  EXPECT_EQ(whole.bounds, (std::vector<std::int64_t>{0, 6, 0, 4}));
  EXPECT_EQ(whole.stage_bytes[0], plan_training_memory(c, 16, 256, 2).total_bytes);
  c.d_model = 256; c.d_ff = 1024; c.n_heads = 8;
  EXPECT_EQ(plan_encoder_decoder_stages(c, {{{1, 1}}, {{1, 1}}}, 1, 8, 2).bounds, (std::vector<std::int64_t>{0, 3, 6, 0, 2, 4}));
  EXPECT_THROW(plan_encoder_decoder_stages(c, std::vector<std::vector<std::pair<std::int64_t, std::int64_t>>>(5, {{1, 1}}), 1, 8, 2),
               Error);  // more stages than decoder layers
  c.architecture = Architecture::decoder_only;
  EXPECT_THROW(plan_encoder_decoder_stages(c, {{{1, 1}}}, 1, 8, 2), Error);
}
