/* SPDX-License-Identifier: MIT */
/*
 * Synthetic stores with known answers, for the report's tests and its benchmark: a job key whose
 * runs (stages 1-4) hold a timeline of one or more planted problems, written through the store's
 * public put API exactly as ffmd would, with stage 3/4 verdicts as the memory-tracing stages
 * write them (one sync_uses row per sync occurrence and protected range, one xfer_hashes row
 * per transfer, in time order, with the event's stack id).
 *
 * Scenarios (per iteration; times in µs, see synth_opts; every chain ends C after its last call):
 *   UNNECESSARY  launch(L) sync(wait K) cpu(C)            stage 3: no use -> benefit iters·min(K, C)
 *   MISPLACED    launch(L) dtoh_async(L) sync(wait K) cpu(C) use
 *                                                         stage 3/4: use C after -> iters·min(C, K)
 *   DUP          htod(T, no wait) launch(L) sync(wait K) use cpu(C)
 *                                                         stage 3: SAME_DST after the first
 *                                                         -> (iters-1)·T
 *   CONTROL      launch(L) sync(wait K) use cpu(C)         no problem
 *   SEQUENCE     launch(L) syncA(wait K) cpu(C) syncB(wait K2) cpu(C2) syncR(wait ~0) use
 *                                                         A, B unnecessary, R required
 *   HOST_READ    launch(L) dtoh_async(L, 4 bytes) sync(K + 20 µs, wait K) use cpu(C), the copy
 *                and the sync on one line (.item())     a host read every iteration: 49 of
 *                                                         50 removed, each with its calls'
 *                                                         CPU time -> min(C + 2L, K + 20 + L)
 * The expected benefits are computed by synth__expected() from the same parameters.
 */
#ifndef FFM_TESTS_SYNTH_H
#define FFM_TESTS_SYNTH_H

#include <stdbool.h>
#include <stdint.h>

enum synth_scenario {
	SYN_UNNECESSARY = 0,
	SYN_MISPLACED,
	SYN_DUP,
	SYN_CONTROL,
	SYN_SEQUENCE,
	SYN_HOST_READ,
	SYN__MAX,
};

/* The owner of the jobs written (a user's: the store is ffm_store__owner_file_name's). */
#define SYNTH_UID 1000

struct synth_opts {
	const char *state_dir; /* the store goes to <state_dir>/keys/ */
	const char *key;       /* job key */
	const char *job_id;
	const char *node;      /* job row's node name, may be NULL */
	unsigned scenarios;    /* bit (1u << enum synth_scenario) each, run one after another */
	uint32_t iters;
	uint32_t stages;       /* highest stage written (1..4); 2 = timeline only */
	uint32_t first_stage;  /* lowest stage written (default 1) */
	uint32_t threads;      /* chains, each running the whole scenario list (default 1) */
	uint32_t tgid;         /* process id (default 4242) */
	/* µs; 0 = defaults L=10 K=500 C=1000 T=300 K2=400 C2=800 */
	uint32_t l_us, k_us, c_us, t_us, k2_us, c2_us;
	uint32_t use_us;       /* first-use delay of a sync used "at once" (default 2) */
	/* stage 3 writes this many fewer sync rows at the UNNECESSARY site (divergence tests) */
	uint32_t s3_missing;
	bool partial;	       /* flag the UNNECESSARY and MISPLACED sites' rows FFM_SYNC_USE_PARTIAL */
	/* stage 3 sees a use after the first this-many UNNECESSARY syncs (a watchpoint on the
	 * range's first word hit in some iterations only) */
	uint32_t seen_uses;
	uint32_t prot_bytes;   /* size of each protected range (default 4096) */
	/* MISPLACED: stages 3 and 4 see no use after every other sync (a loop reads element i,
	 * which the windows reach in half of the iterations) */
	bool misplaced_unseen;
	bool rows_per_range;   /* MISPLACED: two sync_uses rows per occurrence (2 ranges) */
	bool fast;	       /* big batches, no per-row extras: the benchmark's 10M events */
	/* the sync API is cuStreamSynchronize (the same stream for every thread), not
	 * cuCtxSynchronize; thread k starts k * stagger_us later (default 7 ns apart) */
	bool stream_sync;
	uint32_t stagger_us;
	/* the sync API's name instead (e.g. a set-up call that waited), NULL: as above */
	const char *sync_api;
	/* UNNECESSARY: the thread's CPU time between the launch and its sync, µs (default 0); the
	 * kernel ends when it did, so the sync waits that much less. synth__expected assumes 0. */
	uint32_t pre_us;
	/* UNNECESSARY: the sync is the implicit one of a cuMemcpyDtoHAsync into pageable memory,
	 * whose call goes on copy_us after its wait (the driver's staging); 0: cuCtxSynchronize.
	 * synth__expected assumes 0. */
	uint32_t copy_us;
	/* HOST_READ: the copy is made into pageable memory: it waits for the kernel itself and
	 * its sync finds the GPU done (a .cpu() of a CUDA tensor) */
	bool read_copy_waits;
	/* What the probes cost a thread per stage-2+ call, µs (events.probe_ns: cumulative per
	 * thread, before the call); 0 = not measured, as in stores of schema 7 */
	uint32_t probe_us;
	/* Stage 1's waits are this much longer than the timeline's (µs): the wait that the
	 * timeline's probes hid, as where the GPU is the bottleneck. synth__expected assumes 0.
	 * The baseline's CPU time between waits is the timeline's less base_cpu_less_us (at most
	 * base_extra_us; each wait record ends base_extra_us - base_cpu_less_us later than the
	 * last one did, relative to the timeline): how much the probes slowed the thread. */
	uint32_t base_extra_us, base_cpu_less_us;
	/* ... only every base_extra_every-th wait record of the run is longer (0: each one): a
	 * loop whose waits are two-humped, most short, a few long */
	uint32_t base_extra_every;
	/* DUP: the first-use run's (stage 4) copies take this long, µs (0 = T, the timeline's):
	 * the timeline's copies slowed by that run's interference, or the other way round.
	 * synth__expected assumes 0. */
	uint32_t t4_us;
	/* DUP: the stage-1 runs written time their copies too (a monitoring run of a key whose
	 * copies repeat, stages/ffm_plan.h), this long each, µs (0 = they record waits only). */
	uint32_t t1_us;
	/* after every thread's timeline, the first thread launches once more (at the longest
	 * thread's end; CONTROL's launch site), and the process ends C after that launch */
	bool late_launch;
	/* every run written ends with this exit status and these enum ffm_run_flags */
	int32_t exit_status;
	uint32_t run_flags;
};

/* Write the store (creates or extends the key's file). 0 or -errno. */
int synth__write(const struct synth_opts *o);
/* The benefit the model should give each scenario, in ns (per thread; threads add up); 0 for
 * a scenario not in o->scenarios. */
uint64_t synth__expected(const struct synth_opts *o, enum synth_scenario s);
/* Source line of each scenario's planted call site in the synthetic frames. */
uint32_t synth__line(enum synth_scenario s);

#endif
