#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Checks an ffmctl export of tests/ops/test_export.c's store (see there for its contents).

  chrome-trace FILE       every run; Trace Event Format structure; problems marked
  chrome-trace-run1 FILE  --run 1 only
  hatchet FILE            Hatchet literal format; default run = the stage-2 run
  hatchet-run1 FILE       --run 1 (stage-1 waits)
  chrome-trace-any FILE / hatchet-any FILE
                          structure only (any job), plus: the trace has complete events, and
                          the tree has a driver leaf with calls

Structure follows the Trace Event Format document (JSON Object Format: "traceEvents" list;
complete events "ph":"X" with name, ts, dur (microseconds), pid, tid; metadata events "ph":"M"
named process_name/thread_name with args.name) and hatchet's LiteralReader (a list of roots,
each {"frame": {"name", "type"}, "metrics": {...}, "children": [...]}, the same metric names on
every node, "(inc)" marking inclusive ones). Exits 1 with the reasons on stdout.
"""
import json
import sys

errors = []


def need(cond, what):
    if not cond:
        errors.append(what)
    return cond


def close(a, b, tol=1e-9):
    return abs(a - b) <= tol + 1e-6 * abs(b)


def check_trace(doc, runs):
    """runs None: structure only."""
    need(isinstance(doc, dict) and isinstance(doc.get("traceEvents"), list), "traceEvents list")
    evs = doc.get("traceEvents", [])
    xs = [e for e in evs if e.get("ph") == "X"]
    ms = [e for e in evs if e.get("ph") == "M"]
    need(len(xs) + len(ms) == len(evs), "only X and M events")
    for e in xs:
        for k, t in (("name", str), ("cat", str), ("ts", (int, float)), ("dur", (int, float)),
                     ("pid", int), ("tid", int), ("args", dict)):
            if not need(isinstance(e.get(k), t), "X event field %s: %r" % (k, e)):
                return
        need(e["ts"] >= 0 and e["dur"] >= 0, "non-negative ts/dur: %r" % e)
    named_p = {e["pid"] for e in ms if e.get("name") == "process_name" and isinstance(e.get("args", {}).get("name"), str)}
    named_t = {(e["pid"], e["tid"]) for e in ms if e.get("name") == "thread_name" and isinstance(e.get("args", {}).get("name"), str)}
    need({e["pid"] for e in xs} <= named_p, "every pid has a process_name")
    need({(e["pid"], e["tid"]) for e in xs} <= named_t, "every thread has a thread_name")
    if runs is None:
        need(len(xs) > 0, "complete events")
        return
    by_run = {}
    for e in xs:
        by_run.setdefault(e["args"]["run"], []).append(e)
    need(sorted(by_run) == runs, "runs %r, expected %r" % (sorted(by_run), runs))
    counts = {1: 3, 2: 5, 3: 4}
    for r in runs:
        need(len(by_run.get(r, [])) == counts[r], "run %d: %d events, expected %d" % (r, len(by_run.get(r, [])), counts[r]))
    # Times: microseconds from the first exported run's start.
    if 1 in by_run:
        first = min(by_run[1], key=lambda e: e["ts"])
        need(close(first["ts"], 1.0) and close(first["dur"], 80.0), "run 1 first wait at 1 us for 80 us: %r" % first)
        need(all(e["name"] == "cuCtxSynchronize" and e["cat"].split(",")[0] == "wait" for e in by_run[1]),
             "stage-1 waits named after the driver entry point, cat wait")
    for e in by_run.get(2, []) + by_run.get(3, []):
        if e["name"] == "cuCtxSynchronize":
            need(close(e["dur"], 100.0) and close(e["args"]["wait_us"], 90.0), "sync 100 us, 90 waited: %r" % e)
            need(e["args"].get("call_site") == "step (app.c:27)", "call site of the sync: %r" % e["args"])
        elif e["name"] == "cuMemcpyHtoD":
            need(e["args"].get("bytes") == 4096 and e["args"].get("direction") == "HtoD", "copy bytes/direction: %r" % e["args"])
            need(e["tid"] == 4001, "copy on thread 4001")
        else:
            need(False, "unexpected event %r" % e)
    if 3 in by_run:
        syncs = [e for e in by_run[3] if e["name"] == "cuCtxSynchronize"]
        copies = sorted((e for e in by_run[3] if e["name"] == "cuMemcpyHtoD"), key=lambda e: e["ts"])
        need(all(e.get("cname") == "terrible" and "unnecessary synchronization" in e["args"].get("problem", "")
                 for e in syncs), "run 3 syncs marked unnecessary: %r" % syncs)
        need("problem" not in copies[0]["args"] and "cname" not in copies[0], "first copy not a problem")
        need(copies[1].get("cname") == "terrible" and "duplicate transfer" in copies[1]["args"].get("problem", ""),
             "second copy marked duplicate: %r" % copies[1])
    if 2 in by_run:
        # Run 2 is the report's timeline: each event carries the verdict the report counts for
        # it, from run 3's rows (occurrence by occurrence): every sync unnecessary ...
        syncs = [e for e in by_run[2] if e["name"] == "cuCtxSynchronize"]
        need(all("run 3" in e["args"].get("problem", "") and e.get("cname") == "terrible" for e in syncs),
             "run 2 syncs marked from run 3's analysis: %r" % syncs[:1])
        # ... and of the two copies the second, as in run 3, a duplicate.
        copies = sorted((e for e in by_run[2] if e["name"] == "cuMemcpyHtoD"), key=lambda e: e["ts"])
        need("problem" not in copies[0]["args"] and "cname" not in copies[0], "run 2: first copy not a problem")
        need(copies[1].get("cname") == "terrible" and "duplicate transfer" in copies[1]["args"].get("problem", "")
             and "run 3" in copies[1]["args"]["problem"], "run 2: second copy a duplicate (run 3): %r" % copies[1])
    if 1 in by_run and 3 in runs:
        # Run 1 (stage 1) is not the timeline: its waits at the sync call site are marked because
        # every checked occurrence of that site was unnecessary.
        need(all("at this call site (all 3 checked in run 3)" in e["args"].get("problem", "")
                 for e in by_run[1]), "run 1 waits marked by their call site: %r" % by_run[1][:1])


METRICS = {"time (inc)", "time", "wait time (inc)", "wait time", "count (inc)", "count"}


def walk(nodes, path, out):
    for nd in nodes:
        if not need(isinstance(nd, dict) and isinstance(nd.get("frame"), dict) and
                    isinstance(nd["frame"].get("name"), str) and isinstance(nd["frame"].get("type"), str) and
                    isinstance(nd.get("metrics"), dict), "node shape: %r" % nd):
            continue
        m = nd["metrics"]
        need(set(m) == METRICS, "metrics %r" % sorted(m))
        kids = nd.get("children", [])
        need(isinstance(kids, list), "children is a list")
        for base in ("time", "wait time", "count"):
            inc = m[base] + sum(k["metrics"][base + " (inc)"] for k in kids)
            need(close(m[base + " (inc)"], inc), "%s: %s (inc) %r != exclusive + children %r" % (nd["frame"]["name"], base, m[base + " (inc)"], inc))
        p = path + [nd["frame"]["name"]]
        out["/".join(p)] = nd
        walk(kids, p, out)


def check_tree(doc, run1):
    need(isinstance(doc, list) and doc, "a non-empty list of roots")
    nodes = {}
    walk(doc, [], nodes)
    if run1 is None:
        need(any(n["frame"]["type"] == "driver" and n["metrics"]["count"] > 0 for n in nodes.values()),
             "a driver leaf with calls")
        return
    need([r["frame"]["name"] for r in doc] == ["main"], "one root, main: %r" % [r["frame"]["name"] for r in doc])
    sync = nodes.get("main/step/cuCtxSynchronize")
    if need(sync is not None, "main/step/cuCtxSynchronize in %r" % sorted(nodes)):
        m = sync["metrics"]
        need(sync["frame"]["type"] == "driver" and not sync.get("children"), "driver leaf")
        if run1:
            need(m["count"] == 3 and close(m["time"], 240e-6) and close(m["wait time"], 240e-6), "stage-1 waits: %r" % m)
        else:
            need(m["count"] == 3 and close(m["time"], 300e-6) and close(m["wait time"], 270e-6), "stage-2 syncs: %r" % m)
            need(sync["frame"].get("file") == "app.c" and sync["frame"].get("line") == 27, "leaf names its call site")
    if not run1:
        copy = nodes.get("main/cuMemcpyHtoD")
        if need(copy is not None, "main/cuMemcpyHtoD"):
            need(copy["metrics"]["count"] == 2 and close(copy["metrics"]["time"], 100e-6), "copies: %r" % copy["metrics"])
        main = nodes["main"]["metrics"]
        need(main["count (inc)"] == 5 and close(main["time (inc)"], 400e-6) and close(main["time"], 0), "main: %r" % main)
    else:
        need(set(nodes) == {"main", "main/step", "main/step/cuCtxSynchronize"}, "stage-1 tree: %r" % sorted(nodes))


def main():
    mode, path = sys.argv[1], sys.argv[2]
    with open(path) as f:
        doc = json.load(f)
    if mode == "chrome-trace":
        check_trace(doc, [1, 2, 3])
    elif mode == "chrome-trace-run1":
        check_trace(doc, [1])
    elif mode == "hatchet":
        check_tree(doc, False)
    elif mode == "chrome-trace-any":
        check_trace(doc, None)
    elif mode == "hatchet-any":
        check_tree(doc, None)
    elif mode == "hatchet-run1":
        check_tree(doc, True)
    else:
        sys.exit("unknown mode " + mode)
    for e in errors:
        print("FAIL:", e)
    print("%s %s: %s" % (mode, path, "ok" if not errors else "%d problems" % len(errors)))
    sys.exit(1 if errors else 0)


main()
