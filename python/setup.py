"""Builds adag._adag against libadag, and adag._data (the data stage,
src/data/*.c) against libadag-data.

Where libadag comes from, first found wins:
  1. ADAG_BUILD_DIR (a `make` build folder, e.g. the repo's build/): its
     libadag.so, with the repo's include/ (the folder above it);
  2. `pkg-config adag`: an install (`make install PREFIX=...`; set
     PKG_CONFIG_PATH to PREFIX/lib/pkgconfig for a prefix pkg-config does
     not search);
  3. the repo's build/ next to this python/ folder (an in-tree build).
The extension gets an rpath to that library folder, so `import adag` needs
no LD_LIBRARY_PATH. libadag-data is looked for the same way (the build
folder's libadag-data.so, `pkg-config adag-data`); without it adag._data is
not built and `import adag.data` says so.
"""
import glob
import os
import shutil
import subprocess
import sysconfig

from setuptools import Extension, setup

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


def in_tree(build):
    build = os.path.abspath(build)
    if not os.path.exists(os.path.join(build, "libadag.so")):
        raise SystemExit(f"adag: no libadag.so in {build}: run `make` in the repo first")
    return [os.path.join(os.path.dirname(build), "include")], build, "build folder " + build


def pkg_config(package="adag"):
    if not shutil.which("pkg-config"):
        return None
    try:
        cflags = subprocess.run(["pkg-config", "--cflags-only-I", package], check=True,
                                capture_output=True, text=True).stdout.split()
        libdir = subprocess.run(["pkg-config", "--variable=libdir", package], check=True,
                                capture_output=True, text=True).stdout.strip()
    except subprocess.CalledProcessError:
        return None
    return [f[2:] for f in cflags], libdir, f"pkg-config {package} ({libdir})"


def find_adag():
    if os.environ.get("ADAG_BUILD_DIR"):
        return in_tree(os.environ["ADAG_BUILD_DIR"])
    found = pkg_config()
    if found:
        return found
    build = os.path.join(REPO, "build")
    if os.path.exists(os.path.join(build, "libadag.so")):
        return in_tree(build)
    raise SystemExit("adag: libadag not found: set ADAG_BUILD_DIR to a build folder, install "
                     "adag (pkg-config adag), or run `make` in the repo")


includes, libdir, where = find_adag()
print(f"adag: building against {where}")
ext = Extension(
    "adag._adag",
    sources=sorted(glob.glob("src/*.c")),  # every C file of src/ is part of adag._adag
    include_dirs=includes + ["src"],
    library_dirs=[libdir],
    libraries=["adag", "dl"],
    runtime_library_dirs=[libdir],
    define_macros=[("ADAGPY_LIBDIR", '"' + libdir + '"')],
    extra_compile_args=["-std=c11", "-Wall", "-Wextra", "-Werror", "-Wno-missing-field-initializers",
                        "-Wno-cast-function-type"],
)
exts = [ext]

# The module adag-worker loads for Python actors (src/worker/pyworker.c): it
# starts an interpreter, so it links libpython, which a static Python lacks.
if sysconfig.get_config_var("Py_ENABLE_SHARED"):
    pylib = sysconfig.get_config_var("LDLIBRARY")  # libpython3.11.so
    pydir = sysconfig.get_config_var("LIBDIR")
    exts.append(Extension(
        "adag._pyworker",
        sources=["src/worker/pyworker.c"],
        include_dirs=includes + ["src"],
        library_dirs=[pydir],
        libraries=[pylib[3:].split(".so")[0], "dl"],
        runtime_library_dirs=[pydir],
        define_macros=[("ADAGPY_LIBPYTHON", '"' + sysconfig.get_config_var("INSTSONAME") + '"')],
        extra_compile_args=["-std=c11", "-Wall", "-Wextra", "-Werror",
                            "-Wno-missing-field-initializers"],
    ))
else:
    print("adag: this Python has no shared libpython: Python actors run as threads only "
          "(no adag/_pyworker module for process actors)")

def find_adag_data():
    if os.path.exists(os.path.join(libdir, "libadag-data.so")):
        return includes, libdir
    found = pkg_config("adag-data")
    return found[:2] if found else None


data = find_adag_data()
if data:
    exts.append(Extension(
        "adag._data",
        sources=sorted(glob.glob("src/data/*.c")),  # the data stage: a folder of its own
        include_dirs=data[0] + ["src"],
        library_dirs=[data[1]],
        libraries=["adag-data", "adag"],
        runtime_library_dirs=[data[1]],
        extra_compile_args=ext.extra_compile_args,
    ))
else:
    print("adag: no libadag-data next to libadag nor from pkg-config adag-data: "
          "adag._data (adag.data) is not built")
setup(ext_modules=exts)
