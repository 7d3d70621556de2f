"""attn.linear_attention and linear_attention_backward against float64
references written here from the formulas of attn.h (not from attn):

  O_i = phi(q_i) (S0 + sum_j phi(k_j) v_j^T) / (phi(q_i) (z0 + sum_j phi(k_j)) + eps)

over the keys j query i sees (j < m_b; causal: j <= d(i)), computed as the
O(L S) masked product in float64 numpy.  The backward is compared with:
- central differences (h = 1e-6) of the float64 numpy reference, always
  (independent of torch): |error| <= 1e-4 max|g| (fp32 vs float64);
- torch float64 autograd of the same formula (when torch is importable):
  |error| <= 2e-5 max|g| + 1e-6 per gradient for float32 inputs (attn
  computes in fp32; 2e-5 relative to the largest gradient covers the
  cancellations of dA = g.v + c), and torch.autograd.gradcheck checks
  that float64 reference function itself (so the comparison is with a
  verified gradient).
Forward tolerances (inputs of order 1, denominators kept away from 0):
float32 |error| <= 2e-5 + 2e-5 |O|; float16 output rounding adds 2^-11 |O|,
bfloat16 2^-8 |O|.  The recurrent state: a causal sequence fed in pieces
equals one pass within 2e-5 relative.
"""

import sys
import unittest

import numpy as np

import attn
from attn import AttnError
from _ref import Errors, torch

ERR = Errors()
EPS_DEFAULT = 1e-6


def phi(x, fm):
    if fm == "elu1":
        return np.where(x > 0, x + 1.0, np.exp(np.minimum(x, 0.0)))
    if fm == "relu":
        return np.maximum(x, 0.0)
    return x


def visible(L, S, n, m, causal, bottom_right):
    i = np.arange(L)[:, None]
    j = np.arange(S)[None, :]
    vis = (j < m) & (i < n)
    if causal:
        vis &= j <= (i + m - n if bottom_right else i)
    return vis


def ref_linear(q, k, v, fm="elu1", causal=False, bottom_right=False, eps=EPS_DEFAULT,
               kv_lens=None, q_lens=None, state=None):
    """float64 (O, (S, z)); q (B, H, L, E), k (B, Hkv, S, E), v (B, Hkv, S, Ev)."""
    q, k, v = (np.asarray(a, np.float64) for a in (q, k, v))
    B, H, L, E = q.shape
    Hkv, S, Ev = k.shape[1], k.shape[2], v.shape[3]
    g = H // Hkv
    if state is None:
        S0 = np.zeros((B, Hkv, E, Ev))
        z0 = np.zeros((B, Hkv, E))
    else:
        S0, z0 = (np.asarray(a, np.float64) for a in state)
    out = np.zeros((B, H, L, Ev))
    Sn, zn = S0.copy(), z0.copy()
    for b in range(B):
        n = L if q_lens is None else int(q_lens[b])
        m = S if kv_lens is None else int(kv_lens[b])
        vis = visible(L, S, n, m, causal, bottom_right)
        for h in range(H):
            hk = h // g
            fq, fk = phi(q[b, h], fm), phi(k[b, hk], fm)
            a = (fq @ fk.T) * vis
            num = a @ v[b, hk] + fq @ S0[b, hk]
            den = a.sum(1) + fq @ z0[b, hk] + eps
            o = num / den[:, None]
            o[n:] = 0
            out[b, h] = o
        for hk in range(Hkv):
            fk = phi(k[b, hk, :m], fm)
            Sn[b, hk] += fk.T @ v[b, hk, :m]
            zn[b, hk] += fk.sum(0)
    return out, (Sn, zn)


def ref_torch(q, k, v, fm, causal, bottom_right, eps, kv_lens=None, q_lens=None):
    """The same formula on torch float64 tensors (differentiable)."""
    B, H, L, E = q.shape
    Hkv, S = k.shape[1], k.shape[2]
    g = H // Hkv
    kk = k.repeat_interleave(g, dim=1)
    vv = v.repeat_interleave(g, dim=1)

    def f(x):
        if fm == "elu1":
            return torch.nn.functional.elu(x) + 1.0
        if fm == "relu":
            return torch.relu(x)
        return x
    masks = []
    for b in range(B):
        n = L if q_lens is None else int(q_lens[b])
        m = S if kv_lens is None else int(kv_lens[b])
        masks.append(torch.from_numpy(visible(L, S, n, m, causal, bottom_right)))
    vis = torch.stack(masks)[:, None].to(torch.float64)
    a = (f(q) @ f(kk).transpose(-1, -2)) * vis
    o = (a @ vv) / (a.sum(-1, keepdim=True) + eps)
    rows = vis.amax(-1, keepdim=True)  # padded rows: a = 0, O = 0 / eps = 0
    return o * (rows > 0) if q_lens is not None else o


def flat(a):
    """(B, ...) with the batch dimensions of a (..., H, L, E) flattened."""
    return a.reshape((-1,) + a.shape[-3:])


# (name, q shape, k shape, v shape, options)
CASES = [
    ("elu1", (2, 4, 9, 8), (2, 4, 9, 8), (2, 4, 9, 6), {}),
    ("causal-70", (1, 2, 70, 8), (1, 2, 70, 8), (1, 2, 70, 5), {"causal": True}),
    ("causal-150-gqa", (1, 6, 150, 16), (1, 2, 150, 16), (1, 2, 150, 8), {"causal": True}),
    ("bottom-right", (2, 2, 5, 8), (2, 2, 12, 8), (2, 2, 12, 8),
     {"causal": True, "align": "bottom_right"}),
    ("relu-lengths", (3, 2, 7, 8), (3, 2, 11, 8), (3, 2, 11, 4),
     {"feature_map": "relu", "kv_lens": [11, 4, 0], "q_lens": [7, 3, 5]}),
    ("lengths-causal-br", (3, 3, 8, 8), (3, 1, 10, 8), (3, 1, 10, 8),
     {"causal": True, "align": "bottom_right", "kv_lens": [10, 6, 8], "q_lens": [8, 2, 8]}),
    ("identity-eps", (2, 2, 6, 4), (2, 2, 6, 4), (2, 2, 6, 4),
     {"feature_map": "identity", "eps": 0.5}),
    ("batch-dims", (2, 3, 2, 5, 8), (2, 3, 2, 7, 8), (2, 3, 2, 7, 8), {"eps": 1e-3}),
    ("broadcast-kv", (3, 2, 5, 8), (1, 2, 6, 8), (1, 2, 6, 3), {"causal": True}),
    ("2d", (10, 8), (10, 8), (10, 8), {"causal": True}),
]


def inputs(rng, qs, ks, vs, fm):
    q, k, v = rng.standard_normal(qs), rng.standard_normal(ks), rng.standard_normal(vs)
    if fm == "identity":          # positive features: denominators away from 0
        q, k = np.abs(q) + 0.1, np.abs(k) + 0.1
    if fm == "relu":              # mostly positive: few all-zero feature rows
        q, k = q + 1.0, k + 1.0
    return q.astype(np.float32), k.astype(np.float32), v.astype(np.float32)


def run_ref(q, k, v, opts, state=None):
    """The reference for any batch shape (flattening, broadcasting k, v)."""
    q4 = q if q.ndim > 2 else q[None]
    k4 = k if k.ndim > 2 else k[None]
    v4 = v if v.ndim > 2 else v[None]
    bs = np.broadcast_shapes(q4.shape[:-3], k4.shape[:-3], v4.shape[:-3])
    qb = flat(np.broadcast_to(q4, bs + q4.shape[-3:]))
    kb = flat(np.broadcast_to(k4, bs + k4.shape[-3:]))
    vb = flat(np.broadcast_to(v4, bs + v4.shape[-3:]))
    o, st = ref_linear(qb, kb, vb, opts.get("feature_map", "elu1"), opts.get("causal", False),
                       opts.get("align") == "bottom_right", opts.get("eps", EPS_DEFAULT),
                       opts.get("kv_lens"), opts.get("q_lens"), state)
    o = o.reshape(bs + o.shape[1:])
    return (o[0] if q.ndim == 2 else o), st


class TestForward(unittest.TestCase):
    def test_cases(self):
        for i, (name, qs, ks, vs, opts) in enumerate(CASES):
            with self.subTest(name):
                rng = np.random.default_rng(100 + i)
                q, k, v = inputs(rng, qs, ks, vs, opts.get("feature_map", "elu1"))
                got = attn.linear_attention(q, k, v, **opts)
                want, _ = run_ref(q, k, v, opts)
                self.assertEqual(got.dtype, np.float32)
                ERR.check(self, "forward f32: " + name, got, want, 2e-5, 2e-5)

    def test_strided_views(self):
        # BSHD tensors transposed to (B, H, L, E): read in place, same result.
        rng = np.random.default_rng(7)
        x = rng.standard_normal((2, 9, 3, 8)).astype(np.float32)
        q = x.transpose(0, 2, 1, 3)
        self.assertFalse(q.flags.c_contiguous)
        got = attn.linear_attention(q, q, q, causal=True)
        want = attn.linear_attention(np.ascontiguousarray(q), np.ascontiguousarray(q),
                                     np.ascontiguousarray(q), causal=True)
        self.assertTrue(np.array_equal(got, want))

    def test_state_nonzero(self):
        rng = np.random.default_rng(8)
        q, k, v = inputs(rng, (2, 4, 6, 8), (2, 2, 6, 8), (2, 2, 6, 5), "elu1")
        S0 = rng.standard_normal((2, 2, 8, 5)).astype(np.float32)
        z0 = (rng.random((2, 2, 8)) + 0.5).astype(np.float32)
        for causal in (False, True):
            S0c, z0c = S0.copy(), z0.copy()
            got, (S1, z1) = attn.linear_attention(q, k, v, causal=causal, state=(S0, z0),
                                                  return_state=True, kv_lens=[6, 3])
            self.assertTrue(np.array_equal(S0, S0c) and np.array_equal(z0, z0c),
                            "the state passed in must not be modified")
            want, (Sw, zw) = ref_linear(q, k, v, causal=causal, kv_lens=[6, 3],
                                        state=(S0, z0))
            ERR.check(self, "state: O causal=%s" % causal, got, want, 2e-5, 2e-5)
            ERR.check(self, "state: S", S1, Sw, 2e-5, 2e-5)
            ERR.check(self, "state: z", z1, zw, 2e-5, 2e-5)

    def test_pieces(self):
        # One causal pass of 100 tokens == pieces of 1, 37, 62 carrying the state.
        rng = np.random.default_rng(9)
        q, k, v = inputs(rng, (2, 2, 100, 8), (2, 2, 100, 8), (2, 2, 100, 8), "elu1")
        whole, (Sw, zw) = attn.linear_attention(q, k, v, causal=True, return_state=True)
        state, outs, a = None, [], 0
        for n in (1, 37, 62):
            o, state = attn.linear_attention(q[:, :, a:a + n], k[:, :, a:a + n],
                                             v[:, :, a:a + n], causal=True, state=state,
                                             return_state=True)
            outs.append(o)
            a += n
        ERR.check(self, "pieces: O", np.concatenate(outs, axis=2), whole, 2e-5, 2e-5)
        ERR.check(self, "pieces: S", state[0], Sw, 0, 2e-5)
        ERR.check(self, "pieces: z", state[1], zw, 0, 2e-5)
        want, _ = ref_linear(q, k, v, causal=True)
        ERR.check(self, "pieces: O vs ref", np.concatenate(outs, axis=2), want, 2e-5, 2e-5)

    def test_16bit(self):
        rng = np.random.default_rng(10)
        q, k, v = inputs(rng, (2, 2, 40, 8), (2, 2, 40, 8), (2, 2, 40, 8), "elu1")
        for dt, rt in (("f16", 2.0 ** -11), ("bf16", 2.0 ** -8)):
            with self.subTest(dt):
                got = attn.linear_attention(q, k, v, causal=True, dtype=dt)
                if dt == "f16":
                    self.assertEqual(got.dtype, np.float16)
                    wq, wk, wv, gf = (a.astype(np.float16).astype(np.float64)
                                      for a in (q, k, v, got))
                else:
                    self.assertEqual(got.dtype, np.uint16)
                    wq, wk, wv = (attn.from_bf16(attn.to_bf16(a)) for a in (q, k, v))
                    gf = attn.from_bf16(got)
                want, _ = ref_linear(wq, wk, wv, causal=True)
                ERR.check(self, "forward " + dt, gf, want, 2e-5, 2e-5 + rt)
        h = q.astype(np.float16)
        self.assertEqual(attn.linear_attention(h, h, h).dtype, np.float16)

    def test_plan_cache(self):
        attn.linear_plan_cache_clear()
        rng = np.random.default_rng(11)
        q = rng.standard_normal((1, 2, 5, 8)).astype(np.float32)
        a = attn.linear_attention(q, q, q)
        b = attn.linear_attention(q, q, q)
        self.assertTrue(np.array_equal(a, b))
        info = attn.linear_plan_cache_info()["forward"]
        self.assertEqual((info["misses"], info["hits"], info["size"]), (1, 1, 1))
        for n in range(1, 70):
            x = rng.standard_normal((1, 1, n, 8)).astype(np.float32)
            attn.linear_attention(x, x, x)
        info = attn.linear_plan_cache_info()["forward"]
        self.assertEqual(info["size"], info["max_size"])
        self.assertEqual(info["size"], 64)


class TestBackward(unittest.TestCase):
    torch_compared = 0

    def grads(self, q, k, v, do, opts):
        return attn.linear_attention_backward(q, k, v, do, **opts)

    def test_finite_differences(self):
        # Central differences of sum(O * dO) over the float64 reference.
        for name, opts in (("elu1-causal", {"causal": True}),
                           ("relu-lengths-br", {"feature_map": "relu", "causal": True,
                                                "align": "bottom_right", "kv_lens": [5, 3],
                                                "q_lens": [4, 2]}),
                           ("identity", {"feature_map": "identity", "eps": 0.3})):
            with self.subTest(name):
                rng = np.random.default_rng(20)
                q, k, v = inputs(rng, (2, 2, 4, 4), (2, 1, 5, 4), (2, 1, 5, 3),
                                 opts.get("feature_map", "elu1"))
                do = rng.standard_normal((2, 2, 4, 3)).astype(np.float32)
                got = self.grads(q, k, v, do, opts)
                base = [a.astype(np.float64) for a in (q, k, v)]
                h = 1e-6
                for idx, g in enumerate(got):
                    num = np.zeros(base[idx].shape)
                    for pos in np.ndindex(base[idx].shape):
                        xs = [a.copy() for a in base]
                        xs[idx][pos] += h
                        fp = (run_ref(*xs, opts)[0] * do).sum()
                        xs[idx][pos] -= 2 * h
                        fm = (run_ref(*xs, opts)[0] * do).sum()
                        num[pos] = (fp - fm) / (2 * h)
                    scale = max(np.abs(num).max(), 1e-3)
                    ERR.check(self, "bwd fd: %s d%s" % (name, "qkv"[idx]), g, num,
                              1e-4 * scale)

    @unittest.skipIf(torch is None, "torch not importable: no float64 autograd reference")
    def test_torch_autograd(self):
        for i, (name, qs, ks, vs, opts) in enumerate(CASES):
            if len(qs) != 4 or ks[0] != qs[0]:
                continue          # batch dims and broadcasting: test_broadcast_grads
            with self.subTest(name):
                rng = np.random.default_rng(200 + i)
                fm = opts.get("feature_map", "elu1")
                q, k, v = inputs(rng, qs, ks, vs, fm)
                do = rng.standard_normal(qs[:-1] + (vs[-1],)).astype(np.float32)
                got = self.grads(q, k, v, do, opts)
                tq, tk, tv = (torch.tensor(a, dtype=torch.float64, requires_grad=True)
                              for a in (q, k, v))
                o = ref_torch(tq, tk, tv, fm, opts.get("causal", False),
                              opts.get("align") == "bottom_right",
                              opts.get("eps", EPS_DEFAULT), opts.get("kv_lens"),
                              opts.get("q_lens"))
                o.backward(torch.tensor(do, dtype=torch.float64))
                for g, t, nm in zip(got, (tq, tk, tv), "qkv"):
                    want = t.grad.numpy()
                    ERR.check(self, "bwd torch: %s d%s" % (name, nm), g, want,
                              2e-5 * np.abs(want).max() + 1e-6)
                TestBackward.torch_compared += 1

    @unittest.skipIf(torch is None, "torch not importable: gradcheck skipped")
    def test_gradcheck_reference(self):
        rng = np.random.default_rng(21)
        for fm, causal, br in (("elu1", True, False), ("relu", True, True),
                               ("identity", False, False)):
            q, k, v = (torch.tensor(a, dtype=torch.float64, requires_grad=True)
                       for a in inputs(rng, (1, 2, 4, 3), (1, 1, 5, 3), (1, 1, 5, 2), fm))
            self.assertTrue(torch.autograd.gradcheck(
                lambda a, b, c: ref_torch(a, b, c, fm, causal, br, 0.1, [4], [3]),
                (q, k, v), eps=1e-6, atol=1e-6))

    def test_broadcast_grads(self):
        # Gradients of inputs broadcast over batch dims are summed (autograd's rule).
        rng = np.random.default_rng(22)
        q, k, v = inputs(rng, (3, 2, 5, 8), (1, 2, 6, 8), (1, 2, 6, 3), "elu1")
        do = rng.standard_normal((3, 2, 5, 3)).astype(np.float32)
        dq, dk, dv = attn.linear_attention_backward(q, k, v, do, causal=True)
        self.assertEqual((dq.shape, dk.shape, dv.shape), (q.shape, k.shape, v.shape))
        kb, vb = (np.ascontiguousarray(np.broadcast_to(a, (3,) + a.shape[1:])) for a in (k, v))
        dq2, dk2, dv2 = attn.linear_attention_backward(q, kb, vb, do, causal=True)
        self.assertTrue(np.array_equal(dq, dq2))
        ERR.check(self, "bwd broadcast dk", dk, dk2.sum(0, keepdims=True), 1e-6, 1e-6)
        ERR.check(self, "bwd broadcast dv", dv, dv2.sum(0, keepdims=True), 1e-6, 1e-6)
        q2 = q[0, 0]
        g2 = attn.linear_attention_backward(q2, q2, q2, np.ones((5, 8), np.float32))
        self.assertEqual([a.shape for a in g2], [(5, 8)] * 3)

    def test_bf16_backward(self):
        rng = np.random.default_rng(23)
        q, k, v = inputs(rng, (1, 2, 20, 8), (1, 2, 20, 8), (1, 2, 20, 8), "elu1")
        do = rng.standard_normal((1, 2, 20, 8)).astype(np.float32)
        got = attn.linear_attention_backward(q, k, v, do, causal=True, dtype="bf16")
        # bitwise the fp32 backward on the widened inputs, rounded once
        w = [attn.from_bf16(attn.to_bf16(a)) for a in (q, k, v, do)]
        f32 = attn.linear_attention_backward(*w, causal=True)
        for g, f in zip(got, f32):
            self.assertEqual(g.dtype, np.uint16)
            self.assertTrue(np.array_equal(g, attn.to_bf16(f)))


class TestErrors(unittest.TestCase):
    def setUp(self):
        self.x = np.random.default_rng(30).standard_normal((1, 2, 4, 8)).astype(np.float32)

    def assertStatus(self, status, fn, *a, **kw):
        with self.assertRaises(AttnError) as cm:
            fn(*a, **kw)
        self.assertEqual(cm.exception.status_name, status)
        self.assertIn(status, str(cm.exception))

    def test_errors(self):
        x = self.x
        self.assertStatus("ATTN_ERR_BAD_OPTION", attn.linear_attention, x, x, x, eps=-1.0)
        self.assertStatus("ATTN_ERR_BAD_OPTION", attn.linear_attention_backward, x, x, x, x,
                          eps=float("inf"))
        self.assertStatus("ATTN_ERR_BAD_LENGTH", attn.linear_attention, x, x, x, kv_lens=[5])
        self.assertStatus("ATTN_ERR_BAD_LENGTH", attn.linear_attention_backward, x, x, x, x,
                          q_lens=[-1])
        q3 = np.zeros((1, 3, 4, 8), np.float32)
        self.assertStatus("ATTN_ERR_HEAD_RATIO", attn.linear_attention, q3, x, x)
        self.assertStatus("ATTN_ERR_BAD_THREADS", attn.linear_attention, x, x, x, threads=-1)
        with self.assertRaises(ValueError):
            attn.linear_attention(x, x, x, feature_map="softmax")
        with self.assertRaises(ValueError):
            attn.linear_attention(x, x, x, dtype="f64")
        with self.assertRaises(ValueError):
            attn.linear_attention(x, x, x, align="middle")
        with self.assertRaises(ValueError):
            attn.linear_attention_backward(x, x, x, x[..., :4])
        with self.assertRaises(ValueError):
            attn.linear_attention(x, x, x, state=(np.zeros((1, 2, 8, 7)), np.zeros((1, 2, 8))))


@unittest.skipIf(torch is None, "torch not importable: attn's torch layer not tested")
class TestTorch(unittest.TestCase):
    def test_function(self):
        from attn import _torch_linear as tl
        rng = np.random.default_rng(40)
        q, k, v = inputs(rng, (2, 4, 12, 8), (2, 2, 12, 8), (2, 2, 12, 6), "elu1")
        do = rng.standard_normal((2, 4, 12, 6)).astype(np.float32)
        tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
        o = tl.linear_attention(tq, tk, tv, causal=True, kv_lens=torch.tensor([12, 7]))
        self.assertEqual(o.dtype, torch.float32)
        o.backward(torch.from_numpy(do))
        want_o = attn.linear_attention(q, k, v, causal=True, kv_lens=[12, 7])
        self.assertTrue(np.array_equal(o.detach().numpy(), want_o))
        want = attn.linear_attention_backward(q, k, v, do, causal=True, kv_lens=[12, 7])
        for t, w in zip((tq, tk, tv), want):
            self.assertTrue(np.array_equal(t.grad.numpy(), w))

    def test_state_and_types(self):
        from attn import _torch_linear as tl
        rng = np.random.default_rng(41)
        q, k, v = (torch.tensor(a) for a in inputs(rng, (1, 2, 10, 8), (1, 2, 10, 8),
                                                   (1, 2, 10, 8), "elu1"))
        o, (s, z) = tl.linear_attention(q[:, :, :6], k[:, :, :6], v[:, :, :6], causal=True,
                                        return_state=True)
        o2 = tl.linear_attention(q[:, :, 6:], k[:, :, 6:], v[:, :, 6:], causal=True,
                                 state=(s, z))
        whole = tl.linear_attention(q, k, v, causal=True)
        ERR.check(self, "torch pieces", torch.cat([o, o2], 2).numpy(), whole.numpy(),
                  2e-5, 2e-5)
        qg = q.clone().requires_grad_()
        with self.assertRaises(NotImplementedError):
            tl.linear_attention(qg, k, v, state=(s, z))
        for dt in (torch.bfloat16, torch.float16):
            qb = q.to(dt).requires_grad_()
            ob = tl.linear_attention(qb, k.to(dt), v.to(dt), causal=True)
            self.assertEqual(ob.dtype, dt)
            ob.float().sum().backward()
            self.assertEqual(qb.grad.dtype, dt)
        with self.assertRaises(TypeError):
            tl.linear_attention(q.double(), k.double(), v.double())


if __name__ == "__main__":
    print("attn %s from %s" % (attn.library_version(), attn.library_path))
    if torch is None:
        print("torch not importable: the torch comparisons are SKIPPED")
    prog = unittest.main(exit=False, verbosity=2)
    ERR.report("linear")
    print("torch autograd comparisons: %d cases" % TestBackward.torch_compared)
    sys.exit(0 if prog.result.wasSuccessful() else 1)
