"""Batches of the data stage in Python (adag.data), from the repository's root:

    make && PYTHONPATH=build/python python3 python/examples/data_iter.py

Writes a small data set into a temporary folder (4 .npy shards and a
WebDataset .tar), then: one shuffled epoch split between 2 ranks, a stop and
a resume at the cursor, and a Python map turning each tar sample (a vector
and a text label) into a record of two fields.
"""
import io
import os
import tarfile
import tempfile

import numpy as np

import adag.data

ROWS, WIDTH = 250, 16  # rows a shard


def write_data_set(d):
    for i in range(4):  # row r holds r in every column
        rows = np.arange(i * ROWS, (i + 1) * ROWS, dtype=np.float32)
        np.save(os.path.join(d, f"train-{i}.npy"), np.repeat(rows[:, None], WIDTH, axis=1))
    with tarfile.open(os.path.join(d, "pairs.tar"), "w") as t:
        for i in range(64):
            for ext, data in (("vec", np.full(WIDTH, i, dtype="<f4").tobytes()),
                              ("cls", str(i % 10).encode())):
                info = tarfile.TarInfo(f"s{i:04d}.{ext}")
                info.size = len(data)
                t.addfile(info, io.BytesIO(data))


RECORD = np.dtype([("x", "<f4", (WIDTH,)), ("label", "<i8")])


def to_record(sample, out):
    """A map: runs on the source's threads, writes the sample's place in the batch."""
    rec = np.frombuffer(out, dtype=RECORD)
    rec["x"] = np.frombuffer(sample.fields["vec"], dtype="<f4")
    rec["label"] = int(bytes(sample.fields["cls"]))


def main():
    with tempfile.TemporaryDirectory() as d:
        write_data_set(d)
        npy = os.path.join(d, "train-*.npy")
        kw = dict(batch_size=50, shuffle=True, seed=2024, world=2)

        seen = []
        for rank in range(2):  # each rank computes its share alone
            # progress=True: the library's progress bar, when stderr is a terminal
            with adag.data.Source(npy, rank=rank, progress=True, **kw) as src:
                rows = [int(r) for batch in src for r in batch[:, 0]]
            print(f"rank {rank}: {len(src)} batches of {src.batch_size} x {src.shape} "
                  f"{src.dtype}, rows {rows[:5]}...")
            seen += rows
        assert sorted(seen) == list(range(4 * ROWS))  # the ranks cover the epoch once
        print(src.stats())

        with adag.data.Source(npy, rank=0, epochs=2, **kw) as src:
            first = [next(src).copy() for _ in range(3)]
            cursor = src.cursor
        with adag.data.Source(npy, rank=0, epochs=2, resume=cursor, **kw) as src:
            rest = [b.copy() for b in src]
        print(f"stopped at {cursor}, resumed: {len(first)} + {len(rest)} batches of 2 epochs")

        with adag.data.Source(os.path.join(d, "pairs.tar"), fields=["vec", "cls"],
                              map=to_record, dtype=RECORD, batch_size=16, copy=True) as src:
            for batch in src:  # a dict of arrays, one per field of RECORD
                assert np.array_equal(batch["x"][:, 0] % 10, batch["label"])
            print(f"pairs.tar: {len(src)} batches of x {batch['x'].shape} and label "
                  f"{batch['label'].shape}, labels {batch['label'].tolist()}")


if __name__ == "__main__":
    main()
