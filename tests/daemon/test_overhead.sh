#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The price of a job's processes (docs/OVERHEAD.md, "The fixed price per process"), end to end
# (real BPF, the simulated driver): three short CUDA processes (tests/workloads/sync_rate) in
# one stage-1 job of ffmd.
#   - `ffmctl status --json` gives the job a price: BPF's runs at the processes' exec, mmap,
#     fork and exit, the probes' attach (the bridge's or each process's), their /proc reads,
#     the waits traced in full (as many as the store holds), holds as many as status says;
#   - the run's store has its price (run_overhead) and `ffmctl report` shows it (text and JSON);
#   - the holds file is gone once nothing is held;
#   - analysis = reader (SIGHUP): the next run's analysis is not stored on the node, its run is
#     flagged no_analysis, and `ffmctl report` still computes it.
# Skips (exit 77, saying why) without root, BPF, cgroup v2, the simulated driver or python3.
set -u
cd "$(dirname "$0")/../.." || exit 2
B=$(cd "${FFM_BUILD:-build}" && pwd) || exit 2

n=0 fails=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
notok() { n=$((n + 1)); fails=$((fails + 1)); echo "not ok $n - $1"; }
check() { local name=$1; shift; if "$@"; then ok "$name"; else notok "$name"; fi; }

[ "$(id -u)" = 0 ] || { echo "1..0 # SKIP needs root (BPF uprobes, cgroups)"; exit 77; }
if [ ! -e "$B/fakecuda/libcuda.so.1" ] || [ ! -x "$B/workloads/sync_rate" ] || ! command -v python3 >/dev/null; then
	echo "1..0 # SKIP needs the simulated driver, the workloads (make) and python3"
	exit 77
fi
CGR=
for m in /sys/fs/cgroup/unified /sys/fs/cgroup; do
	[ -w "$m/cgroup.procs" ] && [ "$(stat -f -c %T "$m")" = cgroup2fs ] && { CGR=$m; break; }
done
[ -n "$CGR" ] || { echo "1..0 # SKIP no writable cgroup v2 hierarchy"; exit 77; }

T=$(mktemp -d /tmp/ffm-test-price-XXXXXX)
CG=$CGR/ffm-test-price-$$
FFMD=
cleanup() {
	[ -n "$FFMD" ] && kill "$FFMD" 2>/dev/null && wait "$FFMD" 2>/dev/null
	rmdir "$CG"/* "$CG" 2>/dev/null
	[ -n "${FFM_TEST_KEEP:-}" ] || rm -rf "$T"
}
trap cleanup EXIT
mkdir -p "$T/fake" "$T/state" "$T/run" "$CG" && cp "$B/fakecuda/libcuda.so.1" "$T/fake/" || exit 1
: >"$T/ffmd.conf"
FFM_CALIB_PROG=$B/ffm-calib-probe LD_LIBRARY_PATH=$T/fake \
	"$B/ffmd" --state-dir "$T/state" --runtime-dir "$T/run" --config "$T/ffmd.conf" >"$T/ffmd.log" 2>&1 &
FFMD=$!
for _ in $(seq 100); do [ -S "$T/run/ffmd.sock" ] && break; sleep 0.1; done
if [ ! -S "$T/run/ffmd.sock" ]; then
	grep -qiE 'BPF|permission' "$T/ffmd.log" && { echo "1..0 # SKIP BPF not usable: $(head -c 200 "$T/ffmd.log")"; exit 77; }
	notok "ffmd starts"; sed 's/^/# /' "$T/ffmd.log"; exit 1
fi
ctl() { "$B/ffmctl" --runtime-dir "$T/run" --state-dir "$T/state" "$@"; }

job() { # job NAME: three short processes in one stage-1 job; status before its end
	mkdir -p "$CG/$1"
	ctl job start "$1" --key price --stage 1 --cgroup "$CG/$1" >/dev/null || return 1
	(echo $BASHPID >"$CG/$1/cgroup.procs" && for _ in 1 2 3; do
		LD_LIBRARY_PATH=$T/fake "$B/workloads/sync_rate" --kernel-us 5 --cpu-us 100 --iters 40 || exit 1
	done) >"$T/$1.out" 2>&1
	sleep 0.3
	ctl status --json >"$T/$1.status.json"
	ctl job end "$1" >/dev/null
}

job run1
ctl report run1 --json >"$T/run1.json" 2>"$T/run1.err"
ctl report run1 >"$T/run1.txt" 2>>"$T/run1.err"
python3 - "$T" >"$T/checks.txt" 2>&1 <<'PY'
import glob, json, sqlite3, sys
t = sys.argv[1]
st = [j for j in json.load(open(t + "/run1.status.json"))["jobs"] if j["job"] == "run1"][0]
p = st.get("overhead", {}).get("parts", {})
c = lambda k: p.get(k, {}).get("count", 0)
db = sqlite3.connect(glob.glob(t + "/state/**/price.db", recursive=True)[0])
run = db.execute("SELECT id FROM runs ORDER BY id DESC LIMIT 1").fetchone()[0]
waits = db.execute("SELECT count(*) FROM events WHERE run = ? AND (info & 255) = 1", (run,)).fetchone()[0]
stored = dict((r[0], r[1:]) for r in db.execute(
    "SELECT n.name, p.ns, p.count FROM run_overhead p JOIN overhead_parts n ON n.id = p.part WHERE p.run = ?", (run,)))
rep = json.load(open(t + "/run1.json")).get("overhead") or {}
txt = open(t + "/run1.txt").read()
res = [
    ("status: BPF ran at the processes' exec, mmap and exit (%d runs)" % c("bpf"), c("bpf") >= 9),
    # The bridge's attach (a system-wide probe that traces them, docs/OVERHEAD.md) or each
    # process's own: at least one.
    ("status: the probes' attach priced (%d)" % c("attach"), c("attach") >= 1),
    ("status: /proc read for each (%d)" % c("procfs"), c("procfs") >= 3),
    ("status: waits traced in full, as many as stored (%d of %d)" % (c("waits_full"), waits),
     waits > 0 and c("waits_full") == waits),
    ("status: holds as many as held (%d, %d)" % (c("held"), st["processes_held"]),
     c("held") == st["processes_held"]),
    ("status: a cost in percent of the run (%s)" % st.get("overhead", {}).get("cost_pct"),
     st.get("overhead", {}).get("cost_pct", 0) > 0),
    ("store: the run's price, every part (%d)" % len(stored),
     len(stored) == 10 and stored["bpf"][1] >= c("bpf") and stored["waits_full"][1] == waits),
    ("report: the price in JSON", rep.get("parts", {}).get("attach", {}).get("count", 0) >= 1),
    ("report: the price in text", "overhead: " in txt and "ffmd's own" in txt),
]
for name, good in res:
    print(("ok " if good else "not ok ") + name)
PY
while IFS= read -r line; do
	case $line in
	"ok "*) ok "${line#ok }" ;;
	"not ok "*) notok "${line#not ok }" ;;
	*) echo "# $line" ;;
	esac
done <"$T/checks.txt"
grep -q "^ok \|^not ok " "$T/checks.txt" || notok "the price checks ran (no price in status or store)"
check "the holds file is gone once nothing is held" test ! -e "$T/state/ffmd-held"

# analysis = reader: no analysis stored at the run's end, the run says so, report computes it.
printf 'analysis = reader\n' >"$T/ffmd.conf"
kill -HUP "$FFMD"
for _ in $(seq 50); do grep -q "SIGHUP: reloaded" "$T/ffmd.log" && break; sleep 0.1; done
job run2
sleep 1
python3 - "$T" <<'PY' >"$T/reader.txt"
import glob, sqlite3, sys
db = sqlite3.connect(glob.glob(sys.argv[1] + "/state/**/price.db", recursive=True)[0])
flags = db.execute("SELECT r.flags FROM runs r JOIN jobs j ON j.id = r.job WHERE j.job_id = 'run2'").fetchone()[0]
a1 = db.execute("SELECT count(*) FROM analyses WHERE job_id = 'run1'").fetchone()[0]
a2 = db.execute("SELECT count(*) FROM analyses WHERE job_id = 'run2'").fetchone()[0]
print(flags & 64, a1, a2)
PY
read -r flag a1 a2 <"$T/reader.txt"
check "analysis = node stored run1's analysis ($a1)" [ "$a1" = 1 ]
check "analysis = reader: run2 flagged no_analysis ($flag), none stored ($a2)" [ "$flag" = 64 ] && [ "$a2" = 0 ]
check "analysis = reader: ffmctl report computes it on read" ctl report run2 --json >"$T/run2.json"
echo "1..$n"
[ "$fails" = 0 ]
