"""Write PyTorch reference tensors as .safetensors files for the C++ parity tests.

Debian's python3-torch (1.13) has no safetensors module, so this is a small writer of the
format itself: 8-byte little-endian header length, JSON header, raw little-endian data.
"""
import json
import os
import struct

import torch

_DTYPES = {
    torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16",
    torch.int32: "I32", torch.int64: "I64", torch.int8: "I8", torch.uint8: "U8",
}


def save(path, tensors, metadata=None):
    """tensors: dict name -> torch.Tensor (any layout; written contiguous)."""
    header, blobs, offset = {}, [], 0
    if metadata:
        header["__metadata__"] = {k: str(v) for k, v in metadata.items()}
    for name in sorted(tensors):
        t = tensors[name].detach().contiguous().cpu()
        if t.dtype == torch.bfloat16:
            raw = t.view(torch.int16).numpy().tobytes()
        else:
            raw = t.numpy().tobytes()
        header[name] = {"dtype": _DTYPES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)


def grads(named):
    """dict name -> leaf tensor: returns {"grad." + name: its .grad}."""
    return {"grad." + k: v.grad for k, v in named.items() if v.grad is not None}


def load(path):
    """The tensors of a .safetensors file (the dtypes save writes), as torch tensors."""
    names = {v: k for k, v in _DTYPES.items()}
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        a, b = e["data_offsets"]
        dtype = names[e["dtype"]]
        raw = bytearray(data[a:b])
        t = torch.frombuffer(raw, dtype=torch.int16 if dtype == torch.bfloat16 else dtype) if raw else torch.empty(0, dtype=dtype)
        out[name] = (t.view(torch.bfloat16) if dtype == torch.bfloat16 else t).reshape(e["shape"]).clone()
    return out
