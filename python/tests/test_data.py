"""adag.data: the data stage's batches in Python, over real files written
here (.npy shards, fixed-size records, Megatron token datasets): values and
order, shuffles, ranks, resume, views and copies, errors, closing."""
import gc
import os
import re
import struct

import numpy as np
import pytest

import adag
import adag.data as ad


def write_npy(dirpath, nshards, rows, width=4, dtype=np.float32):
    """Shards s0.npy.. of `rows` rows each; row r of the data set is
    [r*width, r*width+1, ...]: the whole data set, in order."""
    total = np.arange(nshards * rows * width, dtype=np.int64).reshape(-1, width).astype(dtype)
    for i in range(nshards):
        np.save(os.path.join(dirpath, f"s{i}.npy"), total[i * rows:(i + 1) * rows])
    return total


def write_tokens(path, sizes, dtype=np.int32, code=4):
    """A Megatron token dataset path.bin + path.idx: documents of `sizes`
    tokens, the tokens counting up from 0 across them."""
    tokens = np.arange(sum(sizes), dtype=dtype)
    tokens.tofile(path + ".bin")
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]) * tokens.itemsize
    with open(path + ".idx", "wb") as f:
        f.write(b"MMIDIDX\x00\x00" + struct.pack("<QBQQ", 1, code, len(sizes), len(sizes) + 1))
        f.write(np.asarray(sizes, dtype="<i4").tobytes())
        f.write(np.asarray(offsets, dtype="<i8").tobytes())
        f.write(np.arange(len(sizes) + 1, dtype="<i8").tobytes())
    return tokens


def first_col(batches, width=4):
    """The row numbers of the samples of npy batches (row r starts at r*width)."""
    return [int(v) // width for b in batches for v in b[:, 0]]


def test_npy_batches_are_the_rows_in_order(tmp_path):
    total = write_npy(tmp_path, 3, 10)  # 30 rows, batches of 4: 7 (2 rows dropped)
    with ad.Source(str(tmp_path / "s*.npy"), batch_size=4, threads=2) as src:
        assert (src.dtype, src.shape, src.batches_per_epoch, src.samples_per_epoch) == \
            (np.dtype(np.float32), (4,), 7, 30)
        assert len(src) == 7
        got = []
        for b in src:
            assert isinstance(b, np.ndarray) and b.shape == (4, 4) and b.dtype == np.float32
            assert not b.flags.owndata  # a view of the batch's memory
            got.append(b.copy())
        assert src.cursor == ad.Cursor(1, 0)
    assert np.array_equal(np.concatenate(got), total[:28])


def test_records_plain_and_structured(tmp_path):
    rec = np.dtype([("image", "u1", (2, 3)), ("label", "<i8")])  # 14 bytes a record
    data = np.zeros(12, dtype=rec)
    data["image"] = np.arange(12 * 6).reshape(12, 2, 3) % 251
    data["label"] = np.arange(12) * 1000 + 7
    data.tofile(tmp_path / "r.bin")
    for record_size in (None, 14):  # record_size: the dtype's by default
        with ad.Source(str(tmp_path / "r.bin"), format="records", batch_size=4, dtype=rec,
                       record_size=record_size) as src:
            batches = [next(src) for _ in range(3)]  # dicts of views
            # the last one is valid (nothing was asked for after it)
            assert set(batches[2]) == {"image", "label"}
            assert batches[2]["image"].shape == (4, 2, 3) and batches[2]["label"].shape == (4,)
            assert np.array_equal(batches[2]["image"], data["image"][8:])
            assert np.array_equal(batches[2]["label"], data["label"][8:])
    with ad.Source(str(tmp_path / "r.bin"), format="records", record_size=rec.itemsize,
                   batch_size=6, copy=True) as src:
        raw = list(src)
    assert [b.dtype for b in raw] == [np.uint8] * 2 and raw[0].shape == (6, 14)
    assert np.concatenate(raw).tobytes() == data.tobytes()


def test_tokens_packed_into_sequences(tmp_path):
    write_tokens(str(tmp_path / "t"), [5, 9, 3, 11])  # 28 tokens: 3 samples of 8, tail dropped
    with ad.Source(str(tmp_path / "t"), format="tokens", seq_len=8, batch_size=3) as src:
        (b,) = list(src)
        assert b.dtype == np.int32 and b.shape == (3, 8)
        assert np.array_equal(b.ravel(), np.arange(24))


def epoch_rows(tmp_path, **kw):
    with ad.Source(str(tmp_path / "s*.npy"), batch_size=5, copy=True, **kw) as src:
        return first_col(src)


def test_shuffle_is_a_seeded_permutation(tmp_path):
    write_npy(tmp_path, 4, 10)  # 40 rows, 8 batches of 5
    in_order = epoch_rows(tmp_path)
    assert in_order == list(range(40))
    a = epoch_rows(tmp_path, shuffle=True, seed=7)
    assert sorted(a) == in_order
    assert sum(y != x + 1 for x, y in zip(a, a[1:])) > 8  # not just the shards reordered
    assert epoch_rows(tmp_path, shuffle=True, seed=7, threads=3) == a  # same seed, same order
    assert epoch_rows(tmp_path, shuffle=True, seed=8) != a
    windowed = epoch_rows(tmp_path, shuffle=4, shuffle_shards=False, seed=7)
    assert sorted(windowed) == in_order and windowed != in_order
    assert all(w // 4 == i // 4 for i, w in enumerate(windowed))  # within windows of 4
    two = epoch_rows(tmp_path, shuffle=True, seed=7, epochs=2)
    assert two[:40] == a and sorted(two[40:]) == in_order and two[40:] != a  # reshuffled


@pytest.mark.parametrize("shuffle", [False, True])
def test_ranks_partition_the_data_set(tmp_path, shuffle):
    write_npy(tmp_path, 3, 20)  # 60 rows: 12 batches of 5, 4 for each of 3 ranks
    shares = [epoch_rows(tmp_path, shuffle=shuffle, seed=3, rank=r, world=3) for r in range(3)]
    assert all(len(s) == 20 for s in shares)
    everything = [row for s in shares for row in s]
    assert sorted(everything) == list(range(60))  # full cover, no overlap
    if not shuffle:  # batch b goes to rank b % 3
        assert shares[1][:5] == list(range(5, 10)) and shares[2][5:10] == list(range(25, 30))


@pytest.mark.parametrize("stop", [3, 8, 9])
def test_resume_continues_exactly(tmp_path, stop):
    write_npy(tmp_path, 2, 20)  # 40 rows: 8 batches of 5 an epoch
    kw = dict(batch_size=5, copy=True, shuffle=True, seed=11, epochs=2)
    with ad.Source(str(tmp_path / "s*.npy"), **kw) as src:
        whole = [b for b in src]
    with ad.Source(str(tmp_path / "s*.npy"), **kw) as src:
        first = [next(src) for _ in range(stop)]
        cursor = src.cursor
    assert cursor == ad.Cursor(stop // 8, stop % 8)
    with ad.Source(str(tmp_path / "s*.npy"), resume=cursor, **kw) as src:
        assert len(src) == 16 - stop
        rest = [b for b in src]
    assert [b.tolist() for b in first + rest] == [b.tolist() for b in whole]


def test_views_move_on_copies_stay(tmp_path):
    total = write_npy(tmp_path, 1, 40)
    # a budget of two batches: the source reuses a released batch's memory soon
    kw = dict(batch_size=4, threads=1, prefetch=1, budget=2 * 4 * 16)
    with ad.Source(str(tmp_path / "s0.npy"), **kw) as src:
        view = next(src)
        before = view.copy()
        assert np.array_equal(before, total[:4])
        mem = view
        while isinstance(mem, np.ndarray):
            mem = mem.base
        assert type(mem).__name__ == "_Batch" and not mem.released
        rest, changed = [], 0
        for b in src:
            rest.append(b.copy())
            changed += any(np.array_equal(view, r) for r in rest)  # holds a later batch
        assert mem.released  # the source moved on: no new export of that memory
        with pytest.raises(BufferError, match="released"):
            memoryview(mem)
        assert changed >= 3, changed
    with ad.Source(str(tmp_path / "s0.npy"), copy=True, **kw) as src:
        copies = list(src)
    assert all(c.flags.owndata for c in copies)
    assert np.array_equal(np.concatenate(copies), total)


def test_bad_params_raise_the_librarys_message(tmp_path):
    write_npy(tmp_path, 1, 10)
    np.arange(10, dtype=np.uint8).tofile(tmp_path / "ten.bin")
    npy = str(tmp_path / "s0.npy")
    cases = [
        (dict(shards=npy, batch_size=0), adag.InvalidError, "batch_size is 0"),
        (dict(shards=npy, batch_size=2, threads=0), adag.InvalidError, "threads 0 is not in"),
        (dict(shards=npy, batch_size=2, rank=3, world=2), adag.InvalidError, "rank 3 of world 2"),
        (dict(shards=npy, batch_size=2, prefetch=0), adag.InvalidError, "prefetch is 0"),
        (dict(shards=npy, batch_size=2, dtype=np.int64), adag.InvalidError,
         "header says f32 elements, but sample_dtype is i64"),
        (dict(shards=npy, batch_size=2, budget=8), adag.InvalidError,
         "a budget of 8 bytes does not hold one batch of 32"),
        (dict(shards=str(tmp_path / "ten.bin"), format="records", record_size=3, batch_size=1),
         adag.InvalidError, "ten.bin"),
        (dict(shards=str(tmp_path / "none.npy"), batch_size=2), adag.IoError, "none.npy"),
        (dict(shards=str(tmp_path / "none*.npy"), batch_size=2), adag.InvalidError,
         "no file matches"),
        (dict(shards=str(tmp_path / "t.tar"), batch_size=2, fields=["cls"]), adag.InvalidError,
         "a map callback writes them"),
        (dict(shards=npy, batch_size=2, cpus="a-b"), adag.InvalidError, "is not a CPU list"),
    ]
    for kw, cls, text in cases:
        with pytest.raises(adag.Error) as e:
            ad.Source(**kw)
        assert type(e.value) is cls, (kw, e.value)  # adag._adag's classes, not copies
        assert text in str(e.value) and e.value.status < 0, (kw, e.value)
    for kw, cls in [(dict(batch_size=-1), ValueError), (dict(batch_size="2"), TypeError),
                    (dict(batch_size=2, format="csv"), ValueError),
                    (dict(batch_size=2, ranks="even"), ValueError),
                    (dict(batch_size=2, seed=1 << 64), ValueError),
                    (dict(batch_size=2, shape=(4,)), ValueError),
                    (dict(batch_size=2, nonsense=1), TypeError),
                    (dict(batch_size=2, dag=object()), TypeError)]:
        with pytest.raises(cls):
            ad.Source(npy, **kw)


def test_empty_data_set(tmp_path):
    np.save(tmp_path / "empty.npy", np.zeros((0, 4), dtype=np.float32))
    with pytest.raises(adag.InvalidError, match="no samples in 1 shard"):
        ad.Source(str(tmp_path / "empty.npy"), batch_size=2)


def test_batch_larger_than_the_data_set(tmp_path):
    total = write_npy(tmp_path, 1, 6)
    with pytest.raises(adag.InvalidError, match="6 samples make 0 batches of 8"):
        ad.Source(str(tmp_path / "s0.npy"), batch_size=8)
    with ad.Source(str(tmp_path / "s0.npy"), batch_size=8, ranks="pad") as src:
        (b,) = list(src)  # one batch, completed with the epoch's first samples again
    assert np.array_equal(b, np.concatenate([total, total[:2]]))


def threads_and_maps(path):
    with open("/proc/self/maps") as f:
        maps = f.read().count(path)
    fds = sum(os.path.realpath(f"/proc/self/fd/{f}") == path for f in os.listdir("/proc/self/fd"))
    return len(os.listdir("/proc/self/task")), maps + fds


def test_close_mid_iteration_leaves_nothing(tmp_path):
    write_npy(tmp_path, 1, 64)
    path = str(tmp_path / "s0.npy")
    before = threads_and_maps(path)
    src = ad.Source(path, batch_size=4, threads=3)
    view = next(src)
    next(src)
    opened = threads_and_maps(path)
    assert opened[0] >= before[0] + 3 and opened[1] > 0
    src.close()
    assert src.closed
    with pytest.raises(adag.ClosedError, match="the source is closed"):
        next(src)
    # `view` still views a batch: the source's memory (and threads) stay until it goes
    assert view.shape == (4, 4) and src._src.open
    del view
    gc.collect()
    assert not src._src.open
    assert threads_and_maps(path)[0] <= before[0] and threads_and_maps(path)[1] == 0
    with ad.Source(path, batch_size=4, threads=2, copy=True) as src2:
        next(src2)
    assert threads_and_maps(path)[1] == 0  # a with block closes at its end
    src2.close()  # again: nothing


def test_len_and_epochs(tmp_path):
    write_npy(tmp_path, 1, 20)
    with ad.Source(str(tmp_path / "s0.npy"), batch_size=3, epochs=3) as src:
        assert len(src) == 18 and len(list(src)) == 18 and src.cursor == ad.Cursor(3, 0)
        with pytest.raises(StopIteration):
            next(src)
    with ad.Source(str(tmp_path / "s0.npy"), batch_size=3, epochs=None, copy=True) as src:
        with pytest.raises(TypeError, match="forever"):
            len(src)
        got = [next(src) for _ in range(20)]  # on past the first epochs
        assert src.cursor == ad.Cursor(3, 2)
        assert got[6][0, 0] == 0  # epoch 1 starts over
    with ad.Source(str(tmp_path / "s0.npy"), batch_size=3, epochs=0) as src:
        assert len(src) == 0 and list(src) == []


def test_stats_and_progress_line(tmp_path):
    write_npy(tmp_path, 2, 16)
    with ad.Source(str(tmp_path / "s*.npy"), batch_size=4, threads=2) as src:
        for _ in range(5):
            next(src)
        st = src.stats()
        assert isinstance(st, ad.Stats)
        assert st.batches == 5 and st.samples >= 20 and st.bytes_read >= 20 * 16
        assert 0 < st.bytes_peak <= st.budget and st.elapsed_s > 0 and st.steps_s == ()
        text = str(st)
        assert text.startswith("data source: 2 shards (npy), 32 samples an epoch, 8 batches of 4")
        assert re.search(r"delivered +5 batches", text)
        assert "epoch 0" in src.progress_line() and "5/8" in src.progress_line()
        assert src.cpus == ""
        next(src)
    after = src.stats()  # as they were when it closed
    assert after.batches == 6 and str(after).startswith("data source: 2 shards")
    with pytest.raises(adag.ClosedError, match="the source is closed"):
        src.progress_line()


def test_torch_tensors(tmp_path):
    torch = pytest.importorskip("torch", reason="skipped: torch is not installed")
    total = write_npy(tmp_path, 1, 8)
    with ad.Source(str(tmp_path / "s0.npy"), batch_size=4, as_torch=True) as src:
        a = next(src)
        assert isinstance(a, torch.Tensor) and a.dtype == torch.float32
        assert np.array_equal(a.numpy(), total[:4])


# ---- Python callbacks, the image transform ----

def write_tar(path, n, bad=()):
    """A WebDataset shard: sample k{i} has fields vec (4 float32: i, i+.5,
    i+.25, -i) and cls (the text of i)."""
    import io
    import tarfile
    with tarfile.open(path, "w") as t:
        for i in range(n):
            vec = np.array([i, i + .5, i + .25, -i], dtype="<f4").tobytes()
            for ext, data in (("vec", vec), ("cls", b"x" if i in bad else str(i).encode())):
                info = tarfile.TarInfo(f"k{i:03d}.{ext}")
                info.size = len(data)
                t.addfile(info, io.BytesIO(data))


REC = np.dtype([("x", "<f4", (4,)), ("label", "<i8"), ("r", "<u8")])


def vec_map(sample, out):
    o = np.frombuffer(out, dtype=REC)
    o["x"] = np.frombuffer(sample.fields["vec"], dtype="<f4")
    o["label"] = int(bytes(sample.fields["cls"]))  # ValueError on a bad label
    o["r"] = sample.rand()
    assert sample.key.endswith(str(int(o["label"][0])).zfill(3))


def double(sample, out):
    np.frombuffer(out, dtype=REC)["x"] *= 2  # on what the map wrote


def tar_source(tmp_path, **kw):
    kw = dict(dict(format="webdataset", fields=["vec", "cls"], map=vec_map, dtype=REC,
                   batch_size=2, threads=2), **kw)
    return ad.Source(str(tmp_path / "w.tar"), **kw)


def test_python_map_and_steps(tmp_path):
    write_tar(str(tmp_path / "w.tar"), 10)
    with tar_source(tmp_path, steps=[double], copy=True, seed=5) as src:
        got = list(src)
        st = src.stats()
    labels = np.concatenate([b["label"] for b in got])
    assert labels.tolist() == list(range(10))
    x = np.concatenate([b["x"] for b in got])
    assert np.array_equal(x[:, 0], 2 * np.arange(10)) and np.array_equal(x[:, 3], -2 * labels)
    r = np.concatenate([b["r"] for b in got])
    assert len(set(r.tolist())) == 10  # a random state per sample
    with tar_source(tmp_path, copy=True, seed=5) as src:
        assert np.array_equal(np.concatenate([b["r"] for b in src]), r)  # a pure function of
    with tar_source(tmp_path, copy=True, seed=6) as src:                 # the seed
        assert not np.array_equal(np.concatenate([b["r"] for b in src]), r)
    assert st.map_s > 0 and len(st.steps_s) == 1 and st.steps_s[0] > 0
    assert "double" in st.text  # the step's name, from the function


def test_map_exception_fails_its_batch_with_the_cause(tmp_path):
    write_tar(str(tmp_path / "w.tar"), 10, bad={5})
    with tar_source(tmp_path, copy=True) as src:
        first = [next(src), next(src)]  # samples 0-3: the batches before the failure come
        with pytest.raises(adag.InvalidError) as e:
            next(src)
    assert [b["label"].tolist() for b in first] == [[0, 1], [2, 3]]
    msg = str(e.value)
    assert "w.tar: sample 5 (key k005): map: ValueError: invalid literal" in msg, msg
    assert isinstance(e.value.__cause__, ValueError)
    with tar_source(tmp_path, copy=True, bad="skip") as src:
        labels = [b["label"].tolist() for b in src]
        assert src.stats().bad_skipped >= 1  # (the threads decode ahead into epoch 1 too)
    assert labels[2] == [4, 6]  # sample 5's place taken by the next that maps


def write_jpegs(dirpath, n):
    Image = pytest.importorskip("PIL.Image", reason="skipped: PIL is not installed")
    rng = np.random.default_rng(0)
    for i in range(n):
        px = rng.integers(0, 256, size=(40 + i, 48, 3), dtype=np.uint8)
        Image.fromarray(px).save(os.path.join(dirpath, f"im{i}.jpg"), quality=90)


def test_image_transform(tmp_path):
    write_jpegs(tmp_path, 6)
    kw = dict(format="files", batch_size=3, image=ad.Image(16, 12), seed=2, copy=True)
    with ad.Source(str(tmp_path / "*.jpg"), **kw) as src:
        a = list(src)
    assert [b.shape for b in a] == [(3, 3, 16, 12)] * 2 and a[0].dtype == np.float32
    assert all(np.isfinite(b).all() and b.std() > 0.1 for b in a)
    with ad.Source(str(tmp_path / "*.jpg"), **kw) as src:
        assert all(np.array_equal(x, y) for x, y in zip(a, src))  # the same draws
    kw["image"] = ad.Image(16, 12, dtype="float16", flip=0.0)
    with ad.Source(str(tmp_path / "*.jpg"), **kw) as src:
        assert next(src).dtype == np.float16
    with pytest.raises(adag.InvalidError, match="output 12x0 is not in"):
        ad.Source(str(tmp_path / "*.jpg"), format="files", batch_size=3, image=ad.Image(0, 12))


# ---- feeding a DAG ----

def echo_dag(rt, counter, **kw):
    from conftest import one_stage
    return one_stage(rt, counter(), "echo", **kw)


def test_feed_a_dag(rt, counter, tmp_path):
    total = write_npy(tmp_path, 2, 8)
    dag = echo_dag(rt, counter, max_inflight=4)
    with ad.Source(str(tmp_path / "s*.npy"), batch_size=4, dag=dag, threads=2) as src:
        outs = []
        for ex in src:
            assert isinstance(ex, ad.Execution) and ex.cursor == src.cursor
            (out,) = ex.get(timeout=10)
            assert ex.released
            outs.append(np.frombuffer(out, dtype=np.float32).reshape(4, 4))
        with pytest.raises(adag.BusyError):
            dag.close()  # the source's threads use it until the source closes
        with pytest.raises(adag.BusyError):
            rt.close()
    assert np.array_equal(np.concatenate(outs), total)
    dag.close()
    g, a = rt.graph(), counter()
    g.output(g.bind(a, "sum2", g.input(0), g.input(1)))
    with pytest.raises(adag.InvalidError, match="has 2 input fields; a source feeds a DAG"):
        ad.Source(str(tmp_path / "s*.npy"), batch_size=4, dag=g.compile())


def test_next_waits_in_slices_releasing_the_gil(rt, counter, tmp_path):
    import _thread
    import threading
    import time
    write_npy(tmp_path, 1, 64)
    dag = echo_dag(rt, counter, max_inflight=2)
    with ad.Source(str(tmp_path / "s0.npy"), batch_size=4, dag=dag) as src:
        held = [next(src), next(src)]  # the DAG's window: nothing more starts
        ticks, stop = [0], threading.Event()

        def tick():
            while not stop.is_set():
                ticks[0] += 1
                time.sleep(0.001)
        t = threading.Thread(target=tick)
        t.start()
        t0 = time.monotonic()
        with pytest.raises(adag.TimeoutError, match="no execution of DAG .* within 500 ms"):
            src.next(timeout=0.5)
        waited = time.monotonic() - t0
        stop.set()
        t.join()
        assert 0.45 <= waited < 10 and ticks[0] > 50  # others ran while it waited
        # Ctrl-C gets through a wait without end between its slices (were it not,
        # the watchdog ends the wait after 20 s, and pytest.raises fails)
        watchdog = threading.Timer(20, lambda: [ex.release() for ex in held])
        watchdog.start()
        timer = threading.Timer(0.3, _thread.interrupt_main)
        timer.start()
        t0 = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            next(src)
        assert time.monotonic() - t0 < 10
        watchdog.cancel()
        # close() while another thread waits in next() is refused, not a free
        # under that thread
        box = []
        t = threading.Thread(target=lambda: box.append(next(src)))
        t.start()
        deadline = time.monotonic() + 10
        while not src._src.busy and time.monotonic() < deadline:
            time.sleep(0.01)
        with pytest.raises(adag.BusyError, match="another thread is inside next"):
            src.close()
        with pytest.raises(adag.BusyError, match="another thread is inside next"):
            src.next(timeout=0)
        assert src.stats().batches == 2 and "epoch 0" in src.progress_line()  # meanwhile
        for ex in held:
            ex.release()
        t.join(10)
        assert len(box) == 1 and box[0].get(timeout=10)  # the source goes on


def test_progress_bar_on_a_terminal_only(tmp_path):
    import pty
    import subprocess
    import sys
    write_npy(tmp_path, 1, 40)
    script = ("import adag.data as ad\n"
              f"src = ad.Source({str(tmp_path / 's0.npy')!r}, batch_size=4, progress=True)\n"
              "n = sum(1 for _ in src)\nsrc.close()\nprint('batches', n)\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    piped = subprocess.run([sys.executable, "-c", script], capture_output=True, env=env,
                           timeout=60)
    assert piped.returncode == 0 and piped.stdout == b"batches 10\n"
    assert piped.stderr == b""  # not a terminal: no bar
    master, slave = pty.openpty()
    p = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=slave,
                         env=env)
    os.close(slave)
    out, _ = p.communicate(timeout=60)
    tty = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # EIO: the child's end closed
            break
        if not chunk:
            break
        tty += chunk
    os.close(master)
    assert p.returncode == 0 and out == b"batches 10\n"
    assert b"\r" in tty and b"epoch 0 [" in tty and b"samples/s" in tty, tty


def test_example_runs():
    import subprocess
    import sys
    example = os.path.join(os.path.dirname(__file__), "..", "examples", "data_iter.py")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    r = subprocess.run([sys.executable, example], capture_output=True, text=True, env=env,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert "rank 1: 10 batches of 50 x (16,) float32" in r.stdout
    assert "resumed: 3 + 17 batches of 2 epochs" in r.stdout
    assert "pairs.tar: 4 batches of x (16, 16) and label (16,)" in r.stdout
