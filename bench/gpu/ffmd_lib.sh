# SPDX-License-Identifier: MIT
# Sourced by bench/gpu/adaptive.sh and bench/gpu/completeness.sh: one ffmd of their own (state,
# socket and config in a scratch directory), its adaptive stage-1 budget switched by SIGHUP,
# and stage-1 jobs in cgroup v2 directories of their own, as a scheduler's prolog/epilog makes
# them. The caller sets O (what bench/gpu/pack.sh built, or a build directory with --sim) and
# OUT, and calls ffmd_begin first; ffmd_end runs at exit.
#
# --sim: the simulated driver (a private copy of $O/fakecuda/libcuda.so.1) instead of the
# node's: to try the harness without a GPU.

ffmd_begin() { # ffmd_begin SIM(0|1) NAME
	S=$(mktemp -d "/tmp/ffm-$2.XXXXXX")
	for m in /sys/fs/cgroup/unified /sys/fs/cgroup; do
		[ "$(stat -f -c %T "$m" 2>/dev/null)" = cgroup2fs ] && [ -w "$m/cgroup.procs" ] &&
			{ CG=$m/ffm-$2-$$; break; }
	done
	[ -n "${CG:-}" ] || { echo "no writable cgroup v2 hierarchy" >&2; exit 1; }
	mkdir -p "$S/state" "$S/run" "$CG" || exit 1
	if [ "$1" = 1 ]; then
		[ -e "$O/fakecuda/libcuda.so.1" ] || { echo "--sim: no $O/fakecuda/libcuda.so.1" >&2; exit 1; }
		mkdir -p "$S/fake" && cp "$O/fakecuda/libcuda.so.1" "$S/fake/" || exit 1
		export LD_LIBRARY_PATH=$S/fake
	fi
	export FFM_CALIB_PROG=$O/ffm-calib-probe
	printf 'sample_budget = 0\n' >"$S/ffmd.conf"
	"$O/ffmd" --state-dir "$S/state" --runtime-dir "$S/run" --config "$S/ffmd.conf" >"$OUT/ffmd.log" 2>&1 &
	FFMD=$!
	trap ffmd_end EXIT
	for _ in $(seq 150); do [ -S "$S/run/ffmd.sock" ] && break; sleep 0.1; done
	[ -S "$S/run/ffmd.sock" ] || { echo "ffmd did not start" >&2; cat "$OUT/ffmd.log" >&2; exit 1; }
}

ffmd_end() {
	kill "$FFMD" 2>/dev/null
	wait "$FFMD" 2>/dev/null
	rmdir "$CG"/* "$CG" 2>/dev/null
	rm -rf "$S"
}

ctl() { "$O/ffmctl" --runtime-dir "$S/run" --state-dir "$S/state" "$@"; }

# The budget for the processes that start from now on (ffmd.conf's sample_budget, "0": every
# wait traced), applied when ffmd's log says it reloaded.
set_budget() { # set_budget VALUE
	local n
	n=$(grep -c "SIGHUP: reloaded" "$OUT/ffmd.log")
	printf 'sample_budget = %s\n' "$1" >"$S/ffmd.conf"
	kill -HUP "$FFMD"
	for _ in $(seq 100); do
		[ "$(grep -c "SIGHUP: reloaded" "$OUT/ffmd.log")" -gt "$n" ] && return 0
		sleep 0.02
	done
	echo "ffmd did not reload its config" >&2
	return 1
}

# One stage-1 job (key KEY, id ID) running COMMAND in a cgroup of its own; its output in
# $OUT/ID.out, then `ffmctl report --json` in $OUT/ID.json.
job_run() { # job_run ID KEY COMMAND...
	local id=$1 key=$2
	shift 2
	mkdir -p "$CG/$id"
	ctl job start "$id" --key "$key" --stage 1 --cgroup "$CG/$id" >/dev/null || return 1
	(echo $BASHPID >"$CG/$id/cgroup.procs" && exec "$@") >"$OUT/$id.out" 2>&1
	ctl job end "$id" >/dev/null
	ctl report "$id" --json >"$OUT/$id.json" 2>"$OUT/$id.err"
	rmdir "$CG/$id" 2>/dev/null
	return 0
}
