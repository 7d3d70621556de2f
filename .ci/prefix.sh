#!/usr/bin/env bash
# Install prefixes and pip (docs/BUILDING.md, "Install prefixes" and
# "pip install"):
# (a) a fresh build installed to a custom prefix under a temporary
#     directory: the installed attn-demo has RUNPATH = the install libdir
#     and runs without LD_LIBRARY_PATH, taking libattn from the prefix (not
#     from a /usr/local install); the module imports with the PYTHONPATH
#     the configure summary names, loads the prefix's libattn and computes
#     one SDPA call right against numpy; `ninja uninstall` leaves no file;
# (b) `pip install --no-build-isolation --no-index .` in a venv with the
#     system site packages (numpy and meson-python from Debian): import from
#     outside the repository with no environment variables, one SDPA call,
#     attn.__version__ == the Meson project version; `pip uninstall -y attn`
#     leaves no attn file in the venv.
# Run from anywhere, as root (it apt-get installs python3-mesonpy,
# python3-venv, python3-pip, python3-numpy).  Exit code 0 only if every
# check passes.  JOBS (default 2) sets the compile jobs.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
export DEBIAN_FRONTEND=noninteractive
jobs=${JOBS:-2}
py=/usr/bin/python3
fail=0
check() {
    local what=$1; shift
    if "$@"; then echo "ok: $what"; else echo "FAILED: $what"; fail=$((fail + 1)); fi
}

for p in python3-mesonpy python3-venv python3-pip python3-numpy; do
    dpkg -s "$p" >/dev/null 2>&1 || apt-get install -y -qq "$p" >/dev/null ||
        { echo "cannot install $p"; exit 1; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
unset PYTHONPATH ATTN_LIBRARY LD_LIBRARY_PATH
version=$(meson introspect --projectinfo "$root/meson.build" |
          "$py" -c 'import json, sys; print(json.load(sys.stdin)["version"])')
echo "project version: $version"

# The SDPA check both parts run: argv[1] the directory the module must come
# from, argv[2] the one its libattn must come from, argv[3] the version.
cat > "$tmp/use.py" <<'PY'
import os
import sys

import numpy as np

import attn

mod_dir, lib_dir, version = sys.argv[1:4]
print("module:", attn.__file__)
print("libattn:", attn.library_path, attn.library_version())
print("__version__:", attn.__version__)
bad = []
if not os.path.realpath(attn.__file__).startswith(os.path.realpath(mod_dir) + os.sep):
    bad.append("module not from " + mod_dir)
if not os.path.realpath(attn.library_path).startswith(os.path.realpath(lib_dir) + os.sep):
    bad.append("libattn not from " + lib_dir)
if attn.__version__ != version:
    bad.append("__version__ %r, project version %r" % (attn.__version__, version))
rng = np.random.default_rng(7)
q = rng.standard_normal((2, 4, 6, 16), dtype=np.float32)
k = rng.standard_normal((2, 4, 9, 16), dtype=np.float32)
v = rng.standard_normal((2, 4, 9, 8), dtype=np.float32)
s = q.astype(np.float64) @ k.astype(np.float64).swapaxes(-1, -2) / 4.0
p = np.exp(s - s.max(-1, keepdims=True))
ref = (p / p.sum(-1, keepdims=True)) @ v
err = float(np.abs(attn.scaled_dot_product_attention(q, k, v) - ref).max())
print("SDPA max |error| against float64 numpy: %.3g (tolerance 1e-5)" % err)
if not err < 1e-5:
    bad.append("SDPA error %g" % err)
for b in bad:
    print("wrong:", b)
sys.exit(1 if bad else 0)
PY

echo "== (a) a custom prefix"
pfx=$tmp/prefix
b=$tmp/build
if meson setup "$b" "$root" --prefix="$pfx" -Dtests=disabled -Dbenchmarks=false -Dmpi=disabled \
        -Dpython=enabled >"$tmp/setup.log" 2>&1 &&
   nice meson compile -C "$b" -j "$jobs" >"$tmp/compile.log" 2>&1 &&
   meson install -C "$b" >"$tmp/install.log" 2>&1; then
    sed -n '/^  Install$/,/^$/p;/^  Python$/,/^$/p' "$tmp/setup.log"
    libdir=$(sed -n 's/^ *libdir *: //p' "$tmp/setup.log")
    pypath=$(sed -n 's/^ *PYTHONPATH *: //p' "$tmp/setup.log")
    echo "summary: libdir=$libdir PYTHONPATH=$pypath"
    check "summary names a libdir under the prefix" test "${libdir#"$pfx"/}" != "$libdir"
    check "summary names a PYTHONPATH under the prefix" test "${pypath#"$pfx"/}" != "$pypath"
    runpath=$(readelf -d "$pfx/bin/attn-demo" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]/\1/p')
    echo "attn-demo RUNPATH: $runpath"
    check "attn-demo has RUNPATH $libdir" test "$runpath" = "$libdir"
    check "attn-demo resolves libattn.so.1 in the prefix" \
        bash -c "ldd '$pfx/bin/attn-demo' | grep -q 'libattn.so.1 => $libdir/libattn.so.1 '"
    check "installed attn-demo --no-bench runs without LD_LIBRARY_PATH" \
        bash -c "cd '$tmp' && '$pfx/bin/attn-demo' --no-bench >'$tmp/demo.log' 2>&1 || { tail -20 '$tmp/demo.log'; false; }"
    check "installed module with the summary's PYTHONPATH: the prefix's libattn, one SDPA call, __version__" \
        bash -c "cd '$tmp' && PYTHONPATH='$pypath' '$py' use.py '$pypath' '$libdir' '$version'"
    ninja -C "$b" uninstall >"$tmp/uninstall.log" 2>&1
    # Python may have written __pycache__ into the module directory
    # (files Meson did not install, so it leaves them).
    left=$(find "$pfx" -type f -not -path '*/__pycache__/*' 2>/dev/null)
    [ -n "$left" ] && echo "left after uninstall: $left"
    check "ninja uninstall removes every installed file" test -z "$left"
else
    cat "$tmp/setup.log" "$tmp/compile.log" "$tmp/install.log" 2>/dev/null | tail -40
    echo "FAILED: configure/build/install to $pfx"; fail=$((fail + 1))
fi

echo "== (b) pip install in a venv"
venv=$tmp/venv
"$py" -m venv --system-site-packages "$venv"
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_path("platlib"))')
# In-tree build: meson-python makes a .mesonpy-* directory in the source
# tree and removes it; .mesonpy-native-file.ini stays (git-ignored).
if (cd "$tmp" && nice "$venv/bin/pip" install --no-index --no-build-isolation \
        --config-settings=compile-args=-j"$jobs" "$root") >"$tmp/pip.log" 2>&1; then
    tail -3 "$tmp/pip.log"
    check "pip-installed attn from outside the repository: module and libattn in the venv, one SDPA call, __version__" \
        bash -c "cd '$tmp' && '$venv/bin/python' use.py '$site/attn' '$site/attn' '$version'"
    check "pip show attn: version $version" \
        bash -c "'$venv/bin/pip' show attn | grep -x 'Version: $version' >/dev/null"
    "$venv/bin/pip" uninstall -y attn
    left=$(find "$venv" -iname '*attn*')
    [ -n "$left" ] && echo "left after pip uninstall: $left"
    check "pip uninstall -y attn leaves no attn file" test -z "$left"
else
    tail -40 "$tmp/pip.log"
    echo "FAILED: pip install --no-build-isolation ."; fail=$((fail + 1))
fi

[ "$fail" -eq 0 ] && echo "prefix.sh: OK" || echo "prefix.sh: $fail failed"
[ "$fail" -eq 0 ]
