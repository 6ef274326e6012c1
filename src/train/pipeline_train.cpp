#include "train/pipeline_train.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "tfm/autograd.h"
#include "tfm/memory_plan.h"
#include "tfm/error.h"
#include "tfm/ops.h"
#include "train/pipeline_schedule.h"

namespace tfm::train_detail {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Activations go forward with the dropout stream's position in 4 more floats (its bits);
// gradients go back in messages of the same size (the step's longest), so one
// send-and-receive can carry both ways.
constexpr std::int64_t kExtra = Model::StreamPosition::kFloats;

std::vector<float> pack(const std::vector<Tensor>& parts, const Model::StreamPosition* at, std::size_t size) {
  std::vector<float> buf(size, 0.0f);
  std::size_t off = 0;
  for (const Tensor& t : parts) {
    const Tensor c = contiguous(t);
    std::memcpy(buf.data() + off, c.data<float>(), static_cast<std::size_t>(c.numel()) * sizeof(float));
    off += static_cast<std::size_t>(c.numel());
  }
  if (at != nullptr) at->to_floats(buf.data() + off);
  return buf;
}
std::vector<float> pack(const Tensor& t, const Model::StreamPosition* at, std::size_t size) {
  return pack(std::vector<Tensor>{t}, at, size);
}

// The tensors of `shapes`, one after the other in buf (then the stream's position, when `at`).
std::vector<Tensor> unpack(const std::vector<float>& buf, const std::vector<Shape>& shapes, Model::StreamPosition* at) {
  std::vector<Tensor> out;
  std::size_t off = 0;
  for (const Shape& shape : shapes) {
    Tensor t = Tensor::empty(shape);
    std::memcpy(t.data<float>(), buf.data() + off, static_cast<std::size_t>(t.numel()) * sizeof(float));
    off += static_cast<std::size_t>(t.numel());
    out.push_back(std::move(t));
  }
  if (at != nullptr) *at = Model::StreamPosition::from_floats(buf.data() + off);
  return out;
}
Tensor unpack(const std::vector<float>& buf, const Shape& shape, Model::StreamPosition* at) {
  return unpack(buf, std::vector<Shape>{shape}, at).front();
}

Tensor grad_or_zeros(const Tensor& t) { return t.grad().defined() ? t.grad() : Tensor::zeros(t.shape()); }

// The last stage's loss l of micro-batch `micro`: its value and tokens into the step's
// (loss, tokens) pairs, and what the backward pass starts from (its share of the step's mean).
Tensor record_loss(std::vector<double>& out, std::int64_t micro, const MicroBatch& batch, const Tensor& l,
                   std::int64_t grad_accum) {
  const auto at = static_cast<std::size_t>(micro);
  out[2 * at] = l.item();
  out[2 * at + 1] = static_cast<double>(batch.tokens);
  return grad_accum > 1 ? mul_scalar(l, 1.0f / static_cast<float>(grad_accum)) : l;
}

bool encoder_decoder_task(TaskKind k) { return k == TaskKind::seq2seq || k == TaskKind::speech; }

}  // namespace

PipelineParallel::PipelineParallel(const TrainConfig& cfg) {
  stages_ = static_cast<int>(cfg.pipeline_parallel);
  one_f_one_b_ = cfg.pipeline_schedule == "1f1b";
  if (stages_ == 1) return;
  const int n = dist::size(), t = shards_ = static_cast<int>(cfg.tensor_parallel), model_ranks = stages_ * t;
  TFM_CHECK(n % model_ranks == 0, cfg.source, ".distributed.pipeline_parallel ", stages_,
            t > 1 ? " x tensor_parallel " + std::to_string(t) : std::string(), " does not divide the ", n,
            " ranks (the ranks form pipelines of ", stages_, " stages each", t > 1 ? ", each stage " + std::to_string(t) +
            " shards" : std::string(), ")");
  const int replicas = n / model_ranks;
  TFM_CHECK(cfg.grad_accum % replicas == 0, cfg.source, ".training.grad_accum ", cfg.grad_accum, " is not a multiple of "
            "the ", replicas, " pipelines (each takes whole micro-batches)");
  TFM_CHECK(cfg.task == TaskKind::lm || cfg.task == TaskKind::classifier || cfg.task == TaskKind::image_classifier ||
            encoder_decoder_task(cfg.task), cfg.source, ": pipeline parallelism does not train task \"", task_name(cfg.task), "\"");
  TFM_CHECK(!cfg.fusion, cfg.source, ": Fusion-in-Decoder (data.fusion) with distributed.pipeline_parallel is not supported");
  if (encoder_decoder_task(cfg.task)) {
    // Its passes run in pipeline_schedule.h's order. Each micro-batch's gradient is complete
    // only after both stacks' backward passes, which the bit-exact tree (one snapshot per
    // micro-batch) cannot take.
    encoder_decoder_ = true;
    TFM_CHECK(!cfg.bit_exact, cfg.source, ".distributed.bit_exact cannot be used with an encoder-decoder's pipeline stages");
  }
  TFM_CHECK(cfg.gradient_noise == 0, cfg.source, ".training.gradient_noise cannot be used with pipeline_parallel");
  TFM_CHECK(!cfg.distill, cfg.source, ": distillation with distributed.pipeline_parallel is not supported");
  TFM_CHECK(!cfg.lora && !cfg.bottleneck && !cfg.prefix, cfg.source, ": adapters with distributed.pipeline_parallel "
            "are not supported");
  // rank = replica * (P T) + stage * T + shard: a stage's T shards are consecutive (they talk
  // every sub-layer), a pipeline's stages hand activations between the same shard of each.
  const int r = dist::rank();
  if (n == stages_) {
    pp_ = model_ = dist::world();
  } else {
    pp_ = dist::split((r / model_ranks) * t + r % t, (r / t) % stages_);
    dp_ = dist::split(r % model_ranks, r / model_ranks);
    model_ = t == 1 ? pp_ : dist::split(r / model_ranks, r % model_ranks);
  }
  stage_ = pp_.rank;
}

void PipelineParallel::balance(const ModelConfig& mc, const TrainConfig& cfg) {
  if (!on()) return;
  const std::int64_t micros = cfg.grad_accum / (dist::size() / (stages_ * shards_));
  const int buffers = optimizer_buffers(cfg.optimizer);
  balanced_ = cfg.pipeline_balance == "memory";
  if (encoder_decoder_) {  // both stacks at once, weighed by the graphs the schedule keeps alive
    TFM_CHECK(mc.n_layers >= stages_ && mc.decoder_layers() >= stages_, cfg.source, ".distributed.pipeline_parallel ",
              stages_, " is more stages than the model's ", mc.n_layers, " encoder and ", mc.decoder_layers(), " decoder layers");
    const ScheduleModel schedule = model_encoder_decoder_schedule(stages_, micros, one_f_one_b_);
    const PipelineStagePlan plan = plan_encoder_decoder_stages(mc, schedule.alive, cfg.batch_size, planned_positions(cfg, mc),
                                                               buffers, cfg.checkpoint_activations, !balanced_);
    bounds_ = plan.bounds;
    stage_bytes_ = plan.stage_bytes;
    return;
  }
  std::vector<std::int64_t> in_flight;  // the micro-batches whose activations stage s keeps at once
  for (int s = 0; s < stages_; ++s) in_flight.push_back(one_f_one_b_ ? std::min<std::int64_t>(stages_ - s, micros) : micros);
  TFM_CHECK(mc.n_layers >= stages_, cfg.source, ".distributed.pipeline_parallel ", stages_, " is more stages than the model's ",
            mc.n_layers, " layers");
  const PipelineStagePlan plan = plan_pipeline_stages(mc, in_flight, cfg.batch_size, planned_positions(cfg, mc), buffers,
                                                      cfg.checkpoint_activations, cfg.pipeline_balance == "even");
  bounds_ = plan.bounds;
  stage_bytes_ = plan.stage_bytes;
}

void PipelineParallel::shard(Model& m) const {
  if (!on()) return;
  m.shard_pipeline(stage_, stages_, pipe_comm_over(pp_), bounds_);
}

std::map<std::string, Tensor> PipelineParallel::slice_state(const Model& stage,
                                                            const std::map<std::string, Tensor>& state) const {
  if (!on()) return state;
  std::map<std::string, std::string> local_of;  // whole model's name -> this stage's
  for (const auto& [name, p] : stage.parameters()) local_of[stage.pipeline_global_name(name)] = name;
  std::map<std::string, Tensor> out;
  for (const auto& [key, t] : state) {
    const auto dot = key.find('.');
    if (dot == std::string::npos) continue;
    const auto it = local_of.find(key.substr(dot + 1));
    if (it != local_of.end()) out[key.substr(0, dot + 1) + it->second] = t;  // another stage's otherwise
  }
  return out;
}

std::vector<double> PipelineParallel::step(Model& m, const std::vector<std::int64_t>& micros, std::int64_t grad_accum,
                                           const std::function<MicroBatch(std::int64_t)>& load,
                                           const std::function<Tensor(const MicroBatch&, const Tensor&)>& loss,
                                           const Hooks& hooks) {
  if (encoder_decoder_) return step_encoder_decoder(m, micros, grad_accum, load, loss, hooks);
  const auto t0 = Clock::now();
  const int s = stage_, P = stages_;
  const bool first = s == 0, last = s == P - 1;
  const dist::Group g = pp_;
  const std::size_t M = micros.size();
  std::vector<double> out(2 * static_cast<std::size_t>(grad_accum), 0.0);
  // Every stage loads the step's micro-batches (stage 0 reads their inputs, the last stage
  // their targets). Their hidden states may differ in length (a classifier's batches are padded
  // to their longest text); every message is padded to the longest, so that one
  // send-and-receive carries a forward and a backward message of different micro-batches.
  std::vector<MicroBatch> batches(M);
  std::vector<Shape> shapes(M);
  std::size_t message_size = 0;
  for (std::size_t k = 0; k < M; ++k) {
    batches[k] = load(micros[k]);
    shapes[k] = m.stage_hidden_shape(batches[k].in);
    message_size = std::max(message_size, static_cast<std::size_t>(shape_numel(shapes[k]) + kExtra));
  }
  std::vector<autograd::Tape> tapes(M);
  std::vector<Tensor> inputs(M), outputs(M);
  double waited = 0;
  const auto timed = [&waited](auto&& f) {
    const auto w0 = Clock::now();
    f();
    waited += since(w0);
  };

  const auto forward = [&](std::size_t k, const Tensor& received, Model::StreamPosition at) {
    hooks.before_forward(micros[k]);
    autograd::TapeScope scope(tapes[k]);
    if (received.defined()) {
      inputs[k] = received;
      inputs[k].requires_grad_(true);
    }
    const Tensor y = m.forward_stage(batches[k].in, inputs[k], at);
    if (!last) {
      outputs[k] = y;
      return pack(y, &at, message_size);
    }
    outputs[k] = record_loss(out, micros[k], batches[k], loss(batches[k], y), grad_accum);
    return std::vector<float>();
  };
  const auto backward_of = [&](std::size_t k, const Tensor& dy) {
    hooks.before_backward(k + 1 == M);
    {
      autograd::TapeScope scope(tapes[k]);
      backward(outputs[k], dy);
    }
    hooks.after_backward();
    outputs[k] = Tensor();
    Tensor dx = first ? Tensor() : inputs[k].grad();
    inputs[k] = Tensor();
    return dx.defined() ? pack(dx, nullptr, message_size) : std::vector<float>();
  };
  // Receive micro-batch k's input from the previous stage (stage 0: none).
  const auto receive_forward = [&](std::size_t k, Model::StreamPosition& at) {
    if (first) return Tensor();
    std::vector<float> buf(message_size);
    timed([&] { dist::recv(buf.data(), buf.size(), s - 1, g); });
    return unpack(buf, shapes[k], &at);
  };
  const auto send = [&](const std::vector<float>& buf, int to) {
    timed([&] { dist::send(buf.data(), buf.size(), to, g); });
  };
  const auto receive_backward = [&](std::size_t k) {  // micro-batch k's output gradient
    std::vector<float> buf(message_size);
    timed([&] { dist::recv(buf.data(), buf.size(), s + 1, g); });
    return unpack(buf, shapes[k], nullptr);
  };
  const auto exchange = [&](const std::vector<float>& mine, int partner) {
    std::vector<float> theirs(mine.size());
    timed([&] { dist::exchange(mine.data(), theirs.data(), mine.size(), partner, g); });
    return theirs;
  };

  if (!one_f_one_b_) {  // GPipe: every forward, then every backward
    for (std::size_t k = 0; k < M; ++k) {
      Model::StreamPosition at;
      const Tensor x = receive_forward(k, at);
      const auto y = forward(k, x, at);
      if (!last) send(y, s + 1);
    }
    for (std::size_t k = 0; k < M; ++k) {
      const auto dx = backward_of(k, last ? Tensor() : receive_backward(k));
      if (!first) send(dx, s - 1);
    }
  } else {  // 1F1B (PipeDream-Flush, Megatron-LM's non-interleaved schedule)
    const std::size_t warm = std::min<std::size_t>(static_cast<std::size_t>(P - s - 1), M), steady = M - warm;
    for (std::size_t k = 0; k < warm; ++k) {
      Model::StreamPosition at;
      const Tensor x = receive_forward(k, at);
      send(forward(k, x, at), s + 1);
    }
    Model::StreamPosition at;
    Tensor x = steady > 0 ? receive_forward(warm, at) : Tensor();
    for (std::size_t i = 0; i < steady; ++i) {
      const std::size_t k = warm + i;
      const auto y = forward(k, x, at);
      const Tensor dy = last ? Tensor() : unpack(exchange(y, s + 1), shapes[i], nullptr);
      const auto dx = backward_of(i, dy);
      if (i + 1 == steady) {
        if (!first) send(dx, s - 1);
      } else {
        at = {};
        x = first ? Tensor() : unpack(exchange(dx, s - 1), shapes[k + 1], &at);
      }
    }
    for (std::size_t i = 0; i < warm; ++i) {
      const auto dx = backward_of(steady + i, receive_backward(steady + i));
      if (!first) send(dx, s - 1);
    }
  }
  return finish_step(std::move(out), t0, waited, M);
}

// An encoder-decoder's stages (pipeline_schedule.h: GPipe or interleaved 1F1B over both
// stacks): each stage runs its passes in the schedule's order. An encoder pass sends its output
// on (the last stage's, the memory, to stage 0, whose decoder layers start); a decoder pass
// sends its output on with the memory that its cross-attention read. Backwards, each decoder
// stage sends its input's gradient and the memory's gradient summed over the layers after it,
// and adds its own layers' to that sum (the received memory is a leaf seeded with it, so the
// sum runs in one process's order, last layer first); stage 0 sends the memory's whole
// gradient to the last stage, whose encoder backward pass starts. Sends do not block, and each
// kind of message has its own tag (messages of one kind leave and arrive in micro-batch order),
// so a stage receives exactly what its next pass needs.
std::vector<double> PipelineParallel::step_encoder_decoder(Model& m, const std::vector<std::int64_t>& micros,
                                                           std::int64_t grad_accum,
                                                           const std::function<MicroBatch(std::int64_t)>& load,
                                                           const std::function<Tensor(const MicroBatch&, const Tensor&)>& loss,
                                                           const Hooks& hooks) {
  const auto t0 = Clock::now();
  const int s = stage_, P = stages_;
  const bool first = s == 0, last = s == P - 1;
  const dist::Group g = pp_;
  const std::size_t M = micros.size();
  std::vector<double> out(2 * static_cast<std::size_t>(grad_accum), 0.0);
  std::vector<MicroBatch> batches(M);
  std::vector<Shape> enc_shape(M), dec_shape(M);
  std::size_t enc_size = 0, dec_size = 0;  // the step's longest message of each stack
  for (std::size_t k = 0; k < M; ++k) {
    batches[k] = load(micros[k]);
    enc_shape[k] = m.stage_memory_shape(batches[k].in);
    dec_shape[k] = m.stage_hidden_shape(batches[k].in);
    enc_size = std::max(enc_size, static_cast<std::size_t>(shape_numel(enc_shape[k]) + kExtra));
    dec_size = std::max(dec_size, static_cast<std::size_t>(shape_numel(dec_shape[k]) + shape_numel(enc_shape[k]) + kExtra));
  }
  std::vector<autograd::Tape> enc_tapes(M), dec_tapes(M);
  std::vector<Tensor> enc_in(M), enc_out(M), dec_in(M), memory(M), dec_out(M);
  enum Tag { encoded = 9, memory_tag, decoded, decoded_grad, memory_grad, encoded_grad };
  std::vector<dist::Send> sending;
  double waited = 0;
  const auto send = [&](std::vector<float> buf, int to, Tag tag) {
    sending.emplace_back(std::move(buf), to, static_cast<int>(tag), g);
    std::erase_if(sending, [](dist::Send& x) { return x.test(); });  // (lets MPI move them on)
  };
  const auto receive = [&](std::size_t size, int from, Tag tag) {
    std::vector<float> buf(size);
    const auto w0 = Clock::now();
    dist::recv(buf.data(), buf.size(), from, g, static_cast<int>(tag));
    waited += since(w0);
    return buf;
  };
  const auto leaf = [](Tensor t) {
    t.requires_grad_(true);
    return t;
  };
  const auto memory_size = [&](std::size_t k) { return static_cast<std::size_t>(shape_numel(enc_shape[k])); };

  const auto encode = [&](std::size_t k) {
    hooks.before_forward(micros[k]);
    Model::StreamPosition at;
    if (!first) enc_in[k] = leaf(unpack(receive(enc_size, s - 1, encoded), enc_shape[k], &at));
    autograd::TapeScope scope(enc_tapes[k]);
    enc_out[k] = m.encode_stage(batches[k].in, enc_in[k], at);
    if (!last) send(pack(enc_out[k], &at, enc_size), s + 1, encoded);
    else send(pack(enc_out[k], nullptr, memory_size(k)), 0, memory_tag);
  };
  const auto decode = [&](std::size_t k) {
    hooks.before_forward(micros[k]);
    Model::StreamPosition at;
    if (first) {
      memory[k] = leaf(unpack(receive(memory_size(k), P - 1, memory_tag), enc_shape[k], nullptr));
    } else {
      const auto parts = unpack(receive(dec_size, s - 1, decoded), {dec_shape[k], enc_shape[k]}, &at);
      dec_in[k] = leaf(parts[0]);
      memory[k] = leaf(parts[1]);
    }
    autograd::TapeScope scope(dec_tapes[k]);
    const Tensor y = m.decode_stage(batches[k].in, dec_in[k], memory[k], at);
    if (!last) {
      send(pack({y, memory[k]}, &at, dec_size), s + 1, decoded);
      dec_out[k] = y;
      return;
    }
    dec_out[k] = record_loss(out, micros[k], batches[k], loss(batches[k], y), grad_accum);
  };
  // The data-parallel sums start in the last micro-batch's passes (each parameter's last
  // contribution comes in one of them).
  const auto decode_backward = [&](std::size_t k) {
    hooks.before_backward(k + 1 == M);
    Tensor dy;
    if (!last) {
      const auto parts = unpack(receive(dec_size, s + 1, decoded_grad), {dec_shape[k], enc_shape[k]}, nullptr);
      dy = parts[0];
      autograd::accumulate(memory[k], parts[1]);  // the later layers' part of the sum, first
    }
    {
      autograd::TapeScope scope(dec_tapes[k]);
      backward(dec_out[k], dy);
    }
    dec_out[k] = Tensor();
    if (first) send(pack(grad_or_zeros(memory[k]), nullptr, memory_size(k)), P - 1, memory_grad);
    else send(pack({grad_or_zeros(dec_in[k]), grad_or_zeros(memory[k])}, nullptr, dec_size), s - 1, decoded_grad);
    dec_in[k] = memory[k] = Tensor();
  };
  const auto encode_backward = [&](std::size_t k) {
    const Tensor dy = last ? unpack(receive(memory_size(k), 0, memory_grad), enc_shape[k], nullptr)
                           : unpack(receive(enc_size, s + 1, encoded_grad), enc_shape[k], nullptr);
    {
      autograd::TapeScope scope(enc_tapes[k]);
      backward(enc_out[k], dy);
    }
    hooks.after_backward();
    enc_out[k] = Tensor();
    if (!first) send(pack(grad_or_zeros(enc_in[k]), nullptr, enc_size), s - 1, encoded_grad);
    enc_in[k] = Tensor();
  };

  for (const StagePass& p : encoder_decoder_schedule(s, P, static_cast<std::int64_t>(M), one_f_one_b_)) {
    const auto k = static_cast<std::size_t>(p.micro);
    switch (p.pass) {
      case Pass::encode: encode(k); break;
      case Pass::decode: decode(k); break;
      case Pass::decode_backward: decode_backward(k); break;
      case Pass::encode_backward: encode_backward(k); break;
    }
  }
  const auto w0 = Clock::now();
  sending.clear();  // (waits for the last sends)
  waited += since(w0);
  return finish_step(std::move(out), t0, waited, M);
}

std::vector<double> PipelineParallel::finish_step(std::vector<double> out, std::chrono::steady_clock::time_point t0,
                                                  double waited, std::size_t micros) {
  dist::allreduce_sum(out.data(), out.size(), pp_);  // the losses live on the last stage
  step_s_ += since(t0);
  wait_s_ += waited;
  ++steps_;
  micros_ = static_cast<std::int64_t>(micros);
  return out;
}

void PipelineParallel::sum_shared_gradients(const Model& m, std::map<std::string, Tensor>& params) const {
  if (!on()) return;
  for (auto& [name, p] : params) {
    if (!m.pipeline_shared(name) || !p.requires_grad()) continue;
    Tensor g = p.grad().defined() ? p.grad().clone() : Tensor::zeros(p.shape());
    dist::allreduce_sum_ordered(g.data<float>(), static_cast<std::size_t>(g.numel()), pp_);
    p.zero_grad();
    autograd::accumulate(p, g);
  }
}

SplitParameters PipelineParallel::norm_terms(const Model& stage, const SplitParameters& shards) const {
  SplitParameters sp;
  const int me = stage_;
  const dist::Group g = pp_;
  sp.combine = [&stage, me, g, shards](const std::map<std::string, double>& mine) {
    std::string blob;
    for (auto [name, v] : mine) {
      if (shards.split(name)) v = shards.sum_split(v);  // a tensor-parallel stage: the whole parameter's (every shard the same)
      if (me != 0 && stage.pipeline_shared(name)) continue;  // every stage holds the same: count stage 0's
      blob += stage.pipeline_global_name(name);
      blob += '\0';
      blob.append(reinterpret_cast<const char*>(&v), sizeof v);
    }
    std::map<std::string, double> all;  // the whole model's names, in its order
    for (const std::string& b : dist::allgather_bytes(blob, g)) {
      for (std::size_t at = 0; at < b.size();) {
        const std::size_t end = b.find('\0', at);
        double v = 0;
        std::memcpy(&v, b.data() + end + 1, sizeof v);
        all[b.substr(at, end - at)] = v;
        at = end + 1 + sizeof v;
      }
    }
    double sq = 0;
    for (const auto& [name, v] : all) sq += v;
    return sq;
  };
  return sp;
}

CheckpointPart PipelineParallel::checkpoint_part(const Model& stage, const Optimizer& opt,
                                                 const TensorParallel& tp) const {
  const CheckpointPart shard = tp.checkpoint_part(stage, opt);  // this stage's, under its names
  CheckpointPart part{stage.pipeline_whole_config(), {}, {}, opt.steps_taken()};
  for (const auto& [name, p] : shard.params)
    if (stage_ == 0 || !stage.pipeline_shared(name)) part.params[stage.pipeline_global_name(name)] = p;
  for (const auto& [key, t] : shard.state) {
    const auto dot = key.find('.');
    if (dot == std::string::npos) {
      if (stage_ == 0) part.state[key] = t;
      continue;
    }
    const std::string name = key.substr(dot + 1);
    if (stage_ == 0 || !stage.pipeline_shared(name))
      part.state[key.substr(0, dot + 1) + stage.pipeline_global_name(name)] = t;
  }
  return part;
}

std::string PipelineParallel::summary(const Model& stage, std::int64_t grad_accum) const {
  if (!on()) return "";
  const ModelConfig& whole = stage.pipeline_whole_config();
  const PipelineBounds enc = encoder_decoder_ ? stack_bounds(bounds_, stages_, false) : bounds_;
  const PipelineBounds dec = encoder_decoder_ ? stack_bounds(bounds_, stages_, true) : PipelineBounds();
  const auto [a, b] = pipeline_layers(whole.n_layers, stage_, stages_, enc);
  const int replicas = dist::size() / (stages_ * shards_);
  const std::int64_t micros = grad_accum / replicas;
  std::string held = std::to_string(a) + "-" + std::to_string(b - 1);
  if (encoder_decoder_) {  // a run of each stack
    const auto [da, db] = pipeline_layers(whole.decoder_layers(), stage_, stages_, dec);
    held += " (encoder) and " + std::to_string(da) + "-" + std::to_string(db - 1) + " (decoder)";
  }
  std::string schedule = one_f_one_b_ ? "1F1B" : "GPipe";
  if (encoder_decoder_) schedule += one_f_one_b_ ? " (interleaved over an encoder-decoder's two stacks)" : " (an encoder-decoder's)";
  char buf[400];
  std::snprintf(buf, sizeof buf, "pipeline parallel: %d stages, schedule %s, %lld micro-batches per step per pipeline, "
                "%d %s; stage %d holds layers %s; %s", stages_, schedule.c_str(), static_cast<long long>(micros), replicas,
                replicas == 1 ? "pipeline" : "pipelines", stage_, held.c_str(), ideal_bubble(micros).c_str());
  std::string out = buf;
  if (!bounds_.empty()) {  // what the memory planner balanced
    out += std::string("; ") + (encoder_decoder_ ? "encoder + decoder " : "") + "layers per stage" +
           (balanced_ ? " by the memory planner" : ", even") + " (planned peak):";
    for (std::size_t s = 0; s < static_cast<std::size_t>(stages_); ++s) {
      std::string layers = std::to_string(enc[s + 1] - enc[s]);
      if (encoder_decoder_) layers += " + " + std::to_string(dec[s + 1] - dec[s]);
      std::snprintf(buf, sizeof buf, " %s (%.1f MiB)", layers.c_str(), static_cast<double>(stage_bytes_[s]) / 1048576.0);
      out += buf;
    }
  }
  return out;
}

std::string PipelineParallel::timing() const {
  if (!on() || steps_ == 0) return "";
  char buf[240];
  std::snprintf(buf, sizeof buf, "pipeline: stage %d spent %.1f%% of its step time sending, receiving and waiting for the "
                "other stages (%.1f ms of %.1f ms per step; %s)", stage_, 100.0 * wait_s_ / step_s_,
                1e3 * wait_s_ / static_cast<double>(steps_), 1e3 * step_s_ / static_cast<double>(steps_),
                ideal_bubble(micros_).c_str());
  return buf;
}

std::string PipelineParallel::ideal_bubble(std::int64_t micros) const {
  char buf[160];
  if (!encoder_decoder_) {
    std::snprintf(buf, sizeof buf, "ideal bubble (P-1)/(M+P-1) = %.1f%%",
                  100.0 * (stages_ - 1) / static_cast<double>(micros + stages_ - 1));
    return buf;
  }
  const ScheduleModel model = model_encoder_decoder_schedule(stages_, micros, one_f_one_b_);
  std::snprintf(buf, sizeof buf, "ideal bubble %.1f%% (the schedule replayed with backward = 2 forward), "
                "at most %d graphs alive on this stage", 100.0 * model.bubble,
                model.peak_graphs[static_cast<std::size_t>(stage_)]);
  return buf;
}

}  // namespace tfm::train_detail
