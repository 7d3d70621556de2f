"""float64 references and small test helpers, independent of the module.

Nothing here imports attn: the references are written from the formulas
(softmax(scale Q K^T + bias) V over the visible keys; rows with no visible
key give 0).
"""

import numpy as np

try:
    import torch
except ImportError:          # torch is optional
    torch = None


def visible_window(L, S, left, right, bottom_right, kv_len=None, q_len=None):
    """bool (L, S): the window / causal rule and the lengths of one batch."""
    n = L if q_len is None else q_len
    m = S if kv_len is None else kv_len
    i = np.arange(L)[:, None]
    j = np.arange(S)[None, :]
    d = i + (m - n) if bottom_right else i
    vis = np.ones((L, S), bool)
    if left is not None and left >= 0:
        vis &= j >= d - left
    if right is not None and right >= 0:
        vis &= j <= d + right
    vis &= j < m
    vis &= i < n
    return vis


def softmax_rows(s, vis):
    """P and logsumexp of the scores s over the positions vis (float64)."""
    vis = vis & (s > -np.inf)
    t = np.where(vis, s, -np.inf)
    mx = t.max(axis=-1, keepdims=True)
    any_ = vis.any(axis=-1, keepdims=True)
    mx = np.where(any_, mx, 0.0)
    e = np.where(vis, np.exp(t - mx), 0.0)
    z = e.sum(axis=-1, keepdims=True)
    p = np.where(any_, e / np.where(any_, z, 1.0), 0.0)
    lse = np.where(any_[..., 0], mx[..., 0] + np.log(np.where(any_[..., 0], z[..., 0], 1.0)),
                   -np.inf)
    return p, lse


def ref_sdpa(q, k, v, vis=None, bias=None, scale=None, drop=None, p_drop=0.0):
    """O, P, lse in float64.  q (..., Hq, L, E), k (..., Hkv, S, E),
    v (..., Hkv, S, Ev) with Hq a multiple of Hkv (query head h reads
    head h // (Hq // Hkv)); vis and bias broadcast to (..., Hq, L, S);
    drop: bool keep mask (..., Hq, L, S)."""
    q, k, v = (np.asarray(a, np.float64) for a in (q, k, v))
    g = q.shape[-3] // k.shape[-3] if q.ndim >= 3 else 1
    if g > 1:
        k = np.repeat(k, g, axis=-3)
        v = np.repeat(v, g, axis=-3)
    if scale is None:
        scale = 1.0 / np.sqrt(q.shape[-1])
    s = scale * (q @ np.swapaxes(k, -1, -2))
    if bias is not None:
        s = s + np.asarray(bias, np.float64)
    if vis is None:
        vis = np.ones(s.shape, bool)
    vis = np.broadcast_to(vis, s.shape)
    p, lse = softmax_rows(s, vis)
    if drop is not None:
        p = np.where(drop, p / (1.0 - p_drop), 0.0) if p_drop < 1 else np.zeros_like(p)
    return p @ v, p, lse


class Errors:
    """Records the largest error per quantity and checks tolerances."""

    def __init__(self):
        self.worst = {}
        self.count = 0

    def check(self, tc, what, got, want, atol, rtol=0.0):
        got = np.asarray(got, np.float64)
        want = np.asarray(want, np.float64)
        tc.assertEqual(got.shape, want.shape, what)
        fin = np.isfinite(want)
        tc.assertTrue(np.array_equal(np.isfinite(got), fin) and
                      np.array_equal(got[~fin], want[~fin]),
                      "%s: non-finite entries differ" % what)
        err = np.abs(got[fin] - want[fin])
        e = float(err.max()) if err.size else 0.0
        key = what.split(":")[0]
        self.worst[key] = max(self.worst.get(key, 0.0), e)
        self.count += 1
        bad = err > atol + rtol * np.abs(want[fin])
        tc.assertFalse(bad.any(), "%s: max |error| %.3g > tolerance (atol %g, rtol %g)" %
                       (what, e, atol, rtol))

    def report(self, name):
        print("[accuracy] %s: %d comparisons; max |error|: %s" % (
            name, self.count, ", ".join("%s %.3g" % kv for kv in sorted(self.worst.items()))))


def ref_sdpa_torch(q, k, v, vis, bias=None, scale=None, drop=None, p_drop=0.0):
    """ref_sdpa in float64 torch operations, differentiable (autograd gives
    the reference gradients).  vis, drop: bool numpy arrays or tensors
    broadcast to (..., Hq, L, S); bias a float64 tensor (may require grad).
    Rows with no visible key give 0 and contribute no gradient."""
    g = q.shape[-3] // k.shape[-3]
    if g > 1:
        k = k.repeat_interleave(g, dim=-3)
        v = v.repeat_interleave(g, dim=-3)
    if scale is None:
        scale = 1.0 / np.sqrt(q.shape[-1])
    s = scale * (q @ k.transpose(-1, -2))
    if bias is not None:
        s = s + bias
    vis = torch.as_tensor(np.asarray(vis)).expand(s.shape) & (s.detach() > -np.inf)
    t = torch.where(vis, s, torch.zeros((), dtype=s.dtype))
    mx = torch.where(vis, s.detach(), torch.full((), -np.inf, dtype=s.dtype)).amax(-1, True)
    any_ = vis.any(-1, keepdim=True)
    mx = torch.where(any_, mx, torch.zeros((), dtype=s.dtype))
    e = torch.where(vis, torch.exp(t - mx), torch.zeros((), dtype=s.dtype))
    z = e.sum(-1, keepdim=True)
    p = e / torch.where(any_, z, torch.ones((), dtype=s.dtype))
    lse = torch.where(any_[..., 0], (mx + torch.log(torch.where(any_, z, torch.ones(
        (), dtype=s.dtype))))[..., 0], torch.full((), -np.inf, dtype=s.dtype))
    if drop is not None:
        keep = torch.as_tensor(np.asarray(drop))
        p = torch.where(keep, p / (1.0 - p_drop), torch.zeros((), dtype=s.dtype)) \
            if p_drop < 1 else p * 0
    return p @ v, p, lse
