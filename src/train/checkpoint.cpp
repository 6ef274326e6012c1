// The model directory: config.json + model.safetensors + tokenizer.json (the inference copy),
// and DIR/checkpoint/ holding the same three plus optimizer.safetensors + train_state.json
// for resuming. Every file is written atomically (temp, fsync, rename); the checkpoint is
// written whole into DIR/checkpoint.tmp/ and swapped in by two directory renames
// (checkpoint -> checkpoint.old, checkpoint.tmp -> checkpoint), then DIR itself is fsynced,
// so a kill at any moment leaves a complete checkpoint: checkpoint/, or checkpoint.old/ in
// the window between the renames, which load_checkpoint falls back to. Each file also
// records its step, and a set that disagrees is rejected by name rather than resumed from
// mixed steps. The inference copy is hard links to the committed checkpoint's files (no
// second write), config.json last, so a DIR holding config.json holds the other two.
// A failed save (a full disk) removes checkpoint.tmp/ and names the intact previous one.
// tests/cli/train_sigkill.sh and train_full_disk.sh check all of this from outside.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "tfm/error.h"
#include "tfm/runtime.h"
#include "tfm/safetensors.h"
#include "tfm/train.h"
#include "train/train_internal.h"

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

// Makes the entries of `dir` (creations, renames, removals) durable.
void sync_dir(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  TFM_CHECK(fd >= 0, dir.string(), "cannot open the directory to fsync it: ", std::strerror(errno));
  const int rc = ::fsync(fd), err = errno;
  ::close(fd);
  TFM_CHECK(rc == 0 || err == EINVAL, dir.string(), "fsync of the directory failed: ", std::strerror(err));
}

// The files this code writes into DIR; a temp file of theirs ("NAME.tmp.PID", write_file_atomic)
// left by a killed run is removed by the next save.
constexpr const char* kDirFiles[] = {"config.json", "tokenizer.json", "model.safetensors", "train_config.json",
                                     "metrics.jsonl", "curves.svg", "confusion.svg", "preprocessor_config.json",
                                     "generation_config.json", "retrieval_db.safetensors"};

void remove_stale_temp_files(const fs::path& out) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(out, ec)) {
    const std::string name = e.path().filename().string();
    for (const char* f : kDirFiles) {
      const std::string prefix = std::string(f) + ".tmp.";
      if (name.size() > prefix.size() && name.compare(0, prefix.size(), prefix) == 0 &&
          name.find_first_not_of("0123456789", prefix.size()) == std::string::npos)
        fs::remove(e.path(), ec);
    }
  }
}

// DIR/NAME becomes the checkpoint's NAME: a hard link made under a temp name and renamed over
// (atomic), or a copy where the file system has no hard links.
void publish(const fs::path& out, const fs::path& ckpt, const char* name) {
  const fs::path src = ckpt / name, dst = out / name, tmp = out / (std::string(name) + ".tmp." + std::to_string(::getpid()));
  std::error_code ec;
  fs::remove(tmp, ec);
  fs::create_hard_link(src, tmp, ec);
  if (ec) {
    write_file_atomic(dst.string(), read_file(src.string()));
    return;
  }
  fs::rename(tmp, dst);
}

// Sets `committed` once DIR/checkpoint/ is the new one (what follows only refreshes copies).
void write_checkpoint(const fs::path& out, const Model& model, const Tokenizer& tok, const Optimizer& opt,
                      const TrainState& state, bool& committed) {
  const fs::path final_dir = out / "checkpoint", tmp = out / "checkpoint.tmp", old = out / "checkpoint.old";
  fs::remove_all(tmp);
  remove_stale_temp_files(out);
  fs::create_directories(tmp);
  const std::string dir = tmp.string();
  const std::string step = std::to_string(state.step);
  save_safetensors(join(dir, "optimizer.safetensors"), opt.state(),
                   {{"step", step}, {"optimizer_steps", std::to_string(opt.steps_taken())}});
  save_model_dir(dir, model, tok, {{"format", "pt"}, {"step", step}});
  for (const auto& [name, text] : state.model_files) write_file_atomic(join(dir, name.c_str()), text);
  if (!state.training_tensors.empty())  // distillation's projections: resumed, never part of the model
    save_safetensors(join(dir, "training_tensors.safetensors"), state.training_tensors, {{"step", step}});
  json j;
  j["step"] = state.step;
  j["seed"] = state.seed;
  j["data_cursor"] = state.data_cursor;
  j["threads"] = state.threads;
  j["train_config"] = json::parse(state.train_config_json);
  write_file_atomic(join(dir, "train_state.json"), j.dump(2) + "\n");
  sync_dir(tmp);
  if (fs::exists(final_dir)) {
    fs::remove_all(old);
    fs::rename(final_dir, old);
  }
  fs::rename(tmp, final_dir);
  sync_dir(out);  // the new checkpoint is durable from here
  committed = true;
  fs::remove_all(old);
  // The inference copy; config.json last (see the top of the file).
  // Adapters exist for adapter runs only, tokenizer.json for text models only.
  for (const auto& [name, text] : state.model_files) publish(out, final_dir, name.c_str());
  for (const char* name : {"tokenizer.json", "model.safetensors", "adapter_model.safetensors", "adapter_config.json",
                           "config.json"})
    if (fs::exists(final_dir / name)) publish(out, final_dir, name);
  // The training config beside it: tfm eval reproduces the held-out split from it.
  write_file_atomic(join(out.string(), "train_config.json"), json::parse(state.train_config_json).dump(2) + "\n");
  sync_dir(out);
}

}  // namespace

void save_checkpoint(const std::string& out_dir, const Model& model, const Tokenizer& tok, const Optimizer& opt,
                     const TrainState& state) {
  const fs::path out(out_dir);
  std::string why;
  bool committed = false;
  try {
    write_checkpoint(out, model, tok, opt, state, committed);
    return;
  } catch (const Error& e) {
    why = e.what();
  } catch (const fs::filesystem_error& e) {  // create_directories, rename, remove_all
    why = e.what();
  }
  const std::string ckpt = (out / "checkpoint").string();
  TFM_CHECK(!committed, "checkpoint", "step ", state.step, " is saved in ", ckpt,
            ", but refreshing the model files beside it failed: ", why);
  // Never leave a half-written checkpoint.tmp/ behind (it would fill the disk further).
  std::error_code ec;
  fs::remove_all(out / "checkpoint.tmp", ec);
  const std::string old = (out / "checkpoint.old").string();
  const std::string kept = fs::is_directory(ckpt, ec) ? ckpt : fs::is_directory(old, ec) ? old : "";
  fail("checkpoint", "step ", state.step, " was not saved: ", why,
       kept.empty() ? std::string("; no earlier checkpoint exists") : "; the previous checkpoint in " + kept + " is intact");
}

namespace train_detail {

namespace {

// Creates a file in `dir` and removes it: permissions alone do not tell (root ignores them; a
// file system may be mounted read-only).
void probe_writable(const std::string& dir, const std::string& out_dir) {
  const std::string probe = join(dir, ".tfm-write-test.") + std::to_string(::getpid());
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  TFM_CHECK(fd >= 0, "train", dir == out_dir ? "the output directory '" + out_dir + "' is not writable: "
                                             : "cannot create the output directory '" + out_dir + "' in '" + dir + "': ",
            std::strerror(errno));
  ::close(fd);
  ::unlink(probe.c_str());
}

}  // namespace

void check_output_dir(const std::string& out_dir) {
  std::error_code ec;
  if (fs::exists(out_dir, ec)) {
    TFM_CHECK(fs::is_directory(out_dir, ec), "train", "output '", out_dir, "' exists and is not a directory");
    probe_writable(out_dir, out_dir);
    return;
  }
  // It will be created (after the config checks): its nearest existing ancestor must take it.
  fs::path p = fs::absolute(out_dir, ec).lexically_normal();
  while (p.has_parent_path() && p != p.root_path() && !fs::exists(p, ec)) p = p.parent_path();
  TFM_CHECK(fs::is_directory(p, ec), "train", "cannot create the output directory '", out_dir, "': '", p.string(),
            "' is not a directory");
  probe_writable(p.string(), out_dir);
}

OutputDirLock::OutputDirLock(const std::string& out_dir) {
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  TFM_CHECK(!ec, "train", "cannot create the output directory '", out_dir, "': ", ec.message());
  // Two runs writing one directory would interleave metrics.jsonl and swap each other's
  // checkpoints; the kernel drops the lock when the process ends, however it ends.
  const std::string lock = join(out_dir, ".tfm-train.lock");
  fd_ = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  TFM_CHECK(fd_ >= 0, "train", "cannot open ", lock, ": ", std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    ::close(fd_);
    fd_ = -1;
    TFM_CHECK(err != EWOULDBLOCK, "train", "another training run is writing to '", out_dir, "' (", lock, " is locked)");
    fail("train", "cannot lock ", lock, ": ", std::strerror(err));
  }
  // With the lock held no other run writes here: a temp file of ours is a killed run's. The
  // saves remove them too, but a run resumed after its last checkpoint may save none (a kill
  // inside the final metrics.jsonl write left metrics.jsonl.tmp.PID behind: cli_train_sigkill).
  remove_stale_temp_files(out_dir);
}

OutputDirLock::~OutputDirLock() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace train_detail

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
  const std::string tpath = join(dir, "training_tensors.safetensors");
  if (fs::exists(tpath)) {
    const SafetensorsFile tt = load_safetensors(tpath);
    const std::int64_t tstep = step_of(tt, tpath);
    TFM_CHECK(tstep == c.state.step, "load_checkpoint", dir, " mixes steps (train_state ", c.state.step,
              ", training tensors ", tstep, "): files were replaced by hand?");
    for (const auto& [k, t] : tt.tensors) c.state.training_tensors[k] = t.clone();
  }
  try {
    c.optimizer_steps = std::stoll(o.metadata.at("optimizer_steps"));
  } catch (const std::exception&) {
    fail(opath, "metadata lacks a numeric optimizer_steps");
  }
  return c;
}

}  // namespace tfm
