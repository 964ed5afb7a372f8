#!/usr/bin/env python3
"""Ray Data peer for the adag-bench image-loading workload.

Measures how many training samples per second Ray Data delivers for the
classic ImageNet-style input pipeline, so the C bench can print its own data
loader next to Ray's:

  WebDataset .tar shards (<key>.jpg 256x256 RGB JPEG + <key>.cls ASCII label)
  -> JPEG decode (PIL) -> RandomResizedCrop 224 (scale 0.08..1, ratio 3/4..4/3,
  bilinear) -> RandomHorizontalFlip(0.5) -> float32 CHW, ImageNet mean/std
  -> batches of --batch samples ([B, 3, 224, 224] float32 + int64 labels).

Pipeline: ray.data.read_webdataset(decoder=None) hands over the raw member
bytes, map_batches() decodes and transforms a batch per task (PIL for decode,
crop, resize and flip; numpy for the batched normalisation), iter_batches()
re-batches to exactly --batch on the driver. Ray gets --threads CPUs
(ray.init(num_cpus=N)) and map_batches runs at most N tasks at a time.

Timing: the first --warmup batches (which include Ray's start-up and the
pipeline's spin-up) are not timed; then batches are consumed until --seconds
have passed, starting a new epoch whenever the shards run out. Every batch is
touched (one pixel and the label sum are read).

Invoked by the C bench as
  images_ray.py --shards 'DIR/*.tar' --threads N [--seconds S] [--batch 64]
Output: exactly one JSON line on stdout,
  {"peer": "ray-data", "samples_per_s", "samples", "seconds", "threads",
   "version"}
everything else (Ray's logs included) goes to stderr. Exit status: 0 on
success, 3 when Ray / numpy / Pillow is not importable (the bench skips the
peer; one "skipped: <reason>" line on stderr), 2 on bad arguments, 1 on any
other failure.
"""

import logging
import math
import os
import signal
import sys
import time

from images_peer import (CROP, EXIT_SKIPPED, MEAN, STD, consume,
                         logger, parse_args, report)
import images_peer

PEER = "ray-data"
SCALE = (0.08, 1.0)
RATIO = (3.0 / 4.0, 4.0 / 3.0)
OBJECT_STORE_BYTES = 1536 * 1024 * 1024


log = logger("images_ray")


def crop_box(width, height, rng):
    """RandomResizedCrop's box (left, top, right, bottom): a random area in
    SCALE and aspect ratio log-uniform in RATIO, 10 tries, else the largest
    centred box whose ratio is clamped into RATIO."""
    area = width * height
    log_lo, log_hi = math.log(RATIO[0]), math.log(RATIO[1])
    for _ in range(10):
        target = area * rng.uniform(SCALE[0], SCALE[1])
        aspect = math.exp(rng.uniform(log_lo, log_hi))
        w = int(round(math.sqrt(target * aspect)))
        h = int(round(math.sqrt(target / aspect)))
        if 0 < w <= width and 0 < h <= height:
            left = int(rng.integers(0, width - w + 1))
            top = int(rng.integers(0, height - h + 1))
            return left, top, left + w, top + h
    ratio = width / height
    if ratio < RATIO[0]:
        w, h = width, int(round(width / RATIO[0]))
    elif ratio > RATIO[1]:
        w, h = int(round(height * RATIO[1])), height
    else:
        w, h = width, height
    left, top = (width - w) // 2, (height - h) // 2
    return left, top, left + w, top + h


def transform_batch(batch):
    """map_batches UDF: raw {jpg, cls} bytes -> {image [B,3,224,224] float32,
    label [B] int64}. Runs in Ray workers."""
    import io

    import numpy as np
    from PIL import Image

    rng = np.random.default_rng()
    jpgs, classes = batch["jpg"], batch["cls"]
    n = len(jpgs)
    pixels = np.empty((n, CROP, CROP, 3), dtype=np.uint8)
    for i in range(n):
        with Image.open(io.BytesIO(jpgs[i])) as im:
            im = im.convert("RGB")
            # Crop + antialiased bilinear resize in one step (what
            # torchvision's resized_crop does on a PIL image).
            im = im.resize((CROP, CROP), Image.BILINEAR,
                           box=crop_box(im.width, im.height, rng))
            if rng.random() < 0.5:
                im = im.transpose(Image.FLIP_LEFT_RIGHT)
            pixels[i] = np.asarray(im)
    # (x / 255 - mean) / std == x * scale + shift, for the whole batch at once.
    scale = (1.0 / (255.0 * np.asarray(STD, dtype=np.float32)))
    shift = -np.asarray(MEAN, dtype=np.float32) / np.asarray(STD,
                                                             dtype=np.float32)
    image = np.empty((n, 3, CROP, CROP), dtype=np.float32)
    for c in range(3):
        np.multiply(pixels[..., c], scale[c], out=image[:, c],
                    dtype=np.float32)
        image[:, c] += shift[c]
    label = np.array([int(bytes(c)) for c in classes], dtype=np.int64)
    return {"image": image, "label": label}


def task_pool(data, n):
    """map_batches arguments for at most n concurrent tasks (a task pool, not
    actors: with num_cpus=N, N actors would hold every CPU and starve the read
    tasks). `compute=` replaced `concurrency=` in Ray 2.51."""
    strategy = getattr(data, "TaskPoolStrategy", None)
    if strategy is not None:
        try:
            return {"compute": strategy(size=n)}
        except TypeError:  # older TaskPoolStrategy without a size
            pass
    return {"concurrency": n}


def stop_on_signal(signum, frame):
    # Turn SIGTERM (the bench's timeout) into an exception so that the
    # finally: ray.shutdown() runs; Ray's own handler would exit at once and
    # leave its agent processes behind.
    raise KeyboardInterrupt(f"signal {signum}")


def epochs(ds, batch):
    """Batches of ds forever, one epoch after the other."""
    while True:
        got = False
        for b in ds.iter_batches(batch_size=batch, batch_format="numpy",
                                 drop_last=False):
            got = True
            yield b
        if not got:
            raise RuntimeError("dataset is empty")


def run(args, paths, result_out):
    try:
        import numpy  # noqa: F401  (needed by the UDF)
        import PIL  # noqa: F401
        import ray
        import ray.data
    except Exception as e:  # ImportError, or a broken install
        print(f"skipped: cannot import Ray Data / numpy / Pillow: {e}",
              file=sys.stderr, flush=True)
        return EXIT_SKIPPED

    t0 = time.monotonic()
    ray.init(num_cpus=args.threads, object_store_memory=OBJECT_STORE_BYTES,
             include_dashboard=False, log_to_driver=False,
             logging_level="ERROR", configure_logging=True)
    try:
        signal.signal(signal.SIGTERM, stop_on_signal)
        for name in ("ray", "ray.data"):
            logging.getLogger(name).setLevel(logging.ERROR)
        ctx = ray.data.DataContext.get_current()
        ctx.enable_progress_bars = False
        ctx.print_on_execution_start = False
        ctx.verbose_stats_logs = False
        # One output block per map batch: a batch's images alone reach the
        # target, so the block buffer hands each batch on as it is, and
        # iter_batches() then yields blocks without concatenating. With the
        # default 128 MiB target, map tasks copy batches into ~250-row blocks
        # that the driver re-slices and re-concatenates (measured ~40 % slower
        # here).
        ctx.target_max_block_size = args.batch * 3 * CROP * CROP * 4

        # decoder=None keeps the raw .jpg/.cls bytes: decoding in the UDF
        # with PIL is cheaper than Ray's default jpg -> numpy decoder followed
        # by a numpy -> PIL round trip for the crop. One read block per shard
        # (split further only to give every CPU one): Ray's default splits a
        # 1000-sample shard into ~70-row blocks, which makes map tasks
        # end on 7-row remainders and iter_batches concatenate most batches
        # (measured ~15-40 % slower here).
        ds = ray.data.read_webdataset(
            paths, decoder=None,
            override_num_blocks=max(len(paths), args.threads))
        ds = ds.map_batches(transform_batch, batch_size=args.batch,
                            batch_format="numpy", num_cpus=1,
                            **task_pool(ray.data, args.threads))

        it = epochs(ds, args.batch)
        try:
            samples, elapsed, checksum = consume(it, args, lambda b: (b["image"], b["label"]), log)
        finally:
            # Stop the streaming executor before Ray goes away (a live
            # iterator would otherwise keep calling into Ray after shutdown).
            it.close()
            del it, ds
        log(f"Ray {ray.__version__}: total {time.monotonic() - t0:.1f} s "
            "before shutdown")
    finally:
        ray.shutdown()

    rate = samples / elapsed
    log(f"{samples} samples in {elapsed:.2f} s = {rate:.1f} samples/s "
        f"(label sum {checksum})")
    report(result_out, PEER, args, samples, elapsed, ray.__version__)
    return 0


def main(argv):
    args = parse_args(argv, "Ray Data image-loading peer",
                      "CPUs given to Ray and map_batches concurrency")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    # Never let a stray Ray call start a second local cluster behind our back
    # (e.g. from a background thread after ray.shutdown()).
    os.environ["RAY_ENABLE_AUTO_CONNECT"] = "0"
    return images_peer.main(argv, args, run, log)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
