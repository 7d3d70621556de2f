"""The ctypes mirrors of python/attn/_lib.py against the C layout.

argv[1] is the abi_layout program (test/python/abi_layout.c), which prints
sizeof and offsetof of every mirrored struct and field as the C compiler
lays out attn.h.  Every struct size, every field offset and every field of
both sides must agree (a field missing on either side fails).  Also checks
the status names against attn_status_str's range and the enum sizes.
"""

import ctypes
import subprocess
import sys

from attn import _lib


def main():
    text = subprocess.run([sys.argv[1]], check=True, capture_output=True,
                          text=True).stdout
    c = {}
    for line in text.splitlines():
        name, kind, value = line.split()
        c[(name, kind)] = int(value)
    failures = []
    checked = 0
    py_fields = set()
    for cname, cls in _lib.STRUCTS.items():
        checked += 1
        if c.get((cname, "size")) != ctypes.sizeof(cls):
            failures.append("%s: sizeof C %s, ctypes %d" %
                            (cname, c.get((cname, "size")), ctypes.sizeof(cls)))
        for fname, _ in cls._fields_:
            key = (cname + "." + fname, "offset")
            py_fields.add(key)
            checked += 1
            off = getattr(cls, fname).offset
            if key not in c:
                failures.append("%s.%s: not in the C listing" % (cname, fname))
            elif c[key] != off:
                failures.append("%s.%s: offset C %d, ctypes %d" % (cname, fname, c[key], off))
    for key in c:
        if key[1] == "offset" and key not in py_fields:
            failures.append("%s: in the C listing, not mirrored" % key[0])
    for enum in ("attn_status", "attn_align", "attn_mask_mode", "attn_weights_mode",
                 "attn_dtype", "attn_feature_map", "attn_engine"):
        checked += 1
        if c[(enum, "size")] != ctypes.sizeof(ctypes.c_int):
            failures.append("%s: size %d, mirrored as c_int" % (enum, c[(enum, "size")]))
    # Every status has a name here and a text in the library; one past the
    # last is "unknown status".
    for s, name in enumerate(_lib.STATUS_NAMES):
        checked += 1
        txt = _lib.status_str(s).decode()
        if not txt or txt == "unknown status":
            failures.append("%s (%d): attn_status_str gives %r" % (name, s, txt))
    checked += 1
    if _lib.status_str(len(_lib.STATUS_NAMES)).decode() != "unknown status":
        failures.append("attn has more statuses than _lib.STATUS_NAMES")
    for f in failures:
        print("FAIL:", f)
    print("abi: %d checks, %d failures" % (checked, len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
