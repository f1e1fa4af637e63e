#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# ffmd itself on a GPU node, as a scheduler drives it: the daemon (not `ffmctl profile`'s
# embedded collector) with the real driver, each driver-API workload run twice under one job
# key in its own cgroup v2 directory (ffmctl job start --cgroup ... / job end, as the Slurm
# prolog and epilog do), so the first run records stage 1 and the second escalates to stage 2.
#
#   O=DIR bench/gpu/ffmd_check.sh OUT
#
# DIR (default .dev/gpu) is what bench/gpu/pack.sh built. OUT gets ffmd's log, `ffmctl status
# --json` taken while a job runs, each job's `ffmctl report --json`, and SUMMARY.txt: per
# workload and run, the stage, the waits and calls stored per call site (file:line, public
# function) and the records lost, read from the stores; then the map guard's case (below).
# Needs root. Judges nothing.
set -u
[ $# = 1 ] || { echo "usage: $0 OUT" >&2; exit 2; }
OUT=$(mkdir -p "$1" && cd "$1" && pwd)
cd "$(dirname "$0")/../.." || exit 1
O=$(cd "${O:-.dev/gpu}" && pwd) || exit 1
S=$(mktemp -d /tmp/ffm-ffmd-gpu.XXXXXX)
for m in /sys/fs/cgroup /sys/fs/cgroup/unified; do # pure cgroup v2, or a hybrid's v2 part
	[ "$(stat -f -c %T "$m" 2>/dev/null)" = cgroup2fs ] && { CG=$m/ffm-gpu-check-$$; break; }
done
[ -n "${CG:-}" ] || { echo "no cgroup v2 hierarchy" >&2; exit 1; }
export FFM_CALIB_PROG=$O/ffm-calib-probe
[ -e /dev/nvidiactl ] || export LD_LIBRARY_PATH=$O/fakecuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
ctl() { "$O/ffmctl" --runtime-dir "$S/run" --state-dir "$S/state" "$@"; }

mkdir -p "$S/state" "$S/run" "$CG" || exit 1
# An empty config, not the node's /etc/ffm/ffmd.conf (and not /dev/null: ffmd reads only a
# regular file as its config).
: >"$S/ffmd.conf"
"$O/ffmd" --state-dir "$S/state" --runtime-dir "$S/run" --config "$S/ffmd.conf" >"$OUT/ffmd.log" 2>&1 &
FFMD=$!
trap 'kill $FFMD 2>/dev/null; wait $FFMD 2>/dev/null; rmdir "$CG"/* "$CG" 2>/dev/null' EXIT
for _ in $(seq 150); do [ -S "$S/run/ffmd.sock" ] && break; sleep 0.1; done
[ -S "$S/run/ffmd.sock" ] || { echo "ffmd did not start" >&2; cat "$OUT/ffmd.log" >&2; exit 1; }

for w in unnecessary_sync misplaced_sync free_in_loop dup_transfer pageable_async managed_memset \
	sequence templated control; do
	for r in 1 2; do
		mkdir -p "$CG/$w-$r"
		ctl job start "gpu-$w-$r" --key "gpu-$w" --cgroup "$CG/$w-$r" >/dev/null ||
			{ echo "job start failed for $w" >&2; continue; }
		(echo $BASHPID >"$CG/$w-$r/cgroup.procs" && exec "$O/workloads/$w") >/dev/null 2>&1 &
		wl=$!
		[ "$w$r" = unnecessary_sync2 ] && { sleep 0.5; ctl status --json >"$OUT/ffmd_status.json"; }
		wait $wl
		ctl job end "gpu-$w-$r" >/dev/null
	done
	ctl report "gpu-$w-2" --json >"$OUT/ffmd_report_$w.json" 2>"$OUT/ffmd_report_$w.err"
done
# A libcuda ffmd cannot foresee at exec: a copy of the node's driver in a directory of its own,
# preloaded (gpu-guard-*: a workload, and PyTorch with one .item() sync per step). The map
# guard holds each process at its mmap of the copy until the copy's probes are in place; its
# log line says so. One copy per run, so that each is new to ffmd.
real=$(ldconfig -p | awk '/libcuda\.so\.1 .*x86-64/ { print $NF; exit }')
[ -e /dev/nvidiactl ] || real=$O/fakecuda/libcuda.so.1
guard() { # guard NAME COMMAND...
	local n=$1 lib=$S/drv-$1/libcuda.so.1
	shift
	mkdir -p "$S/drv-$n" "$CG/guard-$n" && cp "$(readlink -f "$real")" "$lib" || return
	ctl job start "gpu-guard-$n" --key "gpu-guard-$n" --cgroup "$CG/guard-$n" >/dev/null || return
	(echo $BASHPID >"$CG/guard-$n/cgroup.procs" && LD_PRELOAD=$lib exec "$@") >"$OUT/guard_$n.out" 2>&1
	echo "guard $n: exit status $?" >>"$OUT/guard_$n.out"
	ctl job end "gpu-guard-$n" >/dev/null
}
guard workload "$O/workloads/unnecessary_sync"
guard torch python3 -c 'import torch
x = torch.ones(1 << 20, device="cuda")
print(sum((x * i).sum().item() for i in range(200)))'

# Per-process probes (ffmd's default where the kernel can stop a forked child): a launcher that
# forks its worker without exec (gpu-fork: the worker's waits must all be there), PyTorch with
# DataLoader worker processes forked after CUDA is up (gpu-torch-dl: 200 .item() syncs), and what
# a process outside the jobs carries: the first byte of the wait function in a job's process
# and in an untracked one, side by side (0xcc: a breakpoint).
run_in_job() { # run_in_job NAME COMMAND...
	local n=$1
	shift
	mkdir -p "$CG/$n" && ctl job start "gpu-$n" --key "gpu-$n" --cgroup "$CG/$n" >/dev/null || return
	(echo $BASHPID >"$CG/$n/cgroup.procs" && exec "$@") >"$OUT/$n.out" 2>&1
	echo "$n: exit status $?" >>"$OUT/$n.out"
	ctl job end "gpu-$n" >/dev/null
}
FFM_WL_FORK=1 run_in_job fork "$O/workloads/unnecessary_sync"
run_in_job torch-dl python3 -c 'import torch
from torch.utils.data import DataLoader, TensorDataset
dl = DataLoader(TensorDataset(torch.arange(800.0)), batch_size=4, num_workers=2)
w = torch.ones(1, device="cuda")
print(sum((b[0].cuda() * w).sum().item() for b in dl))'
mkdir -p "$CG/bp"
ctl job start gpu-bp --key gpu-bp --cgroup "$CG/bp" >/dev/null
(echo $BASHPID >"$CG/bp/cgroup.procs" && FFM_SCHED=blocking exec "$O/workloads/hang" --hold-ms 3000) >/dev/null 2>&1 &
in=$!
FFM_SCHED=blocking "$O/workloads/hang" --hold-ms 3000 >/dev/null 2>&1 &
out=$!
sleep 1.5
ctl status --json >"$OUT/ffmd_status_bp.json"
python3 - "$OUT/ffmd_status_bp.json" $in $out >"$OUT/breakpoints.txt" <<'PY'
import json, sys
st = json.load(open(sys.argv[1]))
print("probe_scope", st.get("probe_scope"), "probe_mode", st.get("probe_mode"))
for d in st["drivers"]:
    if not d.get("usable"):
        continue
    off = int(d["wait_offset"], 16)
    for who, pid in (("job", sys.argv[2]), ("untracked", sys.argv[3])):
        for line in open(f"/proc/{pid}/maps"):
            f = line.split()
            lo, hi = (int(x, 16) for x in f[0].split("-"))
            foff = int(f[2], 16)
            if len(f) > 5 and "libcuda" in f[5] and f[1][2] == "x" and foff <= off < foff + hi - lo:
                with open(f"/proc/{pid}/mem", "rb") as m:
                    m.seek(lo + off - foff)
                    print(f"{who} process {pid}: {f[5]} wait function first byte {m.read(1).hex()}")
PY
wait $in $out
ctl job end gpu-bp >/dev/null

# Parents that watch their children stop (docs/SECURITY.md, rule 3): a uid job for a user made
# here, whose CUDA workload is started by runuser, su, bash with job control on a pty, and a
# Python parent waiting with WUNTRACED. Each must finish, leave nothing stopped and report no
# stop; parents.txt has each one's exit status, the processes stopped afterwards, and the syncs
# stored for its run (the workload makes 400).
if id ffmgpu >/dev/null 2>&1 || useradd -M -d /nonexistent -s /bin/sh ffmgpu 2>/dev/null; then
	U=$(id -u ffmgpu)
	chmod 755 "$S" "$O" "$O/workloads" 2>/dev/null
	wlcmd="$O/workloads/unnecessary_sync"
	for how in runuser su bash python; do
		ctl job start "gpu-parent-$how" --key "gpu-parent-$how" --uid "$U" >/dev/null || continue
		case $how in
		runuser) timeout 120 runuser -u ffmgpu -- "$wlcmd" ;;
		su) timeout 120 su -s /bin/sh ffmgpu -c "$wlcmd" ;;
		bash) printf '%s\nexit\n' "runuser -u ffmgpu -- $wlcmd; echo BASH-DONE" >"$S/bash.in"
			timeout 120 script -qfec 'bash --norc -i' /dev/null <"$S/bash.in" ;;
		python) timeout 120 python3 - "$U" "$wlcmd" <<'PY' ;;
import os, sys
pid = os.fork()
if pid == 0:
    os.setgid(int(sys.argv[1])); os.setuid(int(sys.argv[1]))
    os.execv(sys.argv[2], sys.argv[2:])
while True:
    p, st = os.waitpid(pid, os.WUNTRACED)
    if os.WIFSTOPPED(st):
        print("Stopped: the parent saw its child stopped")
        continue
    sys.exit(os.waitstatus_to_exitcode(st))
PY
		esac >"$OUT/parent_$how.out" 2>&1
		rc=$?
		sleep 0.5
		ctl job end "gpu-parent-$how" >/dev/null
		stopped=$(ps -e -o stat=,pid=,comm= | awk '$1 ~ /^T/ {print $2 "/" $3}' | tr '\n' ' ')
		seen=$(grep -c "Stopped" "$OUT/parent_$how.out")
		# The job runs as a test user, so its store is keys/<key>@<uid>.db; opened read-only (a
		# plain connect would create an empty file where none is).
		syncs=$(python3 -c 'import glob,sqlite3,sys; print(sum(sqlite3.connect("file:%s?mode=ro" % f, uri=True).execute("SELECT count(*) FROM events_v WHERE kind = 1").fetchone()[0] for f in glob.glob(sys.argv[1])))' \
			"$S/state/keys/gpu-parent-$how*.db" 2>&1)
		echo "parent $how: exit status $rc, stopped now: [${stopped}], stops reported: $seen, waits stored: $syncs" >>"$OUT/parents.txt"
	done
	ctl status --json >"$OUT/ffmd_status_parents.json"
	python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print("process starts: %d seen, %d held, wait guard %s" % (d["processes_seen"], d["processes_held"], d.get("wait_guard")))' \
		"$OUT/ffmd_status_parents.json" >>"$OUT/parents.txt"
	grep -E "held|not held|stopped itself|let go" "$OUT/ffmd.log" | tail -n 20 >>"$OUT/parents.txt"
else
	echo "parents: no useradd, skipped" >"$OUT/parents.txt"
fi

kill $FFMD; wait $FFMD
echo "ffmd exit status $?" >>"$OUT/ffmd.log"

python3 - "$S/state/keys" >"$OUT/SUMMARY.txt" <<'PY'
import glob, os, sqlite3, sys
KIND = {1: "wait", 2: "call", 3: "transfer", 4: "alloc", 5: "free", 6: "memset", 7: "launch"}  # store/ffm_store.h
for db in sorted(glob.glob(os.path.join(sys.argv[1], "gpu-*.db"))):
    key = os.path.basename(db)[:-3]
    c = sqlite3.connect("file:%s?mode=ro" % db, uri=True)
    for run, stage in c.execute("SELECT id, stage FROM runs ORDER BY id"):
        lost = c.execute("SELECT COALESCE(SUM(count), 0) FROM drops WHERE run = ?", (run,)).fetchone()[0]
        print(f"{key} run {run}: stage {stage}, records lost {lost}")
        # The application's call site of each event: the first frame with a source line outside
        # the driver (frames are stored innermost first).
        q = """SELECT e.kind, COALESCE(a.name, '?'), COUNT(*),
                      (SELECT f.file || ':' || f.line FROM stack_frames sf JOIN frames f ON f.id = sf.frame
                        WHERE sf.stack = e.stack AND f.line > 0 AND f.file NOT LIKE '%libcuda%'
                        ORDER BY sf.depth LIMIT 1) AS site
               FROM events_v e LEFT JOIN api_names a ON a.id = e.api
               WHERE e.run = ? GROUP BY e.kind, e.api, site ORDER BY 3 DESC"""
        for kind, api, n, site in c.execute(q, (run,)):
            print(f"    {KIND.get(kind, kind):<8} {api:<26} x{n:<6} {site or '(no source line)'}")
PY
cat "$OUT/breakpoints.txt" "$OUT/parents.txt" >>"$OUT/SUMMARY.txt"
cat "$OUT/SUMMARY.txt"
