"""Reference for matmul and linear: forward and gradients, with broadcast batch dims and
transposed (non-contiguous) operands. The C++ test rebuilds the same views from the stored
leaves (a transpose of the stored tensor is noted in each case's comment)."""
import os

import torch
import torch.nn.functional as F

from fixtures import grads, save


def _case(out, name, leaves, fn):
    leaves = {k: v.clone().requires_grad_(True) for k, v in leaves.items()}
    y = fn(**leaves)
    g = torch.randn_like(y)
    (y * g).sum().backward()
    save(os.path.join(out, name + ".safetensors"), {**leaves, "y": y, "g": g, **grads(leaves)})


def make(out):
    r = torch.randn
    # plain 2-D
    _case(out, "matmul_2d", {"a": r(7, 5), "b": r(5, 3)}, lambda a, b: a @ b)
    # batch dims broadcast: (2,1,4,6) @ (3,6,5) -> (2,3,4,5)
    _case(out, "matmul_bcast", {"a": r(2, 1, 4, 6), "b": r(3, 6, 5)}, lambda a, b: a @ b)
    # transposed operands: a = at.transpose(-1,-2) with at (3,6,4); b = bt.t() with bt (5,6)
    _case(out, "matmul_trans", {"at": r(3, 6, 4), "bt": r(5, 6)},
          lambda at, bt: at.transpose(-1, -2) @ bt.t())
    # activations @ shared weight, the Linear-like fold: (2,33,40) @ (40,70)
    _case(out, "matmul_shared_rhs", {"a": r(2, 33, 40), "b": r(40, 70)}, lambda a, b: a @ b)
    # 1-D operands: (6) @ (3,6,4) and (2,5,6) @ (6)
    _case(out, "matmul_vecmat", {"a": r(6), "b": r(3, 6, 4)}, lambda a, b: a @ b)
    _case(out, "matmul_matvec", {"a": r(2, 5, 6), "b": r(6)}, lambda a, b: a @ b)
    # linear with bias
    _case(out, "linear_bias", {"x": r(2, 3, 8), "w": r(5, 8), "b": r(5)}, lambda x, w, b: F.linear(x, w, b))
    # linear without bias on a transposed input: x = xt.transpose(0,1) with xt (3,2,8);
    # and a transposed weight: w = wt.t() with wt (8,5)
    _case(out, "linear_trans", {"xt": r(3, 2, 8), "wt": r(8, 5)},
          lambda xt, wt: F.linear(xt.transpose(0, 1), wt.t()))
