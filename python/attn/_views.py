"""numpy arrays as attn views, without a copy where attn's view rules allow.

An attn view is a pointer plus element strides over [batch][head][seq] with
a dim stride of 1.  A numpy array of shape (*batch, H, S, D) is such a view
when its dtype is already the one attn reads, it is aligned, its strides are
non-negative multiples of the item size, the last one is the item size, and
its batch dimensions collapse into one stride (row-major among themselves).
Anything else is converted once: np.ascontiguousarray of the broadcast array.
"""

import numpy as np

from . import _lib


def flat_stride(shape, strides, allow_zero):
    """The one stride that walks the flattened dimensions, or None.

    Dimensions of size 1 do not count.  With allow_zero (broadcast fields)
    a run of stride-0 dimensions flattens to 0.
    """
    dims = [(n, s) for n, s in zip(shape, strides) if n != 1]
    if not dims:
        return 0
    if allow_zero and all(s == 0 for _, s in dims):
        return 0
    for (_, s0), (n1, s1) in zip(dims, dims[1:]):
        if s0 != s1 * n1:
            return None
    last = dims[-1][1]
    return last if last > 0 else None


def view_of(a, allow_zero=False, min_seq=None):
    """attn_view for an array of shape (*batch, H, S, D), or None.

    allow_zero: batch, head and seq strides of 0 are fine (masks and bias);
    otherwise a stride may be 0 only for a dimension of size 1.
    min_seq: the least seq stride attn accepts (the row length for Q, K, V).
    """
    if not a.flags.aligned:
        return None
    item = a.itemsize
    if any(s % item for s in a.strides):
        return None
    return view_from(a.shape, [s // item for s in a.strides], allow_zero, min_seq)


def view_from(shape, st, allow_zero=False, min_seq=None):
    """view_of for a tensor of shape (*batch, H, S, D) with element strides
    st (numpy's divided by the item size, or torch's stride()), or None."""
    if any(s < 0 for s in st):
        return None
    H, S, D = shape[-3:]
    if D > 1 and st[-1] != 1:
        return None
    b = flat_stride(shape[:-3], st[:-3], allow_zero)
    if b is None:
        return None
    h, s = st[-3], st[-2]
    if H == 1:
        h = 0
    elif h == 0 and not allow_zero:
        return None
    if S == 1:
        s = min_seq if min_seq is not None else 0
    elif s == 0 and not allow_zero:
        return None
    if min_seq is not None and s < min_seq:
        return None
    return _lib.View(b, h, s)


def contiguous_view(shape):
    """The attn_view of a C-contiguous (*batch, H, S, D) array."""
    H, S, D = shape[-3:]
    return _lib.View(H * S * D, S * D, D)


def as_view(a, shape, dtype, allow_zero=False, min_seq=None):
    """(array, view) for a broadcast to shape in dtype, copying only if needed.

    The returned array must stay alive for as long as attn reads it.
    """
    a = np.asarray(a)
    if a.dtype != dtype:
        a = a.astype(dtype)
    a = np.broadcast_to(a, shape)
    v = view_of(a, allow_zero, min_seq)
    if v is None:
        # A fresh C-contiguous, aligned array (ascontiguousarray would keep
        # an unaligned one).
        a = np.array(a, order="C", copy=True)
        v = contiguous_view(a.shape)
    return a, v


def ptr(a):
    """The address of a's first element (None for None)."""
    return None if a is None else a.ctypes.data
