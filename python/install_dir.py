"""Where the attn module installs for an install prefix, and whether that
directory is on this Python's default sys.path.

Usage: python3 -E install_dir.py PREFIX [PURELIBDIR]
Prints two lines: the directory (PURELIBDIR, made absolute under PREFIX,
when given), then "yes" or "no".  Run by python/meson.build at configure
time with the Python Meson found (-E: PYTHONPATH does not count).
"""
import os
import site
import sys
import sysconfig


def install_dir(prefix, explicit):
    if explicit:
        return os.path.join(prefix, explicit)
    schemes = sysconfig.get_scheme_names()
    # Debian's python3: posix_local (its default scheme, the one pip uses)
    # is /usr/local/lib/python3.X/dist-packages; deb_system is
    # /usr/lib/python3/dist-packages, where Debian's packages go.
    if prefix == "/usr/local" and sysconfig.get_default_scheme() == "posix_local":
        return sysconfig.get_path("purelib", "posix_local")
    if prefix == "/usr" and "deb_system" in schemes:
        return sysconfig.get_path("purelib", "deb_system")
    # This Python's own prefix (a venv, or a Python installed under it).
    if os.path.realpath(prefix) == os.path.realpath(sys.prefix):
        return sysconfig.get_path("purelib")
    # Any other prefix: where a Python installed there would look,
    # PREFIX/lib/python3.X/site-packages.
    return sysconfig.get_path("purelib", "posix_prefix",
                              vars={"base": prefix, "platbase": prefix,
                                    "installed_base": prefix,
                                    "installed_platbase": prefix})


def on_path(path):
    norm = os.path.realpath(path)
    if any(os.path.realpath(p) == norm for p in sys.path if p):
        return True
    # The user site (~/.local/lib/python3.X/site-packages) is on sys.path
    # once it exists; installing creates it.
    return bool(site.ENABLE_USER_SITE) and os.path.realpath(site.getusersitepackages()) == norm


def main():
    if len(sys.argv) not in (2, 3) or not os.path.isabs(sys.argv[1]):
        sys.exit("usage: install_dir.py ABSOLUTE_PREFIX [PURELIBDIR]")
    prefix = sys.argv[1].rstrip("/") or "/"
    path = install_dir(prefix, sys.argv[2] if len(sys.argv) == 3 else "")
    print(path)
    print("yes" if on_path(path) else "no")


main()
