#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Names a job's user chose never reach a terminal raw (TAP; common/termsafe.h). A job id and a
# key holding "ESC ]2;...BEL" (retitle) and "ESC [2J" (clear), and a C1 CSI, are profiled;
# profile's own report, `report`, `report --json`, `jobs`, an error naming the job and a report
# written with -o hold no raw control character (newline and tab aside), the escaped forms
# instead, and the JSON still gives back the exact bytes.
set -u
cd "$(dirname "$0")/../.." || exit 2
. tests/ops/lib.sh
need_root
[ -x "$B/workloads/unnecessary_sync" ] && [ -e "$B/fakecuda/libcuda.so.1" ] || {
	echo "# workloads or the simulated driver not built"; exit 77; }
ID=$'job\e]2;owned\a\e[2J\xc2\x9b1'
KEY=$'key\e]2;owned\a'
# Any C0 control but newline and tab, or a C1 control (raw byte or UTF-8), in file $1?
raw_controls() { LC_ALL=C grep -qaP '[\x00-\x08\x0b-\x1f]|\xc2[\x80-\x9f]' "$1"; }

if LD_LIBRARY_PATH=$B/fakecuda "$B/ffmctl" --state-dir "$T/state" profile --stages 1 \
	--job-id "$ID" --key "$KEY" -o "$T/prof.txt" -- "$B/workloads/unnecessary_sync" \
	--iters 20 >"$T/profile.out" 2>"$T/profile.err"; then
	ok "ffmctl profile with a job id and key holding terminal escapes"
else
	notok "ffmctl profile with escapes in the id"; diag <"$T/profile.err"; finish
fi
ctl report "$ID" >"$T/report.txt" 2>"$T/report.err"
ctl report "$ID" --json >"$T/report.json" 2>>"$T/report.err"
ctl jobs >"$T/jobs.txt" 2>>"$T/report.err"
ctl report "${ID}x" >"$T/missing.txt" 2>"$T/missing.err"
for f in prof.txt profile.out profile.err report.txt report.err report.json jobs.txt missing.err; do
	if raw_controls "$T/$f"; then
		notok "$f holds a raw control character"; LC_ALL=C cat -v "$T/$f" | head -5 | diag
	else
		ok "$f: no raw control character"
	fi
done
check "the report names the key escaped" grep -qF 'key\x1b]2;owned\x07' "$T/report.txt"
check "jobs names the job escaped" grep -qF 'job\x1b]2;owned\x07\x1b[2J\u009b1' "$T/jobs.txt"
check "an error names the job escaped" grep -qF 'job\x1b]2;owned' "$T/missing.err"
if python3 - "$T/report.json" "$ID" <<'PY'
import json, sys
v = json.load(open(sys.argv[1], encoding="utf-8", errors="surrogateescape"))
want = sys.argv[2].encode("utf-8", "surrogateescape").decode("utf-8")
sys.exit(0 if v["job_id"] == want else 1)
PY
then ok "report --json gives back the job id's exact bytes"; else notok "report --json job_id"; fi
echo "1..$n"
finish
