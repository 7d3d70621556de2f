"""Linear attention on torch tensors, with autograd (attn's backward).

Imported only where torch is installed (attn.torch re-exports it).  CPU
tensors of float32, float16 or bfloat16 are read in place: t.detach()
.numpy() shares the tensor's memory, and attn takes any strides its views
can describe (others are copied once); outputs are numpy arrays attn
wrote, handed back with torch.from_numpy (no copy).
"""

import torch

from . import _linear
from ._torch_common import check_tensor, from_numpy, ints, to_numpy

__all__ = ["LinearAttentionFunction", "linear_attention"]

_TYPES = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}


def _as_numpy(t, name):
    """(numpy array sharing t's memory, attn dtype name)."""
    check_tensor(t, name)
    return to_numpy(t), _TYPES[t.dtype]


def _to_torch(a, dt):
    return from_numpy(a, dt == "bf16")


def _inputs(q, k, v):
    (qn, dq), (kn, dk), (vn, dv) = (_as_numpy(t, n) for t, n in
                                    ((q, "query"), (k, "key"), (v, "value")))
    if not dq == dk == dv:
        raise TypeError("query, key and value must have one dtype (%s, %s, %s)" %
                        (q.dtype, k.dtype, v.dtype))
    return qn, kn, vn, dq


class LinearAttentionFunction(torch.autograd.Function):
    """attn's linear attention as an autograd Function.

    LinearAttentionFunction.apply(q, k, v, feature_map, causal, align, eps,
                                  kv_lens, q_lens, threads, engine,
                                  want_state)
    returns the output, or (output, S, z) when want_state (S and z are
    not differentiable).  The backward is attn_linear_backward; gradients
    have the inputs' dtypes.
    """

    @staticmethod
    def forward(ctx, q, k, v, feature_map="elu1", causal=False, align="top_left",
                eps=None, kv_lens=None, q_lens=None, threads=0, engine="auto",
                want_state=False):
        qn, kn, vn, dt = _inputs(q, k, v)
        opts = dict(feature_map=feature_map, causal=causal, align=align, eps=eps,
                    kv_lens=kv_lens, q_lens=q_lens, threads=threads, engine=engine,
                    dtype=dt)
        r = _linear.linear_attention(qn, kn, vn, return_state=want_state, **opts)
        ctx.save_for_backward(q, k, v)
        ctx.opts = opts
        if want_state:
            out, (s, z) = r
            s, z = torch.from_numpy(s), torch.from_numpy(z)
            ctx.mark_non_differentiable(s, z)
            return _to_torch(out, dt), s, z
        return _to_torch(r, dt)

    @staticmethod
    def backward(ctx, grad_out, *unused):
        q, k, v = ctx.saved_tensors
        dt = ctx.opts["dtype"]
        qn, kn, vn, _ = _inputs(q, k, v)
        gn, _ = _as_numpy(grad_out.to(q.dtype), "grad_output")
        grads = _linear.linear_attention_backward(qn, kn, vn, gn, **ctx.opts)
        dq, dk, dv = (_to_torch(g, dt) for g in grads)
        return (dq, dk, dv) + (None,) * 9


def linear_attention(query, key, value, *, feature_map="elu1", causal=False,
                     align="top_left", eps=None, kv_lens=None, q_lens=None, state=None,
                     return_state=False, threads=0, engine="auto"):
    """attn.linear_attention on torch tensors (see its docstring for the
    options and shapes), differentiable in query, key and value.

    CPU tensors of float32, float16 or bfloat16 (one dtype for the three;
    the output has it).  state=(S, z) and return_state as in the numpy
    function (float32 tensors).  attn's backward has no recurrent state:
    with state given, the call is not differentiable (NotImplementedError
    when a tensor requires grad); return_state alone is (the returned
    state is not).
    """
    kl, ql = ints(kv_lens), ints(q_lens)
    if state is None:
        r = LinearAttentionFunction.apply(query, key, value, feature_map, causal, align,
                                          eps, kl, ql, threads, engine, bool(return_state))
        if return_state:
            out, s, z = r
            return out, (s, z)
        return r
    s0, z0 = state
    if torch.is_grad_enabled() and any(
            isinstance(t, torch.Tensor) and t.requires_grad
            for t in (query, key, value, s0, z0)):
        raise NotImplementedError("attn.linear_attention: attn's linear backward has no "
                                  "recurrent state; call it with a state under "
                                  "torch.no_grad() or on tensors that do not require grad")
    qn, kn, vn, dt = _inputs(query, key, value)
    sn, _ = _as_numpy(s0.float() if isinstance(s0, torch.Tensor) else torch.as_tensor(s0),
                      "state S")
    zn, _ = _as_numpy(z0.float() if isinstance(z0, torch.Tensor) else torch.as_tensor(z0),
                      "state z")
    r = _linear.linear_attention(qn, kn, vn, feature_map=feature_map, causal=causal,
                                 align=align, eps=eps, kv_lens=kl, q_lens=ql,
                                 state=(sn, zn), return_state=return_state, threads=threads,
                                 engine=engine, dtype=dt)
    if return_state:
        out, (s, z) = r
        return _to_torch(out, dt), (torch.from_numpy(s), torch.from_numpy(z))
    return _to_torch(r, dt)
