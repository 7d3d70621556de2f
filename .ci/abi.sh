#!/usr/bin/env bash
# Two checks on one build (build-abi: debugoptimized, so that the library
# carries the DWARF the ABI tools read):
# 1. warnings are errors: the whole tree (library, tests, demo, benchmarks)
#    builds with --werror and the project's warnings (-Wall -Wextra
#    -Wshadow -Wstrict-prototypes -Wmissing-prototypes, meson.build);
# 2. the ABI of libattn.so.1 against the stored description of the latest 1.x (1.1)
#    abi/libattn.abi (libabigail's abidw; Debian: abigail-tools): abidiff
#    must find no change.  Additions only (new functions, no removed or
#    changed one) are compatible: the check then passes and says to store
#    the new description (.ci/abi.sh --update) with the change; so are
#    fields that take the room of a struct's reserved tail, with its size
#    and every other member's offset unchanged (.ci/abi_room.py reads
#    abidiff's report); anything else (a removed function, a changed
#    struct or signature) fails.
# --update   rewrite abi/libattn.abi from the build (after a reviewed,
#            compatible change).
# --selftest also build a copy of the library whose attn_sdpa_args has one
#            more pointer before its reserved tail, and require abidiff to
#            fail on it (shows the check catches a changed struct).
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
mode=${1:-check}
stored=abi/libattn.abi
lib=build-abi/lib/libattn.so.1
command -v abidiff >/dev/null || apt-get install -y -qq abigail-tools >/dev/null

if [ ! -f build-abi/build.ninja ]; then
    meson setup build-abi -Dbuildtype=debugoptimized --werror >/dev/null || exit 1
fi
meson compile -C build-abi >/dev/null || { echo "FAILED: --werror build (see above)"; meson compile -C build-abi 2>&1 | grep -E 'error|warning' | head -40; exit 1; }
echo "ok: the whole tree builds with --werror"

dump() { abidw --headers-dir include --drop-private-types --no-corpus-path --no-comp-dir-path --drop-undefined-syms "$1"; }
if [ "$mode" = "--update" ]; then
    dump "$lib" > "$stored" && echo "wrote $stored"
    exit
fi

# abidiff's exit status: bit 0 error, bit 1 usage, bit 2 some change,
# bit 3 an incompatible change (a removed symbol).
compare() {
    local out rc
    out=$(abidiff --headers-dir1 include --headers-dir2 "$2" "$stored" "$1")
    rc=$?
    echo "$out"
    if [ $rc -eq 0 ]; then
        return 0
    fi
    if [ $((rc & 11)) -eq 0 ] && echo "$out" | grep -q '^Functions changes summary: 0 Removed, 0 Changed' &&
       echo "$out" | grep -q '^Variables changes summary: 0 Removed, 0 Changed'; then
        echo "note: only additions; compatible. Store the new ABI: .ci/abi.sh --update"
        return 0
    fi
    if [ $((rc & 11)) -eq 0 ] && echo "$out" | python3 "$root/.ci/abi_room.py"; then
        echo "note: fields added in reserved room only; compatible. Store the new ABI: .ci/abi.sh --update"
        return 0
    fi
    return 1
}

if compare "$lib" include; then
    echo "ok: libattn.so.1 keeps the ABI of $stored"
else
    echo "FAILED: the ABI differs from $stored (above)"
    exit 1
fi

if [ "$mode" = "--selftest" ]; then
    tmp=$(mktemp -d)
    cp -r meson.build meson_options.txt include lib cmake "$tmp/"
    mkdir -p "$tmp/test/fuzz" "$tmp/test/python" "$tmp/python"
    printf '' > "$tmp/test/fuzz/meson.build"; printf '' > "$tmp/test/python/meson.build"
    printf '' > "$tmp/python/meson.build"
    python3 - "$tmp/include/attn.h" <<'PY'
import sys
p = sys.argv[1]
s = open(p).read()
old = "    const int32_t *block_table; /* [B][kv_max_blocks], when kv_block_size */\n"
assert old in s
s = s.replace(old, old + "    const float *extra;       /* the deliberate change */\n", 1)
open(p, "w").write(s)
PY
    (cd "$tmp" && meson setup b -Dbuildtype=debugoptimized -Dtests=disabled -Ddemo=false \
        -Dbenchmarks=false -Dpython=disabled >/dev/null && ninja -C b >/dev/null) ||
        { echo "FAILED: the self-test's build"; rm -rf "$tmp"; exit 1; }
    if compare "$tmp/b/lib/libattn.so.1" "$tmp/include" >"$tmp/report" 2>&1; then
        cat "$tmp/report"
        echo "FAILED: abidiff did not catch a changed attn_sdpa_args"
        rm -rf "$tmp"
        exit 1
    fi
    grep -E "size changed|insertion|offset changed" "$tmp/report" | head -5
    echo "ok: a changed attn_sdpa_args fails the check"
    rm -rf "$tmp"
fi
