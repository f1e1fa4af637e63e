#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds what bench/gpu/run.sh needs on a GPU node, which cannot build ffm itself (no -dev
# packages there), into one small folder (default .dev/gpu, git-ignored) to carry there:
# static ffmctl and ffmd, the calibration probe and the benchmark's call timer (libc only), the
# workloads (libc + libcuda.so.1), xfer_big and the overhead benchmark.
set -eu
cd "$(dirname "$0")/../.."
D=${1:-.dev/gpu}
make -s STATIC=1 O=build-static all
rm -rf "$D" && mkdir -p "$D/bench" "$D/workloads" "$D/tests/memtrace"
cp build-static/ffmctl build-static/ffmd build-static/ffm-calib-probe "$D/"
cp build-static/bench/bench_overhead build-static/bench/bench_overhead_child "$D/bench/"
cp build-static/tests/memtrace/xfer_big "$D/tests/memtrace/"
for w in build-static/workloads/*; do
	[ -f "$w" ] && [ -x "$w" ] && cp "$w" "$D/workloads/"
done
du -sh "$D"
