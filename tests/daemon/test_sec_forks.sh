#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# One user's fork flood against another user's job (TAP; docs/SECURITY.md, "Resource bounds per
# job and user"; issue 38, defect 5). The tracked-process table (BPF's procs map) holds 16384
# processes for all jobs; each user may have user_procs of them. A test user's --uid job forks
# FFM_FORKS children that stay alive (tests/daemon/forkflood.c) while another test user's job
# runs a normal workload (stage 2). Then:
#   - the other user's job records what the workload records alone, drops 0;
#   - the flood's job says how many of its processes were not tracked (drop reason
#     procs_quota), and its report says so;
#   - once the flood is gone its user's quota is free again: a new job of that user records.
# The defaults keep it quick (user_procs = 256, 600 forks); FFM_FORKS=16500 FFM_USER_PROCS=
# (empty: the default quota) floods the whole table as the review did.
set -u
cd "$(dirname "$0")/../.." || exit 2
. tests/ops/lib.sh
need_root
need_sim_workloads
command -v python3 >/dev/null || { echo "# python3 not found"; exit 77; }
make_users ffmfk1 ffmfk2
U1=$(id -u ffmfk1) U2=$(id -u ffmfk2)
FORKS=${FFM_FORKS:-600}
QUOTA=${FFM_USER_PROCS-256}
: >"$T/ffmd.conf"
[ -n "$QUOTA" ] && echo "user_procs = $QUOTA" >"$T/ffmd.conf"
WLARGS="--iters 100 --kernel-us 100 --cpu-us 50"
as() { local u=$1; shift; setpriv --reuid="$u" --regid="$u" --clear-groups env LD_LIBRARY_PATH="$FAKE" "$@"; }
gcc -O1 -o "$T/forkflood" tests/daemon/forkflood.c || { notok "build forkflood"; finish; }
chmod 755 "$T/forkflood"

store_of() { grep -l -a -- "$1" $(find "$T/state" -name '*.db' -path '*keys*' 2>/dev/null) 2>/dev/null | head -n 1; }
q() { python3 -c 'import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute(sys.argv[2]).fetchone()[0])' "$@"; }
# "records drops" of job $1's run; drops of reason $2 (default: all).
counts() {
	local db
	db=$(store_of "$1") && [ -n "$db" ] || { echo "none none"; return; }
	echo "$(q "$db" "SELECT count(*) FROM events WHERE run = (SELECT max(id) FROM runs)")" \
		"$(q "$db" "SELECT coalesce(sum(count), 0) FROM drops WHERE run = (SELECT max(id) FROM runs)
			${2:+AND reason = $2}")"
}

start_ffmd --config "$T/ffmd.conf" || { notok "ffmd starts"; finish; }
ctl calibrate --driver "$FAKE/libcuda.so.1" >/dev/null 2>&1 || { notok "calibrate the simulated driver"; finish; }

ctl job start solo --key solo --stage 2 --uid "$U2" >/dev/null || { notok "job start solo"; finish; }
as "$U2" "$WL/unnecessary_sync" $WLARGS >/dev/null 2>&1
ctl job end solo >/dev/null
read -r solo_n solo_d <<<"$(counts solo)"
echo "# solo: $solo_n records, drops $solo_d"

ctl job start forks --key forks --uid "$U1" >/dev/null || { notok "job start forks"; finish; }
mkfifo "$T/hold"
as "$U1" "$T/forkflood" "$FORKS" <"$T/hold" >"$T/forks.out" 2>&1 &
flood=$!
exec 7>"$T/hold"
for _ in $(seq 600); do grep -q FORKED "$T/forks.out" && break; sleep 0.1; done
diag <"$T/forks.out"
ctl job start victim --key victim --stage 2 --uid "$U2" >/dev/null || { notok "job start victim"; finish; }
as "$U2" "$WL/unnecessary_sync" $WLARGS >/dev/null 2>&1
ctl job end victim >/dev/null
exec 7>&-
wait $flood
ctl job end forks >/dev/null

read -r v_n v_d <<<"$(counts victim)"
if [ "$v_n" = "$solo_n" ] && [ "$v_d" = 0 ] && [ "$solo_d" = 0 ] && [ "$solo_n" -gt 100 ]; then
	ok "the other user's job lost nothing beside $FORKS forks: $v_n records as alone, drops 0"
else
	notok "the other user's job lost nothing (records $v_n, alone $solo_n; drops $v_d, alone $solo_d)"
	db=$(store_of victim) && [ -n "$db" ] && q "$db" "SELECT group_concat(reason_name || '=' || count) FROM drops_v" | diag
	grep -v "attached\|maps a libcuda" "$T/ffmd.log" | tail -n 15 | diag
fi
read -r _ f_q <<<"$(counts forks 6)"
want=$((FORKS + 1 - ${QUOTA:-512}))
# (CPUs forking at the same instant may each pass the check: a few more may get in.)
if [ "${f_q:-0}" -gt 0 ] && [ "$f_q" -le "$want" ] && [ "$f_q" -ge $((want - 8)) ]; then
	ok "the flood's job counts $f_q processes not tracked (quota ${QUOTA:-default})"
else
	notok "the flood's job counts its processes not tracked (${f_q:-?}, about $want expected)"
fi
out=$(ctl report forks 2>&1)
if [[ $out == *"process"*"not tracked"*"user_procs"* ]]; then
	ok "the flood's report says how many processes were not tracked, and why"
else
	notok "the flood's report says how many processes were not tracked"; echo "$out" | tail -n 12 | diag
fi
# The quota is given back as the flood's processes exit.
ctl job start again --key again --stage 2 --uid "$U1" >/dev/null || notok "job start again"
as "$U1" "$WL/unnecessary_sync" $WLARGS >/dev/null 2>&1
ctl job end again >/dev/null
read -r a_n a_d <<<"$(counts again)"
if [ "$a_n" = "$solo_n" ] && [ "$a_d" = 0 ]; then
	ok "after the flood its user's processes are tracked again ($a_n records, drops 0)"
else
	notok "after the flood its user's processes are tracked again (records $a_n, drops $a_d)"
fi
stop_ffmd
finish
