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

echo "== (c) attn.torch from the installed module (when torch is there)"
"$py" - <<'PY'
import sys
try:
    import torch
except ImportError:
    print("torch not importable: attn.torch not checked")
    sys.exit(0)
import attn.torch as at
q = torch.randn(2, 4, 6, 8, dtype=torch.float64)
k = torch.randn(2, 2, 6, 8, dtype=torch.float64)
ins = [t.float().requires_grad_() for t in (q, k, k)]
o = at.scaled_dot_product_attention(*ins, is_causal=True, enable_gqa=True)
o.sum().backward()
ref = [t.clone().requires_grad_() for t in (q, k, k)]
kk, vv = (t.repeat_interleave(2, 1) for t in ref[1:])
s = ref[0] @ kk.transpose(-1, -2) / 8 ** 0.5
s = s.masked_fill(torch.ones(6, 6, dtype=torch.bool).triu(1), float("-inf"))
r = torch.softmax(s, -1) @ vv
r.sum().backward()
err = max([float((o.double() - r).abs().max())] +
          [float((a.grad.double() - b.grad).abs().max()) for a, b in zip(ins, ref)])
print("attn.torch (torch %s): forward and gradients against float64 autograd, max |error| "
      "%.3g" % (torch.__version__, err))
if not err < 1e-5:
    sys.exit("wrong result")
PY

echo "== (b) the README's Python example"
"$py" "$root/.ci/readme-block.py" example-python "$root/README.md" > example.py
cat example.py
"$py" example.py
if "$py" -c 'import torch' 2>/dev/null; then
    echo "== (d) the README's torch example"
    "$py" "$root/.ci/readme-block.py" example-torch "$root/README.md" > example_torch.py
    "$py" example_torch.py
fi
echo "python.sh: OK"
