// Tensor parallelism (Model::shard_tensor_parallel): every family's shards, run in lockstep on
// threads whose partial sums meet at a barrier (what MPI does between processes), give the
// whole model's logits, through the full forward and through the KV-cache path; a shard holds
// its share of the attention and FFN weights only; what cannot be sharded is refused.
// (Across processes under mpirun: tests/cli/mpi_model_parallel.sh.)
#include <gtest/gtest.h>

#include <barrier>
#include <thread>

#include "models/family.h"
#include "support/family_config.h"
#include "support/test_support.h"
#include "tfm/error.h"
#include "tfm/autograd.h"
#include "tfm/kv_cache.h"
#include "tfm/model.h"
#include "tfm/ops.h"

using namespace tfm;

namespace {

// A family's defaults at a size that splits over 2 and 4 ranks.
ModelConfig tiny(const Family& f) { return test::small_family_config(f, 4, 4, 2); }

ModelInputs inputs_for(const ModelConfig& c) {
  ModelInputs in;
  if (c.reads_images()) in.pixel_values = Tensor::randn({2, c.num_channels, c.image_size, c.image_size}, 3);
  else if (c.reads_audio()) in.input_features = Tensor::randn({1, c.num_mel_bins, 2 * c.max_source_positions - 1}, 3);
  else in.input_ids = Tensor::from_ints({3, 4, 5, 6, 9, 11, 4, 3, 8, 12, 30, 7}, {2, 6});
  if (c.architecture == Architecture::encoder_decoder)
    in.decoder_input_ids = Tensor::from_ints({2, 7, 9, 2, 5, 6}, {in.input_ids.defined() ? 2 : 1, in.input_ids.defined() ? 3 : 6});
  return in;
}

// R shards' partial sums, added in rank order: every shard gets the same bits.
class Group {
 public:
  explicit Group(int ranks) : slots_(static_cast<std::size_t>(ranks)), sync_(ranks) {}
  Model::PartialSum sum_for(int rank) {
    return [this, rank](Tensor& t) {
      float* d = t.data<float>();
      const auto n = static_cast<std::size_t>(t.numel());
      slots_[static_cast<std::size_t>(rank)].assign(d, d + n);
      sync_.arrive_and_wait();
      for (std::size_t i = 0; i < n; ++i) {
        float s = slots_[0][i];
        for (std::size_t r = 1; r < slots_.size(); ++r) s += slots_[r][i];
        d[i] = s;
      }
      sync_.arrive_and_wait();  // nobody refills a slot before all have read it
      ++calls_;
    };
  }
  void leave() { sync_.arrive_and_drop(); }  // a shard that failed: the others do not wait for it
  std::int64_t calls() const { return calls_; }

 private:
  std::vector<std::vector<float>> slots_;
  std::barrier<> sync_;
  std::atomic<std::int64_t> calls_{0};
};

// f(rank, shard) on a thread per rank, each shard made from `params` of config c.
template <class F>
void in_lockstep(const ModelConfig& c, const std::map<std::string, Tensor>& params, int ranks, F f, Group* group = nullptr) {
  Group own(ranks);
  Group& g = group != nullptr ? *group : own;
  std::vector<std::thread> threads;
  std::vector<std::string> errors(static_cast<std::size_t>(ranks));
  for (int r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      try {
        Model shard = Model::from_parameters(c, params);
        shard.shard_tensor_parallel(r, ranks, g.sum_for(r));
        f(r, shard);
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(r)] = e.what();
        g.leave();
      }
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < ranks; ++r) EXPECT_EQ(errors[static_cast<std::size_t>(r)], "") << "rank " << r;
}

std::int64_t elements(const std::map<std::string, Tensor>& p) {
  std::int64_t n = 0;
  for (const auto& [name, t] : p) n += t.numel();
  return n;
}

}  // namespace

TEST(TensorParallel, EveryFamilysShardsGiveTheWholeModelsLogits) {
  for (const Family& f : model_families()) {
    if (f.schema.base.text_tower.enabled()) continue;  // CLIP is refused (below)
    SCOPED_TRACE(f.model_type);
    const ModelConfig c = tiny(f);
    Model whole = Model::create(c, 7);
    const ModelInputs in = inputs_for(c);
    Tensor want;
    {
      NoGradGuard ng;
      want = whole.forward(in).logits;
    }
    for (const int ranks : {2, 4}) {
      Group g(ranks);
      in_lockstep(c, whole.parameters(), ranks, [&](int r, Model& shard) {
        EXPECT_EQ(shard.tensor_parallel_rank(), r);
        EXPECT_EQ(shard.tensor_parallel_ranks(), ranks);
        EXPECT_EQ(shard.config().n_heads, c.n_heads / ranks);
        EXPECT_LT(elements(shard.parameters()), elements(whole.parameters()));
        NoGradGuard ng;
        const Tensor got = shard.forward(in).logits;
        test::expect_close(got, want, 1e-5, 1e-4, f.model_type + " rank " + std::to_string(r) + " of " + std::to_string(ranks));
      }, &g);
      // Two sums per layer (attention output, FFN down) and one more per cross-attention.
      EXPECT_GE(g.calls(), static_cast<std::int64_t>(2 * ranks * c.n_layers));
    }
  }
}

// Attention captured on shards (every family but CLIP): each shard records its heads, and
// forward() puts every layer's heads together, so each shard holds what the whole model
// captures, in the same order (within rounding: the shards' partial sums).
TEST(TensorParallel, EveryFamilysShardsCaptureTheWholeModelsAttention) {
  for (const Family& f : model_families()) {
    if (f.schema.base.text_tower.enabled()) continue;
    SCOPED_TRACE(f.model_type);
    const ModelConfig c = tiny(f);
    Model whole = Model::create(c, 7);
    const ModelInputs in = inputs_for(c);
    std::vector<AttentionMap> want;
    {
      NoGradGuard ng;
      whole.set_attention_capture(&want);
      whole.forward(in);
      whole.set_attention_capture(nullptr);
    }
    ASSERT_FALSE(want.empty());
    in_lockstep(c, whole.parameters(), 2, [&](int r, Model& shard) {
      std::vector<AttentionMap> got;
      NoGradGuard ng;
      shard.set_attention_capture(&got);
      shard.forward(in);
      shard.set_attention_capture(nullptr);
      ASSERT_EQ(got.size(), want.size()) << "rank " << r;
      for (std::size_t i = 0; i < got.size(); ++i) {
        EXPECT_EQ(got[i].stack + got[i].kind + std::to_string(got[i].layer), want[i].stack + want[i].kind + std::to_string(want[i].layer));
        test::expect_close(got[i].weights, want[i].weights, 1e-5, 1e-6, "map " + std::to_string(i) + " on rank " + std::to_string(r));
      }
    });
  }
}

// The decoder's attention and FFN weights, the token embedding and the LM head: 1/R of them
// per shard, the rest (norms) whole.
TEST(TensorParallel, AShardHoldsItsShareOfTheLayerWeights) {
  ModelConfig c = tiny(model_family("llama"));
  c.tie_embeddings = false;
  Model whole = Model::create(c, 3);
  in_lockstep(c, whole.parameters(), 2, [&](int r, Model& shard) {
    for (const auto& [name, t] : whole.parameters()) {
      const Tensor& s = shard.parameters().at(name);
      const bool split = name.find("self_attn") != std::string::npos || name.find("mlp") != std::string::npos ||
                         name.find("embed_tokens") != std::string::npos || name.find("lm_head") != std::string::npos;
      EXPECT_EQ(s.numel() * (split ? 2 : 1), t.numel()) << name;
    }
    EXPECT_EQ(shard.vocab_shard(), (std::pair<std::int64_t, std::int64_t>{32 * r, 32 * (r + 1)}));
  });
}

TEST(TensorParallel, CachedDecodingOfShardsPicksTheWholeModelsTokens) {
  for (const char* type : {"llama", "gpt2", "t5", "marian"}) {
    SCOPED_TRACE(type);
    const ModelConfig c = tiny(model_family(type));
    Model whole = Model::create(c, 5);
    const bool s2s = c.architecture == Architecture::encoder_decoder;
    const Tensor src = Tensor::from_ints({5, 9, 13, 7, 3}, {1, 5});
    // Greedy tokens of a model: a 3-token prefill, then 8 steps of one token.
    auto greedy = [&](Model& m) {
      KVCache cache(m.config(), 1, 16, s2s ? 1 : 0, s2s ? 8 : 0);
      if (s2s) m.encode_to_cache(src, cache, 0);
      std::vector<std::int64_t> out;
      Tensor logits = m.decode_cached(Tensor::from_ints({2, 11, 17}, {1, 3}), {0}, cache);
      for (int step = 0; step < 8; ++step) {
        const auto v = logits.to_floats();
        const auto next = static_cast<std::int64_t>(std::max_element(v.begin(), v.end()) - v.begin());
        out.push_back(next);
        logits = m.decode_cached(Tensor::from_ints({next}, {1, 1}), {0}, cache);
      }
      return out;
    };
    const auto want = greedy(whole);
    in_lockstep(c, whole.parameters(), 2, [&](int r, Model& shard) {
      EXPECT_EQ(greedy(shard), want) << "rank " << r;
      KVCache cache(shard.config(), 1, 16, s2s ? 1 : 0, s2s ? 8 : 0);
      KVCache full(c, 1, 16, s2s ? 1 : 0, s2s ? 8 : 0);
      EXPECT_EQ(cache.bytes() * 2, full.bytes()) << "a shard's cache holds its heads only";
    });
  }
}

TEST(TensorParallel, WhatCannotBeShardedIsRefusedWithTheReason) {
  const ModelConfig c = tiny(model_family("llama"));
  const auto noop = [](Tensor&) {};
  Model m = Model::create(c, 1);
  EXPECT_NE(test::error_message([&] { m.shard_tensor_parallel(0, 3, noop); }).find("4 attention heads and 4 key/value heads must divide by the 3 ranks"),
            std::string::npos);
  EXPECT_NE(test::error_message([&] { m.shard_tensor_parallel(2, 2, noop); }).find("rank 2 of 2"), std::string::npos);
  EXPECT_NE(test::error_message([&] { m.shard_tensor_parallel(0, 2, nullptr); }).find("no function"), std::string::npos);
  ModelConfig gqa = c;
  gqa.n_kv_heads = 1;
  Model mqa = Model::create(gqa, 1);
  EXPECT_NE(test::error_message([&] { mqa.shard_tensor_parallel(0, 2, noop); }).find("1 key/value heads"), std::string::npos);
  LoraConfig l;
  l.r = 2;
  l.target_modules = {"q_proj"};
  Model lora = Model::create(c, 1);
  lora.add_lora(l, 1);
  EXPECT_NE(test::error_message([&] { lora.shard_tensor_parallel(0, 2, noop); }).find("LoRA"), std::string::npos);
  Model once = Model::create(c, 1);
  once.shard_tensor_parallel(1, 2, noop);
  EXPECT_NE(test::error_message([&] { once.shard_tensor_parallel(0, 2, noop); }).find("already rank 1's shard of 2"), std::string::npos);
  EXPECT_EQ(tensor_parallel_config(c, 2).n_heads, 2);
  EXPECT_EQ(tensor_parallel_config(c, 2).dim_head(), c.dim_head());
  Model clip = Model::create(tiny(model_family("clip")), 1);
  EXPECT_NE(test::error_message([&] { clip.shard_tensor_parallel(0, 2, noop); }).find("CLIP model's two towers"),
            std::string::npos);
}

namespace {

// A loss that reaches every output of a model: the logits weighted by fixed random numbers.
Tensor weighted_logits(const Tensor& logits) {
  return sum(mul(logits, Tensor::randn(logits.shape(), 11)));
}

// The whole model's training step (dropout and stochastic depth on, fused or plain attention)
// against its shards' in lockstep: the same loss, the whole gradient of every parameter that
// stays whole, and of a split one the slice the shard holds.
void expect_shards_train_as_the_whole(ModelConfig c, int ranks, const std::string& what,
                                      const std::function<void(Model&)>& prepare = [](Model&) {}) {
  c.dropout = 0.2;
  c.attention_dropout = 0.3;
  c.embedding_dropout = 0.1;
  c.stochastic_depth = c.n_layers > 1 ? 0.2 : 0.0;
  Model whole = Model::create(c, 7);
  const ModelInputs in = inputs_for(c);
  auto step = [&](Model& m) {
    for (auto& [name, p] : m.parameters()) p.requires_grad_(true);
    prepare(m);
    m.set_training(true);
    m.set_dropout_seed(5, 3);
    const Tensor loss = weighted_logits(m.forward(in).logits);
    backward(loss);
    return loss.item();
  };
  const double want = step(whole);
  std::map<std::string, Tensor> grads;
  for (const auto& [name, p] : whole.parameters()) grads[name] = p.grad();
  const std::map<std::string, Tensor> init = Model::create(c, 7).parameters();
  in_lockstep(c, init, ranks, [&](int r, Model& shard) {
    const std::string where = what + " rank " + std::to_string(r) + " of " + std::to_string(ranks);
    EXPECT_NEAR(step(shard), want, 1e-4 * std::max(1.0, std::abs(want))) << where;
    for (const auto& [name, p] : shard.parameters()) {
      ASSERT_TRUE(p.grad().defined()) << where << " " << name;
      test::expect_close(p.grad(), shard.tensor_parallel_slice(name, grads.at(name)), 1e-5, 1e-4, where + " " + name);
    }
  });
}

}  // namespace

TEST(TensorParallel, EveryFamilysShardsTrainAsTheWholeModel) {
  for (const Family& f : model_families()) {
    if (f.schema.base.text_tower.enabled()) continue;  // CLIP is refused
    SCOPED_TRACE(f.model_type);
    expect_shards_train_as_the_whole(tiny(f), 2, f.model_type);
  }
  expect_shards_train_as_the_whole(tiny(model_family("llama")), 4, "llama");
}

// The plain attention path, a sliding window with random blocks drawn per head, and
// activation checkpointing (the sums run again in the recomputed forward).
TEST(TensorParallel, ShardsTrainAsTheWholeModelWithPlainSparseAttentionAndCheckpointing) {
  ModelConfig c = tiny(model_family("llama"));
  expect_shards_train_as_the_whole(c, 2, "plain", [](Model& m) { m.set_fused_attention(false); });
  expect_shards_train_as_the_whole(c, 2, "checkpointed", [](Model& m) { m.set_checkpoint_activations(true); });
  c.sparse_attention.window = 3;
  c.sparse_attention.random_blocks = 1;
  c.sparse_attention.block_size = 2;
  expect_shards_train_as_the_whole(c, 2, "sparse");
}

TEST(TensorParallel, TheShardsGatherIntoTheWholeModel) {
  const ModelConfig c = tiny(model_family("gpt2"));  // fused c_attn: three row ranges per shard
  Model whole = Model::create(c, 4);
  in_lockstep(c, whole.parameters(), 2, [&](int r, Model& shard) {
    const Model joined = shard.tensor_parallel_whole();
    EXPECT_EQ(joined.config().n_heads, c.n_heads);
    for (const auto& [name, t] : whole.parameters()) {
      test::expect_close(joined.parameters().at(name), t, 0, 0, name + " rank " + std::to_string(r));
      test::expect_close(shard.tensor_parallel_slice(name, t), shard.parameters().at(name), 0, 0, name);
      const bool row_bias = name.find("c_proj.bias") != std::string::npos;  // added after the sum: whole
      EXPECT_EQ(shard.tensor_parallel_split(name),
                name == "transformer.wte.weight" ||
                    (!row_bias && (name.find(".attn.") != std::string::npos || name.find(".mlp.") != std::string::npos)))
          << name;
    }
  });
}

// The vocabulary split (Megatron-LM's vocab-parallel embedding and cross-entropy): each shard's
// forward with shard_logits returns its columns of the logits only, and the loss over them,
// with label smoothing and ignored targets, is the whole model's cross_entropy, with the whole
// model's gradients — for every family with a vocabulary head, tied or not, over a vocabulary
// that does not divide by the ranks (61 rows: 31 + 30, or 16 + 15 + 15 + 15).
TEST(TensorParallel, VocabularySplitShardsLearnTheWholeModelsTokenLoss) {
  for (const Family& f : model_families()) {
    ModelConfig c = tiny(f);
    if (c.head != HeadKind::lm && c.head != HeadKind::masked_lm) continue;
    c.vocab_size = 61;
    for (const bool tied : {true, false}) {
      if (!tied && (c.head != HeadKind::lm || f.model_type == "whisper")) continue;  // (the others are always tied)
      c.tie_embeddings = tied;
      const std::string what = f.model_type + (tied ? " tied" : " untied");
      SCOPED_TRACE(what);
      ModelInputs in = inputs_for(c);
      const Tensor& read = c.architecture == Architecture::encoder_decoder ? in.decoder_input_ids : in.input_ids;
      std::vector<std::int64_t> t;
      for (std::int64_t i = 0; i < read.numel(); ++i) t.push_back(i % 4 == 1 ? -100 : (i * 37 + 5) % 61);
      const Tensor targets = Tensor::from_ints(t, read.shape());
      auto step = [&](Model& m, bool shard_logits) {
        for (auto& [name, p] : m.parameters()) p.requires_grad_(true);
        ModelInputs x = in;
        x.shard_logits = shard_logits;
        const Tensor logits = m.forward(x).logits;
        const auto [first, last] = m.vocab_shard();
        EXPECT_EQ(logits.size(-1), last - first);
        const Tensor loss = m.logits_cross_entropy(logits, targets, 0.1f);
        backward(loss);
        return loss.item();
      };
      Model whole = Model::create(c, 7);
      const double want = step(whole, false);
      std::map<std::string, Tensor> grads;
      for (const auto& [name, p] : whole.parameters()) grads[name] = p.grad();
      const std::map<std::string, Tensor> init = Model::create(c, 7).parameters();
      for (const int ranks : {2, 4}) {
        in_lockstep(c, init, ranks, [&](int r, Model& shard) {
          const std::string where = what + " rank " + std::to_string(r) + " of " + std::to_string(ranks);
          const auto [first, last] = shard.vocab_shard();
          EXPECT_EQ(last - first, 61 / ranks + (r < 61 % ranks ? 1 : 0)) << where;
          EXPECT_NEAR(step(shard, true), want, 1e-5 * std::max(1.0, std::abs(want))) << where;
          for (const auto& [name, p] : shard.parameters()) {
            ASSERT_TRUE(p.grad().defined()) << where << " " << name;
            test::expect_close(p.grad(), shard.tensor_parallel_slice(name, grads.at(name)), 1e-5, 1e-4, where + " " + name);
          }
        });
      }
    }
  }
}

// Ids and targets outside the vocabulary fail on every shard with the reason, as one process.
TEST(TensorParallel, AVocabularySplitShardRefusesIdsOutsideTheVocabulary) {
  const ModelConfig c = tiny(model_family("llama"));
  in_lockstep(c, Model::create(c, 1).parameters(), 2, [&](int, Model& shard) {
    NoGradGuard ng;
    ModelInputs in;
    in.input_ids = Tensor::from_ints({3, 64}, {1, 2});
    EXPECT_NE(test::error_message([&] { shard.forward(in); }).find("index 64 at position 1 is out of range for a table of 64 rows"),
              std::string::npos);
    in.input_ids = Tensor::from_ints({3, 4}, {1, 2});
    in.shard_logits = true;
    const Tensor logits = shard.forward(in).logits;
    EXPECT_NE(test::error_message([&] { shard.logits_cross_entropy(logits, Tensor::from_ints({5, 70}, {1, 2})); })
                  .find("target 70 at position 1 is out of range for 64 classes"),
              std::string::npos);
  });
}
