"""attn: transformer attention on CPUs, from Python.

A thin ctypes layer over the C library libattn (nothing is compiled at
install time) with the forward semantics of PyTorch:

- scaled_dot_product_attention(q, k, v, ...): as
  torch.nn.functional.scaled_dot_product_attention, plus attn's extras
  (sliding windows, bottom-right causal alignment, per-batch lengths, the
  probabilities and the logsumexp, seeded dropout) as keyword arguments;
- MultiheadAttention: as torch.nn.MultiheadAttention (forward only), with
  its parameters as numpy arrays under the names and shapes of its
  state_dict;
- linear_attention / linear_attention_backward: attn_linear's forward
  (with the recurrent state) and gradients;
- KVCache, decode, merge_partials: a KV cache (F32/F16/BF16/Q8_0/Q4_0
  storage, contiguous or paged), attention of a few queries over it, and
  the merge of partial results; quantize / dequantize convert storage.

Arrays are numpy; accumulation is float32.  SDPA also takes and returns
16-bit tensors (dtype="f16": numpy float16; dtype="bf16": bfloat16 bit
patterns in uint16 arrays, since numpy has no bfloat16, with to_bf16 and
from_bf16 to convert; torch bfloat16 / float16 tensors are taken and
returned as such when torch is there).  Inputs already of the type whose
strides attn can describe are read in place; anything else is converted
once.  An argument attn rejects raises AttnError (a ValueError) naming the
status.  The shared library is found through ATTN_LIBRARY, then the path
of the installed library (in a wheel: the copy beside this file), then the
soname libattn.so.1.  __version__ is the attn release of the module (the
Meson project version).  See docs/PYTHON.md.
"""

import ctypes

import numpy as np

from . import _lib
from ._common import (AttnError, _array, _check, _engine, _float32, _lengths, _sdpa_shapes,
                      _set_window)
from ._mha import MultiheadAttention
from ._linear import (linear_attention, linear_attention_backward, linear_plan_cache_clear,
                      linear_plan_cache_info)
from ._decode import KVCache, decode, dequantize, merge_partials, quantize, storage_bytes
from ._views import as_view, contiguous_view, ptr

__all__ = [
    "__version__",
    "AttnError",
    "scaled_dot_product_attention",
    "MultiheadAttention",
    "linear_attention",
    "linear_attention_backward",
    "linear_plan_cache_info",
    "linear_plan_cache_clear",
    "KVCache",
    "decode",
    "merge_partials",
    "quantize",
    "dequantize",
    "storage_bytes",
    "dropout_keep_mask",
    "to_bf16",
    "from_bf16",
    "library_version",
    "library_path",
]

#: Path of the shared library this module loaded.
library_path = _lib.library_path


def library_version():
    """The loaded libattn's version string, "MAJOR.MINOR.PATCH"."""
    return _lib.version().decode()


try:
    from ._build_config import VERSION as __version__
except ImportError:
    # The source tree (PYTHONPATH=python, ATTN_LIBRARY=build/...): no
    # configured file; the module is the library's own version then.
    __version__ = library_version()


def _mask_or_bias(mask, shape, name):
    """(mask uint8, view) or (bias float32, view) broadcast to shape."""
    m = np.asarray(mask)
    if m.dtype == np.bool_:
        m = m.view(np.uint8)
        kind = "mask"
        dtype = np.uint8
    elif m.dtype.kind == "f":
        kind = "bias"
        dtype = np.float32
    else:
        raise TypeError("%s must be bool (True = takes part) or floating "
                        "(added to the scores), not %s" % (name, m.dtype))
    try:
        fits = np.broadcast_shapes(m.shape, shape) == tuple(shape)
    except ValueError:
        fits = False
    if not fits:
        raise ValueError("%s: shape %s does not broadcast to %s" % (name, m.shape, shape))
    a, v = as_view(m, shape, dtype, allow_zero=True)
    return kind, a, v


def to_bf16(x):
    """bfloat16 bit patterns (a uint16 array) of x, rounded to nearest even
    (attn_dtype_encode)."""
    a = np.ascontiguousarray(x, dtype=np.float32)
    out = np.empty(a.shape, dtype=np.uint16)
    _check(_lib.dtype_encode(_lib.DTYPE_BF16, ptr(a), ptr(out), a.size), "attn_dtype_encode")
    return out


def from_bf16(h):
    """float32 values of bfloat16 bit patterns (a uint16 array); exact."""
    a = np.ascontiguousarray(h, dtype=np.uint16)
    out = np.empty(a.shape, dtype=np.float32)
    _check(_lib.dtype_decode(_lib.DTYPE_BF16, ptr(a), ptr(out), a.size), "attn_dtype_decode")
    return out


_DTYPES = {"f32": (_lib.DTYPE_F32, np.float32), "f16": (_lib.DTYPE_F16, np.float16),
           "bf16": (_lib.DTYPE_BF16, np.uint16)}


def _torch_16(x):
    """(numpy view, torch dtype name) of a torch bfloat16/float16 tensor, else None."""
    if type(x).__module__.split(".")[0] != "torch":
        return None
    name = str(x.dtype).split(".")[-1]
    if name == "bfloat16":
        import torch
        return x.detach().contiguous().view(torch.int16).numpy().view(np.uint16), "bf16"
    if name == "float16":
        return x.detach().contiguous().numpy(), "f16"
    return None


def _typed(x, dt, name):
    """x as an array of dtype dt's storage: float16, or bf16 bit patterns
    (uint16 arrays are taken as such; real arrays are rounded)."""
    a = _array(x, name)
    if dt == "bf16":
        if a.dtype == np.uint16:
            return a
        if a.dtype.kind not in "fiub":
            raise TypeError("%s: expected a real or uint16 (bf16) array, got %s" % (name, a.dtype))
        return to_bf16(a)
    if dt == "f16":
        if a.dtype.kind not in "fiub":
            raise TypeError("%s: expected a real array, got dtype %s" % (name, a.dtype))
        return a if a.dtype == np.float16 else a.astype(np.float16)
    return _float32(a, name)


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False, *,
                                 dropout_seed=None, dropout_offset=0,
                                 window_left=None, window_right=None,
                                 align="top_left", kv_lens=None, q_lens=None,
                                 return_probs=False, return_lse=False, threads=0,
                                 engine="auto", dtype=None):
    """Scaled dot-product attention, as torch.nn.functional's.

    softmax(scale * Q K^T + mask) V over the keys each query sees.

    Shapes (numpy broadcasting over the leading batch dimensions):
      query (..., Hq, L, E), key (..., Hkv, S, E), value (..., Hkv, S, Ev)
      -> output (..., Hq, L, Ev), float32.
    Inputs of 2 dimensions (L, E) are one head; the dimension before the
    last two is the head dimension.

    Arguments as in PyTorch:
      attn_mask: bool (True = the position takes part) or float (added to
        the scores; -inf hides), broadcastable to (..., Hq, L, S).
      dropout_p: dropout on the probabilities, 0 <= p <= 1 (kept entries
        scaled by 1 / (1 - p)); without dropout_seed the seed is drawn
        from numpy's global generator (np.random.seed reproduces it).
      is_causal: query i sees keys j <= i (top-left, as PyTorch; see align).
        PyTorch forbids is_causal with attn_mask; here they combine (AND).
      scale: multiplies Q K^T; None means 1 / sqrt(E).
      enable_gqa: Hq may be a multiple of Hkv; query head h reads key/value
        head h // (Hq // Hkv).  Without it the head dimensions must be
        equal or 1 (broadcast), as in PyTorch.

    attn's extras (keyword only):
      dropout_seed, dropout_offset: the dropout stream; whether (b, h, i, j)
        is kept is a pure function of them (Philox4x32-10; see
        dropout_keep_mask).  Not PyTorch's generator: statistically the
        same, not bitwise.
      window_left, window_right: key j is visible to query i iff
        d(i) - window_left <= j <= d(i) + window_right (None or negative:
        unbounded).  is_causal is window_right=0.
      align: 'top_left' (d(i) = i, PyTorch's causal) or 'bottom_right'
        (d(i) = i + S_b - L_b, FlashAttention's, what a KV cache needs).
      kv_lens, q_lens: per-batch key and query lengths, integer arrays of
        the batch shape (or flattened): keys j >= kv_lens[b] are hidden,
        query rows i >= q_lens[b] are padding (output 0).
      return_probs, return_lse: also return the probabilities
        (..., Hq, L, S) (after dropout, the P that multiplies V) and the
        logsumexp (..., Hq, L) of the scaled, masked scores.
      threads: OpenMP threads (0: all).
      engine: 'auto', 'blas' or 'tile': what runs the products (attn_engine
        of attn.h; 'auto' follows ATTN_ENGINE and the CPU).  The engines
        agree within rounding, not bitwise.
      dtype: the element type of query, key, value and the output: 'f32',
        'f16' (numpy float16) or 'bf16' (bfloat16 bit patterns as uint16;
        real arrays are rounded with to_bf16).  None: 'f16' when the three
        inputs are float16, 'bf16'/'f16' for torch bfloat16/float16 tensors
        (the output is then a torch tensor of that type), else 'f32'.  See
        "Element types of the computation" in attn.h: BF16 inputs run
        bfloat16 products with float32 accumulation (P rounded to bf16),
        F16 inputs are widened to float32 as they are read.  The
        probabilities and logsumexp stay float32.

    A row with no visible key gives output 0 (PyTorch gives NaN), its
    probabilities 0 and logsumexp -inf.  Empty sizes (batch, heads, L, S
    or Ev of 0) give empty or zero outputs, as PyTorch.

    Returns the output, or (output, probs, lse) with None in the places
    not asked for when return_probs or return_lse is set.
    Raises AttnError (status and message from attn) for what attn rejects,
    ValueError / TypeError for shapes and types that do not fit.
    """
    torch_in = [_torch_16(x) for x in (query, key, value)]
    if all(t is not None for t in torch_in) and len({t[1] for t in torch_in}) == 1:
        query, key, value = (t[0] for t in torch_in)
        if dtype is None:
            dtype = torch_in[0][1]
        as_torch = dtype
    else:
        as_torch = None
        query, key, value = (_array(x, n) for x, n in
                             ((query, "query"), (key, "key"), (value, "value")))
    if dtype is None:
        dtype = "f16" if all(x.dtype == np.float16 for x in (query, key, value)) else "f32"
    if dtype not in _DTYPES:
        raise ValueError("dtype must be 'f32', 'f16' or 'bf16', not %r" % (dtype,))
    ty, npt = _DTYPES[dtype]
    q = _typed(query, dtype, "query")
    k = _typed(key, dtype, "key")
    v = _typed(value, dtype, "value")
    for a, name in ((q, "query"), (k, "key"), (v, "value")):
        if a.ndim < 2:
            raise ValueError("%s must have at least 2 dimensions (..., L, E), has %d" %
                             (name, a.ndim))
    orig_nd = max(q.ndim, k.ndim, v.ndim)
    nd = max(orig_nd, 3)
    q, k, v = (a.reshape((1,) * (nd - a.ndim) + a.shape) for a in (q, k, v))
    bs, H, Hkv, L, S, E, Ev = _sdpa_shapes(q.shape, k.shape, v.shape, enable_gqa)
    B = int(np.prod(bs, dtype=np.int64))
    if B == 0 or H == 0 or L == 0 or S == 0 or Ev == 0:
        # an empty problem: empty output (S == 0: every row sees no key,
        # output 0, probabilities empty, logsumexp -inf), as PyTorch
        out = np.zeros(bs + (H, L, Ev), dtype=npt)
        probs = np.zeros(bs + (H, L, S), dtype=np.float32) if return_probs else None
        lse = np.full(bs + (H, L), -np.inf, dtype=np.float32) if return_lse else None
        if orig_nd == 2:
            out = out[0]
            probs = None if probs is None else probs[0]
            lse = None if lse is None else lse[0]
        if return_probs or return_lse:
            return out, probs, lse
        return out

    qa, qv = as_view(q, bs + (H, L, E), npt, min_seq=E)
    ka, kv = as_view(k, bs + (Hkv, S, E), npt, min_seq=E)
    va, vv = as_view(v, bs + (Hkv, S, Ev), npt, min_seq=Ev)

    d = _lib.SdpaDesc()
    _check(_lib.sdpa_desc_init(ctypes.byref(d)), "attn_sdpa_desc_init")
    d.batch, d.q_heads, d.kv_heads = B, H, Hkv
    d.q_len, d.kv_len, d.qk_dim, d.v_dim = L, S, E, Ev
    d.q, d.k, d.v = qv, kv, vv
    out = np.empty(bs + (H, L, Ev), dtype=npt)
    d.o = contiguous_view(out.shape)
    _set_window(d, scale, align, window_left, window_right, is_causal)
    args = _lib.SdpaArgs()
    if ty == _lib.DTYPE_F32:
        args.q, args.k, args.v, args.o = ptr(qa), ptr(ka), ptr(va), ptr(out)
    else:
        d.q_type = d.k_type = d.v_type = d.o_type = ty
        args.q16, args.k16, args.v16, args.o16 = ptr(qa), ptr(ka), ptr(va), ptr(out)
    keep = [qa, ka, va]
    if kv_lens is not None:
        kl = _lengths(kv_lens, bs, "kv_lens")
        d.use_kv_lens = 1
        args.kv_lens = ptr(kl)
        keep.append(kl)
    if q_lens is not None:
        ql = _lengths(q_lens, bs, "q_lens")
        d.use_q_lens = 1
        args.q_lens = ptr(ql)
        keep.append(ql)
    if attn_mask is not None:
        kind, ma, mv = _mask_or_bias(attn_mask, bs + (H, L, S), "attn_mask")
        if kind == "mask":
            d.mask_mode = _lib.MASK_KEEP_NONZERO
            d.mask = mv
            args.mask = ptr(ma)
        else:
            d.use_bias = 1
            d.bias = mv
            args.bias = ptr(ma)
        keep.append(ma)
    dropout_p = float(dropout_p)
    if dropout_p > 0 and dropout_seed is None:
        # as PyTorch draws from its generator: numpy's global one
        # (np.random.seed makes it reproducible)
        dropout_seed = int(np.random.randint(0, 2**62, dtype=np.int64))
    d.dropout_p = dropout_p
    d.dropout_seed = int(dropout_seed or 0) & (2**64 - 1)
    d.dropout_offset = int(dropout_offset) & (2**64 - 1)
    probs = lse = None
    if return_probs:
        probs = np.empty(bs + (H, L, S), dtype=np.float32)
        d.want_probs = 1
        d.probs = contiguous_view(probs.shape)
        args.probs = ptr(probs)
    if return_lse:
        lse = np.empty(bs + (H, L), dtype=np.float32)
        d.want_lse = 1
        d.lse = _lib.View(H * L, L, 1)
        args.lse = ptr(lse)
    d.threads = int(threads)
    d.engine = _engine(engine)
    _check(_lib.sdpa(ctypes.byref(d), ctypes.byref(args)), "attn_sdpa")
    del keep
    if orig_nd == 2:
        out = out[0]
        probs = None if probs is None else probs[0]
        lse = None if lse is None else lse[0]
    if as_torch:
        import torch
        out = torch.from_numpy(out.view(np.int16)).view(torch.bfloat16) \
            if as_torch == "bf16" else torch.from_numpy(out)
    if return_probs or return_lse:
        return out, probs, lse
    return out


def dropout_keep_mask(p, seed, offset, b, h, rows, m, i0=0):
    """attn's dropout keep mask of (b, h): rows [i0, i0 + rows) x keys [0, m).

    Returns a bool array (rows, m): True where scaled_dot_product_attention
    (and MultiheadAttention, h the query head) with this dropout_p,
    dropout_seed and dropout_offset keeps the probability, b the flattened
    batch index.
    """
    keep = np.empty((rows, m), dtype=np.uint8)
    _check(_lib.dropout_keep_mask(float(p), int(seed) & (2**64 - 1),
                                  int(offset) & (2**64 - 1), b, h, i0, rows, m,
                                  keep.ctypes.data, m), "attn_dropout_mask_fill")
    return keep.view(np.bool_)

