#!/usr/bin/env python3
"""Write the structured part of the fuzz seed corpus (test/fuzz/corpus/).

An input is read byte by byte by fuzz_attn.c (missing bytes read as 0):
  byte 0   bit 0: 0 = SDPA, 1 = MHA
  byte 1   0 = a valid problem, else the first planted invalid field
           (1 + (b - 1) % 19, see the BAD_* enum); >= 128 plants a second
  then     sizes, options, layouts, values, workspace: random here.
For each API and each invalid-field kind (and none) a few inputs with
random tails, plus SDPA shapes past a key tile (split keys) and past a
query sub-block.  Deterministic; the rest of the corpus is what
`attn-fuzz -merge=1` kept from fuzzing runs (files named by their SHA-1)
and the sdpa-bwd-* seeds: the SDPA backward's bytes follow the forward's
(whose length depends on what they decode), so those were picked from a
fuzzing run's corpus by what FUZZ_VERBOSE=1 printed for them ("bwd: ...
bad=X,Y"): the smallest input per planted backward field (BB_* in
fuzz_attn.c, sdpa-bwd-badNN), one with two, and valid ones with and
without dBias.

usage: gen_seeds.py OUTDIR
"""
import os
import random
import sys

BAD_KINDS = 19


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    rng = random.Random(20261123)
    seeds = {}
    for api in (0, 1):
        name = "sdpa" if api == 0 else "mha"
        for bad in range(BAD_KINDS + 1):
            for k in range(3 if bad == 0 else 2):
                tail = bytes(rng.randrange(256) for _ in range(rng.randrange(20, 90)))
                seeds["%s-bad%02d-%d" % (name, bad, k)] = bytes([api, bad]) + tail
        # every option bit and all three mask modes, valid
        for k in range(6):
            tail = bytearray(rng.randrange(256) for _ in range(80))
            seeds["%s-valid-opts-%d" % (name, k)] = bytes([api, 0]) + bytes(tail)
    # SDPA shapes: byte 9 selects them (after kind, bad and 7 sizes)
    for shape, label in ((1, "long-keys"), (2, "many-queries")):
        for k in range(3):
            b = bytearray(rng.randrange(256) for _ in range(90))
            b[0], b[1], b[9] = 0, 0, shape
            seeds["sdpa-%s-%d" % (label, k)] = bytes(b)
    # the empty input: the smallest valid problem
    seeds["sdpa-empty"] = b""
    seeds["mha-zeros"] = bytes([1])
    for name, data in sorted(seeds.items()):
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
    print("wrote %d seeds to %s" % (len(seeds), out))


if __name__ == "__main__":
    main()
