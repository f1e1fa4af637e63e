#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# ffmd on the older uprobe kinds: the collector falls back from uprobe sessions (Linux 6.12+)
# to entry/return uprobe_multi links (6.6+) and to per-offset perf-event uprobes, and the
# default run of tests/daemon/test_ffmd covers only the first on this kernel. Here the same
# end-to-end cases run with FFM_PROBE_MODE forcing each older kind:
#   multi:  every case;
#   single: the cases that fit its cost (detaching a per-offset uprobe waits ~0.1 s, serialized:
#           a stage-2 probe set takes ~12 s, longer than the rule case's deadlines).
# and the system-wide uprobes (FFM_PROBE_SCOPE=system, the fallback where the kernel cannot
# stop a forked child) with uprobe sessions: every case.
# Each case's TAP line is passed through, renumbered.
cd "$(dirname "$0")/../.." || exit 2
B=${FFM_BUILD:-build}
bin=$B/tests/daemon/test_ffmd
[ -x "$bin" ] || { echo "# $bin not built"; exit 2; }
if [ "$(id -u)" != 0 ]; then
	echo "# needs root (ffmd loads BPF programs); skipping"
	exit 77
fi
n=0 fails=0
run() { # run MODE ONLY [SCOPE]
	local out line
	out=$(FFM_PROBE_MODE=$1 FFM_PROBE_SCOPE=${3:-process} FFM_TEST_ONLY=$2 "$bin" 2>&1)
	local rc=$?
	while IFS= read -r line; do
		case $line in
		"ok "*"# SKIP not selected"*) ;;
		"ok "* | "not ok "*)
			n=$((n + 1))
			[[ $line == "not ok"* ]] && fails=$((fails + 1))
			echo "${line%% [0-9]* - *} $n - $1${3:+/$3}: ${line#* - }"
			;;
		"#"*) echo "$line" ;;
		esac
	done <<<"$out"
	if [ "$rc" != 0 ] && ! grep -q "^not ok" <<<"$out"; then
		n=$((n + 1)) fails=$((fails + 1))
		echo "not ok $n - $1: test_ffmd exited $rc"
		tail -n 5 <<<"$out" | sed 's/^/# /'
	fi
}
run multi ""
run session "" system
for c in status_reports_probe_mode new_driver workloads_stage1 exec_after_job_start stage_escalation unforeseen_driver forked_child; do
	run single "$c"
done
[ "$fails" = 0 ]
