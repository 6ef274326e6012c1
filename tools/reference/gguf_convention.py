"""A GGUF writer and the block (de)quantizers, written from the format's public definitions
(ggml/docs/gguf.md, gguf-py/gguf/constants.py and quants.py) and llama.cpp's
convert_hf_to_gguf.py conventions, in numpy. Debian has no gguf-py; this is the reference
the engine's GGUF reader is tested against, independent of the engine's own writer.

Conventions followed (convert_hf_to_gguf.py):
  * tensor dims are written innermost first (a torch (out, in) weight has ne = [in, out]);
  * llama: q_proj/k_proj rows permuted per head, reshape(n_head, 2, D/2, ...).swapaxes(1, 2),
    because llama.cpp's llama architecture rotates adjacent pairs; k uses n_kv_heads;
  * gpt2: Conv1D weights (c_attn, c_proj, c_fc) transposed to (out, in);
  * tied embeddings: no output.weight tensor.
"""
import struct

import numpy as np

# gguf value types
U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
# ggml tensor types: (id, elements per block, bytes per block)
GGML = {"F32": (0, 1, 4), "F16": (1, 1, 2), "Q4_0": (2, 32, 18), "Q4_1": (3, 32, 20), "Q5_0": (6, 32, 22),
        "Q8_0": (8, 32, 34), "Q4_K": (12, 256, 144), "Q5_K": (13, 256, 176), "Q6_K": (14, 256, 210),
        "BF16": (30, 1, 2)}
QK_K = 256


def _str(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def _value(v):
    """(type, python value) -> bytes, type included."""
    t, x = v
    if t == STRING:
        return struct.pack("<I", t) + _str(x)
    if t == ARRAY:
        et, items = x
        out = struct.pack("<IIQ", ARRAY, et, len(items))
        if et == STRING:
            return out + b"".join(_str(s) for s in items)
        fmt = {U8: "B", I8: "b", U16: "H", I16: "h", U32: "I", I32: "i", F32: "f", BOOL: "?", U64: "Q", I64: "q",
               F64: "d"}[et]
        return out + struct.pack("<%d%s" % (len(items), fmt), *items)
    fmt = {U8: "B", I8: "b", U16: "H", I16: "h", U32: "I", I32: "i", F32: "f", BOOL: "?", U64: "Q", I64: "q",
           F64: "d"}[t]
    return struct.pack("<I" + fmt, t, x)


def write_gguf(path, metadata, tensors, alignment=32, version=3):
    """metadata: list of (key, (type, value)); tensors: list of (name, type name, raw bytes,
    torch-order shape). Raw bytes are already encoded in the tensor's type."""
    head = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(metadata))
    for k, v in metadata:
        head += _str(k) + _value(v)
    offset, infos, blobs = 0, b"", []
    for name, tname, raw, shape in tensors:
        ne = list(reversed(shape))
        infos += _str(name) + struct.pack("<I", len(ne)) + struct.pack("<%dQ" % len(ne), *ne)
        infos += struct.pack("<IQ", GGML[tname][0], offset)
        pad = (-len(raw)) % alignment
        blobs.append(raw + b"\0" * pad)
        offset += len(raw) + pad
    head += infos
    head += b"\0" * ((-len(head)) % alignment)
    with open(path, "wb") as f:
        f.write(head)
        for b in blobs:
            f.write(b)


def encode(a, tname):
    a = np.ascontiguousarray(a, dtype=np.float32)
    if tname == "F32":
        return a.tobytes()
    if tname == "F16":
        return a.astype(np.float16).tobytes()
    if tname == "Q8_0":
        return quantize_q8_0(a.reshape(-1)).tobytes()
    raise ValueError(tname)


# ---- llama.cpp's layout conventions ------------------------------------------------------------
def permute_qk(w, n_head):
    """convert_hf_to_gguf.py's LlamaModel.permute (Hugging Face rotate-half rows -> pairs)."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


# ---- block formats (gguf-py/gguf/quants.py's definitions) --------------------------------------
def np_roundf(n):
    """Round half away from zero (ggml's roundf)."""
    a = np.abs(n)
    floored = np.floor(a)
    b = floored + np.floor(2 * (a - floored))
    return np.sign(n) * b


def quantize_q8_0(x):
    blocks = x.reshape(-1, 32).astype(np.float32)
    d = np.abs(blocks).max(axis=1, keepdims=True) / np.float32(127)
    with np.errstate(divide="ignore"):
        inv = np.where(d == 0, np.float32(0), np.float32(1) / d).astype(np.float32)
    qs = np_roundf(blocks * inv)
    return np.concatenate([d.astype(np.float16).view(np.uint8), qs.astype(np.int8).view(np.uint8)], axis=1)


def _f16(b):
    return b.copy().view(np.float16).astype(np.float32)


def dequant_q8_0(b):
    return (b[:, 2:].copy().view(np.int8).astype(np.float32) * _f16(b[:, :2]))


def dequant_q4_0(b):
    d = _f16(b[:, :2])
    qs = b[:, 2:]
    q = np.concatenate([qs & 0x0F, qs >> 4], axis=1).astype(np.int8) - np.int8(8)
    return d * q.astype(np.float32)


def dequant_q4_1(b):
    d, m = _f16(b[:, :2]), _f16(b[:, 2:4])
    qs = b[:, 4:]
    q = np.concatenate([qs & 0x0F, qs >> 4], axis=1).astype(np.float32)
    return d * q + m


def dequant_q5_0(b):
    d = _f16(b[:, :2])
    qh = b[:, 2:6].copy().view(np.uint32).reshape(-1, 1) >> np.arange(32, dtype=np.uint32).reshape(1, 32)
    qh = (qh & 1).astype(np.uint8)
    qs = b[:, 6:]
    ql = np.concatenate([qs & 0x0F, qs >> 4], axis=1)
    return d * ((ql | (qh << 4)).astype(np.int8) - np.int8(16)).astype(np.float32)


def _scale_min_k4(s):
    """12 packed bytes -> (8 scales, 8 mins), 6 bits each."""
    d, m, md = s[:, 0:4], s[:, 4:8], s[:, 8:12]
    sc = np.concatenate([d & 0x3F, (md & 0x0F) | ((d >> 2) & 0x30)], axis=1)
    mn = np.concatenate([m & 0x3F, (md >> 4) | ((m >> 2) & 0x30)], axis=1)
    return sc.astype(np.float32), mn.astype(np.float32)


def dequant_q4_k(b):
    n = b.shape[0]
    d, dmin = _f16(b[:, 0:2]), _f16(b[:, 2:4])
    sc, mn = _scale_min_k4(b[:, 4:16])
    qs = b[:, 16:].reshape(n, 4, 1, 32) >> np.array([0, 4], dtype=np.uint8).reshape(1, 1, 2, 1)
    q = (qs & 0x0F).reshape(n, 8, 32).astype(np.float32)
    return ((d * sc).reshape(n, 8, 1) * q - (dmin * mn).reshape(n, 8, 1)).reshape(n, QK_K)


def dequant_q5_k(b):
    n = b.shape[0]
    d, dmin = _f16(b[:, 0:2]), _f16(b[:, 2:4])
    sc, mn = _scale_min_k4(b[:, 4:16])
    qh = b[:, 16:48].reshape(n, 1, 1, 32) >> np.arange(8, dtype=np.uint8).reshape(1, 1, 8, 1)
    ql = b[:, 48:].reshape(n, 4, 1, 32) >> np.array([0, 4], dtype=np.uint8).reshape(1, 1, 2, 1)
    q = ((ql & 0x0F).reshape(n, 8, 32) | ((qh & 1).reshape(n, 8, 32) << 4)).astype(np.float32)
    return ((d * sc).reshape(n, 8, 1) * q - (dmin * mn).reshape(n, 8, 1)).reshape(n, QK_K)


def dequant_q6_k(b):
    n = b.shape[0]
    ql, qh = b[:, :128], b[:, 128:192]
    scales = b[:, 192:208].copy().view(np.int8).astype(np.float32)
    d = _f16(b[:, 208:210])
    dd = (d * scales).reshape(n, 16, 1)
    ql = (ql.reshape(n, 2, 1, 64) >> np.array([0, 4], dtype=np.uint8).reshape(1, 1, 2, 1)) & 0x0F
    ql = ql.reshape(n, 8, 32)
    qh = (qh.reshape(n, 2, 1, 32) >> np.array([0, 2, 4, 6], dtype=np.uint8).reshape(1, 1, 4, 1)) & 0x03
    qh = qh.reshape(n, 8, 32)
    q = ((ql | (qh << 4)).astype(np.int8) - np.int8(32)).reshape(n, 16, 16).astype(np.float32)
    return (dd * q).reshape(n, QK_K)


# ---- reference quantizers (ggml-quants.c's quantize_row_*_ref, no importance weights) ------------
# Scalar float32 loops on purpose: every operation rounds to float32 in ggml's order, so the bytes
# equal the C reference's (numpy 1.x would promote a float32 mixed with a Python number to float64,
# hence the explicit F(...) around every constant).
F = np.float32


def _nearest_int(v):
    return int(np.rint(F(v)))  # ggml's nearest_int: round half to even


def quantize_q4_0(x):
    blocks = x.reshape(-1, 32).astype(np.float32)
    out = np.zeros((blocks.shape[0], 18), dtype=np.uint8)
    for b, v in enumerate(blocks):
        amax, mx = F(0), F(0)
        for t in v:
            if amax < abs(t):
                amax, mx = abs(t), t
        d = F(mx / F(-8))
        inv = F(F(1) / d) if d != 0 else F(0)
        out[b, :2] = np.array([d], dtype=np.float16).view(np.uint8)
        q = [min(15, int(np.int8(np.trunc(F(F(t * inv) + F(8.5)))))) for t in v]
        out[b, 2:] = [(q[j] & 0xFF) | ((q[j + 16] & 0xFF) << 4) & 0xFF for j in range(16)]
    return out


def _fit_scale_min(x, weights, nmax, rmin, rdelta, nstep):
    """make_qkx2_quants (use_mad false): returns (scale, the_min, L)."""
    n = len(x)
    mn, mx = x[0], x[0]
    sum_w = weights[0]
    sum_x = F(sum_w * x[0])
    for i in range(1, n):
        mn = x[i] if x[i] < mn else mn
        mx = x[i] if x[i] > mx else mx
        sum_w = F(sum_w + weights[i])
        sum_x = F(sum_x + F(weights[i] * x[i]))
    if mn > 0:
        mn = F(0)
    if mx == mn:
        return F(0), F(-mn), [0] * n
    iscale = F(F(nmax) / F(mx - mn))
    scale = F(F(1) / iscale)
    L = [max(0, min(nmax, _nearest_int(F(iscale * F(x[i] - mn))))) for i in range(n)]
    best = F(0)
    for i in range(n):
        diff = F(F(F(scale * F(L[i])) + mn) - x[i])
        best = F(best + F(weights[i] * F(diff * diff)))
    for step in range(nstep + 1):
        iscale = F(F(F(rmin + F(rdelta * F(step))) + F(nmax)) / F(mx - mn))
        sum_l = sum_l2 = sum_xl = F(0)
        Laux = []
        for i in range(n):
            l = max(0, min(nmax, _nearest_int(F(iscale * F(x[i] - mn)))))
            Laux.append(l)
            wl = F(weights[i] * F(l))
            sum_l = F(sum_l + wl)
            sum_l2 = F(sum_l2 + F(wl * F(l)))
            sum_xl = F(sum_xl + F(wl * x[i]))
        D = F(F(sum_w * sum_l2) - F(sum_l * sum_l))
        if D > 0:
            this_scale = F(F(F(sum_w * sum_xl) - F(sum_x * sum_l)) / D)
            this_min = F(F(F(sum_l2 * sum_x) - F(sum_l * sum_xl)) / D)
            if this_min > 0:
                this_min = F(0)
                this_scale = F(sum_xl / sum_l2)
            cur = F(0)
            for i in range(n):
                diff = F(F(F(this_scale * F(Laux[i])) + this_min) - x[i])
                cur = F(cur + F(weights[i] * F(diff * diff)))
            if cur < best:
                L, best, scale, mn = Laux, cur, this_scale, this_min
    return scale, F(-mn), L


def quantize_q4_k(x):
    rows = x.reshape(-1, QK_K).astype(np.float32)
    out = np.zeros((rows.shape[0], 144), dtype=np.uint8)
    for b, xb in enumerate(rows):
        L = [0] * QK_K
        scales, mins = [], []
        for j in range(8):
            xs = xb[32 * j:32 * j + 32]
            sum_x2 = F(0)
            for t in xs:
                sum_x2 = F(sum_x2 + F(t * t))
            av_x = F(np.sqrt(F(sum_x2 / F(32))))
            w = [F(av_x + abs(t)) for t in xs]
            sc, m, Lj = _fit_scale_min(xs, w, 15, F(-1.0), F(0.1), 20)
            scales.append(sc)
            mins.append(m)
            L[32 * j:32 * j + 32] = Lj
        max_scale, max_min = F(0), F(0)
        for j in range(8):
            max_scale = scales[j] if scales[j] > max_scale else max_scale
            max_min = mins[j] if mins[j] > max_min else max_min
        inv_scale = F(F(63) / max_scale) if max_scale > 0 else F(0)
        inv_min = F(F(63) / max_min) if max_min > 0 else F(0)
        sb = [0] * 12
        for j in range(8):
            ls = min(63, _nearest_int(F(inv_scale * scales[j])) & 0xFF)
            lm = min(63, _nearest_int(F(inv_min * mins[j])) & 0xFF)
            if j < 4:
                sb[j], sb[j + 4] = ls, lm
            else:
                sb[j + 4] = (ls & 0xF) | ((lm & 0xF) << 4)
                sb[j - 4] |= (ls >> 4) << 6
                sb[j] |= (lm >> 4) << 6
        dh = np.array([F(max_scale / F(63)), F(max_min / F(63))], dtype=np.float16)
        d, dmin = F(dh[0]), F(dh[1])
        for j in range(8):
            if j < 4:
                sc, m = sb[j] & 63, sb[j + 4] & 63
            else:
                sc, m = (sb[j + 4] & 0xF) | ((sb[j - 4] >> 6) << 4), (sb[j + 4] >> 4) | ((sb[j] >> 6) << 4)
            dd = F(d * F(sc))
            if dd == 0:
                continue
            dm = F(dmin * F(m))
            for i in range(32):
                L[32 * j + i] = max(0, min(15, _nearest_int(F(F(xb[32 * j + i] + dm) / dd))))
        qs = [0] * 128
        for j in range(0, QK_K, 64):
            for l in range(32):
                qs[j // 2 + l] = L[j + l] | (L[j + l + 32] << 4)
        out[b, :4] = dh.view(np.uint8)
        out[b, 4:16] = sb
        out[b, 16:] = qs
    return out


def _fit_scale_symmetric(x, nmax):
    """make_qx_quants with rmse_type 1 and no importance weights: returns (scale, L)."""
    n = len(x)
    mx, amax = F(0), F(0)
    for t in x:
        if abs(t) > amax:
            amax, mx = abs(t), t
    if amax < F(1e-15):
        return F(0), [0] * n

    def levels(iscale):
        return [max(-nmax, min(nmax - 1, _nearest_int(F(iscale * t)))) for t in x]

    def sums(ls):
        slx = sl2 = F(0)
        for t, l in zip(x, ls):
            w = F(t * t)
            slx = F(slx + F(F(w * t) * F(l)))
            sl2 = F(sl2 + F(F(w * F(l)) * F(l)))
        return slx, sl2

    iscale = F(F(-nmax) / mx)
    ls = levels(iscale)
    L = [l + nmax for l in ls]
    sumlx, suml2 = sums(ls)
    scale = F(sumlx / suml2) if suml2 != 0 else F(0)
    best = F(scale * sumlx)
    for step in range(-9, 10):
        if step == 0:
            continue
        iscale = F(F(-F(F(nmax) + F(F(0.1) * F(step)))) / mx)
        ls = levels(iscale)
        sumlx, suml2 = sums(ls)
        if suml2 > 0 and F(sumlx * sumlx) > F(best * suml2):
            L = [l + nmax for l in ls]
            scale = F(sumlx / suml2)
            best = F(scale * sumlx)
    return scale, L


def quantize_q6_k(x):
    rows = x.reshape(-1, QK_K).astype(np.float32)
    out = np.zeros((rows.shape[0], 210), dtype=np.uint8)
    for b, xb in enumerate(rows):
        L = [0] * QK_K
        scales = []
        max_scale, max_abs = F(0), F(0)
        for ib in range(16):
            sc, Lb = _fit_scale_symmetric(xb[16 * ib:16 * ib + 16], 32)
            scales.append(sc)
            L[16 * ib:16 * ib + 16] = Lb
            if abs(sc) > max_abs:
                max_abs, max_scale = abs(sc), sc
        if max_abs < F(1e-15):
            continue  # all-zero block
        iscale = F(F(-128) / max_scale)
        dh = np.array([F(F(1) / iscale)], dtype=np.float16)
        d = F(dh[0])
        sc8 = [min(127, _nearest_int(F(iscale * s))) for s in scales]
        for j in range(16):
            dd = F(d * F(sc8[j]))
            if dd == 0:
                continue
            for i in range(16):
                L[16 * j + i] = max(-32, min(31, _nearest_int(F(xb[16 * j + i] / dd)))) + 32
        ql, qh = [0] * 128, [0] * 64
        for h, j in enumerate(range(0, QK_K, 128)):
            for l in range(32):
                q1, q2, q3, q4 = (L[j + l + o] & 0xF for o in (0, 32, 64, 96))
                ql[64 * h + l] = q1 | (q3 << 4)
                ql[64 * h + l + 32] = q2 | (q4 << 4)
                qh[32 * h + l] = ((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) | ((L[j + l + 64] >> 4) << 4) |
                                  ((L[j + l + 96] >> 4) << 6))
        out[b, :128] = ql
        out[b, 128:192] = qh
        out[b, 192:208] = np.array(sc8, dtype=np.int8).view(np.uint8)
        out[b, 208:210] = dh.view(np.uint8)
    return out


QUANTIZE = {"Q8_0": quantize_q8_0, "Q4_0": quantize_q4_0, "Q4_K": quantize_q4_k, "Q6_K": quantize_q6_k}


DEQUANT = {"Q8_0": dequant_q8_0, "Q4_0": dequant_q4_0, "Q4_1": dequant_q4_1, "Q5_0": dequant_q5_0,
           "Q4_K": dequant_q4_k, "Q5_K": dequant_q5_k, "Q6_K": dequant_q6_k}


# Scales giving weights of roughly unit-0.1 size: d times the largest |q| (and sub-scale) of each type.
WEIGHT_SCALE = {"Q8_0": 0.1 / 127, "Q4_0": 0.1 / 8, "Q4_1": 0.1 / 15, "Q5_0": 0.1 / 16,
                "Q4_K": 0.1 / (63 * 15), "Q5_K": 0.1 / (63 * 31), "Q6_K": 0.1 / (127 * 32)}


def random_blocks(tname, n_blocks, rng, scale=0.05):
    """Random block bytes whose fp16 scale fields hold finite values in [-scale, scale]."""
    _, _, size = GGML[tname]
    b = rng.integers(0, 256, size=(n_blocks, size), dtype=np.uint8)

    def put_f16(col):
        b[:, col:col + 2] = (rng.uniform(-scale, scale, size=(n_blocks, 1)).astype(np.float16)).view(np.uint8)

    if tname in ("Q8_0", "Q4_0", "Q5_0"):
        put_f16(0)
    elif tname == "Q4_1":
        put_f16(0)
        put_f16(2)
    elif tname in ("Q4_K", "Q5_K"):
        put_f16(0)
        put_f16(2)
    elif tname == "Q6_K":
        put_f16(208)
    return b
