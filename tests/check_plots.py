#!/usr/bin/env python3
"""Checks the plots bench/plot.py wrote into DIR (`make plots-smoke`): each
of latency.svg, chain.svg, allreduce.svg and loader.svg is there and is
well-formed SVG (parses as XML, its root an <svg>). No figure is checked.

    tests/check_plots.py DIR
"""

import os
import sys
import xml.etree.ElementTree as ET

PLOTS = ("latency.svg", "chain.svg", "allreduce.svg", "loader.svg")


def main(argv):
    if len(argv) != 1:
        print("usage: tests/check_plots.py DIR", file=sys.stderr)
        return 2
    bad = 0
    for name in PLOTS:
        path = os.path.join(argv[0], name)
        try:
            root = ET.parse(path).getroot()
        except (OSError, ET.ParseError) as e:
            print(f"check_plots: {path}: {e}", file=sys.stderr)
            bad += 1
            continue
        if not root.tag.endswith("svg"):
            print(f"check_plots: {path}: root element <{root.tag}>, not <svg>", file=sys.stderr)
            bad += 1
            continue
        nodata = "no data" in ET.tostring(root, encoding="unicode")
        print(f"check_plots: {path}: SVG{' (says no data)' if nodata else ''}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
