"""Python classes as adag actors: the Python half of python/src/pyactor.c.

The driver describes a class (its methods, their argument and return
counts) and packs what a worker needs to make the same class and its
instance: where to import the class from (its module and qualified name,
or the script for a class of __main__), the driver's sys.path, and the
constructor's arguments, pickled. adag-worker loads the package's worker
module (adag/_pyworker*.so, python/src/worker/pyworker.c), which starts an
interpreter and calls resolve() and construct() here.
"""
import glob
import importlib
import inspect
import os
import pickle
import runpy
import sys
import traceback

# the module adag-worker loads for a Python class (python/src/worker/pyworker.c)
_HERE = os.path.dirname(os.path.abspath(__file__))
_found = sorted(glob.glob(os.path.join(_HERE, "_pyworker*.so")))
WORKER_MODULE = _found[0] if _found else None

MAX_METHODS = 128  # the trampolines python/src/pyactor.c has


def method(fn=None, *, returns=1):
    """Declares how many values a method returns (a tuple of that many):
    @adag.method(returns=2). Without it a method has one return."""
    if not isinstance(returns, int) or not 1 <= returns <= 16:
        raise ValueError(f"adag.method: returns={returns!r}: an int in 1..16")

    def mark(f):
        f.__adag_returns__ = returns
        return f
    return mark(fn) if fn is not None else mark


def describe(cls):
    """[(name, function, nargs, nreturns)] of cls's actor methods: its
    public functions (not starting with "_"), their positional parameters
    after self the arguments. Refuses what a static DAG cannot call."""
    if not isinstance(cls, type):
        raise TypeError(f"adag: an actor class must be a class, not {type(cls).__name__}")
    methods = []
    for name in sorted(dir(cls)):
        if name.startswith("_"):
            continue
        raw = inspect.getattr_static(cls, name)
        if isinstance(raw, (staticmethod, classmethod, property)) or not inspect.isfunction(raw):
            continue
        params = list(inspect.signature(raw).parameters.values())[1:]
        where = f"{cls.__qualname__}.{name}"
        for p in params:
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                raise TypeError(f"adag: method {where} takes *args or **kwargs: an actor method "
                                f"takes a fixed number of arguments")
            if p.kind == p.KEYWORD_ONLY and p.default is p.empty:
                raise TypeError(f"adag: method {where} has a keyword-only parameter {p.name} "
                                f"without a default")
        nargs = sum(1 for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))
        if nargs > 16:
            raise TypeError(f"adag: method {where} takes {nargs} arguments, at most 16")
        if len(name.encode()) >= 64:
            raise TypeError(f"adag: method name {name} is over 63 bytes")
        methods.append((name, raw, nargs, getattr(raw, "__adag_returns__", 1)))
    if not methods:
        raise TypeError(f"adag: class {cls.__qualname__} has no public methods to bind")
    if len(methods) > MAX_METHODS:
        raise TypeError(f"adag: class {cls.__qualname__} has {len(methods)} public methods, at "
                        f"most {MAX_METHODS}")
    return methods


def class_name(cls):
    """The adag class name of a Python class: module.qualname, its last 63 bytes."""
    name = f"{cls.__module__}.{cls.__qualname__}".encode()
    return name[-63:].decode(errors="ignore")


def init_bytes(cls, args, kwargs):
    """What a worker needs to make cls(*args, **kwargs): its init bytes."""
    if WORKER_MODULE is None:
        raise RuntimeError("adag: this install has no worker module (adag/_pyworker*.so): "
                           "Python actors in processes need an interpreter built with a "
                           "shared libpython")
    if "<locals>" in cls.__qualname__:
        raise TypeError(f"adag: class {cls.__qualname__} is defined inside a function: a worker "
                        f"process cannot import it (define it at a module's top level, or use "
                        f"placement=\"thread\")")
    spec = {"module": cls.__module__, "qualname": cls.__qualname__, "path": list(sys.path),
            "main": None}
    if cls.__module__ == "__main__":
        main = getattr(sys.modules["__main__"], "__file__", None)
        if not main:
            raise TypeError(f"adag: class {cls.__qualname__} is defined in an interactive "
                            f"__main__: a worker process cannot import it (put it in a module, "
                            f"or use placement=\"thread\")")
        spec["main"] = os.path.abspath(main)
    try:
        argblob = pickle.dumps((tuple(args), dict(kwargs)))
    except Exception as e:
        raise TypeError(f"adag: the arguments of {cls.__qualname__}(...) cannot be pickled for "
                        f"its worker process: {e}") from e
    return pickle.dumps((spec, argblob))


def _load_class(spec):
    for p in reversed(spec["path"]):
        if p not in sys.path:
            sys.path.insert(0, p)
    if spec["main"]:
        # the driver's script, run as a module that is not __main__ (its
        # `if __name__ == "__main__":` part does not run), as multiprocessing does
        name = "__adag_main__"
        if name not in sys.modules:
            mod = type(sys)(name)
            mod.__dict__.update(runpy.run_path(spec["main"], run_name=name))
            sys.modules[name] = mod
            # what the driver pickled as __main__.X unpickles from here
            sys.modules["__main__"] = mod
        obj = sys.modules[name]
    else:
        obj = importlib.import_module(spec["module"])
    for part in spec["qualname"].split("."):
        obj = getattr(obj, part)
    return obj


def resolve(data):
    """In a worker: (cls, describe(cls)) for init bytes made by init_bytes()."""
    spec, _ = pickle.loads(data)
    cls = _load_class(spec)
    return cls, describe(cls)


def construct(cls, data):
    """In a worker: the instance, from the init bytes' arguments."""
    _, argblob = pickle.loads(data)
    args, kwargs = pickle.loads(argblob)
    return cls(*args, **kwargs)


def explain(exc):
    """One line for an exception: "Type: message (at file:line in fn; ...)",
    the last three frames of its traceback."""
    what = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    frames = traceback.extract_tb(exc.__traceback__)[-3:]
    if frames:
        where = "; ".join(f"{os.path.basename(f.filename)}:{f.lineno} in {f.name}"
                          for f in frames)
        what += f" (at {where})"
    return what
