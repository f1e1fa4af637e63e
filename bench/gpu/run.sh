#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# ffm on a real GPU: everything docs/RESULTS.md reports, measured in one place.
#
#   O=DIR bench/gpu/run.sh [--part all|a|b] [--reps N] [--stage-reps N] OUT
#
# Runs in a checkout of ffm on the GPU node. DIR (default .dev/gpu) holds what bench/gpu/pack.sh
# built elsewhere: a static ffmctl, the calibration probe, the workloads and the benchmark (a
# GPU node has no -dev packages to build ffm). The CUDA-runtime programs are built here with
# this machine's nvcc. Needs root (BPF).
#   part a: calibration; every workload plain and --fixed (N runs each) and under
#           `ffmctl profile --stages 1-4`; each stage's slowdown (same workload, same key);
#           ffmd itself with two runs of each workload under a job (bench/gpu/ffmd_check.sh)
#   part b: the CUDA-runtime versions of the problems (plain/--fixed, ffm, the CUPTI peer),
#           a PyTorch loop with a per-step loss.item() (plain/--fixed, ffm, torch.profiler),
#           and the overhead benchmark (bench/run-bench.sh)
# OUT gets the raw outputs (JSON and text) and, made from them by bench/gpu/results.py,
# OUT/RESULTS.md: the page docs/RESULTS.md holds. Nothing here judges a number.
set -u
part=all reps=5 stage_reps=1
while [ $# -gt 1 ]; do
	case $1 in
	--part) part=$2; shift 2 ;;
	--reps) reps=$2; shift 2 ;;
	--stage-reps) stage_reps=$2; shift 2 ;;
	*) echo "usage: $0 [--part all|a|b] [--reps N] OUT" >&2; exit 2 ;;
	esac
done
[ $# = 1 ] || { echo "usage: $0 [--part all|a|b] [--reps N] OUT" >&2; exit 2; }
OUT=$(mkdir -p "$1" && cd "$1" && pwd)
cd "$(dirname "$0")/../.." || exit 1
O=$(cd "${O:-.dev/gpu}" && pwd) || exit 1
SRC=$PWD/tests/gpu
S=$(mktemp -d /tmp/ffm-gpu-state.XXXXXX)
FFMCTL=$O/ffmctl
# Without a GPU (to try the harness itself) the workloads run on the simulated driver of the
# build; part b needs a real one.
if [ ! -e /dev/nvidiactl ]; then
	export LD_LIBRARY_PATH=$O/fakecuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
	SIMULATED=1
fi
export FFM_CALIB_PROG=$O/ffm-calib-probe
log() { echo "[$(date +%T)] $*" >&2; }

# One workload run: prints "<WALL_S> <LOOP_S>" (LOOP_S = WALL_S where the program has none).
run_wl() {
	local out
	out=$("$@" 2>/dev/null) || { echo "FAIL FAIL"; return; }
	awk '/^WALL_S/{w=$2} /^LOOP_S/{l=$2} END{if (l == "") l = w; print w, l}' <<<"$out"
}

machine() {
	{
		echo "date: $(date -u +%FT%TZ)"
		echo "kernel: $(uname -r)"
		if [ -n "${SIMULATED:-}" ]; then echo "gpu: none: the simulated driver ($O/fakecuda)"; else
			nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | sed 's/^/gpu: /'; fi
		echo "cpus: $(nproc)"
		echo "nvcc: $(nvcc --version 2>/dev/null | tail -1)"
		echo "torch: $(python3 -c 'import torch; print(torch.__version__)' 2>/dev/null)"
	} >"$OUT/machine.txt"
}

part_a() {
	log "calibration"
	local t0=$(date +%s.%N)
	"$FFMCTL" --state-dir "$S" calibrate --json ${SIMULATED:+--driver $O/fakecuda/libcuda.so.1} \
		>"$OUT/calib.json" 2>"$OUT/calib.err"
	awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f\n", b - a }' >"$OUT/calib.time"
	local wls="unnecessary_sync misplaced_sync free_in_loop dup_transfer pageable_async managed_memset sequence control templated"
	: >"$OUT/plainfixed.txt"
	: >"$OUT/stages.txt"
	for w in $wls; do
		log "$w: plain/fixed x$reps"
		for i in $(seq "$reps"); do
			# Interleaved, so drift of the machine hits both modes alike.
			echo "$w plain $(run_wl "$O/workloads/$w")" >>"$OUT/plainfixed.txt"
			echo "$w fixed $(run_wl "$O/workloads/$w" --fixed)" >>"$OUT/plainfixed.txt"
		done
		log "$w: ffmctl profile --stages 1-4"
		"$FFMCTL" --state-dir "$S" profile --stages 1-4 --key "gpu-$w" --json -- "$O/workloads/$w" \
			>"$OUT/report_$w.json" 2>"$OUT/profile_$w.err"
		# Each stage again on the same key (its plan has what the stage needs), against a
		# plain run next to it.
		for st in 1 2 3 4; do
			for i in $(seq "$stage_reps"); do
				echo "$w $st plain $(run_wl "$O/workloads/$w")" >>"$OUT/stages.txt"
				"$FFMCTL" --state-dir "$S" profile --stages "$st" --key "gpu-$w" --json -- "$O/workloads/$w" \
					>/dev/null 2>"$OUT/stage.err"
				echo "$w $st ffm $(awk '/^WALL_S/{w=$2} /^LOOP_S/{l=$2} END{if (l == "") l = w; print w, l}' "$OUT/stage.err")" >>"$OUT/stages.txt"
			done
		done
	done
	rm -f "$OUT/stage.err"
	log "large duplicate transfer"
	"$FFMCTL" --state-dir "$S" profile --stages 2-3 --key gpu-big --json -- "$O/tests/memtrace/xfer_big" 80 \
		>"$OUT/report_xfer_big.json" 2>"$OUT/profile_xfer_big.err"
	dump_xfers "$S/keys/gpu-big.db" >"$OUT/xfer_big.txt"
	save_stores stores
	log "ffmd, driven as a scheduler would"
	O=$O bench/gpu/ffmd_check.sh "$OUT/ffmd" >/dev/null 2>&1
}

# Stage 3's content hashes of a key, one transfer a line (python3's sqlite3: a GPU node may
# have no sqlite3 command): stage, duplicate kind (0 new, 1 same destination, 2 elsewhere),
# bytes, hash.
dump_xfers() {
	python3 - "$1" <<'PY'
import sqlite3, sys
db = sqlite3.connect("file:%s?mode=ro" % sys.argv[1], uri=True)
for row in db.execute("SELECT r.stage, x.dup, x.bytes, printf('%016x', x.hash) FROM xfer_hashes x "
                      "JOIN runs r ON r.id = x.run ORDER BY x.id"):
    print(*row)
PY
}

# The job keys' stores, so reports can be recomputed from the same data later.
save_stores() {
	cp "$S"/keys/gpu-*.db "$OUT/" 2>/dev/null
	tar -C "$OUT" -czf "$OUT/$1.tgz" $(cd "$OUT" && ls gpu-*.db 2>/dev/null) && rm -f "$OUT"/gpu-*.db
}

part_b() {
	log "building the CUDA-runtime programs and the CUPTI peer with this machine's toolkit"
	nvcc -O2 -g -lineinfo -gencode arch=compute_90,code=sm_90 -o "$S/cudart_problems" "$SRC/cudart_problems.cu" &&
		gcc -std=gnu11 -O2 -fPIC -shared -I/usr/local/cuda/include -o "$S/libffm_cupti_peer.so" \
			"$SRC/cupti_peer.c" -L/usr/local/cuda/lib64 -lcupti -Wl,-rpath,/usr/local/cuda/lib64 ||
		{ log "build failed"; return 1; }
	: >"$OUT/cudart_plainfixed.txt"
	for p in unnecessary_sync misplaced_sync free_in_loop dup_transfer pageable_async managed_memset control; do
		log "cudart $p"
		for i in $(seq "$reps"); do
			echo "$p plain $(run_wl "$S/cudart_problems" --problem $p)" >>"$OUT/cudart_plainfixed.txt"
			echo "$p fixed $(run_wl "$S/cudart_problems" --problem $p --fixed)" >>"$OUT/cudart_plainfixed.txt"
		done
		CUDA_INJECTION64_PATH=$S/libffm_cupti_peer.so FFM_PEER_OUT=$OUT/cupti_$p.json \
			"$S/cudart_problems" --problem $p >/dev/null 2>&1
		"$FFMCTL" --state-dir "$S" profile --stages 1-4 --key "gpu-cudart-$p" --json -- \
			"$S/cudart_problems" --problem $p >"$OUT/report_cudart_$p.json" 2>"$OUT/profile_cudart_$p.err"
	done
	log "torch"
	: >"$OUT/torch_plainfixed.txt"
	for i in $(seq 3); do
		echo "torch plain $(run_wl python3 "$SRC/torch_item.py")" >>"$OUT/torch_plainfixed.txt"
		echo "torch fixed $(run_wl python3 "$SRC/torch_item.py" --fixed)" >>"$OUT/torch_plainfixed.txt"
	done
	python3 "$SRC/torch_item.py" --torch-profile "$OUT/torch_profiler.json" >/dev/null 2>&1
	"$FFMCTL" --state-dir "$S" profile --stages 1-4 --key gpu-torch --json -- python3 "$SRC/torch_item.py" \
		>"$OUT/report_torch.json" 2>"$OUT/profile_torch.err"
	log "overhead benchmark"
	O=$O bench/run-bench.sh --driver "$(readlink -f "$(ldconfig -p | awk '/libcuda\.so\.1 /{print $NF; exit}')")" \
		--state-dir "$S/bench" --reps 3 >"$OUT/overhead.txt" 2>&1
	# The same with the entry/return pairs of kernels before uprobe sessions: what a process
	# outside every job pays there.
	FFM_PROBE_MODE=multi O=$O bench/run-bench.sh \
		--driver "$(readlink -f "$(ldconfig -p | awk '/libcuda\.so\.1 /{print $NF; exit}')")" \
		--state-dir "$S/bench-multi" --reps 3 --ingest-events 1000 >"$OUT/overhead_multi.txt" 2>&1
	save_stores stores_b
}

machine
[ -z "${SIMULATED:-}" ] || [ "$part" = a ] || { log "no GPU: running part a only"; part=a; }
case $part in
a) part_a ;;
b) part_b ;;
all) part_a; part_b ;;
*) echo "$0: --part must be all, a or b" >&2; exit 2 ;;
esac
rm -rf "$S"
python3 bench/gpu/results.py "$OUT" >"$OUT/RESULTS.md" && log "done: $OUT/RESULTS.md (copy it to docs/RESULTS.md)"
