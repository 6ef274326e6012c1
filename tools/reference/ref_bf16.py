"""Reference for bf16 mixed precision (kernels/gemm_bf16.h): PyTorch's fp32 -> bf16 rounding
(Tensor.bfloat16(): round to nearest even) on values that include ties and tiny numbers, and
torch's CPU bf16 matmul (bf16 operands, fp32 accumulation, bf16 result) and an autocast
Linear, for tests/parity/test_parity_bf16.cpp."""
import os

import torch
import torch.nn.functional as F

from fixtures import save


def make(out):
    # TFM_REF_TORCH_NO_MKLDNN=1 makes torch take its AVX2-only-CPU path here too (to check the
    # test's handling of it on an AVX-512 machine).
    if os.environ.get("TFM_REF_TORCH_NO_MKLDNN"):
        torch.backends.mkldnn.enabled = False
    g = torch.Generator().manual_seed(16)
    # Rounding: random values, exact ties (bf16 value + half an ulp), and values near the
    # bottom of the normal range.
    base = torch.randn(4000, generator=g)
    ties = base.bfloat16().float() * (1 + 2.0 ** -8)  # halfway between bf16 neighbours (mostly)
    small = torch.randn(200, generator=g) * 1e-37
    x = torch.cat([base, ties, small])
    a = torch.randn(37, 130, generator=g)
    b = torch.randn(130, 45, generator=g)
    # torch's CPU bf16 matmul depends on the CPU: with AVX-512 it runs oneDNN (fp32
    # accumulation, one rounding to bf16 at the end); without (AVX2-only CPUs) its fallback
    # kernel rounds the running sums to bf16 (errors ~100x larger: 0.68 here where oneDNN's
    # is 0.08). The CPU-independent reference of the same contract is the fp32 product of the
    # bf16-rounded operands, rounded once to bf16; the native result is kept beside it with a
    # flag saying which of the two it is.
    y = a.bfloat16() @ b.bfloat16()
    y_fp32acc = (a.bfloat16().float() @ b.bfloat16().float()).bfloat16()
    exact = (a.bfloat16().double() @ b.bfloat16().double()).float()
    ulp = torch.ldexp(torch.ones(()), torch.frexp(y_fp32acc.float().abs())[1] - 8)
    native_is_fp32acc = bool(((y.float() - y_fp32acc.float()).abs() <= ulp).all())
    xl = torch.randn(6, 40, generator=g, requires_grad=True)
    wl = torch.randn(24, 40, generator=g, requires_grad=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        yl = F.linear(xl, wl)
    gl = torch.randn(6, 24, generator=g)
    (yl.float() * gl).sum().backward()
    save(os.path.join(out, "bf16_matmul.safetensors"),
         {"x": x, "x_bf16": x.bfloat16().float(), "a": a, "b": b, "y_torch_bf16": y.float(),
          "y_torch_fp32acc": y_fp32acc.float(), "torch_bf16_accumulates_in_fp32": torch.tensor([float(native_is_fp32acc)]),
          "y_exact": exact, "xl": xl.detach(), "wl": wl.detach(), "gl": gl, "yl": yl.float(),
          "grad.xl": xl.grad, "grad.wl": wl.grad})
