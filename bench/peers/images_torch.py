#!/usr/bin/env python3
"""PyTorch DataLoader peer for the adag-bench image-loading workload.

Measures how many training samples per second torch.utils.data.DataLoader
delivers for the classic ImageNet-style input pipeline, so the C bench can
print its own data loader next to PyTorch's:

  WebDataset .tar shards (<key>.jpg 256x256 RGB JPEG + <key>.cls ASCII label)
  -> JPEG decode (PIL) -> RandomResizedCrop(224, antialias=True) (scale
  0.08..1, ratio 3/4..4/3, bilinear) -> RandomHorizontalFlip(0.5) -> ToTensor
  -> Normalize(ImageNet mean/std) -> batches of --batch samples
  ([B, 3, 224, 224] float32 + int64 labels).

Pipeline: the shards are indexed once in the main process with tarfile (data
offset and size of every .jpg, the .cls label read inline); a map-style
Dataset reads a sample's bytes with os.pread from a per-worker file handle and
applies the torchvision transforms; DataLoader(batch_size=B,
num_workers=--threads, persistent_workers=True, prefetch_factor=2) batches in
the workers.

Timing: the first --warmup batches (worker start-up included) are not timed;
then batches are consumed until --seconds have passed, starting a new epoch
whenever the shards run out. Every batch is touched (one pixel and the label
sum are read).

Invoked by the C bench as
  images_torch.py --shards 'DIR/*.tar' --threads N [--seconds S] [--batch 64]
Output: exactly one JSON line on stdout,
  {"peer": "torch-dataloader", "samples_per_s", "samples", "seconds",
   "threads", "version"}
everything else goes to stderr. Exit status: 0 on success, 3 when torch /
torchvision / Pillow is not importable (the bench skips the peer; one
"skipped: <reason>" line on stderr), 2 on bad arguments, 1 on any other
failure.
"""

import argparse
import glob
import io
import json
import os
import sys
import tarfile
import time

EXIT_FAIL = 1
EXIT_USAGE = 2
EXIT_SKIPPED = 3

PEER = "torch-dataloader"
CROP = 224
MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)


def log(msg):
    print(f"images_torch: {msg}", file=sys.stderr, flush=True)


def parse_args(argv):
    p = argparse.ArgumentParser(description="PyTorch DataLoader image peer")
    p.add_argument("--shards", required=True,
                   help="glob naming the WebDataset .tar shards")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                   help="DataLoader num_workers")
    p.add_argument("--seconds", type=float, default=10.0,
                   help="length of the timed part (default 10)")
    p.add_argument("--batch", type=int, default=64, help="batch size")
    p.add_argument("--warmup", type=int, default=2,
                   help="untimed batches before timing starts (default 2)")
    a = p.parse_args(argv)
    if a.threads < 1 or a.seconds <= 0 or a.batch < 1 or a.warmup < 0:
        p.error("--threads and --batch must be >= 1, --seconds > 0, "
                "--warmup >= 0")
    return a


def index_shards(paths):
    """[(shard index, data offset, size, label)] for every sample with both a
    .jpg and a .cls member, in shard order."""
    samples = []
    for si, path in enumerate(paths):
        jpgs, labels, order = {}, {}, []
        with tarfile.open(path, "r:") as tf:
            for m in tf:
                if not m.isfile():
                    continue
                key, dot, ext = m.name.rpartition(".")
                if not dot:
                    continue
                if ext == "jpg":
                    jpgs[key] = (m.offset_data, m.size)
                    order.append(key)
                elif ext == "cls":
                    labels[key] = int(tf.extractfile(m).read())
        for key in order:
            if key in labels:
                off, size = jpgs[key]
                samples.append((si, off, size, labels[key]))
    return samples


def make_dataset(torch, transforms, Image, paths, samples):
    class TarImages(torch.utils.data.Dataset):
        """Map-style dataset over the indexed tar members. File handles are
        opened lazily, so each DataLoader worker gets its own."""

        def __init__(self):
            self.fds = {}
            self.transform = transforms.Compose([
                transforms.RandomResizedCrop(CROP, antialias=True),
                transforms.RandomHorizontalFlip(),
                transforms.ToTensor(),
                transforms.Normalize(MEAN, STD),
            ])

        def __len__(self):
            return len(samples)

        def __getitem__(self, i):
            si, off, size, label = samples[i]
            fd = self.fds.get(si)
            if fd is None:
                fd = self.fds[si] = os.open(paths[si], os.O_RDONLY)
            data = os.pread(fd, size, off)
            with Image.open(io.BytesIO(data)) as im:
                img = self.transform(im.convert("RGB"))
            return img, label

    return TarImages()


def epochs(loader):
    """Batches of loader forever, one epoch after the other."""
    while True:
        yield from loader


def consume(it, args):
    """Warm up on the first batches, then time batches for args.seconds.
    Returns (samples, seconds, label checksum) of the timed part."""
    t0 = time.monotonic()
    for _ in range(args.warmup):
        images, _labels = next(it)
        float(images[0, 0, 0, 0])
    log(f"worker start-up + {args.warmup} warm-up batches took "
        f"{time.monotonic() - t0:.1f} s")

    samples = 0
    checksum = 0
    start = time.monotonic()
    elapsed = 0.0
    while elapsed < args.seconds:
        images, labels = next(it)
        # Touch the batch so nothing is skipped lazily.
        float(images[-1, 0, 0, 0])
        checksum += int(labels.sum())
        samples += len(labels)
        elapsed = time.monotonic() - start
    return samples, elapsed, checksum


def run(args, paths, result_out):
    try:
        import torch
        import torch.utils.data
        import torchvision.transforms as transforms
        from PIL import Image
    except Exception as e:  # ImportError, or a broken install
        print(f"skipped: cannot import torch / torchvision / Pillow: {e}",
              file=sys.stderr, flush=True)
        return EXIT_SKIPPED

    t0 = time.monotonic()
    samples_index = index_shards(paths)
    if not samples_index:
        log("the shards hold no .jpg/.cls samples")
        return EXIT_USAGE
    log(f"indexed {len(samples_index)} samples in {len(paths)} shards in "
        f"{time.monotonic() - t0:.2f} s")

    dataset = make_dataset(torch, transforms, Image, paths, samples_index)
    loader = torch.utils.data.DataLoader(
        dataset, batch_size=args.batch, shuffle=False,
        num_workers=args.threads, persistent_workers=True, prefetch_factor=2)
    it = epochs(loader)
    try:
        samples, elapsed, checksum = consume(it, args)
    finally:
        it.close()
        # Shut the persistent workers down now rather than at exit.
        worker_iter = getattr(loader, "_iterator", None)
        if worker_iter is not None and hasattr(worker_iter,
                                               "_shutdown_workers"):
            worker_iter._shutdown_workers()

    rate = samples / elapsed
    log(f"{samples} samples in {elapsed:.2f} s = {rate:.1f} samples/s "
        f"(label sum {checksum}); total {time.monotonic() - t0:.1f} s")
    result_out.write(json.dumps({
        "peer": PEER,
        "samples_per_s": round(rate, 1),
        "samples": samples,
        "seconds": round(elapsed, 2),
        "threads": args.threads,
        "version": torch.__version__,
    }) + "\n")
    result_out.flush()
    return 0


def main(argv):
    args = parse_args(argv)
    paths = sorted(glob.glob(args.shards))
    if not paths:
        log(f"no shards match {args.shards!r}")
        return EXIT_USAGE

    # Keep stdout for the JSON line only: whatever is written to fd 1 from
    # here on (Python, native libraries, the DataLoader workers) goes to
    # stderr; the result goes to a private duplicate of the original stdout.
    sys.stdout.flush()
    result_out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    try:
        return run(args, paths, result_out)
    except KeyboardInterrupt:
        log("interrupted")
        return EXIT_FAIL
    except Exception as e:
        log(f"failed: {type(e).__name__}: {e}")
        return EXIT_FAIL


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
