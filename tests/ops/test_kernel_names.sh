#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Kernel names (TAP; issue 41, item 7). The workloads get ffm_spin with cuModuleGetFunction and
# ffm_work the CUDA runtime's way (cuLibraryLoadData, cuLibraryGetKernel, cuKernelGetFunction);
# a stage-2 run on the simulated driver must name them: the store's kernels table (schema v10),
# the report's launch row ("[kernel ffm_work]", JSON call_site.kernel) and the chrome trace's GPU
# track ("ffm_work (N calls)" instead of "GPU work of N calls"), in valid, schema-checked JSON.
set -u
cd "$(dirname "$0")/../.." || exit 2
. tests/ops/lib.sh
need_root
[ -x "$B/workloads/unnecessary_sync" ] && [ -e "$B/fakecuda/libcuda.so.1" ] || {
	echo "# workloads or the simulated driver not built"; exit 77; }
if ! LD_LIBRARY_PATH=$B/fakecuda "$B/ffmctl" --state-dir "$T/state" profile --stages 1-2 \
	--job-id kn -- "$B/workloads/unnecessary_sync" --iters 40 >"$T/profile.log" 2>&1; then
	notok "ffmctl profile --stages 1-2 unnecessary_sync"; diag <"$T/profile.log"; echo "1..$n"
	exit 1
fi
ok "ffmctl profile --stages 1-2 unnecessary_sync"

names=$(python3 -c 'import sqlite3,sys,glob
db = glob.glob(sys.argv[1] + "/keys/*.db")[0]
print(" ".join(sorted(r[0] for r in sqlite3.connect(db).execute(
    "SELECT name FROM kernels WHERE run = (SELECT max(id) FROM runs)"))))' "$T/state" 2>&1)
if [ "$names" = "ffm_hang ffm_spin ffm_work" ]; then
	ok "the store names the kernels of both getters (module and library)"
else
	notok "kernel names stored: '$names'"
fi

ctl report kn >"$T/report.txt" 2>"$T/err"
if grep -E '^  cuLaunchKernel +40x .*wl\.c:[0-9]+  \[kernel ffm_work\]' "$T/report.txt" >/dev/null; then
	ok "the report's launch row names its kernel"
else
	notok "the report's launch row"; diag <"$T/report.txt"; diag <"$T/err"
fi
ctl report kn --json >"$T/report.json" 2>"$T/err"
if python3 - "$T/report.json" <<'PY'; then
import json, sys
r = json.load(open(sys.argv[1]))
k = [s["call_site"].get("kernel") for s in r["call_sites"] if s["api"] == "cuLaunchKernel"]
assert k == ["ffm_work"], k
PY
	ok "report --json: the launch site's call_site.kernel"
else
	notok "report --json's kernel"; diag <"$T/err"
fi

if ctl export kn --format chrome-trace -o "$T/t.json" 2>"$T/err" &&
	python3 tests/ops/check_export.py chrome-trace-any "$T/t.json" >"$T/check" 2>&1 &&
	python3 - "$T/t.json" <<'PY'; then
import json, sys
d = json.load(open(sys.argv[1]))
ev = d["traceEvents"] if isinstance(d, dict) else d
gpu = [e for e in ev if e.get("cat") == "gpu,inferred"]
assert gpu, "no inferred GPU span"
named = [e for e in gpu if e["name"].startswith("ffm_work (") and e["args"].get("kernel") == "ffm_work"]
assert named, sorted(set(e["name"] for e in gpu))
PY
	ok "the chrome trace's GPU track names the kernel"
else
	notok "the chrome trace's kernel names"; cat "$T/err" "$T/check" 2>/dev/null | diag
fi
finish
