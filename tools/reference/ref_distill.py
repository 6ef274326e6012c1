"""Knowledge distillation's loss as PyTorch computes it (Hinton et al. 2015; TinyBERT's hidden-state
term), for tests/parity/test_parity_distill.cpp:

    soft   = T^2 * mean over counted rows of KL(softmax(t / T) || softmax(s / T))
             (F.kl_div(log_softmax(s/T), log_softmax(t/T), log_target=True), summed over the vocabulary)
    hard   = F.cross_entropy(s, y, ignore_index=-100, label_smoothing=eps)
    hidden = mean over valid positions and teacher channels of (h_s W^T - h_t)^2
    loss   = alpha * soft + (1 - alpha) * hard + w * hidden

Rows whose target is -100 (padding) are left out of the soft term as the hard loss leaves them
out. The fixture holds the inputs, each term, the total, and the gradients of the total with
respect to the student logits, the student hidden states and the projection W, in float64."""
import os

import torch
import torch.nn.functional as F

from fixtures import save

T, ALPHA, EPS, W_HIDDEN = 2.5, 0.3, 0.1, 0.7


def make(out):
    g = torch.Generator().manual_seed(4242)
    B, L, V, CS, CT = 3, 5, 11, 6, 8
    student = (torch.randn(B * L, V, generator=g) * 2).double().requires_grad_()
    teacher = (torch.randn(B * L, V, generator=g) * 3).double()
    targets = torch.randint(0, V, (B * L,), generator=g)
    targets[[2, 7, 8, 14]] = -100  # padding rows: out of both the hard and the soft term
    counted = (targets != -100).double()
    log_q = F.log_softmax(student / T, dim=-1)
    log_p = F.log_softmax(teacher / T, dim=-1)
    kl_rows = F.kl_div(log_q, log_p, reduction="none", log_target=True).sum(-1)
    soft = T * T * (kl_rows * counted).sum() / counted.sum()
    hard = F.cross_entropy(student, targets, ignore_index=-100, label_smoothing=EPS)

    h_s = torch.randn(B, L, CS, generator=g).double().requires_grad_()
    h_t = torch.randn(B, L, CT, generator=g).double()
    proj = (torch.randn(CT, CS, generator=g) * 0.4).double().requires_grad_()
    lens = torch.tensor([5, 3, 1])
    mask = (torch.arange(L)[None, :] < lens[:, None]).double()  # (B, L)
    sq = ((h_s @ proj.T - h_t) ** 2).sum(-1)
    hidden = (sq * mask).sum() / (mask.sum() * CT)

    total = ALPHA * soft + (1 - ALPHA) * hard + W_HIDDEN * hidden
    total.backward()
    f = lambda t: t.detach().float()
    save(os.path.join(out, "distill_loss.safetensors"), {
        "student": f(student), "teacher": f(teacher), "targets": targets, "counted": f(counted),
        "h_student": f(h_s), "h_teacher": f(h_t), "proj": f(proj), "mask": f(mask),
        "soft": f(soft).reshape(1), "hard": f(hard).reshape(1), "hidden": f(hidden).reshape(1),
        "total": f(total).reshape(1),
        "grad_student": f(student.grad), "grad_h_student": f(h_s.grad), "grad_proj": f(proj.grad),
    }, metadata={"temperature": T, "alpha": ALPHA, "label_smoothing": EPS, "hidden_weight": W_HIDDEN})
