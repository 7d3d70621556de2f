#!/bin/sh
# attn-bench's command line (meson test --suite cli): --help, bad cases and
# options, the run list of --quick (with --dry-run: nothing is timed).
#   cli-test.sh PATH/TO/attn-bench
# Exit 0 when every check passes; each failure is printed.
bench=${1:?usage: cli-test.sh PATH/TO/attn-bench}
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0
no() { echo "FAILED: $*"; fail=$((fail + 1)); }
ok() { echo "ok: $*"; }

# run ARGS...: status in $rc, stdout in $tmp/out, stderr in $tmp/err
run() {
    "$bench" "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
}

# --help: exit 0, to stdout, every case id of the table (--list --json) and
# a few written here, independently of the table
run --help
if [ "$rc" -eq 0 ] && [ -s "$tmp/out" ] && [ ! -s "$tmp/err" ]; then ok "--help exits 0"; else no "--help: exit $rc"; cat "$tmp/err"; fi
cp "$tmp/out" "$tmp/help"
"$bench" --list --json >"$tmp/list.json" || no "--list --json"
ids=$(sed -n 's/^ *{"id":"\([^"]*\)".*/\1/p' "$tmp/list.json")
n=0
for id in $ids S1 S2 S3 S4 S5 S6 S7 S8 S9 S2n S3n T1 T1d T2 T3 P1 L1-1k L1-64k X1-4k X2-16k D1 D2 D3 DL-512 DL-32k; do
    n=$((n + 1))
    grep -q "^$id " "$tmp/help" || no "--help does not list case $id"
done
[ "$n" -gt 40 ] && ok "--help lists the $n case ids" || no "only $n case ids ($ids)"
for opt in --case --threads --runs --quick --json --no-naive --bw-mib --kv-mib --types --list --dry-run --help; do
    grep -q -- "$opt" "$tmp/help" || no "--help does not mention $opt"
done
run -h
[ "$rc" -eq 0 ] && cmp -s "$tmp/out" "$tmp/help" && ok "-h is --help" || no "-h: exit $rc"

# expect_usage_error WHAT PATTERN ARGS...: exit 2, nothing on stdout, a
# message on stderr matching PATTERN (grep -E)
expect_usage_error() {
    what=$1 pattern=$2
    shift 2
    run "$@"
    if [ "$rc" -eq 2 ] && [ ! -s "$tmp/out" ] && grep -Eq -- "$pattern" "$tmp/err"; then
        ok "$what: exit 2, $(head -n 1 "$tmp/err")"
    else
        no "$what (attn-bench $*): exit $rc, stdout $(wc -c <"$tmp/out") bytes, stderr:"
        cat "$tmp/err"
    fi
}
expect_usage_error "an unknown case" "no case 'NOPE'" --case NOPE
expect_usage_error "a mis-cased case" "no case 's1'.*did you mean S1" --case s1
expect_usage_error "a mis-cased group" "no case 'dl'.*did you mean DL" --case dl
expect_usage_error "an unknown case after a good one" "no case 'S99'" --case S8 --case S99
expect_usage_error "--case without a value" "--case needs a value" --case
expect_usage_error "--runs without a value" "--runs needs a value" --quick --runs
expect_usage_error "--runs abc" "--runs takes a whole number, not 'abc'" --runs abc
expect_usage_error "--runs 5x" "--runs takes a whole number, not '5x'" --runs 5x
expect_usage_error "--runs 0" "--runs 0: out of range" --runs 0
expect_usage_error "--threads 0" "--threads 0: out of range" --threads 0
expect_usage_error "--threads -2" "--threads -2: out of range" --threads -2
expect_usage_error "--threads 99999999999999999999" "--threads takes a whole number" --threads 99999999999999999999
expect_usage_error "nine --threads" "--threads: at most 8" --threads 1 --threads 1 --threads 1 --threads 1 --threads 1 --threads 1 --threads 1 --threads 1 --threads 1
expect_usage_error "--bw-mib -1" "--bw-mib -1: out of range" --bw-mib -1
expect_usage_error "--kv-mib ''" "--kv-mib takes a whole number, not ''" --kv-mib ""
expect_usage_error "--types f64" "--types: no type 'f64'" --types f32,f64
expect_usage_error "--types ," "--types: an empty list" --types ,
expect_usage_error "an unknown option" "unknown option --frobnicate" --frobnicate
expect_usage_error "a bare case name" "unexpected argument 'S1'" S1
expect_usage_error "--dry-run --json" "--dry-run prints text" --dry-run --json

# --quick's run list (--dry-run: printed, nothing measured): S8 and P1 at
# 1 thread, 5 runs, and a read-bandwidth buffer of at most 256 MiB
run --quick --dry-run
if [ "$rc" -eq 0 ] && grep -q '^--quick runs at 1 thread: .* S8 (vit), P1 (plan-cost); 5 timed runs each' "$tmp/out"; then
    ok "--quick prints its runs: $(grep '^--quick runs' "$tmp/out")"
else
    no "--quick --dry-run: exit $rc"; cat "$tmp/out" "$tmp/err"
fi
mib=$(sed -n 's/.*read bandwidth over \([0-9]*\) MiB.*/\1/p' "$tmp/out")
if [ -n "$mib" ] && [ "$mib" -ge 64 ] && [ "$mib" -le 256 ]; then ok "--quick: read bandwidth over $mib MiB"; else no "--quick: read bandwidth over '$mib' MiB"; fi
grep -Eq '^attn .* \| BLAS .*, (sequential|pthreads|openmp|unknown) threading' "$tmp/out" &&
    ok "the BLAS threading by name: $(head -n 1 "$tmp/out" | sed 's/.*| BLAS \([^(]*\)(.*/\1/')" ||
    no "no BLAS threading by name: $(head -n 1 "$tmp/out")"
run --case S1 --case D --threads 2 --runs 3 --no-naive --dry-run
grep -q '^runs at 2 threads: .* S1 (bert-base), S5 (decode-f32), D1 (.*), D2 (.*), D3 (.*); 3 timed runs each after 2 warm-up; no naive path' "$tmp/out" &&
    ok "--case S1 --case D: $(grep '^runs' "$tmp/out")" || { no "--case S1 --case D --dry-run: exit $rc"; cat "$tmp/out"; }

# A decode case for real (small copies, one run): each row's %bw is against
# the bandwidth sampled between its own calls (read_gbs, beside the run's
# read_gbs_run), and %roof against the FMA peak sampled the same way.
run --case D1 --threads 1 --runs 1 --kv-mib 64 --bw-mib 64 --json --no-naive
if [ "$rc" -eq 0 ]; then
    bad=$(grep '"kind":"decode"' "$tmp/out" | awk '
        function num(k,   m) { if (match($0, "\"" k "\":[-0-9.e+]+")) return substr($0, RSTART + length(k) + 3, RLENGTH - length(k) - 3) + 0; return -1 }
        /"ok":true/ { n++; g = num("gbs"); b = num("read_gbs"); f = num("frac_bw"); r = num("read_gbs_run"); p = num("fma_local_gflops")
                      if (b <= 0 || r <= 0 || p <= 0 || f <= 0 || (f * b - g) > 0.005 * g || (g - f * b) > 0.005 * g) print "row " n ": gbs " g " read_gbs " b " frac_bw " f " read_gbs_run " r " fma_local " p }
        END { if (n < 2) print "only " n + 0 " decode rows" }')
    [ -z "$bad" ] && ok "D1 for real: every row's %bw against its own bandwidth samples" || no "D1 --json: $bad"
else
    no "D1 --json: exit $rc"; cat "$tmp/err"
fi

echo "attn-bench command line: $fail failed"
[ "$fail" -eq 0 ]
