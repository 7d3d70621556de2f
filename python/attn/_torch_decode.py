"""The KV cache, decode and merge_partials on torch tensors.

Imported only where torch is installed (attn.torch re-exports it).  Inputs
are CPU tensors (float32 tensors are read in place through .numpy();
other real dtypes are rounded to float32 once); results are the numpy
arrays attn wrote, as tensors through torch.from_numpy (no copy).
"""

import torch

from . import _decode
from ._torch_common import from_numpy, ints

__all__ = ["KVCache", "decode", "merge_partials"]


def _f32(t, name):
    if isinstance(t, torch.Tensor):
        if t.device.type != "cpu":
            raise ValueError("%s is on %s: attn runs on the CPU" % (name, t.device))
        t = t.detach()
        if t.dtype != torch.float32:
            if t.dtype.is_complex or t.dtype == torch.bool:
                raise TypeError("%s: expected a real tensor, got %s" % (name, t.dtype))
            t = t.float()
        return t.numpy()
    return t


def _storage_tensor(a, dtype):
    return from_numpy(a, dtype == "bf16")


class KVCache(_decode.KVCache):
    """attn.KVCache taking and giving torch tensors (same constructor).

    append() takes tensors (or arrays); lengths, to_float(), k_storage and
    v_storage are tensors sharing the cache's memory where they are views
    (k_storage / v_storage: torch float32, float16, bfloat16 or uint8
    blocks); block_table is a tensor view of the table.
    """

    def append(self, k_new, v_new, new_lens=None):
        super().append(_f32(k_new, "k_new"), _f32(v_new, "v_new"), ints(new_lens))

    @property
    def lengths(self):
        return torch.from_numpy(self._lens.copy())

    @property
    def k_storage(self):
        return _storage_tensor(self.k_data, self.k_dtype)

    @property
    def v_storage(self):
        return _storage_tensor(self.v_data, self.v_dtype)

    @property
    def block_table_tensor(self):
        return None if self.block_table is None else torch.from_numpy(self.block_table)

    def to_float(self):
        k, v = super().to_float()
        return torch.from_numpy(k), torch.from_numpy(v)


def decode(query, cache, *, scale=None, is_causal=False, align="bottom_right",
           window_left=None, window_right=None, q_lens=None, kv_lens=None,
           return_lse=False, threads=0, engine="auto"):
    """attn.decode with a torch query (batch, Hq, L, head_dim); returns
    float32 tensors (output, and the logsumexp with return_lse).  The
    cache is an attn.KVCache or this module's KVCache."""
    r = _decode.decode(_f32(query, "query"), cache, scale=scale, is_causal=is_causal,
                       align=align, window_left=window_left, window_right=window_right,
                       q_lens=ints(q_lens), kv_lens=ints(kv_lens), return_lse=return_lse,
                       threads=threads, engine=engine)
    if return_lse:
        return torch.from_numpy(r[0]), torch.from_numpy(r[1])
    return torch.from_numpy(r)


def merge_partials(outputs, lses):
    """attn.merge_partials on tensors (a sequence of P tensors, or one
    stacked tensor, for each); returns float32 tensors (O, lse)."""
    def conv(x, name):
        if isinstance(x, (list, tuple)):
            return [_f32(t, name) for t in x]
        return _f32(x, name)
    o, lse = _decode.merge_partials(conv(outputs, "outputs"), conv(lses, "lses"))
    return torch.from_numpy(o), torch.from_numpy(lse)
