#!/usr/bin/env bash
# tinygpt's checkpoints: a trained model saved and loaded gives the same
# evaluation loss, bitwise; a truncated, extended, wrong-magic,
# wrong-version, wrong-size or corrupted checkpoint is an error (exit 1 and
# a message naming the problem), never a crash.  With TINYGPT_WRAP set
# (e.g. "valgrind --error-exitcode=99 -q"), the corruption cases run under
# it, so a memory error there fails the case too.
#   ckpt-test.sh TINYGPT DATA_FILE
set -uo pipefail
prog=$1 data=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
ok() { echo "ok: $*"; }
bad() { echo "FAILED: $*"; fail=1; }
"$prog" --data "$data" --steps 3 --save "$tmp/a.ckpt" > "$tmp/train.txt" || { bad "training run"; exit 1; }
want=$(grep '^eval loss' "$tmp/train.txt")
got=$("$prog" --data "$data" --steps 0 --load "$tmp/a.ckpt" | grep '^eval loss')
[ -n "$want" ] && [ "$want" = "$got" ] && ok "saved and loaded: $got" || bad "loaded model: '$got', trained: '$want'"
size=$(stat -c %s "$tmp/a.ckpt")
patch() {   # patch FILE OFFSET HEXBYTES
    printf "$(echo "$3" | sed 's/../\\x&/g')" | dd of="$1" bs=1 seek="$2" conv=notrunc status=none
}
expect_error() {   # expect_error WHAT FILE PATTERN
    local out rc
    out=$(${TINYGPT_WRAP:-} "$prog" --data "$data" --steps 0 --load "$2" 2>&1)
    rc=$?
    if [ $rc -eq 1 ] && echo "$out" | grep -q "$3"; then ok "$1: $(echo "$out" | tail -1)"
    else bad "$1: exit $rc, output: $out"; fi
}
head -c $((size - 1)) "$tmp/a.ckpt" > "$tmp/trunc.ckpt"
expect_error "truncated by one byte" "$tmp/trunc.ckpt" "file size"
head -c 20 "$tmp/a.ckpt" > "$tmp/short.ckpt"
expect_error "truncated header" "$tmp/short.ckpt" "truncated header"
: > "$tmp/empty.ckpt"
expect_error "empty file" "$tmp/empty.ckpt" "magic"
cp "$tmp/a.ckpt" "$tmp/long.ckpt" && printf 'x' >> "$tmp/long.ckpt"
expect_error "one byte appended" "$tmp/long.ckpt" "file size"
cp "$tmp/a.ckpt" "$tmp/magic.ckpt" && patch "$tmp/magic.ckpt" 0 58
expect_error "wrong magic" "$tmp/magic.ckpt" "magic"
cp "$tmp/a.ckpt" "$tmp/ver.ckpt" && patch "$tmp/ver.ckpt" 8 02000000
expect_error "version 2" "$tmp/ver.ckpt" "version"
cp "$tmp/a.ckpt" "$tmp/width.ckpt" && patch "$tmp/width.ckpt" 16 80000000
expect_error "another width (E 128)" "$tmp/width.ckpt" "parameter count"
cp "$tmp/a.ckpt" "$tmp/heads.ckpt" && patch "$tmp/heads.ckpt" 20 07000000
expect_error "heads not dividing E" "$tmp/heads.ckpt" "out of range"
cp "$tmp/a.ckpt" "$tmp/huge.ckpt" && patch "$tmp/huge.ckpt" 16 ffffff7f
expect_error "width 2^31-1" "$tmp/huge.ckpt" "out of range"
cp "$tmp/a.ckpt" "$tmp/flip.ckpt" && patch "$tmp/flip.ckpt" 1000 ff
expect_error "a parameter byte flipped" "$tmp/flip.ckpt" "checksum"
expect_error "missing file" "$tmp/none.ckpt" "cannot open"
exit $fail
