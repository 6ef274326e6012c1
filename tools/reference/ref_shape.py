"""Reference for shape ops: a chain of views whose gradient checks the view backward rules."""
import os

import torch

from fixtures import grads, save


def make(out):
    x = torch.randn(3, 1, 5, requires_grad=True)
    y = x.expand(4, 3, 6, 5).permute(3, 1, 0, 2)[1:5:2, :, 1:, :].reshape(2, 3, -1)
    w = torch.randn_like(y)
    (y * w).sum().backward()
    save(os.path.join(out, "shape_views.safetensors"), {"x": x, "w": w, "y": y, **grads({"x": x})})
