#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# ffm's overhead and ingest benchmark (bench/bench_overhead.c says what it measures and how).
# Needs root (BPF). Prints one report; nothing is asserted.
#
#   bench/run-bench.sh                      # the simulated driver of this build
#   bench/run-bench.sh --driver /usr/local/nvidia/lib64/libcuda.so.1   # a GPU node
#   O=build-static bench/run-bench.sh ...   # binaries of another build directory
#
# Extra arguments go to bench_overhead (--reps N, --calls N, --ingest-events N, --state-dir DIR).
# Without --driver: the real driver when /dev/nvidiactl exists and the loader knows a
# libcuda.so.1, else $O/fakecuda/libcuda.so.1.
set -eu
cd "$(dirname "$0")/.."
O=${O:-build}
args=("$@")
if [[ " $* " != *" --driver "* ]]; then
	if [ -e /dev/nvidiactl ] && drv=$(ldconfig -p | awk '/libcuda\.so\.1 /{print $NF; exit}') && [ -n "$drv" ]; then
		args+=(--driver "$(readlink -f "$drv")")
	else
		args+=(--driver "$PWD/$O/fakecuda/libcuda.so.1")
	fi
fi
export FFM_CALIB_PROG=${FFM_CALIB_PROG:-$PWD/$O/ffm-calib-probe}
exec "$O/bench/bench_overhead" --workload "$O/workloads/unnecessary_sync" \
	--ptx tests/workloads/kernels.ptx "${args[@]}"
