#!/bin/sh
# SPDX-License-Identifier: MIT
#
# ffm's Slurm Prolog (slurmd, as root, on every node of a job): tell the node's ffmd that the
# job begins, so that the job's CUDA processes are measured. Install: contrib/slurm/README.md.
#
#   ffmctl job start $SLURM_JOB_ID --cgroup <the job's cgroup v2 directory> --key <key>
#                    --user $SLURM_JOB_UID
#
# Which processes: the job's cgroup v2 directory (cgroup/v2 plugin; it must exist when the
# Prolog runs, which PrologFlags=Contain guarantees), found in this order:
#   FFM_SLURM_CGROUP   a path template (%j = job id, %u = uid, %n = node name), site setting
#   <cgroup2>/system.slice/slurmstepd.scope/job_<id>         Slurm's default layout
#   <cgroup2>/system.slice/<node>_slurmstepd.scope/job_<id>  (several slurmd per host)
#   a directory job_<id> at most 4 levels below the cgroup v2 root
# If none exists (cgroup v1, or no PrologFlags=Contain), the job's uid is the selector: every
# process of that user on the node, exact on nodes given to one job at a time.
#
# Which key (runs of one key escalate through the FFM stages):
#   FFM_KEY                          set for the Prolog by the site (e.g. per partition)
#   ffm_key=K in --extra / --comment what the user gave: sbatch --comment ffm_key=nightly-sim
#                                    (--extra: Slurm >= 23.02)
#   $SLURM_JOB_USER/$SLURM_JOB_NAME  where the Prolog has SLURM_JOB_NAME
#   none: ffmd makes the job id the key (the job starts at stage 1, nothing escalates)
# The Prolog never sees the job's own environment (Slurm's rule), hence --extra/--comment.
#
# A failing Prolog sets the node DOWN (Slurm's rule): this script always exits 0 and logs
# what went wrong (syslog tag ffm-prolog, and stderr, which slurmd logs).
#
# Generic schedulers: the same script works with FFM_JOB_ID, FFM_JOB_UID, FFM_JOB_USER,
# FFM_JOB_NAME, FFM_JOB_CGROUP in place of the SLURM_* variables (README.md).

PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
FFMCTL=${FFMCTL:-ffmctl}
FFM_TIMEOUT=${FFM_TIMEOUT:-20}

log() {
	echo "ffm-prolog: $*" >&2
	logger -t ffm-prolog -- "$*" 2>/dev/null
	return 0
}

job=${FFM_JOB_ID:-${SLURM_JOB_ID:-}}
uid=${FFM_JOB_UID:-${SLURM_JOB_UID:-}}
user=${FFM_JOB_USER:-${SLURM_JOB_USER:-}}
name=${FFM_JOB_NAME:-${SLURM_JOB_NAME:-}}
node=${SLURMD_NODENAME:-$(hostname -s 2>/dev/null)}
case $job in
'' | *[!0-9A-Za-z_.-]*)
	log "no usable job id (SLURM_JOB_ID='$job'), nothing measured"
	exit 0
	;;
esac
case $uid in
'' | *[!0-9]*)
	log "job $job: no numeric SLURM_JOB_UID ('$uid'), nothing measured"
	exit 0
	;;
esac

cgroup2_root() {
	for m in /sys/fs/cgroup /sys/fs/cgroup/unified; do
		[ "$(stat -f -c %T "$m" 2>/dev/null)" = cgroup2fs ] && { echo "$m"; return 0; }
	done
	return 1
}

find_cgroup() {
	if [ -n "${FFM_JOB_CGROUP:-}" ]; then
		[ -d "$FFM_JOB_CGROUP" ] && echo "$FFM_JOB_CGROUP"
		return
	fi
	if [ -n "${FFM_SLURM_CGROUP:-}" ]; then
		p=$(printf '%s' "$FFM_SLURM_CGROUP" | sed -e "s/%j/$job/g" -e "s/%u/$uid/g" -e "s/%n/$node/g")
		[ -d "$p" ] && echo "$p"
		return
	fi
	root=$(cgroup2_root) || return
	for p in "$root/system.slice/slurmstepd.scope/job_$job" \
		"$root/system.slice/${node}_slurmstepd.scope/job_$job"; do
		[ -d "$p" ] && { echo "$p"; return; }
	done
	find "$root" -mindepth 1 -maxdepth 4 -type d -name "job_$job" 2>/dev/null | head -n 1
}

key=${FFM_KEY:-}
if [ -z "$key" ]; then
	for field in "${SLURM_JOB_EXTRA:-}" "${SLURM_JOB_COMMENT:-}"; do
		k=$(printf '%s\n' "$field" | tr ' ,;' '\n\n\n' | sed -n 's/^ffm_key=//p' | head -n 1)
		[ -n "$k" ] && { key=$k; break; }
	done
fi
[ -z "$key" ] && [ -n "$name" ] && key=${user:-$uid}/$name

set -- job start "$job" --user "$uid"
[ -n "$key" ] && set -- "$@" --key "$key"
cg=$(find_cgroup)
if [ -n "$cg" ]; then
	set -- "$@" --cgroup "$cg"
else
	log "job $job: no cgroup v2 directory found (cgroup v1, or PrologFlags=Contain not set?); measuring every process of uid $uid on this node"
	set -- "$@" --uid "$uid"
fi
if out=$("$FFMCTL" --timeout "$FFM_TIMEOUT" "$@" 2>&1); then
	log "$out"
else
	log "job $job not measured: $out"
fi
exit 0
