"""attn.scaled_dot_product_attention against float64 references.

Each case of CASES is run through the module and compared with
_ref.ref_sdpa (float64 numpy, written from the formulas) in the output, the
probabilities and the logsumexp; when torch is importable, the output also
with softmax(scale Q K^T + mask) V computed by torch in float64 (torch 1.13
has no F.scaled_dot_product_attention: this is the math it documents).

Tolerances (inputs standard normal, E <= 16, S <= 24, float32 arithmetic):
output and probabilities |error| <= 2e-5; logsumexp <= 2e-5 + 1e-6 |lse|.
"""

import sys
import unittest

import numpy as np

import attn
from attn import _views
from _ref import Errors, ref_sdpa, torch, visible_window

ATOL = 2e-5
ERR = Errors()


def rnd(rng, *shape):
    return rng.standard_normal(shape)


def window_vis(batch_shape, H, L, S, left=None, right=None, bottom_right=False,
               kv_lens=None, q_lens=None):
    """bool (*batch, H, L, S) of the window and lengths rules."""
    B = int(np.prod(batch_shape, dtype=np.int64))
    kl = None if kv_lens is None else np.broadcast_to(kv_lens, batch_shape).reshape(B)
    ql = None if q_lens is None else np.broadcast_to(q_lens, batch_shape).reshape(B)
    out = np.empty((B, H, L, S), bool)
    for b in range(B):
        out[b] = visible_window(L, S, left, right, bottom_right,
                                None if kl is None else int(kl[b]),
                                None if ql is None else int(ql[b]))
    return out.reshape(tuple(batch_shape) + (H, L, S))


# Each case: (name, make) where make(rng) returns (q, k, v, kwargs, vis, bias, scale).
# vis / bias are what the reference applies (the module gets kwargs).
def case_plain(shape_q, shape_k, shape_v, **kw):
    def make(rng):
        return rnd(rng, *shape_q), rnd(rng, *shape_k), rnd(rng, *shape_v), kw, None, None, \
            kw.get("scale")
    return make


def case_mask(kind, mshape, B=2, H=3, L=5, S=7, E=8):
    def make(rng):
        q, k, v = rnd(rng, B, H, L, E), rnd(rng, B, H, S, E), rnd(rng, B, H, S, 6)
        if kind == "bool":
            m = rng.random(mshape) < 0.7
            m[..., 0] = True
            return q, k, v, {"attn_mask": m}, m, None, None
        m = rng.standard_normal(mshape)
        m[rng.random(mshape) < 0.2] = -np.inf
        m[..., 1] = 0.5
        return q, k, v, {"attn_mask": m}, None, m, None
    return make


def case_empty_rows():
    def make(rng):
        q, k, v = rnd(rng, 2, 2, 4, 8), rnd(rng, 2, 2, 6, 8), rnd(rng, 2, 2, 6, 8)
        m = rng.random((2, 2, 4, 6)) < 0.6
        m[0, 1, 2, :] = False          # a row with no visible key
        m[1, :, 0, :] = False
        return q, k, v, {"attn_mask": m}, m, None, None
    return make


def case_window(L, S, left, right, align, is_causal=False, kv_lens=None, q_lens=None,
                batch=(2,), H=2, E=8):
    def make(rng):
        q = rnd(rng, *batch, H, L, E)
        k, v = rnd(rng, *batch, H, S, E), rnd(rng, *batch, H, S, 5)
        kw = {"align": align}
        if is_causal:
            kw["is_causal"] = True
        if left is not None:
            kw["window_left"] = left
        if right is not None:
            kw["window_right"] = right
        if kv_lens is not None:
            kw["kv_lens"] = kv_lens
        if q_lens is not None:
            kw["q_lens"] = q_lens
        vis = window_vis(batch, H, L, S, left, 0 if is_causal else right,
                         align == "bottom_right", kv_lens, q_lens)
        return q, k, v, kw, vis, None, None
    return make


def case_gqa(Hq, Hkv, enable_gqa=True):
    def make(rng):
        q, k, v = rnd(rng, 2, Hq, 5, 8), rnd(rng, 2, Hkv, 9, 8), rnd(rng, 2, Hkv, 9, 4)
        kw = {"enable_gqa": True} if enable_gqa else {}
        if Hq == 1 and Hkv > 1:            # q broadcast over the heads
            q = np.broadcast_to(q, (2, Hkv, 5, 8))
        return q, k, v, kw, None, None, None
    return make


def case_strided(kind):
    """Inputs that are views of bigger arrays (read in place or copied)."""
    def make(rng):
        B, L, S, H, E = 2, 6, 7, 3, 8
        if kind == "bshd":            # projections' layout, transposed views
            q = rnd(rng, B, L, H, E).astype(np.float32).transpose(0, 2, 1, 3)
            k = rnd(rng, B, S, H, E).astype(np.float32).transpose(0, 2, 1, 3)
            v = rnd(rng, B, S, H, E).astype(np.float32).transpose(0, 2, 1, 3)
        elif kind == "packed":        # [B][S][3][H][D]
            qkv = rnd(rng, B, L, 3, H, E).astype(np.float32)
            q, k, v = (qkv[:, :, i].transpose(0, 2, 1, 3) for i in range(3))
        elif kind == "seq-step":      # every other row of a bigger tensor
            q = rnd(rng, B, H, 2 * L, E).astype(np.float32)[:, :, ::2]
            k = rnd(rng, B, H, S, E + 5).astype(np.float32)[..., 2:2 + E]
            v = rnd(rng, B, H, S, E).astype(np.float32)
        elif kind == "inner-step":    # inner stride 2: copied
            q = rnd(rng, B, H, L, 2 * E).astype(np.float32)[..., ::2]
            k = rnd(rng, B, H, S, E).astype(np.float32)
            v = rnd(rng, B, H, S, 2 * E).astype(np.float32)[..., 1::2]
        elif kind == "negative":      # reversed rows and heads: copied
            q = rnd(rng, B, H, L, E).astype(np.float32)[:, ::-1, ::-1]
            k = rnd(rng, B, H, S, E).astype(np.float32)[:, :, ::-1]
            v = rnd(rng, B, H, S, E).astype(np.float32)
        elif kind == "fortran":       # column-major, float64: converted
            q = np.asfortranarray(rnd(rng, B, H, L, E))
            k = np.asfortranarray(rnd(rng, B, H, S, E))
            v = np.asfortranarray(rnd(rng, B, H, S, E))
        elif kind == "broadcast-batch":  # K and V shared over a batch dim
            q = rnd(rng, 2, 3, H, L, E)
            k = rnd(rng, 3, H, S, E)
            v = rnd(rng, 1, 3, H, S, E)
        elif kind == "unaligned":     # float32 at an odd byte address: copied
            raw = np.zeros(B * H * L * E * 4 + 1, np.uint8)
            q = np.ndarray((B, H, L, E), np.float32, raw.data, 1)
            q[...] = rnd(rng, B, H, L, E)
            assert not q.flags.aligned
            k, v = rnd(rng, B, H, S, E), rnd(rng, B, H, S, E)
        return q, k, v, {}, None, None, None
    return make


CASES = [
    ("4-D", case_plain((2, 3, 5, 8), (2, 3, 7, 8), (2, 3, 7, 6))),
    ("2-D (L, E)", case_plain((5, 8), (9, 8), (9, 3))),
    ("3-D (H, L, E)", case_plain((3, 4, 8), (3, 6, 8), (3, 6, 8))),
    ("5-D batch", case_plain((2, 3, 2, 4, 8), (2, 3, 2, 5, 8), (2, 3, 2, 5, 7))),
    ("L > S", case_plain((2, 2, 11, 4), (2, 2, 3, 4), (2, 2, 3, 4))),
    ("one query", case_plain((3, 2, 1, 16), (3, 2, 24, 16), (3, 2, 24, 16))),
    ("one key", case_plain((2, 2, 5, 8), (2, 2, 1, 8), (2, 2, 1, 8))),
    ("dk != dv", case_plain((2, 2, 5, 16), (2, 2, 6, 16), (2, 2, 6, 3))),
    ("scale 0.3", case_plain((2, 2, 5, 8), (2, 2, 6, 8), (2, 2, 6, 8), scale=0.3)),
    ("scale 0", case_plain((2, 2, 5, 8), (2, 2, 6, 8), (2, 2, 6, 8), scale=0.0)),
    ("bool mask full", case_mask("bool", (2, 3, 5, 7))),
    ("bool mask (L, S)", case_mask("bool", (5, 7))),
    ("bool mask (1, H, 1, S)", case_mask("bool", (1, 3, 1, 7))),
    ("bool mask (B, 1, L, S)", case_mask("bool", (2, 1, 5, 7))),
    ("float mask full", case_mask("float", (2, 3, 5, 7))),
    ("float mask (L, S)", case_mask("float", (5, 7))),
    ("float mask (B, H, 1, S)", case_mask("float", (2, 3, 1, 7))),
    ("rows with no visible key", case_empty_rows()),
    ("is_causal L == S", case_window(6, 6, None, None, "top_left", is_causal=True)),
    ("is_causal L < S", case_window(4, 9, None, None, "top_left", is_causal=True)),
    ("is_causal L > S (empty rows)", case_window(9, 4, None, None, "bottom_right",
                                                 is_causal=True)),
    ("causal bottom-right", case_window(4, 9, None, None, "bottom_right", is_causal=True)),
    ("window 2, 1", case_window(8, 8, 2, 1, "top_left")),
    ("window left 3 causal", case_window(8, 10, 3, 0, "bottom_right")),
    ("kv_lens", case_window(5, 7, None, None, "top_left", kv_lens=[7, 3])),
    ("q_lens", case_window(5, 7, None, None, "top_left", q_lens=[2, 5])),
    ("lengths + causal bottom-right, batch (2, 2)",
     case_window(5, 8, None, None, "bottom_right", is_causal=True,
                 kv_lens=[[8, 4], [6, 0]], q_lens=[[5, 2], [1, 3]], batch=(2, 2))),
    ("GQA 6/2", case_gqa(6, 2)),
    ("GQA 4/1 (MQA)", case_gqa(4, 1)),
    ("MQA by broadcast (no enable_gqa)", case_gqa(4, 1, enable_gqa=False)),
    ("q broadcast over heads", case_gqa(1, 3, enable_gqa=False)),
    ("BSHD views", case_strided("bshd")),
    ("packed QKV views", case_strided("packed")),
    ("seq-strided views", case_strided("seq-step")),
    ("inner stride 2 (copied)", case_strided("inner-step")),
    ("negative strides (copied)", case_strided("negative")),
    ("Fortran float64 (converted)", case_strided("fortran")),
    ("broadcast batch", case_strided("broadcast-batch")),
    ("unaligned (copied)", case_strided("unaligned")),
    # More than 16 queries: attn's sgemm path (16 or fewer take the decode
    # kernels), over several key and query tiles.
    ("sgemm path 40 x 150", case_plain((2, 2, 40, 16), (2, 2, 150, 16), (2, 2, 150, 8))),
    ("sgemm path, float mask", case_mask("float", (2, 3, 33, 70), L=33, S=70)),
    ("sgemm path, bool mask (L, S)", case_mask("bool", (33, 70), L=33, S=70)),
    ("sgemm path, causal bottom-right, lengths",
     case_window(40, 90, None, None, "bottom_right", is_causal=True, kv_lens=[90, 41],
                 q_lens=[40, 17])),
    ("sgemm path, window", case_window(70, 70, 20, 5, "top_left")),
    ("sgemm path, GQA 8/2", case_plain((2, 8, 24, 8), (2, 2, 30, 8), (2, 2, 30, 8),
                                       enable_gqa=True)),
]


def torch_math(q, k, v, vis, bias, scale):
    """softmax(scale Q K^T + bias, hidden = -inf) V in torch float64."""
    t = lambda a: torch.from_numpy(np.ascontiguousarray(np.asarray(a, np.float64)))
    q, k, v = t(q), t(k), t(v)
    g = q.shape[-3] // k.shape[-3] if q.dim() >= 3 else 1
    if g > 1:
        k = k.repeat_interleave(g, dim=-3)
        v = v.repeat_interleave(g, dim=-3)
    if scale is None:
        scale = 1.0 / np.sqrt(q.shape[-1])
    s = torch.matmul(q, k.transpose(-1, -2)) * scale
    if bias is not None:
        s = s + t(bias)
    if vis is not None:
        s = s.masked_fill(~torch.from_numpy(np.array(np.broadcast_to(vis, s.shape))),
                          float("-inf"))
    return torch.matmul(torch.softmax(s, dim=-1), v).numpy()


class TestCases(unittest.TestCase):
    torch_compared = 0

    def test_cases(self):
        for i, (name, make) in enumerate(CASES):
            with self.subTest(name):
                rng = np.random.default_rng(1000 + i)
                q, k, v, kw, vis, bias, scale = make(rng)
                o, p, lse = attn.scaled_dot_product_attention(
                    q, k, v, return_probs=True, return_lse=True, **kw)
                o_only = attn.scaled_dot_product_attention(q, k, v, **kw)
                self.assertEqual(o_only.dtype, np.float32)
                # Asking for P and the logsumexp does not change O.
                self.assertTrue(np.array_equal(o, o_only), name)
                ro, rp, rl = ref_sdpa(q, k, v, vis, bias, scale)
                ERR.check(self, "output: " + name, o, ro, ATOL)
                for eng in ("blas", "tile"):
                    oe = attn.scaled_dot_product_attention(q, k, v, engine=eng, **kw)
                    ERR.check(self, "output, engine %s: %s" % (eng, name), oe, ro, ATOL)
                ERR.check(self, "probs: " + name, p, rp, ATOL)
                ERR.check(self, "lse: " + name, lse, rl, ATOL, 1e-6)
                if torch is not None:
                    tv = None if vis is None else np.broadcast_to(vis, rp.shape)
                    full = np.ones(rp.shape[:-1], bool) if tv is None else tv.any(-1)
                    if bias is not None:
                        full &= np.isfinite(np.broadcast_to(bias, rp.shape)).any(-1)
                    to = torch_math(q, k, v, vis, bias, scale)
                    # torch gives NaN on rows with no visible key; attn 0.
                    self.assertTrue(np.isnan(to[~full]).all())
                    ERR.check(self, "torch output: " + name, o[full], to[full], ATOL)
                    TestCases.torch_compared += 1

    def test_no_copy_views(self):
        """float32 views attn can describe are passed as they are."""
        rng = np.random.default_rng(7)
        x = rng.standard_normal((2, 6, 3, 8)).astype(np.float32)       # BSHD
        a, v = _views.as_view(x.transpose(0, 2, 1, 3), (2, 3, 6, 8), np.float32, min_seq=8)
        self.assertTrue(np.shares_memory(a, x))
        self.assertEqual((v.batch, v.head, v.seq), (6 * 3 * 8, 8, 24))
        qkv = rng.standard_normal((2, 6, 3, 3, 8)).astype(np.float32)  # packed
        a, v = _views.as_view(qkv[:, :, 1].transpose(0, 2, 1, 3), (2, 3, 6, 8), np.float32,
                              min_seq=8)
        self.assertTrue(np.shares_memory(a, qkv))
        self.assertEqual((v.batch, v.head, v.seq), (6 * 72, 8, 72))
        b5 = rng.standard_normal((2, 3, 2, 4, 8)).astype(np.float32)   # two batch dims
        a, v = _views.as_view(b5, b5.shape, np.float32, min_seq=8)
        self.assertTrue(np.shares_memory(a, b5))
        self.assertEqual(v.batch, 64)
        # Copies: inner stride 2, float64, negative strides, a broadcast batch.
        for arr, shape in ((x[..., ::2], (2, 6, 3, 4)), (x.astype(np.float64), x.shape),
                           (x[:, ::-1], x.shape), (x[:1], (2,) + x.shape[1:])):
            a, v = _views.as_view(arr, shape, np.float32, min_seq=shape[-1])
            self.assertFalse(np.shares_memory(a, x))
            self.assertTrue(a.flags.c_contiguous)
        # Masks: broadcast strides are attn's own, no copy of an (L, S) mask.
        m = rng.random((5, 7)) < 0.5
        a, v = _views.as_view(m.view(np.uint8), (2, 3, 5, 7), np.uint8, allow_zero=True)
        self.assertTrue(np.shares_memory(a, m))
        self.assertEqual((v.batch, v.head, v.seq), (0, 0, 7))

    def test_dropout(self):
        rng = np.random.default_rng(11)
        q, k, v = rnd(rng, 2, 3, 6, 8), rnd(rng, 2, 3, 9, 8), rnd(rng, 2, 3, 9, 5)
        for p_drop, seed, offset, causal in ((0.3, 5, 0, False), (0.5, 2**40 + 3, 7, True),
                                             (1.0, 1, 0, False)):
            o, p, _ = attn.scaled_dot_product_attention(
                q, k, v, dropout_p=p_drop, dropout_seed=seed, dropout_offset=offset,
                is_causal=causal, return_probs=True)
            keep = np.empty((2, 3, 6, 9), bool)
            for b in range(2):
                for h in range(3):
                    keep[b, h] = attn.dropout_keep_mask(p_drop, seed, offset, b, h, 6, 9)
            if 0 < p_drop < 1:
                frac = keep.mean()
                self.assertTrue(abs(frac - (1 - p_drop)) < 0.15, frac)
            vis = window_vis((2,), 3, 6, 9, None, 0 if causal else None)
            ro, rp, _ = ref_sdpa(q, k, v, vis, drop=keep, p_drop=p_drop)
            ERR.check(self, "dropout output: p=%g" % p_drop, o, ro, 4 * ATOL)
            ERR.check(self, "dropout probs: p=%g" % p_drop, p, rp, 4 * ATOL)
            again = attn.scaled_dot_product_attention(
                q, k, v, dropout_p=p_drop, dropout_seed=seed, dropout_offset=offset,
                is_causal=causal)
            self.assertTrue(np.array_equal(o, again))
        o1 = attn.scaled_dot_product_attention(q, k, v, dropout_p=0.5, dropout_seed=1)
        o2 = attn.scaled_dot_product_attention(q, k, v, dropout_p=0.5, dropout_seed=2)
        self.assertFalse(np.array_equal(o1, o2))
        # p = 0 with a seed is exactly no dropout.
        self.assertTrue(np.array_equal(
            attn.scaled_dot_product_attention(q, k, v, dropout_p=0.0, dropout_seed=9),
            attn.scaled_dot_product_attention(q, k, v)))
        # Without dropout_seed, the seed comes from numpy's global generator
        # (as PyTorch draws from its own): reproducible under np.random.seed.
        np.random.seed(5)
        o1 = attn.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
        o2 = attn.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
        np.random.seed(5)
        self.assertTrue(np.array_equal(o1, attn.scaled_dot_product_attention(
            q, k, v, dropout_p=0.5)))
        self.assertFalse(np.array_equal(o1, o2))

    def test_empty(self):
        """Empty sizes give empty (or, S = 0, zero) results, as PyTorch."""
        rng = np.random.default_rng(8)
        for (B, H, L, S, E, Ev) in ((0, 2, 3, 4, 8, 8), (2, 0, 3, 4, 8, 8), (2, 2, 0, 4, 8, 8),
                                    (2, 2, 3, 0, 8, 6), (2, 2, 3, 4, 8, 0)):
            q, k, v = rnd(rng, B, H, L, E), rnd(rng, B, H, S, E), rnd(rng, B, H, S, Ev)
            o, p, lse = attn.scaled_dot_product_attention(q, k, v, return_probs=True,
                                                          return_lse=True)
            self.assertEqual(o.shape, (B, H, L, Ev))
            self.assertEqual(p.shape, (B, H, L, S))
            self.assertEqual(lse.shape, (B, H, L))
            self.assertFalse(np.any(o))
            self.assertTrue(np.all(np.isneginf(lse)))

    def test_returns(self):
        rng = np.random.default_rng(3)
        q, k, v = rnd(rng, 2, 5, 4), rnd(rng, 2, 6, 4), rnd(rng, 2, 6, 4)
        out = attn.scaled_dot_product_attention(q, k, v)
        self.assertIsInstance(out, np.ndarray)
        self.assertEqual(out.shape, (2, 5, 4))
        o, p, lse = attn.scaled_dot_product_attention(q, k, v, return_probs=True)
        self.assertEqual((p.shape, lse), ((2, 5, 6), None))
        o, p, lse = attn.scaled_dot_product_attention(q, k, v, return_lse=True)
        self.assertEqual((p, lse.shape), (None, (2, 5)))

    def test_threads(self):
        """Results are bitwise the same for any thread count."""
        rng = np.random.default_rng(8)
        q, k, v = rnd(rng, 2, 4, 40, 16), rnd(rng, 2, 4, 70, 16), rnd(rng, 2, 4, 70, 16)
        outs = [attn.scaled_dot_product_attention(q, k, v, is_causal=True, threads=t)
                for t in (1, 2, 3, 0)]
        for o in outs[1:]:
            self.assertTrue(np.array_equal(outs[0], o))


# (name, kwargs changes or a callable building the arguments, expected)
# expected: an attn status name (AttnError) or an exception type.
def _args(rng, Hq=4, Hkv=4, L=5, S=6, E=8):
    return [rnd(rng, 2, Hq, L, E), rnd(rng, 2, Hkv, S, E), rnd(rng, 2, Hkv, S, E)]


ERRORS = [
    ("scale inf", {}, {"scale": float("inf")}, "ATTN_ERR_BAD_SCALE"),
    ("threads -1", {}, {"threads": -1}, "ATTN_ERR_BAD_THREADS"),
    ("threads 2000", {}, {"threads": 2000}, "ATTN_ERR_BAD_THREADS"),
    ("dropout_p 1.5", {}, {"dropout_p": 1.5, "dropout_seed": 1}, "ATTN_ERR_BAD_OPTION"),
    ("dropout_p -0.5", {}, {"dropout_p": -0.5}, "ATTN_ERR_BAD_OPTION"),
    ("kv_lens > S", {}, {"kv_lens": [6, 7]}, "ATTN_ERR_BAD_LENGTH"),
    ("q_lens < 0", {}, {"q_lens": [-1, 2]}, "ATTN_ERR_BAD_LENGTH"),
    ("GQA 4/3", {"Hkv": 3}, {"enable_gqa": True}, "ATTN_ERR_HEAD_RATIO"),
    ("align unknown", {}, {"align": "middle"}, ValueError),
    ("engine unknown", {}, {"engine": "gpu"}, ValueError),
    ("heads 4/2 without enable_gqa", {"Hkv": 2}, {}, ValueError),
    ("is_causal with window_right 2", {}, {"is_causal": True, "window_right": 2}, ValueError),
    ("mask shape", {}, {"attn_mask": np.ones((5, 5), bool)}, ValueError),
    ("mask dtype int", {}, {"attn_mask": np.ones((5, 6), np.int32)}, TypeError),
    ("kv_lens shape", {}, {"kv_lens": [1, 2, 3]}, ValueError),
    ("kv_lens float", {}, {"kv_lens": [1.0, 2.0]}, TypeError),
    ("window_left float", {}, {"window_left": 1.5}, TypeError),
]


class TestErrors(unittest.TestCase):
    def test_table(self):
        for name, shape, kw, expected in ERRORS:
            with self.subTest(name):
                rng = np.random.default_rng(5)
                q, k, v = _args(rng, **shape)
                if isinstance(expected, str):
                    with self.assertRaises(attn.AttnError) as cm:
                        attn.scaled_dot_product_attention(q, k, v, **kw)
                    e = cm.exception
                    self.assertIsInstance(e, ValueError)
                    self.assertEqual(e.status_name, expected)
                    self.assertEqual(e.status, attn._lib.STATUS_NAMES.index(expected))
                    self.assertIn(expected, str(e))
                    self.assertIn(attn._lib.status_str(e.status).decode(), str(e))
                else:
                    with self.assertRaises(expected) as cm:
                        attn.scaled_dot_product_attention(q, k, v, **kw)
                    self.assertNotIsInstance(cm.exception, attn.AttnError)

    def test_shapes(self):
        rng = np.random.default_rng(6)
        for q, k, v in (
                (rnd(rng, 5), rnd(rng, 6, 5), rnd(rng, 6, 5)),          # 1-D query
                (rnd(rng, 2, 5, 8), rnd(rng, 2, 6, 7), rnd(rng, 2, 6, 8)),  # E differs
                (rnd(rng, 2, 5, 8), rnd(rng, 2, 6, 8), rnd(rng, 2, 7, 8)),  # S differs
                (rnd(rng, 2, 1, 5, 8), rnd(rng, 3, 1, 6, 8), rnd(rng, 3, 1, 6, 8))):  # batch
            with self.assertRaises(ValueError):
                attn.scaled_dot_product_attention(q, k, v)
        with self.assertRaises(TypeError):
            attn.scaled_dot_product_attention(np.array([["a"]]), rnd(rng, 1, 1), rnd(rng, 1, 1))


class TestTypes(unittest.TestCase):
    """16-bit inputs and outputs: every case of the table at F16 and BF16
    against float64 on the rounded inputs, within the fp32 error plus the
    output's rounding (and, for BF16, P's): |err| <= ATOL + 4 u |O|-scale
    with u = 2^-9 for BF16 (4u = 2^-7: O's rounding and P's, each at
    most 2^-8 relative) and 2^-12 for F16 (4u = 2^-10: twice O's)."""

    def test_table(self):
        for i, (name, make) in enumerate(CASES):
            for dt, u in (("bf16", 2.0 ** -9), ("f16", 2.0 ** -12)):
                with self.subTest(name=name, dtype=dt):
                    rng = np.random.default_rng(1000 + i)
                    q, k, v, kw, vis, bias, scale = make(rng)
                    if dt == "f16":
                        qt, kt, vt = (np.asarray(x).astype(np.float16) for x in (q, k, v))
                        back = lambda o: o.astype(np.float64)
                        qr, kr, vr = (x.astype(np.float64) for x in (qt, kt, vt))
                        o = attn.scaled_dot_product_attention(qt, kt, vt, **kw)
                        self.assertEqual(o.dtype, np.float16)
                    else:
                        qt, kt, vt = (attn.to_bf16(x) for x in (q, k, v))
                        back = lambda o: attn.from_bf16(o).astype(np.float64)
                        qr, kr, vr = (back(x) for x in (qt, kt, vt))
                        o = attn.scaled_dot_product_attention(qt, kt, vt, dtype="bf16", **kw)
                        self.assertEqual(o.dtype, np.uint16)
                    ro, _, _ = ref_sdpa(qr, kr, vr, vis, bias, scale)
                    tol = ATOL + 4 * u * np.abs(vr).max(initial=0.0)
                    err = np.abs(back(o) - ro).max(initial=0.0)
                    self.assertLessEqual(err, tol, "%s %s: %g > %g" % (name, dt, err, tol))
                    ERR.check(self, "%s output: %s" % (dt, name), back(o), ro, tol)

    def test_torch_bf16(self):
        if torch is None:
            self.skipTest("torch not importable")
        rng = np.random.default_rng(5)
        q, k, v = (rnd(rng, 2, 3, 17, 8) for _ in range(3))
        tq, tk, tv = (torch.from_numpy(x).to(torch.bfloat16) for x in (q, k, v))
        o = attn.scaled_dot_product_attention(tq, tk, tv, is_causal=True)
        self.assertEqual(o.dtype, torch.bfloat16)
        ref = attn.scaled_dot_product_attention(attn.to_bf16(q), attn.to_bf16(k),
                                                attn.to_bf16(v), is_causal=True, dtype="bf16")
        self.assertTrue(np.array_equal(o.view(torch.int16).numpy().view(np.uint16), ref))

    def test_torch_requires_grad(self):
        """A tensor that requires grad: a TypeError naming attn.torch where
        autograd records; read through detach() under torch.no_grad()."""
        if torch is None:
            self.skipTest("torch not importable")
        q = torch.randn(2, 3, 5, 8, requires_grad=True)
        with self.assertRaisesRegex(TypeError, "attn.torch"):
            attn.scaled_dot_product_attention(q, q, q)
        with self.assertRaisesRegex(TypeError, "attn.torch"):
            attn.MultiheadAttention(8, 2)(q[0], q[0], q[0])
        with torch.no_grad():
            o = attn.scaled_dot_product_attention(q, q, q)
        self.assertTrue(np.array_equal(o, attn.scaled_dot_product_attention(
            q.detach().numpy(), q.detach().numpy(), q.detach().numpy())))

    def test_bad_dtype(self):
        rng = np.random.default_rng(6)
        q = rnd(rng, 1, 2, 3)
        with self.assertRaises(ValueError):
            attn.scaled_dot_product_attention(q, q, q, dtype="f64")

    def test_bf16_roundtrip(self):
        x = np.array([1.0, -2.5, 1e-40, np.inf, 3.14159], np.float32)
        h = attn.to_bf16(x)
        self.assertEqual(h.dtype, np.uint16)
        self.assertEqual(list(h[:2]), [0x3F80, 0xC020])
        self.assertTrue(np.array_equal(attn.from_bf16(h)[:2], x[:2]))


if __name__ == "__main__":
    print("attn %s from %s" % (attn.library_version(), attn.library_path))
    if torch is None:
        print("torch not importable: the torch comparisons are SKIPPED")
    else:
        print("torch %s: comparing with its float64 softmax(Q K^T) V" % torch.__version__)
    prog = unittest.main(exit=False, verbosity=2)
    ERR.report("sdpa")
    if torch is not None:
        print("torch comparisons: %d cases" % TestCases.torch_compared)
    sys.exit(0 if prog.result.wasSuccessful() else 1)
