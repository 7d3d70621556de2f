"""attn.torch: attn's attention in PyTorch programs, with autograd.

Importing it needs torch (1.13 or 2.x).  Everything here takes and returns
CPU torch tensors, reads them in place where attn can describe their
strides (no copy), and differentiates through attn's own backward:

- scaled_dot_product_attention: torch.nn.functional's signature and
  semantics (attn_mask bool or float, dropout_p, is_causal, scale,
  enable_gqa) plus attn's extras (windows, bottom-right causal alignment,
  per-batch lengths, global tokens, block-sparse layouts, the logsumexp);
  gradients for query, key, value and a float attn_mask;
- MultiheadAttention: an nn.Module with nn.MultiheadAttention's
  parameters, initialisation, state_dict and forward, trained through
  attn's layer backward (attn_mha_train_execute / attn_mha_bwd_execute);
- linear attention and the decode API (KV caches, append, merge): the
  names of attn._torch_linear and attn._torch_decode, re-exported.

Element types: float32, and bfloat16 / float16 tensors (attn's 16-bit
storage with float32 accumulation, see docs/TYPES.md).  Plans are made
once per shape and options and kept (attn._plans), so a repeated call
costs one attn_*_execute.  See docs/PYTHON.md, "attn.torch".
"""

import ctypes
import math
import threading

import numpy as np
import torch

from . import _lib, _plans
from ._common import AttnError, _check, _engine, _sdpa_shapes, _set_window
from ._mha import LayerCall, set_sizes
from ._torch_common import check_tensor, from_numpy, to_numpy
from ._views import contiguous_view, view_from

__all__ = ["scaled_dot_product_attention", "MultiheadAttention", "AttnError", "clear_plans"]

_TYPES = {torch.float32: _lib.DTYPE_F32, torch.float16: _lib.DTYPE_F16,
          torch.bfloat16: _lib.DTYPE_BF16}

def clear_plans():
    """Free this thread's kept plans and kept SDPA calls (the layers keep
    their own, dropped with the module)."""
    _plans.clear()
    _FAST.calls = {}


def _dtype_of(tensors, names):
    for t, n in zip(tensors, names):
        check_tensor(t, n)
    dt = tensors[0].dtype
    if any(t.dtype != dt for t in tensors):
        raise TypeError("%s must have the same dtype; got %s" % (
            ", ".join(names), ", ".join(str(x.dtype) for x in tensors)))
    return dt


def _view(t, shape, min_seq=None, allow_zero=False):
    """(tensor, attn_view) of t as a (*batch, H, S, D) view of shape, t
    itself when attn can describe its strides, else a contiguous copy."""
    if tuple(t.shape) != tuple(shape):
        t = t.expand(shape)
    v = view_from(shape, t.stride(), allow_zero, min_seq)
    if v is None or (t.data_ptr() % t.element_size()):
        t = t.contiguous()
        v = view_from(shape, t.stride(), allow_zero, min_seq)
    return t, v


def _np_ptr(t):
    return None if t is None else t.data_ptr()


def _int32(x, bs, name):
    """Per-batch lengths as a contiguous int32 tensor of B values."""
    t = torch.as_tensor(x)
    if t.dtype.is_floating_point or t.dtype == torch.bool or t.is_complex():
        raise TypeError("%s must hold integers, not %s" % (name, t.dtype))
    B = math.prod(bs)
    if tuple(t.shape) != (B,):
        try:
            t = t.expand(tuple(bs))
        except RuntimeError:
            raise ValueError("%s: shape %s does not match the batch shape %s" %
                             (name, tuple(t.shape), tuple(bs)))
    t = t.reshape(B)
    if t.numel() and (int(t.min()) < -2**31 or int(t.max()) > 2**31 - 1):
        raise ValueError("%s: values outside int32" % name)
    return t.to(torch.int32).contiguous()


def _flags(x, shape, name):
    """A bool / uint8 per-token flag array as contiguous uint8 of shape."""
    t = torch.as_tensor(x)
    if t.dtype not in (torch.bool, torch.uint8):
        raise TypeError("%s must be bool or uint8, not %s" % (name, t.dtype))
    try:
        t = t.expand(shape)
    except RuntimeError:
        raise ValueError("%s: shape %s does not broadcast to %s" %
                         (name, tuple(torch.as_tensor(x).shape), shape))
    return t.contiguous().view(torch.uint8) if t.dtype == torch.bool else t.contiguous()


def _torch_seed():
    """A dropout seed drawn from torch's default generator (so that
    torch.manual_seed makes the dropout reproducible)."""
    return int(torch.randint(0, 2**62, (1,), dtype=torch.int64))


class _Sdpa:
    """One SDPA problem on given tensors: its attn_sdpa_desc, the tensors
    it reads besides Q, K, V (mask, bias, lengths, flags, layout) and the
    forward and backward calls over its (kept) plans."""

    def __init__(self, bs, H, Hkv, L, S, E, Ev, dt, *, mask, bias, bias_shape, kv_lens,
                 q_lens, global_k, global_q, layout, layout_per_head, block_size, scale,
                 align, window_left, window_right, is_causal, dropout, threads, engine):
        d = self.desc = _lib.SdpaDesc()
        _check(_lib.sdpa_desc_init(ctypes.byref(d)), "attn_sdpa_desc_init")
        B = math.prod(bs)
        d.batch, d.q_heads, d.kv_heads = B, H, Hkv
        d.q_len, d.kv_len, d.qk_dim, d.v_dim = L, S, E, Ev
        self.bs, self.H, self.Hkv, self.L, self.S, self.E, self.Ev = bs, H, Hkv, L, S, E, Ev
        self.dt = dt
        ty = _TYPES[dt]
        self.ty = ty
        if ty != _lib.DTYPE_F32:
            d.q_type = d.k_type = d.v_type = d.o_type = ty
        d.o = contiguous_view(bs + (H, L, Ev))
        _set_window(d, scale, align, window_left, window_right, is_causal)
        full = bs + (H, L, S)
        self.mask = self.bias = None
        if mask is not None:
            self.mask, d.mask = _view(mask, full, allow_zero=True)
            d.mask_mode = _lib.MASK_KEEP_NONZERO
        self.bias_shape = bias_shape
        if bias is not None:
            d.use_bias = 1
            _, d.bias = _view(bias, full, allow_zero=True)
        self.kv_lens, self.q_lens = kv_lens, q_lens
        d.use_kv_lens = int(kv_lens is not None)
        d.use_q_lens = int(q_lens is not None)
        self.global_k, self.global_q, self.layout = global_k, global_q, layout
        d.use_global_k = int(global_k is not None)
        d.use_global_q = int(global_q is not None)
        if layout is not None:
            d.block_size = int(block_size)
            d.layout_per_head = int(layout_per_head)
        p, seed, offset = dropout
        d.dropout_p = p
        d.dropout_seed = seed & (2**64 - 1)
        d.dropout_offset = offset & (2**64 - 1)
        d.threads = threads
        d.engine = engine

    def _common_args(self, a):
        a.kv_lens = _np_ptr(self.kv_lens)
        a.q_lens = _np_ptr(self.q_lens)
        a.mask = _np_ptr(self.mask)
        a.global_k = _np_ptr(self.global_k)
        a.global_q = _np_ptr(self.global_q)
        a.layout = _np_ptr(self.layout)

    def forward(self, q, k, v, bias, want_lse):
        """(O, lse or None); q, k, v of the problem's shapes (any strides)."""
        d = self.desc
        bs, H, Hkv, L, S, E, Ev = self.bs, self.H, self.Hkv, self.L, self.S, self.E, self.Ev
        q0, k0, v0 = q, k, v
        q, d.q = _view(q, bs + (H, L, E), min_seq=E)
        k, d.k = _view(k, bs + (Hkv, S, E), min_seq=E)
        v, d.v = _view(v, bs + (Hkv, S, Ev), min_seq=Ev)
        self.inplace = q is q0 and k is k0 and v is v0
        out = torch.empty(bs + (H, L, Ev), dtype=self.dt)
        lse = None
        d.want_lse = int(want_lse)
        if want_lse:
            lse = torch.empty(bs + (H, L), dtype=torch.float32)
            d.lse = _lib.View(H * L, L, 1)
        a = _lib.SdpaArgs()
        if self.ty == _lib.DTYPE_F32:
            a.q, a.k, a.v, a.o = q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr()
        else:
            a.q16, a.k16, a.v16, a.o16 = q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr()
        if bias is not None:
            bias, d.bias = _view(bias, bs + (H, L, S), allow_zero=True)
            a.bias = bias.data_ptr()
        a.lse = _np_ptr(lse)
        self._common_args(a)
        plan = self.plan = _plans.get("sdpa", d)
        _check(_lib.sdpa_execute(plan.handle, ctypes.byref(a), plan.ws, plan.ws_bytes),
               "attn_sdpa_execute")
        return out, lse

    def backward(self, q, k, v, bias, out, lse, d_o, want_dbias):
        """(dQ, dK, dV, dBias or None) at dO."""
        bs, H, Hkv, L, S, E, Ev = self.bs, self.H, self.Hkv, self.L, self.S, self.E, self.Ev
        bd = _lib.SdpaBwdDesc()
        _check(_lib.sdpa_bwd_desc_init(ctypes.byref(bd)), "attn_sdpa_bwd_desc_init")
        f = self.desc
        q, f.q = _view(q, bs + (H, L, E), min_seq=E)
        k, f.k = _view(k, bs + (Hkv, S, E), min_seq=E)
        v, f.v = _view(v, bs + (Hkv, S, Ev), min_seq=Ev)
        if bias is not None:
            bias, f.bias = _view(bias, bs + (H, L, S), allow_zero=True)
        f.want_lse = 1
        f.lse = _lib.View(H * L, L, 1)
        if d_o.dtype != self.dt:
            d_o = d_o.to(self.dt)
        d_o, bd.d_o = _view(d_o, bs + (H, L, Ev), min_seq=Ev)
        bd.fwd = f
        dq = torch.empty(bs + (H, L, E), dtype=self.dt)
        dk = torch.empty(bs + (Hkv, S, E), dtype=self.dt)
        dv = torch.empty(bs + (Hkv, S, Ev), dtype=self.dt)
        bd.dq, bd.dk, bd.dv = (contiguous_view(t.shape) for t in (dq, dk, dv))
        dbias = None
        a = _lib.SdpaBwdArgs()
        if want_dbias:
            dbias = torch.empty(self.bias_shape, dtype=torch.float32)
            bd.want_dbias = 1
            _, bd.dbias = _view(dbias, bs + (H, L, S), allow_zero=True)
            a.dbias = dbias.data_ptr()
        tensors = (q, k, v, out, d_o, dq, dk, dv)
        names = ("q", "k", "v", "o", "d_o", "dq", "dk", "dv")
        if self.ty == _lib.DTYPE_F32:
            for n, t in zip(names, tensors):
                setattr(a, n, t.data_ptr())
        else:
            a16 = _lib.SdpaBwdArgs16()
            for n, t in zip(names, tensors):
                setattr(a16, n, t.data_ptr())
            a.args16 = ctypes.addressof(a16)
        a.lse = lse.data_ptr()
        a.bias = _np_ptr(bias)
        self._common_args(a)
        plan = _plans.get("sdpa_bwd", bd)
        _check(_lib.sdpa_bwd_execute(plan.handle, ctypes.byref(a), plan.ws, plan.ws_bytes),
               "attn_sdpa_bwd_execute")
        return dq, dk, dv, dbias


_FAST = threading.local()
_FAST_CAPACITY = 64


def _remember(key, problem, squeeze, want_lse):
    """Keep a call that read Q, K and V in place (plain options, no grad)
    as a closure over its plan and an args struct of its own; a repeated
    call costs one dict lookup, torch.empty and attn_sdpa_execute."""
    cache = getattr(_FAST, "calls", None)
    if cache is None or len(cache) >= _FAST_CAPACITY:
        cache = _FAST.calls = {}
    plan, dt = problem.plan, problem.dt
    oshape = problem.bs + (problem.H, problem.L, problem.Ev)
    lshape = problem.bs + (problem.H, problem.L)
    a = _lib.SdpaArgs()
    aref = ctypes.byref(a)
    execute, handle, ws, wsb = _lib.sdpa_execute, plan.handle, plan.ws, plan.ws_bytes
    f32 = problem.ty == _lib.DTYPE_F32
    empty = torch.empty

    def call(q, k, v):
        out = empty(oshape, dtype=dt)
        if f32:
            a.q, a.k, a.v, a.o = q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr()
        else:
            a.q16, a.k16, a.v16, a.o16 = q.data_ptr(), k.data_ptr(), v.data_ptr(), \
                out.data_ptr()
        lse = None
        if want_lse:
            lse = empty(lshape, dtype=torch.float32)
            a.lse = lse.data_ptr()
        status = execute(handle, aref, ws, wsb)
        if status:
            _check(status, "attn_sdpa_execute")
        if squeeze:
            out = out[0]
            lse = None if lse is None else lse[0]
        return (out, lse) if want_lse else out

    call.plan = plan        # kept alive with the closure
    cache[key] = call


class _SdpaFunction(torch.autograd.Function):
    """O, lse = SDPA(Q, K, V, bias); backward by attn_sdpa_bwd_execute.  The
    logsumexp is an output without a gradient."""

    @staticmethod
    def forward(ctx, q, k, v, bias, problem):
        out, lse = problem.forward(q, k, v, bias, True)
        ctx.problem = problem
        ctx.save_for_backward(q, k, v, bias, out, lse)
        ctx.mark_non_differentiable(lse)
        return out, lse

    @staticmethod
    def backward(ctx, d_o, _d_lse):
        q, k, v, bias, out, lse = ctx.saved_tensors
        want_dbias = bias is not None and ctx.needs_input_grad[3]
        dq, dk, dv, dbias = ctx.problem.backward(q, k, v, bias, out, lse, d_o, want_dbias)
        return dq, dk, dv, dbias, None


class _Zeros(torch.autograd.Function):
    """The output of an empty problem: zeros, with zero gradients."""

    @staticmethod
    def forward(ctx, shape, q, k, v):
        ctx.shapes = (q.shape, k.shape, v.shape)
        return q.new_zeros(shape)

    @staticmethod
    def backward(ctx, _g):
        return (None,) + tuple(torch.zeros(s, dtype=_g.dtype) for s in ctx.shapes)


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False, *,
                                 dropout_seed=None, dropout_offset=0, window_left=None,
                                 window_right=None, align="top_left", kv_lens=None,
                                 q_lens=None, global_k=None, global_q=None, block_layout=None,
                                 block_size=None, return_lse=False, threads=None,
                                 engine="auto"):
    """torch.nn.functional.scaled_dot_product_attention, computed by attn.

    query (..., Hq, L, E), key (..., Hkv, S, E), value (..., Hkv, S, Ev)
    -> (..., Hq, L, Ev), CPU tensors of one dtype (float32, bfloat16 or
    float16; the output has it too).  Differentiable in query, key, value
    and a float attn_mask (attn's backward).

    As PyTorch:
      attn_mask: bool (True = takes part) or float (added to the scores),
        broadcastable to (..., Hq, L, S).
      dropout_p: dropout on the probabilities.  Without dropout_seed the
        seed is drawn from torch's default generator (torch.manual_seed
        makes it reproducible); the keep mask is attn's Philox stream, not
        PyTorch's bits.
      is_causal: key j visible to query i iff j <= i (top-left).  With an
        attn_mask both apply (PyTorch raises).
      scale: None = 1 / sqrt(E).  enable_gqa: Hq a multiple of Hkv.
    Differences: a row with no visible key gives 0 (PyTorch: NaN); empty
    sizes give empty (or zero) outputs, as PyTorch.

    attn's extras (keyword only): dropout_seed, dropout_offset;
    window_left, window_right, align ('top_left' or 'bottom_right');
    kv_lens, q_lens (per-batch lengths, of the batch shape); global_k
    (..., S) and global_q (..., L) bool flags; block_layout (nb, mb) or
    (Hq, nb, mb) bool with block_size (a power of two, 16..256);
    return_lse (also return the logsumexp (..., Hq, L), float32, without
    a gradient); threads (None: torch.get_num_threads()); engine ('auto',
    'blas', 'tile').  The semantics are attn_sdpa's (include/attn.h).
    """
    fast = None
    if (type(query) is torch.Tensor and type(key) is torch.Tensor and
            type(value) is torch.Tensor and attn_mask is None and not dropout_p and kv_lens is None and q_lens is None and
            global_k is None and global_q is None and block_layout is None and
            not (torch.is_grad_enabled() and (query.requires_grad or key.requires_grad or
                                              value.requires_grad))):
        # Repeated calls on tensors of the same shapes, strides and type
        # with the same options: the kept problem, plan and args, new
        # pointers (see _FAST).
        fast = (query.shape, query.stride(), key.shape, key.stride(), value.shape,
                value.stride(), query.dtype, key.dtype, value.dtype, is_causal, scale,
                enable_gqa, window_left, window_right, align, return_lse,
                torch.get_num_threads() if threads is None else threads, engine)
        cache = getattr(_FAST, "calls", None)
        hit = None if cache is None else cache.get(fast)
        if hit is not None and query.device.type == "cpu":
            return hit(query, key, value)
    dt = _dtype_of((query, key, value), ("query", "key", "value"))
    for t, n in ((query, "query"), (key, "key"), (value, "value")):
        if t.dim() < 2:
            raise ValueError("%s must have at least 2 dimensions (..., L, E), has %d" %
                             (n, t.dim()))
    orig_nd = max(query.dim(), key.dim(), value.dim())
    nd = max(orig_nd, 3)
    q, k, v = (t.reshape((1,) * (nd - t.dim()) + tuple(t.shape)) if t.dim() < nd else t
               for t in (query, key, value))
    bs, H, Hkv, L, S, E, Ev = _sdpa_shapes(q.shape, k.shape, v.shape, enable_gqa)
    if enable_gqa and Hkv and H % Hkv:
        raise ValueError("enable_gqa: query heads (%d) must be a multiple of key/value "
                         "heads (%d)" % (H, Hkv))
    qs, ks, vs = bs + (H, L, E), bs + (Hkv, S, E), bs + (Hkv, S, Ev)
    if tuple(q.shape) != qs:
        q = q.expand(qs)
    if tuple(k.shape) != ks:
        k = k.expand(ks)
    if tuple(v.shape) != vs:
        v = v.expand(vs)

    out_shape = bs + (H, L, Ev)
    B = math.prod(bs)
    empty = B == 0 or H == 0 or L == 0 or S == 0 or Ev == 0
    if empty:
        out = (_Zeros.apply(out_shape, q, k, v)
               if torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or
                                               v.requires_grad)
               else torch.zeros(out_shape, dtype=dt))
        lse = torch.full(bs + (H, L), -math.inf)
        if orig_nd == 2:
            out, lse = out[0], lse[0]
        return (out, lse) if return_lse else out

    full = bs + (H, L, S)
    mask = bias = None
    bias_shape = None
    if attn_mask is not None:
        m = attn_mask if isinstance(attn_mask, torch.Tensor) else torch.as_tensor(attn_mask)
        if m.dim() > len(full):
            raise ValueError("attn_mask: shape %s does not broadcast to %s" %
                             (tuple(m.shape), full))
        m = m.reshape((1,) * (len(full) - m.dim()) + tuple(m.shape))
        try:
            fits = tuple(torch.broadcast_shapes(m.shape, full)) == full
        except RuntimeError:
            fits = False
        if not fits:
            raise ValueError("attn_mask: shape %s does not broadcast to %s" %
                             (tuple(attn_mask.shape), full))
        if m.dtype == torch.bool:
            mask = m.view(torch.uint8)
        elif m.dtype.is_floating_point:
            bias = m if m.dtype == torch.float32 else m.float()
            # dBias comes in the bias's own shape where its batch (all of
            # it), head and query dimensions are 1, else in full: expand
            # what attn cannot reduce (autograd sums the expansion back).
            bshape = list(bias.shape)
            nb = len(bs)
            if any(x != 1 for x in bshape[:nb]):
                bshape[:nb] = bs
            bshape[-1] = S
            if tuple(bshape) != tuple(bias.shape):
                bias = bias.expand(bshape)
            if view_from(full, bias.expand(full).stride(), True) is None:
                bias = bias.contiguous()
            bias_shape = tuple(bias.shape)
        else:
            raise TypeError("attn_mask must be bool (True = takes part) or floating (added "
                            "to the scores), not %s" % m.dtype)
    kvl = None if kv_lens is None else _int32(kv_lens, bs, "kv_lens")
    qll = None if q_lens is None else _int32(q_lens, bs, "q_lens")
    gk = None if global_k is None else _flags(global_k, bs + (S,), "global_k")
    gq = None if global_q is None else _flags(global_q, bs + (L,), "global_q")
    lay = None
    per_head = 0
    if block_layout is not None:
        if block_size is None:
            raise ValueError("block_layout needs block_size")
        lt = torch.as_tensor(block_layout)
        if lt.dim() == 3 and lt.shape[0] == H and H > 1:
            per_head = 1
        elif lt.dim() == 3 and lt.shape[0] == 1:
            lt = lt[0]
        elif lt.dim() != 2:
            raise ValueError("block_layout must be (nb, mb) or (Hq, nb, mb), got %s" %
                             (tuple(lt.shape),))
        bsz = int(block_size)
        nbm = ((L + bsz - 1) // bsz, (S + bsz - 1) // bsz) if bsz > 0 else (0, 0)
        if tuple(lt.shape[-2:]) != nbm:
            raise ValueError("block_layout: expected (..., %d, %d) blocks for block_size %d, "
                             "got %s" % (nbm[0], nbm[1], bsz, tuple(lt.shape)))
        lay = _flags(lt, tuple(lt.shape), "block_layout")
    elif block_size is not None:
        raise ValueError("block_size needs block_layout")
    p = float(dropout_p)
    if p > 0 and dropout_seed is None:
        dropout_seed = _torch_seed()
    dropout = (p, int(dropout_seed or 0), int(dropout_offset))
    if threads is None:
        threads = torch.get_num_threads()
    problem = _Sdpa(bs, H, Hkv, L, S, E, Ev, dt, mask=mask, bias=bias, bias_shape=bias_shape,
                    kv_lens=kvl, q_lens=qll, global_k=gk, global_q=gq, layout=lay,
                    layout_per_head=per_head, block_size=block_size, scale=scale, align=align,
                    window_left=window_left, window_right=window_right, is_causal=is_causal,
                    dropout=dropout, threads=int(threads), engine=_engine(engine))
    grad = torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or
                                        v.requires_grad or
                                        (bias is not None and bias.requires_grad))
    if grad:
        out, lse = _SdpaFunction.apply(q, k, v, bias, problem)
    else:
        with torch.no_grad():
            out, lse = problem.forward(q, k, v, bias, return_lse)
        if fast is not None and problem.inplace:
            _remember(fast, problem, orig_nd == 2, return_lse)
    if orig_nd == 2:
        out = out[0]
        lse = None if lse is None else lse[0]
    return (out, lse) if return_lse else out


def _np_mask(m):
    if m is None:
        return None
    if isinstance(m, torch.Tensor):
        if m.requires_grad and torch.is_grad_enabled():
            raise NotImplementedError("attn.torch.MultiheadAttention: a float mask that "
                                      "requires grad (attn's layer backward does not "
                                      "differentiate the mask; use "
                                      "scaled_dot_product_attention for that)")
        m = m.detach()
        return m.float().numpy() if m.dtype in (torch.bfloat16, torch.float16) else m.numpy()
    return np.asarray(m)


class _MhaFunction(torch.autograd.Function):
    """Y = MHA(X, Xk, Xv; parameters) by attn_mha_train_execute; backward by
    attn_mha_bwd_execute.  The weights output is not differentiable."""

    @staticmethod
    def forward(ctx, make, x, key, value, *params):
        call = make(x, key, value, params)
        call.train_execute()
        ctx.call = call
        ctx.cross = not call.self_attention
        ctx.shapes = [p.shape for p in params]
        ctx.dt = x.dtype
        ctx.kv = (key.shape, value.shape)
        out = from_numpy(call.out, x.dtype == torch.bfloat16)
        return out

    @staticmethod
    def backward(ctx, dy):
        call = ctx.call
        dy = dy.to(ctx.dt).contiguous()
        N, L, _ = dy.shape
        dx = torch.empty((N, L, call.desc.embed_dim), dtype=ctx.dt)
        grads = [torch.empty(s, dtype=ctx.dt) for s in ctx.shapes]
        names = list(call.params)
        dkey = dvalue = None
        if ctx.cross:
            dkey = torch.empty(ctx.kv[0], dtype=ctx.dt)
            dvalue = torch.empty(ctx.kv[1], dtype=ctx.dt)
        call.backward(to_numpy(dy), {n: to_numpy(g) for n, g in zip(names, grads)}, to_numpy(dx),
                      None if dkey is None else to_numpy(dkey),
                      None if dvalue is None else to_numpy(dvalue))
        ctx.call = None
        return (None, dx, dkey, dvalue) + tuple(grads)


def _copied(call, q, k, v):
    """Which inputs the layer call read as dense copies (not their own
    memory), as (q, k, v) flags; None if some input was read in place with
    a row stride other than the dense one."""
    flags = []
    for a, t, F in ((call.x, q, call.desc.embed_dim), (call.key, k, call.desc.kdim),
                    (call.value, v, call.desc.vdim)):
        if a is None:
            flags.append(False)
        elif a.ctypes.data == t.data_ptr():
            flags.append(False)
        elif a.flags.c_contiguous and a.shape[-1] == F:
            flags.append(True)
        else:
            return None
    return tuple(flags)


def _mha_fast(call, dt, copied):
    """A repeated no-grad layer call without masks, lengths or dropout, on
    inputs of the same shapes and strides and the same parameter tensors:
    the kept desc, plan and structs, new input and output pointers (inputs
    the first call copied, copied again the same way)."""
    cq, ck, cv = copied
    N, L, _ = call.shape
    E = call.desc.embed_dim
    io, args, plan = call.io, call.args, call.plan
    aref, wref = ctypes.byref(args), ctypes.byref(call.weights_struct)
    wshape = None if call.weights is None else call.weights.shape
    self_attn = call.self_attention
    execute = _lib.mha_execute
    empty = torch.empty

    def run(q, k, v):
        if cq:
            q = q.contiguous()
        if ck:
            k = k.contiguous()
        if cv:
            v = v.contiguous()
        out = empty((N, L, E), dtype=dt)
        io.x, io.out = q.data_ptr(), out.data_ptr()
        if not self_attn:
            io.key, io.value = k.data_ptr(), v.data_ptr()
        w = None
        if wshape is not None:
            w = empty(wshape, dtype=torch.float32)
            args.weights = w.data_ptr()
        status = execute(plan.handle, wref, aref, plan.ws, plan.ws_bytes)
        if status:
            _check(status, "attn_mha_execute")
        return out, w

    # what the structs point at besides the inputs: parameters, 16-bit structs
    run.keep = (call.params, call._w16, call.weights_struct, args, io, plan)
    return run


class MultiheadAttention(torch.nn.Module):
    """torch.nn.MultiheadAttention computed by attn, trainable.

    MultiheadAttention(embed_dim, num_heads, dropout=0.0, bias=True,
                       add_bias_kv=False, add_zero_attn=False, kdim=None,
                       vdim=None, batch_first=False, device=None, dtype=None,
                       *, num_kv_heads=None, threads=None, engine="auto")

    The parameters are PyTorch's (names, shapes, initialisation in the
    same order from torch's generator, so torch.manual_seed(s) gives the
    same values as nn.MultiheadAttention; state_dict interchangeable):
    in_proj_weight (3E, E) when kdim == vdim == E and no GQA, else
    q_proj_weight, k_proj_weight, v_proj_weight; in_proj_bias;
    out_proj (an nn.Linear).  dtype: float32, bfloat16 or float16 (the
    layer then runs attn's 16-bit layer; docs/TYPES.md).

    forward(query, key, value, key_padding_mask=None, need_weights=True,
            attn_mask=None, average_attn_weights=True, is_causal=False, *,
            kv_lens=None, q_lens=None, window_left=None, window_right=None,
            align='top_left', scale=None)
    -> (output, weights or None), as nn.MultiheadAttention (bool masks:
    True = NOT allowed; float masks added).  In training mode with
    dropout > 0 the attention weights are dropped (seed from torch's
    generator).  Gradients reach query, key, value and every parameter
    through attn's layer backward; a float mask is an input only, and the
    weights output has no gradient.  is_causal applies the causal mask
    (attn_mask may be None).  Rows with no visible key give out_proj.bias
    (PyTorch: NaN).  Not supported: add_bias_kv, add_zero_attn (raise).
    """

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False,
                 add_zero_attn=False, kdim=None, vdim=None, batch_first=False, device=None,
                 dtype=None, *, num_kv_heads=None, threads=None, engine="auto"):
        super().__init__()
        if add_bias_kv or add_zero_attn:
            raise NotImplementedError("attn.torch.MultiheadAttention: add_bias_kv and "
                                      "add_zero_attn are not supported")
        if device is not None and torch.device(device).type != "cpu":
            raise NotImplementedError("attn runs on the CPU only (device=%r)" % (device,))
        dtype = torch.float32 if dtype is None else dtype
        if dtype not in _TYPES:
            raise TypeError("attn computes float32, bfloat16 or float16, not %s" % dtype)
        set_sizes(self, embed_dim, num_heads, num_kv_heads, kdim, vdim, dropout)
        E, Hkv = self.embed_dim, self.num_kv_heads
        self.batch_first = bool(batch_first)
        self.threads = threads
        self.engine = engine
        _engine(engine)
        f = {"dtype": dtype}
        kv_rows = Hkv * self.head_dim
        P = torch.nn.Parameter
        if self._qkv_same_embed_dim:
            self.in_proj_weight = P(torch.empty((3 * E, E), **f))
            self.register_parameter("q_proj_weight", None)
            self.register_parameter("k_proj_weight", None)
            self.register_parameter("v_proj_weight", None)
        else:
            self.q_proj_weight = P(torch.empty((E, E), **f))
            self.k_proj_weight = P(torch.empty((kv_rows, self.kdim), **f))
            self.v_proj_weight = P(torch.empty((kv_rows, self.vdim), **f))
            self.register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = P(torch.empty(E + 2 * kv_rows, **f))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = torch.nn.Linear(E, E, bias=bias, **f)
        self._reset_parameters()

    def _reset_parameters(self):
        # nn.MultiheadAttention's order (out_proj's own init ran above)
        if self._qkv_same_embed_dim:
            torch.nn.init.xavier_uniform_(self.in_proj_weight)
        else:
            torch.nn.init.xavier_uniform_(self.q_proj_weight)
            torch.nn.init.xavier_uniform_(self.k_proj_weight)
            torch.nn.init.xavier_uniform_(self.v_proj_weight)
        if self.in_proj_bias is not None:
            torch.nn.init.constant_(self.in_proj_bias, 0.0)
            torch.nn.init.constant_(self.out_proj.bias, 0.0)

    def _params(self):
        names, tensors = [], []
        if self._qkv_same_embed_dim:
            names.append("in_proj_weight")
            tensors.append(self.in_proj_weight)
        else:
            names += ["q_proj_weight", "k_proj_weight", "v_proj_weight"]
            tensors += [self.q_proj_weight, self.k_proj_weight, self.v_proj_weight]
        if self.in_proj_bias is not None:
            names.append("in_proj_bias")
            tensors.append(self.in_proj_bias)
        names.append("out_proj.weight")
        tensors.append(self.out_proj.weight)
        if self.out_proj.bias is not None:
            names.append("out_proj.bias")
            tensors.append(self.out_proj.bias)
        return names, tensors

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True,
                attn_mask=None, average_attn_weights=True, is_causal=False, *, kv_lens=None,
                q_lens=None, window_left=None, window_right=None, align="top_left",
                scale=None):
        fast = None
        if (not torch.is_grad_enabled() and key_padding_mask is None and attn_mask is None and
                kv_lens is None and q_lens is None and not (self.training and self.dropout)):
            # a repeated plain inference call: see _mha_fast
            fast = (query.shape, query.stride(), key.shape, key.stride(), value.shape,
                    value.stride(), query is key, key is value, query.dtype, key.dtype,
                    value.dtype, need_weights, average_attn_weights, is_causal, window_left,
                    window_right, align, scale, self.threads, self.batch_first,
                    torch.get_num_threads(), threading.get_ident()) + tuple(
                        p.data_ptr() for p in self.parameters())
            hit = self._fast.get(fast)
            if hit is not None and query.device.type == "cpu":
                q, k, v = query, key, value
                batched = q.dim() == 3
                if not batched:
                    q, k, v = q[None], k[None], v[None]
                elif not self.batch_first:
                    q, k, v = q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1)
                out, w = hit(q, k, v)
                return self._unlayout(out, w, batched)
        names, params = self._params()
        dt = params[0].dtype
        same = query is key and key is value
        _dtype_of((query, key, value) + tuple(params),
                  ("query", "key", "value") + tuple(names))
        if query.dim() not in (2, 3) or key.dim() != query.dim() or value.dim() != query.dim():
            raise ValueError("query, key and value must all be 3-D (batched) or 2-D "
                             "(unbatched); got %s, %s, %s" % (
                                 tuple(query.shape), tuple(key.shape), tuple(value.shape)))
        batched = query.dim() == 3
        if not batched:
            q, k, v = query[None], key[None], value[None]
        elif not self.batch_first:
            q, k, v = (t.transpose(0, 1) for t in (query, key, value))
        else:
            q, k, v = query, key, value
        dropout = (0.0, 0, 0)
        if self.training and self.dropout > 0:
            dropout = (self.dropout, _torch_seed(), 0)
        threads = torch.get_num_threads() if self.threads is None else int(self.threads)
        kpm, am = _np_mask(key_padding_mask), _np_mask(attn_mask)
        kl = None if kv_lens is None else np.asarray(kv_lens)
        ql = None if q_lens is None else np.asarray(q_lens)
        ty = _TYPES[dt]

        made = []

        def make(x, xk, xv, ps):
            made.append(LayerCall(self, {n: to_numpy(p.contiguous()) for n, p in zip(names, ps)},
                             to_numpy(x), to_numpy(xk), to_numpy(xv), same, ty, batched,
                             key_padding_mask=kpm, need_weights=need_weights, attn_mask=am,
                             average_attn_weights=average_attn_weights, is_causal=is_causal,
                             kv_lens=kl, q_lens=ql, window_left=window_left,
                             window_right=window_right, align=align, scale=scale,
                             dropout=dropout, threads=threads, engine=self.engine))
            return made[-1]

        grad = torch.is_grad_enabled() and (any(t.requires_grad for t in (q, k, v)) or
                                            any(p.requires_grad for p in params))
        if grad:
            fast = None
            # self-attention passes X once; its gradient sums all three uses
            x = q.contiguous()
            xk, xv = (x, x) if same else (k.contiguous(), v.contiguous())
            out = _MhaFunction.apply(make, x, xk, xv, *params)
            w = made[-1].weights
            w = None if w is None else torch.from_numpy(w)
        else:
            with torch.no_grad():
                call = make(q, k, v, params)
                call.execute()
                out = from_numpy(call.out, dt == torch.bfloat16)
                w = None if call.weights is None else torch.from_numpy(call.weights)
            copied = None if fast is None else _copied(call, q, k, v)
            if copied is not None:
                if len(self._fast) >= 16:
                    self._fast.clear()
                self._fast[fast] = _mha_fast(call, dt, copied)
        return self._unlayout(out, w, batched)

    def _unlayout(self, out, w, batched):
        if not batched:
            return out[0], None if w is None else w[0]
        if not self.batch_first:
            out = out.transpose(0, 1)
        return out, w

    @property
    def _fast(self):
        # kept eval calls (see _mha_fast); not a buffer, not in state_dict
        d = self.__dict__.get("_fast_calls")
        if d is None:
            d = self.__dict__["_fast_calls"] = {}
        return d

    def extra_repr(self):
        return "embed_dim=%d, num_heads=%d, num_kv_heads=%d, kdim=%d, vdim=%d, dropout=%g, " \
               "batch_first=%s" % (self.embed_dim, self.num_heads, self.num_kv_heads,
                                   self.kdim, self.vdim, self.dropout, self.batch_first)


for _name in ("_torch_linear", "_torch_decode"):
    try:
        _mod = __import__(__name__.rsplit(".", 1)[0] + "." + _name, fromlist=["__all__"])
    except ImportError as _e:
        if _name not in str(_e):
            raise
        continue
    for _n in getattr(_mod, "__all__", ()):
        globals()[_n] = getattr(_mod, _n)
        __all__.append(_n)
