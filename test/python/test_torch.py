"""attn.torch against PyTorch's float64 autograd.

- SDPA: each case of SDPA_CASES runs attn.torch.scaled_dot_product_attention
  on float32 (or bfloat16) tensors, forward and backward, and compares the
  output, the logsumexp and the gradients of query, key, value and a float
  attn_mask with ref_sdpa_torch (_ref.py: the formula in float64 torch
  operations, differentiated by torch's autograd) on the same values.
- gradcheck: torch.autograd.gradcheck needs float64 functions; attn
  computes in float32.  The checked function is "round the float64 inputs
  to float32, run attn, widen the result", so finite differences see
  float32 rounding: eps 1e-3 (exact in float32 around O(1) values),
  atol 1e-3, rtol 1e-3 (the rounding noise is ~ 6e-8 |O| / 2e-3 = 3e-5;
  a wrong gradient term is O(0.1)).  The gradients are compared with
  float64 autograd at 1e-5 above; gradcheck adds an independent check.
- MultiheadAttention: the cases of test_mha.py's table, forward and
  backward against a float64 torch reference of the layer (projections,
  ref_sdpa_torch, output projection), every parameter's gradient; the
  cases torch can express also against nn.MultiheadAttention in float64.
- Training: a 2-layer causal model trained 200 steps with attn's layer
  and with nn.MultiheadAttention from the same initialisation and batches.
- Dropout, empty sizes, no-copy views, kept plans, 16-bit types, errors.

Tolerances (inputs standard normal, head dims <= 16): float32 outputs and
gradients |error| <= 1e-5 + 1e-5 |ref|; bfloat16 <= 0.05 + 0.03 |ref|.
"""

import math
import sys
import time
import unittest

import numpy as np

from _ref import Errors, ref_sdpa_torch, torch, visible_window

if torch is None:
    print("torch not importable: attn.torch not tested (Debian: python3-torch)")
    sys.exit(77)

import attn                       # noqa: E402
import attn.torch as at           # noqa: E402
from attn import _plans           # noqa: E402
from test_mha import CASES as MHA_CASES, make_inputs, mask_terms   # noqa: E402

ATOL, RTOL = 1e-5, 1e-5
ATOL16, RTOL16 = 0.05, 0.03
ERR = Errors()


def S(name, B=(2,), H=2, Hkv=None, L=5, S=7, E=8, Ev=None, mask=None, causal=False,
      wl=None, wr=None, align="top_left", kv_lens=None, q_lens=None, gk=False, gq=False,
      layout=None, bs=None, p=0.0, scale=None, view=None, dtype=torch.float32):
    return dict(name=name, B=B, H=H, Hkv=Hkv or H, L=L, S=S, E=E, Ev=Ev or E, mask=mask,
                causal=causal, wl=wl, wr=wr, align=align, kv_lens=kv_lens, q_lens=q_lens,
                gk=gk, gq=gq, layout=layout, bs=bs, p=p, scale=scale, view=view, dtype=dtype)


# mask: "bool" (full), "bool (L, S)", "float" (full, with -inf entries),
# "float (H, 1, S)", "float (1, S)", "float batch (B0, 1, ...)".
# view: "bshd" (inputs are (B, L, H, E) tensors transposed: read in place),
# "k batch 1" (key and value broadcast over the batch).
SDPA_CASES = [
    S("plain"),
    S("one head, 2-D inputs", B=(), H=1),
    S("batch (2, 3)", B=(2, 3)),
    S("no batch (3-D)", B=()),
    S("Ev != E", E=8, Ev=5),
    S("scale 0.3", scale=0.3),
    S("is_causal", causal=True, L=7, S=7),
    S("is_causal L > S (rows with no key)", causal=True, L=9, S=4),
    S("bottom-right causal L < S", wr=0, align="bottom_right", L=4, S=9),
    S("window 2/1", wl=2, wr=1, L=8, S=8),
    S("bool mask", mask="bool"),
    S("bool mask (L, S)", mask="bool (L, S)"),
    S("float mask (gradient)", mask="float"),
    S("float mask (H, 1, S)", mask="float (H, 1, S)"),
    S("float mask (1, S)", mask="float (1, S)"),
    S("float mask batch (2, 1, ...) of (2, 3)", B=(2, 3), mask="float batch"),
    S("float mask and causal", mask="float", causal=True, L=6, S=6),
    S("GQA 4/2", H=4, Hkv=2),
    S("MQA 6/1", H=6, Hkv=1, L=3, S=10),
    S("kv_lens", kv_lens=[7, 3]),
    S("q_lens and kv_lens, bottom-right causal", q_lens=[5, 2], kv_lens=[6, 4], wr=0,
      align="bottom_right", L=5, S=7),
    S("global keys and queries with a window", gk=True, gq=True, wl=1, wr=1, L=9, S=9),
    S("block layout 16, per head", layout="per head", bs=16, L=40, S=50, H=2),
    S("block layout 16, shared, causal", layout="shared", bs=16, L=33, S=33, causal=True),
    S("dropout 0.3", p=0.3),
    S("dropout 0.3, causal, GQA, float mask", p=0.3, causal=True, H=4, Hkv=2, mask="float",
      L=6, S=6),
    S("BSHD views (read in place)", view="bshd", B=(3,), H=3, L=6, S=9),
    S("key/value batch 1 broadcast", view="k batch 1", B=(3,)),
    S("L 40, S 70, E 16: the sgemm path", L=40, S=70, E=16, H=2, mask="float", causal=True,
      align="bottom_right"),
    S("bfloat16", dtype=torch.bfloat16, L=6, S=9),
    S("bfloat16 causal GQA", dtype=torch.bfloat16, causal=True, H=4, Hkv=2, L=8, S=8),
    S("float16", dtype=torch.float16, L=6, S=9),
]


def sdpa_inputs(c, rng):
    B, H, Hkv, L, Sn, E, Ev = c["B"], c["H"], c["Hkv"], c["L"], c["S"], c["E"], c["Ev"]
    kb = (1,) * len(B) if c["view"] == "k batch 1" else B
    q = torch.from_numpy(rng.standard_normal(B + (H, L, E)))
    k = torch.from_numpy(rng.standard_normal(kb + (Hkv, Sn, E)))
    v = torch.from_numpy(rng.standard_normal(kb + (Hkv, Sn, Ev)))
    if c["dtype"] != torch.float32:        # values the 16-bit type holds
        q, k, v = (t.to(c["dtype"]).double() for t in (q, k, v))
    full = B + (H, L, Sn)
    mask = None
    m = c["mask"]
    if m == "bool":
        mask = rng.random(full) < 0.7
    elif m == "bool (L, S)":
        mask = rng.random((L, Sn)) < 0.7
    elif m and m.startswith("float"):
        shape = {"float": full, "float (H, 1, S)": (H, 1, Sn), "float (1, S)": (1, Sn),
                 "float batch": (B[0], 1, H, L, Sn) if len(B) == 2 else full}[m]
        mask = rng.standard_normal(shape)
        if m == "float":
            mask[rng.random(shape) < 0.2] = -np.inf
    return q, k, v, mask


def sdpa_visible(c, rng_flags):
    """bool numpy (B..., H, L, S): every rule of attn_sdpa for the case."""
    B, H, L, Sn = c["B"], c["H"], c["L"], c["S"]
    nb = int(np.prod(B, dtype=np.int64))
    wr = 0 if c["causal"] else c["wr"]
    br = c["align"] == "bottom_right"
    vis = np.ones((nb, H, L, Sn), bool)
    gk, gq = rng_flags
    for b in range(nb):
        m = None if c["kv_lens"] is None else c["kv_lens"][b]
        n = None if c["q_lens"] is None else c["q_lens"][b]
        win = visible_window(L, Sn, c["wl"], wr, br, m, n)
        lens = visible_window(L, Sn, None, None, False, m, n)
        if gk is not None:
            win = win | gk.reshape(nb, Sn)[b][None, :]
        if gq is not None:
            win = win | gq.reshape(nb, L)[b][:, None]
        vis[b] &= win & lens
    return vis.reshape(B + (H, L, Sn))


def layout_of(c, rng):
    bs = c["bs"]
    nb, mb = -(-c["L"] // bs), -(-c["S"] // bs)
    if c["layout"] == "per head":
        lay = rng.random((c["H"], nb, mb)) < 0.6
        lay[:, :, 0] = True
    else:
        lay = rng.random((nb, mb)) < 0.6
        lay[:, 0] = True
    return lay


def expand_blocks(lay, L, Sn, bs):
    return np.repeat(np.repeat(lay, bs, axis=-2), bs, axis=-1)[..., :L, :Sn]


class TestSdpa(unittest.TestCase):

    def test_cases(self):
        for i, c in enumerate(SDPA_CASES):
            with self.subTest(c["name"]):
                self.run_case(i, c)

    def run_case(self, i, c):
        rng = np.random.default_rng(100 + i)
        dt = c["dtype"]
        atol, rtol = (ATOL, RTOL) if dt == torch.float32 else (ATOL16, RTOL16)
        q64, k64, v64, mask = sdpa_inputs(c, rng)
        B, H, L, Sn = c["B"], c["H"], c["L"], c["S"]
        kw = {}
        gk = gq = None
        if c["gk"]:
            gk = rng.random(B + (Sn,)) < 0.2
            kw["global_k"] = torch.from_numpy(gk)
        if c["gq"]:
            gq = rng.random(B + (L,)) < 0.2
            kw["global_q"] = torch.from_numpy(gq)
        vis = sdpa_visible(c, (gk, gq))
        if c["layout"]:
            lay = layout_of(c, rng)
            kw["block_layout"] = torch.from_numpy(lay)
            kw["block_size"] = c["bs"]
            vis = vis & expand_blocks(lay, L, Sn, c["bs"])[..., :, :, :] if lay.ndim == 3 \
                else vis & expand_blocks(lay, L, Sn, c["bs"])
        bias64 = None
        amask = None
        if mask is not None and mask.dtype == bool:
            vis = vis & mask
            amask = torch.from_numpy(mask)
        elif mask is not None:
            bias64 = torch.from_numpy(mask).requires_grad_()
            amask = bias64.detach().float().requires_grad_()
        drop = None
        if c["p"]:
            seed, offset = 1234 + i, 7
            kw.update(dropout_seed=seed, dropout_offset=offset)
            nb = int(np.prod(B, dtype=np.int64))
            drop = np.stack([np.stack([attn.dropout_keep_mask(c["p"], seed, offset, b, h, L, Sn)
                                       for h in range(H)]) for b in range(nb)])
            drop = drop.reshape(B + (H, L, Sn))
        for n in ("kv_lens", "q_lens"):
            if c[n] is not None:
                kw[n] = c[n]
        if c["causal"]:
            kw["is_causal"] = True
        for n, m in (("wl", "window_left"), ("wr", "window_right")):
            if c[n] is not None:
                kw[m] = c[n]
        kw["align"] = c["align"]
        if c["scale"] is not None:
            kw["scale"] = c["scale"]
        if c["Hkv"] != H:
            kw["enable_gqa"] = True

        # attn's inputs: the same values in dt, leaves of their own
        if c["view"] == "bshd":
            bases = [t.detach().transpose(-2, -3).contiguous().to(dt).requires_grad_()
                     for t in (q64, k64, v64)]
            qa, ka, va = (t.transpose(-2, -3) for t in bases)
        else:
            bases = [t.detach().to(dt).requires_grad_() for t in (q64, k64, v64)]
            qa, ka, va = bases
        leaves64 = [t.requires_grad_() for t in (q64, k64, v64)]
        out, lse = at.scaled_dot_product_attention(qa, ka, va, attn_mask=amask,
                                                   dropout_p=c["p"], return_lse=True, **kw)
        self.assertEqual(out.dtype, dt)
        self.assertEqual(tuple(out.shape), B + (H, L, c["Ev"]))
        ro, _, rlse = ref_sdpa_torch(q64, k64, v64, vis, bias64, c["scale"], drop, c["p"])
        # 16-bit errors are reported apart from float32's
        tag = "" if dt == torch.float32 else " " + str(dt).split(".")[-1]
        name = c["name"]
        ERR.check(self, "output%s: %s" % (tag, name), out.double().detach(), ro.detach(),
                  atol, rtol)
        ERR.check(self, "lse%s: %s" % (tag, name), lse.double(), rlse.detach(), atol, rtol)
        g = torch.from_numpy(rng.standard_normal(tuple(ro.shape)))
        if dt != torch.float32:
            g = g.to(dt).double()
        out.backward(g.to(dt))
        ro.backward(g)
        for n, a, r in zip("qkv", bases, leaves64):
            ga = a.grad
            if c["view"] == "bshd":
                ga = ga.transpose(-2, -3)
            ERR.check(self, "d%s%s: %s" % (n, tag, name), ga.double(), r.grad, atol, rtol)
        if bias64 is not None:
            ERR.check(self, "dmask%s: %s" % (tag, name), amask.grad.double(), bias64.grad,
                      atol, rtol)

    def test_against_torch_sdpa(self):
        """torch 2.x: the same call to F.scaled_dot_product_attention in
        float64 (forward and gradients), where both define the result."""
        F = torch.nn.functional
        if not hasattr(F, "scaled_dot_product_attention"):
            self.skipTest("torch %s has no F.scaled_dot_product_attention" % torch.__version__)
        try:                                  # enable_gqa: torch >= 2.5
            t = torch.zeros(1, 2, 1, 1)
            F.scaled_dot_product_attention(t, t[:, :1], t[:, :1], enable_gqa=True)
            has_gqa = True
        except TypeError:
            has_gqa = False
        rng = np.random.default_rng(17)
        cases = [({}, 4, None), ({"is_causal": True}, 4, None), ({"scale": 0.25}, 4, None),
                 ({}, 4, "bool"), ({}, 4, "float"), ({}, 1, "float")]
        if has_gqa:
            cases += [({"enable_gqa": True}, 2, None), ({"enable_gqa": True}, 1, "float")]
        for kw, Hkv, mk in cases:
            with self.subTest("%s %s Hkv %d" % (kw, mk, Hkv)):
                q = torch.from_numpy(rng.standard_normal((2, 4, 6, 8)))
                k = torch.from_numpy(rng.standard_normal((2, Hkv, 6, 8)))
                v = torch.from_numpy(rng.standard_normal((2, Hkv, 6, 5)))
                mask = None
                if mk == "bool":
                    mask = torch.from_numpy(rng.random((6, 6)) < 0.7)
                    mask[:, 0] = True
                elif mk == "float":
                    mask = torch.from_numpy(rng.standard_normal((4, 6, 6))).requires_grad_()
                ins64 = [t.clone().requires_grad_() for t in (q, k, v)]
                ins32 = [t.float().requires_grad_() for t in (q, k, v)]
                m32 = None if mask is None else (mask if mask.dtype == torch.bool else
                                                 mask.detach().float().requires_grad_())
                ref = F.scaled_dot_product_attention(*ins64, attn_mask=mask, **kw)
                out = at.scaled_dot_product_attention(*ins32, attn_mask=m32, **kw)
                ERR.check(self, "vs F.sdpa output: %s" % kw, out.detach().double(),
                          ref.detach(), ATOL, RTOL)
                g = torch.from_numpy(rng.standard_normal(tuple(ref.shape)))
                ref.backward(g)
                out.backward(g.float())
                for n, a, r in zip("qkv", ins32, ins64):
                    ERR.check(self, "vs F.sdpa d%s: %s" % (n, kw), a.grad.double(), r.grad,
                              ATOL, RTOL)
                if mk == "float":
                    ERR.check(self, "vs F.sdpa dmask: %s" % kw, m32.grad.double(), mask.grad,
                              ATOL, RTOL)
                TestSdpa.torch_sdpa_compared += 1

    torch_sdpa_compared = 0

    def test_gradcheck(self):
        """gradcheck of float64 -> float32 -> attn -> float64 (see the top)."""
        rng = np.random.default_rng(7)
        checks = [
            ({}, False),
            ({"is_causal": True}, True),
            ({"enable_gqa": True, "window_left": 2, "window_right": 1, "kv_lens": [5, 3]},
             False),
        ]
        for kw, with_bias in checks:
            Hkv = 1 if kw.get("enable_gqa") else 2
            q = torch.from_numpy(rng.standard_normal((2, 2, 4, 3))).requires_grad_()
            k = torch.from_numpy(rng.standard_normal((2, Hkv, 5, 3))).requires_grad_()
            v = torch.from_numpy(rng.standard_normal((2, Hkv, 5, 2))).requires_grad_()
            inputs = [q, k, v]
            if with_bias:
                inputs.append(torch.from_numpy(rng.standard_normal((2, 1, 4, 5)))
                              .requires_grad_())

            def f(q, k, v, bias=None):
                return at.scaled_dot_product_attention(
                    q.float(), k.float(), v.float(),
                    attn_mask=None if bias is None else bias.float(), **kw).double()

            with self.subTest(str(kw)):
                self.assertTrue(torch.autograd.gradcheck(f, tuple(inputs), eps=1e-3, atol=1e-3,
                                                         rtol=1e-3))

    def test_dropout_generator(self):
        """Without dropout_seed the seed comes from torch's generator."""
        q = torch.randn(2, 2, 6, 8)
        torch.manual_seed(11)
        a = at.scaled_dot_product_attention(q, q, q, dropout_p=0.5)
        b = at.scaled_dot_product_attention(q, q, q, dropout_p=0.5)
        torch.manual_seed(11)
        seed = int(torch.randint(0, 2**62, (1,), dtype=torch.int64))
        torch.manual_seed(11)
        self.assertTrue(torch.equal(a, at.scaled_dot_product_attention(q, q, q, dropout_p=0.5)))
        self.assertTrue(torch.equal(a, at.scaled_dot_product_attention(
            q, q, q, dropout_p=0.5, dropout_seed=seed)))
        self.assertFalse(torch.equal(a, b))

    def test_empty(self):
        for shape_q, shape_k, ev in (((0, 2, 3, 4), (0, 2, 5, 4), 4),
                                     ((2, 2, 0, 4), (2, 2, 5, 4), 4),
                                     ((2, 2, 3, 4), (2, 2, 0, 4), 6)):
            q = torch.randn(shape_q, requires_grad=True)
            k = torch.randn(shape_k, requires_grad=True)
            v = torch.randn(shape_k[:-1] + (ev,), requires_grad=True)
            o, lse = at.scaled_dot_product_attention(q, k, v, return_lse=True)
            self.assertEqual(tuple(o.shape), shape_q[:-1] + (ev,))
            self.assertFalse(bool(o.ne(0).any()))
            self.assertTrue(bool(torch.isneginf(lse).all()))
            o.sum().backward()
            self.assertEqual(float(q.grad.abs().sum()) + float(k.grad.abs().sum()), 0.0)

    def test_no_copy_and_kept_plans(self):
        """BSHD views are read in place; a repeated call makes no plan."""
        base = torch.randn(2, 6, 3, 8)                  # (B, L, H, E)
        qv = base.transpose(1, 2)
        t, _ = at._view(qv, (2, 3, 6, 8), min_seq=8)
        self.assertIs(t, qv)
        t, _ = at._view(base.permute(0, 2, 3, 1), (2, 3, 8, 6), min_seq=6)
        self.assertIsNot(t, base)                       # dim stride != 1: copied
        _plans.clear()
        at._FAST.calls = {}
        k = torch.randn(2, 3, 9, 8)
        first = at.scaled_dot_product_attention(qv, k, k)
        self.assertEqual(_plans.cached(), 1)
        for _ in range(5):
            again = at.scaled_dot_product_attention(qv, k, k)
        self.assertEqual(_plans.cached(), 1)
        self.assertTrue(torch.equal(first, again))
        # the kept call sees new data at the same shapes
        k2 = torch.randn(2, 3, 9, 8)
        self.assertTrue(torch.equal(at.scaled_dot_product_attention(qv, k2, k2),
                                    at.scaled_dot_product_attention(qv.contiguous(), k2, k2)))
        # torch.set_num_threads is followed (threads=None)
        n = torch.get_num_threads()
        torch.set_num_threads(1)
        one = at.scaled_dot_product_attention(qv, k, k)
        torch.set_num_threads(n)
        self.assertTrue(torch.equal(one, first))       # thread-count invariant

    def test_errors(self):
        q = torch.randn(2, 2, 4, 8)
        cases = [
            ("float64", lambda: at.scaled_dot_product_attention(q.double(), q.double(),
                                                                 q.double()), TypeError),
            ("mixed dtypes", lambda: at.scaled_dot_product_attention(q, q.bfloat16(), q),
             TypeError),
            ("not a tensor", lambda: at.scaled_dot_product_attention(q, q.numpy(), q),
             TypeError),
            ("E differs", lambda: at.scaled_dot_product_attention(q, torch.randn(2, 2, 4, 7),
                                                                   torch.randn(2, 2, 4, 7)),
             ValueError),
            ("heads 4/2 without enable_gqa", lambda: at.scaled_dot_product_attention(
                torch.randn(2, 4, 4, 8), q, q), ValueError),
            ("mask shape", lambda: at.scaled_dot_product_attention(
                q, q, q, attn_mask=torch.ones(3, 4, dtype=torch.bool)), ValueError),
            ("int mask", lambda: at.scaled_dot_product_attention(
                q, q, q, attn_mask=torch.ones(4, 4, dtype=torch.int32)), TypeError),
            ("float kv_lens", lambda: at.scaled_dot_product_attention(
                q, q, q, kv_lens=torch.tensor([1.0, 2.0])), TypeError),
            ("block_size without layout", lambda: at.scaled_dot_product_attention(
                q, q, q, block_size=16), ValueError),
            ("layout shape", lambda: at.scaled_dot_product_attention(
                q, q, q, block_layout=torch.ones(2, 2, dtype=torch.bool), block_size=16),
             ValueError),
            ("scale inf", lambda: at.scaled_dot_product_attention(q, q, q, scale=math.inf),
             "ATTN_ERR_BAD_SCALE"),
            ("dropout 2", lambda: at.scaled_dot_product_attention(q, q, q, dropout_p=2.0),
             "ATTN_ERR_BAD_OPTION"),
            ("kv_lens > S", lambda: at.scaled_dot_product_attention(q, q, q, kv_lens=[9, 1]),
             "ATTN_ERR_BAD_LENGTH"),
            ("block size 12", lambda: at.scaled_dot_product_attention(
                q, q, q, block_layout=torch.ones(1, 1, dtype=torch.bool), block_size=12),
             "ATTN_ERR_BAD_OPTION"),
            ("engine", lambda: at.scaled_dot_product_attention(q, q, q, engine="gpu"),
             ValueError),
        ]
        for name, fn, want in cases:
            with self.subTest(name):
                if isinstance(want, str):
                    with self.assertRaises(at.AttnError) as cm:
                        fn()
                    self.assertEqual(cm.exception.status_name, want)
                else:
                    with self.assertRaises(want) as cm:
                        fn()
                    self.assertNotIsInstance(cm.exception, at.AttnError)


# ---------------------------------------------------------------------------
# MultiheadAttention


def ref_mha_torch(x, xk, xv, P, H, Hkv, vis, bias, scale=None, drop=None, p_drop=0.0):
    """Batch-first float64 layer in torch operations: x (N, L, E) ...,
    P the state_dict names -> float64 leaf tensors."""
    N, L, E = x.shape
    S = xk.shape[1]
    dh = E // H
    kv = Hkv * dh
    if "in_proj_weight" in P:
        W = P["in_proj_weight"]
        Wq, Wk, Wv = W[:E], W[E:2 * E], W[2 * E:]
    else:
        Wq, Wk, Wv = P["q_proj_weight"], P["k_proj_weight"], P["v_proj_weight"]
    b = P.get("in_proj_bias")
    bq, bk, bv = (0.0, 0.0, 0.0) if b is None else (b[:E], b[E:E + kv], b[E + kv:])
    q = (x @ Wq.T + bq).reshape(N, L, H, dh).transpose(1, 2)
    k = (xk @ Wk.T + bk).reshape(N, S, Hkv, dh).transpose(1, 2)
    v = (xv @ Wv.T + bv).reshape(N, S, Hkv, dh).transpose(1, 2)
    o, p, _ = ref_sdpa_torch(q, k, v, vis, torch.from_numpy(bias), scale, drop, p_drop)
    y = o.transpose(1, 2).reshape(N, L, E) @ P["out_proj.weight"].T
    if "out_proj.bias" in P:
        y = y + P["out_proj.bias"]
    return y, p


def to_layout(t, layout):
    if layout == "sf":
        return t.transpose(0, 1)
    if layout == "unbatched":
        return t[0]
    return t


class TestMha(unittest.TestCase):

    def test_cases(self):
        for i, c in enumerate(MHA_CASES):
            with self.subTest(c["name"]):
                self.run_case(i, c)

    def run_case(self, i, c, p_drop=0.0):
        rng = np.random.default_rng(3000 + i)
        if c["layout"] == "unbatched":
            c = dict(c, N=1)
        E, H, N, L, Sn = c["E"], c["H"], c["N"], c["L"], c["S"]
        Hkv = c["Hkv"] or H
        torch.manual_seed(i)
        m = at.MultiheadAttention(E, H, dropout=p_drop, bias=c["bias"], kdim=c["kdim"],
                                  vdim=c["vdim"], batch_first=c["layout"] == "bf",
                                  num_kv_heads=c["Hkv"])
        if not p_drop:
            m.eval()
        with torch.no_grad():
            for n, prm in m.named_parameters():
                if "bias" in n:
                    prm.copy_(torch.from_numpy(rng.standard_normal(tuple(prm.shape)) * 0.5))
        P = {n: prm.detach().double().requires_grad_() for n, prm in m.named_parameters()}
        x, xk, xv, kpm, am = make_inputs(rng, c)
        x64, xk64, xv64 = (torch.from_numpy(np.array(a, np.float64)) for a in (x, xk, xv))
        # attn's inputs, float32, in the case's layout and strides
        xa = torch.from_numpy(np.asarray(x, np.float32) if c["strided"] != "rows" else x)
        if c["strided"] == "rows":
            xka, xva = torch.from_numpy(xk), torch.from_numpy(xv)
        else:
            xka, xva = (torch.from_numpy(np.asarray(a, np.float32)) for a in (xk, xv))
        leaves = [xa.requires_grad_()]
        refs = [x64.requires_grad_()]
        if c["inputs"] == "self":
            xka = xva = xa
            xk64 = xv64 = x64
        elif c["inputs"] == "kv-same":
            xka.requires_grad_()
            xva = xka
            xk64.requires_grad_()
            xv64 = xk64
            leaves.append(xka)
            refs.append(xk64)
        else:
            leaves += [xka.requires_grad_(), xva.requires_grad_()]
            refs += [xk64.requires_grad_(), xv64.requires_grad_()]
        kw = dict(key_padding_mask=None if kpm is None else torch.from_numpy(
                      kpm[0] if c["layout"] == "unbatched" else kpm),
                  need_weights=c["need_weights"], average_attn_weights=c["average"],
                  is_causal=c["causal"])
        if am is not None:
            kw["attn_mask"] = torch.from_numpy(am[:H] if c["layout"] == "unbatched" and
                                               am.ndim == 3 else am)
        for n in ("kv_lens", "q_lens", "scale"):
            if c[n] is not None:
                kw[n] = c[n]
        qi, ki, vi = (to_layout(t, c["layout"]) for t in (xa, xka, xva))
        if c["inputs"] == "self":
            ki = vi = qi
        elif c["inputs"] == "kv-same":
            vi = ki
        drop = None
        if p_drop:
            torch.manual_seed(77)
            seed = int(torch.randint(0, 2**62, (1,), dtype=torch.int64))
            drop = np.stack([np.stack([attn.dropout_keep_mask(p_drop, seed, 0, b, h, L, Sn)
                                       for h in range(H)]) for b in range(N)])
            torch.manual_seed(77)
        y, w = m(qi, ki, vi, **kw)
        if c["layout"] == "unbatched":
            y, w = y[None], (None if w is None else w[None])
        elif c["layout"] == "sf":
            y = y.transpose(0, 1)
        vis, bias = mask_terms(N, H, L, Sn, kpm, am, c["causal"], c["kv_lens"], c["q_lens"])
        ry, rp = ref_mha_torch(x64, xk64, xv64, P, H, Hkv, vis, bias, c["scale"], drop, p_drop)
        name = c["name"] + (" dropout %g" % p_drop if p_drop else "")
        ERR.check(self, "mha output: " + name, y.detach().double(), ry.detach(), ATOL, RTOL)
        if c["need_weights"]:
            rw = rp.mean(1) if c["average"] else rp
            ERR.check(self, "mha weights: " + name, w.double(), rw.detach(), ATOL, RTOL)
        g = torch.from_numpy(rng.standard_normal(tuple(ry.shape)))
        y.backward(g.float())
        ry.backward(g)
        for n, a, r in zip(("dx", "dkey", "dvalue"), leaves, refs):
            ERR.check(self, "mha %s: %s" % (n, name), a.grad.double(), r.grad, ATOL, RTOL)
        for n, prm in m.named_parameters():
            ERR.check(self, "mha d%s: %s" % (n, name), prm.grad.double(), P[n].grad, ATOL,
                      RTOL)
        if c["torch_ok"] and c["Hkv"] is None and not p_drop and c["strided"] is None:
            self.against_nn(m, c, qi, ki, vi, kw, y, leaves, g)

    def against_nn(self, m, c, qi, ki, vi, kw, y, leaves, g):
        """The same layer as nn.MultiheadAttention in float64: output and
        every gradient."""
        r = torch.nn.MultiheadAttention(c["E"], c["H"], bias=c["bias"], kdim=c["kdim"],
                                        vdim=c["vdim"], batch_first=c["layout"] == "bf",
                                        dtype=torch.float64)
        r.load_state_dict({n: t.double() for n, t in m.state_dict().items()})
        ins = {}
        for t in (qi, ki, vi):
            if id(t) not in ins:
                ins[id(t)] = t.detach().double().requires_grad_()
        q2, k2, v2 = ins[id(qi)], ins[id(ki)], ins[id(vi)]
        kw2 = dict(kw)
        if kw2.get("attn_mask") is not None and kw2["attn_mask"].dtype != torch.bool:
            kw2["attn_mask"] = kw2["attn_mask"].double()
        if kw2.get("key_padding_mask") is not None and \
                kw2["key_padding_mask"].dtype != torch.bool:
            kw2["key_padding_mask"] = kw2["key_padding_mask"].double()
        if kw2.pop("is_causal"):
            L, Sn = qi.shape[-2 if c["layout"] != "sf" else 0], ki.shape[-2 if c["layout"] != "sf" else 0]
            L = c["L"]
            Sn = c["S"]
            kw2["attn_mask"] = torch.ones(L, Sn, dtype=torch.bool).triu(1) \
                if kw2.get("attn_mask") is None else kw2["attn_mask"]
            if kw2["attn_mask"].dtype != torch.bool or kw2["attn_mask"].dim() != 2:
                return
        ry, _ = r(q2, k2, v2, **kw2)
        yy = y if c["layout"] != "sf" else y.transpose(0, 1)
        if c["layout"] == "unbatched":
            yy = yy[0]
        ERR.check(self, "nn.MultiheadAttention output: " + c["name"], yy.detach().double(),
                  ry.detach(), ATOL, RTOL)
        gg = g if c["layout"] == "bf" else g.transpose(0, 1) if c["layout"] == "sf" else g[0]
        ry.backward(gg)
        for n, prm in m.named_parameters():
            ERR.check(self, "nn.MultiheadAttention d%s: %s" % (n, c["name"]),
                      prm.grad.double(), dict(r.named_parameters())[n].grad, ATOL, RTOL)
        TestMha.nn_compared += 1

    nn_compared = 0

    def test_dropout(self):
        for i in (0, 3, 20, 24):
            with self.subTest(MHA_CASES[i]["name"]):
                self.run_case(i, MHA_CASES[i], p_drop=0.25)

    def test_init_and_state_dict(self):
        for kw in ({}, {"kdim": 5, "vdim": 7}, {"bias": False}):
            torch.manual_seed(5)
            a = at.MultiheadAttention(16, 4, **kw)
            torch.manual_seed(5)
            r = torch.nn.MultiheadAttention(16, 4, **kw)
            sa, sr = a.state_dict(), r.state_dict()
            self.assertEqual(list(sa), list(sr))
            for n in sa:
                self.assertTrue(torch.equal(sa[n], sr[n]), n)
            a.load_state_dict(r.state_dict())

    def test_kept_inference_calls(self):
        """Repeated no-grad calls reuse the layer's kept call; it reads the
        parameters' current values and new inputs, and equals the full path."""
        torch.manual_seed(9)
        for kw, cross in (({"batch_first": True}, False), ({}, False),
                          ({"kdim": 5, "vdim": 3}, True)):
            m = at.MultiheadAttention(8, 2, **kw).eval()
            x = torch.randn(4, 3, 8)
            xk, xv = (torch.randn(6, 3, 5), torch.randn(6, 3, 3)) if cross else (x, x)
            with torch.no_grad():
                first, w1 = m(x, xk, xv)
                self.assertEqual(len(m._fast), 1)
                again, w2 = m(x, xk, xv)
                self.assertTrue(torch.equal(first, again) and torch.equal(w1, w2))
                m.out_proj.weight.mul_(2.0)           # in place, as an optimizer does
                x2 = torch.randn(4, 3, 8)
                xk2 = torch.randn(6, 3, 5) if cross else x2
                xv2 = torch.randn(6, 3, 3) if cross else x2
                kept, _ = m(x2, xk2, xv2)
                self.assertEqual(len(m._fast), 1)
            full, _ = m(x2, xk2, xv2)                 # grad enabled: the full path
            self.assertTrue(torch.equal(kept, full.detach()))

    def test_bf16_layer(self):
        torch.manual_seed(2)
        m = at.MultiheadAttention(16, 4, batch_first=True)
        mb = at.MultiheadAttention(16, 4, batch_first=True, dtype=torch.bfloat16)
        mb.load_state_dict({n: t.bfloat16() for n, t in m.state_dict().items()})
        x = torch.randn(2, 5, 16).bfloat16()
        y, _ = mb(x, x, x)
        self.assertEqual(y.dtype, torch.bfloat16)
        m.load_state_dict({n: t.float() for n, t in mb.state_dict().items()})
        ref, _ = m(x.float(), x.float(), x.float())
        ERR.check(self, "mha bf16 output", y.detach().double(), ref.detach().double(),
                  ATOL16, RTOL16)
        x.requires_grad_()
        mb(x, x, x)[0].sum().backward()
        self.assertEqual(mb.in_proj_weight.grad.dtype, torch.bfloat16)
        self.assertTrue(bool(torch.isfinite(x.grad.float()).all()))

    def test_errors(self):
        m = at.MultiheadAttention(8, 2)
        x = torch.randn(3, 2, 8)
        for name, fn, want in (
                ("E % H", lambda: at.MultiheadAttention(10, 3), ValueError),
                ("add_bias_kv", lambda: at.MultiheadAttention(8, 2, add_bias_kv=True),
                 NotImplementedError),
                ("float64", lambda: at.MultiheadAttention(8, 2, dtype=torch.float64),
                 TypeError),
                ("input float64", lambda: m(x.double(), x.double(), x.double()), TypeError),
                ("4-D input", lambda: m(x[None], x[None], x[None]), ValueError),
                ("kpm shape", lambda: m(x, x, x, key_padding_mask=torch.zeros(
                    2, 4, dtype=torch.bool)), ValueError),
                ("mask requires grad", lambda: m(x, x, x, attn_mask=torch.zeros(
                    3, 3, requires_grad=True)), NotImplementedError),
                ("kv_lens > S", lambda: m(x, x, x, kv_lens=[4, 1]), at.AttnError)):
            with self.subTest(name):
                with self.assertRaises(want):
                    fn()


# ---------------------------------------------------------------------------
# Training: the same model with attn's layer and with nn.MultiheadAttention


class Block(torch.nn.Module):
    def __init__(self, mha, E, H):
        super().__init__()
        self.ln1 = torch.nn.LayerNorm(E)
        self.attn = mha(E, H, batch_first=True)
        self.ln2 = torch.nn.LayerNorm(E)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(E, 4 * E), torch.nn.GELU(),
                                       torch.nn.Linear(4 * E, E))

    def forward(self, x, mask):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class Net(torch.nn.Module):
    def __init__(self, mha, V=32, E=32, H=4, T=24, layers=2):
        super().__init__()
        self.emb = torch.nn.Embedding(V, E)
        self.pos = torch.nn.Parameter(torch.randn(T, E) * 0.1)
        self.blocks = torch.nn.ModuleList([Block(mha, E, H) for _ in range(layers)])
        self.head = torch.nn.Linear(E, V)
        self.register_buffer("mask", torch.ones(T, T, dtype=torch.bool).triu(1))

    def forward(self, tokens):
        x = self.emb(tokens) + self.pos[:tokens.shape[1]]
        for b in self.blocks:
            x = b(x, self.mask)
        return self.head(x)


def markov_batches(steps, B, T, V, seed):
    """Token batches of a random Markov source: each token is followed by
    one of 2 (entropy ln 2 = 0.69 nats against ln V at the start)."""
    rng = np.random.default_rng(seed)
    nxt = rng.integers(0, V, (V, 2))
    out = np.empty((steps, B, T + 1), np.int64)
    for s in range(steps):
        t = out[s]
        t[:, 0] = rng.integers(0, V, B)
        for i in range(1, T + 1):
            t[:, i] = nxt[t[:, i - 1], rng.integers(0, 2, B)]
    return torch.from_numpy(out)


TRAIN_STEPS = 200
# Largest |loss_attn - loss_torch| / loss_torch allowed in the first 100
# steps, and at the end (fp32 runs drift apart slowly through Adam).
TRAIN_TOL_100, TRAIN_TOL_END = 1e-5, 1e-4


class TestTraining(unittest.TestCase):

    def test_two_layer_model(self):
        torch.manual_seed(0)
        ref = Net(torch.nn.MultiheadAttention)
        torch.manual_seed(0)
        mine = Net(at.MultiheadAttention)
        mine.load_state_dict(ref.state_dict())
        data = markov_batches(TRAIN_STEPS, 8, 24, 32, 1)
        curves, times = [], []
        for net in (ref, mine):
            opt = torch.optim.Adam(net.parameters(), lr=3e-3)
            losses = []
            t0 = time.perf_counter()
            for s in range(TRAIN_STEPS):
                batch = data[s]
                logits = net(batch[:, :-1])
                loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 32),
                                                         batch[:, 1:].reshape(-1))
                opt.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
                opt.step()
                losses.append(float(loss))
            times.append(time.perf_counter() - t0)
            curves.append(np.array(losses))
        lt, la = curves
        rel = np.abs(la - lt) / lt
        print("[training] 2 layers, E 32, H 4, T 24, batch 8, Adam 3e-3, %d steps: loss "
              "%.4f -> %.4f (nn.MultiheadAttention) and %.4f -> %.4f (attn); max relative "
              "difference %.2g (steps 1-100), %.2g (all), final %.2g; %.1f ms/step (torch) "
              "%.1f ms/step (attn)" % (TRAIN_STEPS, lt[0], lt[-1], la[0], la[-1],
                                        rel[:100].max(), rel.max(), rel[-1],
                                        1e3 * times[0] / TRAIN_STEPS,
                                        1e3 * times[1] / TRAIN_STEPS))
        self.assertLess(lt[-20:].mean(), 0.5 * lt[0])          # it learns
        self.assertLess(rel[:100].max(), TRAIN_TOL_100)
        self.assertLess(rel[-20:].max(), TRAIN_TOL_END)


if __name__ == "__main__":
    prog = unittest.main(exit=False, verbosity=2)
    ERR.report("torch")
    print("nn.MultiheadAttention gradient comparisons: %d cases; F.scaled_dot_product_"
          "attention comparisons (torch %s): %d" % (TestMha.nn_compared, torch.__version__,
                                                   TestSdpa.torch_sdpa_compared))
    sys.exit(0 if prog.result.wasSuccessful() else 1)
