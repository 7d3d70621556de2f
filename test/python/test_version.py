"""attn.__version__ and the ways the module finds libattn.

argv[1] is the Meson project version, argv[2] the configured
_build_config.py of this build directory.  Checks, each in its own
interpreter where the environment matters:

1. the source tree (PYTHONPATH=python, ATTN_LIBRARY, no configured file):
   __version__ is the loaded library's attn_version(), the project version;
2. an installed layout (the module's files and the configured
   _build_config.py copied to a temporary directory): __version__ is the
   configured VERSION, the project version;
3. a wheel's layout (BUNDLED names a copy of libattn beside __init__.py,
   no ATTN_LIBRARY): that copy is the one loaded, and one SDPA call is
   right against float64 numpy;
4. the same with the copy missing: the import fails and names the path,
   with no fallback to another libattn.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile

import attn


def run(code, pkg_parent, env_extra, drop=("ATTN_LIBRARY",)):
    env = {k: v for k, v in os.environ.items() if k not in drop and k != "PYTHONPATH"}
    env["PYTHONPATH"] = pkg_parent
    env.update(env_extra)
    return subprocess.run([sys.executable, "-c", code], env=env, cwd=pkg_parent,
                          capture_output=True, text=True)


def main():
    version, build_config = sys.argv[1], sys.argv[2]
    failures = []

    def check(ok, what):
        print("%s: %s" % ("ok" if ok else "FAILED", what))
        if not ok:
            failures.append(what)

    check(re.fullmatch(r"\d+\.\d+\.\d+", version) is not None,
          "project version %r is MAJOR.MINOR.PATCH" % version)
    # 1. the source tree
    check(attn.__version__ == version,
          "source tree: attn.__version__ %r == %r" % (attn.__version__, version))
    check(attn.library_version() == version,
          "library_version() %r == %r" % (attn.library_version(), version))
    check("__version__" in attn.__all__, "__version__ in attn.__all__")

    libfile = os.path.realpath(os.environ["ATTN_LIBRARY"])
    src_pkg = os.path.dirname(os.path.abspath(attn.__file__))
    with tempfile.TemporaryDirectory() as tmp:
        pkg = os.path.join(tmp, "attn")
        shutil.copytree(src_pkg, pkg, ignore=shutil.ignore_patterns("*.in", "__pycache__"))
        shutil.copy(build_config, os.path.join(pkg, "_build_config.py"))

        # 2. installed layout: VERSION from the configured file
        r = run("import attn; print(attn.__version__)", tmp,
                {"ATTN_LIBRARY": libfile}, drop=())
        check(r.returncode == 0 and r.stdout.strip() == version,
              "installed layout: __version__ %r == %r %s" % (r.stdout.strip(), version, r.stderr[-300:]))

        # 3. a wheel's layout: the copy beside the module
        name = os.path.basename(libfile)
        shutil.copy(libfile, os.path.join(pkg, name))
        with open(os.path.join(pkg, "_build_config.py"), "a") as f:
            f.write("\nLIBRARY = ''\nBUNDLED = %r\n" % name)
        r = run("""
import numpy as np, attn
rng = np.random.default_rng(3)
q = rng.standard_normal((1, 2, 3, 8), dtype=np.float32)
k = rng.standard_normal((1, 2, 5, 8), dtype=np.float32)
v = rng.standard_normal((1, 2, 5, 4), dtype=np.float32)
s = q.astype(np.float64) @ k.astype(np.float64).swapaxes(-1, -2) / np.sqrt(8)
p = np.exp(s - s.max(-1, keepdims=True))
ref = (p / p.sum(-1, keepdims=True)) @ v
print(attn.library_path)
print(attn.__version__)
print(float(np.abs(attn.scaled_dot_product_attention(q, k, v) - ref).max()))
""", tmp, {})
        lines = r.stdout.split()
        ok = r.returncode == 0 and len(lines) == 3
        check(ok and os.path.realpath(lines[0]) == os.path.realpath(os.path.join(pkg, name)),
              "wheel layout: loads the copy beside the module (%s) %s" % (lines[:1], r.stderr[-300:]))
        check(ok and lines[1] == version, "wheel layout: __version__ %s" % lines[1:2])
        # float32 SDPA against float64: 1e-5 absolute on values of size ~1
        check(ok and float(lines[2]) < 1e-5, "wheel layout: SDPA max |error| %s < 1e-5" % lines[2:3])

        # 4. the copy missing: an error naming it, no other libattn loaded
        os.remove(os.path.join(pkg, name))
        r = run("import attn", tmp, {})
        check(r.returncode != 0 and os.path.join(pkg, name) in r.stderr
              and "beside the module" in r.stderr,
              "wheel layout, copy missing: the import fails naming it (%s)" %
              r.stderr.strip().splitlines()[-1:])

    print("version: %d failures" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
