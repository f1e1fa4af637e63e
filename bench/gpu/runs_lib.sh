# SPDX-License-Identifier: MIT
# shellcheck shell=bash disable=SC2034,SC2154 # sets variables its callers read, reads their name
# Sourced by bench/gpu/classes.sh and bench/gpu/variants.sh, from the checkout's root: the
# package, the node's driver or (no GPU: to try the harness itself) the simulated one, the
# CUDA-runtime programs built with the node's toolkit, runs that keep their whole output, and
# `ffmctl profile --stages 1-4` of a key. The caller sets OUT (an absolute folder) and, before
# wall and profile_run, name (the variant: its files are $OUT/$name.*).

# gpu_setup TAG: O (absolute: what bench/gpu/pack.sh built, or a build folder), SRC (tests/gpu),
# S (scratch, removed at exit), SIMULATED (1 where the node has no GPU).
gpu_setup() {
	O=$(cd "${O:-.dev/gpu}" && pwd) || exit 1
	SRC=$PWD/tests/gpu
	S=$(mktemp -d "/tmp/ffm-gpu-$1.XXXXXX") || exit 1
	trap 'rm -rf "$S"' EXIT
	SIMULATED=
	if [ ! -e /dev/nvidiactl ]; then
		[ -e "$O/fakecuda/libcuda.so.1" ] ||
			{ echo "no GPU here, and no simulated driver in $O/fakecuda" >&2; exit 1; }
		export LD_LIBRARY_PATH=$O/fakecuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
		SIMULATED=1
	fi
	export FFM_CALIB_PROG=$O/ffm-calib-probe
}

# build_cuda SOURCE BIN: a CUDA-runtime program, built for the H100/H200 (sm_90) with cuBLAS;
# the compiler's output in $OUT/build.txt.
build_cuda() {
	nvcc -O2 -g -lineinfo -gencode arch=compute_90,code=sm_90 -o "$2" "$1" -lcublas \
		>>"$OUT/build.txt" 2>&1 || { cat "$OUT/build.txt" >&2; exit 1; }
}

# wall KIND CMD...: runs CMD; prints its WALL_S; its whole output (LOOP_S, CHECKSUM...), each
# line after KIND, goes to $OUT/$name.runs.
wall() {
	local kind=$1
	shift
	"$@" 2>/dev/null </dev/null | sed "s/^/$kind /" | tee -a "$OUT/$name.runs" |
		awk '/ WALL_S /{print $3}'
}

# profile_run KEY JOB CMD...: one `ffmctl profile --stages 1-4` of CMD as job JOB of key KEY;
# its output appended to $OUT/$name.profile.
profile_run() {
	local key=$1 job=$2
	shift 2
	"$O/ffmctl" --state-dir "$S/st" profile --quiet --stages 1-4 --key "$key" --job-id "$job" \
		-- "$@" >>"$OUT/$name.profile" 2>&1 </dev/null
}

# report_job JOB: its report, every problem, in $OUT/$name.json, and as text in $OUT/$name.txt.
report_job() {
	"$O/ffmctl" --state-dir "$S/st" report "$1" --json --top 1000 >"$OUT/$name.json"
	"$O/ffmctl" --state-dir "$S/st" report "$1" >"$OUT/$name.txt"
}
