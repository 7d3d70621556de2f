"""Decoding: a KV cache (attn_kv_append), attention over it (attn_sdpa's
decode path, F32/F16/BF16/Q8_0/Q4_0 storage, contiguous or paged), the merge
of partial results (attn_partials_merge), and the storage conversions
(attn_quantize, attn_dequantize, attn_dtype_bytes).
"""

import collections
import ctypes

import numpy as np

from . import _lib
from ._common import AttnError, _check, _engine, _float32, _lengths, _set_window
from ._views import as_view, contiguous_view, ptr

__all__ = ["KVCache", "decode", "merge_partials", "quantize", "dequantize",
           "storage_bytes", "STORAGE_TYPES"]

#: Storage types of a KV cache: attn_dtype value and the numpy dtype of the
#: storage array (raw bytes for the block types).
STORAGE_TYPES = {
    "f32": (_lib.DTYPE_F32, np.float32),
    "f16": (_lib.DTYPE_F16, np.float16),
    "bf16": (_lib.DTYPE_BF16, np.uint16),
    "q8_0": (_lib.DTYPE_Q8_0, np.uint8),
    "q4_0": (_lib.DTYPE_Q4_0, np.uint8),
}


def _stype(name, what="dtype"):
    try:
        return STORAGE_TYPES[name]
    except (KeyError, TypeError):
        raise ValueError("%s must be one of %s, not %r" %
                         (what, ", ".join(repr(k) for k in STORAGE_TYPES), name))


def storage_bytes(dtype, n):
    """Bytes of n values stored as dtype (attn_dtype_bytes)."""
    ty, _ = _stype(dtype)
    b = ctypes.c_size_t()
    _check(_lib.dtype_bytes(ty, int(n), ctypes.byref(b)), "attn_dtype_bytes")
    return b.value


def _new_storage(dtype, n):
    ty, npt = _stype(dtype)
    nbytes = storage_bytes(dtype, n)
    return np.zeros(nbytes // np.dtype(npt).itemsize, dtype=npt)


def quantize(x, dtype):
    """x (any shape, rounded to float32 first) in the storage of dtype
    (attn_quantize): a float32 copy ('f32'), float16 ('f16'), uint16 bit
    patterns ('bf16') of x's shape, or the flat uint8 blocks of 'q8_0' /
    'q4_0' (34 / 18 bytes per 32 values, ggml's layout, x.size a multiple
    of 32)."""
    ty, npt = _stype(dtype)
    a = np.ascontiguousarray(x, dtype=np.float32)
    out = _new_storage(dtype, a.size)
    _check(_lib.quantize(ty, ptr(a), ptr(out), a.size), "attn_quantize")
    return out if npt == np.uint8 else out.reshape(a.shape)


def dequantize(data, dtype, shape=None):
    """float32 values of stored data (attn_dequantize; exact).  shape: of
    the result; None = data's shape for 'f32'/'f16'/'bf16', and every value
    the bytes hold (flat) for 'q8_0' / 'q4_0'."""
    ty, npt = _stype(dtype)
    a = np.ascontiguousarray(data)
    if a.dtype != npt:
        if npt == np.uint8:
            a = a.view(np.uint8).reshape(-1)
        else:
            raise TypeError("dequantize: %s data must be %s, not %s" %
                            (dtype, np.dtype(npt).name, a.dtype))
    if shape is None:
        if npt == np.uint8:
            per = 34 if dtype == "q8_0" else 18
            if a.size % per:
                raise ValueError("dequantize: %d bytes are not whole %s blocks" %
                                 (a.size, dtype))
            shape = (a.size // per * 32,)
        else:
            shape = a.shape
    shape = tuple(int(s) for s in np.atleast_1d(shape)) if np.ndim(shape) else (int(shape),)
    n = int(np.prod(shape, dtype=np.int64))
    need = storage_bytes(dtype, n)
    if a.nbytes < need:
        raise ValueError("dequantize: %d values of %s need %d bytes, data has %d" %
                         (n, dtype, need, a.nbytes))
    out = np.empty(shape, dtype=np.float32)
    _check(_lib.dequantize(ty, ptr(a), ptr(out), n), "attn_dequantize")
    return out


def _int(x, name, minimum=1):
    if isinstance(x, (bool, np.bool_)) or int(x) != x:
        raise TypeError("%s must be an integer, not %r" % (name, x))
    x = int(x)
    if x < minimum:
        raise ValueError("%s must be >= %d, got %d" % (name, minimum, x))
    return x


class KVCache:
    """A KV cache for decoding: K and V of `batch` sequences, `kv_heads`
    heads, stored as attn reads them (attn_kv_append writes it, decode()
    reads it).

    KVCache(batch, kv_heads, head_dim, max_len=None, *, v_dim=None,
            dtype="f32", k_dtype=None, v_dtype=None, block_size=0,
            num_blocks=None, block_table=None)

    head_dim, v_dim: K's and V's row lengths (v_dim defaults to head_dim).
    max_len: the longest sequence the cache holds (its kv_len).
    dtype, or k_dtype / v_dtype per tensor: 'f32', 'f16', 'bf16', 'q8_0' or
      'q4_0' (ggml's 32-value blocks: the row length must be a multiple of
      32).  Appended rows are rounded / quantized as attn_quantize does.
    block_size > 0 makes the cache paged (vLLM's layout): K and V live in
      pools of num_blocks blocks of [kv_heads][block_size][dim], and
      sequence b's token j is row j % block_size of block
      block_table[b, j // block_size].  Without block_table the class owns
      the table: it starts at -1 (no block), append() takes free blocks
      for the new tokens (lowest free first) and reset() gives a
      sequence's blocks back; num_blocks then defaults to what batch
      sequences of max_len need.  With block_table (int32 (batch,
      max_blocks), the caller's, used in place and never changed by the
      class) max_len defaults to max_blocks * block_size and every entry a
      token needs must name a block in [0, num_blocks) (else AttnError
      ATTN_ERR_BAD_BLOCK_TABLE).

    Attributes: k_data, v_data (the storage, as attn reads it: float32,
    float16 or uint16 (bf16) arrays (batch, kv_heads, max_len, dim) or
    (num_blocks, kv_heads, block_size, dim) when paged; flat uint8 blocks
    for q8_0 / q4_0), block_table (paged), lengths (a copy of the tokens
    held per sequence).

    Errors attn reports (a head dim that is no multiple of 32 for the
    block types, bad paging fields: at construction; a full cache, a bad
    block table: at append / decode) raise AttnError naming the status.
    """

    def __init__(self, batch, kv_heads, head_dim, max_len=None, *, v_dim=None, dtype="f32",
                 k_dtype=None, v_dtype=None, block_size=0, num_blocks=None,
                 block_table=None):
        B = _int(batch, "batch")
        Hkv = _int(kv_heads, "kv_heads")
        dk = _int(head_dim, "head_dim")
        dv = dk if v_dim is None else _int(v_dim, "v_dim")
        self.k_dtype = dtype if k_dtype is None else k_dtype
        self.v_dtype = dtype if v_dtype is None else v_dtype
        kty, _ = _stype(self.k_dtype, "k_dtype")
        vty, _ = _stype(self.v_dtype, "v_dtype")
        bs = _int(block_size, "block_size", 0)
        self.batch, self.kv_heads, self.head_dim, self.v_dim = B, Hkv, dk, dv
        self.block_size = bs
        self.paged = bs > 0
        self._managed = False
        if self.paged:
            if block_table is not None:
                bt = np.asarray(block_table)
                if bt.dtype != np.int32 or bt.ndim != 2 or bt.shape[0] != B or \
                        not bt.flags.c_contiguous:
                    raise ValueError("block_table must be a C-contiguous int32 array "
                                     "(batch=%d, max_blocks), got %s %s" %
                                     (B, bt.dtype, bt.shape))
                max_blocks = bt.shape[1]
                if max_len is None:
                    max_len = max_blocks * bs
                max_len = _int(max_len, "max_len")
            else:
                if max_len is None:
                    raise TypeError("KVCache: max_len is required without a block_table")
                max_len = _int(max_len, "max_len")
                max_blocks = -(-max_len // bs)
                bt = np.full((B, max_blocks), -1, dtype=np.int32)
                self._managed = True
            if num_blocks is None:
                if not self._managed:
                    raise TypeError("KVCache: num_blocks is required with a block_table")
                num_blocks = B * max_blocks
            nb = _int(num_blocks, "num_blocks")
            self.num_blocks, self.max_blocks = nb, max_blocks
            self.block_table = bt
            self._free = collections.deque(range(nb)) if self._managed else None
            kshape, vshape = (nb, Hkv, bs, dk), (nb, Hkv, bs, dv)
            kview = vview = None
        else:
            if block_table is not None or num_blocks is not None:
                raise ValueError("block_table and num_blocks need block_size > 0")
            if max_len is None:
                raise TypeError("KVCache: max_len is required")
            max_len = _int(max_len, "max_len")
            self.num_blocks = self.max_blocks = 0
            self.block_table = None
            self._free = None
            kshape, vshape = (B, Hkv, max_len, dk), (B, Hkv, max_len, dv)
        self.max_len = max_len
        d = _lib.SdpaDesc()
        _check(_lib.sdpa_desc_init(ctypes.byref(d)), "attn_sdpa_desc_init")
        d.batch, d.kv_heads, d.q_heads = B, Hkv, Hkv
        d.q_len, d.kv_len, d.qk_dim, d.v_dim = 1, max_len, dk, dv
        kview, vview = contiguous_view(kshape), contiguous_view(vshape)
        d.k, d.v = kview, vview
        d.k_type, d.v_type = kty, vty
        if self.paged:
            d.kv_block_size, d.kv_num_blocks, d.kv_max_blocks = bs, self.num_blocks, \
                self.max_blocks
        d.use_kv_lens = 1
        self._desc = d
        # Let attn check the cache's fields (types against the head dims,
        # paging) now rather than at the first append.
        probe = _lib.SdpaDesc.from_buffer_copy(d)
        probe.q = _lib.View(Hkv * dk, dk, dk)
        probe.o = _lib.View(Hkv * dv, dv, dv)
        h = ctypes.c_void_p()
        _check(_lib.sdpa_plan_create(ctypes.byref(h), ctypes.byref(probe)),
               "attn_sdpa_plan_create (KVCache)")
        _lib.sdpa_plan_destroy(h)
        self.k_data = self._storage(self.k_dtype, kshape)
        self.v_data = self._storage(self.v_dtype, vshape)
        self._lens = np.zeros(B, dtype=np.int32)

    @staticmethod
    def _storage(dtype, shape):
        n = int(np.prod(shape, dtype=np.int64))
        a = _new_storage(dtype, n)
        return a if a.dtype == np.uint8 else a.reshape(shape)

    def __repr__(self):
        s = "KVCache(batch=%d, kv_heads=%d, head_dim=%d, v_dim=%d, max_len=%d, k=%s, v=%s" % (
            self.batch, self.kv_heads, self.head_dim, self.v_dim, self.max_len,
            self.k_dtype, self.v_dtype)
        if self.paged:
            s += ", block_size=%d, num_blocks=%d" % (self.block_size, self.num_blocks)
        return s + ", lengths=%s)" % self._lens.tolist()

    @property
    def lengths(self):
        """Tokens held by each sequence (a copy, int32 (batch,))."""
        return self._lens.copy()

    @property
    def free_blocks(self):
        """Blocks not in use (a class-managed paged cache), else None."""
        return None if self._free is None else len(self._free)

    def _allocate(self, new):
        """Give every sequence the blocks its new tokens need (managed
        tables); returns the (b, j) entries set, for a rollback."""
        set_ = []
        bs = self.block_size
        for b in range(self.batch):
            n = int(new[b])
            if n <= 0:
                continue
            lo, hi = int(self._lens[b]), int(self._lens[b]) + n
            if hi > self.max_len:
                continue             # attn reports ATTN_ERR_BAD_LENGTH
            for j in range(lo // bs, -(-hi // bs)):
                if self.block_table[b, j] < 0:
                    if not self._free:
                        self._rollback(set_)
                        raise AttnError(_lib.STATUS_NAMES.index("ATTN_ERR_BAD_BLOCK_TABLE"),
                                        "KVCache.append (all %d blocks of the pool are in "
                                        "use)" % self.num_blocks)
                    self.block_table[b, j] = self._free.popleft()
                    set_.append((b, j))
        return set_

    def _rollback(self, entries):
        for b, j in reversed(entries):
            self._free.appendleft(int(self.block_table[b, j]))
            self.block_table[b, j] = -1

    def append(self, k_new, v_new, new_lens=None):
        """Append rows to every sequence (attn_kv_append).

        k_new (batch, kv_heads, t, head_dim), v_new (batch, kv_heads, t,
        v_dim), real arrays (rounded to float32, then to the storage type).
        new_lens: integers (batch,) in [0, t], how many rows of each
        sequence to append (None: all t).  Sequence b's rows r <
        new_lens[b] become its tokens lengths[b] + r.  Nothing is written
        (and no block taken) when attn rejects the call: lengths past
        max_len raise AttnError ATTN_ERR_BAD_LENGTH.
        """
        k = _float32(k_new, "k_new")
        v = _float32(v_new, "v_new")
        B, Hkv = self.batch, self.kv_heads
        if k.ndim != 4 or k.shape[:2] != (B, Hkv) or k.shape[3] != self.head_dim:
            raise ValueError("k_new: expected (batch=%d, kv_heads=%d, t, %d), got %s" %
                             (B, Hkv, self.head_dim, k.shape))
        t = k.shape[2]
        if v.shape != (B, Hkv, t, self.v_dim):
            raise ValueError("v_new: expected %s, got %s" % ((B, Hkv, t, self.v_dim), v.shape))
        if t == 0:
            return
        ka, kview = as_view(k, k.shape, np.float32, min_seq=self.head_dim)
        va, vview = as_view(v, v.shape, np.float32, min_seq=self.v_dim)
        args = _lib.KvAppendArgs()
        _check(_lib.kv_append_args_init(ctypes.byref(args)), "attn_kv_append_args_init")
        args.k_cache, args.v_cache = ptr(self.k_data), ptr(self.v_data)
        args.kv_lens = ptr(self._lens)
        nl = None
        if new_lens is not None:
            nl = _lengths(new_lens, (B,), "new_lens")
            args.new_lens = ptr(nl)
        args.t = t
        args.k_new, args.v_new = ptr(ka), ptr(va)
        args.k_new_view, args.v_new_view = kview, vview
        entries = []
        if self.paged:
            if self._managed:
                entries = self._allocate(np.full(B, t) if nl is None else nl)
            args.block_table = ptr(self.block_table)
        status = _lib.kv_append(ctypes.byref(self._desc), ctypes.byref(args))
        if status != 0 and entries:
            self._rollback(entries)
        _check(status, "attn_kv_append")

    def reset(self, seqs=None):
        """Empty the sequences seqs (an index or a list; None: all); a
        class-managed paged cache frees their blocks."""
        idx = range(self.batch) if seqs is None else np.atleast_1d(seqs).tolist()
        for b in idx:
            self._lens[b] = 0
            if self._managed:
                row = self.block_table[b]
                for j in range(self.max_blocks):
                    if row[j] >= 0:
                        self._free.append(int(row[j]))
                        row[j] = -1
        if self._managed:
            self._free = collections.deque(sorted(self._free))

    def _dense(self, data, dtype, dim):
        """float32 (batch, kv_heads, T, dim) of the held tokens, T the
        longest length, rows past a sequence's length 0."""
        B, Hkv = self.batch, self.kv_heads
        if self.paged:
            pool = dequantize(data, dtype, (self.num_blocks, Hkv, self.block_size, dim))
        else:
            pool = dequantize(data, dtype, (B, Hkv, self.max_len, dim))
        T = int(self._lens.max()) if B else 0
        out = np.zeros((B, Hkv, T, dim), np.float32)
        bs = self.block_size
        for b in range(B):
            n = int(self._lens[b])
            if not self.paged:
                out[b, :, :n] = pool[b, :, :n]
                continue
            for j in range(-(-n // bs)):
                blk = int(self.block_table[b, j])
                if not 0 <= blk < self.num_blocks:
                    raise AttnError(_lib.STATUS_NAMES.index("ATTN_ERR_BAD_BLOCK_TABLE"),
                                    "KVCache.to_float (block_table[%d, %d] = %d)" %
                                    (b, j, blk))
                r = min(bs, n - j * bs)
                out[b, :, j * bs:j * bs + r] = pool[blk, :, :r]
        return out

    def to_float(self):
        """(K, V): the held tokens de-quantized (attn_dequantize, exact),
        float32 (batch, kv_heads, T, dim) with T = max(lengths); rows past
        a sequence's length are 0."""
        return (self._dense(self.k_data, self.k_dtype, self.head_dim),
                self._dense(self.v_data, self.v_dtype, self.v_dim))


def decode(query, cache, *, scale=None, is_causal=False, align="bottom_right",
           window_left=None, window_right=None, q_lens=None, kv_lens=None,
           return_lse=False, threads=0, engine="auto", int8_scores=False):
    """Attention of a few queries over a KVCache (attn_sdpa with the cache's
    storage types and paging; q_len <= 16 takes attn's decode kernels).

    query: (batch, Hq, L, head_dim), real (float32 in the computation), Hq
      a multiple of the cache's kv_heads (query head h reads kv head
      h // (Hq // kv_heads)).
    Keys: tokens [0, cache.lengths[b]) of sequence b (kv_lens overrides:
      integers (batch,) <= max_len, e.g. a prefix).
    scale: of Q K^T (None: 1 / sqrt(head_dim)).
    is_causal, window_left, window_right, align: the window of
      scaled_dot_product_attention; align defaults to 'bottom_right' here
      (d(i) = i + len_b - L_b: the queries are the last L tokens, as a KV
      cache needs).  q_lens: per-batch query lengths (rows past are 0).
    return_lse: also return the logsumexp (batch, Hq, L) (-inf for a row
      with no visible key), what merge_partials takes.
    int8_scores: Q K^T in integers against a q8_0 or q4_0 K (desc.qk_int8,
      attn.h "Integer scores": each 32-value block of Q rounded to int8,
      as ggml's CPU kernels do; faster on CPUs with AVX512_VNNI, at an
      accuracy cost attn.h bounds); other K types raise ValueError.
    Returns the output (batch, Hq, L, v_dim) float32, or (output, lse).
    """
    if not isinstance(cache, KVCache):
        raise TypeError("decode: cache must be a KVCache, not %s" % type(cache).__name__)
    q = _float32(query, "query")
    B, dk, dv = cache.batch, cache.head_dim, cache.v_dim
    if q.ndim != 4 or q.shape[0] != B or q.shape[3] != dk:
        raise ValueError("query: expected (batch=%d, Hq, L, %d), got %s" % (B, dk, q.shape))
    Hq, L = q.shape[1], q.shape[2]
    qa, qv = as_view(q, q.shape, np.float32, min_seq=dk)
    d = _lib.SdpaDesc.from_buffer_copy(cache._desc)
    d.q_heads, d.q_len = Hq, L
    d.q = qv
    out = np.empty((B, Hq, L, dv), np.float32)
    d.o = contiguous_view(out.shape)
    _set_window(d, scale, align, window_left, window_right, is_causal)
    args = _lib.SdpaArgs()
    ktype, vtype = cache.k_dtype, cache.v_dtype
    args.q, args.o = ptr(qa), ptr(out)
    kp, vp = ptr(cache.k_data), ptr(cache.v_data)
    if ktype == "f32":
        args.k = kp
    elif ktype in ("f16", "bf16"):
        args.k16 = kp
    else:
        args.kq = kp
    if vtype == "f32":
        args.v = vp
    elif vtype in ("f16", "bf16"):
        args.v16 = vp
    else:
        args.vq = vp
    if kv_lens is None:
        kl = cache._lens
    else:
        kl = _lengths(kv_lens, (B,), "kv_lens")
    args.kv_lens = ptr(kl)
    ql = None
    if q_lens is not None:
        ql = _lengths(q_lens, (B,), "q_lens")
        d.use_q_lens = 1
        args.q_lens = ptr(ql)
    if cache.paged:
        args.block_table = ptr(cache.block_table)
    lse = None
    if return_lse:
        lse = np.empty((B, Hq, L), np.float32)
        d.want_lse = 1
        d.lse = _lib.View(Hq * L, L, 1)
        args.lse = ptr(lse)
    d.threads = int(threads)
    d.engine = _engine(engine)
    if int8_scores:
        if ktype not in ("q8_0", "q4_0"):
            raise ValueError("int8_scores needs a q8_0 or q4_0 K, not %s" % ktype)
        d.qk_int8 = 1
    _check(_lib.sdpa(ctypes.byref(d), ctypes.byref(args)), "attn_sdpa")
    del qa, kl, ql
    return (out, lse) if return_lse else out


def merge_partials(outputs, lses):
    """Merge attention computed over disjoint sets of keys
    (attn_partials_merge): lse = log sum_p exp(lse_p),
    O = sum_p exp(lse_p - lse) O_p.

    outputs: a sequence of P arrays (..., dim), or one array (P, ..., dim);
    lses: P arrays (...) or one array (P, ...), the logsumexp of each part
    (decode(..., return_lse=True) or scaled_dot_product_attention's).
    A part with lse -inf (no visible key) contributes nothing.  Returns
    (O float32 (..., dim), lse float32 (...)).
    """
    if isinstance(outputs, (list, tuple)):
        o = np.stack([_float32(x, "outputs") for x in outputs])
    else:
        o = _float32(outputs, "outputs")
    if isinstance(lses, (list, tuple)):
        l_ = np.stack([_float32(x, "lses") for x in lses])
    else:
        l_ = _float32(lses, "lses")
    if o.ndim < 2:
        raise ValueError("outputs: expected (parts, ..., dim), got shape %s" % (o.shape,))
    if l_.shape != o.shape[:-1]:
        raise ValueError("lses: expected shape %s (the outputs' without dim), got %s" %
                         (o.shape[:-1], l_.shape))
    o = np.ascontiguousarray(o)
    l_ = np.ascontiguousarray(l_)
    P, dim = o.shape[0], o.shape[-1]
    rows_shape = o.shape[1:-1]
    rows = int(np.prod(rows_shape, dtype=np.int64))
    out = np.empty(rows_shape + (dim,), np.float32)
    lse = np.empty(rows_shape, np.float32)
    a = _lib.PartialsMergeArgs()
    _check(_lib.partials_merge_args_init(ctypes.byref(a)), "attn_partials_merge_args_init")
    a.parts, a.rows, a.dim = P, rows, dim
    a.o_parts, a.o_part_stride, a.o_row_stride = ptr(o), rows * dim, dim
    a.lse_parts, a.lse_part_stride, a.lse_row_stride = ptr(l_), rows, 1
    a.o, a.o_out_stride = ptr(out), dim
    a.lse_out, a.lse_out_stride = ptr(lse), 1
    _check(_lib.partials_merge(ctypes.byref(a)), "attn_partials_merge")
    return out, lse
