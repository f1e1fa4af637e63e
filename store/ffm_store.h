/* SPDX-License-Identifier: MIT */
/*
 * ffm_store: the per-job-key SQLite store.
 *
 * One SQLite file per job key, <state>/keys/<escaped key>.db (see ffm_store__key_file_name()),
 * holding every scheduler job, run, process, stack and event recorded for that key. ffmd writes
 * it; ffmctl report and stages/ read it, concurrently (WAL: readers never block the writer).
 * The layout of the whole state directory (stores of every node, driver calibrations, ffmd's
 * journal) is defined here too, under "the state directory", and nowhere else.
 * This header has only plain C types; nothing here needs SQLite or BPF.
 *
 * Contract
 * - Library rules: functions return 0 (or a count) on success and -errno on failure, never
 *   print, never exit. One struct ffm_store is used by one thread at a time.
 * - Errors (also see ffm_store__strerror()):
 *     -ENOENT    the file does not exist and opts->create is false; or a queried row is absent
 *     -EBADMSG   the file is not a usable SQLite database: empty, shorter than its header says
 *                (truncated), bad magic (not SQLite at all), or SQLite reports CORRUPT/NOTADB
 *     -EPROTO    a valid SQLite database that is not an ffm store (foreign application_id or
 *                tables without our application_id)
 *     -ENOTSUP   an ffm store written by a newer ffm (schema above FFM_STORE_SCHEMA_VERSION)
 *     -EBUSY     SQLITE_BUSY/LOCKED after busy_timeout_ms
 *     -ENOMEM    SQLITE_NOMEM or allocation failure
 *     -EEXIST    SQLITE_CONSTRAINT (e.g. a duplicate scheduler job id in job__begin is *not* this:
 *                that one is an upsert); also a key file that holds a different key (hash clash)
 *     -EROFS     a write on a store opened read_only
 *     -ENOSPC, -EACCES, ... the OS errno behind SQLITE_IOERR/CANTOPEN/FULL/PERM when known,
 *     -EIO       everything else from SQLite
 *   A refused file (-EBADMSG, -EPROTO, -ENOTSUP) is never modified: it is inspected through a
 *   read-only connection that does not checkpoint.
 * - Durability: WAL with synchronous=NORMAL. Ingest calls (put_*) write into one open transaction
 *   that commits every opts.batch_events puts or when it is opts.batch_ms old (checked on each
 *   put) and on ffm_store__flush(), which the daemon calls on a timer and at shutdown. A SIGKILL
 *   of the writer loses at most the uncommitted batch and never corrupts the file; a power loss
 *   may also lose batches committed since the last WAL sync (checkpoint), never consistency.
 *   job__begin/end, run__begin/end, put_driver and put_api_name commit at once (after the
 *   open batch). A put that fails with an SQLite error discards the whole open batch (events,
 *   per-stack totals and event ids stay consistent); ids handed out in it are reused.
 * - Ingest rate: events are buffered 64 at a time and inserted with one multi-row statement;
 *   tests/store/bench_store.c measures it (>= 1M events/s on the 2-core development VM).
 * - Readers: a read_only store needs the -wal/-shm files to exist or its directory to be
 *   writable (SQLite's rule for WAL readers); while ffmd has the store open they exist. Only
 *   the writer's host may open a live store; readers elsewhere, and a job's owner, read its
 *   published copy (ffm_store__publish).
 * - Files are created 0640 and directories 0750 whatever the umask (root-owned daemon, admin
 *   group reads), a store root 0751; SQLite gives -wal/-shm the mode of the database file.
 * - Time: *_ns fields are in the clock of the BPF records (CLOCK_MONOTONIC/boot ns); *_unix
 *   fields are seconds since the epoch.
 */
#ifndef FFM_STORE_H
#define FFM_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FFM_STORE_SCHEMA_VERSION 13
#define FFM_STORE_MAX_STAGE 5

struct ffm_store;
struct ffm_store_cursor;

struct ffm_store_opts {
	size_t sz;		  /* sizeof(struct ffm_store_opts); 0 is taken as sizeof */
	bool create;		  /* create the file (and for open_key the directories) if missing */
	bool read_only;		  /* reader (ffmctl report): no writes, no migration */
	bool verify;		  /* run PRAGMA quick_check at open: O(file size), -EBADMSG if bad */
	uint32_t batch_events;	  /* commit after this many puts; 0 = 65536 */
	uint32_t batch_ms;	  /* ... or when the open batch is this old; 0 = 250 */
	uint32_t busy_timeout_ms; /* 0 = 5000 */
	const char *tool_version; /* stored in meta at creation; NULL = "unknown" */
	bool keep_wal;		  /* close without checkpointing: no exclusive lock at close, for a
				   * second writer while readers may look (ffmd's analyzer) */
	bool immutable;		  /* a published copy (ffm_store__publish): read_only, and opened
				   * with SQLite's immutable=1: no lock, no -wal/-shm/-journal */
};

/* Identity of a job key, stored in the key's file at creation. */
struct ffm_store_key {
	const char *key;    /* user-supplied name or hash; any bytes but NUL, not empty */
	uint32_t uid;
	const char *exe;    /* may be NULL */
	uint64_t args_hash; /* hash of the arguments (0 = unknown) */
};

enum ffm_job_state {
	FFM_JOB_RUNNING = 1,
	FFM_JOB_DONE = 2,
	FFM_JOB_FAILED = 3,
	FFM_JOB_CANCELLED = 4,
};

struct ffm_store_job {
	const char *job_id; /* scheduler job id ("12345", "12345_7", "99.pbs01") */
	uint32_t uid;
	int32_t state;	    /* enum ffm_job_state */
	int64_t start_unix, end_unix; /* end 0 = not ended */
	const char *node;   /* node name, may be NULL */
};

/* A job as listed by for_each_job: the job row plus a summary of its runs. */
struct ffm_store_job_info {
	int64_t id;	    /* row id */
	const char *job_id;
	const char *key;
	uint32_t uid;
	int32_t state;
	int64_t start_unix, end_unix;
	const char *node;
	uint32_t runs;	    /* number of runs */
	uint32_t stages_done; /* bit s set when a run of stage s ended (bit 1 = stage 1) */
};

enum ffm_run_flags {
	FFM_RUN_PARTIAL = 1u << 0,   /* coverage was partial (e.g. out of watchpoints) */
	FFM_RUN_DROPPED = 1u << 1,   /* records were dropped (see drops) */
	FFM_RUN_DIVERGENT = 1u << 2, /* behaviour differs too much from earlier runs of the key */
	FFM_RUN_ABORTED = 1u << 3,   /* the collector stopped before the job did, or (resumed
				      * after a restart) started after it */
	FFM_RUN_RETRACE = 1u << 4,   /* a stage-2 run for drift: stages 3-4 before it are history
				      * (ffm_store__stage_history no longer counts them) */
	FFM_RUN_COPIES = 1u << 5,    /* a stage-1 run that timed the copies too (a monitoring run
				      * of a key whose copies repeat, stages/ffm_plan.h) */
	FFM_RUN_NO_ANALYSIS = 1u << 6, /* the node left the run-end analysis to the readers
					* (ffmd.conf's analysis = reader): no stored results */
};

struct ffm_store_run {
	int64_t id;	    /* out: for_each_run; ignored by run__begin */
	const char *job_id; /* scheduler job id; in: must name a job of this key */
	int32_t stage;	    /* 1..FFM_STORE_MAX_STAGE */
	int64_t driver;	    /* driver row id from put_driver, 0 = unknown */
	uint64_t start_ns, end_ns; /* end 0 = still running */
	int64_t start_unix;
	double wall_s;
	int32_t exit_status;
	uint32_t flags;	    /* enum ffm_run_flags */
};

struct ffm_store_driver {
	const char *path;     /* libcuda path */
	const char *build_id; /* hex; the identity of the driver */
	uint64_t wait_off, wait_size; /* internal wait function: file offset and size */
	/* the node model of its GPU as JSON (ffm_node_model__to_json), NULL: none; a NULL never
	 * replaces one already stored for the build */
	const char *node_model;
};

struct ffm_store_process {
	int64_t run;
	uint32_t tgid, ptgid;
	const char *exe;
	uint64_t start_ns, end_ns;
	int32_t exit_code;
};

/*
 * One frame of a stack. (build_id, offset) is the frame's identity; a module without a
 * build-id is identified by "path:<module>" instead. Symbol fields may be NULL (not yet
 * symbolized); put_frame fills them in later without changing the frame's id.
 */
struct ffm_store_frame {
	int64_t id;	      /* out */
	const char *build_id; /* hex, or NULL to use the module path */
	const char *module;   /* module path */
	uint64_t offset;      /* file offset in the module */
	const char *func, *demangled, *folded, *file;
	uint32_t line;
	/* 0: the machine frame at offset; k >= 1: the function inlined k levels deep into it at
	 * that offset (a stack lists them innermost first, before their machine frame) */
	uint32_t inlined;
};

enum ffm_event_kind {
	FFM_EV_WAIT = 1,     /* internal wait function */
	FFM_EV_API = 2,	     /* synchronizing or other driver API call */
	FFM_EV_TRANSFER = 3, /* cuMemcpy* */
	FFM_EV_ALLOC = 4,
	FFM_EV_FREE = 5,
	FFM_EV_MEMSET = 6,
	FFM_EV_LAUNCH = 7,
};

enum ffm_dir {
	FFM_DIR_NONE = 0,
	FFM_DIR_HTOD = 1,
	FFM_DIR_DTOH = 2,
	FFM_DIR_DTOD = 3,
	FFM_DIR_HTOH = 4,
	FFM_DIR_PEER = 5,
};

struct ffm_store_event {
	int64_t id;	   /* out: row id (iteration, put_event's ret_id) */
	int64_t run;
	uint32_t kind;	   /* enum ffm_event_kind */
	uint32_t api;	   /* api id (see put_api_name), 0 = none */
	uint32_t tgid, tid;
	uint64_t start_ns, dur_ns;
	uint64_t wait_ns;  /* time spent in the wait function inside this call */
	uint64_t bytes;
	uint32_t dir;	   /* enum ffm_dir */
	uint32_t flags;
	uint64_t stream, src, dst;
	int64_t stack;	   /* stack id from put_stack, 0 = none */
	/* calls: what the probes had cost the thread before this call, cumulative within the
	 * run (bpf/ffm.h, ffm_rec_call.probe_ns); 0 = not measured */
	uint64_t probe_ns;
};

enum ffm_drop_reason {
	FFM_DROP_RINGBUF_FULL = 0,
	FFM_DROP_STACK_TOO_DEEP = 1,
	FFM_DROP_MAP_FULL = 2,
	FFM_DROP_OTHER = 3,
	/* (schema v9) what a run's bounds left out (daemon/recorder.h, struct ffm_run_limits): */
	FFM_DROP_STACK_CAP = 4,   /* new stacks not stored: the calls on them have no stack */
	FFM_DROP_STORE_CAP = 5,   /* records not stored: the job's or its user's store bytes */
	FFM_DROP_PROCS_QUOTA = 6, /* processes not tracked: their user's quota was full */
	FFM_DROP__MAX = 7,
};

struct ffm_store_drops {
	uint64_t count[FFM_DROP__MAX];
};

/* Per (run, stack, kind, api) totals, maintained at ingest. */
struct ffm_store_stack_agg {
	int64_t stack;
	uint32_t kind, api;
	uint64_t count, dur_ns, wait_ns, bytes;
};

/* Adaptive stage 1 (schema v5): a span of process @tgid's time traced by windows only (kind
 * FFM_SAMPLE_SPAN, @on_ns the windows' time in it), or one window (FFM_SAMPLE_WINDOW). */
enum ffm_sample_kind { FFM_SAMPLE_SPAN = 0, FFM_SAMPLE_WINDOW = 1 };

struct ffm_store_sample {
	uint32_t tgid, kind;
	uint64_t start_ns, end_ns, on_ns;
};

/* The waits of one stack that started in one sample row (ffm_store__for_each_sample_agg). */
struct ffm_store_sample_agg {
	uint32_t tgid, kind;
	uint64_t start_ns; /* the row's (tgid, kind, start_ns) */
	int64_t stack;
	uint64_t count, wait_ns;
};

enum ffm_dup_kind {
	FFM_DUP_NONE = 0,     /* first transfer of this content */
	FFM_DUP_SAME_DST = 1, /* same content to the same destination again */
	FFM_DUP_OTHER_DST = 2,/* same content, another destination */
};

struct ffm_store_xfer_hash {
	int64_t id; /* out */
	int64_t run, event, stack;
	uint64_t hash;	   /* content hash */
	uint64_t dst;	   /* destination identity (e.g. allocation base + offset) */
	uint64_t bytes;
	int64_t first_event, first_stack; /* first transfer seen with this content (0 = this one) */
	uint32_t dup;	   /* enum ffm_dup_kind */
};

enum ffm_sync_use_flags {
	FFM_SYNC_USE_PARTIAL = 1u << 0, /* not every protected range could be watched */
	FFM_SYNC_USE_NONE = 1u << 1,	/* no protected data touched before the next sync: unnecessary */
	/* the use was seen by a window set after the sync ended: a use, but use_delay_ns only
	 * bounds the first use's (earlier reads went unseen) */
	FFM_SYNC_USE_LATE = 1u << 2,
};

struct ffm_store_sync_use {
	int64_t id; /* out */
	int64_t run, event, stack;	  /* the synchronization */
	uint64_t prot_lo, prot_hi;	  /* protected range [lo, hi) */
	uint64_t use_addr;		  /* first CPU access (0 = none) */
	int64_t use_stack, use_frame;	  /* its stack and innermost frame (0 = unknown) */
	int64_t use_delay_ns;		  /* sync end -> first use, -1 = no use */
	uint32_t flags;			  /* enum ffm_sync_use_flags */
	/* Bytes of [prot_lo, prot_hi) watched during this sync's window (by watchpoints in place in
	 * the syncing thread when the sync ended), and watched at least once in the windows of the
	 * range's syncs so far, this one included; 0: none (rows of stores before schema 7 get the
	 * range's first 8 bytes, what they watched, unless partial). */
	uint64_t watched_bytes, covered_bytes;
};

/* Which stages have run for this key: input of the stage plan. */
struct ffm_store_stage_history {
	uint32_t runs[FFM_STORE_MAX_STAGE + 1];	    /* ended runs per stage (index = stage) */
	uint32_t partial[FFM_STORE_MAX_STAGE + 1];  /* ... of them with FFM_RUN_PARTIAL */
	/* ... of those with FFM_RUN_ABORTED too: cut short by a stop or restart of the collector,
	 * not a failure of the stage itself */
	uint32_t interrupted[FFM_STORE_MAX_STAGE + 1];
	int64_t last_run[FFM_STORE_MAX_STAGE + 1];  /* latest ended run id per stage, 0 = none */
	uint32_t open_runs;			    /* runs begun and not ended */
};

/* ---- ids ------------------------------------------------------------------------------------
 * What writers store to identify things across processes, runs and ffmd instances, so that the
 * runs of a key join (store/ids.c). Existing stores hold these values: they never change.
 */

/* Stable 31-bit id of an API base name (FNV-1a), never 0: events.api and put_api_name. */
uint32_t ffm_store_api_id(const char *base_name);

/*
 * The identity of a call path, for put_stack: a hash of its frames' identities (build_id, or
 * module when there is none, and offset), innermost first; never 0. The same path has the
 * same hash in every process and run, whatever the addresses.
 */
uint64_t ffm_store_stack_hash(const struct ffm_store_frame *frames, size_t n);

/* ---- the state directory ----------------------------------------------------------------
 * ffmd's state directory (ffmd --state-dir, ffmctl --state-dir or FFM_STATE_DIR) holds:
 *
 *   keys/<key file>.db               the live stores, one per job key and owner
 *                                    (ffm_store__owner_file_name), WAL mode, written by ffmd
 *   done/<uid>/<key file>.db         each one's published copy, made when a job of it ends
 *                                    (ffm_store__publish): rollback mode, never changed in
 *                                    place, readable by root, the admin group and uid alone
 *   nodes/<node>/keys/<key file>.db  the same per node, in a state directory shared by the
 *                                    nodes of a cluster (a shared file system): each node's
 *                                    ffmd writes only under nodes/<its name>/, so no two hosts
 *                                    ever write one SQLite file (WAL needs shared memory that a
 *                                    network file system does not give across hosts), and
 *                                    readers take a job's stores from every node
 *   drivers/<build-id>.json          the calibration of each driver build (symbols/ffm_calibrate.h)
 *   ffmd-jobs                        ffmd's journal of its active jobs
 *   ffmd-held                        the processes ffmd holds stopped, let go after a restart
 *
 * A store root is a directory whose keys/ holds stores: the state directory itself, or a node's
 * nodes/<node>. The per-node layout is in use once nodes/ exists (made by whoever sets up the
 * shared directory); without it, the single-node one.
 *
 * What a reader opens (ffm_state_for_each_store, ffm_state_open_job): in the state directory
 * itself, keys/ when it may read it (root, the admin group: the live stores, the same host);
 * else, and in every node's root (another host's live files are never opened), the published
 * copies: every done/<uid>/ when it may list done/, else its own done/<euid>/, each opened
 * immutable.
 */
enum ffm_state_part {
	FFM_STATE_ROOT,	   /* the store root where node @name keeps its stores: nodes/<name> when
			    * the state directory has nodes/ and @name is not empty (with '/' and a
			    * leading '.' replaced by '_', so it never leaves nodes/), else the
			    * state directory itself */
	FFM_STATE_KEYS,	   /* keys/ */
	FFM_STATE_KEY,	   /* keys/<file name of key @name> */
	FFM_STATE_NODES,   /* nodes/ */
	FFM_STATE_DRIVERS, /* drivers/ */
	FFM_STATE_JOURNAL, /* ffmd-jobs in node @name's store root (as FFM_STATE_ROOT): one ffmd
			    * per node, so a state directory shared by nodes has one each */
	FFM_STATE_HOLDS,   /* ffmd-held, as FFM_STATE_JOURNAL */
	FFM_STATE_DONE,	   /* done/ of the store root @dir: the published copies */
};

/*
 * The path of @what under @dir, into buf: @dir is the state directory, or for FFM_STATE_KEYS
 * and FFM_STATE_KEY any store root. Returns its length, -EINVAL (no @dir, or FFM_STATE_KEY
 * without a key), -ENAMETOOLONG if len is too small.
 */
int ffm_state_path(const char *dir, enum ffm_state_part what, const char *name, char *buf,
		   size_t len);

/* A store file found under a state directory. */
struct ffm_state_store {
	const char *path; /* the file */
	const char *node; /* the node whose keys/ it is in (nodes/<node>/keys/), NULL for keys/ */
	const char *key;  /* its key (read from the file), NULL when err < 0 */
	int err;	  /* 0, or why the file is not a usable store (as ffm_store__open) */
	bool published;	  /* a published copy: open it with opts.immutable */
};
typedef int (*ffm_state_store_cb)(const struct ffm_state_store *st, void *ctx);

/*
 * Call cb for every store file of the state directory: keys/ first, then each node's keys/ in
 * node name order. A store root without keys/ (a new state directory, a node being set up) is
 * skipped. A nonzero return from cb stops and is returned. Returns 0, or -errno when a
 * directory that is there cannot be read.
 */
int ffm_state_for_each_store(const char *state_dir, ffm_state_store_cb cb, void *ctx);

/*
 * Open the stores of scheduler job @job_id, one per store root that knows it (on a cluster: one
 * per node it ran on), in the order of ffm_state_for_each_store; in each root the store chosen
 * as ffm_store__find_job does. Each is opened with @opts (create ignored) and given to cb,
 * which owns it (ffm_store__free) and returns 0, or -errno to stop. Returns the number of
 * stores given to cb (0: no usable store knows the job), cb's -errno, or -errno when a
 * directory that is there cannot be read.
 */
typedef int (*ffm_state_job_cb)(struct ffm_store *s, const char *node, void *ctx);
int ffm_state_open_job(const char *state_dir, const char *job_id,
		       const struct ffm_store_opts *opts, ffm_state_job_cb cb, void *ctx);

/* ---- opening ---------------------------------------------------------------------------- */

/* Open (or with opts->create, create) the store file at path. opts may be NULL (defaults). */
int ffm_store__open(const char *path, const struct ffm_store_opts *opts, struct ffm_store **ret);

/*
 * Open the store of key->key and owner key->uid under the store root @root
 * (<root>/keys/<ffm_store__owner_file_name>; the state directory, or FFM_STATE_ROOT of a
 * node). On creation the key row is written from *key; on opening an existing file the stored
 * key must equal key->key, and for a writer of uid != 0 the stored uid key->uid (-EEXIST
 * otherwise). For read-only use, key->key and key->uid are needed.
 */
int ffm_store__open_key(const char *root, const struct ffm_store_key *key,
			const struct ffm_store_opts *opts, struct ffm_store **ret);

/*
 * Find the store holding scheduler job id job_id among <root>/keys/ *.db of one store root and
 * open it with opts (create is ignored). When several keys ran under one job id, the one whose
 * job row started last is opened. Files that are not usable stores are skipped. -ENOENT if
 * none. (ffm_state_open_job does this in every root of a state directory.)
 */
int ffm_store__find_job(const char *root, const char *job_id,
			const struct ffm_store_opts *opts, struct ffm_store **ret);

/*
 * Call cb for each key file under <root>/keys of one store root with the store (opened
 * read-only, closed after the call), its path and key (read from the file). Unusable files are
 * reported with s and key NULL and err < 0. A nonzero return from cb stops and is returned.
 * Returns 0, or -errno when the directory cannot be read. (ffm_state_for_each_store does this
 * in every root of a state directory.)
 */
typedef int (*ffm_store_key_cb)(struct ffm_store *s, const char *path, const char *key, int err,
				void *ctx);
int ffm_store__for_each_key(const char *root, ffm_store_key_cb cb, void *ctx);

/*
 * File name (no directory) of key's store: bytes outside [A-Za-z0-9_.-] and a leading '.' are
 * %XX-escaped, so the mapping is injective and never leaves the directory; names longer than
 * 200 bytes keep 160 and end in "~<16 hex of a 64-bit hash>". Returns the length, -EINVAL for
 * an empty key, -ENAMETOOLONG if len is too small (256 is always enough).
 */
int ffm_store__key_file_name(const char *key, char *buf, size_t len);
/*
 * File name of the store of @key's jobs of owner @uid: ffm_store__key_file_name's for uid 0,
 * else with "@<uid>" before ".db" ('@' is escaped in a key, so no two pairs share a name).
 * One store per owner: a user's store holds only that user's runs, so its published copy can
 * be theirs to read, and no user's runs feed another user's stage plan.
 */
int ffm_store__owner_file_name(const char *key, uint32_t uid, char *buf, size_t len);

/*
 * Publish the live store at @live (a store of the store root @root, this host's): a consistent
 * snapshot (VACUUM INTO) in rollback mode, 0640, put in place by rename as
 * <root>/done/<uid>/<its file name>, where uid is the key row's owner (0 when a job of another
 * uid is in it), with a POSIX ACL that lets that uid read it and list done/<uid>/. Opens its
 * own read-only connection, so any thread may call it while the store is written. *owner gets
 * the uid. Returns 0; -ENOTSUP when the copy is in place but the file system took no ACL (only
 * root and the group read it); -errno.
 */
int ffm_store__publish(const char *live, const char *root, uint32_t *owner);

/* Commit the open batch (if any) and close. NULL-safe; returns NULL. */
/* One more user of @s (the same connection): each ffm_store__free drops one, the last closes. */
struct ffm_store *ffm_store__ref(struct ffm_store *s);
struct ffm_store *ffm_store__free(struct ffm_store *s);

const char *ffm_store__path(const struct ffm_store *s);
/* Whether @s is a published copy opened immutable (another connection to it must be too). */
bool ffm_store__immutable(const struct ffm_store *s);
/* The key row. Strings belong to the store; valid until free. -ENOENT if the file has none. */
int ffm_store__key(struct ffm_store *s, struct ffm_store_key *out);
/* Integrity check (full = integrity_check, else quick_check): 0 ok, -EBADMSG if damaged. */
int ffm_store__check(struct ffm_store *s, bool full);
/* Schema version of the open file (== FFM_STORE_SCHEMA_VERSION after open). */
int ffm_store__schema_version(struct ffm_store *s);
/* A message for the store's own errno meanings (falls back to strerror). */
const char *ffm_store__strerror(int err);

/* ---- writing ---------------------------------------------------------------------------- */

/* Insert or update the job with job->job_id; returns its row id in *ret_id (may be NULL). */
int ffm_store__job_begin(struct ffm_store *s, const struct ffm_store_job *job, int64_t *ret_id);
int ffm_store__job_end(struct ffm_store *s, const char *job_id, int32_t state, int64_t end_unix);

/* Insert a driver, deduplicated by build_id. */
int ffm_store__put_driver(struct ffm_store *s, const struct ffm_store_driver *d, int64_t *ret_id);
/* The node model stored with run @run's driver (JSON text, malloc'ed into *json): 0, or
 * -ENOENT when the run has no driver or its driver no model. */
int ffm_store__run_node_model(struct ffm_store *s, int64_t run, char **json);

int ffm_store__run_begin(struct ffm_store *s, const struct ffm_store_run *r, int64_t *ret_run);
int ffm_store__run_end(struct ffm_store *s, int64_t run, uint64_t end_ns, double wall_s,
		       int32_t exit_status, uint32_t flags);

/* Name of an api id (insert or replace). */
int ffm_store__put_api_name(struct ffm_store *s, uint32_t api, const char *name);
/* The name of kernel handle @handle of process @tgid in @run (insert or replace). */
int ffm_store__put_kernel(struct ffm_store *s, int64_t run, uint32_t tgid, uint64_t handle,
			  const char *name);
typedef int (*ffm_store_kernel_cb)(uint32_t tgid, uint64_t handle, const char *name, void *ctx);
typedef int (*ffm_store_site_kernel_cb)(int64_t stack, const char *name, uint64_t launches,
					void *ctx);
/* Per call stack of @run's launches, the kernels they launched by name (most launched first);
 * nothing when the run has no kernel names. */
int ffm_store__for_each_site_kernel(struct ffm_store *s, int64_t run, ffm_store_site_kernel_cb cb,
				    void *ctx);
/* Each kernel name of @run; a nonzero return of @cb stops and is returned. */
int ffm_store__for_each_kernel(struct ffm_store *s, int64_t run, ffm_store_kernel_cb cb,
			       void *ctx);

/* Batched puts (see Durability). */
int ffm_store__put_process(struct ffm_store *s, const struct ffm_store_process *p);
int ffm_store__process_exit(struct ffm_store *s, int64_t run, uint32_t tgid, uint64_t end_ns,
			    int32_t exit_code);
int ffm_store__put_thread(struct ffm_store *s, int64_t run, uint32_t tgid, uint32_t tid);
/* Add to a thread's count of waits of FFM_STORE_WAIT_MODE_NS and more, and of those it slept
 * in (a voluntary context switch: its context waits in blocking-sync mode); -EINVAL when
 * slept > waits. */
#define FFM_STORE_WAIT_MODE_NS 20000
int ffm_store__add_thread_waits(struct ffm_store *s, int64_t run, uint32_t tgid, uint32_t tid,
				uint64_t waits, uint64_t slept);
typedef int (*ffm_store_thread_waits_cb)(uint32_t tgid, uint32_t tid, uint64_t waits,
					 uint64_t slept, void *ctx);
/* Each thread of @run with counted waits (none before v12); cb's nonzero stops and is returned. */
int ffm_store__for_each_thread_waits(struct ffm_store *s, int64_t run,
				     ffm_store_thread_waits_cb cb, void *ctx);
/* Stage 4 (v13): add to a call site's count of device operations (memset, copy) on managed
 * memory and of the host's page faults in managed memory that followed its operations (a fault
 * goes to the device operation, or the launch, that last preceded it in its process). */
int ffm_store__add_managed_faults(struct ffm_store *s, int64_t run, int64_t stack, uint64_t ops,
				  uint64_t faults);
typedef int (*ffm_store_managed_faults_cb)(int64_t stack, uint64_t ops, uint64_t faults,
					   void *ctx);
/* Each call site of @run with counted faults or managed operations (none before v13). */
int ffm_store__for_each_managed_faults(struct ffm_store *s, int64_t run,
				       ffm_store_managed_faults_cb cb, void *ctx);
/* Insert or complete a frame (symbol fields given here replace NULL ones). */
int ffm_store__put_frame(struct ffm_store *s, const struct ffm_store_frame *f, int64_t *ret_id);
/*
 * The id of the stack with this 64-bit hash, inserting it with frames[0..n) (innermost first)
 * when new. An existing stack keeps its frames. Returns 1 if inserted, 0 if it existed.
 */
int ffm_store__put_stack(struct ffm_store *s, uint64_t hash, const struct ffm_store_frame *frames,
			 size_t n, int64_t *ret_id);
/* The hot path: no allocation; ret_id may be NULL. */
int ffm_store__put_event(struct ffm_store *s, const struct ffm_store_event *ev, int64_t *ret_id);
/* Add count to the run's counter of reason. */
int ffm_store__add_drops(struct ffm_store *s, int64_t run, enum ffm_drop_reason reason,
			 uint64_t count);
int ffm_store__put_xfer_hash(struct ffm_store *s, const struct ffm_store_xfer_hash *h,
			     int64_t *ret_id);
int ffm_store__put_sync_use(struct ffm_store *s, const struct ffm_store_sync_use *u,
			    int64_t *ret_id);

/*
 * The results of an analysis of one job (what its report shows), stored so that SQL sees them
 * (docs/STORE.md: analyses, analysis_sites, analysis_problems, analysis_benefits). Written by
 * the store's writer only (ffmd at a job's end, ffmctl profile), never by a reader.
 */
struct ffm_store_analysis {
	const char *job_id;
	int64_t at_unix;
	const char *tool_version;
	const char *grouping;	     /* "point" (per call site), "function" or "sequence" */
	int64_t run_baseline, run_timeline, run_verdicts, run_first_use; /* 0 = none */
	bool have_problems;	     /* stage 3 verdicts exist: recoverable_ns is known */
	uint64_t wall_ns, wait_ns, recoverable_ns;
	double recoverable_share;    /* recoverable_ns / wall_ns, 0..1 */
	uint64_t events, records_lost;
	uint32_t incomplete_runs, divergent_sites;
};

/* Counts of each problem type (enum ffm_problem order, none excluded). */
struct ffm_store_problem_counts {
	uint64_t unnecessary, misplaced, duplicate, host_read, launch_blocked;
};

struct ffm_store_site_result {
	int64_t stack;
	uint32_t api, kind;
	const char *function, *file, *driver_function; /* never NULL */
	uint32_t line;
	uint64_t count, dur_ns, wait_ns, bytes;
	uint32_t problem; /* the site's most frequent problem type (enum ffm_problem), 0 = none */
	struct ffm_store_problem_counts n;
	uint64_t n_classified, benefit_ns;
	int64_t use_delay_ns; /* -1 = none */
	bool divergent;
};

struct ffm_store_problem_result {
	uint32_t problem;   /* the group's most frequent type */
	int64_t stack;	    /* its (first) call site */
	uint64_t count;
	struct ffm_store_problem_counts n;
	uint64_t wait_ns, benefit_ns;
	bool partial, divergent;
};

struct ffm_store_benefit_result {
	uint32_t api;
	const char *function;
	uint64_t calls, dur_ns, wait_ns, problems, benefit_ns;
};

struct ffm_store_results {
	struct ffm_store_analysis a;
	const struct ffm_store_site_result *sites;
	size_t n_sites;
	const struct ffm_store_problem_result *problems; /* rank order, largest benefit first */
	size_t n_problems;
	const struct ffm_store_benefit_result *benefits;
	size_t n_benefits;
};

/*
 * Store @r in one transaction (after the open batch), replacing the previous results of the
 * same job: *ret_id (may be NULL) gets the analyses row id. -EINVAL without a job id.
 */
int ffm_store__put_results(struct ffm_store *s, const struct ffm_store_results *r, int64_t *ret_id);

/* Commit the open batch now. 0 if nothing was pending. */
int ffm_store__flush(struct ffm_store *s);

/* ---- reading -------------------------------------------------------------------------------
 * Callbacks get structs whose strings are valid only during the call. A nonzero return from a
 * callback stops the iteration and is returned. Readers see committed batches only.
 */
typedef int (*ffm_store_job_cb)(const struct ffm_store_job_info *j, void *ctx);
typedef int (*ffm_store_run_cb)(const struct ffm_store_run *r, void *ctx);
typedef int (*ffm_store_event_cb)(const struct ffm_store_event *ev, void *ctx);
typedef int (*ffm_store_agg_cb)(const struct ffm_store_stack_agg *a, void *ctx);
typedef int (*ffm_store_frame_cb)(const struct ffm_store_frame *f, uint32_t depth, void *ctx);
typedef int (*ffm_store_api_cb)(uint32_t api, const char *name, void *ctx);
typedef int (*ffm_store_xfer_cb)(const struct ffm_store_xfer_hash *h, void *ctx);
typedef int (*ffm_store_sync_use_cb)(const struct ffm_store_sync_use *u, void *ctx);
typedef int (*ffm_store_process_cb)(const struct ffm_store_process *p, void *ctx);

/* Jobs in start order. */
int ffm_store__for_each_job(struct ffm_store *s, ffm_store_job_cb cb, void *ctx);
/* Runs of the key in id order (stage included). */
int ffm_store__for_each_run(struct ffm_store *s, ffm_store_run_cb cb, void *ctx);
int ffm_store__get_run(struct ffm_store *s, int64_t run, struct ffm_store_run *out);
/* The time (ns, the runs' clock) of the last thing @run recorded: its last event's end or
 * process start or exit; 0 when it recorded nothing. */
int ffm_store__run_last_ns(struct ffm_store *s, int64_t run, uint64_t *out);
/* The lifetime of @run's processes (ns, the runs' clock): from the first one's start to the
 * last one's exit, a process that did not exit ending at @end_ns (an image that exec replaced:
 * where the next began); 0 and 0 without processes.
 * A run's wall time (ffm_store_run.wall_s) is this span where the run has processes. */
int ffm_store__run_procs_span(struct ffm_store *s, int64_t run, uint64_t end_ns, uint64_t *lo,
			      uint64_t *hi);
/* Events of a run in (start_ns, id) order, streamed: memory does not grow with the run. */
int ffm_store__for_each_event(struct ffm_store *s, int64_t run, ffm_store_event_cb cb, void *ctx);
/* The same, every column, for the events of the kinds in @kinds only (bit 1 << enum
 * ffm_event_kind): the allocations, frees and memsets whose addresses the analysis pairs
 * (analysis/reuse.c). -EINVAL for no kind. */
int ffm_store__for_each_event_of(struct ffm_store *s, int64_t run, uint32_t kinds,
				 ffm_store_event_cb cb, void *ctx);
/* The share, in parts per million, of @run's wait time at call sites where no earlier run of
 * the key waited (drift of a monitoring run, stages/ffm_plan.h). */
int ffm_store__new_wait_share(struct ffm_store *s, int64_t run, int64_t *ppm);
/* Whether stage-3 run @run saw a transfer repeat itself (FFM_DUP_SAME_DST): *any 1 or 0. */
int ffm_store__dup_transfers(struct ffm_store *s, int64_t run, int64_t *any);
/* CPU samples of one Python stack in one state (table cpu_samples): added to the run's row. */
struct ffm_store_cpu_samples {
	int64_t stack;
	uint32_t state; /* 0 user, 1 inside a probed driver call, 2 in its wait */
	uint64_t n, ns;
};
int ffm_store__add_cpu_samples(struct ffm_store *s, int64_t run,
			       const struct ffm_store_cpu_samples *x);
typedef int (*ffm_store_cpu_samples_cb)(const struct ffm_store_cpu_samples *x, void *ctx);
/* @run's rows in (stack, state) order: 0, the callback's nonzero value, or -errno. */
int ffm_store__for_each_cpu_samples(struct ffm_store *s, int64_t run, ffm_store_cpu_samples_cb cb,
				    void *ctx);

/*
 * What ffm's work on a run's processes cost them (issue 40, "the fixed price per process" of
 * docs/OVERHEAD.md): per part, the time and how many times (table run_overhead, schema v11).
 * The parts before FFM_OVERHEAD_FFMD are paid by the processes themselves: stopped, or in their
 * own context (BPF, traced waits: ns = count x the node's wait_cost_us); the others are ffmd's
 * own time, which a process pays only where it waits for it (a hold) or shares a CPU with it.
 */
enum ffm_overhead_part {
	FFM_OVERHEAD_HELD,        /* stopped by ffm until its probes were in (map guard, fork, exec) */
	FFM_OVERHEAD_BPF,         /* ffm's BPF programs at its exec, mmap, fork and exit */
	FFM_OVERHEAD_WAITS_FULL,  /* waits traced in full (adaptive stage 1's learning, or no budget) */
	FFM_OVERHEAD_WAITS_SAMPLED, /* waits traced in a sampling window */
	FFM_OVERHEAD_FFMD,        /* (first of ffmd's parts) */
	FFM_OVERHEAD_ATTACH = FFM_OVERHEAD_FFMD, /* its probes attached, windows' included */
	FFM_OVERHEAD_DETACH,      /* its probes detached (the detacher thread) */
	FFM_OVERHEAD_PROCFS,      /* /proc and ELF reads: which libcuda it loads, its maps */
	FFM_OVERHEAD_PYCHECK,     /* the Python version and layout checks (/proc/PID/mem) */
	FFM_OVERHEAD_SYMBOLS,     /* CFI unwinds and symbolization of its new stacks */
	FFM_OVERHEAD_DRIVER,      /* its driver made ready: the calibration cache lookup */
	FFM_OVERHEAD_N
};
struct ffm_overhead {
	uint64_t ns[FFM_OVERHEAD_N], n[FFM_OVERHEAD_N];
};
/* Add @ns, once, to @part of @p (NULL: not accounted). */
static inline void ffm_overhead_add(struct ffm_overhead *p, int part, uint64_t ns)
{
	if (p && part >= 0 && part < FFM_OVERHEAD_N) {
		p->ns[part] += ns;
		p->n[part]++;
	}
}
/* The part's stored name ("held", "bpf", ...; overhead_parts), NULL out of range. */
const char *ffm_overhead_part_name(int part);
/* @run's price: replaced. */
int ffm_store__put_overhead(struct ffm_store *s, int64_t run, const struct ffm_overhead *p);
/* @run's price, zero when none was stored (a run before v11, ffmctl profile's). */
int ffm_store__get_overhead(struct ffm_store *s, int64_t run, struct ffm_overhead *out);

/* Adaptive stage 1: a span or window of @run (struct ffm_store_sample). */
int ffm_store__put_sample(struct ffm_store *s, int64_t run, const struct ffm_store_sample *x);
/* @run's sample rows, in (tgid, kind, start) order; then the per-row wait totals by stack.
 * Both 0, or the callback's nonzero value, or -errno. */
typedef int (*ffm_store_sample_cb)(const struct ffm_store_sample *x, void *ctx);
typedef int (*ffm_store_sample_agg_cb)(const struct ffm_store_sample_agg *g, void *ctx);
int ffm_store__for_each_sample(struct ffm_store *s, int64_t run, ffm_store_sample_cb cb, void *ctx);
int ffm_store__for_each_sample_agg(struct ffm_store *s, int64_t run, ffm_store_sample_agg_cb cb,
				   void *ctx);
/* Per-stack totals of a run, largest total wait first. A stage-1 run's are its waits only: the
 * copies a monitoring run times besides (stages/ffm_plan.h) hold the same waits again, and are
 * read event by event by the analysis that prices them (analysis/dupcost.c). */
int ffm_store__for_each_stack_agg(struct ffm_store *s, int64_t run, ffm_store_agg_cb cb,
				  void *ctx);
/* Frames of a stack, innermost (depth 0) first. Returns the number of frames, -ENOENT. */
int ffm_store__for_each_frame(struct ffm_store *s, int64_t stack, ffm_store_frame_cb cb, void *ctx);
int ffm_store__for_each_api_name(struct ffm_store *s, ffm_store_api_cb cb, void *ctx);
int ffm_store__get_drops(struct ffm_store *s, int64_t run, struct ffm_store_drops *out);
int ffm_store__stage_history(struct ffm_store *s, struct ffm_store_stage_history *out);
int ffm_store__for_each_xfer_hash(struct ffm_store *s, int64_t run, ffm_store_xfer_cb cb,
				  void *ctx);
int ffm_store__for_each_sync_use(struct ffm_store *s, int64_t run, ffm_store_sync_use_cb cb,
				 void *ctx);
/*
 * The same rows grouped by stack, in id (= occurrence) order within each stack: the order the
 * analysis joins them to the timeline by. Served by the (run, stack) indexes without a sort;
 * the id-ordered forms above sort every row of the run (a temporary B-tree).
 */
int ffm_store__for_each_xfer_hash_by_stack(struct ffm_store *s, int64_t run, ffm_store_xfer_cb cb,
					   void *ctx);
int ffm_store__for_each_sync_use_by_stack(struct ffm_store *s, int64_t run,
					  ffm_store_sync_use_cb cb, void *ctx);
/* Processes of a run in start order (end_ns 0: no exit seen). */
int ffm_store__for_each_process(struct ffm_store *s, int64_t run, ffm_store_process_cb cb,
				void *ctx);
/* One frame by id (e.g. a sync use's use_frame), depth 0. -ENOENT if absent. */
int ffm_store__get_frame(struct ffm_store *s, int64_t frame, ffm_store_frame_cb cb, void *ctx);
/* The API names of @run's waits (the public functions stage 1 saw waiting), in id order. */
int ffm_store__for_each_wait_api(struct ffm_store *s, int64_t run, ffm_store_api_cb cb, void *ctx);
/*
 * The stacks of @run's DtoH transfers and allocations whose destination one of the run's
 * sync_uses rows saw used (stage 4 watches only those): *stacks malloc'd, *n may be 0.
 */
int ffm_store__used_dst_stacks(struct ffm_store *s, int64_t run, int64_t **stacks, size_t *n);
/*
 * Whether the call counts per (stack, kind) of the event kinds in @kinds (bit 1 << kind) of
 * runs @run and @ref differ somewhere by at least @min and by more than @share of the larger:
 * 1, 0, or -errno. Reads the committed per-stack totals (flush a run being written first).
 */
int ffm_store__counts_differ(struct ffm_store *s, int64_t run, int64_t ref, uint32_t kinds,
			     uint64_t min, double share);

/*
 * Event cursor, for consumers that pull (e.g. merging several runs). It holds a read snapshot
 * until freed; one cursor per store at a time besides callbacks is fine. from/to_ns bound
 * start_ns (to_ns 0 = no bound).
 */
int ffm_store_cursor__new(struct ffm_store *s, int64_t run, uint64_t from_ns, uint64_t to_ns,
			  struct ffm_store_cursor **ret);
/*
 * The same, with the timing fields only (id, start/dur/wait, kind, dir, api, tgid, tid, stack,
 * stream; bytes, src, dst and flags are 0): what the analysis reads for every event of a run,
 * at a fraction of the per-row cost.
 */
int ffm_store_cursor__new_timing(struct ffm_store *s, int64_t run, uint64_t from_ns,
				 uint64_t to_ns, struct ffm_store_cursor **ret);
/* 1 and *ev filled, 0 at the end, -errno. */
int ffm_store_cursor__next(struct ffm_store_cursor *c, struct ffm_store_event *ev);
struct ffm_store_cursor *ffm_store_cursor__free(struct ffm_store_cursor *c);

#endif /* FFM_STORE_H */
