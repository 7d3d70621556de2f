"""attn.MultiheadAttention against float64 references.

Each case of CASES builds a layer, runs forward and compares the output
and the attention weights with ref_mha (float64 numpy: the projections,
per-head softmax(Q K^T / sqrt(dh) + masks) V, the output projection), and,
when torch is importable and the case has a torch equivalent, with
torch.nn.MultiheadAttention in float64 holding the same state_dict (eval
mode).  Also: the state_dict names and shapes against nn.MultiheadAttention's,
loading torch's parameters, dropout against attn's keep mask, errors.

Tolerances (inputs standard normal, head dims <= 16, PyTorch's initialization):
output and weights |error| <= 5e-5.
"""

import sys
import unittest

import numpy as np

import attn
from _ref import Errors, ref_sdpa, torch

ATOL = 5e-5
ERR = Errors()


def split_params(sd, E, kv_rows):
    if "in_proj_weight" in sd:
        W = np.asarray(sd["in_proj_weight"], np.float64)
        Wq, Wk, Wv = W[:E], W[E:2 * E], W[2 * E:]
    else:
        Wq, Wk, Wv = (np.asarray(sd[n], np.float64) for n in
                      ("q_proj_weight", "k_proj_weight", "v_proj_weight"))
    if "in_proj_bias" in sd:
        b = np.asarray(sd["in_proj_bias"], np.float64)
        bq, bk, bv = b[:E], b[E:E + kv_rows], b[E + kv_rows:]
    else:
        bq, bk, bv = 0.0, 0.0, 0.0
    Wo = np.asarray(sd["out_proj.weight"], np.float64)
    bo = np.asarray(sd["out_proj.bias"], np.float64) if "out_proj.bias" in sd else 0.0
    return Wq, Wk, Wv, bq, bk, bv, Wo, bo


def mask_terms(N, H, L, S, kpm=None, am=None, causal=False, kv_lens=None, q_lens=None):
    """(vis bool, bias float64), both (N, H, L, S): nn.MultiheadAttention's
    masks (bool True = not allowed, float added), causal, the lengths."""
    vis = np.ones((N, H, L, S), bool)
    bias = np.zeros((N, H, L, S))
    if kpm is not None:
        if kpm.dtype == bool:
            vis &= ~kpm[:, None, None, :]
        else:
            bias += kpm[:, None, None, :]
    if am is not None:
        a = am.reshape(N, H, L, S) if am.ndim == 3 else am
        if am.dtype == bool:
            vis &= ~a
        else:
            bias += a
    if causal:
        vis &= np.tril(np.ones((L, S), bool))
    for b in range(N):
        if kv_lens is not None:
            vis[b, :, :, kv_lens[b]:] = False
        if q_lens is not None:
            vis[b, :, q_lens[b]:, :] = False
    return vis, bias


def ref_mha(x, xk, xv, sd, H, Hkv, kpm=None, am=None, causal=False, kv_lens=None,
            q_lens=None, scale=None, drop=None, p_drop=0.0, average=True):
    """Batch-first float64 MHA: x (N, L, E), xk (N, S, kdim), xv (N, S, vdim)."""
    N, L, E = x.shape
    S = xk.shape[1]
    dh = E // H
    Wq, Wk, Wv, bq, bk, bv, Wo, bo = split_params(sd, E, Hkv * dh)
    x, xk, xv = (np.asarray(a, np.float64) for a in (x, xk, xv))
    q = (x @ Wq.T + bq).reshape(N, L, H, dh).transpose(0, 2, 1, 3)
    k = (xk @ Wk.T + bk).reshape(N, S, Hkv, dh).transpose(0, 2, 1, 3)
    v = (xv @ Wv.T + bv).reshape(N, S, Hkv, dh).transpose(0, 2, 1, 3)
    vis, bias = mask_terms(N, H, L, S, kpm, am, causal, kv_lens, q_lens)
    o, p, _ = ref_sdpa(q, k, v, vis, bias, scale, drop, p_drop)
    y = o.transpose(0, 2, 1, 3).reshape(N, L, E) @ Wo.T + bo
    return y, (p.mean(axis=1) if average else p)


# A case: layer arguments, forward arguments, shapes and mask kinds.
# layout: "bf" (batch first), "sf" (sequence first), "unbatched".
# inputs: "self" (query is key is value), "cross" (three arrays), "kv-same"
# (key is value, not query).
def C(name, E=8, H=2, L=5, S=5, N=2, kdim=None, vdim=None, bias=True, Hkv=None,
      layout="bf", inputs="self", kpm=None, am=None, causal=False, need_weights=True,
      average=True, kv_lens=None, q_lens=None, scale=None, strided=None, torch_ok=True):
    return dict(name=name, E=E, H=H, L=L, S=S, N=N, kdim=kdim, vdim=vdim, bias=bias,
                Hkv=Hkv, layout=layout, inputs=inputs, kpm=kpm, am=am, causal=causal,
                need_weights=need_weights, average=average, kv_lens=kv_lens,
                q_lens=q_lens, scale=scale, strided=strided, torch_ok=torch_ok)


CASES = [
    C("self, packed, batch_first"),
    C("self, packed, sequence first", layout="sf"),
    C("self, unbatched", layout="unbatched"),
    C("cross kdim 5 vdim 7", L=4, S=6, kdim=5, vdim=7, inputs="cross"),
    C("cross kdim vdim, sequence first", L=4, S=6, kdim=5, vdim=7, inputs="cross",
      layout="sf"),
    C("cross, packed (kdim = vdim = E)", L=3, S=7, inputs="cross"),
    C("cross, key is value", L=3, S=7, inputs="kv-same"),
    C("no bias", bias=False),
    C("no bias, kdim", bias=False, kdim=4, vdim=4, inputs="cross", S=6),
    C("E 16 H 4", E=16, H=4, L=6, S=6),
    C("key_padding_mask bool", kpm="bool"),
    C("key_padding_mask float", kpm="float"),
    C("attn_mask bool (L, S)", am="bool2"),
    C("attn_mask bool (N*H, L, S)", am="bool3", L=4, S=6, inputs="cross"),
    C("attn_mask float (L, S)", am="float2"),
    C("attn_mask float (N*H, L, S)", am="float3"),
    C("bool attn_mask + bool key_padding_mask", am="bool2", kpm="bool"),
    # torch 1.13 cannot combine a float key_padding_mask with an attn_mask
    # (masked_fill with float, logical_or): no torch comparison for these.
    C("float attn_mask + float key_padding_mask", am="float3", kpm="float", torch_ok=False),
    C("bool attn_mask + float key_padding_mask", am="bool3", kpm="float", torch_ok=False),
    C("float attn_mask + bool key_padding_mask", am="float2", kpm="bool"),
    C("is_causal", causal=True),
    C("is_causal, unbatched, weights per head", causal=True, layout="unbatched",
      average=False),
    C("need_weights False", need_weights=False),
    C("weights per head", average=False),
    C("GQA 4 / 2", E=16, H=4, Hkv=2, torch_ok=False),
    C("MQA cross 4 / 1", E=16, H=4, Hkv=1, inputs="cross", S=7, kdim=6, vdim=6,
      torch_ok=False),
    C("kv_lens", kv_lens=[5, 2], torch_ok=False),
    C("q_lens and kv_lens, cross", L=4, S=6, inputs="cross", q_lens=[4, 1],
      kv_lens=[3, 6], torch_ok=False),
    C("scale 0.2", scale=0.2, torch_ok=False),
    C("row-strided input (no copy)", strided="rows"),
    C("row-strided cross inputs (no copy)", strided="rows", inputs="cross", kdim=3, vdim=5,
      S=6),
    C("Fortran-ordered float64 input (converted)", strided="fortran", inputs="cross"),
    # More than 16 queries: the sgemm path of the attention core.
    C("L 40, E 32, key_padding_mask and causal", E=32, H=4, L=40, S=40, kpm="bool",
      causal=True),
    C("cross L 24 S 50, float attn_mask, sequence first", E=16, H=2, L=24, S=50,
      inputs="cross", kdim=12, vdim=20, am="float3", layout="sf"),
]


def make_inputs(rng, c):
    N, L, S, E = c["N"], c["L"], c["S"], c["E"]
    kd = c["kdim"] or E
    vd = c["vdim"] or E
    if c["strided"] == "rows":
        x = rng.standard_normal((N, L, E + 3)).astype(np.float32)[:, :, 2:2 + E]
        xk = rng.standard_normal((N, S, kd + 4)).astype(np.float32)[:, :, :kd]
        xv = rng.standard_normal((N, S, 2 * vd)).astype(np.float32)[:, :, vd:]
    else:
        x = rng.standard_normal((N, L, E))
        xk = rng.standard_normal((N, S, kd))
        xv = rng.standard_normal((N, S, vd))
    if c["strided"] == "fortran":
        x, xk, xv = (np.asfortranarray(a) for a in (x, xk, xv))
    if c["inputs"] == "self":
        xk = xv = x
    elif c["inputs"] == "kv-same":
        xv = xk
    kpm = am = None
    if c["kpm"] == "bool":
        kpm = rng.random((N, S)) < 0.4
        kpm[:, 0] = False
    elif c["kpm"] == "float":
        kpm = rng.standard_normal((N, S))
        kpm[rng.random((N, S)) < 0.3] = -np.inf
        kpm[:, 0] = 0.0
    H = c["H"]
    if c["am"]:
        shape = (L, S) if c["am"].endswith("2") else (N * H, L, S)
        if c["am"].startswith("bool"):
            am = rng.random(shape) < 0.4
            am[..., 0] = False
        else:
            am = rng.standard_normal(shape)
            am[rng.random(shape) < 0.3] = -np.inf
            am[..., 0] = 0.5
    return x, xk, xv, kpm, am


def to_layout(a, layout):
    if layout == "sf":
        return a.transpose(1, 0, 2)
    if layout == "unbatched":
        return a[0]
    return a


class TestCases(unittest.TestCase):
    torch_compared = 0

    def test_cases(self):
        for i, c in enumerate(CASES):
            with self.subTest(c["name"]):
                self.run_case(i, c)

    def run_case(self, i, c):
        rng = np.random.default_rng(2000 + i)
        if c["layout"] == "unbatched":
            c = dict(c, N=1)
        E, H, N, L, S = c["E"], c["H"], c["N"], c["L"], c["S"]
        Hkv = c["Hkv"] or H
        m = attn.MultiheadAttention(E, H, bias=c["bias"], kdim=c["kdim"], vdim=c["vdim"],
                                    batch_first=c["layout"] == "bf", num_kv_heads=c["Hkv"],
                                    seed=i).eval()
        # Nonzero biases, so that they are checked too.
        sd = m.state_dict()
        for n in sd:
            if "bias" in n:
                sd[n][...] = rng.standard_normal(sd[n].shape) * 0.5
        x, xk, xv, kpm, am = make_inputs(rng, c)
        kw = dict(key_padding_mask=None if kpm is None else
                  (kpm[0] if c["layout"] == "unbatched" else kpm),
                  need_weights=c["need_weights"], attn_mask=am,
                  average_attn_weights=c["average"], is_causal=c["causal"])
        if c["layout"] == "unbatched" and am is not None and am.ndim == 3:
            kw["attn_mask"] = am[:H]
        extra = {}
        for n in ("kv_lens", "q_lens", "scale"):
            if c[n] is not None:
                extra[n] = c[n]
        qi, ki, vi = (to_layout(a, c["layout"]) for a in (x, xk, xv))
        if c["inputs"] == "self":
            ki = vi = qi
        elif c["inputs"] == "kv-same":
            vi = ki
        y, w = m(qi, ki, vi, **kw, **extra)
        if c["layout"] == "unbatched":
            y, w = y[None], (None if w is None else w[None])
        elif c["layout"] == "sf":
            y = y.transpose(1, 0, 2)
        self.assertEqual(y.shape, (N, L, E))
        ry, rw = ref_mha(x, xk, xv, sd, H, Hkv, kpm, am, c["causal"], c["kv_lens"],
                         c["q_lens"], c["scale"], average=c["average"])
        ERR.check(self, "output: " + c["name"], y, ry, ATOL)
        # Each engine, named: the projections and the attention on it.
        for eng in ("blas", "tile"):
            m.engine = eng
            ye = m(qi, ki, vi, **kw, **extra)[0]
            ye = ye[None] if c["layout"] == "unbatched" else \
                ye.transpose(1, 0, 2) if c["layout"] == "sf" else ye
            ERR.check(self, "output, engine %s: %s" % (eng, c["name"]), ye, ry, ATOL)
        m.engine = "auto"
        if c["need_weights"]:
            ERR.check(self, "weights: " + c["name"], w, rw, ATOL)
        else:
            self.assertIsNone(w)
        if torch is None or not c["torch_ok"]:
            return
        tm = torch.nn.MultiheadAttention(E, H, bias=c["bias"], kdim=c["kdim"], vdim=c["vdim"],
                                         batch_first=c["layout"] == "bf",
                                         dtype=torch.float64).eval()
        tm.load_state_dict({n: torch.from_numpy(np.asarray(a, np.float64))
                            for n, a in sd.items()})
        t = lambda a: None if a is None else torch.from_numpy(np.array(a))
        tq = t(np.asarray(qi, np.float64))
        tk = tq if ki is qi else t(np.asarray(ki, np.float64))
        tv = tk if vi is ki else t(np.asarray(vi, np.float64))
        tam = kw["attn_mask"]
        if c["causal"]:     # torch 1.13 takes the causal mask itself
            tam = np.triu(np.ones((L, S), bool), 1)
        # With gradients enabled torch takes its documented path, not the
        # inference fast path (which in 1.13 fails without biases and reads
        # a float key_padding_mask as bool).
        with torch.enable_grad():
            ty, tw = tm(tq, tk, tv, key_padding_mask=t(kw["key_padding_mask"]),
                        need_weights=c["need_weights"], attn_mask=t(tam),
                        average_attn_weights=c["average"])
        ty = ty.detach().numpy()
        tw = None if tw is None else tw.detach()
        if c["layout"] == "unbatched":
            ty, tw = ty[None], (None if tw is None else tw[None])
        elif c["layout"] == "sf":
            ty = ty.transpose(1, 0, 2)
        ERR.check(self, "torch output: " + c["name"], y, ty, ATOL)
        if c["need_weights"]:
            ERR.check(self, "torch weights: " + c["name"], w, tw.numpy(), ATOL)
        TestCases.torch_compared += 1

    def test_no_copy_rows(self):
        """Row-strided batch-first inputs are read in place."""
        from attn._mha import _rows
        big = np.zeros((2, 5, 11), np.float32)
        a, r = _rows(big[:, :, 1:9], 8)
        self.assertTrue(np.shares_memory(a, big))
        self.assertEqual(r, 11)
        a, r = _rows(big[:, :, 1:9].transpose(1, 0, 2).transpose(1, 0, 2), 8)
        self.assertEqual(r, 11)
        for bad in (big[:, ::2, :8], big[:, :, ::2], big.transpose(1, 0, 2)[:, :, :8]):
            a, r = _rows(bad, bad.shape[2])
            self.assertFalse(np.shares_memory(a, big))
            self.assertEqual(r, bad.shape[2])

    def test_dropout(self):
        rng = np.random.default_rng(9)
        E, H, N, L = 8, 2, 2, 6
        m = attn.MultiheadAttention(E, H, dropout=0.4, batch_first=True, seed=3)
        self.assertTrue(m.training)
        x = rng.standard_normal((N, L, E))
        for seed, offset in ((17, 0), (2**50, 9)):
            y, w = m(x, x, x, dropout_seed=seed, dropout_offset=offset,
                     average_attn_weights=False)
            keep = np.empty((N, H, L, L), bool)
            for b in range(N):
                for h in range(H):
                    keep[b, h] = attn.dropout_keep_mask(0.4, seed, offset, b, h, L, L)
            ry, rw = ref_mha(x, x, x, m.state_dict(), H, H, drop=keep, p_drop=0.4,
                             average=False)
            ERR.check(self, "dropout output", y, ry, ATOL)
            ERR.check(self, "dropout weights", w, rw, ATOL)
        # The layer's own stream: successive calls differ; eval() turns it off.
        y1, _ = m(x, x, x)
        y2, _ = m(x, x, x)
        self.assertFalse(np.array_equal(y1, y2))
        m.eval()
        ye, _ = m(x, x, x)
        ry, _ = ref_mha(x, x, x, m.state_dict(), H, H)
        ERR.check(self, "eval output", ye, ry, ATOL)


CONFIGS = [
    dict(embed_dim=8, num_heads=2),
    dict(embed_dim=8, num_heads=2, bias=False),
    dict(embed_dim=8, num_heads=4, kdim=5, vdim=3),
    dict(embed_dim=8, num_heads=2, kdim=5, vdim=3, bias=False),
    dict(embed_dim=12, num_heads=3, kdim=12, vdim=7),
]


class TestState(unittest.TestCase):
    def test_names_and_shapes(self):
        for cfg in CONFIGS:
            m = attn.MultiheadAttention(**cfg)
            ours = [(n, a.shape, a.dtype) for n, a in m.state_dict().items()]
            for n, shape, dtype in ours:
                self.assertEqual(dtype, np.float32, n)
            if cfg.get("kdim") in (None, cfg["embed_dim"]) and \
                    cfg.get("vdim") in (None, cfg["embed_dim"]):
                self.assertIsNotNone(m.in_proj_weight)
                self.assertIsNone(m.q_proj_weight)
            else:
                self.assertIsNone(m.in_proj_weight)
            if torch is None:
                continue
            tm = torch.nn.MultiheadAttention(**cfg)
            theirs = [(n, tuple(t.shape)) for n, t in tm.state_dict().items()]
            self.assertEqual([(n, s) for n, s, _ in ours], theirs, cfg)

    def test_gqa_shapes(self):
        m = attn.MultiheadAttention(16, 4, num_kv_heads=2, kdim=6)
        self.assertEqual({n: a.shape for n, a in m.state_dict().items()}, {
            "q_proj_weight": (16, 16), "k_proj_weight": (8, 6), "v_proj_weight": (8, 16),
            "in_proj_bias": (32,), "out_proj.weight": (16, 16), "out_proj.bias": (16,)})

    def test_init_like_torch(self):
        m = attn.MultiheadAttention(64, 4, seed=1)
        b = np.sqrt(6.0 / (64 + 192))
        self.assertTrue(np.abs(m.in_proj_weight).max() <= b)
        self.assertTrue(np.abs(m.in_proj_weight).max() > 0.9 * b)
        self.assertTrue(np.abs(m.out_proj.weight).max() <= 1 / 8)
        self.assertFalse(m.in_proj_bias.any() or m.out_proj.bias.any())
        m2 = attn.MultiheadAttention(64, 4, seed=1)
        self.assertTrue(np.array_equal(m.in_proj_weight, m2.in_proj_weight))

    def test_load_from_torch(self):
        if torch is None:
            self.skipTest("torch not importable: torch's parameters not loaded")
        torch.manual_seed(0)
        for cfg in CONFIGS:
            tm = torch.nn.MultiheadAttention(**cfg, batch_first=True).eval()
            with torch.no_grad():
                for n, p in tm.named_parameters():
                    if "bias" in n:
                        p.normal_()
            m = attn.MultiheadAttention(**cfg, batch_first=True).eval()
            m.load_state_dict(tm.state_dict())     # tensors, requires_grad
            for n, a in m.state_dict().items():
                self.assertTrue(np.array_equal(a, tm.state_dict()[n].numpy()), n)
            E = cfg["embed_dim"]
            rng = np.random.default_rng(1)
            x = rng.standard_normal((2, 5, E)).astype(np.float32)
            xk = rng.standard_normal((2, 6, cfg.get("kdim") or E)).astype(np.float32)
            xv = rng.standard_normal((2, 6, cfg.get("vdim") or E)).astype(np.float32)
            y, w = m(x, xk, xv)
            with torch.no_grad():
                ty, tw = tm(*(torch.from_numpy(a) for a in (x, xk, xv)))
            ERR.check(self, "torch float32 layer output", y, ty.numpy(), ATOL)
            ERR.check(self, "torch float32 layer weights", w, tw.numpy(), ATOL)

    def test_load_errors(self):
        m = attn.MultiheadAttention(8, 2)
        sd = {n: a.copy() for n, a in m.state_dict().items()}
        before = m.in_proj_weight.copy()
        bad = dict(sd, in_proj_weight=np.zeros((8, 8)))
        with self.assertRaises(ValueError):
            m.load_state_dict(bad)
        self.assertTrue(np.array_equal(m.in_proj_weight, before))
        missing = {n: a for n, a in sd.items() if n != "out_proj.bias"}
        with self.assertRaises(KeyError):
            m.load_state_dict(missing)
        with self.assertRaises(KeyError):
            m.load_state_dict(dict(sd, bias_k=np.zeros((1, 1, 8))))
        self.assertEqual(m.load_state_dict(missing, strict=False), (["out_proj.bias"], []))
        new = {n: np.full(a.shape, 0.25) for n, a in sd.items()}
        m.load_state_dict(new)
        self.assertTrue((m.in_proj_weight == 0.25).all())
        self.assertEqual(m.in_proj_weight.dtype, np.float32)


class TestTypes(unittest.TestCase):
    """forward(dtype='bf16' / 'f16'): against the float32 layer on the same
    rounded inputs and parameters, within 8 u (|Y| + 1) (the roundings of
    Q, K, V, P, O and Y, u = 2^-9 BF16, 2^-12 F16 as the C tests derive
    them, with slack); self- and cross-attention, packed and separate
    projections, GQA, both layouts."""

    def check(self, mha, q, k, v, dt, **kw):
        rnd = ((lambda a: attn.from_bf16(attn.to_bf16(a))) if dt == "bf16"
               else (lambda a: np.asarray(a, np.float32).astype(np.float16).astype(np.float32)))
        ref = attn.MultiheadAttention(mha.embed_dim, mha.num_heads,
                                      kdim=mha.kdim, vdim=mha.vdim,
                                      num_kv_heads=mha.num_kv_heads,
                                      batch_first=mha.batch_first).eval()
        ref.load_state_dict({n: rnd(a) for n, a in mha.state_dict().items()})
        same = q is k and k is v
        qr = rnd(q)
        kr, vr = (qr, qr) if same else (rnd(k), rnd(v))
        want, _ = ref(qr, kr, vr, need_weights=False, **kw)
        if dt == "bf16":
            q16 = attn.to_bf16(q)
            k16, v16 = (q16, q16) if same else (attn.to_bf16(k), attn.to_bf16(v))
            got, _ = mha(q16, k16, v16, need_weights=False, dtype="bf16", **kw)
            self.assertEqual(got.dtype, np.uint16)
            got = attn.from_bf16(got)
            u = 2.0 ** -9
        else:
            q16 = q.astype(np.float16)
            k16, v16 = (q16, q16) if same else (k.astype(np.float16), v.astype(np.float16))
            got, _ = mha(q16, k16, v16, need_weights=False, dtype="f16", **kw)
            self.assertEqual(got.dtype, np.float16)
            got = got.astype(np.float32)
            u = 2.0 ** -12
        err = np.abs(got - want).max()
        tol = 8 * u * (np.abs(want).max() + 1)
        self.assertLessEqual(err, tol, "%s: %g > %g" % (dt, err, tol))
        ERR.check(self, "%s output" % dt, got, want, tol)

    def test_types(self):
        rng = np.random.default_rng(11)
        for dt in ("bf16", "f16"):
            with self.subTest(dtype=dt, kind="self, batch_first"):
                m = attn.MultiheadAttention(64, 4, batch_first=True).eval()
                x = rng.standard_normal((2, 33, 64)).astype(np.float32)
                self.check(m, x, x, x, dt, is_causal=True)
            with self.subTest(dtype=dt, kind="cross, kdim/vdim, GQA, seq first"):
                m = attn.MultiheadAttention(64, 8, kdim=48, vdim=40, num_kv_heads=2).eval()
                q = rng.standard_normal((21, 3, 64)).astype(np.float32)
                k = rng.standard_normal((37, 3, 48)).astype(np.float32)
                v = rng.standard_normal((37, 3, 40)).astype(np.float32)
                self.check(m, q, k, v, dt)

    def test_bad_dtype(self):
        m = attn.MultiheadAttention(16, 2).eval()
        x = np.zeros((3, 1, 16), np.float32)
        with self.assertRaises(ValueError):
            m(x, x, x, dtype="f64")


class TestErrors(unittest.TestCase):
    def test_constructor(self):
        for kw, exc in ((dict(add_bias_kv=True), NotImplementedError),
                        (dict(add_zero_attn=True), NotImplementedError),
                        (dict(device="cuda"), NotImplementedError),
                        (dict(dtype=np.float64), NotImplementedError),
                        (dict(num_heads=3), ValueError),
                        (dict(num_kv_heads=3, num_heads=4), ValueError),
                        (dict(dropout=1.5), ValueError),
                        (dict(engine="gpu"), ValueError),
                        (dict(engine=None), ValueError)):
            args = dict(embed_dim=8, num_heads=2)
            args.update(kw)
            with self.subTest(str(kw)), self.assertRaises(exc):
                attn.MultiheadAttention(**args)

    def test_forward(self):
        rng = np.random.default_rng(4)
        m = attn.MultiheadAttention(8, 2, batch_first=True).eval()
        x = rng.standard_normal((2, 5, 8))
        table = [
            ("kv_lens > S", dict(kv_lens=[6, 1]), "ATTN_ERR_BAD_LENGTH"),
            ("scale inf", dict(scale=float("inf")), "ATTN_ERR_BAD_SCALE"),
            ("window align", dict(align="diagonal"), ValueError),
            ("key_padding_mask shape", dict(key_padding_mask=np.zeros((2, 4), bool)),
             ValueError),
            ("attn_mask shape", dict(attn_mask=np.zeros((2, 5, 5), bool)), ValueError),
            ("attn_mask dtype", dict(attn_mask=np.zeros((5, 5), np.int8)), TypeError),
        ]
        for name, kw, expected in table:
            with self.subTest(name):
                if isinstance(expected, str):
                    with self.assertRaises(attn.AttnError) as cm:
                        m(x, x, x, **kw)
                    self.assertEqual(cm.exception.status_name, expected)
                    self.assertIn(expected, str(cm.exception))
                else:
                    with self.assertRaises(expected):
                        m(x, x, x, **kw)
        for q, k, v in ((x[..., :7], x, x), (x, x[:1], x[:1]), (x, x, x[:, :4]), (x[0], x, x)):
            with self.assertRaises(ValueError):
                m(q, k, v)
        m.threads = 5000
        with self.assertRaises(attn.AttnError) as cm:
            m(x, x, x)
        self.assertEqual(cm.exception.status_name, "ATTN_ERR_BAD_THREADS")


if __name__ == "__main__":
    print("attn %s from %s" % (attn.library_version(), attn.library_path))
    if torch is None:
        print("torch not importable: the nn.MultiheadAttention comparisons are SKIPPED")
    else:
        print("torch %s: comparing with nn.MultiheadAttention" % torch.__version__)
    prog = unittest.main(exit=False, verbosity=2)
    ERR.report("mha")
    if torch is not None:
        print("nn.MultiheadAttention comparisons: %d cases" % TestCases.torch_compared)
    sys.exit(0 if prog.result.wasSuccessful() else 1)
