#!/usr/bin/env python3
"""Checks a trace written by adag_dag_write_trace (tests/test_trace.c).

    trace_check.py TRACE.json STAGES METHOD [backend]
    trace_check.py TRACE.json --unanswered ACTOR

The second form checks a trace taken while ACTOR did not answer: otherData
names it with why, its track is there with "no answer" in its name and no
span, and every other actor's track has spans. ACTOR "-": every actor
answered (none named, every actor's track has spans).

The DAG is a chain: input -> stage 1 .. stage STAGES (each calls METHOD) -> output.
Checks, with Python's own JSON parser: every track is named; the spans of one
track follow each other (a loop does one thing at a time); each execution the
driver started has, in every stage, its input wait, its compute and its publish,
in that order; a stage sees a value only after the stage before began to publish
it; the driver's get ends after the last stage began to publish; a backend's
span (device copy, ucx send) names its channel and lies inside a wait or
publish of its execution ("backend": at least one is there). Prints "ok ..."
or the first thing wrong (exit 1).
"""
import json
import sys


def fail(msg):
    print("trace_check: " + msg)
    sys.exit(1)


def unanswered(trace, actor):
    why = trace.get("otherData", {}).get("unanswered", {})
    if actor == "-" and why:
        fail("actors named as not answering: %r" % why)
    if actor != "-" and "did not answer" not in why.get(actor, ""):
        fail("otherData does not name %s as not answering: %r" % (actor, why))
    events = trace["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in events
             if e.get("ph") == "M" and e["name"] == "process_name"}
    count = {pid: 0 for pid in names}
    for e in events:
        if e.get("ph") == "X":
            count[e["pid"]] = count.get(e["pid"], 0) + 1
    mine = [pid for pid, n in names.items() if n.startswith("actor %s (" % actor)]
    if actor == "-" and any("no answer" in n for n in names.values()):
        fail("a track says no answer: %r" % names)
    if actor != "-" and (len(mine) != 1 or "no answer" not in names[mine[0]] or count[mine[0]]):
        fail("the track of %s: %r, %r" % (actor, [names[p] for p in mine], count))
    others = [pid for pid, n in names.items() if n.startswith("actor ") and pid not in mine]
    if not others or any(count[pid] == 0 for pid in others):
        fail("tracks of the actors that answered: %r" %
             {names[p]: count[p] for p in others})
    if actor == "-":
        print("ok every actor answered; %d spans" % sum(count[p] for p in others))
    else:
        print("ok %s did not answer (%s); %d other actors' spans" %
              (actor, why[actor], sum(count[p] for p in others)))


def main():
    if len(sys.argv) == 4 and sys.argv[2] == "--unanswered":
        with open(sys.argv[1]) as f:
            return unanswered(json.load(f), sys.argv[3])
    path, stages, method = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    want_backend = len(sys.argv) > 4 and sys.argv[4] == "backend"
    with open(path) as f:
        trace = json.load(f)
    events = trace["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in events
             if e.get("ph") == "M" and e["name"] == "process_name"}
    if not names.get(1, "").startswith("driver"):
        fail("no driver track: %r" % names)
    for s in range(stages):
        if not names.get(2 + s, "").startswith("actor "):
            fail("no track for stage %d: %r" % (s + 1, names))
    spans = {}
    for e in events:
        if e.get("ph") != "X":
            continue
        for k in ("ts", "dur", "pid", "tid", "name", "args"):
            if k not in e:
                fail("span without %s: %r" % (k, e))
        if e["dur"] < 0:
            fail("negative duration: %r" % e)
        spans.setdefault(e["pid"], []).append(e)
    # a loop does one thing at a time: its spans follow each other, a
    # backend's (a device copy, a ucx send) inside the wait or publish of
    # the loop that called it
    backend = ("device copy", "ucx send")
    nbackend = 0
    for pid in range(2, 2 + stages):
        track = sorted(spans.get(pid, []), key=lambda e: e["ts"])
        outer = [e for e in track if e["name"] not in backend]
        for a, b in zip(outer, outer[1:]):
            if b["ts"] + 0.001 < a["ts"] + a["dur"]:
                fail("track %d: %s (ref %d) overlaps %s (ref %d)" %
                     (pid, a["name"], a["args"]["ref"], b["name"], b["args"]["ref"]))
        for e in track:
            if e["name"] not in backend:
                continue
            nbackend += 1
            if "channel" not in e["args"]:
                fail("track %d: a %s span names no channel: %r" % (pid, e["name"], e))
            if not any(o["name"] in ("wait input", "publish") and o["args"]["ref"] == e["args"]["ref"]
                       and o["ts"] <= e["ts"] + 0.001
                       and e["ts"] + e["dur"] <= o["ts"] + o["dur"] + 0.001 for o in outer):
                fail("track %d: %s of ref %d is not inside a wait or publish of that ref" %
                     (pid, e["name"], e["args"]["ref"]))
    if want_backend and nbackend == 0:
        fail("no backend span (device copy, ucx send) in the trace")
    refs = sorted(e["args"]["ref"] for e in spans.get(1, []) if e["name"] == "execute")
    gets = {e["args"]["ref"]: e for e in spans.get(1, []) if e["name"] == "get"}
    if not refs:
        fail("the driver started no execution")

    def one(pid, name, ref):
        got = [e for e in spans.get(pid, []) if e["name"] == name and e["args"]["ref"] == ref]
        if len(got) != 1:
            fail("track %d (%s): %d %r spans of ref %d" % (pid, names[pid], len(got), name, ref))
        return got[0]

    end = lambda e: e["ts"] + e["dur"]
    checked = 0
    for ref in refs:
        prev_publish = None
        for s in range(stages):
            pid = 2 + s
            wait = one(pid, "wait input", ref)
            comp = one(pid, method, ref)
            pub = one(pid, "publish", ref)
            if not (end(wait) <= comp["ts"] + 0.001 and end(comp) <= pub["ts"] + 0.001):
                fail("stage %d, ref %d: wait, compute, publish out of order" % (s + 1, ref))
            if s == 0 and wait["args"].get("channel") != "input[0]":
                fail("stage 1 waits on %r" % wait["args"].get("channel"))
            if prev_publish is not None and end(wait) + 0.001 < prev_publish["ts"]:
                fail("stage %d got ref %d before stage %d published it" % (s + 1, ref, s))
            prev_publish = pub
            checked += 3
        if ref in gets and end(gets[ref]) + 0.001 < prev_publish["ts"]:
            fail("the driver's get of ref %d ended before the last stage published it" % ref)
    print("ok %d executions, %d spans checked, %d backend spans, %d events" %
          (len(refs), checked, nbackend, len(events)))


if __name__ == "__main__":
    main()
