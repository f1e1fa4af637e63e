#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# contrib/slurm/prolog.sh and epilog.sh against a real ffmd (TAP), with the SLURM_* variables
# slurmd would set and a real cgroup v2 directory job_<id> created here (found by the prolog's
# search, as Slurm's own layout would be):
#   - prolog: the job starts with the key from --extra (ffm_key=), owner = SLURM_JOB_UID;
#   - a CUDA workload (simulated driver) run as nobody inside that cgroup is measured;
#   - epilog: the job ends; the banner (requested by --extra ffm_banner=1) is appended to the
#     job's stdout file as the job's user, with the measured driver function in it;
#   - a second job of the same key, running at the same time (an array job), gets the same key
#     (both at stage 1: the key has no ended run yet; escalation after an ended run is ffmd's
#     plan, tested with it, and costs a stage-2 attach this test leaves out), and without
#     ffm_banner its output is left alone;
#   - a SLURM_JOB_STDOUT the user may not write (root's file) gets nothing;
#   - no cgroup: the prolog falls back to the job's uid and says so;
#   - with ffmd down both scripts exit 0 (a failing prolog/epilog sets a Slurm node DOWN).
set -u

cd "$(dirname "$0")/../.." || exit 2
. tests/ops/lib.sh
need_root
NOBODY=$(id -u nobody 2>/dev/null) || { echo "# no user nobody"; exit 77; }
NOGROUP=$(id -g nobody)
WL=$PWD/$B/workloads/unnecessary_sync
FAKE=$PWD/$B/fakecuda
start_ffmd || { notok "ffmd starts"; echo "1..$n"; exit 1; }

export FFMCTL=$PWD/$B/ffmctl FFM_RUNTIME_DIR=$T/run FFM_STATE_DIR=$T/state
export SLURM_JOB_UID=$NOBODY SLURM_JOB_GID=$NOGROUP SLURM_JOB_USER=nobody SLURMD_NODENAME=testnode
job1=9$$1 job2=9$$2 job3=9$$3 job4=9$$4
status_job() { # status_job ID PYTHON_EXPR(j): true when the active job ID satisfies it
	"$FFMCTL" status --json | python3 -c '
import json, sys
jobs = [j for j in json.load(sys.stdin)["jobs"] if j["job"] == sys.argv[1]]
sys.exit(0 if jobs and eval(sys.argv[2], {"j": jobs[0]}) else 1)' "$1" "$2"
}

if ! make_cgroup ffm-test-slurm || ! mkdir "$CGROUP/job_$job1" "$CGROUP/job_$job2"; then
	echo "# no writable cgroup v2 hierarchy here; skipping"
	exit 77
fi
out=$T/slurm-$job1.out
echo "job output" >"$out"
chown "$NOBODY:$NOGROUP" "$out"

# --- job 1: prolog, workload, epilog with banner -----------------------------------------------
msg=$(SLURM_JOB_ID=$job1 SLURM_JOB_EXTRA="ffm_key=slurm-test ffm_banner=1" \
	contrib/slurm/prolog.sh 2>&1); rc=$?
if [ $rc = 0 ] && status_job "$job1" 'j["key"] == "slurm-test" and j["owner"] == '"$NOBODY"; then
	ok "prolog: job $job1 started, key from --extra, owner nobody; found $CGROUP/job_$job1"
else
	notok "prolog starts job $job1 (rc $rc)"; echo "$msg" | diag
fi
case $msg in *"--uid"* | *"no cgroup"*) notok "prolog used the cgroup, not the uid fallback"; echo "$msg" | diag ;;
*) ok "prolog used the cgroup (no uid fallback)" ;; esac

# --- job 2: the same key at the same time ----------------------------------------------------------
out2=$T/slurm-$job2.out
: >"$out2"
chown "$NOBODY:$NOGROUP" "$out2"
SLURM_JOB_ID=$job2 SLURM_JOB_EXTRA="ffm_key=slurm-test" contrib/slurm/prolog.sh 2>/dev/null
if status_job "$job2" 'j["key"] == "slurm-test" and j["stage"] == 1' && status_job "$job1" True; then
	ok "a second job of key slurm-test runs beside the first, same key"
else
	notok "second job of key slurm-test"; "$FFMCTL" status | diag
fi

if [ -x "$WL" ] && [ -e "$FAKE/libcuda.so.1" ]; then
	bash -c 'echo $$ > "$1/cgroup.procs" && exec setpriv --reuid="$2" --regid="$3" --clear-groups \
		env LD_LIBRARY_PATH="$4" "$5"' sh "$CGROUP/job_$job1" "$NOBODY" "$NOGROUP" "$FAKE" "$WL" \
		>"$T/wl.log" 2>&1
	check "workload ran as nobody inside the job's cgroup" grep -q WALL_S "$T/wl.log"
else
	skip "workload in the job's cgroup" "workloads or the simulated driver not built"
fi

msg=$(SLURM_JOB_ID=$job1 SLURM_JOB_EXTRA="ffm_key=slurm-test ffm_banner=1" SLURM_JOB_STDOUT=$out \
	contrib/slurm/epilog.sh 2>&1); rc=$?
if [ $rc = 0 ] && ! status_job "$job1" True; then
	ok "epilog: job $job1 ended"
else
	notok "epilog ends job $job1 (rc $rc)"; echo "$msg" | diag
fi
if [ "$(stat -c %u "$out")" = "$NOBODY" ] && head -n 1 "$out" | grep -q "^job output$" &&
	grep -q "^##ffm##" "$out" && grep -q "^# job $job1 on testnode" "$out" &&
	grep -q "ffmctl report $job1" "$out"; then
	ok "banner appended to the job's stdout file, still owned by nobody"
else
	notok "banner in the job's stdout file"; diag <"$out"
fi
if [ -x "$WL" ]; then
	if grep -q "^# .*cuCtxSynchronize" "$out"; then
		ok "banner names the synchronizing driver function the workload waited in"
	else
		notok "banner names cuCtxSynchronize"; diag <"$out"; diag <"$T/ffmd.log"
	fi
fi
lines=$(wc -l <"$out")
check "banner fits one screen ($lines lines with the job's own)" test "$lines" -le 30

# --- job 2 ends: no banner requested --------------------------------------------------------------
SLURM_JOB_ID=$job2 SLURM_JOB_EXTRA="ffm_key=slurm-test" SLURM_JOB_STDOUT=$out2 \
	contrib/slurm/epilog.sh 2>/dev/null
check "without ffm_banner the job's output is left alone" test ! -s "$out2"
if "$FFMCTL" jobs --json | python3 -c '
import json, sys
j = {x["job"]: x for x in json.load(sys.stdin)}
a, b = j.get(sys.argv[1]), j.get(sys.argv[2])
sys.exit(0 if a and b and a["key"] == b["key"] == "slurm-test" and a["state"] == b["state"] == "done" else 1)' "$job1" "$job2"; then
	ok "ffmctl jobs: both jobs done under key slurm-test"
else
	notok "ffmctl jobs lists both"; "$FFMCTL" jobs | diag
fi

# --- Slurm 22.05: SLURM_JOB_STDOUT unexpanded (%x-%j.out), or absent (default slurm-%j.out) -------
# The epilog asks scontrol (a stub here, printing what `scontrol show job` prints) for StdOut=.
cat >"$T/scontrol" <<EOF
#!/bin/sh
[ "\$*" = "show job $job4" ] || exit 1
echo "   WorkDir=$T"
echo "   StdOut=$T/out 4.out"
EOF
chmod 755 "$T/scontrol"
for pat in "$T/%x-%j.out" ""; do
	: >"$T/out 4.out"
	chown "$NOBODY:$NOGROUP" "$T/out 4.out"
	SLURM_JOB_ID=$job4 FFM_JOB_CGROUP=$CGROUP/job_$job2 contrib/slurm/prolog.sh 2>/dev/null
	SLURM_JOB_ID=$job4 SLURM_JOB_COMMENT="ffm_banner=1" SLURM_JOB_STDOUT=$pat SCONTROL=$T/scontrol \
		contrib/slurm/epilog.sh 2>"$T/ep4.err"
	if grep -q "^# job $job4 on testnode" "$T/out 4.out" && [ ! -e "$T/%x-%j.out" ]; then
		ok "SLURM_JOB_STDOUT '${pat##*/}': the banner goes to scontrol's expanded StdOut"
	else
		notok "banner with SLURM_JOB_STDOUT '$pat'"; diag <"$T/ep4.err"; ls "$T" | diag
	fi
done

# --- a stdout path the user may not write ---------------------------------------------------------
rootfile=$T/root-owned
echo secret >"$rootfile"
chmod 644 "$rootfile"
SLURM_JOB_ID=$job3 FFM_JOB_CGROUP=$CGROUP/job_$job2 contrib/slurm/prolog.sh 2>/dev/null
SLURM_JOB_ID=$job3 SLURM_JOB_EXTRA="ffm_banner=1" SLURM_JOB_STDOUT=$rootfile \
	contrib/slurm/epilog.sh 2>"$T/ep3.err"; rc=$?
if [ $rc = 0 ] && [ "$(cat "$rootfile")" = secret ] && grep -q "could not append" "$T/ep3.err"; then
	ok "banner refused for a file the job's user may not write (root's), epilog exit 0"
else
	notok "banner into root's file (rc $rc)"; diag <"$T/ep3.err"
fi

# --- no cgroup: uid fallback ----------------------------------------------------------------------
# (A uid no process has: a uid selector also catches other users' processes on this machine.)
msg=$(SLURM_JOB_ID=8$$ SLURM_JOB_UID=4243 FFM_SLURM_CGROUP=/nonexistent/job_%j \
	contrib/slurm/prolog.sh 2>&1); rc=$?
if [ $rc = 0 ] && [[ $msg == *"no cgroup v2 directory found"* ]] && status_job "8$$" True; then
	ok "no cgroup: the prolog falls back to the job's uid and says so"
else
	notok "uid fallback (rc $rc)"; echo "$msg" | diag
fi
SLURM_JOB_ID=8$$ SLURM_JOB_UID=4243 contrib/slurm/epilog.sh 2>/dev/null

# --- ffmd down --------------------------------------------------------------------------------------
stop_ffmd
SLURM_JOB_ID=$job1 contrib/slurm/prolog.sh 2>"$T/p.err"; rc1=$?
SLURM_JOB_ID=$job1 contrib/slurm/epilog.sh 2>"$T/e.err"; rc2=$?
if [ $rc1 = 0 ] && [ $rc2 = 0 ] && grep -q "ffmd is not running" "$T/p.err" && grep -q "ffmd is not running" "$T/e.err"; then
	ok "ffmd down: prolog and epilog exit 0 and log why"
else
	notok "ffmd down (rc $rc1/$rc2)"; cat "$T/p.err" "$T/e.err" | diag
fi
SLURM_JOB_ID='1;rm -rf /' contrib/slurm/prolog.sh 2>"$T/bad.err"; rc=$?
check "a malformed job id is refused, exit 0" grep -q "no usable job id" "$T/bad.err"
echo "1..$n"
finish
