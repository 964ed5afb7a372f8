"""What the image-loading peers of adag-bench share (images_ray.py,
images_torch.py): the command line, the exit codes, the timed loop over
batches, the one JSON line on stdout, and keeping stdout for that line.

The C bench runs a peer as
  images_<peer>.py --shards 'DIR/*.tar' --threads N [--seconds S] [--batch 64]
and reads {"peer", "samples_per_s", "samples", "seconds", "threads",
"version"} from its stdout; exit 3 with "skipped: <why>" on stderr when the
peer's framework is not installed.
"""
import argparse
import glob
import json
import os
import sys
import time

EXIT_FAIL = 1
EXIT_USAGE = 2
EXIT_SKIPPED = 3

CROP = 224
MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)


def logger(name):
    def log(msg):
        print(f"{name}: {msg}", file=sys.stderr, flush=True)
    return log


def parse_args(argv, description, threads_help):
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--shards", required=True,
                   help="glob naming the WebDataset .tar shards")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                   help=threads_help)
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


def consume(it, args, parts, log):
    """Warms up on the first batches, then times batches for args.seconds;
    parts(batch) -> (images [B, 3, H, W], labels). Returns (samples,
    seconds, label checksum) of the timed part."""
    t0 = time.monotonic()
    for _ in range(args.warmup):
        images, _labels = parts(next(it))
        float(images[0, 0, 0, 0])
    log(f"start-up + {args.warmup} warm-up batches took "
        f"{time.monotonic() - t0:.1f} s")
    samples = 0
    checksum = 0
    start = time.monotonic()
    elapsed = 0.0
    while elapsed < args.seconds:
        images, labels = parts(next(it))
        float(images[-1, 0, 0, 0])  # touch the batch: nothing skipped lazily
        checksum += int(labels.sum())
        samples += len(labels)
        elapsed = time.monotonic() - start
    return samples, elapsed, checksum


def report(result_out, peer, args, samples, elapsed, version):
    result_out.write(json.dumps({
        "peer": peer,
        "samples_per_s": round(samples / elapsed, 1),
        "samples": samples,
        "seconds": round(elapsed, 2),
        "threads": args.threads,
        "version": version,
    }) + "\n")
    result_out.flush()


def main(argv, args, run, log):
    """Finds the shards, keeps stdout for the JSON line only (whatever is
    written to fd 1 from here on, by Python, native libraries or child
    processes, goes to stderr; run(args, paths, result_out) writes the
    result to a private duplicate of the original stdout), and turns
    failures into exit codes."""
    paths = sorted(glob.glob(args.shards))
    if not paths:
        log(f"no shards match {args.shards!r}")
        return EXIT_USAGE
    sys.stdout.flush()
    result_out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    try:
        return run(args, paths, result_out)
    except KeyboardInterrupt as e:
        log(f"interrupted ({e})")
        return EXIT_FAIL
    except Exception as e:
        log(f"failed: {type(e).__name__}: {e}")
        return EXIT_FAIL
