"""Plans made once per description and kept (a small cache per thread).

attn's plans (attn_sdpa_plan_create and its kin) validate a description
and size the workspace; executing one is the call itself.  The module
keys each plan by the bytes of its description (a ctypes struct: sizes,
views and options, no pointers), so a call whose shapes and options were
seen before runs the kept plan: one attn_*_execute, no plan creation.
Each thread has its own cache (a plan's workspace is in use during a
call, and ctypes releases the GIL), of at most CAPACITY plans, the least
recently used dropped first.  A workspace up to WORKSPACE_KEEP bytes is
kept with its plan; a larger one is allocated by attn inside each call.
"""

import collections
import ctypes
import threading

import numpy as np

from . import _lib
from ._common import _check

CAPACITY = 64
WORKSPACE_KEEP = 16 << 20

# kind: (create, destroy, workspace size, name of create for errors)
_KINDS = {
    "sdpa": (_lib.sdpa_plan_create, _lib.sdpa_plan_destroy, _lib.sdpa_workspace_size,
             "attn_sdpa_plan_create"),
    "sdpa_bwd": (_lib.sdpa_bwd_plan_create, _lib.sdpa_bwd_plan_destroy,
                 _lib.sdpa_bwd_workspace_size, "attn_sdpa_bwd_plan_create"),
    "mha": (_lib.mha_plan_create, _lib.mha_plan_destroy, _lib.mha_workspace_size,
            "attn_mha_plan_create"),
}

_tls = threading.local()


class Plan:
    """A plan handle, its workspace (or NULL: allocated inside each call)
    and, for MHA plans, the training sizes (filled on first use)."""

    __slots__ = ("handle", "_destroy", "_buffer", "ws", "ws_bytes", "train")

    def __init__(self, handle, destroy, ws_bytes):
        self.handle = handle
        self._destroy = destroy
        self.train = None
        self._buffer = None
        self.ws, self.ws_bytes = None, 0
        if 0 < ws_bytes <= WORKSPACE_KEEP:
            self._buffer, self.ws = aligned_buffer(ws_bytes)
            self.ws_bytes = ws_bytes

    def __del__(self):
        if self.handle:
            try:
                self._destroy(self.handle)
            except Exception:       # interpreter shutdown
                pass
            self.handle = None


def aligned_buffer(nbytes, align=64):
    """(numpy buffer, address aligned to align) of at least nbytes bytes."""
    buf = np.empty(nbytes + align, dtype=np.uint8)
    addr = buf.ctypes.data
    return buf, addr + (-addr) % align


def get(kind, desc):
    """The plan of desc (a ctypes description of kind 'sdpa', 'sdpa_bwd' or
    'mha'), made now or kept from an earlier call.  Raises AttnError as
    plan creation does."""
    cache = getattr(_tls, "cache", None)
    if cache is None:
        cache = _tls.cache = collections.OrderedDict()
    key = (kind, bytes(desc))
    plan = cache.get(key)
    if plan is not None:
        cache.move_to_end(key)
        return plan
    create, destroy, size, name = _KINDS[kind]
    handle = ctypes.c_void_p()
    _check(create(ctypes.byref(handle), ctypes.byref(desc)), name)
    n = ctypes.c_size_t()
    status = size(handle, ctypes.byref(n))
    if status != 0:
        destroy(handle)
        _check(status, name.replace("plan_create", "workspace_size"))
    plan = Plan(handle.value, destroy, n.value)
    cache[key] = plan
    while len(cache) > CAPACITY:
        cache.popitem(last=False)
    return plan


def clear():
    """Drop this thread's kept plans (their memory is freed)."""
    cache = getattr(_tls, "cache", None)
    if cache is not None:
        cache.clear()


def cached():
    """How many plans this thread keeps."""
    cache = getattr(_tls, "cache", None)
    return 0 if cache is None else len(cache)
