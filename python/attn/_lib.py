"""ctypes mirrors of attn.h and the loading of libattn.

Everything here follows include/attn.h field for field; the test
test/python/test_abi.py compares every size and offset with what a C
compiler says about the header.  C enums are ``int`` on every ABI attn
supports (x86-64 and AArch64 System V), so they are mirrored as c_int.
"""

import ctypes
import os

c_int64 = ctypes.c_int64
c_uint64 = ctypes.c_uint64
c_int = ctypes.c_int
c_float = ctypes.c_float
c_double = ctypes.c_double
c_void_p = ctypes.c_void_p

# attn_status, in the order of the enum.
STATUS_NAMES = (
    "ATTN_OK",
    "ATTN_ERR_NULL_ARGUMENT",
    "ATTN_ERR_BAD_SIZE",
    "ATTN_ERR_TOO_LARGE",
    "ATTN_ERR_HEAD_RATIO",
    "ATTN_ERR_BAD_STRIDE",
    "ATTN_ERR_STRIDES_UNSET",
    "ATTN_ERR_BAD_SCALE",
    "ATTN_ERR_BAD_OPTION",
    "ATTN_ERR_BAD_THREADS",
    "ATTN_ERR_BAD_LENGTH",
    "ATTN_ERR_ARGUMENT_MISMATCH",
    "ATTN_ERR_WORKSPACE_TOO_SMALL",
    "ATTN_ERR_WORKSPACE_ALIGNMENT",
    "ATTN_ERR_OUT_OF_MEMORY",
    "ATTN_ERR_BAD_BLOCK_TABLE",
    "ATTN_ERR_UNSUPPORTED_TYPE",
    "ATTN_ERR_COMM",
    "ATTN_ERR_DESC_MISMATCH",
)

ALIGN_TOP_LEFT = 0
ALIGN_BOTTOM_RIGHT = 1

ENGINES = {"auto": 0, "blas": 1, "tile": 2}   # attn_engine

MASK_NONE = 0
MASK_KEEP_NONZERO = 1
MASK_DROP_NONZERO = 2

WEIGHTS_NONE = 0
WEIGHTS_PER_HEAD = 1
WEIGHTS_AVERAGED = 2


class View(ctypes.Structure):
    """attn_view: element strides of batch, head and seq (dim stride 1)."""
    _fields_ = [("batch", c_int64), ("head", c_int64), ("seq", c_int64)]


# Runs of fields attn_sdpa_desc and attn_mha_desc share, in the same order.
_OPTIONS = [                      # scale ... mask_mode, mask, use_bias, bias
    ("scale", c_float),
    ("align", c_int),
    ("window_left", c_int64),
    ("window_right", c_int64),
    ("use_kv_lens", c_int),
    ("use_q_lens", c_int),
    ("mask_mode", c_int),
    ("mask", View),
    ("use_bias", c_int),
    ("bias", View),
]
_DROPOUT_SPARSE = [               # threads ... block_size
    ("threads", c_int),
    ("dropout_p", c_double),
    ("dropout_seed", c_uint64),
    ("dropout_offset", c_uint64),
    ("use_global_k", c_int),
    ("use_global_q", c_int),
    ("layout_per_head", c_int),
    ("reserved_flags", c_int),
    ("block_size", c_int64),
]


def _engine_tail(reserved, types=()):
    return ([("engine", c_int), ("reserved_pad", c_int)] + [(t, c_int) for t in types] +
            [("reserved", c_int64 * reserved)])


class SdpaDesc(ctypes.Structure):
    """attn_sdpa_desc."""
    _fields_ = [
        ("batch", c_int64),
        ("q_heads", c_int64),
        ("kv_heads", c_int64),
        ("q_len", c_int64),
        ("kv_len", c_int64),
        ("qk_dim", c_int64),
        ("v_dim", c_int64),
        ("q", View),
        ("k", View),
        ("v", View),
        ("o", View),
    ] + _OPTIONS + [
        ("want_probs", c_int),
        ("probs", View),
        ("want_lse", c_int),
        ("lse", View),
    ] + _DROPOUT_SPARSE + [
        ("k_type", c_int),
        ("v_type", c_int),
        ("kv_block_size", c_int64),
        ("kv_num_blocks", c_int64),
        ("kv_max_blocks", c_int64),
    ] + [("engine", c_int), ("use_positions", c_int), ("q_type", c_int), ("o_type", c_int),
         ("q_pos0", c_int64), ("kv_pos0", c_int64), ("qk_int8", c_int),
         ("reserved_pad2", c_int), ("reserved", c_int64 * 1)]


class SdpaArgs(ctypes.Structure):
    """attn_sdpa_args (every pointer as void *; kq, vq: 1.2, in the room of
    reserved[0] and reserved[1])."""
    _fields_ = [(name, c_void_p) for name in (
        "q", "k", "v", "o", "kv_lens", "q_lens", "mask", "bias", "probs",
        "lse", "global_k", "global_q", "layout", "k16", "v16",
        "block_table", "q16", "o16", "kq", "vq")] + [("reserved", c_void_p * 4)]


class SdpaBwdArgs16(ctypes.Structure):
    """attn_sdpa_bwd_args16 (the backward's 16-bit tensors, 1.1)."""
    _fields_ = [(name, c_void_p) for name in (
        "q", "k", "v", "o", "d_o", "dq", "dk", "dv")] + [("reserved", c_void_p * 8)]


class SdpaBwdArgs(ctypes.Structure):
    """attn_sdpa_bwd_args (every pointer as void *; args16 since 1.1)."""
    _fields_ = [(name, c_void_p) for name in (
        "q", "k", "v", "o", "d_o", "lse", "kv_lens", "q_lens", "mask", "bias",
        "dq", "dk", "dv", "dbias", "global_k", "global_q", "layout",
        "args16")] + [("reserved", c_void_p * 7)]


class MhaDesc(ctypes.Structure):
    """attn_mha_desc."""
    _fields_ = [
        ("embed_dim", c_int64),
        ("num_heads", c_int64),
        ("num_kv_heads", c_int64),
        ("kdim", c_int64),
        ("vdim", c_int64),
        ("batch", c_int64),
        ("q_len", c_int64),
        ("kv_len", c_int64),
        ("self_attention", c_int),
        ("packed_in_proj", c_int),
        ("has_bias", c_int),
        ("x_stride", c_int64),
        ("key_stride", c_int64),
        ("value_stride", c_int64),
        ("out_stride", c_int64),
    ] + _OPTIONS + [
        ("key_padding_mode", c_int),
        ("weights", c_int),
    ] + _DROPOUT_SPARSE + _engine_tail(8, ("x_type", "w_type"))


_MHA_WEIGHT_NAMES = (
    "in_proj_weight", "in_proj_bias", "q_weight", "k_weight", "v_weight",
    "q_bias", "k_bias", "v_bias", "out_weight", "out_bias")


class MhaWeights16(ctypes.Structure):
    """attn_mha_weights16 (every pointer as void *)."""
    _fields_ = [(name, c_void_p) for name in _MHA_WEIGHT_NAMES] + [
        ("reserved", c_void_p * 8)]


class MhaArgs16(ctypes.Structure):
    """attn_mha_args16 (every pointer as void *)."""
    _fields_ = [(name, c_void_p) for name in ("x", "key", "value", "out")] + [
        ("reserved", c_void_p * 8)]


class MhaWeights(ctypes.Structure):
    """attn_mha_weights."""
    _fields_ = [(name, c_void_p) for name in _MHA_WEIGHT_NAMES] + [
        ("weights16", c_void_p), ("reserved", c_void_p * 7)]


class MhaArgs(ctypes.Structure):
    """attn_mha_args."""
    _fields_ = [(name, c_void_p) for name in (
        "x", "key", "value", "out", "kv_lens", "q_lens", "mask", "bias",
        "key_padding_mask", "weights", "global_k", "global_q", "layout")] + [
            ("args16", c_void_p), ("reserved", c_void_p * 7)]


class LinearDesc(ctypes.Structure):
    """attn_linear_desc (used by _linear.py).  q_type, k_type, v_type, o_type: 1.1, in
    the room of reserved[0] and reserved[1]."""
    _fields_ = [
        ("batch", c_int64),
        ("q_heads", c_int64),
        ("kv_heads", c_int64),
        ("q_len", c_int64),
        ("kv_len", c_int64),
        ("qk_dim", c_int64),
        ("v_dim", c_int64),
        ("q", View),
        ("k", View),
        ("v", View),
        ("o", View),
        ("feature_map", c_int),
        ("causal", c_int),
        ("align", c_int),
        ("eps", c_float),
        ("use_kv_lens", c_int),
        ("use_q_lens", c_int),
        ("use_state", c_int),
        ("threads", c_int),
    ] + _engine_tail(13, ("q_type", "k_type", "v_type", "o_type"))


class LinearArgs16(ctypes.Structure):
    """attn_linear_args16 (1.1)."""
    _fields_ = [(name, c_void_p) for name in ("q", "k", "v", "o")] + [
        ("reserved", c_void_p * 8)]


class LinearArgs(ctypes.Structure):
    """attn_linear_args (args16: 1.1, in the room of reserved[0])."""
    _fields_ = [(name, c_void_p) for name in (
        "q", "k", "v", "o", "kv_lens", "q_lens", "state_s", "state_z", "args16")] + [
            ("reserved", c_void_p * 7)]


class SdpaBwdDesc(ctypes.Structure):
    """attn_sdpa_bwd_desc."""
    _fields_ = [("fwd", SdpaDesc), ("d_o", View), ("dq", View), ("dk", View), ("dv", View),
                ("want_dbias", c_int), ("dbias", View), ("reserved", c_int64 * 16)]


_MHA_GRAD_NAMES = (
    "d_in_proj_weight", "d_in_proj_bias", "d_q_weight", "d_k_weight", "d_v_weight",
    "d_q_bias", "d_k_bias", "d_v_bias", "d_out_weight", "d_out_bias")


class MhaGrads16(ctypes.Structure):
    """attn_mha_grads16 (1.1)."""
    _fields_ = [(name, c_void_p) for name in ("dy", "dx", "dkey", "dvalue") + _MHA_GRAD_NAMES] + [
        ("reserved", c_void_p * 8)]


class MhaGrads(ctypes.Structure):
    """attn_mha_grads (grads16: 1.1, in the room of reserved[0])."""
    _fields_ = [(name, c_void_p) for name in ("dx", "dkey", "dvalue") + _MHA_GRAD_NAMES] + [
        ("grads16", c_void_p), ("reserved", c_void_p * 7)]


# The structs the ABI test checks, by their C names.
STRUCTS = {
    "attn_view": View,
    "attn_sdpa_desc": SdpaDesc,
    "attn_sdpa_args": SdpaArgs,
    "attn_sdpa_bwd_args": SdpaBwdArgs,
    "attn_sdpa_bwd_args16": SdpaBwdArgs16,
    "attn_sdpa_bwd_desc": SdpaBwdDesc,
    "attn_mha_grads": MhaGrads,
    "attn_mha_grads16": MhaGrads16,
    "attn_mha_desc": MhaDesc,
    "attn_mha_weights": MhaWeights,
    "attn_mha_args": MhaArgs,
    "attn_mha_weights16": MhaWeights16,
    "attn_mha_args16": MhaArgs16,
    "attn_linear_desc": LinearDesc,
    "attn_linear_args": LinearArgs,
    "attn_linear_args16": LinearArgs16,
}


def _candidates():
    """Where to look for libattn, in order (see docs/PYTHON.md)."""
    env = os.environ.get("ATTN_LIBRARY")
    if env:
        return [("ATTN_LIBRARY", env)]
    try:
        from . import _build_config
    except ImportError:              # the source tree: no configured file
        _build_config = None
    bundled = getattr(_build_config, "BUNDLED", "")
    if bundled:
        # A wheel (pip install .): the copy built with this module, and no
        # other (a libattn.so.1 elsewhere may be another version).
        return [("beside the module",
                 os.path.join(os.path.dirname(os.path.abspath(__file__)), bundled))]
    out = []
    if getattr(_build_config, "LIBRARY", ""):
        out.append(("installed", _build_config.LIBRARY))
    out.append(("soname", "libattn.so.1"))
    return out


def _load():
    errors = []
    for how, path in _candidates():
        try:
            # RTLD_GLOBAL: a BLAS that dlopens its own parts (MKL loads
            # libmkl_def.so and others at run time) must find the symbols of
            # the libraries attn pulled in; with RTLD_LOCAL, MKL failed as soon
            # as torch had been imported first.
            return ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL), path
        except OSError as e:
            if how == "ATTN_LIBRARY":
                raise OSError("attn: ATTN_LIBRARY=%s cannot be loaded: %s" % (path, e))
            errors.append("%s (%s): %s" % (path, how, e))
    raise OSError("attn: libattn not found; tried " + "; ".join(errors) +
                  ". Set ATTN_LIBRARY to the path of libattn.so.")


lib, library_path = _load()

_P = ctypes.POINTER


def _fn(name, restype, *argtypes):
    f = getattr(lib, name)
    f.restype = restype
    f.argtypes = list(argtypes)
    return f


status_str = _fn("attn_status_str", ctypes.c_char_p, c_int)
version = _fn("attn_version", ctypes.c_char_p)
sdpa_desc_init = _fn("attn_sdpa_desc_init", c_int, _P(SdpaDesc))
sdpa = _fn("attn_sdpa", c_int, _P(SdpaDesc), _P(SdpaArgs))
mha_desc_init = _fn("attn_mha_desc_init", c_int, _P(MhaDesc))
mha_plan_create = _fn("attn_mha_plan_create", c_int, _P(c_void_p), _P(MhaDesc))
mha_plan_destroy = _fn("attn_mha_plan_destroy", c_int, c_void_p)
mha_execute = _fn("attn_mha_execute", c_int, c_void_p, _P(MhaWeights), _P(MhaArgs),
                  c_void_p, ctypes.c_size_t)
# Plans (attn.torch caches them by shape and options) and training.
_size_p = _P(ctypes.c_size_t)
sdpa_plan_create = _fn("attn_sdpa_plan_create", c_int, _P(c_void_p), _P(SdpaDesc))
sdpa_plan_destroy = _fn("attn_sdpa_plan_destroy", c_int, c_void_p)
sdpa_workspace_size = _fn("attn_sdpa_workspace_size", c_int, c_void_p, _size_p)
sdpa_execute = _fn("attn_sdpa_execute", c_int, c_void_p, _P(SdpaArgs), c_void_p,
                   ctypes.c_size_t)
sdpa_bwd_desc_init = _fn("attn_sdpa_bwd_desc_init", c_int, _P(SdpaBwdDesc))
sdpa_bwd_plan_create = _fn("attn_sdpa_bwd_plan_create", c_int, _P(c_void_p), _P(SdpaBwdDesc))
sdpa_bwd_plan_destroy = _fn("attn_sdpa_bwd_plan_destroy", c_int, c_void_p)
sdpa_bwd_workspace_size = _fn("attn_sdpa_bwd_workspace_size", c_int, c_void_p, _size_p)
sdpa_bwd_execute = _fn("attn_sdpa_bwd_execute", c_int, c_void_p, _P(SdpaBwdArgs), c_void_p,
                       ctypes.c_size_t)
mha_workspace_size = _fn("attn_mha_workspace_size", c_int, c_void_p, _size_p)
mha_context_size = _fn("attn_mha_context_size", c_int, c_void_p, _size_p)
mha_bwd_workspace_size = _fn("attn_mha_bwd_workspace_size", c_int, c_void_p, _size_p)
mha_train_execute = _fn("attn_mha_train_execute", c_int, c_void_p, _P(MhaWeights),
                        _P(MhaArgs), c_void_p, ctypes.c_size_t, c_void_p, ctypes.c_size_t)
mha_bwd_execute = _fn("attn_mha_bwd_execute", c_int, c_void_p, _P(MhaWeights), _P(MhaArgs),
                      c_void_p, c_void_p, ctypes.c_size_t, _P(MhaGrads), c_int, c_void_p,
                      ctypes.c_size_t)
dtype_encode = _fn("attn_dtype_encode", c_int, c_int, c_void_p, c_void_p, c_int64)
dtype_decode = _fn("attn_dtype_decode", c_int, c_int, c_void_p, c_void_p, c_int64)
DTYPE_F32, DTYPE_F16, DTYPE_BF16 = 0, 1, 2   # attn_dtype
DTYPE_Q8_0, DTYPE_Q4_0 = 3, 4                # attn_dtype: quantized K/V storage (1.2)
dropout_keep_mask = _fn("attn_dropout_mask_fill", c_int, c_double, c_uint64, c_uint64,
                        c_int64, c_int64, c_int64, c_int64, c_int64, c_void_p, c_int64)


# ---------------------------------------------------------------------------
# Linear attention backward, KV append, partials merge (used by _linear.py,
# _decode.py)
# ---------------------------------------------------------------------------

FEATURE_MAPS = {"elu1": 0, "relu": 1, "identity": 2}   # attn_feature_map


class LinearBwdDesc(ctypes.Structure):
    """attn_linear_bwd_desc."""
    _fields_ = [("fwd", LinearDesc), ("d_o", View), ("dq", View), ("dk", View),
                ("dv", View), ("reserved", c_int64 * 16)]


class LinearBwdArgs16(ctypes.Structure):
    """attn_linear_bwd_args16 (1.1)."""
    _fields_ = [(name, c_void_p) for name in ("q", "k", "v", "d_o", "dq", "dk", "dv")] + [
        ("reserved", c_void_p * 8)]


class LinearBwdArgs(ctypes.Structure):
    """attn_linear_bwd_args (args16: 1.1, in the room of reserved[0])."""
    _fields_ = [(name, c_void_p) for name in (
        "q", "k", "v", "d_o", "dq", "dk", "dv", "kv_lens", "q_lens", "args16")] + [
            ("reserved", c_void_p * 7)]


class KvAppendArgs(ctypes.Structure):
    """attn_kv_append_args."""
    _fields_ = [(name, c_void_p) for name in (
        "k_cache", "v_cache", "block_table", "kv_lens", "new_lens")] + [
            ("t", c_int64), ("k_new", c_void_p), ("v_new", c_void_p),
            ("k_new_view", View), ("v_new_view", View), ("reserved", c_void_p * 8)]


class PartialsMergeArgs(ctypes.Structure):
    """attn_partials_merge_args."""
    _fields_ = [
        ("parts", c_int64), ("rows", c_int64), ("dim", c_int64),
        ("o_parts", c_void_p), ("o_part_stride", c_int64), ("o_row_stride", c_int64),
        ("lse_parts", c_void_p), ("lse_part_stride", c_int64), ("lse_row_stride", c_int64),
        ("o", c_void_p), ("o_out_stride", c_int64),
        ("lse_out", c_void_p), ("lse_out_stride", c_int64),
        ("reserved", c_int64 * 8)]


STRUCTS.update({
    "attn_linear_bwd_desc": LinearBwdDesc,
    "attn_linear_bwd_args": LinearBwdArgs,
    "attn_linear_bwd_args16": LinearBwdArgs16,
    "attn_kv_append_args": KvAppendArgs,
    "attn_partials_merge_args": PartialsMergeArgs,
})

linear_desc_init = _fn("attn_linear_desc_init", c_int, _P(LinearDesc))
linear_plan_create = _fn("attn_linear_plan_create", c_int, _P(c_void_p), _P(LinearDesc))
linear_plan_destroy = _fn("attn_linear_plan_destroy", c_int, c_void_p)
linear_execute = _fn("attn_linear_execute", c_int, c_void_p, _P(LinearArgs), c_void_p,
                     ctypes.c_size_t)
linear_bwd_desc_init = _fn("attn_linear_bwd_desc_init", c_int, _P(LinearBwdDesc))
linear_bwd_plan_create = _fn("attn_linear_bwd_plan_create", c_int, _P(c_void_p),
                             _P(LinearBwdDesc))
linear_bwd_plan_destroy = _fn("attn_linear_bwd_plan_destroy", c_int, c_void_p)
linear_bwd_execute = _fn("attn_linear_bwd_execute", c_int, c_void_p, _P(LinearBwdArgs),
                         c_void_p, ctypes.c_size_t)
sdpa_plan_create = _fn("attn_sdpa_plan_create", c_int, _P(c_void_p), _P(SdpaDesc))
sdpa_plan_destroy = _fn("attn_sdpa_plan_destroy", c_int, c_void_p)
kv_append_args_init = _fn("attn_kv_append_args_init", c_int, _P(KvAppendArgs))
kv_append = _fn("attn_kv_append", c_int, _P(SdpaDesc), _P(KvAppendArgs))
partials_merge_args_init = _fn("attn_partials_merge_args_init", c_int, _P(PartialsMergeArgs))
partials_merge = _fn("attn_partials_merge", c_int, _P(PartialsMergeArgs))
quantize = _fn("attn_quantize", c_int, c_int, c_void_p, c_void_p, c_int64)
dequantize = _fn("attn_dequantize", c_int, c_int, c_void_p, c_void_p, c_int64)
dtype_bytes = _fn("attn_dtype_bytes", c_int, c_int, c_int64, _P(ctypes.c_size_t))
