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
#include "train/task.h"
#include "train/train_internal.h"

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
  // The trainer's own path: sequences from LmData (random shifts, so their chunks straddle the
  // database's) and training_neighbours over a database of the same stream. Unexcluded, a chunk's
  // best match is mostly the database chunk of its own text; excluded, no neighbour overlaps the
  // sequence's block + 1 tokens.
  const char* src = std::getenv("TFM_SOURCE_DIR");
  const std::string text = read_file(std::string(src ? src : ".") + "/data/tinyshakespeare.txt").substr(0, 20000);
  train_detail::TokenStore train(256);
  train.append(std::vector<std::int32_t>(text.begin(), text.end()));
  std::vector<std::int32_t> stream;
  for (std::int64_t i = 0; i < train.size(); ++i) stream.push_back(train[i]);
  const std::int64_t block = 32;
  train_detail::LmData data(std::move(train), train_detail::TokenStore(256), block, 11);
  RetrievalConfig rc;
  rc.chunk_size = 8;
  rc.layers = {0};
  rc.embedding_dim = 64;
  const ChunkDatabase db(stream, rc);
  Tensor x, y;
  std::vector<std::int64_t> starts, pos;
  data.train_batch(0, 16, x, y, &starts);
  const Tensor n = train_detail::training_neighbours(db, x, starts, block, &pos);
  ASSERT_EQ(n.shape(), (Shape{16, 3, 2, 16}));
  ASSERT_EQ(pos.size(), 16u * 3u * 2u);
  const auto overlaps = [&](std::int64_t p, std::int64_t start) { return p < start + block + 1 && p + 16 > start; };
  for (std::size_t i = 0; i < pos.size(); ++i)
    EXPECT_FALSE(overlaps(pos[i], starts[i / 6])) << "neighbour at " << pos[i] << " of the sequence at " << starts[i / 6];
  // Without the exclusion most of the same chunks would read their own text.
  const Tensor chunks = reshape(contiguous(slice(x, 1, 0, 24)), {48, 8});
  std::vector<std::int64_t> free_pos;
  (void)db.search(chunks, {}, &free_pos);
  std::size_t own = 0;
  for (std::size_t i = 0; i < free_pos.size(); i += 2) own += overlaps(free_pos[i], starts[i / 6]);
  EXPECT_GT(own, 24u) << "the exclusion is not what keeps the neighbours away";
}
