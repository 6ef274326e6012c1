// Training an image classifier (task "image_classifier"): a ViT learns a small synthetic
// picture set from a folder of class folders; the model directory then classifies images
// through its own preprocessor_config.json, tfm eval reproduces the training's scores, an
// interrupted run resumes to the same losses (augmentation draws included), and config
// mistakes are named before any work.
#include <gtest/gtest.h>

#include <filesystem>

#include "support/train_helpers.h"
#include "tfm/image.h"
#include "tfm/inspect.h"
#include "tfm/model_dir.h"
#include "tfm/ops.h"
#include "train/distill.h"
#include "train/train_internal.h"

using namespace tfm;
using namespace tfm::train_test;
namespace fs = std::filesystem;

namespace {

// Three classes of 12 x 12 pictures: a bright top half, a bright left half, a bright
// diagonal, each on its own noise.
std::string write_picture_folder(const std::string& dir) {
  const fs::path root = fs::path(dir) / "pictures";
  std::uint64_t state = 42;
  const char* names[] = {"top", "left", "diagonal"};
  for (int c = 0; c < 3; ++c) {
    fs::create_directories(root / names[c]);
    for (int i = 0; i < 40; ++i) {
      Image img;
      img.width = img.height = 12;
      for (int y = 0; y < 12; ++y)
        for (int x = 0; x < 12; ++x) {
          state = train_detail::mix64(state);
          const bool on = c == 0 ? y < 6 : c == 1 ? x < 6 : std::abs(x - y) <= 1;
          const int v = (on ? 170 : 40) + static_cast<int>(state % 60);
          for (int k = 0; k < 3; ++k) img.rgb.push_back(static_cast<std::uint8_t>(v));
        }
      char file[32];
      std::snprintf(file, sizeof file, "%02d.png", i);
      write_png((root / names[c] / file).string(), img);
    }
  }
  return root.string();
}

std::string image_config(const std::string& folder, const std::string& model_extra = "",
                         const std::string& augment = R"({"crop_padding": 1})",
                         const std::string& preprocessor = R"({"do_resize": false, "image_mean": [0.5, 0.5, 0.5], "image_std": [0.25, 0.25, 0.25]})",
                         const std::string& top_extra = "", const std::string& model_type = "vit") {
  return R"({"task": "image_classifier", "seed": 3)" + top_extra + R"(,
    "model": {"model_type": ")" + model_type + R"(", "image_size": 12, "patch_size": 4, "hidden_size": 16, "num_hidden_layers": 2,
              "num_attention_heads": 2, "intermediate_size": 32)" + model_extra + R"(},
    "data": {"train": ")" + folder + R"(", "test_fraction": 0.25,
             "preprocessor": )" + preprocessor + R"(, "augment": )" + augment + R"(},
    "optimizer": {"lr": 0.01, "weight_decay": 0.01},
    "schedule": {"name": "cosine", "warmup_steps": 4},
    "training": {"batch_size": 16, "max_steps": 40, "label_smoothing": 0.1},
    "eval": {"every": 20, "log_every": 5}})";
}

}  // namespace

TEST(TrainImages, VitLearnsAPictureFolderAndItsDirectoryClassifiesImages) {
  const std::string dir = tmp_dir("images");
  const std::string folder = write_picture_folder(dir);
  const TrainConfig cfg = parse_train_config(image_config(folder), "images.json");
  TrainOptions o;
  o.out_dir = dir + "/run";
  o.quiet = true;
  const TrainResult r = run_training(cfg, o);
  EXPECT_GE(r.val_metrics.at("accuracy"), 0.9) << "30 test pictures of three plain patterns";
  for (const char* f : {"config.json", "model.safetensors", "preprocessor_config.json", "confusion.svg", "curves.svg",
                        "train_config.json"})
    EXPECT_TRUE(fs::exists(fs::path(o.out_dir) / f)) << f;
  EXPECT_FALSE(fs::exists(fs::path(o.out_dir) / "tokenizer.json")) << "an image model has no tokenizer";
  const std::string confusion = read_file(o.out_dir + "/confusion.svg");
  for (const char* name : {"top", "left", "diagonal", "confusion matrix"}) EXPECT_NE(confusion.find(name), std::string::npos) << name;

  // The directory alone classifies pictures: its preprocessor, its id2label.
  LoadedModel m = load_model_dir(o.out_dir);
  ASSERT_TRUE(m.image_processor.has_value());
  const LabeledImages all = read_image_folder(folder, m.config.id2label);
  const auto preds = classify_images(m, all.images);
  ASSERT_EQ(preds.size(), all.images.size());
  std::int64_t right = 0;
  for (std::size_t i = 0; i < preds.size(); ++i) right += preds[i].label == all.labels[i];
  EXPECT_GE(static_cast<double>(right) / static_cast<double>(preds.size()), 0.9);
  EXPECT_EQ(preds[0].name, m.config.id2label[static_cast<std::size_t>(preds[0].label)]);
  // One picture alone gets the probabilities it gets in the batch.
  const auto one = classify_images(m, {all.images[5]});
  for (std::size_t k = 0; k < 3; ++k) EXPECT_NEAR(one[0].probabilities[k], preds[5].probabilities[k], 1e-5);

  // tfm eval: the held-out split of train_config.json, scored as the training scored it.
  const EvalReport rep = evaluate_model_dir(o.out_dir, {});
  EXPECT_EQ(rep.task, TaskKind::image_classifier);
  EXPECT_EQ(rep.examples, 30);
  EXPECT_DOUBLE_EQ(rep.metrics.at("accuracy"), r.val_metrics.at("accuracy"));
  EXPECT_DOUBLE_EQ(rep.metrics.at("loss"), r.val_metrics.at("loss"));
  ASSERT_EQ(rep.confusion.size(), 3u);
  std::int64_t counted = 0;
  for (const auto& row : rep.confusion)
    for (std::int64_t v : row) counted += v;
  EXPECT_EQ(counted, 30);
  // --data: a folder of class folders, in the model's class order.
  EvalOptions eo;
  eo.data_file = folder;
  EXPECT_EQ(evaluate_model_dir(o.out_dir, eo).examples, 120);
}

TEST(TrainImages, ResumedRunRepeatsTheAugmentedBatches) {
  const std::string dir = tmp_dir("images_resume");
  const std::string folder = write_picture_folder(dir);
  const TrainConfig cfg =
      parse_train_config(image_config(folder, "", R"({"crop_padding": 2, "horizontal_flip": true, "random_erasing": 0.5})"),
                         "images.json");
  TrainOptions o;
  o.quiet = true;
  o.max_steps = 12;
  o.out_dir = dir + "/whole";
  const TrainResult whole = run_training(cfg, o);
  const InterruptedRun parts = train_interrupted(cfg, o, dir + "/parts", 5);
  ASSERT_EQ(parts.losses.size(), whole.losses.size());
  for (std::size_t i = 0; i < whole.losses.size(); ++i) EXPECT_EQ(parts.losses[i], whole.losses[i]) << "step " << i + 1;
}

TEST(TrainImages, RandomErasingFillsOneRectangleWithNoise) {
  // Uniform grey pictures: what random erasing changes is a rectangle of 2-33% of the
  // picture, filled with grey noise; with a chance of 0 nothing changes.
  LabeledImages set;
  Image flat;
  flat.width = 20, flat.height = 16;
  flat.rgb.assign(20 * 16 * 3, 100);
  for (int i = 0; i < 8; ++i) set.images.push_back(flat), set.labels.push_back(i % 2);
  set.label_names = {"a", "b"};
  const auto processor = [] {
    return ImageProcessor::from_json(R"({"do_resize": false, "do_rescale": false, "do_normalize": false})", "test");
  };
  for (double chance : {0.0, 1.0}) {
    train_detail::ImageData data(set, set, processor(), train_detail::ImageAugment{0, false, chance}, 5);
    Tensor pixels, labels;
    data.train_batch(0, 8, pixels, labels);
    const std::vector<float> v = pixels.to_floats();
    for (std::int64_t b = 0; b < 8; ++b) {
      std::int64_t changed = 0, x0 = 20, x1 = -1, y0 = 16, y1 = -1;
      for (std::int64_t y = 0; y < 16; ++y)
        for (std::int64_t x = 0; x < 20; ++x) {
          const auto at = [&](std::int64_t c) { return v[static_cast<std::size_t>(((b * 3 + c) * 16 + y) * 20 + x)]; };
          EXPECT_EQ(at(0), at(1));  // grey noise for a grey picture
          EXPECT_EQ(at(0), at(2));
          if (at(0) == 100.0f) continue;
          ++changed, x0 = std::min(x0, x), x1 = std::max(x1, x), y0 = std::min(y0, y), y1 = std::max(y1, y);
        }
      if (chance == 0.0) {
        EXPECT_EQ(changed, 0) << "picture " << b;
        continue;
      }
      const std::int64_t box = (x1 - x0 + 1) * (y1 - y0 + 1);
      EXPECT_GE(box, 4) << "picture " << b;  // 2% of 320 pixels, rounded
      EXPECT_LE(box, 130) << "picture " << b;  // 33%, with the rounding of each side
      EXPECT_GE(changed, box * 9 / 10) << "picture " << b;  // noise hits 100 by chance 1/256 a pixel
    }
  }
}

TEST(TrainImages, ConfigMistakesAreNamedBeforeAnyWork) {
  const std::string dir = tmp_dir("images_errors");
  const std::string folder = write_picture_folder(dir);
  TrainOptions o;
  o.quiet = true;
  o.out_dir = dir + "/run";
  auto train_error = [&](const std::string& json) {
    return expect_error([&] { run_training(parse_train_config(json, "bad.json"), o); });
  };
  EXPECT_NE(train_error(image_config(folder, R"(, "image_size": 32, "patch_size": 16)")).find("data.preprocessor gives 3 x 12 x 12"),
            std::string::npos);
  EXPECT_NE(train_error(image_config(folder, R"(, "num_labels": 4)")).find("num_labels 4"), std::string::npos);
  EXPECT_NE(train_error(image_config(folder + "/top/00.png")).find("train_labels"), std::string::npos);
  EXPECT_NE(expect_error([&] {
              parse_train_config(image_config(folder, "", R"({"crop_pading": 1})"), "bad.json");
            }).find("unknown key 'crop_pading'"),
            std::string::npos);
  EXPECT_NE(expect_error([&] {
              parse_train_config(R"({"model": {}, "data": {"train": "x.txt", "augment": {}}})", "bad.json");
            }).find("image_classifier"),
            std::string::npos);
  EXPECT_NE(expect_error([&] {
              parse_train_config(image_config(folder, "", "{}", R"({"do_resize": false, "image_mean": [0.5]})"), "bad.json");
            }).find("image_mean"),
            std::string::npos);
}

// DeiT's hard distillation (Touvron et al. 2021): a ViT teacher trained first, then a DeiT
// student whose distillation head learns the teacher's argmax and whose [CLS] head learns the
// true labels. The loss of one batch is checked against its terms computed here; the student
// learns the pictures; its directory says it has both heads and classifies with their mean.
TEST(TrainImages, DeitLearnsFromAVitTeacherByHardDistillation) {
  const std::string dir = tmp_dir("images_deit");
  const std::string folder = write_picture_folder(dir);
  TrainOptions o;
  o.quiet = true;
  o.out_dir = dir + "/teacher";
  run_training(parse_train_config(image_config(folder), "teacher.json"), o);

  const std::string distill = R"(, "distill": {"teacher": ")" + o.out_dir + R"(", "kind": "hard", "alpha": 0.5})";
  const TrainConfig cfg = parse_train_config(
      image_config(folder, R"(, "architectures": ["DeiTForImageClassificationWithTeacher"])", R"({"crop_padding": 1})",
                   R"({"do_resize": false, "image_mean": [0.5, 0.5, 0.5], "image_std": [0.25, 0.25, 0.25]})", distill, "deit"),
      "student.json");
  ASSERT_TRUE(cfg.distill && cfg.distill->hard);

  {  // one batch's loss: alpha CE(distillation head, teacher argmax) + (1 - alpha) CE([CLS] head, labels)
    ModelConfig sc = parse_model_config(R"({"model_type": "deit", "image_size": 12, "patch_size": 4, "hidden_size": 16,
        "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 32, "num_labels": 3})", "student");
    train_detail::Distiller d(*cfg.distill, "student.json", TaskKind::image_classifier, sc, nullptr, 0, 1);
    EXPECT_NE(d.summary().find("hard labels, alpha 0.5"), std::string::npos) << d.summary();
    Model student = Model::create(sc, 9);
    ModelInputs in;
    in.pixel_values = Tensor::uniform({4, 3, 12, 12}, 77, -1.0f, 1.0f);
    const Tensor labels = Tensor::from_ints({0, 2, 1, -100}, {4});
    const ModelOutputs out = student.forward(in);
    ASSERT_TRUE(out.cls_logits.defined() && out.distillation_logits.defined());
    const Tensor hard = cross_entropy(out.cls_logits, labels, -100);
    const float got = d.loss(in, labels, out, {}, hard).item();
    LoadedModel teacher = load_model_dir(o.out_dir);
    std::vector<std::int64_t> yt = argmax(teacher.model.forward(in).logits, -1).to_ints();
    yt[3] = -100;  // not counted where the labels are not
    const float want = 0.5f * cross_entropy(out.distillation_logits, Tensor::from_ints(yt, {4}), -100).item() + 0.5f * hard.item();
    EXPECT_NEAR(got, want, 1e-6);
    // The teacher's term reads the distillation head, not the mean of the two.
    const float on_mean = 0.5f * cross_entropy(out.logits, Tensor::from_ints(yt, {4}), -100).item() + 0.5f * hard.item();
    EXPECT_GT(std::abs(got - on_mean), 1e-4);
  }

  TrainOptions so;
  so.quiet = true;
  so.out_dir = dir + "/student";
  const TrainResult r = run_training(cfg, so);
  EXPECT_GE(r.val_metrics.at("accuracy"), 0.9);
  EXPECT_NE(read_file(so.out_dir + "/config.json").find("DeiTForImageClassificationWithTeacher"), std::string::npos);
  LoadedModel m = load_model_dir(so.out_dir);
  EXPECT_TRUE(m.config.distillation_head);
  const LabeledImages all = read_image_folder(folder, m.config.id2label);
  std::int64_t right = 0;
  const auto preds = classify_images(m, all.images);
  for (std::size_t i = 0; i < preds.size(); ++i) right += preds[i].label == all.labels[i];
  EXPECT_GE(static_cast<double>(right) / static_cast<double>(preds.size()), 0.9);

  // A text teacher, and hidden-state pairs, are named.
  auto error_of = [&](const std::string& extra) {
    return expect_error([&] {
      TrainOptions e;
      e.quiet = true;
      e.out_dir = dir + "/bad";
      run_training(parse_train_config(image_config(folder, "", R"({"crop_padding": 1})",
                                                   R"({"do_resize": false, "image_mean": [0.5, 0.5, 0.5], "image_std": [0.25, 0.25, 0.25]})",
                                                   extra, "deit"), "bad.json"), e);
    });
  };
  EXPECT_NE(error_of(R"(, "distill": {"teacher": ")" + o.out_dir + R"(", "hidden": [[1, 1]]})").find("distill.hidden"),
            std::string::npos);
}

TEST(TrainImages, PicturesLargerThanImageSizeTrainWithResizedPositions) {
  // image_size 8 (a 2 x 2 position table) trained on 12 x 12 pictures (3 x 3 patches).
  const std::string dir = tmp_dir("images_resized");
  const std::string folder = write_picture_folder(dir);
  TrainOptions o;
  o.quiet = true;
  o.out_dir = dir + "/run";
  std::string json = image_config(folder);
  json.replace(json.find(R"("image_size": 12)"), 16, R"("image_size": 8)");
  const TrainResult r = run_training(parse_train_config(json, "resized.json"), o);
  EXPECT_GE(r.val_metrics.at("accuracy"), 0.9);
  LoadedModel m = load_model_dir(o.out_dir);
  EXPECT_EQ(m.model.parameters().at("vit.embeddings.position_embeddings").shape(), (Shape{1, 5, 16}));
}
