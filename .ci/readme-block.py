#!/usr/bin/env python3
"""Print the fenced code block that follows <!-- ci:NAME --> in README.md,
so CI runs the README's commands and example exactly as written."""
import pathlib
import re
import sys

name = sys.argv[1]
text = pathlib.Path(sys.argv[2] if len(sys.argv) > 2 else "README.md").read_text()
m = re.search(r"<!-- ci:%s -->\s*```[a-z]*\n(.*?)```" % re.escape(name), text, re.S)
if not m:
    sys.exit("README.md has no block marked ci:%s" % name)
sys.stdout.write(m.group(1))
