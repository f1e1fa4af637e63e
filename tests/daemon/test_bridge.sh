#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The bridge (daemon/links.c; docs/OVERHEAD.md, "The bridge"), end to end (real BPF, the
# simulated driver, per-process scope): a stage-1 job's processes are traced by a system-wide
# wait probe until they have probes of their own, so that none waits for an attach.
#   - a process that maps a driver never seen before is still held at its mmap (the map guard),
#     and its waits are recorded;
#   - 20 short processes of one job, started at once, each mapping the driver as it starts:
#     none held, each traced by the bridge, every one of their waits recorded, nothing attached
#     for them;
#   - a long process reaches adaptive sampling (its probe is taken off and put back: windows in
#     the store), and the bridge is taken off while it runs.
# Skips (exit 77, saying why) without root, BPF, uprobe sessions, cgroup v2, the simulated
# driver or python3.
set -u
cd "$(dirname "$0")/../.." || exit 2
. tests/ops/lib.sh
need_root
need_sim_workloads
command -v python3 >/dev/null || { echo "1..0 # SKIP needs python3"; exit 77; }
make_cgroup ffm-test-bridge || { echo "1..0 # SKIP no writable cgroup v2 hierarchy"; exit 77; }
CG=$CGROUP
# A private copy of the simulated driver: uprobes belong to the file (see tests/daemon/test_ffmd.c).
mkdir -p "$T/fake" && cp "$FAKE/libcuda.so.1" "$T/fake/" || exit 1
printf 'sample_budget = 0.1%%\n' >"$T/ffmd.conf"
export FFM_CALIB_PROG=$PWD/$B/ffm-calib-probe
start_ffmd --config "$T/ffmd.conf" || exit 1
ctl status --json >"$T/status0.json"
# The bridge needs per-process scope and uprobe sessions (Linux 6.13+); an ffmd with both and
# no bridge fails below.
python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); sys.exit(0 if (s["probe_scope"], s["probe_mode"]) == ("process", "session") else 1)' \
	"$T/status0.json" || { echo "1..0 # SKIP no per-process scope with uprobe sessions here: $(head -c 200 "$T/status0.json")"; exit 77; }

# start NAME: a stage-1 job of key "bridge" on cgroup NAME
start() { mkdir -p "$CG/$1" && ctl job start "$1" --key bridge --stage 1 --cgroup "$CG/$1" >/dev/null; }
# procs NAME K ARGS...: K sync_rate processes in job NAME, started at once; each says its pid
procs() {
	local name=$1 k=$2
	shift 2
	(echo $BASHPID >"$CG/$name/cgroup.procs" || exit 1
	 for i in $(seq "$k"); do
		sh -c 'echo PID $$; LD_LIBRARY_PATH=$0 exec "$@"' "$T/fake" "$WL/sync_rate" "$@" \
			>"$T/$name.$i.out" 2>&1 &
	 done
	 wait)
}

# batch NAME K: K short processes in job NAME; its status just before its end
batch() {
	start "$1" && procs "$1" "$2" --kernel-us 5 --cpu-us 100 --iters 40
	sleep 0.3
	ctl status --json >"$T/$1.status.json"
	ctl job end "$1" >/dev/null
}

# judge NAME: per process, the waits it made (SITE_ lines) against the waits its run stored.
judge() {
	python3 - "$T" "$1" <<'PY'
import glob, json, sqlite3, sys
t, name = sys.argv[1], sys.argv[2]
made = {}
for f in glob.glob("%s/%s.*.out" % (t, name)):
    pid, n = None, 0
    for line in open(f):
        w = line.split()
        if w and w[0] == "PID":
            pid = int(w[1])
        elif w and w[0].startswith("SITE_"):
            n += int(w[1])
    made[pid] = n
st = [j for j in json.load(open("%s/%s.status.json" % (t, name)))["jobs"] if j["job"] == name][0]
db = sqlite3.connect(glob.glob(t + "/state/**/bridge.db", recursive=True)[0])
run = db.execute("SELECT r.id FROM runs r JOIN jobs j ON j.id = r.job WHERE j.job_id = ?",
                 (name,)).fetchone()[0]
got = dict(db.execute("SELECT tgid, count(*) FROM events_v WHERE run = ? AND kind = 1 GROUP BY tgid",
                      (run,)).fetchall())
short = [p for p in made if got.get(p, 0) < made[p] or made[p] == 0]
att = (st.get("overhead") or {}).get("parts", {}).get("attach", {}).get("count", 0)
print("%d %d %d %d %d %s" % (len(made), st["processes_held"], st.get("processes_bridged", -1), att,
                             len(short), ",".join("%s:%d/%d" % (p, got.get(p, 0), made[p]) for p in short)))
PY
}

# 1. The driver is new to ffmd: its first process is held at its mmap, as before the bridge.
batch first 1
read -r np held bridged att short list < <(judge first)
check "a process that maps a driver not seen before is held ($held of $np)" [ "$held" = 1 ]
check "... and its waits are recorded (${list:-all})" [ "$short" = 0 ]

# 2. Twenty short processes that map the driver right after their exec.
batch short 20
read -r np held bridged att short list < <(judge short)
check "20 short processes ran ($np)" [ "$np" = 20 ]
check "none of them held ($held)" [ "$held" = 0 ]
# Traced by the bridge: no other probe was attached, yet every wait is there. (status counts
# those ffmd gave to it at their exec record: one that exited before is not counted.)
check "every wait of each recorded (${list:-all})" [ "$short" = 0 ]
check "nothing attached for them: the bridge's attach at most ($att)" [ "$att" -le 1 ]
check "status counts them as the bridge's ($bridged)" [ "$bridged" -ge 1 ]

# 3. A long process: it is sampled, and the bridge goes while it runs.
start long && procs long 1 --rate 2000 --ms 6000 &
wl=$!
sleep 4.5
ctl status --json >"$T/long.status.json"
wait $wl
ctl job end long >/dev/null
python3 - "$T" <<'PY' >"$T/long.txt"
import glob, json, sqlite3, sys
t = sys.argv[1]
st = json.load(open(t + "/long.status.json"))
job = [j for j in st["jobs"] if j["job"] == "long"][0]
db = sqlite3.connect(glob.glob(t + "/state/**/bridge.db", recursive=True)[0])
run = db.execute("SELECT r.id FROM runs r JOIN jobs j ON j.id = r.job WHERE j.job_id = 'long'").fetchone()[0]
wins = db.execute("SELECT count(*) FROM sample_spans WHERE run = ? AND kind = 1", (run,)).fetchone()[0]
print(job.get("sampling", {}).get("sampled_now", 0), st.get("bridge", {}).get("drivers", -1),
      job["processes_held"], wins)
PY
read -r sampled drivers held wins <"$T/long.txt"
check "the long process is sampled after 4.5 s ($sampled)" [ "$sampled" = 1 ]
check "... its probe taken off and put back: windows in the store ($wins)" [ "$wins" -ge 2 ]
check "the bridge is off while it runs on (on $drivers drivers)" [ "$drivers" = 0 ]
check "... and it was not held ($held)" [ "$held" = 0 ]
check "ffmd's log says the bridge went" grep -q "bridge taken off" "$T/ffmd.log"
echo "1..$n"
[ "$fails" = 0 ] || diag <"$T/ffmd.log"
finish
