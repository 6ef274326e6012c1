// Knowledge distillation in tfm train: the "distill" config and its one-line errors, the
// teacher's terms inside Distiller::loss for all three families (masks, captured hidden
// states, projections), short runs whose loss falls, the projections kept out of the model
// but in the checkpoint, and resume equal to an uninterrupted run.
#include <gtest/gtest.h>

#include <filesystem>

#include "support/test_support.h"
#include "tfm/tfm.h"
#include "train/distill.h"
#include "support/train_helpers.h"

using namespace tfm;
using namespace tfm::train_test;
using namespace tfm::train_detail;
namespace fs = std::filesystem;

namespace {

std::string family_json(const std::string& arch, std::int64_t vocab, std::int64_t d_model, std::int64_t layers) {
  std::string j = R"({"architecture": ")" + arch + R"(", "vocab_size": )" + std::to_string(vocab) +
                  R"(, "d_model": )" + std::to_string(d_model) + R"(, "n_heads": 2, "n_layers": )" + std::to_string(layers) +
                  R"(, "d_ff": 32, "max_positions": 16, "dropout": 0, "attention_dropout": 0, "embedding_dropout": 0)";
  if (arch == "encoder_only") j += R"(, "head": "classifier", "num_labels": 3)";
  if (arch == "encoder_decoder") j += R"(, "n_decoder_layers": )" + std::to_string(layers);
  return j + "}";
}

Tokenizer small_tokenizer() {
  TokenizerTrainOptions o;
  o.kind = TokenizerKind::char_level;
  return Tokenizer::train({"the quick brown fox jumps over the lazy dog"}, o);
}

// One batch of two sequences of length 6: the second padded after 4 tokens.
struct Batch {
  ModelInputs in;
  Tensor targets;
};
Batch batch(const std::string& arch) {
  Batch b;
  b.in.input_ids = Tensor::from_ints({5, 9, 2, 7, 11, 3, 8, 1, 4, 6, 0, 0}, {2, 6}, DType::i64);
  if (arch == "decoder_only") {
    b.targets = Tensor::from_ints({9, 2, 7, 11, 3, 8, 1, 4, 6, 10, -100, -100}, {2, 6}, DType::i64);
  } else if (arch == "encoder_only") {
    b.in.valid_lens = Tensor::from_ints({6, 4}, {2}, DType::i64);
    b.targets = Tensor::from_ints({2, 0}, {2}, DType::i64);
  } else {
    b.in.valid_lens = Tensor::from_ints({6, 4}, {2}, DType::i64);
    b.in.decoder_input_ids = Tensor::from_ints({1, 4, 6, 8, 3, 1, 7, 2, 0, 0}, {2, 5}, DType::i64);
    b.targets = Tensor::from_ints({4, 6, 8, 3, 2, 7, 2, 2, -100, -100}, {2, 5}, DType::i64);
  }
  return b;
}

Tensor hard_loss(const Tensor& logits, const Tensor& targets) {
  if (logits.dim() == 2) return cross_entropy(logits, targets);
  return cross_entropy(reshape(logits, {-1, logits.size(-1)}), reshape(targets, {-1}));
}

}  // namespace

TEST(DistillConfig, ParsesPairsAndRejectsBadOnesInOneLine) {
  const TrainConfig c = parse_train_config(R"({"model": {}, "data": {"train": "x"},
    "distill": {"teacher": "t", "temperature": 3, "alpha": 0.7, "hidden": [[1, 2], ["enc.0", "dec.3"]], "hidden_weight": 0.5}})",
                                           "c.json");
  ASSERT_TRUE(c.distill);
  EXPECT_EQ(c.distill->teacher, "t");
  EXPECT_EQ(c.distill->temperature, 3.0);
  EXPECT_EQ(c.distill->alpha, 0.7);
  EXPECT_EQ(c.distill->hidden_weight, 0.5);
  ASSERT_EQ(c.distill->hidden.size(), 2u);
  EXPECT_FALSE(c.distill->hidden[0].first.stack_named);
  EXPECT_EQ(c.distill->hidden[0].second.index, 2);
  EXPECT_TRUE(c.distill->hidden[1].first.encoder);
  EXPECT_EQ(c.distill->hidden[1].second.name(), "dec.3");
  const std::vector<std::pair<std::string, std::string>> bad = {
      {R"({})", "distill.teacher"},
      {R"({"teacher": "t", "temp": 2})", "unknown key 'temp'"},
      {R"({"teacher": "t", "alpha": 1.5})", "distill.alpha"},
      {R"({"teacher": "t", "hidden": [[1]]})", "distill.hidden[0]"},
      {R"({"teacher": "t", "hidden": [["layer.1", 2]]})", "\"enc.N\""},
      {R"({"teacher": "t", "hidden": [[-1, 2]]})", "count from 0"},
  };
  for (const auto& [d, want] : bad) {
    const std::string e = expect_error([&] {
      parse_train_config(R"({"model": {}, "data": {"train": "x"}, "distill": )" + d + "}", "c.json");
    });
    EXPECT_NE(e.find(want), std::string::npos) << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  }
}

// Distiller::loss against the pieces computed by hand for each family: the teacher's logits
// and hidden states, the masks (padding rows of the targets; source positions past
// valid_lens), the projections (identity when widths agree, learned otherwise).
TEST(Distill, LossIsTheMixOfItsTermsInEveryFamily) {
  const std::string dir = tmp_dir("distill_family");
  const Tokenizer tok = small_tokenizer();
  for (const std::string arch : {"decoder_only", "encoder_only", "encoder_decoder"}) {
    const bool s2s = arch == "encoder_decoder";
    const ModelConfig tc = parse_model_config(family_json(arch, 32, 24, 3), "teacher");
    const ModelConfig sc = parse_model_config(family_json(arch, 32, 16, 2), "student");
    save_model_dir(dir + "/" + arch, Model::create(tc, 11), tok);
    DistillConfig dc;
    dc.teacher = dir + "/" + arch;
    dc.temperature = 2.0;
    dc.alpha = 0.4;
    dc.hidden_weight = 0.3;
    DistillLayer s1{s2s, s2s, 2}, t1{s2s, s2s, 3}, s2{false, s2s, 1}, t2{false, s2s, 2};
    dc.hidden = {{s1, t1}};
    if (arch != "encoder_only") dc.hidden.push_back({s2, t2});  // a decoder pair too
    const TaskKind task = arch == "decoder_only" ? TaskKind::lm : arch == "encoder_only" ? TaskKind::classifier : TaskKind::seq2seq;
    Distiller dist(dc, "c.json", task, sc, &tok, 6, 5);
    ASSERT_EQ(dist.parameters().size(), dc.hidden.size());
    EXPECT_EQ(dist.parameters().begin()->second.shape(), (Shape{24, 16})) << arch;
    EXPECT_NE(dist.summary().find("distill: teacher"), std::string::npos);

    Model student = Model::create(sc, 3);
    const Batch b = batch(arch);
    HiddenStates hs, th;
    student.set_hidden_capture(&hs);
    const ModelOutputs out = student.forward(b.in);
    student.set_hidden_capture(nullptr);
    ASSERT_EQ(hs.encoder.size(), arch == "decoder_only" ? 0u : 3u) << arch;
    ASSERT_EQ(hs.decoder.size(), arch == "encoder_only" ? 0u : 3u) << arch;
    const Tensor hard = hard_loss(out.logits, b.targets);
    const Tensor got = dist.loss(b.in, b.targets, out, hs, hard);

    LoadedModel t = load_model_dir(dc.teacher);
    t.model.set_hidden_capture(&th);
    Tensor tl;
    {
      NoGradGuard ng;
      tl = t.model.forward(b.in).logits;
    }
    const std::int64_t V = out.logits.size(-1);
    std::vector<float> counted;
    for (std::int64_t y : b.targets.to_ints()) counted.push_back(y == -100 ? 0.0f : 1.0f);
    const Tensor row_mask = Tensor::from_floats(counted, {static_cast<std::int64_t>(counted.size())});
    const Tensor soft = soft_target_loss(reshape(out.logits, {-1, V}), reshape(tl, {-1, V}), row_mask, 2.0);
    std::vector<Tensor> hidden;
    for (std::size_t i = 0; i < dc.hidden.size(); ++i) {
      const bool enc = arch == "encoder_only" || (s2s && i == 0);
      const Tensor& h_s = (enc ? hs.encoder : hs.decoder)[static_cast<std::size_t>(dc.hidden[i].first.index)];
      const Tensor& h_t = (enc ? th.encoder : th.decoder)[static_cast<std::size_t>(dc.hidden[i].second.index)];
      Tensor mask;
      if (enc) {
        std::vector<float> m(12, 1.0f);
        m[10] = m[11] = 0.0f;  // the second source's padding
        mask = Tensor::from_floats(m, {2, 6});
      } else {
        mask = reshape(row_mask, b.targets.shape());
      }
      hidden.push_back(hidden_mse(h_s, dist.parameters().at("distill.hidden." + std::to_string(i) + ".weight"), h_t, mask));
    }
    const Tensor want = mix_distill_loss(dc, soft, hard, hidden);
    EXPECT_NEAR(got.item(), want.item(), 1e-5 * std::abs(want.item())) << arch;
    EXPECT_GT(soft.item(), 0.0f);
    backward(got);
    EXPECT_TRUE(dist.parameters().begin()->second.grad().defined()) << "the projection gets a gradient";
  }
  fs::remove_all(dir);
}

// A teacher equal to the student (same weights, no dropout) adds nothing: the KL and the
// hidden MSE through identity projections vanish, leaving (1 - alpha) * hard.
TEST(Distill, TeacherEqualToStudentLeavesTheHardLoss) {
  const std::string dir = tmp_dir("distill_self");
  const Tokenizer tok = small_tokenizer();
  const ModelConfig c = parse_model_config(family_json("encoder_decoder", 32, 16, 2), "m");
  Model m = Model::create(c, 9);
  save_model_dir(dir, m, tok);
  DistillConfig dc;
  dc.teacher = dir;
  dc.alpha = 0.25;
  dc.hidden = {{{true, true, 2}, {true, true, 2}}, {{false, true, 1}, {false, true, 1}}};
  Distiller dist(dc, "c.json", TaskKind::seq2seq, c, &tok, 6, 1);
  const Batch b = batch("encoder_decoder");
  HiddenStates hs;
  m.set_hidden_capture(&hs);
  const ModelOutputs out = m.forward(b.in);
  m.set_hidden_capture(nullptr);
  const Tensor hard = hard_loss(out.logits, b.targets);
  EXPECT_NEAR(dist.loss(b.in, b.targets, out, hs, hard).item(), 0.75f * hard.item(), 1e-5);
}

namespace {

// A teacher LM trained for a few steps, and a narrower, shallower student config distilled
// from it (hidden: student layer 1 <- teacher layer 2, through a learned 24 -> 32 projection).
std::string train_teacher(const std::string& dir) {
  TrainConfig cfg = tiny_lm(dir);
  TrainOptions o;
  o.quiet = true;
  o.print_sample = false;
  o.out_dir = dir + "/teacher";
  run_training(cfg, o);
  return o.out_dir;
}

std::string student_json(const std::string& dir, const std::string& teacher, const std::string& extra = "",
                         const std::string& hidden = "[[1, 2]]") {
  return R"({"seed": 5, "model": {"architecture": "decoder_only", "d_model": 24, "n_heads": 2, "n_layers": 1,
    "d_ff": 48, "max_positions": 32, "dropout": 0.1},)" + extra + R"(
    "distill": {"teacher": ")" + teacher + R"(", "temperature": 2, "alpha": 0.5, "hidden": )" + hidden +
         R"(, "hidden_weight": 0.5},
    "data": {"train": ")" + dir + R"(/text.txt", "block_size": 32},
    "optimizer": {"lr": 0.005}, "training": {"batch_size": 8, "max_steps": 16, "label_smoothing": 0.05},
    "eval": {"every": 8, "batches": 2, "log_every": 4}, "sample": {"tokens": 0}})";
}

}  // namespace

TEST(Distill, LmRunLowersTheLossKeepsProjectionsOutOfTheModelAndResumesExactly) {
  const std::string dir = tmp_dir("distill_lm");
  const std::string teacher = train_teacher(dir);
  const TrainConfig cfg = parse_train_config(student_json(dir, teacher), "student.json");
  TrainOptions o;
  o.quiet = true;
  o.out_dir = dir + "/full";
  const TrainResult full = run_training(cfg, o);
  ASSERT_EQ(full.losses.size(), 16u);
  EXPECT_LT(full.losses[14] + full.losses[15], full.losses[0] + full.losses[1]) << "the loss did not fall";
  // The model directory is a plain student: no projection in it, loadable, the teacher's tokenizer.
  const LoadedModel m = load_model_dir(o.out_dir);
  EXPECT_EQ(m.config.n_layers, 1);
  for (const auto& [name, t] : load_safetensors(o.out_dir + "/model.safetensors").tensors)
    EXPECT_EQ(name.find("distill"), std::string::npos) << name;
  EXPECT_EQ(m.tokenizer.to_json(), load_model_dir(teacher).tokenizer.to_json());
  const auto extra = load_safetensors(o.out_dir + "/checkpoint/training_tensors.safetensors").tensors;
  ASSERT_EQ(extra.size(), 1u);
  EXPECT_EQ(extra.begin()->second.shape(), (Shape{32, 24}));
  // Interrupted at step 8 and resumed: the same losses and weights, bit for bit.
  const InterruptedRun part = train_interrupted(cfg, o, dir + "/part", 8);
  EXPECT_EQ(part.losses, full.losses);
  const auto w_full = load_safetensors(o.out_dir + "/checkpoint/training_tensors.safetensors").tensors;
  const auto w_part = load_safetensors(dir + "/part/checkpoint/training_tensors.safetensors").tensors;
  for (const auto& [name, t] : w_full) test::expect_bitwise_equal(w_part.at(name), t, name);

  // alpha 0 without hidden pairs is plain training: the same losses as without "distill".
  std::string plain = student_json(dir, teacher, "", "[]");
  const std::string alpha = R"("alpha": 0.5)";
  plain.replace(plain.find(alpha), alpha.size(), R"("alpha": 0)");
  TrainConfig no_kd = cfg;
  no_kd.distill.reset();
  TrainOptions p = o, q = o;
  p.out_dir = dir + "/alpha0";
  q.out_dir = dir + "/plain";
  p.max_steps = q.max_steps = 4;
  const TrainResult r0 = run_training(parse_train_config(plain, "plain.json"), p);
  no_kd.tokenizer_path = teacher + "/tokenizer.json";
  const TrainResult r1 = run_training(no_kd, q);
  EXPECT_EQ(r0.losses, r1.losses);

  // Activation checkpointing recomputes the layers whose outputs the hidden term reads: the
  // same losses, bit for bit.
  TrainConfig ck = cfg;
  ck.checkpoint_activations = true;
  TrainOptions c4 = o, p4 = o;
  c4.out_dir = dir + "/ckpt";
  p4.out_dir = dir + "/plain4";
  c4.max_steps = p4.max_steps = 4;
  EXPECT_EQ(run_training(ck, c4).losses, run_training(cfg, p4).losses);
  fs::remove_all(dir);
}

TEST(Distill, ConfigErrorsAreOneLineAndNameTheProblem) {
  const std::string dir = tmp_dir("distill_errors");
  const std::string teacher = train_teacher(dir);
  // Sequences of 64 tokens for a student with 64 positions; the teacher has learned ones for 32.
  std::string longer = student_json(dir, teacher);
  longer.replace(longer.find(R"("max_positions": 32)"), 19, R"("max_positions": 64)");
  longer.replace(longer.find(R"("block_size": 32)"), 16, R"("block_size": 64)");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {student_json(dir, dir + "/missing"), "is not a directory"},
      {student_json(dir, teacher, R"("tokenizer": {"kind": "word"},)"), "differs from the student's"},
      {student_json(dir, teacher, "", "[[2, 1]]"), "student layer dec.2 is out of range"},
      {student_json(dir, teacher, "", "[[1, 3]]"), "teacher layer dec.3 is out of range"},
      {student_json(dir, teacher, "", R"([["enc.1", 1]])"), "has no encoder"},
      {longer, "has max_positions 32, shorter than the training sequences (64 tokens)"},
  };
  for (const auto& [json_text, want] : cases) {
    TrainOptions o;
    o.quiet = true;
    o.out_dir = dir + "/never";
    const std::string e = expect_error([&] { run_training(parse_train_config(json_text, "student.json"), o); });
    EXPECT_NE(e.find(want), std::string::npos) << e;
    EXPECT_NE(e.find("distill"), std::string::npos) << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
    EXPECT_FALSE(fs::exists(o.out_dir)) << "failed before creating the output directory";
  }
  // A different vocabulary size: the logits would not line up.
  std::string wide = student_json(dir, teacher);
  wide.replace(wide.find(R"("d_model": 24)"), 13, R"("d_model": 24, "vocab_size": 300)");
  TrainOptions o;
  o.quiet = true;
  o.out_dir = dir + "/never";
  const std::string e = expect_error([&] { run_training(parse_train_config(wide, "student.json"), o); });
  EXPECT_NE(e.find("vocab_size"), std::string::npos) << e;
  // --max-memory counts the teacher: its weights and forward beside the student's plan.
  o.max_memory_bytes = 1024;
  const std::string m = expect_error([&] { run_training(parse_train_config(student_json(dir, teacher), "s.json"), o); });
  EXPECT_NE(m.find("; teacher: weights "), std::string::npos) << m;
  EXPECT_NE(m.find("in all"), std::string::npos) << m;
  fs::remove_all(dir);
}
