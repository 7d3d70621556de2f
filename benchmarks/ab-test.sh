#!/bin/sh
# attn-ab's test (benchmarks/meson.build): $1 attn-ab, $2 this build's
# libattn.so.  An A/A run of each kind of call on a small cache must print
# both builds and a ratio; a bad command line must exit 2 with a message.
set -u
ab=$1 lib=$2
fail=0
# attn-ab copies the libraries into a folder of its own under $TMPDIR and
# must leave nothing behind
TMPDIR=$(mktemp -d) || exit 1
export TMPDIR
check_run() {
    out=$("$ab" "$lib" "$lib" "$@" --kv-len 256 --calls 10 --copies 2) || {
        echo "FAIL: attn-ab $* exited $?"; fail=1; return; }
    for want in "^A  attn " "^B  attn " "^B / A  median [0-9.]*  p10 [0-9.]*$"; do
        printf '%s\n' "$out" | grep -q "$want" || {
            echo "FAIL: attn-ab $*: no line matching '$want' in:"; printf '%s\n' "$out"; fail=1; }
    done
    echo "ok: attn-ab $*"
}
check_run --type f32
check_run --type f16 --queries 4
check_run --type q8_0 --paged --int8 --threads 2
check_run --type q4_0 --queries 32
check_run --type bf16 --lib-copies 1
check_run --type f32 --lib-copies 16
check_run --type q4_0 --paged --offset 64
check_run --type f16 --queries 4 --head-dim 64
check_run --type f16 --paged --batch 4 --ragged --threads 2
check_run --type q8_0 --batch 3 --queries 4 --ragged
check_bad() {
    "$ab" "$@" > /dev/null 2> err.txt
    rc=$?
    if [ "$rc" != 2 ] || ! grep -q "attn-ab: " err.txt; then
        echo "FAIL: attn-ab $* exited $rc, stderr: $(cat err.txt)"; fail=1
    else
        echo "ok: attn-ab $* exits 2: $(head -n 1 err.txt)"
    fi
}
check_bad "$lib"
check_bad "$lib" "$lib" --type q5_1
check_bad "$lib" "$lib" --kv-len 100
check_bad "$lib" "$lib" --calls 5
check_bad "$lib" "$lib" --int8 --type f16
check_bad "$lib" "$lib" --frobnicate
check_bad "$lib" "$lib" --lib-copies 0
check_bad "$lib" "$lib" --lib-copies 17
check_bad "$lib" "$lib" --offset 4096
check_bad "$lib" "$lib" --head-dim 48
check_bad "$lib" "$lib" --head-dim 512
check_bad "$lib" "$lib" --batch 0
check_bad "$lib" "$lib" --batch 65
"$ab" /nonexistent/libattn.so "$lib" > /dev/null 2> err.txt
rc=$?
if [ "$rc" != 1 ]; then echo "FAIL: a missing library exited $rc"; fail=1; else echo "ok: a missing library exits 1"; fi
"$ab" --help | grep -q "^usage: attn-ab" || { echo "FAIL: --help"; fail=1; }
rm -f err.txt
left=$(ls -A "$TMPDIR")
if [ -n "$left" ]; then echo "FAIL: attn-ab left in \$TMPDIR: $left"; fail=1; else echo "ok: nothing left in \$TMPDIR"; fi
rmdir "$TMPDIR"
exit $fail
