"""MultiheadAttention: torch.nn.MultiheadAttention's forward over attn_mha."""

import collections
import ctypes
import math

import numpy as np

from . import _lib
from ._common import _check, _engine, _float32, _lengths, _set_window
from ._views import as_view, ptr


class _Linear:
    """out_proj: .weight (E, E) and .bias (E,) or None, as nn.Linear's."""

    def __init__(self, weight, bias):
        self.weight = weight
        self.bias = bias

    def __repr__(self):
        return "out_proj(weight %s, bias %s)" % (
            self.weight.shape, None if self.bias is None else self.bias.shape)


def _rows(a, F, dtype=np.float32):
    """(array, row stride) for a (N, T, F) array of dtype (float32, or the
    16-bit storage: float16, uint16 for bf16).

    attn_mha reads row t of batch b at (b * T + t) * stride: a view with a
    unit inner stride and a batch stride of T row strides passes as it is,
    anything else is copied once.
    """
    N, T, _ = a.shape
    if a.dtype != dtype:
        a = a.astype(dtype)
    esz = a.itemsize
    ok = a.flags.aligned and all(s >= 0 and s % esz == 0 for s in a.strides)
    if ok:
        st = [s // esz for s in a.strides]
        r = st[1] if T > 1 else (st[0] if N > 1 else F)
        ok = (F == 1 or st[2] == 1) and r >= F and (N == 1 or st[0] == T * r)
    if not ok:
        return np.ascontiguousarray(a), F
    return a, r


def _param(value, shape, name):
    a = value
    if hasattr(a, "detach"):               # a torch tensor
        a = a.detach().cpu().numpy()
    a = np.asarray(a)
    if a.shape != tuple(shape):
        raise ValueError("%s: expected shape %s, got %s" % (name, tuple(shape), a.shape))
    return np.ascontiguousarray(a, dtype=np.float32)


class MultiheadAttention:
    """torch.nn.MultiheadAttention's forward, computed by attn.

    MultiheadAttention(embed_dim, num_heads, dropout=0.0, bias=True,
                       add_bias_kv=False, add_zero_attn=False, kdim=None,
                       vdim=None, batch_first=False, device=None, dtype=None,
                       *, num_kv_heads=None, seed=None, threads=0, engine="auto")

    The arguments of PyTorch mean the same here.  Not supported (they raise
    NotImplementedError): add_bias_kv=True, add_zero_attn=True, a device
    other than the CPU, a dtype other than float32.  Extras: num_kv_heads
    (grouped-query attention: the key and value projections have
    num_kv_heads * head_dim rows; needs separate projection weights),
    seed (initial parameters and the dropout stream), threads (OpenMP
    threads, 0 = all), engine ('auto', 'blas' or 'tile': what runs the
    projections and the attention; see scaled_dot_product_attention).

    Parameters (numpy float32 arrays, as attributes and in state_dict()):
      kdim == vdim == embed_dim (and no GQA): in_proj_weight (3E, E);
      otherwise q_proj_weight (E, E), k_proj_weight (Hkv*dh, kdim),
      v_proj_weight (Hkv*dh, vdim);
      in_proj_bias (E + 2*Hkv*dh,) = (3E,) without GQA, None if bias=False;
      out_proj.weight (E, E), out_proj.bias (E,) or None.
    They are initialized as PyTorch does (xavier_uniform_ projections,
    zero biases, out_proj.weight uniform in +-1/sqrt(E)), from a numpy
    generator seeded by seed; load_state_dict() takes PyTorch's.

    Like an nn.Module the layer starts in training mode: dropout > 0 then
    drops attention weights (attn's Philox stream: the seed drawn at
    construction, and a call counter as the offset, unless forward gets
    dropout_seed / dropout_offset).  eval() turns dropout off.
    """

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False,
                 add_zero_attn=False, kdim=None, vdim=None, batch_first=False,
                 device=None, dtype=None, *, num_kv_heads=None, seed=None, threads=0,
                 engine="auto"):
        if add_bias_kv:
            raise NotImplementedError("attn.MultiheadAttention: add_bias_kv=True is not "
                                      "supported (attn_mha has no bias_k / bias_v)")
        if add_zero_attn:
            raise NotImplementedError("attn.MultiheadAttention: add_zero_attn=True is not "
                                      "supported")
        if device is not None and str(device) != "cpu":
            raise NotImplementedError("attn.MultiheadAttention runs on the CPU only "
                                      "(device=%r)" % (device,))
        if dtype is not None and str(dtype) not in ("float32", "torch.float32") and \
                dtype is not np.float32:
            raise NotImplementedError("attn.MultiheadAttention computes in float32 only "
                                      "(dtype=%r)" % (dtype,))
        E, H = int(embed_dim), int(num_heads)
        if E <= 0 or H <= 0:
            raise ValueError("embed_dim and num_heads must be positive (%d, %d)" % (E, H))
        if E % H:
            raise ValueError("embed_dim (%d) must be divisible by num_heads (%d)" % (E, H))
        Hkv = H if num_kv_heads is None else int(num_kv_heads)
        if Hkv <= 0 or H % Hkv:
            raise ValueError("num_heads (%d) must be a multiple of num_kv_heads (%d)" % (H, Hkv))
        self.embed_dim = E
        self.num_heads = H
        self.num_kv_heads = Hkv
        self.head_dim = E // H
        self.kdim = E if kdim is None else int(kdim)
        self.vdim = E if vdim is None else int(vdim)
        self._qkv_same_embed_dim = self.kdim == E and self.vdim == E and Hkv == H
        self.dropout = float(dropout)
        if not 0.0 <= self.dropout <= 1.0:
            raise ValueError("dropout must be in [0, 1], got %r" % (dropout,))
        self.batch_first = bool(batch_first)
        self.threads = int(threads)
        self.engine = engine
        _engine(engine)   # a bad name raises here, not at the first call
        self.training = True

        rng = np.random.default_rng(seed)
        kv_rows = Hkv * self.head_dim

        def xavier(rows, cols):
            bound = math.sqrt(6.0 / (rows + cols))
            return rng.uniform(-bound, bound, (rows, cols)).astype(np.float32)

        if self._qkv_same_embed_dim:
            self.in_proj_weight = xavier(3 * E, E)
            self.q_proj_weight = self.k_proj_weight = self.v_proj_weight = None
        else:
            self.in_proj_weight = None
            self.q_proj_weight = xavier(E, E)
            self.k_proj_weight = xavier(kv_rows, self.kdim)
            self.v_proj_weight = xavier(kv_rows, self.vdim)
        self.in_proj_bias = np.zeros(E + 2 * kv_rows, np.float32) if bias else None
        bound = 1.0 / math.sqrt(E)
        self.out_proj = _Linear(rng.uniform(-bound, bound, (E, E)).astype(np.float32),
                                np.zeros(E, np.float32) if bias else None)
        self._dropout_seed = int(rng.integers(0, 2**63))
        self._dropout_calls = 0

    # ------------------------------------------------------------ state --
    def _shapes(self):
        """The state_dict's names and shapes, in PyTorch's order."""
        E, kv_rows = self.embed_dim, self.num_kv_heads * self.head_dim
        s = collections.OrderedDict()
        if self._qkv_same_embed_dim:
            s["in_proj_weight"] = (3 * E, E)
        else:
            s["q_proj_weight"] = (E, E)
            s["k_proj_weight"] = (kv_rows, self.kdim)
            s["v_proj_weight"] = (kv_rows, self.vdim)
        if self.in_proj_bias is not None:
            s["in_proj_bias"] = (E + 2 * kv_rows,)
        s["out_proj.weight"] = (E, E)
        if self.out_proj.bias is not None:
            s["out_proj.bias"] = (E,)
        return s

    def _get(self, name):
        if name.startswith("out_proj."):
            return getattr(self.out_proj, name[len("out_proj."):])
        return getattr(self, name)

    def _set(self, name, value):
        if name.startswith("out_proj."):
            setattr(self.out_proj, name[len("out_proj."):], value)
        else:
            setattr(self, name, value)

    def state_dict(self):
        """The parameters by nn.MultiheadAttention's state_dict names.

        An OrderedDict of the arrays themselves (not copies), as PyTorch's
        state_dict shares the parameters' storage.
        """
        return collections.OrderedDict((n, self._get(n)) for n in self._shapes())

    def load_state_dict(self, state_dict, strict=True):
        """Copy parameters in from a state_dict (numpy arrays or CPU tensors).

        The names and shapes must be nn.MultiheadAttention's for this
        configuration (see the class docstring).  strict: missing or
        unexpected names raise KeyError; otherwise they are returned.
        A wrong shape raises ValueError.  Nothing is changed on error.
        Returns (missing_keys, unexpected_keys).
        """
        shapes = self._shapes()
        missing = [n for n in shapes if n not in state_dict]
        unexpected = [n for n in state_dict if n not in shapes]
        if strict and (missing or unexpected):
            raise KeyError("load_state_dict: missing %s, unexpected %s (bias_k, bias_v: "
                           "add_bias_kv is not supported)" % (missing, unexpected))
        new = {n: _param(state_dict[n], shapes[n], n) for n in shapes if n in state_dict}
        for n, a in new.items():
            self._set(n, a)
        return missing, unexpected

    def train(self, mode=True):
        """Training mode (dropout applies) or not; returns self."""
        self.training = bool(mode)
        return self

    def eval(self):
        """Evaluation mode (no dropout); returns self."""
        return self.train(False)

    def __repr__(self):
        return ("MultiheadAttention(embed_dim=%d, num_heads=%d, num_kv_heads=%d, kdim=%d, "
                "vdim=%d, dropout=%g, bias=%s, batch_first=%s)" % (
                    self.embed_dim, self.num_heads, self.num_kv_heads, self.kdim,
                    self.vdim, self.dropout, self.in_proj_bias is not None,
                    self.batch_first))

    # ---------------------------------------------------------- forward --
    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True,
                attn_mask=None, average_attn_weights=True, is_causal=False, *,
                kv_lens=None, q_lens=None, window_left=None, window_right=None,
                align="top_left", scale=None, dropout_seed=None, dropout_offset=None,
                dtype="f32"):
        """Y, weights = MHA(query, key, value), as nn.MultiheadAttention.forward.

        Shapes (batch_first=False): query (L, N, E), key (S, N, kdim), value
        (S, N, vdim) -> output (L, N, E); batch_first=True: (N, L, E), ...;
        unbatched: (L, E), (S, kdim), (S, vdim) -> (L, E).
          key_padding_mask: (N, S) bool (True = ignore the key) or float
            (added to the scores).
          attn_mask: (L, S) or (N * num_heads, L, S); bool True = NOT
            allowed (nn.MultiheadAttention's polarity, the opposite of
            scaled_dot_product_attention's) or float (added).
          need_weights: also return the attention weights, averaged over
            heads (N, L, S) if average_attn_weights else (N, H, L, S);
            after dropout, as PyTorch.
          is_causal: query i sees keys j <= i.  PyTorch takes it as a hint
            that attn_mask is the causal mask; here it applies the causal
            mask itself (attn_mask may be None; if given it applies too).
        attn's extras: kv_lens, q_lens (per-batch lengths, (N,) integers),
        window_left, window_right, align, scale (default 1/sqrt(head_dim)),
        dropout_seed, dropout_offset: as in scaled_dot_product_attention.
        dtype: 'f32', 'f16' or 'bf16': the element type of the layer's
          inputs, output and parameters for this call (attn_mha_desc's
          x_type and w_type): 'f16' takes and returns numpy float16,
          'bf16' bfloat16 bit patterns in uint16 (attn.to_bf16 /
          attn.from_bf16); the float32 parameters are rounded to the type
          for the call.  BF16 runs bfloat16 products with float32
          accumulation; F16 is widened to float32 (docs/TYPES.md).  The
          attention weights stay float32.

        query is key is value (the same array) runs self-attention: one
        projection of the input (a single GEMM with packed weights).
        Returns (output, weights or None).  Rows with no visible key give
        out_proj.bias (PyTorch gives NaN) and weights 0.
        """
        from . import _typed, _DTYPES, to_bf16
        if dtype not in _DTYPES:
            raise ValueError("dtype must be 'f32', 'f16' or 'bf16', not %r" % (dtype,))
        ty, npt = _DTYPES[dtype]
        same = query is key and key is value
        q = _typed(query, dtype, "query")
        k = q if same else _typed(key, dtype, "key")
        v = q if same else _typed(value, dtype, "value")
        if q.ndim not in (2, 3) or k.ndim != q.ndim or v.ndim != q.ndim:
            raise ValueError("query, key and value must all be 3-D (batched) or 2-D "
                             "(unbatched); got %s, %s, %s" % (q.shape, k.shape, v.shape))
        batched = q.ndim == 3
        if not batched:
            q, k, v = q[None], k[None], v[None]
        elif not self.batch_first:
            q, k, v = (a.transpose(1, 0, 2) for a in (q, k, v))
        E, H = self.embed_dim, self.num_heads
        N, L, Eq = q.shape
        Nk, S, kd = k.shape
        Nv, Sv, vd = v.shape
        if Eq != E:
            raise ValueError("query has %d features, embed_dim is %d" % (Eq, E))
        if kd != self.kdim or vd != self.vdim:
            raise ValueError("key / value have %d / %d features, kdim / vdim are %d / %d" %
                             (kd, vd, self.kdim, self.vdim))
        if Nk != N or Nv != N or Sv != S:
            raise ValueError("batch or length of query %s, key %s, value %s do not match" %
                             (q.shape, k.shape, v.shape))
        self_attn = same and self.kdim == E and self.vdim == E

        d = _lib.MhaDesc()
        _check(_lib.mha_desc_init(ctypes.byref(d)), "attn_mha_desc_init")
        d.embed_dim, d.num_heads, d.num_kv_heads = E, H, self.num_kv_heads
        d.kdim, d.vdim = self.kdim, self.vdim
        d.batch, d.q_len, d.kv_len = N, L, S
        d.self_attention = int(self_attn)
        d.packed_in_proj = int(self._qkv_same_embed_dim)
        d.has_bias = int(self.in_proj_bias is not None)
        if (self.out_proj.bias is None) != (self.in_proj_bias is None):
            raise ValueError("in_proj_bias and out_proj.bias must both be set or both None")

        keep = []
        args = _lib.MhaArgs()
        # 16-bit: the buffers through attn_mha_args16 (args.args16)
        a16 = _lib.MhaArgs16() if ty != _lib.DTYPE_F32 else None
        io = a16 if a16 is not None else args
        if a16 is not None:
            d.x_type = d.w_type = ty
            args.args16 = ctypes.addressof(a16)
            keep.append(a16)
        qa, d.x_stride = _rows(q, E, npt)
        io.x = ptr(qa)
        keep.append(qa)
        if not self_attn:
            ka, d.key_stride = _rows(k, self.kdim, npt)
            va, d.value_stride = _rows(v, self.vdim, npt)
            io.key, io.value = ptr(ka), ptr(va)
            keep += [ka, va]
        out = np.empty((N, L, E), dtype=npt)
        d.out_stride = E
        io.out = ptr(out)

        # Masks: bool ones as uint8 masks of the right polarity, float ones
        # added into one bias (attn takes one additive bias).
        bias = None
        if key_padding_mask is not None:
            kpm = np.asarray(key_padding_mask)
            if kpm.shape != ((N, S) if batched else (S,)):
                raise ValueError("key_padding_mask: expected shape %s, got %s" %
                                 ((N, S) if batched else (S,), kpm.shape))
            kpm = kpm.reshape(N, S)
            if kpm.dtype == np.bool_:
                kpm = np.ascontiguousarray(kpm.view(np.uint8))
                d.key_padding_mode = _lib.MASK_DROP_NONZERO
                args.key_padding_mask = ptr(kpm)
                keep.append(kpm)
            elif kpm.dtype.kind == "f":
                bias = kpm.astype(np.float32).reshape(N, 1, 1, S)
            else:
                raise TypeError("key_padding_mask must be bool or floating, not %s" % kpm.dtype)
        if attn_mask is not None:
            am = np.asarray(attn_mask)
            if am.ndim == 2 and am.shape == (L, S):
                am = am.reshape(1, 1, L, S)
            elif am.ndim == 3 and am.shape == ((N * H, L, S) if batched else (H, L, S)):
                am = am.reshape(N, H, L, S)
            else:
                raise ValueError("attn_mask: expected shape (L, S) = %s or %s, got %s" % (
                    (L, S), (N * H, L, S) if batched else (H, L, S), am.shape))
            if am.dtype == np.bool_:
                ma, d.mask = as_view(am.view(np.uint8), (N, H, L, S), np.uint8,
                                     allow_zero=True)
                d.mask_mode = _lib.MASK_DROP_NONZERO
                args.mask = ptr(ma)
                keep.append(ma)
            elif am.dtype.kind == "f":
                bias = am.astype(np.float32) if bias is None else bias + am
            else:
                raise TypeError("attn_mask must be bool or floating, not %s" % am.dtype)
        if bias is not None:
            ba, d.bias = as_view(bias, (N, H, L, S), np.float32, allow_zero=True)
            d.use_bias = 1
            args.bias = ptr(ba)
            keep.append(ba)

        if kv_lens is not None:
            kl = _lengths(kv_lens, (N,), "kv_lens")
            d.use_kv_lens = 1
            args.kv_lens = ptr(kl)
            keep.append(kl)
        if q_lens is not None:
            ql = _lengths(q_lens, (N,), "q_lens")
            d.use_q_lens = 1
            args.q_lens = ptr(ql)
            keep.append(ql)

        _set_window(d, scale, align, window_left, window_right, is_causal)

        weights = None
        if need_weights:
            if average_attn_weights:
                weights = np.empty((N, L, S), dtype=np.float32)
                d.weights = _lib.WEIGHTS_AVERAGED
            else:
                weights = np.empty((N, H, L, S), dtype=np.float32)
                d.weights = _lib.WEIGHTS_PER_HEAD
            args.weights = ptr(weights)

        if self.training and self.dropout > 0:
            d.dropout_p = self.dropout
            d.dropout_seed = (self._dropout_seed if dropout_seed is None
                              else int(dropout_seed)) & (2**64 - 1)
            if dropout_offset is None:
                d.dropout_offset = self._dropout_calls
                self._dropout_calls += 1
            else:
                d.dropout_offset = int(dropout_offset) & (2**64 - 1)
        d.threads = self.threads
        d.engine = _engine(self.engine)

        wts = _lib.MhaWeights()
        w = wts
        shapes = self._shapes()
        params = {n: _param(self._get(n), s, n) for n, s in shapes.items()}
        esz = 4
        if ty != _lib.DTYPE_F32:
            # the parameters rounded to the type for this call, passed
            # through attn_mha_weights16 (weights.weights16)
            params = {n: (to_bf16(a) if dtype == "bf16" else a.astype(np.float16))
                      for n, a in params.items()}
            w = _lib.MhaWeights16()
            wts.weights16 = ctypes.addressof(w)
            keep.append(w)
            esz = 2
        if self._qkv_same_embed_dim:
            w.in_proj_weight = ptr(params["in_proj_weight"])
            if d.has_bias:
                w.in_proj_bias = ptr(params["in_proj_bias"])
        else:
            w.q_weight = ptr(params["q_proj_weight"])
            w.k_weight = ptr(params["k_proj_weight"])
            w.v_weight = ptr(params["v_proj_weight"])
            if d.has_bias:
                b = params["in_proj_bias"]
                kv_rows = self.num_kv_heads * self.head_dim
                w.q_bias = ptr(b)
                w.k_bias = ptr(b) + esz * E
                w.v_bias = ptr(b) + esz * (E + kv_rows)
        w.out_weight = ptr(params["out_proj.weight"])
        if d.has_bias:
            w.out_bias = ptr(params["out_proj.bias"])

        plan = ctypes.c_void_p()
        _check(_lib.mha_plan_create(ctypes.byref(plan), ctypes.byref(d)),
               "attn_mha_plan_create")
        try:
            _check(_lib.mha_execute(plan, ctypes.byref(wts), ctypes.byref(args), None, 0),
                   "attn_mha_execute")
        finally:
            _lib.mha_plan_destroy(plan)
        del keep, params

        if not batched:
            return out[0], None if weights is None else weights[0]
        if not self.batch_first:
            out = out.transpose(1, 0, 2)
        return out, weights
