// Reverse-mode automatic differentiation over a tape.
//
// While grad mode is on, every op whose inputs require gradients appends one entry to the
// calling thread's tape: a closure that, given d(loss)/d(output), adds d(loss)/d(input) into
// each input. backward(loss) runs the tape from the end, then clears it (one graph at a
// time per thread; there is no retain_graph). Gradients accumulate into leaves — tensors
// marked with requires_grad_() — until zero_grad().
//
//   Tensor w = Tensor::randn({C, C}, 1).requires_grad_();
//   Tensor loss = tfm::mean(tfm::matmul(x, w));
//   tfm::backward(loss);          // w.grad() now holds d loss / d w
//
// Inference runs under NoGradGuard: nothing is recorded and no activation is kept alive.
#pragma once

#include <cstddef>
#include <functional>
#include <initializer_list>
#include <memory>

#include "tfm/tensor.h"

namespace tfm {

struct AutogradMeta {
  bool requires_grad = false;
  bool is_leaf = true;  // false for outputs of recorded ops
  Tensor grad;          // accumulated gradient: f32, contiguous, same shape as the tensor
};

bool grad_enabled();
void set_grad_enabled(bool on);

// RAII: disables recording for its lifetime (restores the previous mode).
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

// Run the tape backwards from `root`. `root_grad` defaults to ones (so a scalar loss needs
// none). Throws if root does not require grad.
void backward(const Tensor& root, const Tensor& root_grad = Tensor());

namespace autograd {

// For op implementations ------------------------------------------------------------------
// Given d(loss)/d(output) (contiguous f32, output's shape), accumulate into the inputs.
using BackwardFn = std::function<void(const Tensor& grad_out)>;

// True when grad mode is on and at least one input requires grad.
bool needs_grad(std::initializer_list<const Tensor*> inputs);
// Mark `out` as a non-leaf that requires grad and append its backward closure.
void record(const char* op, Tensor& out, BackwardFn fn);
// Add `grad` (input's shape) into input's gradient, if input requires grad.
void accumulate(const Tensor& input, const Tensor& grad);

// Activation checkpointing: runs `forward` with recording off, so none of its intermediate
// tensors outlive it, and records one entry for the result. When the backward pass reaches
// that entry it runs `recompute` with recording on (on a tape of its own) and back-propagates
// the incoming gradient through it. `recompute` must compute exactly what `forward` did
// (same inputs, same random draws); the gradients are then the same as without
// checkpointing, bit for bit. With grad mode off this is just forward().
Tensor checkpoint(const char* op, const std::function<Tensor()>& forward, std::function<Tensor()> recompute);

// Called on this thread after every accumulation into a leaf's gradient (a parameter's),
// with that leaf's meta. Data-parallel training uses it to start the all-reduce of a group of
// parameters as soon as their gradients are final, while the backward pass goes on. An empty
// function removes it.
using LeafGradHook = std::function<void(AutogradMeta*)>;
void set_leaf_grad_hook(LeafGradHook hook);

std::size_t tape_size();
void clear_tape();  // drop recorded entries (and the activations they keep alive)

// A recording of its own. A pipeline schedule keeps several micro-batches' graphs alive and
// runs their backward passes in its own order: each forward records onto its micro-batch's
// tape, and that tape is put back before its backward pass, which walks it alone.
class Tape {
 public:
  Tape();
  ~Tape();
  Tape(Tape&&) noexcept;
  Tape& operator=(Tape&&) noexcept;
  std::size_t size() const;

 private:
  friend class TapeScope;
  struct Entries;
  std::unique_ptr<Entries> entries_;
};

// While it lives, the thread records onto (and backward() walks) `tape` instead of its own.
class TapeScope {
 public:
  explicit TapeScope(Tape& tape);
  ~TapeScope();
  TapeScope(const TapeScope&) = delete;
  TapeScope& operator=(const TapeScope&) = delete;

 private:
  Tape& tape_;
};

}  // namespace autograd
}  // namespace tfm
