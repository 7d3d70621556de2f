#!/usr/bin/env bash
# Builds and runs benchmarks/llmc-compare.c: attn against llm.c's CPU
# attention (train_gpt2.c) in the same run.  llm.c is not part of attn: give
# the path of a checkout (git clone https://github.com/karpathy/llm.c into
# a temporary folder outside this repository; nothing of it is copied here).
#
#   benchmarks/llmc-compare.sh LLMC_DIR [--threads N] [--runs R]
#
# Compiles with llm.c's own flags (-Ofast -march=native -fopenmp: its code
# and this harness are one translation unit) against the libattn of
# BUILD (default build/, after meson compile), into a temporary folder.
set -euo pipefail
[ $# -ge 1 ] || { sed -n '2,11p' "$0" >&2; exit 2; }
llmc=$(cd "$1" && pwd); shift
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$root/build}
[ -f "$llmc/train_gpt2.c" ] || { echo "llmc-compare.sh: no train_gpt2.c in $llmc" >&2; exit 2; }
[ -f "$build/lib/libattn.so" ] || { echo "llmc-compare.sh: build libattn first (meson compile -C $build)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cc -Ofast -march=native -fopenmp -DOMP -w -I"$llmc" -I"$root/include" \
    "$root/benchmarks/llmc-compare.c" -o "$tmp/llmc-compare" \
    -L"$build/lib" -Wl,-rpath,"$build/lib" -lattn -lm
"$tmp/llmc-compare" "$@"
