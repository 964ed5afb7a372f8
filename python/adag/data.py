"""adag.data: the data stage (libadag-data, include/adag/data.h) from Python.

    import adag.data
    with adag.data.Source("/data/train-*.npy", batch_size=64, shuffle=True, seed=1) as src:
        for batch in src:            # numpy arrays [64, *row], views of the batch's memory
            train_step(batch)
            save(src.cursor)         # Source(..., resume=cursor) continues right after it

A batch is a numpy array (a tuple-free dict of arrays for a structured
dtype: one per field) that views the source's batch memory, valid until the
next batch is asked for or the source closes (copy=True: arrays of their
own). See docs/guide/python.md, "The data stage".
"""
import atexit
import collections
import dataclasses
import glob as _glob
import math
import os
import weakref
from typing import Any, Callable, Optional, Sequence, Tuple, Union

import numpy as np

from . import CompiledDAG, Error, ERRORS

try:
    from . import _data
except ImportError as e:  # built without libadag-data
    raise ImportError("adag.data: the extension adag._data is not built (setup.py found no "
                      "libadag-data: build the repository with `make`, or install "
                      "adag-data)") from e


def _error_classes():
    """{status: class}: the classes adag._adag made, one per ADAG_ERR_* code."""
    table = {}
    for code in range(1, 64):
        name = _data.status_str(-code).split(":")[0]
        if not name.startswith("ADAG_ERR_"):
            break
        cls = ERRORS.get("".join(w.capitalize() for w in name[9:].split("_")) + "Error")
        if cls is not None:
            table[-code] = cls
    return table


_data._setup(_error_classes(), Error, CompiledDAG)

Sample = _data.Sample
FORMATS = {"records": _data.FORMAT_RECORDS, "npy": _data.FORMAT_NPY,
           "tokens": _data.FORMAT_TOKENS, "webdataset": _data.FORMAT_WEBDATASET,
           "files": _data.FORMAT_FILES}
_SUFFIX_FORMATS = {".npy": "npy", ".tar": "webdataset", ".bin": "tokens", ".idx": "tokens"}
_RANKS = {"drop": _data.RANKS_DROP, "pad": _data.RANKS_PAD}
_BAD = {"fail": _data.BAD_FAIL, "skip": _data.BAD_SKIP}
# numpy dtypes that have an adag dtype (a sample tensor's, ADAG_DATA_PARAM_TENSOR)
_ADAG_DTYPES = {np.dtype(k): getattr(_data, "DTYPE_" + v) for k, v in (
    ("u1", "U8"), ("i1", "I8"), ("<i2", "I16"), ("<i4", "I32"), ("<i8", "I64"),
    ("<f2", "F16"), ("<f4", "F32"), ("<f8", "F64"), ("?", "BOOL"))}
# the Megatron .idx dtype codes
_TOKEN_DTYPES = {1: "u1", 2: "i1", 3: "<i2", 4: "<i4", 5: "<i8", 6: "<f8", 7: "<f4", 8: "<u2"}
_IMAGE_DTYPES = {"float32": _data.DTYPE_F32, "float16": _data.DTYPE_F16,
                 "bfloat16": _data.DTYPE_BF16}
_SHUFFLE_ALL = 0xFFFFFFFF  # a window past any epoch's end: the whole epoch permuted

Cursor = collections.namedtuple("Cursor", "epoch batch")
Cursor.__doc__ = ("Where a source stands: the epoch, and this rank's batches of it consumed. "
                  "Source(..., resume=cursor) continues there.")


@dataclasses.dataclass(frozen=True)
class Stats:
    """adag_data_stats at one moment; str() is adag_data_format_stats' text."""
    batches: int          # delivered
    samples: int          # decoded into batches
    bytes_read: int       # from shards
    bad_skipped: int      # records or shards skipped (bad="skip")
    budget: int           # bytes the source may hold
    bytes_held: int       # now
    bytes_peak: int       # most ever held at once
    starved_s: float      # time next() waited for a batch
    blocked_s: float      # time the threads waited for budget or the consumer
    cache_hits: int       # http(s) shards found valid in the cache
    cache_misses: int     # fetched
    bytes_fetched: int
    elapsed_s: float      # since the source opened
    map_s: float          # time in the map, summed over the threads
    steps_s: Tuple[float, ...]  # time in each step
    text: str = dataclasses.field(repr=False, compare=False)

    def __str__(self):
        return self.text


@dataclasses.dataclass(frozen=True)
class Image:
    """The built-in image transform (adag_data_image_t): JPEG -> random-resized
    crop -> flip -> normalize -> a CHW tensor [3, height, width]. None: the
    library's default."""
    height: int
    width: int
    field: Optional[int] = None            # WebDataset: which of `fields` holds the JPEG
    scale: Optional[Tuple[float, float]] = None   # area fraction range (0.08, 1)
    ratio: Optional[Tuple[float, float]] = None   # aspect ratio range (3/4, 4/3)
    flip: Optional[float] = None           # probability of a left-right flip (0.5)
    mean: Optional[Tuple[float, float, float]] = None  # with std: ImageNet's by default
    std: Optional[Tuple[float, float, float]] = None
    dtype: str = "float32"                 # "float32", "float16" or "bfloat16"
    max_pixels: Optional[int] = None       # most pixels decoded at once (2048 x 2048)

    def _params(self):
        if (self.mean is None) != (self.std is None):
            raise ValueError("Image: mean and std go together (both or neither)")
        if self.dtype not in _IMAGE_DTYPES:
            raise ValueError(f"Image(dtype={self.dtype!r}): one of {sorted(_IMAGE_DTYPES)}")
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        d["dtype"] = _IMAGE_DTYPES[self.dtype]
        if self.flip is not None:
            d["flip"] = (self.flip,)
        return d


class Execution:
    """An execution of the fed DAG that the source started with a batch as its
    input (adag_data_next_exec). get() waits for its outputs and releases it."""
    __slots__ = ("_ex", "epoch", "batch", "cursor")

    def __init__(self, ex, epoch, batch, cursor):
        self._ex, self.epoch, self.batch, self.cursor = ex, epoch, batch, cursor

    @property
    def id(self) -> int:
        return self._ex.id

    @property
    def released(self) -> bool:
        return self._ex.released

    def get(self, timeout: Optional[float] = None) -> list:
        """The outputs copied out as bytes (adag_dag_get); releases the execution."""
        return self._ex.get(_ms(timeout, "Execution.get"))

    def release(self) -> None:
        """Drops the execution's result (adag_dag_release)."""
        self._ex.release()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._ex.release()
        return False

    def __repr__(self):
        return (f"<adag.data.Execution {self._ex.id} epoch {self.epoch} batch {self.batch}"
                f"{' released' if self.released else ''}>")


def _ms(timeout, what):
    if timeout is None:
        return -1
    s = float(timeout)
    if not (0 <= s <= 2e6):
        raise ValueError(f"{what}: timeout {timeout!r}: seconds in [0, 2e6], or None")
    return int(math.ceil(s * 1000))


def _local_first(shards, suffix=None):
    """The first local file the shards name (globs expanded and sorted, as the
    library does), or None (URLs only)."""
    for s in shards:
        if s.startswith(("http://", "https://")):
            continue
        names = sorted(_glob.glob(s)) if any(c in s for c in "*?[") else [s]
        for n in names:
            if suffix and not n.endswith(suffix):
                continue
            return n
    return None


def _npy_layout(path):
    a = np.load(path, mmap_mode="r")  # the header only; the data stays on disk
    return a.dtype, tuple(a.shape[1:])


def _token_dtype(path):
    base = path[:-4] if path.endswith(".bin") else path
    with open(base + ".idx", "rb") as f:
        head = f.read(18)
    if len(head) < 18 or head[:9] != b"MMIDIDX\x00\x00":
        return None  # the library says what is wrong with it
    code = _TOKEN_DTYPES.get(head[17])
    return np.dtype(code) if code else None


class Source:
    """A data source (adag_data_open): batches of the shards' samples, in a
    seeded order, for this rank; iteration ends with epoch `epochs` - 1 (epochs
    count from 0, so a source resumed with the same arguments ends where the
    first would have; None: forever).

    Iterating yields each batch as a numpy array [batch_size, *shape] of
    `dtype` (a structured dtype: a dict of such arrays, one per field), a view
    of the batch's memory that holds the next batch once another is asked
    for or the source closes; copy=True yields arrays of their own, as_torch
    torch tensors (torch.from_numpy on the same). With dag= the source feeds a
    compiled DAG and yields Executions instead. See docs/guide/python.md.
    """

    def __init__(self, shards: Union[str, os.PathLike, Sequence[Union[str, os.PathLike]]], *,
                 batch_size: int, format: Optional[str] = None,
                 dtype: Any = None, shape: Optional[Sequence[int]] = None,
                 record_size: Optional[int] = None, seq_len: Optional[int] = None,
                 fields: Optional[Sequence[str]] = None, image: Optional[Image] = None,
                 map: Optional[Callable] = None, steps: Optional[Sequence] = None,
                 sample_size: Optional[int] = None, scratch_size: Optional[int] = None,
                 shuffle: Union[bool, int] = False, shuffle_shards: Optional[bool] = None,
                 seed: Optional[int] = None, rank: Optional[int] = None,
                 world: Optional[int] = None, ranks: str = "drop", bad: str = "fail",
                 resume: Optional[Tuple[int, int]] = None, epochs: Optional[int] = 1,
                 budget: Optional[int] = None, prefetch: Optional[int] = None,
                 threads: Optional[int] = None, cpus: Optional[str] = None,
                 cache_dir: Optional[Union[str, os.PathLike]] = None,
                 cache_bytes: Optional[int] = None, dag: Optional[CompiledDAG] = None,
                 copy: bool = False, as_torch: bool = False, progress: bool = False):
        self._src = self._final = None
        if isinstance(shards, (str, bytes, os.PathLike)):
            shards = [shards]
        shards = [os.fsdecode(s) for s in shards]
        if format is None:
            format = _SUFFIX_FORMATS.get(os.path.splitext(shards[0])[1] if shards else "")
            if format is None:
                raise ValueError(f"Source: format= is needed for {shards[:1]} (one of "
                                 f"{sorted(FORMATS)})")
        if format not in FORMATS:
            raise ValueError(f"Source(format={format!r}): one of {sorted(FORMATS)}")
        for name, value, table in (("ranks", ranks, _RANKS), ("bad", bad, _BAD)):
            if value not in table:
                raise ValueError(f"Source({name}={value!r}): one of {sorted(table)}")
        if epochs is not None and (isinstance(epochs, bool) or not isinstance(epochs, int)
                                   or epochs < 0):
            raise ValueError(f"Source(epochs={epochs!r}): a count >= 0, or None (forever)")
        if dag is not None and (copy or as_torch):
            raise ValueError("Source(dag=...): batches go into the DAG; copy and as_torch "
                             "are for batches handed to Python")
        if as_torch:
            import torch  # noqa: F401  (ImportError when absent)
        if image is not None and not isinstance(image, Image):
            raise TypeError(f"Source(image=...): an adag.data.Image, not {type(image).__name__}")
        if steps is not None:
            steps = [s if isinstance(s, tuple) else (getattr(s, "__name__", None), s)
                     for s in steps]
        self._copy, self._torch, self._bf16 = copy, as_torch, False
        self._dtype, self._shape = self._layout(format, shards, dtype, shape, record_size,
                                                seq_len, image, map)
        kw = {}
        if format == "records" and record_size is None and self._dtype is not None:
            record_size = self._dtype.itemsize * math.prod(self._shape)
        if (map is not None or steps) and sample_size is None and self._dtype is not None:
            sample_size = self._dtype.itemsize * math.prod(self._shape)
        if (dtype is not None or format in ("npy", "tokens")) and self._dtype in _ADAG_DTYPES:
            # a sample is a tensor (what a fed DAG sees); a header's layout (the
            # first shard's) is checked by the library against every shard
            kw["sample_dtype"] = _ADAG_DTYPES[self._dtype]
            kw["sample_shape"] = self._shape
        if shuffle is not False:
            window = _SHUFFLE_ALL if shuffle is True else shuffle
            kw.update(shuffle_shards=True if shuffle_shards is None else shuffle_shards,
                      shuffle_window=window)
        elif shuffle_shards is not None:
            kw.update(shuffle_shards=shuffle_shards, shuffle_window=0)
        if rank is not None or world is not None or ranks != "drop":
            kw.update(rank=0 if rank is None else rank, world=1 if world is None else world,
                      ranks_policy=_RANKS[ranks])
        if bad != "fail":
            kw["bad_policy"] = _BAD[bad]
        if resume is not None:
            epoch, batch = resume
            kw.update(start_epoch=epoch, start_batch=batch)
        self._cursor = Cursor(*resume) if resume is not None else Cursor(0, 0)
        self._first = self._cursor
        self._end = epochs
        self._src = _data._Source(
            shards=shards, format=FORMATS[format], batch_size=batch_size,
            sample_size=sample_size, record_size=record_size, seq_len=seq_len,
            fields=fields, cache_dir=None if cache_dir is None else os.fspath(cache_dir),
            cache_bytes=cache_bytes, threads=threads, seed=seed, budget=budget,
            prefetch=prefetch, dag=dag, cpus=cpus, scratch_size=scratch_size,
            image=None if image is None else image._params(), map=map, steps=steps,
            progress=progress, **kw)
        self._dag = dag
        _live.add(self)

    def _layout(self, format, shards, dtype, shape, record_size, seq_len, image, map):
        """(numpy dtype, sample shape) of a sample, or (None, None): bytes."""
        if image is not None:
            self._bf16 = image.dtype == "bfloat16"
            np_dtype = np.dtype("<u2") if self._bf16 else np.dtype(image.dtype).newbyteorder("<")
            return np_dtype, (3, image.height, image.width)
        if dtype is not None:
            dtype = np.dtype(dtype)
            if shape is None:
                size = record_size if format == "records" else None
                if format == "tokens" and seq_len is not None:
                    shape = (seq_len,)
                elif size is not None and dtype.names and size == dtype.itemsize:
                    shape = ()  # a record is one element of a structured dtype
                elif size is not None and dtype.itemsize and size % dtype.itemsize == 0:
                    shape = (size // dtype.itemsize,)
                elif size is not None:
                    shape = (size,)  # the library refuses it, with the sizes
                else:
                    shape = ()
            return dtype, tuple(int(d) for d in shape)
        if shape is not None:
            raise ValueError("Source(shape=...): give the dtype too")
        if map is not None:
            raise ValueError("Source(map=...): dtype= and shape= say what the map writes")
        first = None
        if format == "npy":
            first = _local_first(shards)
            if first is not None and os.path.isfile(first):
                try:
                    return _npy_layout(first)
                except (ValueError, OSError):
                    pass  # the library says what is wrong with it
        if format == "tokens" and seq_len is not None:
            first = _local_first(shards, ".bin") or _local_first(shards)
            if first is not None:
                try:
                    dt = _token_dtype(first)
                except OSError:
                    dt = None
                if dt is not None:
                    return dt, (seq_len,)
        if format == "records" and record_size is not None:
            return np.dtype("u1"), (record_size,)
        return None, None  # bytes: [batch_size, sample bytes], known at the first batch

    # ---- iteration ----

    def __iter__(self):
        return self

    def __next__(self):
        return self.next()

    def next(self, timeout: Optional[float] = None):
        """The next batch (StopIteration after the last of `epochs`), waiting up
        to timeout seconds (None: forever; adag.TimeoutError after it)."""
        if self._end is not None and self._cursor.epoch >= self._end:
            self._src.release()
            raise StopIteration
        item, epoch, batch, _, next_epoch, next_batch = self._src.next(_ms(timeout, "next"))
        self._cursor = Cursor(next_epoch, next_batch)
        if self._dag is not None:
            return Execution(item, epoch, batch, self._cursor)
        return self._arrays(item)

    def _arrays(self, mem):
        if self._dtype is None:  # bytes: a sample is what a batch holds / batch_size
            arr = np.frombuffer(mem, dtype=np.uint8).reshape(self._src.batch_size, -1)
        else:
            arr = np.frombuffer(mem, dtype=self._dtype).reshape(
                (self._src.batch_size,) + self._shape)
        if self._copy:
            arr = arr.copy()
            self._src.release()  # the memory goes back to the source at once
        if arr.dtype.names:
            out = {name: arr[name] for name in arr.dtype.names}
            return {k: self._tensor(v) for k, v in out.items()} if self._torch else out
        return self._tensor(arr) if self._torch else arr

    def _tensor(self, arr):
        import torch
        t = torch.from_numpy(arr)
        return t.view(torch.bfloat16) if self._bf16 else t

    def __len__(self):
        """Batches the iteration yields from where it began: epochs x this rank's
        batches per epoch, less those before the resume cursor."""
        if self._end is None:
            raise TypeError("len(Source): epochs=None iterates forever")
        per = self._src.batches_per_epoch
        return max(self._end * per - (self._first.epoch * per + self._first.batch), 0)

    # ---- state ----

    @property
    def cursor(self) -> Cursor:
        """Where to resume: right after the last batch handed out."""
        return self._cursor

    @property
    def batches_per_epoch(self) -> int:
        return self._src.batches_per_epoch

    @property
    def samples_per_epoch(self) -> int:
        return self._src.samples_per_epoch

    @property
    def batch_size(self) -> int:
        return self._src.batch_size

    @property
    def dtype(self) -> Optional[np.dtype]:
        """A sample's numpy dtype (None until known: bytes, np.uint8)."""
        return self._dtype

    @property
    def shape(self) -> Optional[Tuple[int, ...]]:
        """A sample's shape (a batch is [batch_size, *shape])."""
        return self._shape

    @property
    def cpus(self) -> str:
        """The CPUs the threads run on ("" when not bound: adag_data_cpus)."""
        return self._src.cpus

    @property
    def closed(self) -> bool:
        return self._src is None or self._src.closed

    def stats(self) -> Stats:
        """adag_data_stats now (after close(): as they were when it closed); str()
        of it is adag_data_format_stats' text."""
        if self._final is not None and self.closed:
            return self._final
        return Stats(**self._src.stats())

    def progress_line(self) -> str:
        """The progress bar's line (adag_data_format_progress)."""
        return self._src.progress_line()

    def close(self) -> None:
        """Stops handing out batches and closes the source (adag_data_close):
        its threads stopped, its memory freed. Arrays still viewing a batch keep
        that memory: the source closes when the last of them goes."""
        if self._src is not None and not self._src.closed:
            self._final = Stats(**self._src.stats())
            self._src.close()
        _live.discard(self)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __repr__(self):
        state = "closed" if self.closed else f"at epoch {self._cursor.epoch} batch " \
                                             f"{self._cursor.batch}"
        return f"<adag.data.Source {self.batches_per_epoch if self._src else '?'} batches " \
               f"of {self.batch_size if self._src else '?'} an epoch, {state}>"


# Sources still open at exit are closed before the interpreter goes (their
# threads may call Python callbacks).
_live = weakref.WeakSet()


@atexit.register
def _close_all():
    for s in list(_live):
        try:
            s.close()
        except Error:
            pass
