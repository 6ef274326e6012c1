"""Reference for the arithmetic, activation and reduction ops: forward values and input
gradients of sum(op(inputs) * w) for a random w, written to math_ops.safetensors.

Keys: "<case>.<input>" for inputs, "<case>.w", "<case>.y", "<case>.grad.<input>".
"""
import os

import torch
import torch.nn.functional as F

from fixtures import save


def _case(out, name, fn, **inputs):
    leaves = {k: v.clone().requires_grad_(v.dtype == torch.float32) for k, v in inputs.items()}
    y = fn(**leaves)
    w = torch.randn_like(y)
    (y * w).sum().backward()
    out[name + ".w"] = w
    out[name + ".y"] = y
    for k, v in leaves.items():
        out[name + "." + k] = v
        if v.grad is not None:
            out[name + ".grad." + k] = v.grad


def _u(*shape, lo=-1.0, hi=1.0):
    return torch.rand(*shape) * (hi - lo) + lo


def make(out_dir):
    t = {}
    # Binary ops with broadcasting: (B,T,C)+(C), (B,1,C)+(1,T,1), equal shapes.
    shapes = {"btc_c": ((2, 5, 6), (6,)), "b1c_1t1": ((2, 1, 6), (1, 5, 1)), "same": ((4, 7), (4, 7))}
    for sname, (sa, sb) in shapes.items():
        _case(t, "add." + sname, lambda a, b: a + b, a=_u(*sa), b=_u(*sb))
        _case(t, "sub." + sname, lambda a, b: a - b, a=_u(*sa), b=_u(*sb))
        _case(t, "mul." + sname, lambda a, b: a * b, a=_u(*sa), b=_u(*sb))
        _case(t, "div." + sname, lambda a, b: a / b, a=_u(*sa), b=_u(*sb, lo=0.5, hi=2.0))
    # Non-contiguous operand: a is (7, 4) read transposed as (4, 7).
    _case(t, "mul.transposed", lambda a, b: a.t() * b, a=_u(7, 4), b=_u(7))

    # Unary maps over (3, 37); the C++ side also feeds them a transposed view.
    wide = _u(3, 37, lo=-6.0, hi=6.0)
    pos = _u(3, 37, lo=0.1, hi=4.0)
    unary = {
        "relu": (torch.relu, wide), "gelu": (F.gelu, wide),
        "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"), wide),
        "silu": (F.silu, wide), "sigmoid": (torch.sigmoid, wide), "tanh": (torch.tanh, wide),
        "exp": (torch.exp, _u(3, 37, lo=-10.0, hi=10.0)), "log": (torch.log, pos),
        "sqrt": (torch.sqrt, pos), "rsqrt": (torch.rsqrt, pos),
        "pow2": (lambda x: x.pow(2.0), wide), "pow1.5": (lambda x: x.pow(1.5), pos),
        "abs": (torch.abs, wide), "neg": (torch.neg, wide),
        "add_scalar": (lambda x: x + 0.75, wide), "mul_scalar": (lambda x: x * -1.25, wide),
        "div_scalar": (lambda x: x / 3.0, wide),
    }
    for name, (fn, x) in unary.items():
        _case(t, "unary." + name, lambda x, fn=fn: fn(x), x=x)
        _case(t, "unary_t." + name, lambda x, fn=fn: fn(x.t()), x=x.t().contiguous())

    # Reductions over (3, 5, 40).
    r = _u(3, 5, 40)
    reds = {
        "sum1": lambda x: x.sum(1), "sum_last_keep": lambda x: x.sum(-1, keepdim=True),
        "mean0": lambda x: x.mean(0), "mean2_keep": lambda x: x.mean(2, keepdim=True),
        "max1": lambda x: x.max(1).values, "max2_keep": lambda x: x.max(2, keepdim=True).values,
        "sum_all": lambda x: x.sum(), "mean_all": lambda x: x.mean(), "max_all": lambda x: x.max(),
        "sum_t": lambda x: x.transpose(0, 2).sum(1),
    }
    for name, fn in reds.items():
        _case(t, "reduce." + name, fn, x=r)
    t["reduce.argmax2"] = r.argmax(2)

    # Masking: a causal mask broadcast over the batch; where with three broadcast shapes.
    causal = torch.triu(torch.ones(5, 5, dtype=torch.uint8), diagonal=1)
    _case(t, "masked_fill", lambda x, mask: x.masked_fill(mask.bool(), -1e4), x=_u(2, 5, 5), mask=causal)
    _case(t, "where", lambda mask, a, b: torch.where(mask.bool(), a, b),
          mask=(torch.rand(2, 1, 6) > 0.5).to(torch.uint8), a=_u(5, 1), b=_u(6))

    save(os.path.join(out_dir, "math_ops.safetensors"), t)
