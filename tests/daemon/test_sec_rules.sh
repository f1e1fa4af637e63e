#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# A config rule and a job by request on the same selector (TAP; issue 38, defect 9b). ffmd runs
# with `[rule NAME] uid = U` (and one with `exe = PATH`); an admin's `job start --uid U` (and
# `--exe PATH`) takes the selector over while it runs, as a job by request wins over a rule.
# When that job ends the selector must pass back to the rule: the user's next run is a rule job
# again (before, the ended job took its BPF entry back at its own end and the rule never
# matched again).
set -u
cd "$(dirname "$0")/../.." || exit 2
. tests/ops/lib.sh
need_root
FAKE=$PWD/$B/fakecuda
WL=$PWD/$B/workloads/unnecessary_sync
[ -f "$FAKE/libcuda.so.1" ] && [ -x "$WL" ] || { echo "# driver or workload not built"; exit 2; }

# ffmrule1 runs the uid rule's processes, ffmrule2 (no rule of its uid) the exe rule's.
make_users ffmrule1 ffmrule2
U1=$(id -u ffmrule1)
# The exe rule's own copy of the workload (a rule's exe selector is the file's identity).
cp "$WL" "$T/app-exe" && chmod 755 "$T/app-exe"
# run_wl USER APP: a short run of the workload APP as USER (bounded: a hang is a failure).
run_wl() {
	timeout 60 runuser -u "$1" -- env LD_LIBRARY_PATH="$FAKE" "$2" --iters 20 --kernel-us 100 \
		--cpu-us 100 >/dev/null 2>&1
}
# jobs_of PREFIX: how many jobs (any state) have an id starting with PREFIX.
jobs_of() {
	ctl jobs --json 2>/dev/null | python3 -c '
import json, sys
print(sum(j["job"].startswith(sys.argv[1]) for j in json.load(sys.stdin)))' "$1"
}
# wait_jobs PREFIX N: until N such jobs exist (10 s at most); the count last seen.
wait_jobs() {
	local c=0
	for _ in $(seq 100); do
		c=$(jobs_of "$1")
		[ "${c:-0}" -ge "$2" ] && break
		sleep 0.1
	done
	echo "${c:-0}"
}

printf '[rule rul-uid]\nuid = %s\n\n[rule rul-exe]\nexe = %s\n' "$U1" "$T/app-exe" >"$T/rules.conf"
start_ffmd --config "$T/rules.conf" || { notok "ffmd starts with the rules"; finish; }
ctl calibrate --driver "$FAKE/libcuda.so.1" >/dev/null 2>&1 ||
	{ notok "calibrate the simulated driver"; finish; }

# case_sel SEL VALUE RULE USER APP: a run of APP by USER matched by RULE, then one under a job
# by request with SEL VALUE, then, once that job ended, two runs matched by RULE again.
case_sel() {
	local sel=$1 val=$2 rule=$3 user=$4 app=$5 id="req-${1#--}" a b c
	run_wl "$user" "$app"
	a=$(wait_jobs "$rule-" 1)
	ctl job start "$id" --key "$id" $sel "$val" >/dev/null ||
		{ notok "$rule: job start $sel"; return; }
	run_wl "$user" "$app"
	sleep 0.5
	b=$(jobs_of "$rule-")
	ctl job end "$id" >/dev/null || { notok "$rule: job end $id"; return; }
	run_wl "$user" "$app"
	run_wl "$user" "$app"
	c=$(wait_jobs "$rule-" $((a + 2)))
	if [ "$a" = 1 ] && [ "$b" = 1 ] && [ "$c" = 3 ]; then
		ok "$rule matches again after a job by request on the same selector ($sel) ended"
	else
		notok "$rule: $a rule job(s) before the job by request, $b during, $c after (want 1, 1, 3)"
		diag <"$T/ffmd.log"
	fi
}
case_sel --uid "$U1" rul-uid ffmrule1 "$WL"
case_sel --exe "$T/app-exe" rul-exe ffmrule2 "$T/app-exe"

echo "1..$n"
finish
