"""Random-weight GGUF files for the load-time benchmark (bench/gguf_load.sh), in llama.cpp's
conventions (gguf_convention.py): a GPT-2-size gpt2 (124M parameters, F32) and a 1.1B
llama-shaped model (TinyLlama's sizes: 2048 wide, 22 layers, 32 heads, 4 kv heads, FFN 5632,
32000 tokens; F16). Weights are one random 4 MiB pattern repeated (load time does not depend on
the values); the vocabulary is 256 byte tokens plus filler tokens, so llama.cpp accepts it.

  python3 tools/reference/make_gguf_bench.py OUT_DIR [gpt2]    (gpt2: only the GPT-2 file; the server
                                                              benchmark, bench/server/bench_server.sh)
  python3 tools/reference/make_gguf_bench.py OUT_DIR gpt2 CTX (a GPT-2 with a CTX-position table,
                                                              bench-gpt2-124m-ctxCTX-f32.gguf: the
                                                              prompt-cache benchmark's 2,000-token prompts)
"""
import os
import struct
import sys

import numpy as np

import gguf_convention as g
from ref_gguf import bytes_to_unicode

S, A = g.STRING, g.ARRAY


def vocab_meta(n):
    tokens = [bytes_to_unicode()[b] for b in range(256)] + [f"<filler{i}>" for i in range(n - 257)] + ["<|endoftext|>"]
    return [("tokenizer.ggml.model", (S, "gpt2")), ("tokenizer.ggml.pre", (S, "gpt-2")),
            ("tokenizer.ggml.tokens", (A, (S, tokens))),
            ("tokenizer.ggml.token_type", (A, (g.I32, [1] * (n - 1) + [3]))),
            ("tokenizer.ggml.merges", (A, (S, []))),
            ("tokenizer.ggml.bos_token_id", (g.U32, n - 1)), ("tokenizer.ggml.eos_token_id", (g.U32, n - 1))]


def write(path, meta, tensors, patterns):
    """tensors: (name, type name, torch-order shape). Data: patterns[type name], repeated."""
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(meta))
    for k, v in meta:
        head += g._str(k) + g._value(v)
    offset, sizes = 0, []  # (bytes, pattern)
    for name, tname, shape in tensors:
        _, block, bsize = g.GGML[tname]
        n = int(np.prod(shape)) // block * bsize
        ne = list(reversed(shape))
        head += g._str(name) + struct.pack("<I", len(ne)) + struct.pack("<%dQ" % len(ne), *ne)
        head += struct.pack("<IQ", g.GGML[tname][0], offset)
        sizes.append((n, patterns[tname]))
        offset += n + (-n) % 32
    head += b"\0" * ((-len(head)) % 32)
    with open(path + ".tmp", "wb") as f:
        f.write(head)
        for n, pattern in sizes:
            left = n
            while left > 0:
                k = min(left, len(pattern))
                f.write(pattern[:k])
                left -= k
            f.write(b"\0" * ((-n) % 32))
    os.replace(path + ".tmp", path)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(0)
    # GPT-2 small
    V, C, L, ctx = 50257, 768, 12, int(sys.argv[3]) if len(sys.argv) > 3 else 1024
    meta = [("general.architecture", (S, "gpt2")), ("general.name", (S, "bench-gpt2-124m")),
            ("gpt2.context_length", (g.U32, ctx)), ("gpt2.embedding_length", (g.U32, C)),
            ("gpt2.feed_forward_length", (g.U32, 4 * C)), ("gpt2.block_count", (g.U32, L)),
            ("gpt2.attention.head_count", (g.U32, 12)), ("gpt2.attention.layer_norm_epsilon", (g.F32, 1e-5))]
    ts = [("token_embd.weight", "F32", [V, C]), ("position_embd.weight", "F32", [ctx, C])]
    for i in range(L):
        b = f"blk.{i}."
        ts += [(b + "attn_norm.weight", "F32", [C]), (b + "attn_norm.bias", "F32", [C]),
               (b + "attn_qkv.weight", "F32", [3 * C, C]), (b + "attn_qkv.bias", "F32", [3 * C]),
               (b + "attn_output.weight", "F32", [C, C]), (b + "attn_output.bias", "F32", [C]),
               (b + "ffn_norm.weight", "F32", [C]), (b + "ffn_norm.bias", "F32", [C]),
               (b + "ffn_up.weight", "F32", [4 * C, C]), (b + "ffn_up.bias", "F32", [4 * C]),
               (b + "ffn_down.weight", "F32", [C, 4 * C]), (b + "ffn_down.bias", "F32", [C])]
    ts += [("output_norm.weight", "F32", [C]), ("output_norm.bias", "F32", [C])]
    p32 = (rng.standard_normal(1 << 20) * 0.02).astype(np.float32).tobytes()
    name = "bench-gpt2-124m-f32.gguf" if ctx == 1024 else f"bench-gpt2-124m-ctx{ctx}-f32.gguf"
    write(os.path.join(out, name), meta + vocab_meta(V), ts, {"F32": p32})
    if sys.argv[2:3] == ["gpt2"]:
        return
    # 1.1B llama (TinyLlama's shape)
    V, C, L, H, KV, FF = 32000, 2048, 22, 32, 4, 5632
    D = C // H
    meta = [("general.architecture", (S, "llama")), ("general.name", (S, "bench-llama-1.1b")),
            ("general.file_type", (g.U32, 1)),
            ("llama.context_length", (g.U32, 2048)), ("llama.embedding_length", (g.U32, C)),
            ("llama.block_count", (g.U32, L)), ("llama.feed_forward_length", (g.U32, FF)),
            ("llama.attention.head_count", (g.U32, H)), ("llama.attention.head_count_kv", (g.U32, KV)),
            ("llama.rope.freq_base", (g.F32, 10000.0)), ("llama.rope.dimension_count", (g.U32, D)),
            ("llama.attention.layer_norm_rms_epsilon", (g.F32, 1e-5))]
    ts = [("token_embd.weight", "F16", [V, C])]
    for i in range(L):
        b = f"blk.{i}."
        ts += [(b + "attn_norm.weight", "F32", [C]), (b + "attn_q.weight", "F16", [C, C]),
               (b + "attn_k.weight", "F16", [KV * D, C]), (b + "attn_v.weight", "F16", [KV * D, C]),
               (b + "attn_output.weight", "F16", [C, C]), (b + "ffn_norm.weight", "F32", [C]),
               (b + "ffn_gate.weight", "F16", [FF, C]), (b + "ffn_up.weight", "F16", [FF, C]),
               (b + "ffn_down.weight", "F16", [C, FF])]
    ts += [("output_norm.weight", "F32", [C]), ("output.weight", "F16", [V, C])]
    p16 = (rng.standard_normal(2 << 20) * 0.02).astype(np.float16).tobytes()
    write(os.path.join(out, "bench-llama-1.1b-f16.gguf"), meta + vocab_meta(V), ts, {"F32": p32, "F16": p16})


if __name__ == "__main__":
    main()
