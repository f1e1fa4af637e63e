/* SPDX-License-Identifier: MIT */
/*
 * One run of a job: the key's store, the stage the plan chose, the recorder. Shared by ffmd
 * (a run per scheduler job start) and `ffmctl profile` (a run per stage).
 */
#ifndef FFM_JOBRUN_H
#define FFM_JOBRUN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "daemon/recorder.h"
#include "stages/ffm_plan.h"

struct ffm_collector;
struct ffm_symbolizer;
struct ffm_unwinder;
struct ffm_unwinder;
struct ffm_apis;
struct ffm_store;
struct ffm_overhead;

struct ffm_jobrun_opts {
	size_t sz;
	const char *state_dir;
	const char *key;       /* job key (see ffm_job_key) */
	const char *job_id;    /* scheduler job id */
	uint32_t uid;
	const char *exe;       /* may be NULL */
	uint64_t args_hash;
	const char *node;      /* NULL = this host's name */
	int override_stage;    /* 0 = the plan decides */
	uint32_t slot;         /* collector job slot */
	struct ffm_collector *collector;
	struct ffm_symbolizer *sym;
	struct ffm_unwinder *unwinder; /* NULL: stacks unwound in the caller (daemon/recorder.h) */
	struct ffm_apis *apis;
	const char *driver_path, *driver_build_id;
	uint64_t wait_off, wait_size;
	const char *driver_node_model; /* its GPU's node model, JSON (store/ffm_store.h), NULL */
	const char *proc_root;
	/* The key's store, when another run of the key is open in this process (NULL: open
	 * it): shared, referenced until ffm_jobrun__free. */
	struct ffm_store *store;
	/* What the run may take (daemon/recorder.h); NULL: FFM_RUN_LIMITS_DEFAULT. Copied. */
	const struct ffm_run_limits *limits;
};

struct ffm_jobrun;

int ffm_jobrun__begin(const struct ffm_jobrun_opts *opts, struct ffm_jobrun **ret);
const struct ffm_plan *ffm_jobrun__plan(const struct ffm_jobrun *jr);
int64_t ffm_jobrun__run_id(const struct ffm_jobrun *jr);
struct ffm_store *ffm_jobrun__store(struct ffm_jobrun *jr);
/* The store root of this node the run's store is in (FFM_STATE_ROOT; ffm_store__publish). */
const char *ffm_jobrun__root(const struct ffm_jobrun *jr);
/* The public functions stage 1 of this key saw waiting (valid until free). */
const char *const *ffm_jobrun__sync_names(const struct ffm_jobrun *jr, size_t *n);
/* One record; now and then the store's growth is measured against the run's and its user's
 * bytes (ffm_run_limits.store_bytes, user_store_bytes): past either, the run stops storing. */
int ffm_jobrun__record(struct ffm_jobrun *jr, const void *rec, size_t size);
struct ffm_recorder *ffm_jobrun__recorder(struct ffm_jobrun *jr);
/* Stages 3-4: first-use and transfer-hash state (NULL in other stages). */
struct ffm_memtrace *ffm_jobrun__memtrace(struct ffm_jobrun *jr);
/* The collector job flags (bpf/ffm.h, enum ffm_job_flags) this run's stage needs. */
uint32_t ffm_jobrun__job_flags(const struct ffm_jobrun *jr);
/*
 * The run's collector slot (opts->collector, opts->slot) records for it: its drop counters
 * cleared, the plan's stage and job flags set. The sequence of a run: begin, arm, the records
 * (ffm_jobrun__record), disarm once its processes are done, end, free.
 */
int ffm_jobrun__arm(struct ffm_jobrun *jr);
/* The slot records nothing more (its drops stay until end has counted them). */
int ffm_jobrun__disarm(struct ffm_jobrun *jr);
/* @nprocs processes of the job were not measured (their driver could not be used): the run
 * is partial and its drops count them. */
void ffm_jobrun__set_unmeasured(struct ffm_jobrun *jr, uint32_t nprocs);
/* Part of the job ran unseen through no fault of the stage (the run resumed after an ffmd
 * restart, or a process ran on while its new driver was made ready): partial and aborted, so
 * the stage plan neither takes it as the stage done nor as a failure of the stage. */
void ffm_jobrun__set_interrupted(struct ffm_jobrun *jr);
/* What the run's processes paid, per part (store/ffm_store.h, struct ffm_overhead): the recorder
 * adds its own parts, the run's owner the others; stored at end (table run_overhead). */
struct ffm_overhead *ffm_jobrun__overhead(struct ffm_jobrun *jr);
/* A run's price as JSON (ffmctl status, ffmctl report; docs/schema): per part its time (ms)
 * and count, what the processes paid (process_ms: the parts before FFM_OVERHEAD_FFMD) and ffmd
 * spent (ffmd_ms), and process_ms in percent of @run_s (0: not known). */
json_t *ffm_overhead_json(const struct ffm_overhead *p, double run_s);
/* Run flags (enum ffm_run_flags) the run's owner adds, stored at end (FFM_RUN_NO_ANALYSIS). */
void ffm_jobrun__set_flags(struct ffm_jobrun *jr, uint32_t flags);
/* End the run: drops from the collector, flags, wall time; ends the job too if @end_job. Waits
 * for the run's stacks still on the unwinder (their opens of the user's files). */
int ffm_jobrun__end(struct ffm_jobrun *jr, double wall_s, int exit_status, bool aborted,
		    bool end_job);
#define FFM_JOBRUN_MAX_ENDING 64 /* runs ending at once (ffmd's unwinder queue: 2 x jobs) */
/* The end of an ffm_jobrun__end_async: @err 0 or the store's failure; @jr is freed after. */
typedef void (*ffm_jobrun_ended_fn)(struct ffm_jobrun *jr, int err, void *ctx);
/*
 * End the run as ffm_jobrun__end does, without waiting (ffmd's loop): what the collector
 * counted for the run's slot is taken now (the slot may serve another run once this returns);
 * the run is closed once the recorder has stored its last records, each still in order (its
 * stacks on the unwinder, the records held behind them): then @done runs, on the loop, and @jr
 * is freed. The caller gives @jr up: it may be gone when this returns. 0: done already (@done
 * has run), 1: later (from ffm_unwinder__take), -EALREADY: the run had ended. With
 * FFM_JOBRUN_MAX_ENDING runs ending already, it waits for the last stacks as __end does.
 */
int ffm_jobrun__end_async(struct ffm_jobrun *jr, double wall_s, int exit_status, bool aborted,
			  bool end_job, ffm_jobrun_ended_fn done, void *ctx);
/* The runs still ending (ffm_jobrun__end_async) ended now, waiting for their last stacks
 * (each open of the unwinder has its deadline): as ffmd stops. */
void ffm_jobrun__finish_ending(void);
/* Whether the run of job @job_id is still ending. */
bool ffm_jobrun__ending(const char *job_id);
/* The store of an open run of @key in this process (running or ending), NULL: none. */
struct ffm_store *ffm_jobrun__store_of_key(const char *key);
const char *ffm_jobrun__job_id(const struct ffm_jobrun *jr);
const char *ffm_jobrun__key(const struct ffm_jobrun *jr);
uint32_t ffm_jobrun__uid(const struct ffm_jobrun *jr);
struct ffm_jobrun *ffm_jobrun__free(struct ffm_jobrun *jr);

/* The default job key: a hash of uid, executable and arguments, as hex (buf >= 17 bytes). */
void ffm_job_key(uint32_t uid, const char *exe, char *const *argv, char *buf, size_t len);
uint64_t ffm_args_hash(char *const *argv);
/*
 * The job key of a process a rule matched, from what BPF read at its exec (uid, comm, the hash
 * of its argument block: struct ffm_rec_proc), so that the key does not depend on whether the
 * process has exec'd again (`env ... ./app`) by the time ffmd looks.
 */
void ffm_job_key_exec(uint32_t uid, const char *comm, uint64_t args_hash, char *buf, size_t len);
/* The same hash as BPF's of an argument block read from /proc/PID/cmdline. */
uint64_t ffm_args_block_hash(const void *block, size_t len);

#endif
