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

import io
import os
import sys
import tarfile
import time

from images_peer import (CROP, EXIT_SKIPPED, EXIT_USAGE, MEAN, STD, consume,
                         logger, parse_args, report)
import images_peer

PEER = "torch-dataloader"


log = logger("images_torch")


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
        samples, elapsed, checksum = consume(it, args, lambda b: b, log)
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
    report(result_out, PEER, args, samples, elapsed, torch.__version__)
    return 0


def main(argv):
    args = parse_args(argv, "PyTorch DataLoader image peer", "DataLoader num_workers")
    return images_peer.main(argv, args, run, log)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
