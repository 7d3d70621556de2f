"""attn-bench's case table for the scripts of benchmarks/: read from
`attn-bench --list --json` (the table is written once, in
benchmarks/cases.c), never copied here.

    import casetable
    cases = casetable.load("build/benchmarks/attn-bench")   # list of dicts
    s1 = casetable.by_id(cases)["S1"]                         # S1's fields

Each case has id, name, kind (dense, linear, global, bigbird, decode,
plan), B, Hq, Hkv, n, m, d, causal (with align), padded (with kv_lens),
mha, train, dropout, extra (only run when named), quick, group, ort; the
long kinds add window and global (global) or block and bigbird (bigbird),
the decode kind its rows.
"""
import json
import os
import subprocess
import sys

DEFAULT_BENCH = os.path.join("build", "benchmarks", "attn-bench")


def load(bench=DEFAULT_BENCH):
    """The table, in attn-bench's order.  Raises OSError or
    subprocess.CalledProcessError when the program cannot be run."""
    out = subprocess.run([bench, "--list", "--json"], check=True, capture_output=True,
                         text=True).stdout
    return json.loads(out)


def load_or_exit(bench=DEFAULT_BENCH):
    """load(), or exit with a message saying how to get the program."""
    try:
        return load(bench)
    except (OSError, subprocess.CalledProcessError, ValueError) as e:
        sys.exit("cannot read the case table from %s --list --json (%s): build it "
                 "(meson compile -C build) or name it with --bench" % (bench, e))


def by_id(cases, kinds=None):
    """{id: case} of the cases of the given kinds (all when None).  An id can
    stand twice in the table (S5: a dense case and a decode one): name the
    kinds to get the one wanted."""
    return {c["id"]: c for c in cases if kinds is None or c["kind"] in kinds}


def parse_with_table(ap):
    """ap's arguments and --bench, parsed; returns (args, the table)."""
    ap.add_argument("--bench", default=DEFAULT_BENCH,
                    help="attn-bench, for its case table (--list --json)")
    args = ap.parse_args()
    return args, load_or_exit(args.bench)


def bench_option(argv=None):
    """The --bench value of a command line, before the full parse (the
    table gives the choices of --case)."""
    argv = sys.argv[1:] if argv is None else argv
    for i, a in enumerate(argv):
        if a == "--bench" and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith("--bench="):
            return a.split("=", 1)[1]
    return DEFAULT_BENCH
