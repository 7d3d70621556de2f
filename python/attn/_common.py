"""What the SDPA function and the MHA class share: errors and arguments."""

import numpy as np

from . import _lib


class AttnError(ValueError):
    """An attn call returned a status other than ATTN_OK.

    Attributes: status (the attn_status value, an int), status_name
    ("ATTN_ERR_BAD_STRIDE", ...) and function (the C function that
    returned it).  The message holds both names and attn_status_str's text.
    """

    def __init__(self, status, function):
        self.status = int(status)
        if 0 <= self.status < len(_lib.STATUS_NAMES):
            self.status_name = _lib.STATUS_NAMES[self.status]
        else:
            self.status_name = "ATTN_STATUS_%d" % self.status
        self.function = function
        text = _lib.status_str(self.status).decode()
        super().__init__("%s: %s (%s)" % (function, self.status_name, text))


def _check(status, function):
    if status != 0:
        raise AttnError(status, function)


def _array(x, name):
    """np.asarray(x); a torch tensor is read through .detach() (no copy on
    the CPU; bfloat16 as its uint16 bit patterns), and one that requires
    grad where autograd records raises: these functions do not
    differentiate (attn.torch's do)."""
    if type(x).__module__.split(".")[0] != "torch" or not hasattr(x, "detach"):
        return np.asarray(x)
    import torch
    from ._torch_common import to_numpy
    if x.requires_grad and torch.is_grad_enabled():
        raise TypeError("%s requires grad: attn's numpy functions do not differentiate; use "
                        "attn.torch (scaled_dot_product_attention, MultiheadAttention, "
                        "linear_attention) for autograd, or torch.no_grad()" % name)
    return to_numpy(x.detach().cpu())


def _float32(x, name):
    a = _array(x, name)
    if a.dtype.kind not in "fiub":
        raise TypeError("%s: expected a real array, got dtype %s" % (name, a.dtype))
    return a if a.dtype == np.float32 else a.astype(np.float32)


_ALIGN = {"top_left": _lib.ALIGN_TOP_LEFT, "bottom_right": _lib.ALIGN_BOTTOM_RIGHT}


def _align(align):
    try:
        return _ALIGN[align]
    except (KeyError, TypeError):
        raise ValueError("align must be 'top_left' or 'bottom_right', not %r" % (align,))


def _engine(engine):
    try:
        return _lib.ENGINES[engine]
    except (KeyError, TypeError):
        raise ValueError("engine must be 'auto', 'blas' or 'tile', not %r" % (engine,))


def _bound(value, name):
    if value is None:
        return -1
    if isinstance(value, (bool, np.bool_)) or int(value) != value:
        raise TypeError("%s must be an integer or None" % name)
    return int(value)


def _set_window(d, scale, align, window_left, window_right, is_causal):
    """Fill the scale, alignment and window fields shared by the SDPA and MHA
    descriptions; is_causal is window_right = 0 (and conflicts with any other
    window_right)."""
    d.scale = float("nan") if scale is None else float(scale)
    d.align = _align(align)
    d.window_left = _bound(window_left, "window_left")
    d.window_right = _bound(window_right, "window_right")
    if is_causal:
        if window_right is not None and d.window_right != 0:
            raise ValueError("is_causal=True is window_right=0; got window_right=%r" %
                             (window_right,))
        d.window_right = 0


def _lengths(lens, batch_shape, name):
    """Per-batch lengths as a contiguous int32 [B] array."""
    a = np.asarray(lens)
    if a.dtype.kind not in "iu":
        raise TypeError("%s must hold integers, not %s" % (name, a.dtype))
    B = int(np.prod(batch_shape, dtype=np.int64))
    if a.shape != (B,):             # (B,) is the flattened batch
        try:
            a = np.broadcast_to(a, tuple(batch_shape))
        except ValueError:
            raise ValueError("%s: shape %s does not match the batch shape %s" %
                             (name, a.shape, tuple(batch_shape)))
    a = a.reshape(B)
    if a.size and (a.min() < -2**31 or a.max() > 2**31 - 1):
        raise ValueError("%s: values outside int32" % name)
    return np.ascontiguousarray(a, dtype=np.int32)


def _sdpa_shapes(qs, ks, vs, enable_gqa):
    """The problem of query, key and value shapes (..., Hq, L, E),
    (..., Hk, S, E), (..., Hv, S, Ev) of equal rank: (batch shape, H, Hkv,
    L, S, E, Ev), the batch dimensions broadcast, Hk and Hv broadcast (equal
    or 1), and query heads H = Hq unless Hq == 1 broadcasts over Hkv
    (without enable_gqa, Hq must equal Hkv or one of them be 1).  Raises
    ValueError naming what does not fit."""
    try:
        bs = tuple(np.broadcast_shapes(tuple(qs[:-3]), tuple(ks[:-3]), tuple(vs[:-3])))
    except ValueError:
        raise ValueError("batch dimensions do not broadcast: query %s, key %s, value %s" %
                         (tuple(qs), tuple(ks), tuple(vs)))
    Hq, L, E = qs[-3:]
    Hk, S, Ek = ks[-3:]
    Hv, Sv, Ev = vs[-3:]
    if Ek != E:
        raise ValueError("query and key must have the same last dimension (%d != %d)" % (E, Ek))
    if Sv != S:
        raise ValueError("key and value must have the same length (%d != %d)" % (S, Sv))
    if Hk != Hv and 1 not in (Hk, Hv):
        raise ValueError("key and value heads differ (%d != %d)" % (Hk, Hv))
    Hkv = max(Hk, Hv)
    if enable_gqa or Hq == Hkv or Hkv == 1:
        H = Hq
    elif Hq == 1:
        H = Hkv
    else:
        raise ValueError("query heads (%d) and key/value heads (%d) do not broadcast; "
                         "pass enable_gqa=True for grouped-query attention" % (Hq, Hkv))
    return bs, H, Hkv, L, S, E, Ev
