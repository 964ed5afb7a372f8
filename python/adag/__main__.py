"""python -m adag info [-c | topo ...]: what `adag-info` prints for the
libadag this package was built against (it runs that adag-info: the build
folder's, or the install's bin/, else the first on PATH)."""
import os
import shutil
import sys

from . import _adag


def find_info():
    env = os.environ.get("ADAG_INFO")
    candidates = [env] if env else []
    candidates += [os.path.join(_adag.LIBDIR, "adag-info"),                  # a build folder
                   os.path.join(os.path.dirname(_adag.LIBDIR), "bin", "adag-info")]  # PREFIX/lib
    for c in candidates:
        if c and os.access(c, os.X_OK):
            return c
    return shutil.which("adag-info")


def main(argv):
    if not argv or argv[0] != "info":
        print("usage: python -m adag info [-c | topo [FILE.xml] | attach PID]", file=sys.stderr)
        return 2
    info = find_info()
    if not info:
        print(f"python -m adag info: no adag-info next to {_adag.LIBDIR}, in its bin/ or on "
              "PATH (set ADAG_INFO to it)", file=sys.stderr)
        return 1
    sys.stdout.flush()
    os.execv(info, [info] + argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
