#!/usr/bin/env bash
# The Python suite under Debian 13's PyTorch 2.6, in a chroot (root; not run
# by .ci/run: the chroot's download, about 4 GB with torch, does not fit CI's
# time).  Usage, from the repository root after `meson compile -C BUILD`:
#
#   bash .ci/torch26.sh [BUILD]        (BUILD defaults to build)
#
# Creates /opt/trixie with debootstrap if it is not there (CHROOT=dir to
# choose another place), installs python3-torch, python3-numpy and OpenBLAS
# in it, bind-mounts the repository at its own path plus /proc and /sys
# (without them torch's cpuinfo fails and it runs without AVX), runs every
# test/python/test_*.py with the module from the source tree over BUILD's
# libattn, and unmounts.  Exits nonzero if a test fails.  To remove the
# chroot afterwards: rm -rf /opt/trixie.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-build}" && pwd)
ch=${CHROOT:-/opt/trixie}
if [ ! -x "$ch/usr/bin/python3" ] || ! chroot "$ch" python3 -c 'import torch' 2>/dev/null; then
    command -v debootstrap >/dev/null || apt-get install -y -qq debootstrap
    [ -x "$ch/bin/sh" ] || debootstrap --variant=minbase trixie "$ch" http://deb.debian.org/debian
    chroot "$ch" apt-get update -qq
    chroot "$ch" apt-get install -y -qq python3-torch python3-numpy libopenblas0-openmp libgomp1
fi
mounted=()
cleanup() { for m in "${mounted[@]}"; do umount -R "$m" || true; done; }
trap cleanup EXIT
mkdir -p "$ch$root"
for spec in "proc:$ch/proc" "sys:$ch/sys" "repo:$ch$root"; do
    what=${spec%%:*} where=${spec#*:}
    mountpoint -q "$where" && continue
    case $what in
        proc) mount -t proc proc "$where" ;;
        sys) mount --rbind /sys "$where" ;;
        repo) mount --bind "$root" "$where" ;;
    esac
    mounted=("$where" "${mounted[@]}")
done
[ "$build" = "${build#"$root"/}" ] && { echo "torch26.sh: BUILD must be inside the repository" >&2; exit 2; }
chroot "$ch" python3 -c 'import torch; print("chroot torch", torch.__version__)'
fail=0
for t in "$root"/test/python/test_*.py; do
    name=$(basename "$t" .py)
    args=()
    [ "$name" = test_abi ] && args=("$build/test/python/abi_layout")
    [ "$name" = test_version ] && args=("$(meson introspect "$build" --projectinfo |
        python3 -c 'import json, sys; print(json.load(sys.stdin)["version"])')"
        "$build/python/_build_config.py")
    if chroot "$ch" env ATTN_LIBRARY="$build/lib/libattn.so.1" PYTHONPATH="$root/python" \
        OPENBLAS_NUM_THREADS=1 PYTHONDONTWRITEBYTECODE=1 python3 "$t" "${args[@]}" \
        > "$build/torch26-$name.log" 2>&1; then
        echo "ok: $name (torch 2.6)"
    else
        rc=$?
        if [ $rc = 77 ]; then echo "skipped: $name"; else echo "FAILED: $name (log: $build/torch26-$name.log)"; fail=1; fi
    fi
done
exit $fail
