// The per-thread tape, grad mode, gradient accumulation and the backward driver.
#include <string>
#include <vector>

#include "kernels/elementwise.h"
#include "tfm/autograd.h"
#include "tfm/error.h"

namespace tfm {
namespace {

struct Entry {
  const char* op;
  std::shared_ptr<AutogradMeta> out;  // the output whose gradient drives this entry
  autograd::BackwardFn fn;
};

thread_local std::vector<Entry> t_tape;
thread_local bool t_grad_enabled = true;
thread_local autograd::LeafGradHook t_leaf_hook;

}  // namespace

bool grad_enabled() { return t_grad_enabled; }
void set_grad_enabled(bool on) { t_grad_enabled = on; }

NoGradGuard::NoGradGuard() : previous_(t_grad_enabled) { t_grad_enabled = false; }
NoGradGuard::~NoGradGuard() { t_grad_enabled = previous_; }

namespace autograd {

bool needs_grad(std::initializer_list<const Tensor*> inputs) {
  if (!t_grad_enabled) return false;
  for (const Tensor* t : inputs)
    if (t != nullptr && t->requires_grad()) return true;
  return false;
}

void record(const char* op, Tensor& out, BackwardFn fn) {
  auto meta = std::make_shared<AutogradMeta>();
  meta->requires_grad = true;
  meta->is_leaf = false;
  out.set_autograd_meta(meta);
  t_tape.push_back(Entry{op, std::move(meta), std::move(fn)});
}

void accumulate(const Tensor& input, const Tensor& grad) {
  if (!input.requires_grad()) return;
  TFM_CHECK(grad.shape() == input.shape(), "backward", "gradient of shape ", shape_str(grad.shape()),
            " for a tensor of shape ", shape_str(input.shape()));
  AutogradMeta* meta = input.autograd_meta();
  Tensor g = grad.dtype() == DType::f32 && grad.is_contiguous() ? grad : Tensor::empty(grad.shape());
  if (g.storage() != grad.storage()) g.copy_(grad);
  if (!meta->grad.defined()) {
    // Stored by handle: the same buffer may also be another input's gradient (add's two
    // inputs share grad_out), so accumulation below never writes into it in place.
    meta->grad = g;
  } else {
    Tensor sum = Tensor::empty(g.shape());
    kernels::add(meta->grad.data<float>(), g.data<float>(), sum.data<float>(), g.numel());
    meta->grad = sum;
  }
  if (t_leaf_hook && meta->is_leaf) t_leaf_hook(meta);
}

void set_leaf_grad_hook(LeafGradHook hook) { t_leaf_hook = std::move(hook); }

Tensor checkpoint(const char* op, const std::function<Tensor()>& forward, std::function<Tensor()> recompute) {
  if (!t_grad_enabled) return forward();
  Tensor out;
  {
    NoGradGuard no_grad;
    out = forward();
  }
  record(op, out, [op, recompute = std::move(recompute)](const Tensor& grad_out) {
    // Backward closures run with grad mode off; the recomputation must record. The tape
    // being walked was taken out of t_tape by backward(), so this records onto an empty one
    // that the nested backward() below consumes.
    const bool previous = t_grad_enabled;
    t_grad_enabled = true;
    Tensor again;
    try {
      again = recompute();
    } catch (...) {
      t_grad_enabled = previous;
      throw;
    }
    t_grad_enabled = previous;
    TFM_CHECK(again.shape() == grad_out.shape(), op, "the recomputed output has shape ", shape_str(again.shape()),
              ", the forward pass gave ", shape_str(grad_out.shape()));
    if (again.requires_grad()) backward(again, grad_out);  // no input requires grad: nothing to do
  });
  return out;
}

std::size_t tape_size() { return t_tape.size(); }
void clear_tape() { t_tape.clear(); }

struct Tape::Entries {
  std::vector<Entry> list;
};
Tape::Tape() : entries_(std::make_unique<Entries>()) {}
Tape::~Tape() = default;
Tape::Tape(Tape&&) noexcept = default;
Tape& Tape::operator=(Tape&&) noexcept = default;
std::size_t Tape::size() const { return entries_->list.size(); }

// The thread's tape and the scoped one trade places, and trade back at the end.
TapeScope::TapeScope(Tape& tape) : tape_(tape) { t_tape.swap(tape_.entries_->list); }
TapeScope::~TapeScope() { t_tape.swap(tape_.entries_->list); }

}  // namespace autograd

void backward(const Tensor& root, const Tensor& root_grad) {
  TFM_CHECK(root.requires_grad(), "backward", "the tensor does not require grad (no recorded op "
            "reaches a parameter, or it was computed under NoGradGuard)");
  Tensor seed = root_grad.defined() ? root_grad : Tensor::ones(root.shape());
  autograd::accumulate(root, seed);
  // Take the tape so that ops run inside backward closures (which run with grad mode off)
  // cannot append to the one being walked.
  std::vector<Entry> tape;
  tape.swap(t_tape);
  NoGradGuard no_grad;
  try {
    for (std::size_t i = tape.size(); i-- > 0;) {
      Entry& e = tape[i];
      if (e.out->grad.defined()) {
        const Tensor g = e.out->grad;
        e.out->grad = Tensor();  // an intermediate's gradient is not needed after its entry
        e.fn(g);
      }
      e = Entry{};  // free the activations this entry kept alive as soon as possible
    }
  } catch (const Error& err) {
    throw Error("backward", std::string("while running the backward pass: ") + err.what());
  }
}

}  // namespace tfm
