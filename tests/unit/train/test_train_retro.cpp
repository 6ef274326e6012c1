// Training a RETRO model (model_type "retro"): neighbours come from the training split with the
// sequence's own text excluded, the chunk database is written beside the weights and loaded
// with them (generation retrieves from it), data.retrieval_db "train+val" adds the held-out
// text, and no_retrieval (tfm train --no-retrieval) trains the same decoder without it.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "support/test_support.h"
#include "support/train_helpers.h"
#include "tfm/tfm.h"
#include "tfm/train.h"

using namespace tfm;
namespace fs = std::filesystem;
using namespace tfm::train_test;

namespace {

TrainConfig tiny_retro_lm(const std::string& dir, const std::string& db = "train") {
  const char* src = std::getenv("TFM_SOURCE_DIR");
  const std::string text = read_file(std::string(src ? src : ".") + "/data/tinyshakespeare.txt").substr(0, 30000);
  write_file_atomic(dir + "/text.txt", text);
  return parse_train_config(R"({"seed": 3,
    "model": {"model_type": "retro", "d_model": 32, "n_heads": 2, "n_layers": 2, "d_ff": 64, "max_positions": 32,
              "dropout": 0.0, "attention_dropout": 0.0, "embedding_dropout": 0.0,
              "retrieval": {"chunk_size": 8, "neighbours": 2, "layers": [1], "encoder_layers": 1, "embedding_dim": 64}},
    "data": {"train": ")" + dir + R"(/text.txt", "block_size": 32, "retrieval_db": ")" + db + R"("},
    "optimizer": {"lr": 0.005},
    "training": {"batch_size": 4, "max_steps": 4},
    "eval": {"every": 4, "batches": 1, "log_every": 2},
    "sample": {"prompt": "ROMEO:", "tokens": 20}})", "retro.json");
}

}  // namespace

TEST(TrainRetro, WritesItsChunkDatabaseAndGeneratesFromIt) {
  const std::string dir = tmp_dir("retro");
  TrainOptions o;
  o.quiet = true;
  o.out_dir = dir + "/model";
  const TrainResult r = run_training(tiny_retro_lm(dir), o);
  ASSERT_EQ(r.losses.size(), 4u);
  EXPECT_TRUE(std::isfinite(r.val_loss));
  EXPECT_EQ(r.sample.rfind("ROMEO:", 0), 0u) << r.sample;
  ASSERT_TRUE(fs::exists(o.out_dir + "/retrieval_db.safetensors"));
  ASSERT_TRUE(fs::exists(o.out_dir + "/checkpoint/retrieval_db.safetensors"));
  LoadedModel lm = load_model_dir(o.out_dir);
  EXPECT_TRUE(lm.model.has_retriever());
  // The database holds the training split: 90% of the text's characters.
  const ChunkDatabase db = ChunkDatabase::load(o.out_dir + "/retrieval_db.safetensors", lm.config.retrieval);
  EXPECT_EQ(static_cast<std::int64_t>(db.tokens().size()), 30000 - static_cast<std::int64_t>(30000 * 0.1));
  // The loaded model reads the neighbours its database gives (its retriever is that database).
  {
    NoGradGuard ng;
    std::vector<std::int64_t> ids;
    for (std::int64_t i = 0; i < 24; ++i) ids.push_back(db.tokens()[static_cast<std::size_t>(1000 + i)]);
    ModelInputs in;
    in.input_ids = Tensor::from_ints(ids, {1, 24});
    const Tensor via_retriever = lm.model.forward(in).logits;
    in.neighbours = reshape(db.search(Tensor::from_ints(std::vector<std::int64_t>(ids.begin(), ids.begin() + 16), {2, 8})),
                            {1, 2, 2, 16});
    test::expect_bitwise_equal(lm.model.forward(in).logits, via_retriever, "explicit neighbours");
  }
  // tfm eval scores the held-out split with it.
  const EvalReport rep = evaluate_model_dir(o.out_dir, EvalOptions{});
  EXPECT_TRUE(std::isfinite(rep.metrics.at("loss")));
  EXPECT_LT(rep.metrics.at("loss"), 4.5);

  // With the held-out text in the database (the leak) the stream is the whole text.
  TrainOptions leak = o;
  leak.out_dir = dir + "/leak";
  (void)run_training(tiny_retro_lm(dir, "train+val"), leak);
  EXPECT_EQ(ChunkDatabase::load(leak.out_dir + "/retrieval_db.safetensors", lm.config.retrieval).tokens().size(), 30000u);

  // --no-retrieval: the same decoder, without chunked cross-attention, encoder or database.
  TrainConfig plain = tiny_retro_lm(dir);
  plain.no_retrieval = true;
  TrainOptions po = o;
  po.out_dir = dir + "/plain";
  (void)run_training(plain, po);
  EXPECT_FALSE(fs::exists(po.out_dir + "/retrieval_db.safetensors"));
  const LoadedModel p = load_model_dir(po.out_dir);
  EXPECT_FALSE(p.config.retrieval.enabled());
  for (const auto& [name, t] : p.model.parameters()) {
    EXPECT_EQ(name.find("cca"), std::string::npos) << name;
    EXPECT_NE(name.rfind("retriever.", 0), 0u) << name;
  }
  EXPECT_LT(p.model.parameters().size(), lm.model.parameters().size());
}

TEST(TrainRetro, NeighboursNeverComeFromTheSequenceItself) {
  // With the whole text in the database, a training sequence could read its own continuation;
  // the exclusion makes its neighbours come from elsewhere. Checked on the search the trainer
  // runs: a chunk's query with its sequence's span excluded never returns a chunk inside it.
  const std::vector<std::int32_t> text = [] {
    const char* src = std::getenv("TFM_SOURCE_DIR");
    const std::string t = read_file(std::string(src ? src : ".") + "/data/tinyshakespeare.txt").substr(0, 20000);
    return std::vector<std::int32_t>(t.begin(), t.end());
  }();
  RetrievalConfig rc;
  rc.chunk_size = 8;
  rc.layers = {0};
  rc.embedding_dim = 64;
  const ChunkDatabase db(text, rc);
  for (std::int64_t start : {0, 801, 5003, 19000 - 40}) {
    std::vector<std::int64_t> q(text.begin() + start, text.begin() + start + 8);
    std::vector<std::int64_t> pos;
    (void)db.search(Tensor::from_ints(q, {1, 8}), {{start, start + 33}}, &pos);
    for (std::int64_t p : pos) EXPECT_FALSE(p < start + 33 && p + 16 > start) << "neighbour at " << p << " for " << start;
    std::vector<std::int64_t> free_pos;
    (void)db.search(Tensor::from_ints(q, {1, 8}), {}, &free_pos);
    if (start % 8 == 0) {
      EXPECT_EQ(free_pos[0], start) << "unexcluded, an aligned chunk finds itself";
    }
  }
}
