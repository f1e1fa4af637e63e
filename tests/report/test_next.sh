#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The report's "next:" line says what ffmd will do at the key's next run: the stage plan of
# stages/ffm_plan.h asked with what the key's store knows (stages/plan_key.c), failures, given-up
# stages and re-tries included, the same in the text and the JSON. Stores by ffm-synth.
set -u
cd "$(dirname "$0")/../.." || exit 2
B=${FFM_BUILD:-build}
FFMCTL=$B/ffmctl
SYNTH=$B/tests/ffm-synth

n=0
fails=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
notok() { n=$((n + 1)); fails=$((fails + 1)); echo "not ok $n - $1"; }

if [ ! -x "$FFMCTL" ] || [ ! -x "$SYNTH" ] || ! command -v python3 >/dev/null; then
	echo "1..0 # SKIP needs $FFMCTL, $SYNTH (make) and python3"
	exit 77
fi
T=$(mktemp -d /tmp/ffm-test-next-XXXXXX) || exit 2
trap 'rm -rf "$T"' EXIT

synth() { # synth KEY JOB ARGS...
	local key=$1 job=$2
	shift 2
	"$SYNTH" --state "$T" --key "$key" --job "$job" --iters 10 "$@" >/dev/null
}
# next JOB WANT: the report's "next:" line of JOB is WANT, and its JSON "next" the same
next() {
	local got js
	got=$("$FFMCTL" --state-dir "$T" report "$1" | sed -n 's/^next: //p')
	js=$("$FFMCTL" --state-dir "$T" report --json "$1" |
		python3 -c 'import json, sys; print(json.load(sys.stdin)["next"])')
	if [ "$got" = "$2" ] && [ "$js" = "$2" ]; then
		ok "$1: next: $2"
	else
		notok "$1: next: $2"
		echo "# text: $got"
		echo "# json: $js"
	fi
}

S1="the next run of this job key records stage 1 (which calls synchronize and how long they wait)"
S2="the next run records stage 2 (every sync and transfer, timed, with call sites)"
ALL="all stages have run; further runs of this key only monitor (stage 1) and re-trace when the\
 behaviour changes"
AGAIN="; again, since its last run did not complete"

# A stage-1 run cut short (FFM_RUN_PARTIAL): ffmd repeats stage 1; the stage is not done.
synth ka once --stages 1 --run-flags 1 || { echo "Bail out! ffm-synth failed"; exit 1; }
next once "$S1$AGAIN"
# Every stage's run partial: none is complete, stage 1 is tried again (not "all have run").
synth kb allpart --run-flags 1 --scenarios unnecessary || { echo "Bail out! ffm-synth"; exit 1; }
next allpart "$S1$AGAIN"
# Stage 1 failed twice: given up, stage 2 next.
synth kc f1 --stages 1 --run-flags 1 && synth kc f2 --stages 1 --run-flags 1 ||
	{ echo "Bail out! ffm-synth failed"; exit 1; }
next f2 "$S2; given up: stage 1 (its runs failed 2 times)"
# Complete runs of every stage: monitoring, as before.
synth kd full --scenarios unnecessary || { echo "Bail out! ffm-synth failed"; exit 1; }
next full "$ALL"
# Stage 1 complete: stage 2 next, as before.
synth ke mon --stages 1 || { echo "Bail out! ffm-synth failed"; exit 1; }
next mon "$S2"

echo "1..$n"
echo "# $((n - fails)) passed, $fails failed"
[ "$fails" = 0 ]
