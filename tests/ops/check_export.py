#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Checks an ffmctl export of tests/ops/test_export.c's store (see there for its contents).

  chrome-trace FILE       --all-runs: every run; Trace Event Format structure; problems marked
  chrome-trace-default FILE
                          the default: the report's timeline run (2) only
  chrome-trace-run1 FILE  --run 1 only
  hatchet FILE            Hatchet literal format; default run = the stage-2 run
  hatchet-run1 FILE       --run 1 (stage-1 waits)
  chrome-trace-any FILE / hatchet-any FILE
                          structure only (any job), plus: the trace has complete events, and
                          the tree has a driver leaf with calls

Structure follows the Trace Event Format document (check_format: JSON Object Format:
"traceEvents" list; complete events "ph":"X" with name, cat, ts, dur (microseconds), pid, tid,
nested or disjoint per thread; metadata events "ph":"M" (process/thread name and sort index);
flow events "ph":"s"/"f" paired by id, each bound to a slice of its thread; reserved colors;
no other keys), plus ffm's layout (pid = run, GPU spans on GPU tracks saying how they are timed,
a problem with its benefit); and hatchet's LiteralReader (a list of roots, each {"frame":
{"name", "type"}, "metrics": {...}, "children": [...]}, the same metric names on every node,
"(inc)" marking inclusive ones). Exits 1 with the reasons on stdout.

  chrome-trace-gpu FILE   chrome-trace-any, plus: inferred GPU spans, flow arrows, a problem
  chrome-trace-merged FILE / chrome-trace-nomerge FILE
                          job exp-2 of test_export.c, by default (runs of identical calls
                          merged) and with --no-merge
  chrome-trace-refuses FILE
                          FILE is a valid merged trace (chrome-trace-merged); broken variants
                          of it must each be refused: the checker is no formality

A FILE that starts with gzip's magic is read through gzip (-o FILE.gz). Merged spans (cli/
export.c, joins()): args.count (>= 2) calls, the first args.event, the last args.last_event,
their summed time total_us (within the span) and mean_us, wait_us and bytes summed,
problem_calls = count on a problem span; the arrows of a span's calls to one wait are one
flow with args.calls (>= 2). otherData.selection and .runs say which runs are exported.
"""
import copy
import gzip
import json
import sys

errors = []


def need(cond, what):
    if not cond:
        errors.append(what)
    return cond


def close(a, b, tol=1e-9):
    return abs(a - b) <= tol + 1e-6 * abs(b)


# The Trace Event Format (the "Trace Event Format" document, JSON Object Format) as far as
# ffm uses it: the event types, their fields and types, and the rules viewers rely on.
PHASES = {"X", "M", "s", "f"}
META = {"process_name": "name", "process_sort_index": "sort_index", "thread_name": "name",
        "thread_sort_index": "sort_index"}
KEYS = {"name", "cat", "ph", "ts", "dur", "pid", "tid", "args", "id", "bp", "cname"}
MERGED = {"count", "last_event", "total_us", "mean_us", "problem_calls"}
SELECTIONS = {"timeline", "baseline", "all", "run"}
COLORS = {"terrible", "bad", "good", "yellow", "olive", "grey", "white", "black"}
GPU_TID_BASE = 0x40000000
EPS = 0.0015  # microseconds printed with 3 decimals


def num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def check_format(doc):
    """Trace Event Format validity; returns (complete events, metadata events, flow events)."""
    if not need(isinstance(doc, dict) and isinstance(doc.get("traceEvents"), list), "traceEvents list"):
        return [], [], []
    need(doc.get("displayTimeUnit", "ms") in ("ms", "ns"), "displayTimeUnit ms or ns")
    need(isinstance(doc.get("otherData", {}), dict), "otherData is an object")
    xs, ms, fl = [], [], []
    for e in doc["traceEvents"]:
        if not need(isinstance(e, dict) and e.get("ph") in PHASES, "event phase: %r" % (e,)):
            continue
        need(set(e) <= KEYS, "unknown keys %r" % (set(e) - KEYS))
        need(isinstance(e.get("name"), str) and isinstance(e.get("pid"), int) and
             isinstance(e.get("tid"), int), "name, pid, tid: %r" % e)
        need("cname" not in e or e["cname"] in COLORS, "reserved color name: %r" % e.get("cname"))
        need(isinstance(e.get("args", {}), dict), "args is an object: %r" % e)
        if e["ph"] == "M":
            key = META.get(e.get("name"))
            if need(key is not None, "metadata name: %r" % e):
                v = e.get("args", {}).get(key)
                need(isinstance(v, str) if key == "name" else isinstance(v, int), "metadata args: %r" % e)
            ms.append(e)
            continue
        if not need(num(e.get("ts")) and e["ts"] >= 0, "ts: %r" % e):
            continue
        if e["ph"] == "X":
            if need(num(e.get("dur")) and e["dur"] >= 0 and isinstance(e.get("cat"), str), "X dur, cat: %r" % e):
                xs.append(e)
        else:
            need(isinstance(e.get("id"), (int, str)) and isinstance(e.get("cat"), str), "flow id, cat: %r" % e)
            need("bp" not in e or (e["ph"] == "f" and e["bp"] == "e"), "bp only \"e\", on f: %r" % e)
            c = e.get("args", {}).get("calls", 2)
            need(isinstance(c, int) and c >= 2 and set(e.get("args", {})) <= {"calls"},
                 "a flow's args: calls >= 2 only: %r" % e)
            fl.append(e)
    # Complete events of one thread nest or are disjoint (viewers draw them as a stack).
    tracks = {}
    for e in xs:
        tracks.setdefault((e["pid"], e["tid"]), []).append(e)
    for k, evs in tracks.items():
        evs.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack = []
        for e in evs:
            while stack and stack[-1]["ts"] + stack[-1]["dur"] <= e["ts"] + EPS:
                stack.pop()
            if stack and not need(e["ts"] + e["dur"] <= stack[-1]["ts"] + stack[-1]["dur"] + EPS,
                                  "track %r: %r overlaps %r partly" % (k, e["name"], stack[-1]["name"])):
                break
            stack.append(e)
    # Flows: one start and one finish per id, each bound to a slice of its thread at its ts.
    ids = {}
    for e in fl:
        ids.setdefault((e["cat"], e["id"]), {}).setdefault(e["ph"], []).append(e)
    for k, v in ids.items():
        if not need(len(v.get("s", [])) == 1 and len(v.get("f", [])) == 1, "flow %r: one s, one f" % (k,)):
            continue
        s, f = v["s"][0], v["f"][0]
        need(f["ts"] >= s["ts"] - EPS, "flow %r ends before it starts" % (k,))
        for e in (s, f):
            need(any(x["ts"] - EPS <= e["ts"] <= x["ts"] + x["dur"] + EPS
                     for x in tracks.get((e["pid"], e["tid"]), [])), "flow %r: no slice at %r" % (k, e))
    named_p = {e["pid"] for e in ms if e["name"] == "process_name"}
    named_t = {(e["pid"], e["tid"]) for e in ms if e["name"] == "thread_name"}
    need({e["pid"] for e in xs} <= named_p, "every pid has a process_name")
    need({(e["pid"], e["tid"]) for e in xs} <= named_t, "every thread has a thread_name")
    return xs, ms, fl


def check_merged(e):
    """A CPU event's merge fields: none on one call; consistent on a merged span."""
    a = e["args"]
    if "count" not in a:
        need(not (set(a) & MERGED), "merge fields without a count: %r" % e)
        return
    n = a["count"]
    if not need(isinstance(n, int) and n >= 2 and num(a.get("total_us")) and num(a.get("mean_us"))
                and isinstance(a.get("last_event"), int), "merged span fields: %r" % e):
        return
    need(a["last_event"] > a["event"], "last_event after event: %r" % e)
    need(a["total_us"] <= e["dur"] + EPS, "the calls fit in their span: %r" % e)
    # The span is at least about half busy (the merge rule: gaps at most the mean call).
    need(2 * a["total_us"] + EPS * n >= e["dur"], "a merged span at least half busy: %r" % e)
    need(abs(a["mean_us"] * n - a["total_us"]) <= EPS * n, "mean_us * count = total_us: %r" % e)
    need(("problem" in a) == ("problem_calls" in a) and a.get("problem_calls", n) == n,
         "problem_calls = count on a problem span, else absent: %r" % e)


def calls(e):
    return e["args"].get("count", 1)


def check_other(doc, runs):
    """otherData: which runs (a list of ids that holds every run with events)."""
    od = doc.get("otherData", {})
    need(od.get("selection") in SELECTIONS, "otherData.selection: %r" % od.get("selection"))
    need(isinstance(od.get("merged"), bool), "otherData.merged: %r" % od.get("merged"))
    if need(isinstance(od.get("runs"), list) and all(isinstance(r, int) for r in od["runs"]),
            "otherData.runs: %r" % od.get("runs")):
        need(runs <= set(od["runs"]), "runs with events %r listed in otherData.runs %r" % (runs, od["runs"]))


def check_trace(doc, runs):
    """runs None: structure only."""
    xs, ms, fl = check_format(doc)
    check_other(doc, {e["pid"] for e in xs})
    # ffm's layout: one process track per run, GPU tracks above every CPU tid.
    for e in xs:
        need(e["pid"] == e["args"].get("run"), "pid is the run: %r" % e)
        gpu = e["cat"].startswith("gpu")
        need(gpu == (e["tid"] >= GPU_TID_BASE), "GPU events on GPU tracks only: %r" % e)
        if gpu:
            need(e["cat"] in ("gpu,inferred", "gpu,measured") and
                 e["args"].get("timing", "").startswith(e["cat"][4:]), "GPU span says how it is timed: %r" % e)
        if "problem" in e["args"]:
            need(num(e["args"].get("call_site_benefit_us")), "a problem carries its benefit: %r" % e)
        if not gpu:
            check_merged(e)
    xs = [e for e in xs if not e["cat"].startswith("gpu")]
    if runs is None:
        need(len(xs) > 0, "complete events")
        return
    by_run = {}
    for e in xs:
        by_run.setdefault(e["args"]["run"], []).append(e)
    # The report's timeline (run 2) says so on its track, whichever runs are exported.
    pname = {e["pid"]: e["args"].get("name", "") for e in ms if e["name"] == "process_name"}
    for r in runs:
        need(pname.get(r, "").endswith(": the report's timeline)") == (r == 2),
             "run %d's track name: %r" % (r, pname.get(r)))
    need(sorted(by_run) == runs, "runs %r, expected %r" % (sorted(by_run), runs))
    counts = {1: 3, 2: 5, 3: 4}
    for r in runs:
        n = sum(calls(e) for e in by_run.get(r, []))
        need(n == counts[r], "run %d: %d calls, expected %d" % (r, n, counts[r]))
    # Times: microseconds from the first exported run's start.
    if 1 in by_run:
        first = min(by_run[1], key=lambda e: e["ts"])
        need(close(first["ts"], 1.0) and close(first["dur"], 80.0), "run 1 first wait at 1 us for 80 us: %r" % first)
        need(all(e["name"] == "cuCtxSynchronize" and e["cat"].split(",")[0] == "wait" for e in by_run[1]),
             "stage-1 waits named after the driver entry point, cat wait")
    for e in by_run.get(2, []) + by_run.get(3, []):
        if e["name"] == "cuCtxSynchronize":
            need(close(e["args"].get("mean_us", e["dur"]), 100.0) and
                 close(e["args"]["wait_us"] / calls(e), 90.0), "sync 100 us, 90 waited: %r" % e)
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


def check_exp2(doc, merged):
    """Job exp-2 of test_export.c: its timeline, run 2, has 22 calls: on thread 4000 10
    launches of 10 us 2 us apart (one span), a sync, 3 launches 50 us apart (3 spans: the gaps
    are long next to the calls), a sync; on thread 4001 4 copies of 50 us 5 us apart, the last
    3 duplicates of the first (2 spans: a problem is never merged with a call that is none);
    on thread 4002 a sync and two waits, one inside its end, one after it (3 spans: a span
    that would overlap the sync partly is not made)."""
    check_trace(doc, None)
    od = doc.get("otherData", {})
    need(od.get("selection") == "timeline" and od.get("runs") == [2] and od.get("merged") is merged,
         "exp-2: the timeline run 2 only, merged %r: %r" % (merged, od))
    xs = [e for e in doc.get("traceEvents", []) if e.get("ph") == "X" and not e["cat"].startswith("gpu")]
    flows = [e for e in doc.get("traceEvents", []) if e.get("ph") == "s"]
    need({e["pid"] for e in xs} == {2}, "exp-2: run 2 only: %r" % {e["pid"] for e in xs})
    n = sum(calls(e) for e in xs)
    need(n == 22, "exp-2: the counts add up to the 22 calls: %d" % n)

    def named(name):
        return sorted((e for e in xs if e["name"] == name), key=lambda e: e["ts"])
    launches, syncs, copies = named("cuLaunchKernel"), named("cuCtxSynchronize"), named("cuMemcpyHtoD")
    if not merged:
        need(len(xs) == 22 and not any(set(e["args"]) & MERGED for e in xs), "--no-merge: 22 events")
        need(len(flows) == 13 and not any("args" in f for f in flows), "--no-merge: 13 arrows")
        return
    need([calls(e) for e in launches] == [10, 1, 1, 1], "launches 10+1+1+1: %r" % [calls(e) for e in launches])
    if launches:
        a = launches[0]["args"]
        need(close(launches[0]["ts"], 1.0) and close(launches[0]["dur"], 118.0) and
             close(a.get("total_us", 0), 100.0) and close(a.get("mean_us", 0), 10.0),
             "10 launches: 1 us on, 118 us long, 100 us in calls: %r" % launches[0])
    need([calls(e) for e in syncs] == [1, 1, 1, 1, 1], "syncs and waits each apart: %r" % [calls(e) for e in syncs])
    need(len(xs) == 11, "22 calls in 11 spans: %d" % len(xs))
    need([calls(e) for e in copies] == [1, 3], "copies 1+3: %r" % [calls(e) for e in copies])
    if len(copies) == 2:
        c0, c1 = copies
        need("problem" not in c0["args"] and "cname" not in c0, "first copy no problem: %r" % c0)
        a = c1["args"]
        need(c1.get("cname") == "terrible" and "duplicate transfer" in a.get("problem", "") and
             a.get("problem_calls") == 3 and a.get("bytes") == 3 * 4096 and close(c1["dur"], 160.0)
             and close(a.get("total_us", 0), 150.0), "3 duplicate copies in one red span: %r" % c1)
    need(sorted(f.get("args", {}).get("calls", 1) for f in flows) == [1, 1, 1, 10],
         "arrows: one for the 10 merged launches (args.calls 10), one each for the 3 others: %r" % flows)
    need(any(f.get("args", {}).get("calls") == 10 and close(f["ts"], 1.0) for f in flows),
         "the merged arrow starts at the first launch")


def check_refuses(doc):
    """Broken variants of a valid exp-2 merged trace: each must be refused."""
    global errors

    def cpu(d, name, i):
        evs = sorted((e for e in d["traceEvents"] if e.get("ph") == "X" and e["name"] == name),
                     key=lambda e: e["ts"])
        return evs[i]

    def flow(d):
        return next(e for e in d["traceEvents"] if e.get("ph") == "s" and "args" in e)

    def merge_copies(d):  # the first copy (no problem) taken into the duplicates' span
        c0, c1 = cpu(d, "cuMemcpyHtoD", 0), cpu(d, "cuMemcpyHtoD", 1)
        d["traceEvents"].remove(c0)
        c1["args"].update(count=4, problem_calls=4, total_us=200.0, mean_us=50.0, event=c0["args"]["event"])
        c1.update(dur=c1["ts"] + c1["dur"] - c0["ts"], ts=c0["ts"])
    variants = {
        "a count that does not add up": lambda d: cpu(d, "cuLaunchKernel", 0)["args"].update(count=11),
        "count 1": lambda d: cpu(d, "cuLaunchKernel", 0)["args"].update(count=1),
        "mean_us not total_us / count": lambda d: cpu(d, "cuLaunchKernel", 0)["args"].update(mean_us=20.0),
        "calls longer than their span": lambda d: cpu(d, "cuLaunchKernel", 0).update(dur=90.0),
        "a span mostly idle": lambda d: cpu(d, "cuLaunchKernel", 0).update(dur=300.0),
        "a problem span without problem_calls": lambda d: cpu(d, "cuMemcpyHtoD", 1)["args"].pop("problem_calls"),
        "problem_calls on a span of no problem": lambda d: cpu(d, "cuLaunchKernel", 0)["args"].update(problem_calls=10),
        "a problem merged with a call of none": merge_copies,
        "merge fields on one call": lambda d: cpu(d, "cuCtxSynchronize", 0)["args"].update(total_us=1.0),
        "a flow of 1 call with args": lambda d: flow(d)["args"].update(calls=1),
        "no otherData.selection": lambda d: d["otherData"].pop("selection"),
        "a run not in otherData.runs": lambda d: d["otherData"].update(runs=[3]),
    }
    accepted = []
    for name, f in variants.items():
        d = copy.deepcopy(doc)
        f(d)
        errors = []
        check_exp2(d, True)
        if not errors:
            accepted.append(name)
    errors = ["accepted a broken trace: %s" % a for a in accepted]
    if not accepted:
        print("%d broken variants, each refused" % len(variants))


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
    with open(path, "rb") as f:
        gz = f.read(2) == b"\x1f\x8b"
    with (gzip.open(path, "rb") if gz else open(path, "rb")) as f:
        doc = json.load(f)
    if mode == "chrome-trace":
        check_trace(doc, [1, 2, 3])
        need(doc.get("otherData", {}).get("selection") == "all", "--all-runs: selection all")
    elif mode == "chrome-trace-default":
        check_trace(doc, [2])
        need(doc.get("otherData", {}).get("selection") == "timeline" and
             doc["otherData"].get("runs") == [2], "the default: the timeline run 2: %r" % doc.get("otherData"))
    elif mode == "chrome-trace-run1":
        check_trace(doc, [1])
        need(doc.get("otherData", {}).get("selection") == "run", "--run: selection run")
    elif mode in ("chrome-trace-merged", "chrome-trace-nomerge"):
        check_exp2(doc, mode == "chrome-trace-merged")
    elif mode == "chrome-trace-refuses":
        check_exp2(doc, True)
        if not errors:
            check_refuses(doc)
    elif mode == "hatchet":
        check_tree(doc, False)
    elif mode == "chrome-trace-any":
        check_trace(doc, None)
    elif mode == "chrome-trace-gpu":
        check_trace(doc, None)
        evs = doc.get("traceEvents", [])
        need(any(e.get("cat") == "gpu,inferred" for e in evs), "inferred GPU spans")
        need(any(e.get("ph") == "s" for e in evs), "flow arrows")
        need(any("problem" in e.get("args", {}) for e in evs), "a marked problem")
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
