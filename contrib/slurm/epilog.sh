#!/bin/sh
# SPDX-License-Identifier: MIT
#
# ffm's Slurm Epilog (slurmd, as root, on every node when the job's allocation ends): end the
# job in ffmd (`ffmctl job end $SLURM_JOB_ID`, which closes the run in the job key's store) and,
# on request, append a one-screen ffm summary to the job's output file, in the style of IPM's
# banner. Install: contrib/slurm/README.md.
#
# The banner: the Epilog's output goes to slurmd's log, not to the job, and the Epilog does
# not see the job's environment. So it is requested through what the Epilog does see, and
# written to the job's stdout file *as the job's user*, so that root never writes through a
# path the user controls:
#   sbatch --comment ffm_banner=1 ...  (or --extra ffm_banner=1, Slurm >= 23.02): this job
#   FFM_BANNER=1 in the Epilog's environment: every job (a site default)
#   FFM_BANNER_FILE=PATH: write the banner there instead (generic schedulers, tests), "-" for
#   stdout.
# The banner is built from `ffmctl report <jobid>` (at most FFM_BANNER_LINES lines, default 24).
# The job's stdout file: SLURM_JOB_STDOUT when it is an absolute path without patterns; Slurm
# 22.05 gives it as sbatch got it (/dir/%x-%j.out), and not at all for the default
# slurm-%j.out, so then `scontrol show job` (the job is still known, COMPLETING) names the
# expanded path (StdOut=). Batch jobs only: an salloc/srun job has no stdout file.
#
# A failing Epilog sets the node DOWN (Slurm's rule): this script always exits 0 and logs
# (syslog tag ffm-epilog, and stderr).

PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
FFMCTL=${FFMCTL:-ffmctl}
SCONTROL=${SCONTROL:-scontrol}
FFM_TIMEOUT=${FFM_TIMEOUT:-20}
FFM_BANNER_LINES=${FFM_BANNER_LINES:-24}

log() {
	echo "ffm-epilog: $*" >&2
	logger -t ffm-epilog -- "$*" 2>/dev/null
	return 0
}

job=${FFM_JOB_ID:-${SLURM_JOB_ID:-}}
uid=${FFM_JOB_UID:-${SLURM_JOB_UID:-}}
gid=${FFM_JOB_GID:-${SLURM_JOB_GID:-}}
case $job in
'' | *[!0-9A-Za-z_.-]*)
	log "no usable job id (SLURM_JOB_ID='$job')"
	exit 0
	;;
esac

if out=$("$FFMCTL" --timeout "$FFM_TIMEOUT" job end "$job" 2>&1); then
	log "$out"
else
	# Also when the Prolog could not start it: nothing else to do.
	log "job $job: $out"
	exit 0
fi

want=${FFM_BANNER:-0}
case " ${SLURM_JOB_EXTRA:-} ${SLURM_JOB_COMMENT:-} " in
*[\ ,\;]ffm_banner=1[\ ,\;]*) want=1 ;;
esac
[ "$want" = 1 ] || exit 0

banner() {
	# The report's table heads; the IPM banner's frame: "##ffm###...", "# " lines, "####...".
	echo "##ffm#########################################################################"
	printf '# job %s on %s\n' "$job" "${SLURMD_NODENAME:-$(hostname -s 2>/dev/null)}"
	"$FFMCTL" report "$job" 2>&1 | head -n "$FFM_BANNER_LINES" | sed 's/^/# /'
	echo "# full report: ffmctl report $job   (--json for tools)"
	echo "###############################################################################"
}

job_stdout() {
	case ${SLURM_JOB_STDOUT:-} in
	*%*) ;;
	/*) echo "$SLURM_JOB_STDOUT"; return ;;
	esac
	timeout "$FFM_TIMEOUT" "$SCONTROL" show job "$job" 2>/dev/null | sed -n 's/^ *StdOut=//p' |
		head -n 1
}

dest=${FFM_BANNER_FILE:-$(job_stdout)}
if [ "$dest" = - ]; then
	banner
	exit 0
fi
case $dest in
/*) ;;
*)
	log "job $job: banner requested but no output file (SLURM_JOB_STDOUT" \
		"'${SLURM_JOB_STDOUT:-}', scontrol's StdOut '$dest'; not a batch job?)"
	exit 0
	;;
esac
case $uid in
'' | *[!0-9]*)
	log "job $job: banner requested but no numeric SLURM_JOB_UID"
	exit 0
	;;
esac
# Append with the user's own rights: a symlink or a file the user may not write is refused by
# the kernel, not followed by root.
if ! banner | setpriv --reuid="$uid" --regid="${gid:-$uid}" --clear-groups -- \
	sh -c 'cat >> "$1"' sh "$dest" 2>/dev/null; then
	log "job $job: could not append the banner to $dest as uid $uid"
fi
exit 0
