#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# ffm-test: timing: a short child's calls are named only once ffmd has walked it (its early walk
# races the child on a loaded machine: daemon/pytrack.h); tests/run-tests.sh runs a failure again
#
# Python call sites (TAP): `ffmctl profile` (all stages) of tests/python/pysites.py, a Python
# program that calls the simulated driver through ctypes, under each CPython build found here
# (the python3.9 to python3.13 and python3 on PATH, when they are different builds; more with
# FFM_TEST_PYTHONS="python3.12 /path/to/python3.9 ..."). Each planted call ("# SITE name" in the file) must be a
# call site named at its .py line in its function, with its own verdict: the needless syncs
# are unnecessary syncs, the reads are not; the function grouping and the chrome trace name
# the same lines; the children of multiprocessing (fork and spawn) have theirs. A Python process
# outside the job runs meanwhile and must not be touched (no pyprocs entry in any ffm
# collector of this machine).
set -u
cd "$(dirname "$0")/../.." || exit 2
. tests/ops/lib.sh
need_root
[ -e "$B/fakecuda/libcuda.so.1" ] && [ -x "$B/ffmctl" ] || { echo "# ffmctl or the simulated driver not built"; exit 77; }
command -v bpftool >/dev/null || { echo "# bpftool not found"; exit 77; }

prog=tests/python/pysites.py
pythons=() seen=()
# Every python3.9 ... python3.13 and python3 on PATH (not only the first), then FFM_TEST_PYTHONS;
# one per build (a name that does not run, such as a pyenv shim of an inactive version, is none).
cands=()
IFS=: read -ra dirs <<<"$PATH"
for d in "${dirs[@]}"; do
	for p in python3.9 python3.10 python3.11 python3.12 python3.13 python3; do
		[ -x "$d/$p" ] && cands+=("$d/$p")
	done
done
for p in "${cands[@]}" ${FFM_TEST_PYTHONS:-}; do
	exe=$(command -v "$p" 2>/dev/null) || continue
	id=$("$exe" -c 'import sys, sysconfig; print(sys.version.split()[0], sysconfig.get_config_var("Py_ENABLE_SHARED"))' 2>/dev/null) || continue
	[[ " ${seen[*]} " == *" $id "* ]] && continue
	seen+=("$id") pythons+=("$exe")
done
[ ${#pythons[@]} -gt 0 ] || { echo "# no python3 found"; exit 77; }

check_report() { # check_report PYTHON REPORT.json REPORT.txt FUNCS.txt TRACE.json
	python3 - "$@" "$prog" <<'PY'
import json, re, sys
py, rjson, rtxt, rfunc, rtrace, prog = sys.argv[1:7]
path = __import__("os").path.abspath(prog)
sites = {}
for no, line in enumerate(open(prog), 1):
    m = re.search(r"# SITE (\w+)", line)
    if m:
        sites[m.group(1)] = no
funcs = {"plain_needless": "plain_needless", "nested_needless": "outer.<locals>.inner",
         "decorated_needless": "decorated_needless", "lambda_needless": "<lambda>",
         "thread_needless": "thread_body", "method_read": "Gpu.method_read",
         "generator_read": "gen_reads", "child_read": "child"}
# 3.9 and 3.10 code objects have a name, no qualified name
old = __import__("subprocess").run([py, "-c", "import sys; print(sys.version_info < (3, 11))"],
                                   capture_output=True, text=True).stdout.strip() == "True"
if old:
    funcs = {k: v.rsplit(".", 1)[-1] for k, v in funcs.items()}
r = json.load(open(rjson))
txt, ftxt = open(rtxt).read(), open(rfunc).read()
trace = {e["args"].get("call_site") for e in json.load(open(rtrace))["traceEvents"] if e.get("ph") == "X"}
fails = []
def at(cs, name):
    return cs.get("file") == path and cs.get("line") == sites[name] and cs.get("python") is True
for name, line in sorted(sites.items()):
    fn, want = funcs[name], "%s:%d in %s" % (path, line, funcs[name])
    cs = [c for c in r["call_sites"] if at(c["call_site"], name)]
    probs = [p for p in r["problems"] if at(p["call_site"], name)]
    if not cs or any(c["call_site"]["function"] != fn for c in cs):
        fails.append("%s: no call site at %s" % (name, want))
    if want not in txt:
        fails.append("%s: the text report does not name %s" % (name, want))
    if want not in trace:
        fails.append("%s: the chrome trace does not name %s" % (name, want))
    if name.endswith("_needless"):
        if not probs or any(p["type"] != "unnecessary_sync" for p in probs):
            fails.append("%s: not an unnecessary sync: %s" % (name, [p["type"] for p in probs]))
        if "%s (pysites.py)" % fn not in ftxt:
            fails.append("%s: --group function does not name %s (pysites.py)" % (name, fn))
    elif any(p["type"] == "unnecessary_sync" for p in probs):
        fails.append("%s: its data is read at once, yet called an unnecessary sync" % name)
# fork and spawn children: two call paths to the child's line
if len([c for c in r["call_sites"] if at(c["call_site"], "child_read")]) < 2:
    fails.append("child_read: not seen in both children (fork, spawn)")
for f in fails:
    print("# " + f)
print("# %d planted sites checked under %s" % (len(sites), py))
sys.exit(1 if fails else 0)
PY
}

# Untouched: a Python process outside every job, alive while the job runs.
LD_LIBRARY_PATH=$B/fakecuda PYSITES_ITERS=100000 python3 "$prog" >/dev/null 2>&1 &
outside=$!
for py in "${pythons[@]}"; do
	id=py$((n + 1))
	if ! LD_LIBRARY_PATH=$B/fakecuda "$B/ffmctl" --state-dir "$T/state" profile --job-id "$id" -- \
		"$py" "$prog" >"$T/$id.log" 2>&1; then
		notok "profile under $py"; tail -n 20 "$T/$id.log" | diag; continue
	fi
	ctl() { "$B/ffmctl" --state-dir "$T/state" "$@"; }
	ctl report "$id" --json --top 1000 >"$T/$id.json" 2>"$T/err" && ctl report "$id" --top 1000 --noise 0 >"$T/$id.txt" &&
		ctl report "$id" --top 1000 --noise 0 --group function >"$T/$id.func" &&
		ctl export "$id" --format chrome-trace -o "$T/$id.trace" 2>>"$T/err" || { notok "report of $id"; diag <"$T/err"; continue; }
	if out=$(check_report "$py" "$T/$id.json" "$T/$id.txt" "$T/$id.func" "$T/$id.trace" 2>&1); then
		ok "$py: every planted site named at its line with its verdict"
	else
		notok "$py: planted sites"; echo "$out"; grep -E "pysites|_ctypes" "$T/$id.txt" | head -n 30 | diag
	fi
	echo "$out" | tail -n 1
done
# Two paths to one read 21 fat frames deep that differ only in main()'s line
# (tests/python/pydeep.py): told apart only when the walk reads past its first block.
if LD_LIBRARY_PATH=$B/fakecuda "$B/ffmctl" --state-dir "$T/state" profile --stages 1-2 --job-id deep -- \
	"${pythons[0]}" tests/python/pydeep.py >"$T/deep.log" 2>&1 &&
	"$B/ffmctl" --state-dir "$T/state" report deep --json --top 1000 >"$T/deep.json"; then
	check "${pythons[0]}: two paths 21 frames deep are two call sites at the read's line" python3 - "$T/deep.json" <<'PY'
import json, os, re, sys
prog = os.path.abspath("tests/python/pydeep.py")
line = next(n for n, l in enumerate(open(prog), 1) if re.search(r"# SITE deep_read", l))
r = json.load(open(sys.argv[1]))
cs = [c for c in r["call_sites"] if c["call_site"].get("file") == prog and c["call_site"].get("line") == line]
print("# %d call sites at pydeep.py:%d" % (len(cs), line))
sys.exit(0 if len(cs) >= 2 else 1)
PY
else
	notok "profile of tests/python/pydeep.py"; tail -n 20 "$T/deep.log" | diag
fi

# Code objects freed before their frames are decoded, their memory taken by decoys
# (tests/python/pygen.py): each read named at its own generated module's line.
if LD_LIBRARY_PATH=$B/fakecuda "$B/ffmctl" --state-dir "$T/state" profile --stages 1-2 --job-id gen -- \
	"${pythons[0]}" tests/python/pygen.py >"$T/gen.log" 2>&1 &&
	"$B/ffmctl" --state-dir "$T/state" report gen --json --top 1000 >"$T/gen.json"; then
	check "${pythons[0]}: frames of freed code objects named from their copies, never a decoy's" python3 - "$T/gen.json" <<'PY'
import json, os, re, sys
gen = os.path.join(os.path.abspath("tests/python"), "gen")
r = json.load(open(sys.argv[1]))
named, wrong = set(), []
for c in r["call_sites"]:
    cs = c["call_site"]
    m = re.fullmatch(re.escape(gen) + r"/(mod|decoy)_(\d+)\.py", cs.get("file") or "")
    if not m:
        continue
    i = int(m.group(2))
    if m.group(1) == "mod" and cs.get("line") == i + 2 and cs.get("function") == "read_%d" % i:
        named.add(i)
    else:
        wrong.append("%s:%s in %s" % (cs["file"], cs.get("line"), cs.get("function")))
print("# %d of 40 generated reads named; wrong: %s" % (len(named), wrong[:5]))
sys.exit(0 if len(named) == 40 and not wrong else 1)
PY
else
	notok "profile of tests/python/pygen.py"; tail -n 20 "$T/gen.log" | diag
fi

if kill -0 "$outside" 2>/dev/null; then
	hit=0
	for m in $(bpftool -j map show 2>/dev/null | python3 -c 'import json,sys; print(*[m["id"] for m in json.load(sys.stdin) if m.get("name") == "pyprocs"])'); do
		bpftool -j map lookup id "$m" key $(printf '%d %d %d %d' $((outside & 255)) $((outside >> 8 & 255)) $((outside >> 16 & 255)) $((outside >> 24 & 255))) >/dev/null 2>&1 && hit=1
	done
	check "a Python process outside every job is not touched (no pyprocs entry)" [ $hit = 0 ]
	kill "$outside"
	wait "$outside" 2>/dev/null
else
	notok "the Python process outside the job ended early (it runs 100000 iterations)"
fi
echo "1..$n"
finish
