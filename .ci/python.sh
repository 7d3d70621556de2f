#!/usr/bin/env bash
# The installed Python module: run from the repository root after
#   meson install -C build && ldconfig
# (prefix /usr/local).  (a) imports the INSTALLED module with the system
# python3 from a directory outside the repository, without PYTHONPATH or
# ATTN_LIBRARY, and checks one call against numpy; (b) runs the README's
# Python example.  Exits nonzero on any failure.
#
# Debian 12 packages: python3-numpy (required); python3-torch (optional,
# only the Meson tests use it: their torch comparisons are skipped without).
set -euo pipefail
root=$PWD
py=/usr/bin/python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
unset PYTHONPATH ATTN_LIBRARY

echo "== (a) the installed module, from $tmp"
"$py" - "$root" <<'PY'
import os
import sys

import numpy as np

import attn

root = os.path.realpath(sys.argv[1])
where = os.path.realpath(attn.__file__)
print("attn module:", where)
print("libattn:", attn.library_path, attn.library_version())
if where.startswith(root + os.sep):
    sys.exit("the module was imported from the repository, not the installation")
from attn import _build_config  # written by meson at configure time
print("baked library path:", _build_config.LIBRARY)

rng = np.random.default_rng(1)
q = rng.standard_normal((2, 3, 5, 8), dtype=np.float32)
k = rng.standard_normal((2, 3, 7, 8), dtype=np.float32)
v = rng.standard_normal((2, 3, 7, 4), dtype=np.float32)
out = attn.scaled_dot_product_attention(q, k, v)
s = q.astype(np.float64) @ k.astype(np.float64).swapaxes(-1, -2) / np.sqrt(8)
p = np.exp(s - s.max(-1, keepdims=True))
ref = (p / p.sum(-1, keepdims=True)) @ v
err = float(np.abs(out - ref).max())
print("max |error| against float64 numpy: %.3g" % err)
if not err < 1e-5:
    sys.exit("wrong result")
try:
    attn.scaled_dot_product_attention(q, k, v, scale=float("inf"))
    sys.exit("no exception for scale=inf")
except attn.AttnError as e:
    print("bad argument raises:", e)
PY

echo "== (b) the README's Python example"
cat > example.py <<'PY'
import numpy as np
import attn

rng = np.random.default_rng(0)

# torch.nn.functional.scaled_dot_product_attention's semantics on numpy arrays
# [batch, heads, seq, dim]: 8 query heads share 2 key/value heads (GQA).
q = rng.standard_normal((2, 8, 128, 64), dtype=np.float32)
k = rng.standard_normal((2, 2, 128, 64), dtype=np.float32)
v = rng.standard_normal((2, 2, 128, 64), dtype=np.float32)
out = attn.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
print(out.shape)                                # (2, 8, 128, 64)

# attn's extras: a sliding window, per-batch key lengths, the logsumexp.
out, _, lse = attn.scaled_dot_product_attention(
    q, k, v, enable_gqa=True, is_causal=True, window_left=32,
    kv_lens=[128, 100], return_lse=True)

# nn.MultiheadAttention's forward, parameters under its state_dict names.
mha = attn.MultiheadAttention(embed_dim=256, num_heads=8, batch_first=True).eval()
x = rng.standard_normal((2, 100, 256), dtype=np.float32)
pad = np.zeros((2, 100), dtype=bool)
pad[1, 80:] = True                              # True = padding, as in torch
y, w = mha(x, x, x, key_padding_mask=pad)       # self-attention
print(y.shape, w.shape)                         # (2, 100, 256) (2, 100, 100)
assert np.allclose(w.sum(-1), 1, atol=1e-5) and not w[1, :, 80:].any()
print(list(mha.state_dict()))   # in_proj_weight, in_proj_bias, out_proj.weight, out_proj.bias

# A bad argument raises attn.AttnError (a ValueError) naming attn's status.
try:
    attn.scaled_dot_product_attention(q, k, v, enable_gqa=True, kv_lens=[128, 200])
except attn.AttnError as e:
    print(e.status_name, "-", e)                # ATTN_ERR_BAD_LENGTH - attn_sdpa: ...
PY
"$py" example.py
echo "python.sh: OK"
