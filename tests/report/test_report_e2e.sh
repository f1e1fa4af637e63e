#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# `ffmctl report` of a profiled workload, end to end (real BPF, the simulated driver): profile
# unnecessary_sync through every stage `ffmctl profile` runs, then the report must name the
# planted call site (tests/workloads/unnecessary_sync.c:27, cuCtxSynchronize): as the top
# problem, an unnecessary sync, once stage 3 has classified it; before that, as the call site
# with the most time waited, with the next stage named. Also: with a state dir that holds
# nodes/, the run's store goes to nodes/<host>/ and the report finds it there. And a program that
# never loads the driver: its profile, report and diff succeed, with nothing in them.
# Skips (exit 77, saying why) without root/BPF or the simulated driver.
set -u
cd "$(dirname "$0")/../.." || exit 2
B=${FFM_BUILD:-build}
FFMCTL=$B/ffmctl
WL=$B/workloads
FAKE=$B/fakecuda

n=0
fails=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
notok() { n=$((n + 1)); fails=$((fails + 1)); echo "not ok $n - $1"; }
check() { local name=$1; shift; if "$@"; then ok "$name"; else notok "$name"; fi; }

if [ "$(id -u)" != 0 ]; then
	echo "1..0 # SKIP needs root for BPF uprobes"
	exit 77
fi
if [ ! -e "$FAKE/libcuda.so.1" ] || [ ! -x "$WL/unnecessary_sync" ] || ! command -v python3 >/dev/null; then
	echo "1..0 # SKIP needs the simulated driver and the workloads (make) and python3"
	exit 77
fi
T=$(mktemp -d /tmp/ffm-test-report-e2e-XXXXXX)
trap 'rm -rf "$T"' EXIT

profile() { # profile STATE JOB [profile args] -- CMD...
	local state=$1 job=$2
	shift 2
	LD_LIBRARY_PATH=$FAKE "$FFMCTL" --state-dir "$state" profile --quiet --job-id "$job" "$@" \
		>"$T/profile.out" 2>"$T/profile.err"
}

profile "$T/s" e2e --stages 1-4 --key e2e -- "$WL/unnecessary_sync" --iters 60
rc=$?
if [ $rc != 0 ] && grep -qiE 'permission|BPF' "$T/profile.err"; then
	echo "1..0 # SKIP BPF not usable here: $(head -c 200 "$T/profile.err")"
	exit 77
fi
check "profile --stages 1-4 of unnecessary_sync exits 0" test $rc = 0
[ $rc = 0 ] || sed 's/^/# /' "$T/profile.err" | tail -n 20

"$FFMCTL" --state-dir "$T/s" report e2e --json >"$T/r.json"
check "report --json of the profiled job exits 0" test $? = 0
check "the planted site unnecessary_sync.c:27 is reported (a problem once stage 3 ran)" python3 -c "
import json, sys
r = json.load(open('$T/r.json'))
assert r['schema_version'] == 2
site = lambda c: (c['file'].endswith('tests/workloads/unnecessary_sync.c'), c['line'])
if r['problems_known']:
    p = r['problems'][0]
    assert site(p['call_site']) == (True, 27), p
    assert p['type'] == 'unnecessary_sync' and p['api'] == 'cuCtxSynchronize', p
    assert p['count'] >= 59 and p['benefit_s'] > 0
    assert r['recoverable_s'] > 0
else:
    top = [c for c in r['call_sites'] if c['api'] == 'cuCtxSynchronize'][0]
    assert site(top['call_site']) == (True, 27), top
    assert top['count'] == 61, top    # 60 in the loop and one after it
    assert 'stage 3' in r['next'], r['next']
print('# problems known:', r['problems_known'], file=sys.stderr)
" 2>&1
"$FFMCTL" --state-dir "$T/s" report e2e >"$T/r0.txt"
check "text report names step at tests/workloads/unnecessary_sync.c:27" \
	grep -q "step at tests/workloads/unnecessary_sync.c:27" "$T/r0.txt"
# The sync after the loop saves microseconds: under the noise threshold, folded into one line.
check "text report folds problems under 0.1% of the wall time into one line" \
	bash -c "grep -qE '^  \.\.\. [0-9]+ more problems? worth less than 0.1% of the wall time each' '$T/r0.txt' &&
		 ! grep -qE '^ +[0-9]+ +[0-9.]+ s .*main at tests/workloads/unnecessary_sync.c' '$T/r0.txt'"
"$FFMCTL" --state-dir "$T/s" report e2e --noise 0 >"$T/r.txt"
check "report --noise 0 lists the sync after the loop" \
	grep -qE '^ +[0-9]+ +[0-9.]+ s .*main at tests/workloads/unnecessary_sync.c' "$T/r.txt"
check "report --noise rejects a share over 100" \
	bash -c "! '$FFMCTL' --state-dir '$T/s' report e2e --noise 101 2>/dev/null"
# The workload's one sync after its loop is a problem of its own: "(1 call)", never "1 calls".
check "text report: a count of one is singular (1 call, not 1 calls)" \
	bash -c "grep -q '(1 call)' '$T/r.txt' && ! grep -qE '(^|[^0-9.])1 (calls|syncs|transfers|call sites)' '$T/r.txt'"

# A profile is a key of its own: --stages 1-2 of the same command, no --key, after a profile
# through stage 4 (job e2e-all), uses no run of that one (the command line's key once made it
# take e2e-all's stages 3 and 4).
profile "$T/s" e2e-all --stages 1-4 -- "$WL/unnecessary_sync" --iters 20
profile "$T/s" e2e-12 --stages 1-2 -- "$WL/unnecessary_sync" --iters 20
"$FFMCTL" --state-dir "$T/s" report e2e-12 --json >"$T/r12.json"
check "profile --stages 1-2 after a 1-4 profile of the same command: its own runs, stages 1-2" python3 -c "
import json
r = json.load(open('$T/r12.json'))
used = [(s['stage'], s['job_id']) for s in r['stages'] if s['used_as']]
assert used == [(1, 'e2e-12'), (2, 'e2e-12')], r['stages']
assert not r['problems_known'] and r['key'] == 'profile-e2e-12', r['key']
"

# A cluster's shared state dir: nodes/ present -> this host's store under nodes/<host>/.
mkdir -p "$T/shared/nodes"
profile "$T/shared" e2e-node --stages 1 --key e2e -- "$WL/unnecessary_sync" --iters 10
check "with nodes/ in the state dir the store goes to nodes/<host>/keys/" \
	bash -c "ls '$T/shared/nodes/'*/keys/*.db >/dev/null 2>&1 && ! ls '$T/shared/keys' >/dev/null 2>&1"
"$FFMCTL" --state-dir "$T/shared" report e2e-node --json >"$T/n.json"
check "the report finds the job under nodes/ and names the node" python3 -c "
import json, socket
r = json.load(open('$T/n.json'))
assert [nd['node'] for nd in r['nodes']] == [socket.gethostname()], r['nodes']
"

# A program that never loads the driver: nothing recorded, and every list the report and diff
# sort is empty (such lists once went to qsort as NULL, which make sanitize reports).
for j in none-1 none-2; do
	profile "$T/s" $j --stages 1-2 --key none -- /bin/true
	check "profile --stages 1-2 of a program that never loads the driver exits 0 ($j)" test $? = 0
done
"$FFMCTL" --state-dir "$T/s" report none-1 --json >"$T/none.json"
check "its report --json exits 0: no problems, APIs or call sites" python3 -c "
import json
r = json.load(open('$T/none.json'))
assert r['problems'] == [] and r['apis'] == [] and r['call_sites'] == [], r
"
"$FFMCTL" --state-dir "$T/s" diff none-1 none-2 >"$T/none-diff.txt"
check "diff of two such jobs exits 0" test $? = 0

echo "1..$n"
[ "$fails" = 0 ]
