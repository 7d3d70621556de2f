"""Prints Debian python3's site-packages for the prefix argv[1], or nothing.

Debian's python3 installs for /usr/local under its posix_local scheme
(/usr/local/lib/python3.X/dist-packages, on sys.path).  Run by
python/meson.build at configure time; elsewhere Meson's default applies.
"""
import sys
import sysconfig

if sysconfig.get_default_scheme() == "posix_local":
    path = sysconfig.get_path("purelib", "posix_local")
    if path.startswith(sys.argv[1].rstrip("/") + "/"):
        print(path)
