#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# ffmctl's and ffmd's conventions (TAP), none of which needs a job:
#   - a refused BPF load or uprobe names the capabilities the operation needs and those the
#     process lacks, read from its effective set (run under setpriv with a reduced bounding set);
#   - an admin_group that names no group: ffmd does not start, saying where it is set and what
#     to do; on a reload, it keeps the group it had;
set -u
cd "$(dirname "$0")/../.." || exit 2
. tests/ops/lib.sh

# --- capabilities named on a refusal ---------------------------------------------------------
if [ "$(id -u)" != 0 ] || ! command -v setpriv >/dev/null; then
	skip "refusals name the lacking capabilities" "needs root and setpriv"
else
	# CAP_BPF + CAP_PERFMON: the calibration's uprobe counter (perf's uprobe PMU) is refused.
	out=$(setpriv --bounding-set=-all,+bpf,+perfmon "$B/ffmctl" --state-dir "$T/state" \
		calibrate --driver "$B/fakecuda/libcuda.so.1" 2>&1)
	if [[ $out == *"counting uprobe hits needs CAP_SYS_ADMIN; this process lacks CAP_SYS_ADMIN"* ]]; then
		ok "calibrate with CAP_BPF + CAP_PERFMON: says CAP_SYS_ADMIN is lacking"
	else
		notok "calibrate's refusal"; echo "$out" | diag
	fi
	# CAP_PERFMON alone: the collector does not load; CAP_BPF is what is missing.
	out=$(LD_LIBRARY_PATH=$B/fakecuda setpriv --bounding-set=-all,+perfmon "$B/ffmctl" \
		--state-dir "$T/state" profile -- /bin/true 2>&1); rc=$?
	if [ $rc = 1 ] && [[ $out == *"ffmctl profile: cannot load the BPF collector: "*"profile needs CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN); this process lacks CAP_BPF"* ]] &&
		[[ $out != *"lacks CAP_BPF and CAP_PERFMON"* ]]; then
		ok "profile with CAP_PERFMON alone: exit 1, says CAP_BPF is lacking"
	else
		notok "profile's refusal (rc $rc)"; echo "$out" | diag
	fi
	mkdir -p "$T/run"
	out=$(timeout 20 setpriv --bounding-set=-all,+perfmon "$B/ffmd" --state-dir "$T/state" \
		--runtime-dir "$T/run" 2>&1); rc=$?
	if [ $rc != 0 ] && [[ $out == *"cannot load the BPF collector: "*": ffmd needs CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN); this process lacks CAP_BPF"* ]]; then
		ok "ffmd with CAP_PERFMON alone: stops, says CAP_BPF is lacking"
	else
		notok "ffmd's refusal (rc $rc)"; echo "$out" | diag
	fi
fi

# --- admin_group naming no group -------------------------------------------------------------
if [ "$(id -u)" != 0 ]; then
	skip "admin_group naming no group" "needs root (ffmd)"
else
	printf 'admin_group = ffm-no-such-group\n' >"$T/bad.conf"
	out=$(timeout 20 "$B/ffmd" --config "$T/bad.conf" --state-dir "$T/state" --runtime-dir "$T/run" 2>&1); rc=$?
	if [ $rc = 1 ] && [[ $out == *"$T/bad.conf: admin_group = ffm-no-such-group: no such group in "*"(groupadd ffm-no-such-group)"*"ffmd does not start without it"* ]]; then
		ok "ffmd with an admin_group that does not exist: exit 1, where and what to do"
	else
		notok "ffmd with a missing admin_group (rc $rc)"; echo "$out" | diag
	fi
	: >"$T/good.conf"
	if start_ffmd --config "$T/good.conf"; then
		cp "$T/bad.conf" "$T/good.conf"
		kill -HUP "$FFMD_PID"
		for _ in $(seq 50); do grep -q "ffm-no-such-group" "$T/ffmd.log" && break; sleep 0.1; done
		if grep -q "admin_group = ffm-no-such-group: no such group in .*(reload: keeping no admin group)" "$T/ffmd.log" &&
			kill -0 "$FFMD_PID" 2>/dev/null; then
			ok "reload to a missing admin_group: said, ffmd runs on with none"
		else
			notok "reload to a missing admin_group"; diag <"$T/ffmd.log"
		fi
		stop_ffmd
	else
		notok "ffmd did not start with an empty config"
	fi
fi

finish
