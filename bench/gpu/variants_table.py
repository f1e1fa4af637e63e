#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The table of bench/gpu/variants.sh, from its raw outputs.

    variants_table.py OUT TESTS_GPU WORKLOADS

Per variant of OUT/variants.list ("name|kind|arguments", bench/gpu/variants.sh): the saving
measured from OUT/NAME.runs (pair i is the i-th plain and the i-th fixed run: the median, the
minimum and the spread, max - min, of the pairs' differences of LOOP_S, or of WALL_S where a
run printed no LOOP_S), whether
plain and fixed computed the same (CHECKSUM, or RESULT for the PyTorch idioms), and from
OUT/NAME.json (ffmctl report --json) the benefits of the planted lines (the FFM-PLANT lines of
the variant's class in its source), the headline and the top problem. Error = (estimate -
saving) / saving; for a control (no planted line), or where the fix saves too little to divide
by, the estimate's share of the plain loop stands in its place.
"""
import json
import os
import re
import statistics as st
import sys


def arg_of(args, flag):
    m = re.search(r"%s (\S+)" % re.escape(flag), args)
    return m.group(1) if m else None


def plants(kind, args, gpu, wl):
    """The planted lines of a variant: [(file name, line)]."""
    if kind == "torch":
        files, tag = [os.path.join(gpu, "torch_idioms.py")], r"FFM-PLANT: idiom (\w+)"
        want = arg_of(args, "--idiom")
    elif kind == "wl":
        files, tag, want = [os.path.join(wl, f) for f in sorted(os.listdir(wl))
                            if f.endswith((".c", ".cpp"))], r"FFM-PLANT: (\w+) ", args.split()[0]
    else:  # a class of variants.cu
        files, tag, want = [os.path.join(gpu, "variants.cu")], r"FFM-PLANT: (\w+)", kind
    out = []
    for f in files:
        for n, line in enumerate(open(f, errors="replace"), 1):
            m = re.search(tag, line)
            if m and m.group(1) == want:
                out.append((os.path.basename(f), n))
    return out


def runs(path):
    """{"plain": [...], "fixed": [...]} of LOOP_S (or WALL_S), and the results per mode."""
    loop, wall, res = {"plain": [], "fixed": []}, {"plain": [], "fixed": []}, {}
    for line in open(path):
        f = line.split()
        if len(f) < 3 or f[0] not in loop:
            continue
        if f[1] == "LOOP_S":
            loop[f[0]].append(float(f[2]))
        elif f[1] == "WALL_S":
            wall[f[0]].append(float(f[2]))
        elif f[1] in ("CHECKSUM", "RESULT"):
            res.setdefault(f[0], set()).add(f[2])
    full = all(len(loop[k]) == len(wall[k]) for k in loop)
    return (loop if full else wall), res


def row(out, name, kind, args, gpu, wl):
    t, res = runs(os.path.join(out, name + ".runs"))
    if not t["plain"] or not t["fixed"]:
        return "| %s | no runs (%s) |" % (name, "dry run" if kind == "torch" else "failed")
    try:
        r = json.load(open(os.path.join(out, name + ".json")))
    except (OSError, ValueError):
        return "| %s | report failed |" % name
    d = [p - f for p, f in zip(t["plain"], t["fixed"])]
    saved, plain = st.median(d), st.median(t["plain"])
    same = "yes" if len(res.get("plain", ())) == 1 and res.get("plain") == res.get("fixed") \
        else "NO"
    lines = plants(kind, args, gpu, wl)
    probs = r.get("problems", [])
    # A read whose value may feed the next step is priced as a conditional entry, not a problem
    # (docs/ACCURACY.md, the required-read rule): its planted line's estimate is that price.
    est = sum(p["benefit_s"] for p in probs + r.get("conditional", [])
              if (os.path.basename(p["call_site"].get("file") or ""),
                  p["call_site"].get("line")) in lines)
    head = r.get("recoverable_s") or 0
    top = probs[0] if probs else None
    tops = "%s at %s:%s" % (top["type"], os.path.basename(top["call_site"].get("file") or "?"),
                            top["call_site"].get("line")) if top else "none"

    def err(e):
        if lines and saved > max(0.005, 0.01 * plain):
            return "%+.0f%%" % ((e - saved) / saved * 100)
        return "%.1f%% of loop" % (e / plain * 100) if plain > 0 else "n/a"
    return "| %s | %.3f | %.3f | %.3f | %.3f | %.3f | %s | %d | %.3f | %.3f | %s | %s | %s |" % (
        name, plain, st.median(t["fixed"]), saved, min(d), max(d) - min(d), same, len(d),
        est, head, err(est) if lines else "control", err(head), tops)


def main():
    out, gpu, wl = sys.argv[1:4]
    print("| variant | plain (s) | fixed (s) | saved: median of pairs (s) | min (s) | spread (s) "
          "| same result | pairs | ffm: planted lines (s) | ffm: headline (s) | error (lines) "
          "| error (headline) | top problem |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for line in open(os.path.join(out, "variants.list")):
        f = line.rstrip("\n").split("|")
        if len(f) == 3 and f[0]:
            print(row(out, f[0], f[1], f[2], gpu, wl))


if __name__ == "__main__":
    main()
