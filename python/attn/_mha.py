"""MultiheadAttention: torch.nn.MultiheadAttention's forward over attn_mha."""

import collections
import ctypes
import math

import numpy as np

from . import _lib
from ._common import _check, _engine, _lengths, _set_window
from . import _plans
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


def set_sizes(layer, embed_dim, num_heads, num_kv_heads, kdim, vdim, dropout):
    """Check and set the layer's sizes (embed_dim, num_heads, num_kv_heads,
    head_dim, kdim, vdim, _qkv_same_embed_dim) and dropout: what the numpy
    class and attn.torch's nn.Module share.  Raises ValueError."""
    E, H = int(embed_dim), int(num_heads)
    if E <= 0 or H <= 0:
        raise ValueError("embed_dim and num_heads must be positive (%d, %d)" % (E, H))
    if E % H:
        raise ValueError("embed_dim (%d) must be divisible by num_heads (%d)" % (E, H))
    Hkv = H if num_kv_heads is None else int(num_kv_heads)
    if Hkv <= 0 or H % Hkv:
        raise ValueError("num_heads (%d) must be a multiple of num_kv_heads (%d)" % (H, Hkv))
    if not 0.0 <= float(dropout) <= 1.0:
        raise ValueError("dropout must be in [0, 1], got %r" % (dropout,))
    layer.embed_dim, layer.num_heads, layer.num_kv_heads = E, H, Hkv
    layer.head_dim = E // H
    layer.kdim = E if kdim is None else int(kdim)
    layer.vdim = E if vdim is None else int(vdim)
    layer._qkv_same_embed_dim = layer.kdim == E and layer.vdim == E and Hkv == H
    layer.dropout = float(dropout)


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
        set_sizes(self, embed_dim, num_heads, num_kv_heads, kdim, vdim, dropout)
        E, Hkv = self.embed_dim, self.num_kv_heads
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
        params = {n: _param(self._get(n), s, n) for n, s in self._shapes().items()}
        if ty != _lib.DTYPE_F32:
            # the parameters rounded to the type for this call
            params = {n: (to_bf16(a) if dtype == "bf16" else a.astype(np.float16))
                      for n, a in params.items()}
        dropout = (0.0, 0, 0)
        if self.training and self.dropout > 0:
            seed = self._dropout_seed if dropout_seed is None else int(dropout_seed)
            if dropout_offset is None:
                offset = self._dropout_calls
                self._dropout_calls += 1
            else:
                offset = int(dropout_offset)
            dropout = (self.dropout, seed, offset)
        call = LayerCall(self, params, q, k, v, same, ty, batched,
                         key_padding_mask=key_padding_mask, need_weights=need_weights,
                         attn_mask=attn_mask, average_attn_weights=average_attn_weights,
                         is_causal=is_causal, kv_lens=kv_lens, q_lens=q_lens,
                         window_left=window_left, window_right=window_right, align=align,
                         scale=scale, dropout=dropout, threads=self.threads,
                         engine=self.engine)
        call.execute()
        out, weights = call.out, call.weights
        if not batched:
            return out[0], None if weights is None else weights[0]
        if not self.batch_first:
            out = out.transpose(1, 0, 2)
        return out, weights


class LayerCall:
    """One call of the layer, ready to run: its attn_mha_desc, args and
    weights over the given arrays, its outputs and its (kept) plan.

    layer: what describes the layer (embed_dim, num_heads, num_kv_heads,
    head_dim, kdim, vdim, _qkv_same_embed_dim: the numpy class or the
    nn.Module of attn.torch).  params: the state_dict names -> arrays of
    the call's storage type (float32, float16, uint16 for bf16), C
    contiguous.  q (N, L, E), k (N, S, kdim), v (N, S, vdim): arrays of that
    type; same: query is key is value (self-attention).  batched: the
    caller's input had a batch dimension (masks are shaped accordingly).
    dropout: (p, seed, offset).  Raises as forward documents.
    """

    def __init__(self, layer, params, q, k, v, same, ty, batched, *, key_padding_mask,
                 need_weights, attn_mask, average_attn_weights, is_causal, kv_lens, q_lens,
                 window_left, window_right, align, scale, dropout, threads, engine):
        npt = {_lib.DTYPE_F32: np.float32, _lib.DTYPE_F16: np.float16,
               _lib.DTYPE_BF16: np.uint16}[ty]
        E, H = layer.embed_dim, layer.num_heads
        N, L, Eq = q.shape
        Nk, S, kd = k.shape
        Nv, Sv, vd = v.shape
        if Eq != E:
            raise ValueError("query has %d features, embed_dim is %d" % (Eq, E))
        if kd != layer.kdim or vd != layer.vdim:
            raise ValueError("key / value have %d / %d features, kdim / vdim are %d / %d" %
                             (kd, vd, layer.kdim, layer.vdim))
        if Nk != N or Nv != N or Sv != S:
            raise ValueError("batch or length of query %s, key %s, value %s do not match" %
                             (q.shape, k.shape, v.shape))
        self_attn = same and layer.kdim == E and layer.vdim == E
        self.self_attention = self_attn
        has_bias = "in_proj_bias" in params
        if has_bias != ("out_proj.bias" in params):
            raise ValueError("in_proj_bias and out_proj.bias must both be set or both None")

        d = self.desc = _lib.MhaDesc()
        _check(_lib.mha_desc_init(ctypes.byref(d)), "attn_mha_desc_init")
        d.embed_dim, d.num_heads, d.num_kv_heads = E, H, layer.num_kv_heads
        d.kdim, d.vdim = layer.kdim, layer.vdim
        d.batch, d.q_len, d.kv_len = N, L, S
        d.self_attention = int(self_attn)
        d.packed_in_proj = int(layer._qkv_same_embed_dim)
        d.has_bias = int(has_bias)
        self.shape = (N, L, S)

        keep = self._keep = []
        args = self.args = _lib.MhaArgs()
        # 16-bit: the buffers through attn_mha_args16 (args.args16)
        a16 = _lib.MhaArgs16() if ty != _lib.DTYPE_F32 else None
        io = self.io = a16 if a16 is not None else args
        if a16 is not None:
            d.x_type = d.w_type = ty
            args.args16 = ctypes.addressof(a16)
            keep.append(a16)
        qa, d.x_stride = _rows(q, E, npt)
        io.x = ptr(qa)
        self.x = qa
        keep.append(qa)
        self.key = self.value = None
        if not self_attn:
            ka, d.key_stride = _rows(k, layer.kdim, npt)
            va, d.value_stride = _rows(v, layer.vdim, npt)
            io.key, io.value = ptr(ka), ptr(va)
            self.key, self.value = ka, va
            keep += [ka, va]
        out = self.out = np.empty((N, L, E), dtype=npt)
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
        self.weights = weights

        p, seed, offset = dropout
        if p > 0:
            d.dropout_p = float(p)
            d.dropout_seed = int(seed) & (2**64 - 1)
            d.dropout_offset = int(offset) & (2**64 - 1)
        d.threads = int(threads)
        d.engine = _engine(engine)

        wts = self.weights_struct = _lib.MhaWeights()
        w = wts
        esz = 4
        if ty != _lib.DTYPE_F32:
            w = _lib.MhaWeights16()
            wts.weights16 = ctypes.addressof(w)
            keep.append(w)
            esz = 2
        self._set_params(w, params, layer, esz, has_bias)
        self._w16 = w
        self.params = params
        self.esz = esz
        self.ty = ty
        self.plan = _plans.get("mha", d)

    @staticmethod
    def _set_params(w, params, layer, esz, has_bias, prefix=""):
        """Point w (attn_mha_weights(16) or attn_mha_grads(16), whose fields
        are the weights' names with prefix) at params."""
        E = layer.embed_dim

        def put(field, value):
            setattr(w, prefix + field, value)

        if layer._qkv_same_embed_dim:
            put("in_proj_weight", ptr(params["in_proj_weight"]))
            if has_bias:
                put("in_proj_bias", ptr(params["in_proj_bias"]))
        else:
            put("q_weight", ptr(params["q_proj_weight"]))
            put("k_weight", ptr(params["k_proj_weight"]))
            put("v_weight", ptr(params["v_proj_weight"]))
            if has_bias:
                b = ptr(params["in_proj_bias"])
                kv_rows = layer.num_kv_heads * layer.head_dim
                put("q_bias", b)
                put("k_bias", b + esz * E)
                put("v_bias", b + esz * (E + kv_rows))
        put("out_weight", ptr(params["out_proj.weight"]))
        if has_bias:
            put("out_bias", ptr(params["out_proj.bias"]))

    def execute(self):
        """Y (and the weights) into self.out (self.weights)."""
        plan = self.plan
        _check(_lib.mha_execute(plan.handle, ctypes.byref(self.weights_struct),
                                ctypes.byref(self.args), plan.ws, plan.ws_bytes),
               "attn_mha_execute")

    def _train_sizes(self):
        plan = self.plan
        if plan.train is None:
            c, w = ctypes.c_size_t(), ctypes.c_size_t()
            _check(_lib.mha_context_size(plan.handle, ctypes.byref(c)), "attn_mha_context_size")
            _check(_lib.mha_bwd_workspace_size(plan.handle, ctypes.byref(w)),
                   "attn_mha_bwd_workspace_size")
            plan.train = (c.value, w.value)
        return plan.train

    def train_execute(self):
        """execute() that also keeps the context the backward reads."""
        ctx_bytes, _ = self._train_sizes()
        self._context, addr = _plans.aligned_buffer(ctx_bytes)
        self._context_addr = addr
        plan = self.plan
        _check(_lib.mha_train_execute(plan.handle, ctypes.byref(self.weights_struct),
                                      ctypes.byref(self.args), addr, ctx_bytes, plan.ws,
                                      plan.ws_bytes), "attn_mha_train_execute")

    def backward(self, dy, grads, dx, dkey=None, dvalue=None):
        """The gradients at dY (N, L, E), C contiguous, of the call's type:
        grads maps the state_dict names to C-contiguous arrays of the
        parameters' shapes and type, dx (N, L, E), dkey, dvalue (cross
        attention) C-contiguous arrays of the inputs' type; all
        overwritten.  Needs train_execute() first."""
        ctx_bytes, ws_bytes = self._train_sizes()
        if self.desc.x_stride != self.desc.embed_dim or (
                not self.self_attention and (self.desc.key_stride != self.desc.kdim or
                                             self.desc.value_stride != self.desc.vdim)):
            raise ValueError("backward: the inputs' rows must be dense")
        g = _lib.MhaGrads()
        g16 = None
        if self.ty != _lib.DTYPE_F32:
            g16 = _lib.MhaGrads16()
            g.grads16 = ctypes.addressof(g16)
            io = g16
            g16.dy = ptr(dy)
            dyp = None
        else:
            io = g
            dyp = ptr(dy)
        io.dx = ptr(dx)
        if not self.self_attention:
            io.dkey, io.dvalue = ptr(dkey), ptr(dvalue)
        self._set_params(io, grads, _GradLayer(self.desc), self.esz, bool(self.desc.has_bias),
                         prefix="d_")
        plan = self.plan
        ws, ws_keep = None, None
        if ws_bytes:
            ws_keep, ws = _plans.aligned_buffer(ws_bytes)
        _check(_lib.mha_bwd_execute(plan.handle, ctypes.byref(self.weights_struct),
                                    ctypes.byref(self.args), dyp, self._context_addr,
                                    ctx_bytes, ctypes.byref(g), 0, ws, ws_bytes),
               "attn_mha_bwd_execute")
        del ws_keep


class _GradLayer:
    """What _set_params reads of a layer, from a desc."""

    def __init__(self, d):
        self.embed_dim = d.embed_dim
        self.num_kv_heads = d.num_kv_heads or d.num_heads
        self.head_dim = d.embed_dim // d.num_heads
        self._qkv_same_embed_dim = bool(d.packed_in_proj)
