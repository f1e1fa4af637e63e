#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The words a user reads (issue 41, items 8-10), on synthetic stores (tests/report/synth.h) and,
# as root with BPF, on profiles of the simulated driver's workloads:
#   - the report's data quality is one remark a line, in plain words, each with what to do;
#     remarks that change no figure by the noise threshold are counted in one line; incomplete
#     runs are named with their reason;
#   - a combination of fixes that saves far more than its parts leads the report (issue 42);
#   - every problem type says how to fix it ("fix:" lines, JSON "fixes"), the implicit syncs
#     of a free, an async copy to pageable memory and a memset the call to use instead, a
#     duplicate copy its direction;
#   - `ffmctl help VERB` explains every option its usage names; -j before the verb is --json;
#     `jobs` shows each job's command;
#   - after `profile --stages 1-2`, the report's "next:" gives the exact command that continues,
#     which runs; the stage lines say what is probed; two call-site rows that read the same say
#     what tells them apart; `calibrate --driver` on a file that is not libcuda says so.
set -u
cd "$(dirname "$0")/../.." || exit 2
. tests/ops/lib.sh

FFMCTL=$B/ffmctl
SYNTH=$B/tests/ffm-synth
WL=$B/workloads
FAKE=$B/fakecuda
if [ ! -x "$FFMCTL" ] || [ ! -x "$SYNTH" ]; then
	echo "1..0 # SKIP needs $FFMCTL and $SYNTH (make)"
	exit 77
fi
# has FILE REGEX...: every extended regex matches a line of FILE
has() {
	local f=$1 re
	shift
	for re in "$@"; do
		grep -qE -- "$re" "$f" || { echo "# no line matches: $re"; diag <"$f"; return 1; }
	done
}
# hasnt FILE REGEX...: none matches
hasnt() {
	local f=$1 re
	shift
	for re in "$@"; do
		! grep -qE -- "$re" "$f" || { echo "# a line matches: $re"; grep -E -- "$re" "$f" | diag; return 1; }
	done
}
synth() { "$SYNTH" --key k --job j "$@" || { echo "Bail out! ffm-synth $*"; exit 1; }; }
report() { local s=$1; shift; "$FFMCTL" --state-dir "$T/$s" report j "$@"; }

# --- 8: the data quality -------------------------------------------------------------------------
synth --state "$T/all" --iters 60 --scenarios unnecessary,misplaced,dup,control,sequence
report all >"$T/all.txt"
sed -n '/^data quality/,/^$/p' "$T/all.txt" >"$T/q.txt"
quality_lines() {
	has "$T/q.txt" '^data quality:$' \
		'^  - [0-9.]+ s of the recoverable time rests on syncs whose protected data was watched only in part \(as little as 0.195% of it, no use seen\).*check the problems marked' &&
		hasnt "$T/q.txt" ';$' 'sync verdicts' 'GPU-bound' 'partial, aborted or lossy'
}
check "data quality: a heading, then one remark a line, none ending in ';', no internal terms" quality_lines
report all --noise 50 >"$T/n50.txt"
check "a remark that changes no figure by --noise is counted, not shown" \
	has "$T/n50.txt" '^data quality: good enough: 1 remark changes no figure by 50% of the wall time or more \(--noise 0 shows it\)$'
synth --state "$T/bad" --iters 40 --scenarios misplaced --run-flags 9 --exit-status 3
report bad >"$T/bad.txt"
check "incomplete runs named, with their reason and what to do; a failed program said" \
	has "$T/bad.txt" '^  - stage 1 run 1, stage 2 run 2, stage 3 run 3, stage 4 run 4 are incomplete: only part of the protected data could be watched; the recording stopped before the program did .*run the job again$' \
	'^  - the program failed in 4 of the runs used \(exit status 3\): .*fix the failure'

# --- 9: every problem type says how to fix it ----------------------------------------------------
check "unnecessary explicit sync: delete it, or an event and cuStreamWaitEvent" \
	has "$T/all.txt" '^       unnecessary: the CPU reads no data the GPU wrote between this sync and the next' \
	'^         fix: delete the sync; .*cuEventRecord.*cuStreamWaitEvent'
check "misplaced: move the sync to the first use" \
	has "$T/all.txt" '^         fix: move the sync down to just before that first use$'
dup_words() {
	has "$T/all.txt" '^       duplicate: the same bytes copied from the host to the same GPU buffer again \(59 of 60 transfers\)' \
		'^         fix: keep the data on the GPU: copy it once' &&
		! grep -A3 'duplicate transfer' "$T/all.txt" | grep -q 'no data the GPU wrote'
}
check "duplicate host-to-device copy: its direction named, keep the data on the GPU" dup_words
for c in "cuMemFree_v2|cuMemFree waits for all of the GPU's work: .*cuMemFreeAsync \\(cudaFreeAsync\\)" \
	"cuMemsetD32_v2|a memset of managed \\(or pinned host\\) memory waits for the GPU: .*a kernel.*cuMemsetD\\*Async"; do
	synth --state "$T/${c%%|*}" --iters 40 --scenarios unnecessary --sync-api "${c%%|*}"
	report "${c%%|*}" >"$T/${c%%|*}.txt"
	check "an implicit sync in ${c%%|*}: the call to use instead" has "$T/${c%%|*}.txt" "^         fix: ${c#*|}"
done
synth --state "$T/pageable" --iters 40 --scenarios unnecessary --copy-us 50
report pageable >"$T/pageable.txt"
check "an async copy to pageable memory that waited: its direction, pinned memory" \
	has "$T/pageable.txt" '^       unnecessary: the CPU waited in this copy back from the GPU, and reads none of the copied data' \
	'^         fix: an async copy waits when its host memory is pageable: .*cuMemAllocHost.*cuMemHostRegister'
synth --state "$T/read" --iters 400 --scenarios host_read
report read >"$T/read.txt"
# its value is used at once, before the next launch: conditional (the required-read rule)
check "host read: if the value can wait, read every 50 iterations" \
	has "$T/read.txt" '^conditional: reads whose value the next GPU step may need' \
	'^   1  if the value used at app.c:62 can wait, reading it every 50 iterations saves'

# The combined-fix lead (docs/REPORT.md): two syncs that each save 0.2 ms a step alone (the
# other waits instead) and 3.2 ms together lead the report; where one of them saves more alone
# than the combination adds (K 2 ms, C 1 ms), nothing leads.
synth --state "$T/lead" --iters 100 --scenarios sequence --k-us 3000 --c-us 200 --k2-us 200 \
	--c2-us 3000
report lead >"$T/lead.txt"
report lead --json >"$T/lead.json"
check "lead: lines fixed together, right under the headline" \
	has "$T/lead.txt" '^lead: lines seq_first at app.c:51 and seq_second at app.c:52, fixed together: 0.320000 s \(49.9%\); their own benefits add up to 0.040000 s'
check "lead: the JSON has the lines and both numbers" python3 -c "
import json
l = json.load(open('$T/lead.json'))['lead']
assert [c['line'] for c in l['lines']] == [51, 52], l
assert l['benefit_s'] == 0.32 and l['parts_s'] == 0.04, l"
synth --state "$T/nolead" --iters 100 --scenarios sequence --k-us 2000
report nolead >"$T/nolead.txt"
report nolead --json >"$T/nolead.json"
check "lead: none where one line alone saves more than the combination adds" \
	hasnt "$T/nolead.txt" '^lead:'
check "lead: null in the JSON then" python3 -c "
import json; assert json.load(open('$T/nolead.json'))['lead'] is None"
report all --json >"$T/all.json"
check "JSON: each problem's fixes, one per type it has, the same words" python3 -c "
import json, sys
r = json.load(open('$T/all.json'))
for p in r['problems']:
    assert set(p['fixes']) == set(p['types']), p
    for t, f in p['fixes'].items():
        assert f and f in open('$T/all.txt').read(), (t, f)
assert any('cuStreamWaitEvent' in p['fixes'].get('unnecessary_sync', '') for p in r['problems'])
"
check "JSON report follows its schema (fixes, next_command)" /usr/bin/python3 tests/ops/check_json.py --strict report "$T/all.json"

# --- 10: help, -j, jobs ----------------------------------------------------------------------------
missing=
for v in $("$FFMCTL" help | sed -n '/^Verbs:/,/^$/{s/^  \([a-z]*\) .*/\1/p}' | grep -vx help); do
	"$FFMCTL" help "$v" >"$T/help.txt"
	for o in $(sed '/^$/q' "$T/help.txt" | grep -oE -- '(^|[[ (|])--?[a-zA-Z][a-z-]*' | sed 's/^[^-]*//' | sort -u); do
		# an explanation: the option at the start of an indented line, words after it
		grep -qE -- "^  (-[a-z], )?$o(, --[a-z-]+)?( [A-Z0-9.|:a-z-]+)?( {2,}[a-z(]|$)" <(sed '1,/^$/d' "$T/help.txt") ||
			missing="$missing $v:$o"
	done
done
check "ffmctl help VERB explains every option of its usage${missing:+; not:$missing}" test -z "$missing"
out=$("$FFMCTL" -j --state-dir "$T/all" jobs 2>&1)
check "-j before the verb: jobs as JSON" python3 -c "import json, sys; assert isinstance(json.loads(sys.argv[1]), list)" "$out"
out=$("$FFMCTL" --state-dir "$T/all" -j report j --group function 2>&1)
check "-j before the verb: report as JSON, with the verb's own options" \
	python3 -c "import json, sys; assert json.loads(sys.argv[1])['grouping'] == 'function'" "$out"
"$FFMCTL" --state-dir "$T/all" jobs >"$T/jobs.txt"
check "jobs: each job's command" has "$T/jobs.txt" ' STARTED +COMMAND$' '^j .* /opt/app/bin/app$'
"$FFMCTL" --state-dir "$T/all" jobs --json >"$T/jobs.json"
jobs_json() {
	python3 -c "import json; assert json.load(open('$T/jobs.json'))[0]['exe'] == '/opt/app/bin/app'" &&
		/usr/bin/python3 tests/ops/check_json.py --strict jobs "$T/jobs.json"
}
check "jobs --json: exe, and the schema" jobs_json

# --- 10: profile, calibrate (root, BPF, the simulated driver) -------------------------------------
if [ "$(id -u)" != 0 ] || [ ! -e "$FAKE/libcuda.so.1" ] || [ ! -x "$WL/free_in_loop" ]; then
	skip "profile and calibrate" "needs root and the simulated driver (make)"
	finish
fi
out=$("$FFMCTL" --state-dir "$T/c" calibrate --driver /bin/true 2>&1); rc=$?
check "calibrate --driver of a file that is no libcuda says so (rc $rc)" \
	test $rc = 1 -a "$out" = "ffmctl calibrate: /bin/true is not libcuda: it exports no cuInit (the NVIDIA driver's library is libcuda.so.1; without --driver, the one a program would load is taken)"
out=$("$FFMCTL" --state-dir "$T/c" calibrate --driver /etc/passwd 2>&1); rc=$?
[ $rc = 1 ] && [[ $out == "ffmctl calibrate: /etc/passwd is not libcuda: not an ELF file "* ]]
check "... and of a file that is not ELF (rc $rc)" test $? = 0

prof() { # prof NAME ARGS...: ffmctl --state-dir $T/p ARGS, into $T/NAME.out and .err
	local name=$1
	shift
	LD_LIBRARY_PATH=$FAKE "$FFMCTL" --state-dir "$T/p" "$@" >"$T/$name.out" 2>"$T/$name.err"
}
prof p12 profile --stages 1-2 -- "$WL/free_in_loop" --iters 30
rc=$?
if [ $rc != 0 ] && grep -qiE 'permission|BPF' "$T/p12.err"; then
	skip "profile" "BPF not usable here: $(head -c 200 "$T/p12.err")"
	finish
fi
check "profile --stages 1-2 exits 0" test $rc = 0
check "the stage lines say what is probed" has "$T/p12.err" \
	"^ffm: stage 1 of 2 \\(baseline: .*\\): probes on libcuda's internal wait function only: it sees every wait, not the calls$" \
	"^ffm: stage 2 of 2 \\(detailed .*\\): probes on libcuda's internal wait function and [0-9]+ driver functions \\([0-9]+ entry points with their versioned variants\\)$"
key=$(sed -n 's/^ffm report: job .*, key //p' "$T/p12.out")
want="  to run it: ffmctl --state-dir $T/p profile --stages 3-4 --key $key -- $WL/free_in_loop --iters 30"
grep -A1 '^next: the next run records stage 3' "$T/p12.out" | grep -qxF -- "$want"
check "after --stages 1-2, next: gives the exact command that continues" test $? = 0
check "two call-site rows that read the same say what tells them apart" has "$T/p12.out" \
	'cuLaunchKernel .* wl_work at tests/workloads/wl.c:[0-9]+  \[kernel ffm_work\]  \[called from step at tests/workloads/free_in_loop.c:28\]$' \
	'cuLaunchKernel .* wl_work at tests/workloads/wl.c:[0-9]+  \[kernel ffm_work\]  \[called from step at tests/workloads/free_in_loop.c:29\]$'
cmd=${want#  to run it: ffmctl }
eval "prof p34 -j $cmd"
rc=$?
check "the command runs stages 3-4 on that key (-j before the verb: the JSON report)" python3 -c "
import json
r = json.load(open('$T/p34.out'))
assert $rc == 0 and r['key'] == '$key' and r['problems_known'] and r['next_command'] is None, r['next']
assert any(p['api'].startswith('cuMemFree') and 'cuMemFreeAsync' in p['fixes']['unnecessary_sync'] for p in r['problems'])
"
prof p1 -j profile --stages 1 -- "$WL/free_in_loop" --iters 5
check "profile --json: next_command continues with stages 2-4" python3 -c "
import json
r = json.load(open('$T/p1.out'))
assert r['next_command'].startswith('ffmctl --state-dir $T/p profile --stages 2-4 --key profile-'), r['next_command']
assert r['next_command'].endswith(' -- $WL/free_in_loop --iters 5'), r['next_command']
"
finish
