#!/usr/bin/env python3
"""Every source of libattn (and attn-bench) is compiled at the level the
build promises: the last -O flag on its command line is -O3 unless a debug
level (0 or g) was asked for.  At Debian's -O2 (buildtype plain with its
CFLAGS) the kernels' register arrays spill and the decode path ran 4x
slower, so a build that loses the flag is a slow package (lib/meson.build).

usage: build-flags.py BUILD_DIR OPTIMIZATION
"""
import json
import os
import shlex
import sys


def main():
    build, level = sys.argv[1], sys.argv[2]
    want = None if level in ('0', 'g') else '-O3'
    with open(os.path.join(build, 'compile_commands.json')) as f:
        entries = json.load(f)
    checked, bad = 0, []
    for e in entries:
        out = e.get('output', '')
        if not (out.startswith('lib/') or out.startswith('benchmarks/attn-bench')):
            continue
        if out.startswith('lib/mpi/'):
            continue   # libattn_mpi: the ring and its glue, no kernels
        args = e['arguments'] if 'arguments' in e else shlex.split(e['command'])
        levels = [a for a in args if a.startswith('-O')]
        last = levels[-1] if levels else None
        checked += 1
        if want is not None and last != want:
            bad.append('%s: last -O flag %s (flags %s)' % (e['file'], last, levels))
    if checked == 0:
        print('no libattn sources in compile_commands.json')
        return 1
    for b in bad:
        print(b)
    print('%d sources, %d not at %s' % (checked, len(bad), want or 'the build level'))
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
