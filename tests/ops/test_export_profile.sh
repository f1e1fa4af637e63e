#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# ffmctl export on a real recording (TAP): `ffmctl profile --stages 1` of the unnecessary_sync
# workload on the simulated driver, then both formats checked by tests/ops/check_export.py for
# structure, plus what the workload plants: the hatchet tree has step -> cuCtxSynchronize with
# 400 waits (tests/workloads/README.md), and the trace has the waits. (One stage keeps the test
# short; test_export.c covers stage-2 calls and problems on a synthetic store.) Also: profile
# exits with the program's status and the report says the program failed; -j is --json. And
# every stage of a workload with kernels: a valid trace with GPU tracks and flows, and the
# checker refuses broken variants of it. By default the trace holds the timeline run only
# (--all-runs: every run), its merged spans count every call (--no-merge: one event a call).
set -u
cd "$(dirname "$0")/../.." || exit 2
. tests/ops/lib.sh
need_root
[ -x "$B/workloads/unnecessary_sync" ] && [ -e "$B/fakecuda/libcuda.so.1" ] || {
	echo "# workloads or the simulated driver not built"; exit 77; }
if ! LD_LIBRARY_PATH=$B/fakecuda "$B/ffmctl" --state-dir "$T/state" profile --stages 1 \
	--job-id prof-1 -- "$B/workloads/unnecessary_sync" >"$T/profile.log" 2>&1; then
	notok "ffmctl profile --stages 1 unnecessary_sync"; diag <"$T/profile.log"; echo "1..$n"; exit 1
fi
ok "ffmctl profile --stages 1 unnecessary_sync"
for fmt in chrome-trace hatchet; do
	if ctl export prof-1 --format $fmt -o "$T/$fmt.json" 2>"$T/err" &&
		python3 tests/ops/check_export.py $fmt-any "$T/$fmt.json" >"$T/check" 2>&1; then
		ok "export --format $fmt: $(tail -n 1 "$T/check")"
	else
		notok "export --format $fmt"; cat "$T/err" "$T/check" 2>/dev/null | diag
	fi
done
if python3 - "$T/hatchet.json" <<'PY'
import json, sys
def find(nodes, path):
    for n in nodes:
        p = path + [n["frame"]["name"]]
        if p[-2:] == ["step", "cuCtxSynchronize"] and n["metrics"]["count"] == 400:
            return True
        if find(n.get("children", []), p):
            return True
    return False
sys.exit(0 if find(json.load(open(sys.argv[1])), []) else 1)
PY
then ok "hatchet: step -> cuCtxSynchronize with 400 waits"; else notok "hatchet: step -> cuCtxSynchronize x400"; fi
if python3 - "$T/chrome-trace.json" <<'PY'
import json, sys
ev = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e["ph"] == "X"]
stages = {e["args"]["stage"] for e in ev}
waits = [e for e in ev if e["args"]["stage"] == 1 and e["name"] == "cuCtxSynchronize"]
sys.exit(0 if stages == {1} and sum(e["args"].get("count", 1) for e in waits) >= 400 else 1)
PY
then ok "trace: the stage-1 waits (>= 400 in cuCtxSynchronize)"; else notok "trace: the stage-1 waits"; fi

# Every stage of a workload that launches kernels and copies: the trace is valid Trace Event
# Format with GPU tracks (inferred spans), flow arrows from the launches to their waits, one
# process track per run, and problems with their benefit.
if LD_LIBRARY_PATH=$B/fakecuda "$B/ffmctl" --state-dir "$T/state" profile --quiet --stages 1-4 \
	--job-id prof-gpu -- "$B/workloads/dup_transfer" --iters 10 >"$T/profile3.log" 2>&1 &&
	ctl export prof-gpu --format chrome-trace -o "$T/gpu.json" 2>"$T/err" &&
	python3 tests/ops/check_export.py chrome-trace-gpu "$T/gpu.json" >"$T/check" 2>&1; then
	ok "export of stages 1-4: GPU tracks, flows, a process per run: $(tail -n 1 "$T/check")"
else
	notok "export of stages 1-4 with GPU tracks"; cat "$T/profile3.log" "$T/err" "$T/check" 2>/dev/null | diag
fi
# The default is the report's timeline (the stage-2 run) alone; --all-runs has the 4 runs; the
# merged spans' counts add up to the calls --no-merge writes one event each for.
if ctl export prof-gpu --format chrome-trace --all-runs -o "$T/gpu-all.json" 2>/dev/null &&
	ctl export prof-gpu --format chrome-trace --no-merge -o "$T/gpu-nm.json" 2>/dev/null &&
	python3 - "$T/gpu.json" "$T/gpu-all.json" "$T/gpu-nm.json" >"$T/check" 2>&1 <<'PY'
import json, sys
def cpu(path):
    d = json.load(open(path))
    return d, [e for e in d["traceEvents"] if e["ph"] == "X" and not e["cat"].startswith("gpu")]
(d, ev), (da, eva), (dn, evn) = (cpu(p) for p in sys.argv[1:4])
runs = {e["pid"] for e in ev}
assert d["otherData"]["selection"] == "timeline" and d["otherData"]["runs"] == sorted(runs), d["otherData"]
assert {e["args"]["stage"] for e in ev} == {2}, "the default: stage 2 only"
assert sorted({e["args"]["stage"] for e in eva}) == [1, 2, 3, 4], "--all-runs: the 4 stages"
assert da["otherData"]["selection"] == "all" and len(da["otherData"]["runs"]) == 4
n = sum(e["args"].get("count", 1) for e in ev)
assert not dn["otherData"]["merged"] and not any("count" in e["args"] for e in evn)
assert n == len(evn), "merged counts %d, calls %d" % (n, len(evn))
print("timeline run %s: %d calls in %d spans; --all-runs: %d events" % (sorted(runs), n, len(ev), len(eva)))
PY
then
	ok "export default: the timeline run only, --all-runs every run, counts add up: $(tail -n 1 "$T/check")"
else
	notok "export default: the timeline run only"; diag <"$T/check"
fi
# The checker is no formality: each broken variant of that trace is refused.
python3 - "$T/gpu.json" "$T" <<'PY'
import copy, json, sys
doc = json.load(open(sys.argv[1]))
evs = doc["traceEvents"]
def variant(name, f):
    d = copy.deepcopy(doc)
    f(d["traceEvents"])
    json.dump(d, open("%s/bad-%s.json" % (sys.argv[2], name), "w"))
def overlap(ev):  # a GPU span that overlaps the next one on its track partly
    g = [e for e in ev if e.get("cat") == "gpu,inferred"]
    g[0]["dur"] = g[1]["ts"] - g[0]["ts"] + g[1]["dur"] / 2 + 1
    g[1]["dur"] = g[1]["dur"] + 50
variant("overlap", overlap)
variant("unpaired-flow", lambda ev: ev.remove(next(e for e in ev if e["ph"] == "f")))
variant("unnamed-thread", lambda ev: ev.remove(next(e for e in ev if e.get("name") == "thread_name")))
variant("bad-phase", lambda ev: ev.append({"name": "x", "ph": "Q", "pid": 1, "tid": 1, "ts": 0}))
variant("negative-dur", lambda ev: next(e for e in ev if e["ph"] == "X").update(dur=-1))
variant("pid-not-run", lambda ev: next(e for e in ev if e["ph"] == "X").update(pid=99999))
variant("count-1", lambda ev: next(e for e in ev if e["ph"] == "X" and e["cat"] == "launch")["args"].update(
    count=1, total_us=0.0, mean_us=0.0, last_event=1 << 40))
PY
for v in overlap unpaired-flow unnamed-thread bad-phase negative-dur pid-not-run count-1; do
	if python3 tests/ops/check_export.py chrome-trace-any "$T/bad-$v.json" >"$T/check" 2>&1; then
		notok "the trace checker refuses a trace with $v"
	else
		ok "the trace checker refuses a trace with $v"
	fi
done

# On a terminal (script(1)) the export shows its progress on stderr, cleared, then which run
# and what it wrote; elsewhere only those two lines.
if command -v script >/dev/null; then
	"$B/tests/ffm-synth" --state "$T/pstate" --key pk --job pj --stages 4 --iters 2000 --fast >/dev/null 2>&1
	E=("$B/ffmctl" --state-dir "$T/pstate" export pj --format chrome-trace)
	script -qec "FFM_PROGRESS_AFTER=0 ${E[*]} -o $T/tty.json" /dev/null >"$T/tty.err" 2>&1
	FFM_PROGRESS_AFTER=0 "${E[@]}" -o "$T/plain.json" 2>"$T/plain.err"
	if tr '\r' '\n' <"$T/tty.err" | grep -q $'^ffmctl export: job pj: [a-z0-9 ,:.%()]*, [0-9]* s\e\[K' &&
		grep -q "^ffmctl export: wrote [0-9]* events ([0-9.]* [kM]B, from [0-9]* calls) to $T/tty.json" "$T/tty.err" &&
		[ "$(wc -l <"$T/plain.err")" = 2 ] && ! grep -q $'\r' "$T/plain.err" &&
		grep -q "^ffmctl export: job pj: run [0-9]* (stage 2), the timeline" "$T/plain.err" &&
		cmp -s "$T/tty.json" "$T/plain.json"; then
		ok "export on a terminal: progress, cleared, then the run and what was written"
	else
		notok "export's progress"; { cat -v "$T/tty.err" | tail -c 600; cat "$T/plain.err"; } | diag
	fi
else
	skip "export's progress" "no script(1)"
fi

# The program's exit status is profile's, and the report says the program failed.
LD_LIBRARY_PATH=$B/fakecuda "$B/ffmctl" --state-dir "$T/state" profile --stages 1 --job-id prof-2 -- \
	sh -c "'$B/workloads/unnecessary_sync' --iters 20 >/dev/null; exit 3" >"$T/profile2.log" 2>&1
rc=$?
out=$(ctl report prof-2 2>&1)
if [ $rc = 3 ] && grep -q "exited with status 3" "$T/profile2.log" &&
	[[ $out == *"the program failed in 1 of the runs used (exit status 3)"* ]]; then
	ok "profile of a program that exits 3: exit status 3, and the report says the program failed"
else
	notok "profile of a failing program (rc $rc)"; { tail -n 3 "$T/profile2.log"; grep "data quality" <<<"$out"; } | diag
fi
# -j is --json (bpftool's short form), for every verb that prints JSON.
if ctl report prof-1 -j | python3 -c 'import json, sys; assert json.load(sys.stdin)["job_id"] == "prof-1"' &&
	ctl jobs -j | python3 -c 'import json, sys; assert any(j["job"] == "prof-2" for j in json.load(sys.stdin))'; then
	ok "report -j and jobs -j print JSON"
else
	notok "report -j and jobs -j print JSON"
fi
# -o FILE: the report goes to FILE (as nsys profile -o), nothing of it to stdout.
LD_LIBRARY_PATH=$B/fakecuda "$B/ffmctl" --state-dir "$T/state" profile --stages 1 --job-id prof-3 \
	-o "$T/prof-3.txt" -- "$B/workloads/unnecessary_sync" --iters 20 >"$T/prof-3.out" 2>"$T/prof-3.err"
rc=$?
if [ $rc = 0 ] && grep -q "data quality" "$T/prof-3.txt" && ! grep -q "data quality" "$T/prof-3.out" &&
	grep -q "written to $T/prof-3.txt" "$T/prof-3.err"; then
	ok "profile -o FILE writes the report to FILE"
else
	notok "profile -o FILE (rc $rc)"; cat "$T/prof-3.err" | tail -n 3 | diag
fi
# calibrate finds the driver the way profile (and a program's loader) does: LD_LIBRARY_PATH first.
out=$(LD_LIBRARY_PATH=$PWD/$B/fakecuda ctl calibrate --json --force 2>&1)
if python3 -c 'import json, sys; d = json.loads(sys.argv[1]); assert "/fakecuda/" in d["driver_path"] and d["verified"]' "$out" 2>/dev/null; then
	ok "calibrate without --driver takes the libcuda of LD_LIBRARY_PATH"
else
	notok "calibrate without --driver takes the libcuda of LD_LIBRARY_PATH"; echo "$out" | tail -n 3 | diag
fi
echo "1..$n"
finish
