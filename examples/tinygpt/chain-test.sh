#!/usr/bin/env bash
# tinygpt end to end, the short form CI runs (well under a minute at 2
# threads): training is the same at 1 and 2 threads (bitwise, with
# dropout); a short run ends below the unigram baseline on held-out text;
# some head of the trained checkpoint attends to the previous byte with a
# mean weight >= EXPECT_PREV; generation through the paged F16 KV cache
# gives the full forward's logits (within 2e-3 of the largest).
#   chain-test.sh TINYGPT STEPS EXPECT_PREV DATA_FILE... (or one directory)
set -uo pipefail
prog=$1 steps=$2 expect=$3
shift 3
# a directory stands for the files in it
[ $# -eq 1 ] && [ -d "$1" ] && set -- "$1"/*
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
ok() { echo "ok: $*"; }
bad() { echo "FAILED: $*"; fail=1; }
# tinygpt keeps the BLAS on one thread per call itself; let OpenMP have 2
unset OPENBLAS_NUM_THREADS OMP_NUM_THREADS

for t in 1 2; do
    "$prog" --steps 20 --dropout 0.1 --threads $t --save "$tmp/t$t.ckpt" --data "$@" > "$tmp/t$t.txt" ||
        bad "20 steps at $t thread(s)"
done
if cmp -s "$tmp/t1.ckpt" "$tmp/t2.ckpt"; then ok "20 steps with dropout 0.1: the same checkpoint bytes at 1 and 2 threads"
else bad "checkpoints differ between 1 and 2 threads"; fi

if "$prog" --steps "$steps" --threads 2 --save "$tmp/s.ckpt" --data "$@" > "$tmp/train.txt"; then
    line=$(grep '^eval loss' "$tmp/train.txt")
    read -r loss uni < <(echo "$line" | sed -E 's/^eval loss ([0-9.]+).*unigram baseline ([0-9.]+).*/\1 \2/')
    if awk -v a="$loss" -v b="$uni" 'BEGIN { exit !(a + 0.5 < b) }'; then
        ok "$steps steps: $line (at least 0.5 nats below the unigram)"
    else bad "$steps steps: $line (not 0.5 nats below the unigram)"; fi
    grep 'ms/step' "$tmp/train.txt"
else
    bad "training $steps steps"; cat "$tmp/train.txt"; exit 1
fi

if "$prog" --steps 0 --load "$tmp/s.ckpt" --heads-report --expect-prev "$expect" --data "$@" > "$tmp/heads.txt"; then
    ok "$(grep '^previous-token head' "$tmp/heads.txt") (>= $expect)"
else bad "head pattern:"; fi
sed -n '/^head /,/^previous/p' "$tmp/heads.txt"

if "$prog" --steps 0 --load "$tmp/s.ckpt" --generate 48 --prompt "The " --data "$@" > "$tmp/gen.txt"; then
    ok "$(grep '^generation check' "$tmp/gen.txt")"
else bad "generation: $(grep -A1 'generation check' "$tmp/gen.txt")"; fi
sed -n '/^generated/,/^generation check/p' "$tmp/gen.txt" | sed '$d'
exit $fail
