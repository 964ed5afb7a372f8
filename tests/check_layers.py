#!/usr/bin/env python3
"""Folders point down only: common < gpu < transport < dag < data < tools, bench,
and inside dag/: exec < proc < graph < driver < observe < dag/ itself.

Reads every #include "folder/..." of the library's, the tools' and the
bench's sources (git ls-files) and fails, naming file and line, on an
include of a higher layer, and on a cycle between folders (a folder is a
file's directory: dag/ today, dag/<part>/ once it has parts; folders of one
layer may include each other only one way).  The data stage goes through
the public API: it includes no dag/ header either, though dag/ is below it.
Inside a folder, calls between its files go one way too: two .c files
whose functions call each other (found by the adag_* functions each
defines and the ones it calls) are one idea, or share a part that belongs
below both.
Usage: tests/check_layers.py [root]   (exit 1 on a violation)
"""
import os
import re
import subprocess
import sys

LAYERS = {'common': 0, 'gpu': 1, 'transport': 2, 'dag': 3, 'data': 4, 'tools': 5, 'bench': 5}
# the folders of dag/, bottom up (dag/README.md says what each holds); '' is
# dag/ itself, the runtime object above them all
DAG_LAYERS = {'exec': 0, 'proc': 1, 'graph': 2, 'driver': 3, 'observe': 4, '': 5}


def dag_part(path):
    """'exec' for dag/exec/loop.c, '' for dag/runtime.c; None outside dag/."""
    parts = path.split('/')
    if parts[0] != 'dag':
        return None
    return parts[1] if len(parts) > 2 else ''
INCLUDE = re.compile(r'\s*#\s*include\s+"(([a-z_]+)/[^"]*)"')
# a function of the library defined at file scope: "type adag_x(...) {"
DEFINITION = re.compile(r'^[A-Za-z_][\w \*]*?\b(adag_\w+)\s*\([^;{]*\)\s*\{', re.M)
CALL = re.compile(r'\b(adag_\w+)\s*\(')


def calls_both_ways(root, files):
    """Pairs of .c files of one folder that call each other's functions."""
    sources = {}
    for f in files:
        if f.endswith('.c') and f.split('/')[0] in LAYERS:
            with open(os.path.join(root, f), encoding='utf-8', errors='replace') as src:
                sources[f] = src.read()
    where = {}
    for f, text in sources.items():
        for m in DEFINITION.finditer(text):
            where.setdefault(m.group(1), f)
    calls = {}
    for f, text in sources.items():
        for m in CALL.finditer(text):
            g = where.get(m.group(1))
            if g and g != f and os.path.dirname(g) == os.path.dirname(f):
                calls.setdefault(f, {}).setdefault(g, m.group(1))
    problems = []
    for a in sorted(calls):
        for b, fn in sorted(calls[a].items()):
            if a < b and a in calls.get(b, {}):
                problems.append(f'{a} and {b} call each other ({a} calls {fn}, {b} calls '
                                f'{calls[b][a]}): merge them or move the shared part below both')
    return problems


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else '.'
    files = subprocess.run(['git', '-C', root, 'ls-files', '*.c', '*.h', '*.cu'],
                           capture_output=True, text=True, check=True).stdout.split()
    problems, edges = [], {}
    for f in files:
        top = f.split('/')[0]
        if top not in LAYERS:
            continue
        with open(os.path.join(root, f), encoding='utf-8', errors='replace') as src:
            for n, line in enumerate(src, 1):
                m = INCLUDE.match(line)
                if not m or m.group(2) not in LAYERS:
                    continue
                dep_top = m.group(2)
                if LAYERS[dep_top] > LAYERS[top]:
                    problems.append(f'{f}:{n}: {top}/ includes "{m.group(1)}": {dep_top}/ is a '
                                    f'higher layer')
                elif top == 'data' and dep_top == 'dag':
                    problems.append(f'{f}:{n}: data/ includes "{m.group(1)}": the data stage '
                                    f'uses the public API only')
                mine, theirs = dag_part(f), dag_part(m.group(1))
                for p in (mine, theirs):
                    if p is not None and p not in DAG_LAYERS:
                        problems.append(f'{f}:{n}: dag/{p}/ has no place in the layers of dag/ '
                                        f'(add it to DAG_LAYERS in tests/check_layers.py)')
                if (mine in DAG_LAYERS and theirs in DAG_LAYERS and
                        DAG_LAYERS[theirs] > DAG_LAYERS[mine]):
                    problems.append(f'{f}:{n}: dag/{mine or ""} includes "{m.group(1)}": '
                                    f'dag/{theirs}/ is a higher layer of dag/')
                here, there = os.path.dirname(f), os.path.dirname(m.group(1))
                if here != there:
                    edges.setdefault(here, {}).setdefault(there, f'{f}:{n}')
    # a cycle between folders: depth-first search over the folder graph
    state, stack = {}, []

    def visit(d):
        state[d] = 1
        stack.append(d)
        for e, where in sorted(edges.get(d, {}).items()):
            if state.get(e) == 1:
                cyc = stack[stack.index(e):] + [e]
                problems.append('folders include each other: ' + ' -> '.join(cyc) +
                                f' (the last arrow at {where})')
            elif e not in state:
                visit(e)
        stack.pop()
        state[d] = 2

    for d in sorted(edges):
        if d not in state:
            visit(d)
    problems += calls_both_ways(root, files)
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        print(f'check-layers: {len(problems)} arrow(s) against the layers '
              f'(common < gpu < transport < dag < data < tools, bench; in dag/: '
              f'exec < proc < graph < driver < observe)', file=sys.stderr)
        return 1
    print(f'check-layers: {len(files)} files, every include points down '
          f'(common < gpu < transport < dag < data < tools, bench; in dag/: '
          f'exec < proc < graph < driver < observe), no cycle between folders, calls between '
          f'the files of a folder go one way')
    return 0


if __name__ == '__main__':
    sys.exit(main())
