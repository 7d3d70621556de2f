"""Linear attention (attn_linear_*) and its backward (attn_linear_bwd_*).

Plans are cached: a call builds its attn_linear_desc (shapes, strides,
options) and looks it up in a small LRU cache of plans (PLAN_CACHE_SIZE
entries per kind), so repeated calls of the same shape and layout skip
attn_linear_plan_create.  A plan is destroyed when it leaves the cache and
no call is using it.
"""

import collections
import ctypes
import threading

import numpy as np

from . import _lib
from ._common import _align, _check, _engine, _float32, _lengths, _sdpa_shapes
from ._views import as_view, contiguous_view, ptr

__all__ = ["linear_attention", "linear_attention_backward", "linear_plan_cache_info",
           "linear_plan_cache_clear"]

#: Plans kept per kind (forward, backward).
PLAN_CACHE_SIZE = 64

_STORAGE = {"f32": (_lib.DTYPE_F32, np.float32), "f16": (_lib.DTYPE_F16, np.float16),
            "bf16": (_lib.DTYPE_BF16, np.uint16)}


class _Plan:
    """An attn plan pointer, destroyed with the last reference."""

    def __init__(self, handle, destroy):
        self.handle = handle
        self._destroy = destroy

    def __del__(self):
        if self.handle:
            self._destroy(self.handle)
            self.handle = None


class _PlanCache:
    """LRU of plans keyed by the bytes of their desc."""

    def __init__(self, create, destroy, name):
        self._create = create
        self._destroy = destroy
        self._name = name
        self._plans = collections.OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, desc):
        key = bytes(desc)
        with self._lock:
            plan = self._plans.get(key)
            if plan is not None:
                self._plans.move_to_end(key)
                self.hits += 1
                return plan
        h = ctypes.c_void_p()
        _check(self._create(ctypes.byref(h), ctypes.byref(desc)), self._name)
        plan = _Plan(h.value, self._destroy)
        with self._lock:
            self.misses += 1
            self._plans[key] = plan
            self._plans.move_to_end(key)
            while len(self._plans) > PLAN_CACHE_SIZE:
                self._plans.popitem(last=False)
        return plan

    def info(self):
        with self._lock:
            return {"hits": self.hits, "misses": self.misses, "size": len(self._plans),
                    "max_size": PLAN_CACHE_SIZE}

    def clear(self):
        with self._lock:
            self._plans.clear()
            self.hits = self.misses = 0


_FWD = _PlanCache(_lib.linear_plan_create, _lib.linear_plan_destroy,
                  "attn_linear_plan_create")
_BWD = _PlanCache(_lib.linear_bwd_plan_create, _lib.linear_bwd_plan_destroy,
                  "attn_linear_bwd_plan_create")


def linear_plan_cache_info():
    """{'forward': {...}, 'backward': {...}}: hits, misses, size, max_size of
    the linear attention plan caches."""
    return {"forward": _FWD.info(), "backward": _BWD.info()}


def linear_plan_cache_clear():
    """Drop every cached linear attention plan (and reset the counters)."""
    _FWD.clear()
    _BWD.clear()


def _storage(x, dt, name):
    """x as the storage of dt: float32, float16, or bf16 bit patterns
    (uint16 arrays are taken as such, real arrays rounded to nearest even)."""
    a = np.asarray(x)
    if dt == "f32":
        return _float32(a, name)
    if a.dtype.kind not in "fiub":
        raise TypeError("%s: expected a real array, got dtype %s" % (name, a.dtype))
    if dt == "f16":
        return a if a.dtype == np.float16 else a.astype(np.float16)
    if a.dtype == np.uint16:
        return a
    f = np.ascontiguousarray(a, dtype=np.float32)
    out = np.empty(f.shape, dtype=np.uint16)
    _check(_lib.dtype_encode(_lib.DTYPE_BF16, ptr(f), ptr(out), f.size), "attn_dtype_encode")
    return out


def _widen(a, dt):
    """float32 values of a stored array (for sums over broadcast dims)."""
    if dt == "bf16":
        a = np.ascontiguousarray(a)
        out = np.empty(a.shape, dtype=np.float32)
        _check(_lib.dtype_decode(_lib.DTYPE_BF16, ptr(a), ptr(out), a.size),
               "attn_dtype_decode")
        return out
    return a.astype(np.float32)


def _reduce_to(g, shape, dt):
    """Sum the gradient g over the dimensions its input was broadcast along
    (as autograd does); 16-bit gradients are summed in float32 and rounded
    once more."""
    shape = tuple(shape)
    if g.shape == shape:
        return g
    lead = g.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(i + lead for i, n in enumerate(shape)
                                      if n == 1 and g.shape[i + lead] != 1)
    s = _widen(g, dt).sum(axis=axes, keepdims=True)
    s = s.reshape(s.shape[lead:]) if lead else s
    return _storage(s.reshape(shape), dt, "gradient")


def _resolve_dtype(dtype, arrays):
    if dtype is None:
        dtype = "f16" if all(np.asarray(a).dtype == np.float16 for a in arrays) else "f32"
    if dtype not in _STORAGE:
        raise ValueError("dtype must be 'f32', 'f16' or 'bf16', not %r" % (dtype,))
    return dtype


def _setup(d, query, key, value, dtype, feature_map, causal, align, eps, kv_lens,
           q_lens, threads, engine):
    """Fill the forward desc d; return (q, k, v arrays, shapes, lengths)."""
    npt = _STORAGE[dtype][1]
    q = _storage(query, dtype, "query")
    k = _storage(key, dtype, "key")
    v = _storage(value, dtype, "value")
    for a, name in ((q, "query"), (k, "key"), (v, "value")):
        if a.ndim < 2:
            raise ValueError("%s must have at least 2 dimensions (..., L, E), has %d" %
                             (name, a.ndim))
    shapes = (q.shape, k.shape, v.shape)
    orig_nd = max(q.ndim, k.ndim, v.ndim)
    nd = max(orig_nd, 3)
    q, k, v = (a.reshape((1,) * (nd - a.ndim) + a.shape) for a in (q, k, v))
    bs, H, Hkv, L, S, E, Ev = _sdpa_shapes(q.shape, k.shape, v.shape, True)
    B = int(np.prod(bs, dtype=np.int64))
    qa, qv = as_view(q, bs + (H, L, E), npt, min_seq=E)
    ka, kv = as_view(k, bs + (Hkv, S, E), npt, min_seq=E)
    va, vv = as_view(v, bs + (Hkv, S, Ev), npt, min_seq=Ev)
    d.batch, d.q_heads, d.kv_heads = B, H, Hkv
    d.q_len, d.kv_len, d.qk_dim, d.v_dim = L, S, E, Ev
    d.q, d.k, d.v = qv, kv, vv
    try:
        d.feature_map = _lib.FEATURE_MAPS[feature_map]
    except (KeyError, TypeError):
        raise ValueError("feature_map must be 'elu1', 'relu' or 'identity', not %r" %
                         (feature_map,))
    d.causal = 1 if causal else 0
    d.align = _align(align)
    d.eps = float("nan") if eps is None else float(eps)
    d.threads = int(threads)
    d.engine = _engine(engine)
    ty = _STORAGE[dtype][0]
    d.q_type = d.k_type = d.v_type = d.o_type = ty
    kl = ql = None
    if kv_lens is not None:
        kl = _lengths(kv_lens, bs, "kv_lens")
        d.use_kv_lens = 1
    if q_lens is not None:
        ql = _lengths(q_lens, bs, "q_lens")
        d.use_q_lens = 1
    return (qa, ka, va), shapes, orig_nd, bs, (B, H, Hkv, L, S, E, Ev), kl, ql


def linear_attention(query, key, value, *, feature_map="elu1", causal=False,
                     align="top_left", eps=None, kv_lens=None, q_lens=None, state=None,
                     return_state=False, threads=0, engine="auto", dtype=None):
    """Linear attention (attn_linear): phi(Q) (S0 + sum_j phi(k_j) v_j^T) over
    (phi(Q) (z0 + sum_j phi(k_j)) + eps), row by row, over the keys each
    query sees.

    Shapes (numpy broadcasting over the leading batch dimensions):
      query (..., Hq, L, E), key (..., Hkv, S, E), value (..., Hkv, S, Ev)
      -> output (..., Hq, L, Ev).  Hq must be a multiple of Hkv (query head
      h reads key/value head h // (Hq // Hkv)); 2-dimensional inputs are
      one head.

    Options (attn_linear_desc):
      feature_map: 'elu1' (elu(x) + 1, the default), 'relu' (max(x, 0)) or
        'identity' (Q and K are already features).
      causal: query i sees keys j <= d(i), with align 'top_left'
        (d(i) = i) or 'bottom_right' (d(i) = i + S_b - L_b).
      eps: added to every denominator; None = attn's default 1e-6.
      kv_lens, q_lens: per-batch lengths (integers of the batch shape):
        keys j >= kv_lens[b] are excluded, query rows i >= q_lens[b] are
        padding (output 0).
      state: (S0, z0), float32 arrays (..., Hkv, E, Ev) and (..., Hkv, E)
        of the batch shape: the recurrent state the keys of this call come
        after (every query sees all of it).  Not modified.
      return_state: also return the state after the call, (S, z): S0 +
        sum over every valid key of phi(k_j) v_j^T, z likewise (zeros for
        S0, z0 when state is None).  Feeding a causal sequence in pieces,
        passing each call's state to the next, gives the outputs of one
        causal pass (within rounding).
      threads: OpenMP threads (0: all); engine: 'auto', 'blas' or 'tile'.
      dtype: element type of query, key, value and the output: 'f32',
        'f16' (numpy float16) or 'bf16' (uint16 bit patterns); None: 'f16'
        when the three inputs are float16, else 'f32'.  The arithmetic and
        the state are float32.

    Returns the output, or (output, (S, z)) with return_state.
    Raises AttnError for what attn rejects (negative eps, lengths out of
    range, Hq not a multiple of Hkv, ...).
    """
    dtype = _resolve_dtype(dtype, (query, key, value))
    d = _lib.LinearDesc()
    _check(_lib.linear_desc_init(ctypes.byref(d)), "attn_linear_desc_init")
    (qa, ka, va), _, orig_nd, bs, dims, kl, ql = _setup(
        d, query, key, value, dtype, feature_map, causal, align, eps, kv_lens, q_lens,
        threads, engine)
    B, H, Hkv, L, S, E, Ev = dims
    npt = _STORAGE[dtype][1]
    out = np.empty(bs + (H, L, Ev), dtype=npt)
    d.o = contiguous_view(out.shape)
    st_s = st_z = None
    if state is not None or return_state:
        d.use_state = 1
        if state is None:
            st_s = np.zeros(bs + (Hkv, E, Ev), np.float32)
            st_z = np.zeros(bs + (Hkv, E), np.float32)
        else:
            try:
                s0, z0 = state
            except (TypeError, ValueError):
                raise TypeError("state must be a pair (S, z) of arrays")
            # Fresh arrays: attn overwrites the state it is given.
            try:
                st_s = np.array(np.broadcast_to(_float32(s0, "state S"), bs + (Hkv, E, Ev)),
                                dtype=np.float32, order="C")
                st_z = np.array(np.broadcast_to(_float32(z0, "state z"), bs + (Hkv, E)),
                                dtype=np.float32, order="C")
            except ValueError:
                raise ValueError("state: expected S %s and z %s, got %s and %s" % (
                    bs + (Hkv, E, Ev), bs + (Hkv, E), np.shape(s0), np.shape(z0)))
    args = _lib.LinearArgs()
    a16 = _lib.LinearArgs16()
    if dtype == "f32":
        args.q, args.k, args.v, args.o = ptr(qa), ptr(ka), ptr(va), ptr(out)
    else:
        a16.q, a16.k, a16.v, a16.o = ptr(qa), ptr(ka), ptr(va), ptr(out)
        args.args16 = ctypes.addressof(a16)
    args.kv_lens, args.q_lens = ptr(kl), ptr(ql)
    args.state_s, args.state_z = ptr(st_s), ptr(st_z)
    plan = _FWD.get(d)
    _check(_lib.linear_execute(plan.handle, ctypes.byref(args), None, 0),
           "attn_linear_execute")
    del plan, qa, ka, va
    if orig_nd == 2:
        out = out[0]
        if st_s is not None:
            st_s, st_z = st_s[0], st_z[0]
    if return_state:
        return out, (st_s, st_z)
    return out


def linear_attention_backward(query, key, value, grad_output, *, feature_map="elu1",
                              causal=False, align="top_left", eps=None, kv_lens=None,
                              q_lens=None, threads=0, engine="auto", dtype=None):
    """The gradients of linear_attention (attn_linear_backward): returns
    (dQ, dK, dV) for dO = grad_output, under the same options (no state:
    attn's backward has none).

    grad_output has the output's shape (..., Hq, L, Ev).  Each gradient has
    its input's shape and dtype: over dimensions an input was broadcast
    along (batch dimensions, a key/value head of 1) it is summed, as
    autograd does (16-bit gradients: summed in float32 and rounded again).
    A key/value head's gradient sums over the query heads of its group.
    Every element is written: 0 for padded query rows and for keys no query
    sees.
    """
    dtype = _resolve_dtype(dtype, (query, key, value))
    npt = _STORAGE[dtype][1]
    bd = _lib.LinearBwdDesc()
    _check(_lib.linear_bwd_desc_init(ctypes.byref(bd)), "attn_linear_bwd_desc_init")
    (qa, ka, va), shapes, orig_nd, bs, dims, kl, ql = _setup(
        bd.fwd, query, key, value, dtype, feature_map, causal, align, eps, kv_lens,
        q_lens, threads, engine)
    B, H, Hkv, L, S, E, Ev = dims
    g = _storage(grad_output, dtype, "grad_output")
    oshape = bs + (H, L, Ev)
    want = oshape if orig_nd > 2 else oshape[-2:]
    if g.shape != tuple(want):
        raise ValueError("grad_output: expected shape %s, got %s" % (tuple(want), g.shape))
    ga, gv = as_view(g.reshape(oshape), oshape, npt, min_seq=Ev)
    bd.fwd.o = gv                      # not used by the backward; any valid view
    dq = np.empty(bs + (H, L, E), npt)
    dk = np.empty(bs + (Hkv, S, E), npt)
    dv = np.empty(bs + (Hkv, S, Ev), npt)
    bd.d_o = gv
    bd.dq, bd.dk, bd.dv = (contiguous_view(a.shape) for a in (dq, dk, dv))
    args = _lib.LinearBwdArgs()
    a16 = _lib.LinearBwdArgs16()
    ptrs = (ptr(qa), ptr(ka), ptr(va), ptr(ga), ptr(dq), ptr(dk), ptr(dv))
    tgt = args if dtype == "f32" else a16
    tgt.q, tgt.k, tgt.v, tgt.d_o, tgt.dq, tgt.dk, tgt.dv = ptrs
    if dtype != "f32":
        args.args16 = ctypes.addressof(a16)
    args.kv_lens, args.q_lens = ptr(kl), ptr(ql)
    plan = _BWD.get(bd)
    _check(_lib.linear_bwd_execute(plan.handle, ctypes.byref(args), None, 0),
           "attn_linear_bwd_execute")
    del plan, qa, ka, va, ga
    nd = max(orig_nd, 3)
    grads = []
    for gr, shp in zip((dq, dk, dv), shapes):
        full = (1,) * (nd - len(shp)) + tuple(shp)
        grads.append(_reduce_to(gr, full, dtype).reshape(shp))
    return tuple(grads)
