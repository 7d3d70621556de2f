#!/usr/bin/env python3
"""Turn view.html into demo_view.inc, the page template compiled into
attn-demo: four NUL-terminated char arrays, the text before the first
@SENTENCE@ (DEMO_VIEW_HEAD), before the second (DEMO_VIEW_BODY), before @DATA@
(DEMO_VIEW_DATA) and after it (DEMO_VIEW_TAIL).  Byte arrays rather than
string literals: C11 only promises 4095 characters per literal.

usage: embed.py view.html demo_view.inc
"""
import sys


def main():
    src, dst = sys.argv[1], sys.argv[2]
    text = open(src, "rb").read()
    parts = []
    for marker in (b"@SENTENCE@", b"@SENTENCE@", b"@DATA@"):
        head, sep, text = text.partition(marker)
        if not sep:
            sys.exit("embed.py: %s: marker %s missing" % (src, marker.decode()))
        parts.append(head)
    parts.append(text)
    if any(m in text for m in (b"@SENTENCE@", b"@DATA@")):
        sys.exit("embed.py: %s: a marker appears more than expected" % src)
    names = ("DEMO_VIEW_HEAD", "DEMO_VIEW_BODY", "DEMO_VIEW_DATA", "DEMO_VIEW_TAIL")
    out = ["/* Generated from examples/view/view.html by embed.py; do not edit. */\n"]
    for name, data in zip(names, parts):
        out.append("static const char %s[] = {\n" % name)
        data = data + b"\0"
        for i in range(0, len(data), 16):
            out.append("    " + ", ".join("%d" % b for b in data[i:i + 16]) + ",\n")
        out.append("};\n")
    with open(dst, "w") as f:
        f.write("".join(out))


if __name__ == "__main__":
    main()
