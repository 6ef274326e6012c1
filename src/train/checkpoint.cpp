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
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "tfm/error.h"
#include "tfm/model_dir.h"
#include "tfm/runtime.h"
#include "tfm/safetensors.h"
#include "tfm/train.h"
#include "train/sharded_checkpoint.h"
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

// A sharded set's file: STEM-0000k-of-0000N.safetensors (Hugging Face's names), and its index.
std::string shard_file(const char* stem, int k, int n) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s-%05d-of-%05d.safetensors", stem, k, n);
  return buf;
}
bool is_shard_file(const std::string& name, const std::string& stem) {
  const std::string tail = ".safetensors";
  const std::size_t n = stem.size() + 1 + 5 + 4 + 5 + tail.size();
  if (name.size() != n || name.compare(0, stem.size() + 1, stem + "-") != 0 ||
      name.compare(n - tail.size(), tail.size(), tail) != 0 || name.compare(stem.size() + 6, 4, "-of-") != 0)
    return false;
  const std::string digits = name.substr(stem.size() + 1, 5) + name.substr(stem.size() + 10, 5);
  return digits.find_first_not_of("0123456789") == std::string::npos;
}
std::string index_file(const std::string& stem) { return stem + ".safetensors.index.json"; }

void remove_stale_temp_files(const fs::path& out) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(out, ec)) {
    const std::string name = e.path().filename().string();
    const std::size_t tmp = name.find(".tmp.");
    if (tmp == std::string::npos || name.find_first_not_of("0123456789", tmp + 5) != std::string::npos ||
        tmp + 5 == name.size())
      continue;
    const std::string file = name.substr(0, tmp);
    bool ours = is_shard_file(file, "model") || file == index_file("model");
    for (const char* f : kDirFiles) ours = ours || file == f;
    if (ours) fs::remove(e.path(), ec);
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

// An empty DIR/checkpoint.tmp/ for the next checkpoint.
fs::path begin_checkpoint(const fs::path& out) {
  const fs::path tmp = out / "checkpoint.tmp";
  fs::remove_all(tmp);
  remove_stale_temp_files(out);
  fs::create_directories(tmp);
  return tmp;
}

// The model directory's other files and train_state.json (beside the weights).
void write_run_files(const fs::path& tmp, const TrainState& state) {
  const std::string dir = tmp.string();
  for (const auto& [name, text] : state.model_files) write_file_atomic(join(dir, name.c_str()), text);
  json j;
  j["step"] = state.step;
  j["seed"] = state.seed;
  j["data_cursor"] = state.data_cursor;
  j["threads"] = state.threads;
  j["train_config"] = json::parse(state.train_config_json);
  write_file_atomic(join(dir, "train_state.json"), j.dump(2) + "\n");
}

// The inference copy of the weights: one file or a sharded set, and never both (a directory
// holding model.safetensors is read as that file, so a stale one would hide the set).
void publish_weights(const fs::path& out, const fs::path& ckpt) {
  const bool sharded = fs::exists(ckpt / index_file("model"));
  std::vector<std::string> fresh;
  for (const auto& e : fs::directory_iterator(ckpt)) {
    const std::string name = e.path().filename().string();
    if (name == "model.safetensors" || name == index_file("model") || is_shard_file(name, "model")) fresh.push_back(name);
  }
  std::sort(fresh.begin(), fresh.end());  // the index after its shards, model.safetensors alone
  for (const std::string& name : fresh) publish(out, ckpt, name.c_str());
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(out)) {
    const std::string name = e.path().filename().string();
    const bool stale = sharded ? name == "model.safetensors" ||
                                     (is_shard_file(name, "model") && !std::binary_search(fresh.begin(), fresh.end(), name))
                               : name == index_file("model") || is_shard_file(name, "model");
    if (stale) fs::remove(e.path(), ec);
  }
}

// Swaps checkpoint.tmp/ in (sets `committed` once DIR/checkpoint/ is the new one; what
// follows only refreshes copies) and refreshes the inference copy.
void commit_checkpoint(const fs::path& out, const fs::path& tmp, const TrainState& state, bool& committed) {
  const fs::path final_dir = out / "checkpoint", old = out / "checkpoint.old";
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
  publish_weights(out, final_dir);
  for (const char* name : {"tokenizer.json", "adapter_model.safetensors", "adapter_config.json", "config.json"})
    if (fs::exists(final_dir / name)) publish(out, final_dir, name);
  // The training config beside it: tfm eval reproduces the held-out split from it.
  write_file_atomic(join(out.string(), "train_config.json"), json::parse(state.train_config_json).dump(2) + "\n");
  sync_dir(out);
}

void write_checkpoint(const fs::path& out, const Model& model, const Tokenizer& tok, const Optimizer& opt,
                      const TrainState& state, bool& committed) {
  const fs::path tmp = begin_checkpoint(out);
  const std::string dir = tmp.string();
  const std::string step = std::to_string(state.step);
  save_safetensors(join(dir, "optimizer.safetensors"), opt.state(),
                   {{"step", step}, {"optimizer_steps", std::to_string(opt.steps_taken())}});
  save_model_dir(dir, model, tok, {{"format", "pt"}, {"step", step}});
  if (!state.training_tensors.empty())  // distillation's projections: resumed, never part of the model
    save_safetensors(join(dir, "training_tensors.safetensors"), state.training_tensors, {{"step", step}});
  write_run_files(tmp, state);
  commit_checkpoint(out, tmp, state, committed);
}

// After a failed save: removes checkpoint.tmp/ (never left to fill the disk further) and says
// which earlier checkpoint is intact.
std::string after_failed_save(const fs::path& out, std::int64_t step, const std::string& why) {
  std::error_code ec;
  fs::remove_all(out / "checkpoint.tmp", ec);
  const std::string ckpt = (out / "checkpoint").string(), old = (out / "checkpoint.old").string();
  const std::string kept = fs::is_directory(ckpt, ec) ? ckpt : fs::is_directory(old, ec) ? old : "";
  return "step " + std::to_string(step) + " was not saved: " + why +
         (kept.empty() ? std::string("; no earlier checkpoint exists") : "; the previous checkpoint in " + kept + " is intact");
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
  TFM_CHECK(!committed, "checkpoint", "step ", state.step, " is saved in ", (out / "checkpoint").string(),
            ", but refreshing the model files beside it failed: ", why);
  fail("checkpoint", after_failed_save(out, state.step, why));
}

namespace train_detail {

namespace {

// Whether any rank of g failed (a collective); `why` is this rank's reason, if it has one.
bool any_failed(const std::string& why, const dist::Group& g) {
  return dist::allreduce_max(why.empty() ? 0 : 1, g) != 0;
}

// The index of a sharded set: {"metadata": {...}, "weight_map": {tensor: file}}.
std::string index_json(const std::map<std::string, std::string>& weight_map, std::int64_t bytes,
                       const std::map<std::string, std::string>& metadata) {
  json j;
  j["metadata"] = metadata;
  j["metadata"]["total_size"] = bytes;
  j["weight_map"] = weight_map;
  return j.dump(2) + "\n";
}

}  // namespace

void save_sharded_checkpoint(const std::string& out_dir, const dist::Group& g, const CheckpointPart& mine,
                             const Tokenizer& tok, const TrainState& state) {
  TFM_CHECK(state.training_tensors.empty(), "checkpoint", "training tensors are not saved by a model-parallel run");
  const fs::path out(out_dir), tmp = out / "checkpoint.tmp";
  const std::string step = std::to_string(state.step);
  std::string why;
  const auto attempt = [&](auto&& f) {
    try {
      f();
    } catch (const Error& e) {
      why = e.what();
    } catch (const fs::filesystem_error& e) {
      why = e.what();
    }
  };
  // Every rank fails alike once rank 0 has cleaned up (the first rank to stop ends the job).
  bool committed = false;
  const auto check_all = [&](const char* doing) {
    if (!any_failed(why, g)) return;
    if (why.empty()) why = std::string("another rank failed ") + doing;
    const std::string message = committed ? "step " + step + " is saved in " + (out / "checkpoint").string() +
                                                ", but refreshing the model files beside it failed: " + why
                                : g.rank == 0 ? after_failed_save(out, state.step, why)
                                              : "step " + step + " was not saved: " + why;
    dist::barrier(g);
    fail("checkpoint", message);
  };
  if (g.rank == 0) attempt([&] { begin_checkpoint(out); });
  check_all("to create checkpoint.tmp/");
  // Each rank's shards; the lines "set name bytes file" tell rank 0 what went where.
  const auto part_file = [&](const char* stem) { return shard_file(stem, g.rank + 1, g.size); };
  std::string listing;
  attempt([&] {
    for (const auto& [set, tensors] : {std::pair{"model", &mine.params}, std::pair{"optimizer", &mine.state}}) {
      if (tensors->empty()) continue;
      std::map<std::string, std::string> meta{{"step", step}};
      if (set == std::string("model")) meta["format"] = "pt";
      else meta["optimizer_steps"] = std::to_string(mine.optimizer_steps);
      for (const auto& [name, t] : *tensors)
        TFM_CHECK(t.dtype() == DType::f32, "checkpoint", name, " is ", dtype_name(t.dtype()), "; a sharded checkpoint "
                  "holds f32 tensors");
      save_safetensors((tmp / part_file(set)).string(), *tensors, meta);
      for (const auto& [name, t] : *tensors)
        listing += std::string(set) + '\t' + name + '\t' + std::to_string(t.nbytes()) + '\t' + part_file(set) + '\n';
    }
  });
  check_all("to write its shards");
  const std::vector<std::string> listings = dist::allgather_bytes(listing, g);
  if (g.rank == 0) attempt([&] {
    std::map<std::string, std::map<std::string, std::string>> maps;  // set -> tensor -> file
    std::map<std::string, std::int64_t> bytes;
    for (std::size_t r = 0; r < listings.size(); ++r) {
      std::istringstream lines(listings[r]);
      for (std::string line; std::getline(lines, line);) {
        const std::size_t a = line.find('\t'), b = line.find('\t', a + 1), c = line.find('\t', b + 1);
        const std::string set = line.substr(0, a), file = line.substr(c + 1);
        // Across machines the directory must be shared: say so rather than commit a set with holes.
        TFM_CHECK(fs::exists(tmp / file), "checkpoint", "rank ", r, " wrote ", file, " but ", tmp.string(), " does not "
                  "hold it here: every rank of a model-parallel run writes into one directory (put --out on a file "
                  "system that all machines mount)");
        TFM_CHECK(maps[set].emplace(line.substr(a + 1, b - a - 1), file).second, "checkpoint", "two ranks wrote ",
                  line.substr(a + 1, b - a - 1));
        bytes[set] += std::stoll(line.substr(b + 1, c - b - 1));
      }
    }
    const std::map<std::string, std::string> ometa{{"step", step}, {"optimizer_steps", std::to_string(mine.optimizer_steps)}};
    if (maps["optimizer"].empty())  // a stateless optimizer (SGD without momentum): one empty file, as one process writes
      save_safetensors((tmp / "optimizer.safetensors").string(), {}, ometa);
    else
      write_file_atomic((tmp / index_file("optimizer")).string(), index_json(maps["optimizer"], bytes["optimizer"], ometa));
    write_file_atomic((tmp / index_file("model")).string(),
                      index_json(maps["model"], bytes["model"], {{"format", "pt"}, {"step", step}}));
    save_model_description(tmp.string(), mine.config, tok);
    write_run_files(tmp, state);
    commit_checkpoint(out, tmp, state, committed);
  });
  check_all("to commit the checkpoint");  // the others wait for it, so a failure stops every rank
}

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

namespace {

// The files of a checkpoint's STEM set: STEM.safetensors, or the shards its index lists.
std::vector<std::string> set_files(const std::string& dir, const std::string& stem) {
  const std::string single = join(dir, (stem + ".safetensors").c_str()), index = join(dir, index_file(stem).c_str());
  if (fs::exists(single) || !fs::exists(index)) return {single};  // (a missing single file fails by name)
  std::vector<std::string> files;
  for (const auto& [file, names] : read_safetensors_index(index)) {
    TFM_CHECK(is_shard_file(file, stem), index, "names '", file, "', not a shard of this set");
    files.push_back(join(dir, file.c_str()));
  }
  return files;
}

}  // namespace

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
  const auto mixed = [&](const std::string& path, std::int64_t step) {
    TFM_CHECK(step == c.state.step, "load_checkpoint", dir, " mixes steps (train_state ", c.state.step, ", ", path, " ",
              step, "): files were replaced by hand?");
  };
  for (const std::string& wpath : set_files(dir, "model")) mixed(wpath, step_of(load_safetensors(wpath), wpath));
  std::string optimizer_steps;
  for (const std::string& opath : set_files(dir, "optimizer")) {
    const SafetensorsFile o = load_safetensors(opath);
    mixed(opath, step_of(o, opath));
    for (const auto& [k, t] : o.tensors) c.optimizer_state[k] = t.clone();  // writable copies
    const auto it = o.metadata.find("optimizer_steps");
    TFM_CHECK(it != o.metadata.end() && (optimizer_steps.empty() || it->second == optimizer_steps), opath,
              it == o.metadata.end() ? "metadata lacks optimizer_steps" : "optimizer_steps differs from its other shards'");
    optimizer_steps = it->second;
  }
  const std::string tpath = join(dir, "training_tensors.safetensors");
  if (fs::exists(tpath)) {
    const SafetensorsFile tt = load_safetensors(tpath);
    const std::int64_t tstep = step_of(tt, tpath);
    TFM_CHECK(tstep == c.state.step, "load_checkpoint", dir, " mixes steps (train_state ", c.state.step,
              ", training tensors ", tstep, "): files were replaced by hand?");
    for (const auto& [k, t] : tt.tensors) c.state.training_tensors[k] = t.clone();
  }
  try {
    c.optimizer_steps = std::stoll(optimizer_steps);
  } catch (const std::exception&) {
    fail(dir, "the optimizer's metadata optimizer_steps '", optimizer_steps, "' is not a number");
  }
  return c;
}

}  // namespace tfm
