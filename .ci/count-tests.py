#!/usr/bin/env python3
"""Add up test cases from Meson's JSON test logs.  A CMocka executable
counts as its test cases (from its '[  PASSED  ]' / '[  FAILED  ]' lines);
any other test, or a CMocka executable that died before its summary, counts
as one; skipped CMocka cases count as neither.  Prints 'PASSED FAILED'."""
import json
import re
import sys

passed = failed = 0
for path in sys.argv[1:]:
    try:
        lines = open(path).read().splitlines()
    except OSError:
        continue
    for line in lines:
        if not line.strip():
            continue
        t = json.loads(line)
        out = (t.get("stdout") or "") + (t.get("stderr") or "")
        p = sum(int(x) for x in re.findall(r"\[  PASSED  \] (\d+) test", out))
        f = sum(int(x) for x in re.findall(r"\[  FAILED  \] (\d+) test", out))
        ok = t.get("result") in ("OK", "EXPECTEDFAIL", "SKIP")
        # A CMocka summary was printed (skipped test cases count as neither).
        cmocka = re.search(r"\[=+\] \d+ test\(s\) run", out) is not None
        if cmocka or p or f:
            passed += p
            failed += f
            if not ok and f == 0:
                failed += 1        # crashed or leaked after its summary
        elif ok:
            passed += 1
        else:
            failed += 1
print(passed, failed)
