// The model directory: config.json + model.safetensors + tokenizer.json (the inference copy),
// and DIR/checkpoint/ holding the same three plus optimizer.safetensors + train_state.json
// for resuming. Every file is written atomically (temp, fsync, rename); the checkpoint is
// written whole into DIR/checkpoint.tmp/ and swapped in by two directory renames
// (checkpoint -> checkpoint.old, checkpoint.tmp -> checkpoint), so a kill at any moment
// leaves a complete checkpoint: checkpoint/, or checkpoint.old/ in the window between the
// renames, which load_checkpoint falls back to. Each file also records its step, and a set
// that disagrees is rejected by name rather than resumed from mixed steps.
#include <filesystem>
#include <nlohmann/json.hpp>

#include "tfm/error.h"
#include "tfm/runtime.h"
#include "tfm/safetensors.h"
#include "tfm/train.h"

namespace tfm {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

std::string join(const std::string& dir, const char* file) { return (fs::path(dir) / file).string(); }

std::int64_t step_of(const SafetensorsFile& f, const std::string& path) {
  const auto it = f.metadata.find("step");
  TFM_CHECK(it != f.metadata.end(), path, "has no \"step\" in its metadata (not a training checkpoint)");
  try {
    return std::stoll(it->second);
  } catch (const std::exception&) {
    fail(path, "metadata step '", it->second, "' is not a number");
  }
}

}  // namespace

void save_checkpoint(const std::string& out_dir, const Model& model, const Tokenizer& tok, const Optimizer& opt,
                     const TrainState& state) {
  const fs::path final_dir = fs::path(out_dir) / "checkpoint", tmp = fs::path(out_dir) / "checkpoint.tmp",
                 old = fs::path(out_dir) / "checkpoint.old";
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  const std::string dir = tmp.string();
  const std::string step = std::to_string(state.step);
  save_safetensors(join(dir, "optimizer.safetensors"), opt.state(),
                   {{"step", step}, {"optimizer_steps", std::to_string(opt.steps_taken())}});
  save_model_dir(dir, model, tok, {{"format", "pt"}, {"step", step}});
  json j;
  j["step"] = state.step;
  j["seed"] = state.seed;
  j["data_cursor"] = state.data_cursor;
  j["threads"] = state.threads;
  j["train_config"] = json::parse(state.train_config_json);
  write_file_atomic(join(dir, "train_state.json"), j.dump(2) + "\n");
  if (fs::exists(final_dir)) {
    fs::remove_all(old);
    fs::rename(final_dir, old);
  }
  fs::rename(tmp, final_dir);
  fs::remove_all(old);
  save_model_dir(out_dir, model, tok, {{"format", "pt"}, {"step", step}});  // the inference copy
  // The training config beside it: tfm eval reproduces the held-out split from it.
  write_file_atomic(join(out_dir, "train_config.json"), json::parse(state.train_config_json).dump(2) + "\n");
}

LoadedCheckpoint load_checkpoint(const std::string& out_dir) {
  // checkpoint.old exists alone only when a save was cut between its two renames.
  std::string dir = join(out_dir, "checkpoint");
  if (!fs::is_directory(dir) && fs::is_directory(join(out_dir, "checkpoint.old"))) dir = join(out_dir, "checkpoint.old");
  TFM_CHECK(fs::is_directory(dir), "resume", "no checkpoint in '", out_dir, "' (expected ", dir, "/)");
  LoadedCheckpoint c{load_model_dir(dir), {}, {}, 0};
  const std::string spath = join(dir, "train_state.json");
  json j;
  try {
    j = json::parse(read_file(spath));
    c.state.step = j.at("step").get<std::int64_t>();
    c.state.seed = j.at("seed").get<std::uint64_t>();
    c.state.data_cursor = j.at("data_cursor").get<std::int64_t>();
    c.state.threads = j.at("threads").get<std::int64_t>();
    c.state.train_config_json = j.at("train_config").dump();
  } catch (const json::exception& e) {
    fail(spath, "malformed train state: ", e.what());
  }
  const std::string opath = join(dir, "optimizer.safetensors");
  const SafetensorsFile o = load_safetensors(opath);
  const std::int64_t ostep = step_of(o, opath);
  const std::string wpath = join(dir, "model.safetensors");
  const std::int64_t wstep = step_of(load_safetensors(wpath), wpath);
  TFM_CHECK(ostep == c.state.step && wstep == c.state.step, "load_checkpoint",
            dir, " mixes steps (train_state ", c.state.step, ", model ", wstep, ", optimizer ", ostep,
            "): files were replaced by hand?");
  for (const auto& [k, t] : o.tensors) c.optimizer_state[k] = t.clone();  // writable copies
  try {
    c.optimizer_steps = std::stoll(o.metadata.at("optimizer_steps"));
  } catch (const std::exception&) {
    fail(opath, "metadata lacks a numeric optimizer_steps");
  }
  return c;
}

}  // namespace tfm
