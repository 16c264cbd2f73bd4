"""GPT-2 as an htr graph, written in Python: the same parameters, the same
initialisation (draw for draw) and the same ops in the same order as
htr-train (samples/htr-train/model.cc, rng.h), so a run with the same seed
and batches computes the same losses.

Architecture: learned positions; pre-LayerNorm blocks (eps 1e-5); causal
attention with scale 1/sqrt(head dim); GELU (tanh form); final LayerNorm;
output head tied to the token embedding. Linear layers are Conv1D
(y = x @ W + b, W [in, out]); parameter names are Hugging Face GPT-2's
without "transformer.".
"""
import math
from dataclasses import dataclass

import numpy as np

M64 = (1 << 64) - 1


class Rng:
    """htr-train's xoshiro256** seeded through splitmix64 (samples/htr-train/rng.h)."""

    def __init__(self, seed):
        x = seed & M64
        self.s = []
        for _ in range(4):
            x = (x + 0x9E3779B97F4A7C15) & M64
            z = x
            z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
            z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
            self.s.append(z ^ (z >> 31))
        self.spare = None

    def next(self):
        s0, s1, s2, s3 = self.s
        r = ((s1 * 5) & M64)
        r = ((((r << 7) | (r >> 57)) & M64) * 9) & M64
        t = (s1 << 17) & M64
        s2 ^= s0
        s3 ^= s1
        s1 ^= s2
        s0 ^= s3
        s2 ^= t
        s3 = ((s3 << 45) | (s3 >> 19)) & M64
        self.s = [s0, s1, s2, s3]
        return r

    def uniform(self):
        return (self.next() >> 11) * (1.0 / (1 << 53))

    def below(self, n):
        limit = M64 - M64 % n
        while True:
            x = self.next()
            if x < limit:
                return x % n

    def normal(self):
        if self.spare is not None:
            v, self.spare = self.spare, None
            return v
        u1 = self.uniform()
        while u1 <= 0.0:
            u1 = self.uniform()
        u2 = self.uniform()
        r = math.sqrt(-2.0 * math.log(u1))
        self.spare = r * math.sin(6.283185307179586 * u2)
        return r * math.cos(6.283185307179586 * u2)


@dataclass
class ModelShape:
    layers: int = 4
    width: int = 128
    heads: int = 4
    ctx: int = 128
    vocab: int = 256


@dataclass
class ParamSpec:
    name: str
    shape: tuple
    init: str  # "normal", "zeros", "ones"
    std: float
    decay: bool  # AdamW weight decay (matmul weights and embeddings)

    @property
    def numel(self):
        return int(np.prod(self.shape))


def model_params(m):
    """Parameters in htr-train's order (wte, wpe, blocks, ln_f)."""
    C = m.width
    proj_std = 0.02 / math.sqrt(2.0 * m.layers)
    p = [ParamSpec("wte.weight", (m.vocab, C), "normal", 0.02, True),
         ParamSpec("wpe.weight", (m.ctx, C), "normal", 0.02, True)]
    for layer in range(m.layers):
        h = f"h.{layer}."
        p += [ParamSpec(h + "ln_1.weight", (C,), "ones", 0, False),
              ParamSpec(h + "ln_1.bias", (C,), "zeros", 0, False),
              ParamSpec(h + "attn.c_attn.weight", (C, 3 * C), "normal", 0.02, True),
              ParamSpec(h + "attn.c_attn.bias", (3 * C,), "zeros", 0, False),
              ParamSpec(h + "attn.c_proj.weight", (C, C), "normal", proj_std, True),
              ParamSpec(h + "attn.c_proj.bias", (C,), "zeros", 0, False),
              ParamSpec(h + "ln_2.weight", (C,), "ones", 0, False),
              ParamSpec(h + "ln_2.bias", (C,), "zeros", 0, False),
              ParamSpec(h + "mlp.c_fc.weight", (C, 4 * C), "normal", 0.02, True),
              ParamSpec(h + "mlp.c_fc.bias", (4 * C,), "zeros", 0, False),
              ParamSpec(h + "mlp.c_proj.weight", (4 * C, C), "normal", proj_std, True),
              ParamSpec(h + "mlp.c_proj.bias", (C,), "zeros", 0, False)]
    p += [ParamSpec("ln_f.weight", (C,), "ones", 0, False),
          ParamSpec("ln_f.bias", (C,), "zeros", 0, False)]
    return p


def init_params(specs, seed):
    """GPT-2 initialisation, drawn from `seed` in parameter order exactly as
    htr-train's InitParams (N(0, std) as double, rounded to f32)."""
    rng = Rng(seed ^ 0x1417)
    out = []
    for s in specs:
        if s.init == "normal":
            normal, std = rng.normal, s.std
            v = np.array([normal() * std for _ in range(s.numel)], dtype=np.float64)
            out.append(v.astype(np.float32).reshape(s.shape))
        elif s.init == "ones":
            out.append(np.ones(s.shape, np.float32))
        else:
            out.append(np.zeros(s.shape, np.float32))
    return out


def declare_params(g, specs):
    return [g.state(s.name, "f32", s.shape) for s in specs]


def _layer_norm(g, x, w, b):
    return g.op("layer_norm", [x, w, b], eps=1e-5)


def _linear(g, x, w, b):
    return g.add(g.matmul(x, w), b)


def forward(g, m, params, ids, B, T):
    """Logits [B*T, vocab] for token ids `ids` (i32 [B, T])."""
    C, H = m.width, m.heads
    hd = C // H
    it = iter(params)
    wte, wpe = next(it), next(it)
    tok = g.op("embedding", [wte, g.reshape(ids, [B * T])])
    pos = g.slice(wpe, 0, 0, T)
    x = g.reshape(g.add(g.reshape(tok, [B, T, C]), pos), [B * T, C])

    def heads(t):  # [B*T, C] -> [B, H, T, hd]
        return g.transpose(g.reshape(t, [B, T, H, hd]), [0, 2, 1, 3])

    for _ in range(m.layers):
        ln1w, ln1b, attn_w, attn_b, proj_w, proj_b = (next(it) for _ in range(6))
        ln2w, ln2b, fc_w, fc_b, fcp_w, fcp_b = (next(it) for _ in range(6))
        qkv = _linear(g, _layer_norm(g, x, ln1w, ln1b), attn_w, attn_b)
        q = heads(g.slice(qkv, 1, 0, C))
        k = heads(g.slice(qkv, 1, C, 2 * C))
        v = heads(g.slice(qkv, 1, 2 * C, 3 * C))
        y = g.op("scaled_dot_product_attention", [q, k, v], causal=1,
                 scale=1.0 / math.sqrt(float(hd)))
        y = g.reshape(g.transpose(y, [0, 2, 1, 3]), [B * T, C])
        x = g.add(x, _linear(g, y, proj_w, proj_b))
        h = g.op("gelu", [_linear(g, _layer_norm(g, x, ln2w, ln2b), fc_w, fc_b)])
        x = g.add(x, _linear(g, h, fcp_w, fcp_b))
    lnfw, lnfb = next(it), next(it)
    x = _layer_norm(g, x, lnfw, lnfb)
    return g.matmul(x, wte, trans_b=True)


def loss(g, logits, targets, n):
    """Mean cross-entropy against `targets` (i32 [B, T])."""
    return g.op("cross_entropy", [logits, g.reshape(targets, [n])])
