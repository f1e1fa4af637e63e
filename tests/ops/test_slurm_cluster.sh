#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# contrib/slurm/prolog.sh and epilog.sh under a real Slurm (TAP): a one-node cluster on
# 127.0.0.1 started here (munged, slurmctld, slurmd, each in the foreground in the background,
# with their own key, slurm.conf (SLURM_CONF), state, spool and log directories under the
# test's scratch directory, ports bound to 127.0.0.1 only, no systemd), the scripts as its
# Prolog and Epilog (through two wrappers that point them at the test's ffmd), a test user of
# its own:
#   - a batch job (sbatch --comment "ffm_key=K ffm_banner=1") runs a CUDA workload (simulated
#     driver) as the user; the Prolog started an ffm job for it (key K, owner the user), the
#     Epilog ended it;
#   - the user reads the job's report with ffmctl, without sudo;
#   - the banner is appended to the job's output file (%x-%j.out: Slurm 22.05 hands the Epilog
#     the unexpanded pattern, the Epilog asks scontrol), still owned by the user;
#   - the key's next job is its second run, at stage 2;
#   - a job cancelled by its user (scancel) while it runs ends its ffm job; without ffm_banner
#     its output is left alone;
#   - every daemon the test started is gone at the end (and at any exit: the trap).
# Process tracking: proctrack/linuxproc, so the Prolog finds no cgroup v2 directory job_<id> and
# selects the job's processes by the job's uid (a user of the test's own, exact here). Slurm
# 22.05's cgroup/v2 plugin refuses a hybrid hierarchy (slurmd: "Hybrid mode is not supported")
# and, on a pure v2 host, makes its scope through the host's systemd, which a test must not
# touch; a cgroup/v1 job cgroup is no directory ffmd matches. tests/ops/test_slurm.sh covers
# the Prolog's cgroup path with a real cgroup v2 directory.
# Slurm 22.05 (Debian 12) has no sbatch --extra (23.02): the request goes in --comment, which
# the Prolog and Epilog see as SLURM_JOB_COMMENT.
# Skips (77) without root, without the Slurm and munge packages (make deps), or when the
# workload is not built.
set -u

cd "$(dirname "$0")/../.." || exit 2
. tests/ops/lib.sh
need_root
for c in munged slurmctld slurmd sbatch scancel squeue sinfo scontrol runuser; do
	command -v "$c" >/dev/null ||
		{ echo "# $c not found (make deps installs slurmctld slurmd slurm-client munge)"; exit 77; }
done
WL=$PWD/$B/workloads/unnecessary_sync
FAKE=$PWD/$B/fakecuda
[ -x "$WL" ] && [ -e "$FAKE/libcuda.so.1" ] ||
	{ echo "# workload or simulated driver not built; skipping"; exit 77; }
TU=ffmslurm1
make_users "$TU"
TUID=$(id -u "$TU") TGID=$(id -g "$TU")
t0=$EPOCHREALTIME

S=$T/slurm
export SLURM_CONF=$S/etc/slurm.conf
NODE=ffm-node
PIDS=() # munged slurmctld slurmd, in start order

# stop_cluster: cancel what runs, stop slurmd, slurmctld, munged (TERM, KILL after 10 s), then any
# slurmstepd of this cluster (found by the SLURM_CONF in its environment). Returns 0 when none is
# left.
stop_cluster() {
	local i p left=0
	[ ${#PIDS[@]} = 0 ] && return 0
	timeout 5 scancel --quiet --partition=ffmtest 2>/dev/null
	for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
		p=${PIDS[i]}
		kill "$p" 2>/dev/null || continue
		for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$p" 2>/dev/null && left=1
		wait "$p" 2>/dev/null
	done
	PIDS=()
	for p in $(pgrep -x slurmstepd); do
		tr '\0' '\n' 2>/dev/null <"/proc/$p/environ" | grep -qxF "SLURM_CONF=$SLURM_CONF" || continue
		kill -KILL "$p" 2>/dev/null && left=1
	done
	return $left
}
trap 'stop_cluster; cleanup' EXIT

# wait_for SECONDS CMD...: poll CMD every 0.2 s until it succeeds.
wait_for() {
	local i
	for ((i = 0; i < $1 * 5; i++)); do
		"${@:2}" && return 0
		sleep 0.2
	done
	return 1
}
bail() {
	echo "Bail out! $1"
	for f in "$S"/log/*; do echo "# --- $f"; tail -n 20 "$f" | diag; done
	exit 1
}
elapsed() { python3 -c 'import sys; print("%.1f" % (float(sys.argv[2]) - float(sys.argv[1])))' \
	"$t0" "$EPOCHREALTIME"; }
ctld_up() { scontrol ping 2>/dev/null | grep -q "is UP"; }
node_idle() { [ "$(sinfo -h -n "$NODE" -o %T 2>/dev/null)" = idle ]; }

# Two free TCP ports on 127.0.0.1, for slurmctld and slurmd (the kernel's choice).
read -r CTLD_PORT SLURMD_PORT < <(python3 -c '
import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])') || bail "no free port"

mkdir -p "$S"/{etc,munge,run,state,spool,log,out}
chmod 700 "$S/munge"
chown "$TU:$TGID" "$S/out"
head -c 1024 /dev/urandom >"$S/munge/munge.key"
chmod 400 "$S/munge/munge.key"
# The Prolog and Epilog as a site installs them, with the test's ffmd, ffmctl and state. No
# cgroup is looked for (proctrack/linuxproc): a job_<id> directory another test made must not
# be taken for this job's.
for s in prolog epilog; do
	cat >"$S/etc/$s" <<-EOF
	#!/bin/sh
	export FFMCTL='$PWD/$B/ffmctl' FFM_RUNTIME_DIR='$T/run' FFM_STATE_DIR='$T/state'
	export FFM_SLURM_CGROUP=/nonexistent/job_%j
	exec '$PWD/contrib/slurm/$s.sh'
	EOF
	chmod 755 "$S/etc/$s"
done
cat >"$SLURM_CONF" <<EOF
ClusterName=ffmtest
SlurmctldHost=$(hostname -s)(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
CommunicationParameters=NoInAddrAny,NoCtldInAddrAny
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$S/run/munge.sock
StateSaveLocation=$S/state
SlurmdSpoolDir=$S/spool
SlurmctldPidFile=$S/run/slurmctld.pid
SlurmdPidFile=$S/run/slurmd.pid
SlurmctldLogFile=$S/log/slurmctld.log
SlurmdLogFile=$S/log/slurmd.log
# debug2: slurmd logs what the Prolog and Epilog print
SlurmdDebug=debug2
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
MailProg=/bin/true
ReturnToService=2
KillWait=2
MinJobAge=120
FirstJobId=$((100000 + $$ % 800000))
Prolog=$S/etc/prolog
Epilog=$S/etc/epilog
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$(nproc) State=UNKNOWN
PartitionName=ffmtest Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF

munged -F --socket="$S/run/munge.sock" --key-file="$S/munge/munge.key" \
	--pid-file="$S/run/munged.pid" --seed-file="$S/munge/munged.seed" \
	--log-file="$S/log/munged.log" >"$S/log/munged.out" 2>&1 &
PIDS+=($!)
wait_for 10 test -S "$S/run/munge.sock" || bail "munged did not start"
slurmctld -D -i >"$S/log/slurmctld.out" 2>&1 &
PIDS+=($!)
wait_for 15 ctld_up || bail "slurmctld did not answer"
slurmd -D -N "$NODE" >"$S/log/slurmd.out" 2>&1 &
PIDS+=($!)
if wait_for 20 node_idle; then
	ok "one-node cluster up: munged, slurmctld, slurmd on 127.0.0.1 (ports $CTLD_PORT, $SLURMD_PORT)"
	echo "# up $(elapsed) s after the test user's creation"
else
	sinfo -N | diag
	bail "slurmd did not register"
fi
# Nothing of it listens beyond the loopback.
if command -v ss >/dev/null; then
	wide=$(ss -Hltnp | grep -E "\"(slurmctld|slurmd)\"" | awk '$4 !~ /^127\./')
	check "slurmctld and slurmd listen on 127.0.0.1 only" test -z "$wide"
else
	skip "slurmctld and slurmd listen on 127.0.0.1 only" "no ss (iproute2)"
fi
start_ffmd || bail "ffmd did not start"

as_user() { timeout 30 runuser -u "$TU" -- env SLURM_CONF="$SLURM_CONF" "$@"; }
uctl() { as_user "$B/ffmctl" --runtime-dir "$T/run" --state-dir "$T/state" "$@"; }
# job_json ID PYTHON_EXPR(j): true when `ffmctl jobs` has job ID and it satisfies the expression.
job_json() {
	ctl jobs --json 2>/dev/null | python3 -c '
import json, sys
j = [x for x in json.load(sys.stdin) if x["job"] == sys.argv[1]]
sys.exit(0 if j and eval(sys.argv[2], {"j": j[0]}) else 1)' "$1" "$2"
}
# active ID [PYTHON_EXPR(j)]: true when job ID is active in ffmd (and satisfies the expression).
active() {
	ctl status --json 2>/dev/null | python3 -c '
import json, sys
j = [x for x in json.load(sys.stdin)["jobs"] if x["job"] == sys.argv[1]]
sys.exit(0 if j and eval(sys.argv[2], {"j": j[0]}) else 1)' "$1" "${2:-True}"
}
slurm_gone() { [ -z "$(squeue -h -j "$1" 2>/dev/null)" ]; }

# --- a batch job: workload, report, banner -----------------------------------------------------
cat >"$S/out/wl.sh" <<EOF
#!/bin/sh
echo "job output"
LD_LIBRARY_PATH='$FAKE' exec '$WL'
EOF
chmod 755 "$S/out/wl.sh"
job=$(cd "$S/out" && as_user sbatch --parsable --comment "ffm_key=slurm-cluster ffm_banner=1" \
	-J ffmwl -o "$S/out/%x-%j.out" "$S/out/wl.sh" 2>"$T/sbatch.err")
case $job in '' | *[!0-9]*) diag <"$T/sbatch.err"; bail "sbatch as $TU failed" ;; esac
out=$S/out/ffmwl-$job.out
if wait_for 30 job_json "$job" 'j["state"] == "done"' && wait_for 10 slurm_gone "$job"; then
	ok "sbatch job $job ran; its ffm job ended (Prolog and Epilog)"
else
	notok "job $job ran and ended in ffmd"; squeue | diag; ctl jobs | diag
	tail -n 20 "$S/log/slurmd.log" | diag
fi
if job_json "$job" 'j["key"] == "slurm-cluster" and j["uid"] == '"$TUID"; then
	ok "ffm job $job: key from --comment ffm_key=, owner $TU"
else
	notok "key and owner of $job"; ctl jobs --json | diag
fi
check "the workload ran as $TU (output file $TU's, WALL_S in it)" \
	sh -c '[ "$(stat -c %U "$1")" = "$2" ] && grep -q "^WALL_S" "$1"' sh "$out" "$TU"
if wait_for 10 uctl report "$job" >"$T/report" 2>&1 && grep -q cuCtxSynchronize "$T/report"; then
	ok "$TU reads the job's report without sudo; it names cuCtxSynchronize"
else
	notok "$TU's ffmctl report $job"; diag <"$T/report"; tail -n 20 "$T/ffmd.log" | diag
fi
if grep -q "ffm-prolog: job $job: no cgroup v2 .*measuring every process of uid $TUID" \
	"$S/log/slurmd.log" && grep -q "ffm-epilog: job $job ended" "$S/log/slurmd.log"; then
	ok "slurmd's log: the Prolog selected uid $TUID (no cgroup), the Epilog ended the job"
else
	notok "the Prolog's and Epilog's messages in slurmd's log"; grep ffm- "$S/log/slurmd.log" | diag
fi
if head -n 1 "$out" | grep -qx "job output" && grep -q "^##ffm##" "$out" &&
	grep -q "^# job $job on $NODE" "$out" && grep -q "^# .*cuCtxSynchronize" "$out"; then
	ok "banner (--comment ffm_banner=1) appended to $(basename "$out") (%x-%j.out)"
else
	notok "banner in the job's output"; diag <"$out"; grep -i epilog "$S/log/slurmd.log" | diag
fi

# --- a job cancelled while it runs --------------------------------------------------------------
job2=$(cd "$S/out" && as_user sbatch --parsable --comment "ffm_key=slurm-cluster" -J ffmlong \
	-o "$S/out/%x-%j.out" --wrap "echo started; exec sleep 300" 2>"$T/sbatch.err")
case $job2 in '' | *[!0-9]*) diag <"$T/sbatch.err"; bail "second sbatch failed" ;; esac
out2=$S/out/ffmlong-$job2.out
if wait_for 20 active "$job2" && wait_for 10 grep -q started "$out2"; then
	ok "job $job2 runs, its ffm job is active"
	# Escalation across Slurm jobs: the key's first run ended, so this one is the key's second.
	check "job $job2, the key's second run, is at stage 2" active "$job2" 'j["stage"] == 2'
else
	notok "job $job2 running and active in ffmd"; squeue | diag; ctl status | diag
fi
as_user scancel "$job2"
if wait_for 20 job_json "$job2" 'j["state"] == "done"' && ! active "$job2"; then
	ok "scancel by $TU ends the ffm job of $job2"
else
	notok "scancel ends ffm job $job2"; ctl status | diag; tail -n 20 "$S/log/slurmd.log" | diag
fi
no_proc() { ! pgrep -u "$TU" >/dev/null; }
check "the cancelled job left no process of $TU" wait_for 10 no_proc
check "without ffm_banner its output is left alone" sh -c '! grep -q "^##ffm" "$1"' sh "$out2"

# --- the end ------------------------------------------------------------------------------------
pids="${PIDS[*]}"
if stop_cluster && ! ps -o pid= -p "${pids// /,}" >/dev/null; then
	ok "munged, slurmctld and slurmd stopped (TERM), no slurmstepd left"
else
	notok "the cluster stopped on TERM"
fi
echo "# $(elapsed) s from the test user's creation to the cluster's stop"
echo "1..$n"
finish
