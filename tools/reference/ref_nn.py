"""Reference for the nn ops: softmax family, LayerNorm, RMSNorm, embedding, cross-entropy,
concat/split. Each fixture holds the inputs, an upstream gradient w, the output y and the
gradient of sum(y * w) with respect to every input (grad.<name>). "Strided" cases apply
the op to a transposed / sliced view; the C++ test builds the same view."""
import os

import torch
import torch.nn.functional as F

from fixtures import grads, save


def _case(out, name, fn, leaves, extra=None):
    assert not {"w", "y"} & (set(leaves) | set(extra or {})), "w and y are reserved fixture keys"
    leaves = {k: v.clone().requires_grad_(True) for k, v in leaves.items()}
    y = fn(**leaves)
    w = torch.randn_like(y)
    (y * w).sum().backward()
    save(os.path.join(out, f"nn_{name}.safetensors"), {**leaves, **(extra or {}), "w": w, "y": y, **grads(leaves)})


def _rms_norm(x, weight, eps=1e-6):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def make(out):
    torch.manual_seed(1234)
    x = torch.randn(4, 5, 33) * 3
    _case(out, "softmax_last", lambda x: torch.softmax(x, -1), {"x": x})
    _case(out, "log_softmax_dim1", lambda x: torch.log_softmax(x, 1), {"x": x})
    _case(out, "softmax_strided", lambda x: torch.softmax(x.transpose(1, 2)[:, ::2], -1), {"x": x})
    _case(out, "log_softmax_strided", lambda x: torch.log_softmax(x.transpose(0, 2), 0), {"x": x})

    xl = torch.randn(3, 7, 257) * 2 + 0.5
    wl, bl = torch.randn(257), torch.randn(257)
    _case(out, "layer_norm", lambda x, weight, bias: F.layer_norm(x, (257,), weight, bias, 1e-5),
          {"x": xl, "weight": wl, "bias": bl})
    xs = torch.randn(32, 6, 4)
    ws, bs = torch.randn(6), torch.randn(6)
    _case(out, "layer_norm_strided", lambda x, weight, bias: F.layer_norm(x.transpose(1, 2), (6,), weight, bias, 1e-5),
          {"x": xs, "weight": ws, "bias": bs})
    _case(out, "rms_norm", lambda x, weight: _rms_norm(x, weight), {"x": xl, "weight": wl})
    _case(out, "rms_norm_strided", lambda x, weight: _rms_norm(x.transpose(1, 2), weight), {"x": xs, "weight": ws})

    ids = torch.randint(0, 11, (3, 7), dtype=torch.int64)
    ids[0, 0] = 2  # make sure the padding row is used
    _case(out, "embedding", lambda table: F.embedding(ids, table, padding_idx=2), {"table": torch.randn(11, 6)},
          {"ids": ids})

    n, v = 9, 13
    logits = torch.randn(n, v) * 2
    tgt = torch.randint(0, v, (n,), dtype=torch.int64)
    tgt[[1, 5]] = -100
    for red in ("mean", "sum", "none"):
        for eps in (0.0, 0.1):
            _case(out, f"cross_entropy_{red}_{int(eps * 10)}",
                  lambda logits: F.cross_entropy(logits, tgt, ignore_index=-100, label_smoothing=eps, reduction=red),
                  {"logits": logits}, {"targets": tgt})
    # Custom ignore_index, i32 targets, transposed (non-contiguous) logits given as (V, N).
    tgt2 = tgt.clone()
    tgt2[[1, 5]] = 3
    tgt2[[0, 7]] = 3
    _case(out, "cross_entropy_strided", lambda logits_t: F.cross_entropy(logits_t.t(), tgt2, ignore_index=3,
                                                                          label_smoothing=0.2),
          {"logits_t": logits.t().contiguous()}, {"targets": tgt2.to(torch.int32)})

    # CTC through log_softmax (PyTorch's kernel returns the logits' gradient; composed with
    # log_softmax both agree). Repeated labels, an empty target, rows shorter than T, the blank
    # first or last, and a row no alignment fits (zero_infinity).
    ctc_logits = torch.randn(4, 12, 6) * 2
    ctc_tgt = torch.tensor([[1, 1, 2, 3, 3], [4, 2, 4, 0, 0], [0, 0, 0, 0, 0], [2, 2, 2, 2, 2]])
    ctc_in = torch.tensor([12, 9, 7, 8])
    ctc_tl = torch.tensor([5, 3, 0, 5])
    for red in ("mean", "sum", "none"):
        _case(out, f"ctc_{red}", lambda logits: F.ctc_loss(F.log_softmax(logits, -1).transpose(0, 1), ctc_tgt, ctc_in,
                                                           ctc_tl, blank=0, reduction=red, zero_infinity=True),
              {"logits": ctc_logits}, {"targets": ctc_tgt, "input_lengths": ctc_in, "target_lengths": ctc_tl})
    ctc_in5 = torch.tensor([12, 12, 3, 11])  # the same targets: 0 is a label when the blank is 5
    _case(out, "ctc_blank_last", lambda logits: F.ctc_loss(F.log_softmax(logits, -1).transpose(0, 1), ctc_tgt, ctc_in5,
                                                          ctc_tl, blank=5, reduction="mean"),
          {"logits": ctc_logits}, {"targets": ctc_tgt.to(torch.int32), "input_lengths": ctc_in5, "target_lengths": ctc_tl})

    a, b = torch.randn(2, 3, 4), torch.randn(2, 4, 5)
    _case(out, "concat", lambda a, b: torch.cat([a, b.transpose(1, 2), a[:, :1]], 1), {"a": a, "b": b})
    xc = torch.randn(2, 9, 3)
    def split_fn(x):
        p0, p1, p2 = torch.split(x, [2, 3, 4], 1)
        return torch.cat([torch.softmax(p0, -1), p2, torch.log_softmax(p1, 1)], 1)
    _case(out, "split", split_fn, {"x": xc})
