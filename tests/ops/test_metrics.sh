#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# ffmd's Prometheus metrics (metrics_dir, daemon/metrics.h) and its analysis at each run's end
# (daemon/analyzer.h), against a private ffmd (TAP):
#   - the file parses as the text exposition format (tests/ops/check_prom.py: metric and label
#     names, HELP/TYPE lines, label escaping), for a job whose id and key need escaping;
#   - three runs of a key (stages 1-3 of a workload with an unnecessary sync): the stage, and
#     after stage 3 the recoverable seconds and share, equal to the analysis ffmd stored in the
#     key's store and to ffmctl report --json; records lost; ffm_up 0 after ffmd stops;
#   - written by rename: a new inode each time, no temporary file left, and a symbolic link
#     planted as ffm.prom is replaced, its target untouched;
#   - a metrics_dir that is a symbolic link, writable by others, or another user's refuses to
#     start ffmd with the reason;
#   - the parser refuses broken variants of the file.
set -u
cd "$(dirname "$0")/../.." || exit 2
. tests/ops/lib.sh
need_root
FAKE=$B/fakecuda
WL=$B/workloads
[ -x "$WL/unnecessary_sync" ] && [ -e "$FAKE/libcuda.so.1" ] || {
	echo "# workloads or the simulated driver not built"; exit 77; }
PROM=$T/prom/ffm.prom
mkdir -m 0755 "$T/prom"
echo victim >"$T/victim"
ln -s "$T/victim" "$PROM"
printf 'metrics_dir = %s/prom\n' "$T" >"$T/ffmd.conf"
start_ffmd --config "$T/ffmd.conf" || { notok "ffmd starts with metrics_dir"; finish; }
if [ -f "$PROM" ] && [ ! -L "$PROM" ] && [ "$(cat "$T/victim")" = victim ]; then
	ok "a link planted as ffm.prom is replaced by the file, its target untouched"
else
	notok "a planted link"; ls -l "$T/prom" | diag
fi
check "the file at start parses, ffm_up 1" sh -c \
	"python3 tests/ops/check_prom.py '$PROM' >/dev/null && grep -qx 'ffm_up 1' '$PROM'"

JOB='mt "one" \ two'
KEY='key\with"quotes'
# One run of the key as job $1: the workload waits for the job to exist, then runs.
run_job() {
	sh -c "sleep 0.5; exec env LD_LIBRARY_PATH=$FAKE $WL/unnecessary_sync --iters 30" >/dev/null 2>&1 &
	local wl=$!
	ctl job start "$1" --key "$KEY" --pid $wl >/dev/null || return 1
	wait $wl
	ctl job end "$1" >/dev/null
}
# Wait until the analysis of job $1 is in the file (up to 20 s).
wait_analysis() {
	for _ in $(seq 200); do
		python3 tests/ops/check_prom.py "$PROM" --json 2>/dev/null | python3 -c '
import json, sys
s = json.load(sys.stdin)
sys.exit(0 if any(n == "ffm_job_analysis_timestamp_seconds" and l["job"] == sys.argv[1] for n, l, v in s) else 1)' "$1" && return 0
		sleep 0.1
	done
	return 1
}
# Each file seen is pinned by a hard link outside the metrics directory, so the file system
# cannot hand its inode number to the next file: a new number then means a new file.
pin() { ln -f "$PROM" "$T/pin$1" && stat -c %i "$PROM"; }
ino0=$(pin 0)
run_job "$JOB 1" && wait_analysis "$JOB 1"
check "stage 1: the job's analysis reaches the file" test $? = 0
ino1=$(pin 1)
run_job "$JOB 2" && run_job "$JOB 3" && wait_analysis "$JOB 3"
check "stages 2 and 3 ran and were analysed" test $? = 0
ino2=$(pin 2)
check "written by rename: a new inode each time, no temporary file left" sh -c \
	"[ $ino0 != $ino1 ] && [ $ino1 != $ino2 ] && [ \$(ls -A '$T/prom' | wc -l) = 1 ]"
ctl report "$JOB 3" --json >"$T/report.json" 2>"$T/report.err"
DB=$(ls "$T"/state/keys/*.db | head -n 1)
python3 - "$PROM" "$T/report.json" "$DB" "$JOB" "$KEY" <<'PY' >"$T/check" 2>&1
import json, sqlite3, subprocess, sys, urllib.parse
prom, rep, db, job, key = sys.argv[1:6]
out = subprocess.run(["python3", "tests/ops/check_prom.py", prom, "--json"], capture_output=True, text=True)
assert out.returncode == 0, out.stdout
samples = json.loads(out.stdout)
def val(name, j):
    v = [x for n, l, x in samples if n == name and l["job"] == j]
    assert len(v) <= 1, (name, j, v)
    return v[0] if v else None
for i in (1, 2, 3):
    j = "%s %d" % (job, i)
    labels = [l for n, l, x in samples if l.get("job") == j]
    assert labels and all(l == {"job": j, "key": key, "uid": "0"} for l in labels), labels
    assert val("ffm_job_stage", j) == i, (j, val("ffm_job_stage", j))
    assert val("ffm_job_running", j) == 0
    assert val("ffm_job_records_lost", j) == 0
assert val("ffm_job_recoverable_seconds", job + " 1") is None, "stage 1: not known yet"
rep = json.load(open(rep))
rec, share = val("ffm_job_recoverable_seconds", job + " 3"), val("ffm_job_recoverable_ratio", job + " 3")
# (its size is the analysis's business, tested elsewhere; on a loaded machine it may be 0)
assert rep["problems_known"] and rec is not None and share is not None, (rec, rep["recoverable_s"])
assert abs(rec - rep["recoverable_s"]) < 1e-9, (rec, rep["recoverable_s"])
assert abs(share * 100 - rep["recoverable_pct"]) < 1e-3, (share, rep["recoverable_pct"])
con = sqlite3.connect("file:%s?mode=ro" % urllib.parse.quote(db), uri=True)
row = con.execute("SELECT recoverable_ns, tool_version FROM analyses WHERE job_id = ?", (job + " 3",)).fetchone()
assert row and abs(row[0] / 1e9 - rec) < 1e-9, row
assert [x for n, l, x in samples if n == "ffm_jobs_active"] == [0]
print("recoverable %.6f s (%.1f%%), stored by ffmd %s" % (rec, share * 100, row[1]))
PY
check "stage, recoverable seconds and share, records lost: as ffmd stored them and as the report says" test $? = 0
diag <"$T/check"
stop_ffmd
check "ffm_up 0 once ffmd stopped" grep -qx 'ffm_up 0' "$PROM"

# Refused directories: ffmd does not start, and says why.
refused() { # refused NAME WANT: ffmd with metrics_dir = $T/NAME must not start, log has WANT
	printf 'metrics_dir = %s/%s\n' "$T" "$1" >"$T/ffmd.conf"
	"$B/ffmd" --state-dir "$T/state" --runtime-dir "$T/run" --config "$T/ffmd.conf" >"$T/refused.log" 2>&1 &
	local pid=$! i
	for i in $(seq 100); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
	if kill -0 $pid 2>/dev/null; then
		kill $pid; wait $pid 2>/dev/null
		notok "metrics_dir $1: refused"; return
	fi
	wait $pid
	if grep -q "$2" "$T/refused.log"; then ok "metrics_dir $1: refused ($2)"; else
		notok "metrics_dir $1: refused with '$2'"; diag <"$T/refused.log"; fi
}
ln -s "$T/prom" "$T/link"
refused link "a symbolic link"
mkdir -m 0777 "$T/open"
refused open "no one else may write"
mkdir -m 0755 "$T/other" && chown nobody "$T/other"
refused other "no one else may write"

# The parser is no formality: broken variants of the file are refused.
bad=0
variant() { sed "$1" "$PROM" >"$T/bad.prom"; python3 tests/ops/check_prom.py "$T/bad.prom" >/dev/null 2>&1 && bad=$((bad + 1)); }
variant 's/\\"/"/'                      # an unescaped quote in a label value
variant '/# TYPE ffm_job_stage/d'       # samples without TYPE
variant 's/^ffm_up /ffm-up /'           # a bad metric name
variant '2p'                            # a TYPE line twice
variant 's/ 0$/ zero/'                  # a bad value
check "the parser refuses each broken variant" test $bad = 0
echo "1..$n"
finish
