// Pipeline parallelism (Model::shard_pipeline): every decoder-only family split into 2 and 3
// stages (5 layers: uneven), and every encoder-decoder one, each stage on a thread handing its activations on through
// mailboxes (what MPI does between processes), gives the whole model's KV-cache logits to the
// last bit on every stage (the arithmetic is the same, only where it runs differs) and so the
// same greedy tokens; the stages hold their layers only; what cannot be split is refused.
// (Across processes under mpirun: tests/cli/mpi_model_parallel.sh.)
#include <gtest/gtest.h>

#include <atomic>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "models/family.h"
#include "support/family_config.h"
#include "support/test_support.h"
#include "tfm/autograd.h"
#include "tfm/error.h"
#include "tfm/kv_cache.h"
#include "tfm/model.h"
#include "tfm/ops.h"

using namespace tfm;

namespace {

// Messages between S stages: one FIFO per (from, to).
class Mailboxes {
 public:
  explicit Mailboxes(int stages) : stages_(stages), boxes_(static_cast<std::size_t>(stages * stages)) {}
  Model::PipeComm comm_for(int me) {
    Model::PipeComm c;
    c.send = [this, me](const Tensor& t, int to) {
      ++sends_;
      put(me, to, t);
    };
    c.recv = [this, me](Tensor& t, int from) { take(from, me, t); };
    c.broadcast = [this, me](Tensor& t, int root) {
      if (me != root) return take(root, me, t);
      for (int r = 0; r < stages_; ++r)
        if (r != me) put(me, r, t);
    };
    return c;
  }
  std::int64_t sends() const { return sends_; }  // hand-ons between stages (broadcasts not counted)

 private:
  struct Box {
    std::mutex mu;
    std::condition_variable ready;
    std::deque<std::vector<float>> queue;
  };
  Box& box(int from, int to) { return boxes_[static_cast<std::size_t>(from * stages_ + to)]; }
  void put(int from, int to, const Tensor& t) {
    Box& b = box(from, to);
    const auto v = t.to_floats();
    {
      std::lock_guard<std::mutex> lock(b.mu);
      b.queue.push_back(v);
    }
    b.ready.notify_one();
  }
  void take(int from, int to, Tensor& t) {
    Box& b = box(from, to);
    std::unique_lock<std::mutex> lock(b.mu);
    b.ready.wait(lock, [&] { return !b.queue.empty(); });
    const std::vector<float> v = std::move(b.queue.front());
    b.queue.pop_front();
    ASSERT_EQ(static_cast<std::int64_t>(v.size()), t.numel()) << "a message of another shape";
    std::copy(v.begin(), v.end(), t.data<float>());
  }
  int stages_;
  std::atomic<std::int64_t> sends_{0};
  std::vector<Box> boxes_;
};

struct GreedyRun {
  Tensor prefill;                    // (1, 3, V): every prompt position's logits
  std::vector<Tensor> steps;         // (1, V) per generated token
  std::vector<std::int64_t> tokens;  // greedy
};

// A 3-token prefill then 6 greedy steps through the KV cache.
GreedyRun greedy(Model& m) {
  GreedyRun r;
  KVCache cache(m.config(), 1, 16);
  r.prefill = m.decode_cached(Tensor::from_ints({2, 11, 17}, {1, 3}), {0}, cache, true);
  Tensor logits = squeeze(slice(r.prefill, 1, 2, 3), 1);
  for (int step = 0; step < 6; ++step) {
    const auto v = logits.to_floats();
    r.tokens.push_back(static_cast<std::int64_t>(std::max_element(v.begin(), v.end()) - v.begin()));
    logits = m.decode_cached(Tensor::from_ints({r.tokens.back()}, {1, 1}), {0}, cache);
    r.steps.push_back(logits);
  }
  return r;
}

std::vector<const Family*> decoder_families() {
  std::vector<const Family*> out;
  for (const Family& f : model_families()) {
    const ModelConfig c = f.schema.base;
    if (c.architecture == Architecture::decoder_only && c.head == HeadKind::lm && !c.retrieval.enabled()) out.push_back(&f);
  }
  return out;
}

}  // namespace

TEST(PipelineParallel, EveryDecoderFamilysStagesGiveTheWholeModelsLogitsBitForBit) {
  const auto families = decoder_families();
  ASSERT_GE(families.size(), 4u) << "gpt2, llama, mistral, qwen2 at least";
  for (const Family* f : families) {
    SCOPED_TRACE(f->model_type);
    ModelConfig c = test::small_family_config(*f, 4, 2, 2);
    c.n_layers = 5;
    Model whole = Model::create(c, 9);
    const GreedyRun want = greedy(whole);
    for (const int stages : {2, 3}) {
      Mailboxes mail(stages);
      std::vector<std::thread> threads;
      std::vector<std::string> errors(static_cast<std::size_t>(stages));
      std::vector<GreedyRun> got(static_cast<std::size_t>(stages));
      std::vector<std::int64_t> layers(static_cast<std::size_t>(stages));
      for (int s = 0; s < stages; ++s)
        threads.emplace_back([&, s] {
          try {
            Model stage = Model::from_parameters(c, whole.parameters());
            stage.shard_pipeline(s, stages, mail.comm_for(s));
            layers[static_cast<std::size_t>(s)] = stage.config().n_layers;
            got[static_cast<std::size_t>(s)] = greedy(stage);
          } catch (const std::exception& e) {
            errors[static_cast<std::size_t>(s)] = e.what();
          }
        });
      for (auto& t : threads) t.join();
      std::int64_t total = 0;
      for (int s = 0; s < stages; ++s) {
        const auto i = static_cast<std::size_t>(s);
        ASSERT_EQ(errors[i], "") << "stage " << s << " of " << stages;
        EXPECT_EQ(layers[i], pipeline_layers(5, s, stages).second - pipeline_layers(5, s, stages).first);
        total += layers[i];
        EXPECT_EQ(got[i].tokens, want.tokens) << "stage " << s << " of " << stages;
        test::expect_bitwise_equal(got[i].prefill, want.prefill, "prefill logits");
        for (std::size_t k = 0; k < want.steps.size(); ++k)
          test::expect_bitwise_equal(got[i].steps[k], want.steps[k], "step " + std::to_string(k));
      }
      EXPECT_EQ(total, 5);
    }
  }
}

// run(stage) on every stage of `whole` split over `stages` threads (talking through mail):
// each stage's results equal want bit for bit.
template <class F>
void expect_every_stage_gives(const std::vector<Tensor>& want, const ModelConfig& c, const Model& whole, int stages,
                              Mailboxes& mail, F run) {
  std::vector<std::vector<Tensor>> got(static_cast<std::size_t>(stages));
  std::vector<std::thread> threads;
  for (int s = 0; s < stages; ++s)
    threads.emplace_back([&, s] {
      Model stage = Model::from_parameters(c, whole.parameters());
      stage.shard_pipeline(s, stages, mail.comm_for(s));
      got[static_cast<std::size_t>(s)] = run(stage);
    });
  for (auto& t : threads) t.join();
  for (int s = 0; s < stages; ++s) {
    ASSERT_EQ(got[static_cast<std::size_t>(s)].size(), want.size()) << "stage " << s << " of " << stages;
    for (std::size_t k = 0; k < want.size(); ++k)
      test::expect_bitwise_equal(got[static_cast<std::size_t>(s)][k], want[k],
                                 "stage " + std::to_string(s) + " of " + std::to_string(stages) + ", call " + std::to_string(k));
  }
}

namespace {

// Training mode, gradients on every parameter, and one dropout seed for a whole model and its stages.
void train_mode(Model& m) {
  for (auto& [name, p] : m.parameters()) p.requires_grad_(true);
  m.set_training(true);
  m.set_dropout_seed(3, 1);
}

// The 2 stages of the model Model::create(c, seed) makes, in training mode.
std::vector<Model> training_stages(const ModelConfig& c, std::uint64_t seed, Mailboxes& mail) {
  std::vector<Model> stages;
  for (int s = 0; s < 2; ++s) {
    stages.push_back(Model::from_parameters(c, Model::create(c, seed).parameters()));
    stages.back().shard_pipeline(s, 2, mail.comm_for(s));
    train_mode(stages.back());
  }
  return stages;
}

}  // namespace

// Batched decoding (5 rows in shuffled slots): every row gets what the whole model gives it.
TEST(PipelineParallel, BatchedRowsGetTheWholeModelsLogits) {
  ModelConfig c = test::small_family_config(model_family("gpt2"), 4, 4, 2);
  c.n_layers = 4;
  Model whole = Model::create(c, 4);
  const Tensor ids = Tensor::from_ints({2, 11, 17, 5, 9, 30, 7, 7, 1, 3, 8, 12, 40, 41, 42}, {5, 3});
  const std::vector<std::int64_t> slots{4, 0, 3, 1, 2};
  auto batch = [&](Model& m) {
    KVCache cache(m.config(), 5, 16);
    std::vector<Tensor> out{m.decode_cached(ids, slots, cache, true)};
    out.push_back(m.decode_cached(Tensor::from_ints({3, 4, 5, 6, 7}, {5, 1}), slots, cache));
    return out;
  };
  const auto want = batch(whole);
  for (const int stages : {2, 3}) {
    Mailboxes mail(stages);
    expect_every_stage_gives(want, c, whole, stages, mail, batch);
  }
}

// A prefill of many rows goes through the stages in micro-batches (min(rows, stages) groups
// of rows, so that the stages overlap), and a long prompt of one row in chunks of its tokens
// (each attending to the chunks before it through the cache), one hand-on per micro-batch and
// stage boundary; no micro-batch under 32 tokens, and a decode step of a few rows in one pass
// (a second pass over the weights would cost more than the overlap gains). Every result is
// the whole model's, bit for bit.
TEST(PipelineParallel, PrefillsGoThroughTheStagesInMicroBatches) {
  ModelConfig c = test::small_family_config(model_family("llama"), 4, 2, 2);
  c.n_layers = 3;
  c.max_positions = 128;
  Model whole = Model::create(c, 6);
  const auto tokens = [&](std::int64_t rows, std::int64_t n) {
    std::vector<std::int64_t> v;
    for (std::int64_t i = 0; i < rows * n; ++i) v.push_back((i * 7 + 3) % c.vocab_size);
    return Tensor::from_ints(v, {rows, n});
  };
  const std::vector<std::int64_t> slots{3, 0, 4, 1, 2};
  const Tensor step = Tensor::from_ints({3, 4, 5, 6, 7}, {5, 1});
  auto run = [&](Model& m) {
    KVCache cache(m.config(), 5, 128);
    std::vector<Tensor> out{m.decode_cached(tokens(5, 40), slots, cache, true)};  // 5 rows of 40
    out.push_back(m.decode_cached(step, slots, cache));                            // 5 tokens: one pass
    out.push_back(m.decode_cached(tokens(1, 50), {slots[0]}, cache, true));        // one row of 50
    out.push_back(m.decode_cached(tokens(1, 70), {slots[1]}, cache));              // one row of 70, its last logits
    return out;
  };
  const auto want = run(whole);
  for (const int stages : {2, 3}) {
    Mailboxes mail(stages);
    expect_every_stage_gives(want, c, whole, stages, mail, run);
    // Micro-batches: the rows min(5, stages) groups; the step one; 50 tokens one (25 < 32 a
    // chunk); 70 tokens two chunks of 35 (three would be 23).
    const std::int64_t passes = std::min(5, stages) + 1 + 1 + 2;
    EXPECT_EQ(mail.sends(), (stages - 1) * passes) << stages << " stages";
  }
}

// Every encoder-decoder family (text and speech, T5's relative bias stored in block 0 too)
// split into 2 and 3 stages (4 encoder and 3 decoder layers: uneven): encode_to_cache runs the
// encoder through the stages and gives every stage the memory, whose cross-attention layers
// read it; then a prefill, greedy steps and a second source (Fusion-in-Decoder's parts) give
// every stage the whole model's logits bit for bit, and each stage holds its layers only; the
// full forward (evaluation) too.
TEST(PipelineParallel, EveryEncoderDecoderFamilysStagesGiveTheWholeModelsLogitsBitForBit) {
  int families = 0;
  for (const Family& f : model_families()) {
    if (f.schema.base.architecture != Architecture::encoder_decoder) continue;
    ++families;
    SCOPED_TRACE(f.model_type);
    ModelConfig c = test::small_family_config(f, 4, 2, 3);
    c.n_layers = 4;
    c.n_decoder_layers = 3;
    const Model whole = Model::create(c, 12);
    const bool audio = c.reads_audio();
    auto run = [&](Model& m) {
      KVCache cache(m.config(), 2, 16, 2, audio ? c.max_source_positions : 8);
      ModelInputs src;
      if (audio) src.input_features = Tensor::randn({1, c.num_mel_bins, 2 * c.max_source_positions - 1}, 3);
      else src.input_ids = Tensor::from_ints({5, 9, 13, 7, 3}, {1, 5});
      m.encode_to_cache(src, cache, 0);
      if (audio) m.encode_to_cache(src, cache, 1);
      else m.encode_parts_to_cache({Tensor::from_ints({4, 6}, {1, 2}), Tensor::from_ints({8, 10, 12}, {1, 3})}, cache, 1);
      cache.bind_source(1, 1);
      std::vector<Tensor> out{m.decode_cached(Tensor::from_ints({2, 11, 17, 2, 5, 6}, {2, 3}), {0, 1}, cache, true)};
      Tensor logits = out.back();
      for (int step = 0; step < 4; ++step) {
        std::vector<std::int64_t> next;
        for (std::int64_t r = 0; r < 2; ++r) {
          const auto v = squeeze(slice(slice(logits, 0, r, r + 1), 1, logits.dim() == 3 ? logits.size(1) - 1 : 0,
                                       logits.dim() == 3 ? logits.size(1) : 1), 1).to_floats();
          next.push_back(static_cast<std::int64_t>(std::max_element(v.begin(), v.end()) - v.begin()));
        }
        logits = m.decode_cached(Tensor::from_ints(next, {2, 1}), {0, 1}, cache);
        out.push_back(logits);
      }
      return out;
    };
    Model copy = Model::from_parameters(c, whole.parameters());
    const auto want = run(copy);
    for (const int stages : {2, 3}) {
      Mailboxes mail(stages);
      expect_every_stage_gives(want, c, whole, stages, mail, run);
      Model stage = Model::from_parameters(c, whole.parameters());
      stage.shard_pipeline(stages - 1, stages, mail.comm_for(stages - 1));
      EXPECT_EQ(stage.config().n_layers, pipeline_layers(4, stages - 1, stages).second - pipeline_layers(4, stages - 1, stages).first);
      EXPECT_EQ(stage.config().decoder_layers(),
                pipeline_layers(3, stages - 1, stages).second - pipeline_layers(3, stages - 1, stages).first);
    }
    // The full forward (evaluation): the encoder, then the decoder through the stages, padded
    // rows on both sides; every stage gets the whole model's logits.
    auto full = [&](Model& m) {
      m.set_training(false);
      ModelInputs in;
      if (audio) {
        in.input_features = Tensor::randn({2, c.num_mel_bins, 2 * c.max_source_positions - 1}, 5);
      } else {
        in.input_ids = Tensor::from_ints({5, 9, 13, 7, 3, 4, 6, 8, 0, 0}, {2, 5});
        in.valid_lens = Tensor::from_ints({5, 3}, {2});
      }
      in.decoder_input_ids = Tensor::from_ints({2, 11, 17, 2, 5, 0}, {2, 3});
      in.decoder_valid_lens = Tensor::from_ints({3, 2}, {2});
      return std::vector<Tensor>{m.forward(in).logits};
    };
    Model eval_copy = Model::from_parameters(c, whole.parameters());
    const auto want_full = full(eval_copy);
    for (const int stages : {2, 3}) {
      Mailboxes mail(stages);
      expect_every_stage_gives(want_full, c, whole, stages, mail, full);
    }
  }
  EXPECT_GE(families, 3) << "t5, marian and whisper at least";
}

// Every encoder-only family (text and pictures) split into 2 and 3 stages of 4 layers: forward()
// encodes through the stages and gives every stage the whole model's outputs bit for bit (the
// encoder's hidden states and every head's logits), padded rows too.
TEST(PipelineParallel, EveryEncoderFamilysStagesGiveTheWholeModelsOutputsBitForBit) {
  int families = 0;
  for (const Family& f : model_families()) {
    const ModelConfig& base = f.schema.base;
    if (base.architecture != Architecture::encoder_only || base.text_tower.enabled()) continue;
    ++families;
    SCOPED_TRACE(f.model_type);
    ModelConfig c = test::small_family_config(f, 4, 4, 2);
    c.n_layers = 4;
    const Model whole = Model::create(c, 13);
    ModelInputs in;
    if (c.reads_images()) {
      in.pixel_values = Tensor::randn({2, c.num_channels, c.image_size, c.image_size}, 3);
    } else {
      in.input_ids = Tensor::from_ints({3, 4, 5, 6, 9, 11, 4, 3, 8, 12, 0, 0}, {2, 6});
      in.valid_lens = Tensor::from_ints({6, 4}, {2});
    }
    auto run = [&](Model& m) {
      NoGradGuard ng;
      const ModelOutputs o = m.forward(in);
      std::vector<Tensor> out{o.hidden};
      for (const Tensor* t : {&o.logits, &o.cls_logits, &o.distillation_logits})
        if (t->defined()) out.push_back(*t);
      return out;
    };
    Model copy = Model::from_parameters(c, whole.parameters());
    const auto want = run(copy);
    ASSERT_GE(want.size(), 2u) << "a head's output";
    for (const int stages : {2, 3}) {
      Mailboxes mail(stages);
      expect_every_stage_gives(want, c, whole, stages, mail, run);
    }
  }
  EXPECT_GE(families, 2) << "bert and vit at least";
}

TEST(PipelineParallel, StagesTakeContiguousLayersTheFirstOnesOneMore) {
  EXPECT_EQ(pipeline_layers(5, 0, 3), std::make_pair(std::int64_t{0}, std::int64_t{2}));
  EXPECT_EQ(pipeline_layers(5, 1, 3), std::make_pair(std::int64_t{2}, std::int64_t{4}));
  EXPECT_EQ(pipeline_layers(5, 2, 3), std::make_pair(std::int64_t{4}, std::int64_t{5}));
  EXPECT_EQ(pipeline_layers(4, 1, 2), std::make_pair(std::int64_t{2}, std::int64_t{4}));
  const ModelConfig c = test::small_family_config(model_family("llama"), 4, 2, 2);
  EXPECT_EQ(pipeline_config(c, 1, 2).n_layers, 1);
  // A stage's parameters: its layers under the names of a model of that many layers.
  Model m = Model::create(c, 2);
  Mailboxes mail(2);
  m.shard_pipeline(1, 2, mail.comm_for(1));
  EXPECT_EQ(m.parameters().count("model.layers.0.mlp.down_proj.weight"), 1u);
  EXPECT_EQ(m.parameters().count("model.layers.1.mlp.down_proj.weight"), 0u);
  EXPECT_EQ(m.pipeline_stage(), 1);
  EXPECT_EQ(m.pipeline_stages(), 2);
  EXPECT_EQ(m.pipeline_global_name("model.layers.0.mlp.down_proj.weight"), "model.layers.1.mlp.down_proj.weight");
  EXPECT_TRUE(m.pipeline_shared("model.embed_tokens.weight"));
  EXPECT_FALSE(m.pipeline_shared("model.layers.0.mlp.down_proj.weight"));
  EXPECT_EQ(m.pipeline_whole_config().n_layers, 2);
}

// decode() on a decoder's stages (embeddings of a decoder-only model): every stage gets the
// whole model's last hidden states, padded rows too.
TEST(PipelineParallel, DecodeOnStagesGivesEveryStageTheWholeModelsHiddenStates) {
  ModelConfig c = test::small_family_config(model_family("llama"), 4, 2, 2);
  c.n_layers = 3;
  Model whole = Model::create(c, 6);
  ModelInputs in;
  in.input_ids = Tensor::from_ints({2, 11, 17, 5, 9, 0}, {2, 3});
  in.valid_lens = Tensor::from_ints({3, 2}, {2});
  auto run = [&](Model& m) {
    NoGradGuard ng;
    return std::vector<Tensor>{m.decode(in, Tensor())};
  };
  Model copy = Model::from_parameters(c, whole.parameters());
  const auto want = run(copy);
  for (const int stages : {2, 3}) {
    Mailboxes mail(stages);
    expect_every_stage_gives(want, c, whole, stages, mail, run);
  }
}

// forward() on stages in lockstep (evaluation): every stage gets the whole model's logits.
TEST(PipelineParallel, ForwardOnStagesGivesEveryStageTheWholeModelsLogits) {
  ModelConfig c = test::small_family_config(model_family("llama"), 4, 2, 2);
  c.n_layers = 3;
  Model whole = Model::create(c, 6);
  ModelInputs in;
  in.input_ids = Tensor::from_ints({2, 11, 17, 5, 9, 30}, {2, 3});
  Tensor want;
  {
    NoGradGuard ng;
    want = whole.forward(in).logits;
  }
  Mailboxes mail(3);
  std::vector<Tensor> got(3);
  std::vector<std::thread> threads;
  for (int s = 0; s < 3; ++s)
    threads.emplace_back([&, s] {
      Model stage = Model::from_parameters(c, whole.parameters());
      stage.shard_pipeline(s, 3, mail.comm_for(s));
      got[static_cast<std::size_t>(s)] = stage.forward(in).logits;
    });
  for (auto& t : threads) t.join();
  for (int s = 0; s < 3; ++s) test::expect_bitwise_equal(got[static_cast<std::size_t>(s)], want, "stage " + std::to_string(s));
}

// Attention captured on stages (a decoder-only, an encoder-only and an encoder-decoder
// family): each stage records its layers, and forward() hands every stage's to all of them in
// one process's order, so each stage holds the whole model's maps bit for bit.
TEST(PipelineParallel, StagesCaptureTheWholeModelsAttention) {
  for (const char* type : {"llama", "bert", "t5", "whisper"}) {
    SCOPED_TRACE(type);
    ModelConfig c = test::small_family_config(model_family(type), 4, 2, 2);
    c.n_layers = 3;
    if (c.architecture == Architecture::encoder_decoder) c.n_decoder_layers = 2;
    const Model whole = Model::create(c, 5);
    auto capture = [&](Model& m) {
      m.set_training(false);
      ModelInputs in;
      if (c.reads_audio()) in.input_features = Tensor::randn({1, c.num_mel_bins, 2 * c.max_source_positions - 1}, 3);
      else in.input_ids = Tensor::from_ints({5, 9, 13, 7, 3, 4, 6, 8}, {2, 4});
      if (c.architecture == Architecture::encoder_decoder)
        in.decoder_input_ids = Tensor::from_ints({2, 11, 17, 2, 5, 6}, {in.input_ids.defined() ? 2 : 1, in.input_ids.defined() ? 3 : 6});
      std::vector<AttentionMap> maps;
      NoGradGuard no_grad;
      m.set_attention_capture(&maps);
      m.forward(in);
      m.set_attention_capture(nullptr);
      std::vector<Tensor> out;
      for (const AttentionMap& a : maps) {  // where each map comes from, then its weights
        out.push_back(Tensor::from_floats({a.stack == "encoder" ? 0.0f : 1.0f, a.kind == "self" ? 0.0f : 1.0f,
                                           static_cast<float>(a.layer)}, {3}));
        out.push_back(contiguous(a.weights));
      }
      return out;
    };
    Model copy = Model::from_parameters(c, whole.parameters());
    const auto want = capture(copy);
    ASSERT_FALSE(want.empty());
    Mailboxes mail(2);
    expect_every_stage_gives(want, c, whole, 2, mail, capture);
  }
}

// Training a stage: the stages' forward_stage calls chained by hand (with the dropout stream's
// position handed on), and the backward passes chained back, give the whole model's loss and
// every parameter's gradient bit for bit, with every dropout and stochastic depth on.
TEST(PipelineParallel, ChainedStagesTrainAsTheWholeModelBitForBit) {
  ModelConfig c = test::small_family_config(model_family("llama"), 4, 2, 2);
  c.n_layers = 4;
  c.dropout = 0.2;
  c.attention_dropout = 0.2;
  c.embedding_dropout = 0.1;
  c.stochastic_depth = 0.3;
  ModelInputs in;
  in.input_ids = Tensor::from_ints({2, 11, 17, 5, 9, 30, 7, 7}, {2, 4});
  const Tensor weights = Tensor::randn({2, 4, c.vocab_size}, 5);
  Model whole = Model::create(c, 8);
  train_mode(whole);
  const Tensor want = sum(mul(whole.forward(in).logits, weights));
  backward(want);
  Mailboxes mail(2);  // (not used: the test hands the tensors on itself)
  std::vector<Model> stages = training_stages(c, 8, mail);
  // A tape per stage, as the stages' own threads would have.
  autograd::Tape first, second;
  Model::StreamPosition at;
  Tensor hidden, received, got;
  {
    autograd::TapeScope scope(first);
    hidden = stages[0].forward_stage(in, Tensor(), at);
  }
  received = hidden.clone();
  received.requires_grad_(true);
  {
    autograd::TapeScope scope(second);
    got = sum(mul(stages[1].forward_stage(in, received, at), weights));
    test::expect_bitwise_equal(got, want, "loss");
    backward(got);
  }
  {
    autograd::TapeScope scope(first);
    backward(hidden, received.grad());
  }
  // A layer's gradient lives on its stage; one outside the layers (untied here) on the one stage
  // that uses it: the embedding on the first, the final norm and head on the last.
  std::map<std::string, int> holders;
  for (const Model& st : stages)
    for (const auto& [name, p] : st.parameters()) {
      const std::string global = st.pipeline_global_name(name);
      if (st.pipeline_shared(name) && !p.grad().defined()) continue;  // the other stage's end of the model
      ++holders[global];
      test::expect_bitwise_equal(p.grad(), whole.parameters().at(global).grad(), global);
    }
  EXPECT_EQ(holders.size(), whole.parameters().size());
  for (const auto& [global, n] : holders) EXPECT_EQ(n, 1) << global;
}

// Training an encoder-decoder's stages (every family, text and speech, every dropout on): the
// encoder's encode_stage calls chained by hand, then the decoder's decode_stage calls reading
// copies of the memory, and the backward passes chained back (the memory's gradient summed from
// the last decoder stage down, then through the encoder's stages) give the whole model's loss
// and each parameter's gradient bit for bit; a parameter two stages use (a head tied to the
// embedding) within 1e-6 once its stages' parts are added.
TEST(PipelineParallel, ChainedEncoderDecoderStagesTrainAsTheWholeModel) {
  int families = 0;
  for (const Family& f : model_families()) {
    if (f.schema.base.architecture != Architecture::encoder_decoder) continue;
    ++families;
    SCOPED_TRACE(f.model_type);
    ModelConfig c = test::small_family_config(f, 4, 2, 2);
    c.n_layers = 3;
    c.n_decoder_layers = 2;
    c.dropout = 0.2;
    c.attention_dropout = 0.2;
    c.stochastic_depth = 0.3;
    ModelInputs in;
    if (c.reads_audio()) {
      in.input_features = Tensor::randn({2, c.num_mel_bins, 2 * c.max_source_positions - 1}, 3);
    } else {
      in.input_ids = Tensor::from_ints({5, 9, 13, 7, 3, 4, 6, 8, 0, 0}, {2, 5});
      in.valid_lens = Tensor::from_ints({5, 3}, {2});
    }
    in.decoder_input_ids = Tensor::from_ints({2, 11, 17, 2, 5, 0}, {2, 3});
    in.decoder_valid_lens = Tensor::from_ints({3, 2}, {2});
    const Tensor weights = Tensor::randn({2, 3, c.vocab_size}, 5);
    Model whole = Model::create(c, 8);
    train_mode(whole);
    const Tensor want = sum(mul(whole.forward(in).logits, weights));
    backward(want);
    Mailboxes mail(2);  // (not used: the test hands the tensors on itself)
    std::vector<Model> stages = training_stages(c, 8, mail);
    const auto leaf = [](const Tensor& t) {
      Tensor copy = t.clone();
      copy.requires_grad_(true);
      return copy;
    };
    autograd::Tape enc0, enc1, dec0, dec1;  // a tape per stage and stack
    Model::StreamPosition at;
    Tensor hidden, memory, decoded, got;
    {
      autograd::TapeScope scope(enc0);
      hidden = stages[0].encode_stage(in, Tensor(), at);
    }
    const Tensor enc_received = leaf(hidden);
    {
      autograd::TapeScope scope(enc1);
      memory = stages[1].encode_stage(in, enc_received, at);
    }
    const Tensor memory0 = leaf(memory), memory1 = leaf(memory);
    at = {};
    {
      autograd::TapeScope scope(dec0);
      decoded = stages[0].decode_stage(in, Tensor(), memory0, at);
    }
    const Tensor dec_received = leaf(decoded);
    {
      autograd::TapeScope scope(dec1);
      got = sum(mul(stages[1].decode_stage(in, dec_received, memory1, at), weights));
      test::expect_bitwise_equal(got, want, "loss");
      backward(got);
    }
    autograd::accumulate(memory0, memory1.grad());  // the later layers' part of the memory's gradient first
    {
      autograd::TapeScope scope(dec0);
      backward(decoded, dec_received.grad());
    }
    {
      autograd::TapeScope scope(enc1);
      backward(memory, memory0.grad());
    }
    {
      autograd::TapeScope scope(enc0);
      backward(hidden, enc_received.grad());
    }
    std::map<std::string, std::vector<Tensor>> parts;  // whole model's name -> the stages' gradients
    for (const Model& st : stages)
      for (const auto& [name, p] : st.parameters())
        if (!st.pipeline_shared(name) || p.grad().defined()) parts[st.pipeline_global_name(name)].push_back(p.grad());
    for (const auto& [global, grads] : parts) {
      const Tensor& w = whole.parameters().at(global).grad();
      if (grads.size() == 1) {
        test::expect_bitwise_equal(grads[0], w, global);
      } else {
        Tensor total = grads[0];
        for (std::size_t i = 1; i < grads.size(); ++i) total = add(total, grads[i]);
        test::expect_close(total, w, 1e-6, 1e-7, global);
      }
    }
    EXPECT_EQ(parts.size(), whole.parameters().size());
  }
  EXPECT_GE(families, 3) << "t5, marian and whisper at least";
}

TEST(PipelineParallel, WhatCannotBeSplitIsRefusedWithTheReasonAndAStageSplitsIntoShards) {
  Mailboxes mail(3);
  const ModelConfig llama = test::small_family_config(model_family("llama"), 4, 2, 2);
  Model two_layers = Model::create(llama, 1);
  EXPECT_NE(test::error_message([&] { two_layers.shard_pipeline(0, 3, mail.comm_for(0)); }).find("2 layers cannot make 3 stages"),
            std::string::npos);
  ModelConfig classifier = llama;
  classifier.head = HeadKind::classifier;
  classifier.num_labels = 2;
  Model gpt_classifier = Model::create(classifier, 1);
  EXPECT_NE(test::error_message([&] { gpt_classifier.shard_pipeline(0, 2, mail.comm_for(0)); })
                .find("(this one is a decoder_only model with a classifier head)"),
            std::string::npos);
  ModelConfig t5_config = test::small_family_config(model_family("t5"), 4, 4, 2);
  t5_config.n_decoder_layers = 1;
  Model t5 = Model::create(t5_config, 1);
  EXPECT_NE(test::error_message([&] { t5.shard_pipeline(0, 2, mail.comm_for(0)); }).find("2 encoder and 1 decoder layers cannot make 2 stages"),
            std::string::npos);
  Model tp = Model::create(llama, 1);
  tp.shard_tensor_parallel(0, 2, [](Tensor&) {});
  EXPECT_NE(test::error_message([&] { tp.shard_pipeline(0, 2, mail.comm_for(0)); }).find("tensor-parallel shard"),
            std::string::npos);
  // The other order composes: a stage splits into shards of its layers (run under mpirun by
  // tests/cli/mpi_model_parallel.sh and mpi_pipeline_parallel_train.sh).
  Model pp = Model::create(llama, 1);
  pp.shard_pipeline(0, 2, mail.comm_for(0));
  pp.shard_tensor_parallel(0, 2, [](Tensor&) {});
  EXPECT_EQ(pp.config().n_layers, 1);
  EXPECT_EQ(pp.config().n_heads, llama.n_heads / 2);
  EXPECT_EQ(pp.pipeline_whole_config().n_heads, llama.n_heads);
  EXPECT_EQ(pp.tensor_parallel_whole_config().n_layers, 1);  // the stage's
  Model none = Model::create(llama, 1);
  EXPECT_NE(test::error_message([&] { none.shard_pipeline(0, 2, Model::PipeComm{}); }).find("no functions"), std::string::npos);
}
