/* SPDX-License-Identifier: MIT */
/*
 * The store's schema as a list of migrations: ffm_store_migrations[n] takes a file from schema
 * version n to n+1 (PRAGMA user_version). A new file runs them all from 0; an older file runs
 * the missing ones, all in one transaction. Never edit a step that has shipped: add one.
 *
 * Conventions: integers are SQLite INTEGER (64-bit signed; u64 values such as hashes and
 * addresses are stored as their two's complement bit pattern); 0 means "none" for ids, so
 * columns are NOT NULL with defaults and the hot events row has no NULL handling. References
 * are documented, not enforced (foreign_keys stays off: it would cost every event insert).
 *
 * Report queries and the indexes that serve them:
 *   events of a run in time order          events primary key (run, start_ns, id)
 *   per-stack totals of a run              stack_stats, primary key (run, stack, kind, api),
 *                                          maintained at ingest so no query scans events
 *   frames of a stack                      stack_frames primary key (stack, depth)
 *   stack id of a hash                     stacks.hash UNIQUE
 *   frame dedup by (build_id, offset, inl.) frames UNIQUE (build_id, offset, inlined)
 *   job by scheduler id / runs of a job    jobs.job_id UNIQUE, runs_job
 *   stage 3/4 rows of a run by stack/hash  xfer_hashes_run_*, sync_uses_run_stack
 */
#include "store/store_int.h"

/* Application id in the SQLite header: 'FFMS'. */

static const char step_v1[] =
	/* name/value facts about the file: created (unix s), tool_version, schema_version */
	"CREATE TABLE meta(name TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;"
	/* the one job key this file belongs to */
	"CREATE TABLE keys(id INTEGER PRIMARY KEY CHECK (id = 1), key TEXT NOT NULL,"
	"  uid INTEGER NOT NULL, exe TEXT, args_hash INTEGER NOT NULL DEFAULT 0);"
	/* scheduler jobs of the key; state: enum ffm_job_state */
	"CREATE TABLE jobs(id INTEGER PRIMARY KEY, job_id TEXT NOT NULL UNIQUE,"
	"  uid INTEGER NOT NULL, state INTEGER NOT NULL, start_unix INTEGER NOT NULL,"
	"  end_unix INTEGER NOT NULL DEFAULT 0, node TEXT);"
	/* libcuda builds seen, with the calibrated internal wait function */
	"CREATE TABLE drivers(id INTEGER PRIMARY KEY, build_id TEXT NOT NULL UNIQUE,"
	"  path TEXT NOT NULL, wait_off INTEGER NOT NULL, wait_size INTEGER NOT NULL);"
	/* executions; job -> jobs.id, driver -> drivers.id; flags: enum ffm_run_flags */
	"CREATE TABLE runs(id INTEGER PRIMARY KEY, job INTEGER NOT NULL,"
	"  stage INTEGER NOT NULL CHECK (stage BETWEEN 1 AND 5), driver INTEGER NOT NULL DEFAULT 0,"
	"  start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL DEFAULT 0,"
	"  start_unix INTEGER NOT NULL DEFAULT 0, wall_s REAL NOT NULL DEFAULT 0,"
	"  exit_status INTEGER NOT NULL DEFAULT 0, flags INTEGER NOT NULL DEFAULT 0);"
	"CREATE INDEX runs_job ON runs(job);"
	/* processes of a run (a tgid may be reused within a run: rowid, not (run, tgid)) */
	"CREATE TABLE processes(id INTEGER PRIMARY KEY, run INTEGER NOT NULL,"
	"  tgid INTEGER NOT NULL, ptgid INTEGER NOT NULL DEFAULT 0, exe TEXT,"
	"  start_ns INTEGER NOT NULL DEFAULT 0, end_ns INTEGER NOT NULL DEFAULT 0,"
	"  exit_code INTEGER NOT NULL DEFAULT 0);"
	"CREATE INDEX processes_run_tgid ON processes(run, tgid);"
	"CREATE TABLE threads(run INTEGER NOT NULL, tgid INTEGER NOT NULL, tid INTEGER NOT NULL,"
	"  PRIMARY KEY (run, tgid, tid)) WITHOUT ROWID;"
	/* api id -> driver function name */
	"CREATE TABLE api_names(id INTEGER PRIMARY KEY, name TEXT NOT NULL);"
	/* code locations; build_id is the module's hex build-id or 'path:<module>' */
	"CREATE TABLE frames(id INTEGER PRIMARY KEY, build_id TEXT NOT NULL,"
	"  offset INTEGER NOT NULL, module TEXT, func TEXT, demangled TEXT, folded TEXT,"
	"  file TEXT, line INTEGER NOT NULL DEFAULT 0, UNIQUE (build_id, offset));"
	/* run-independent stack identity: 64-bit hash -> id */
	"CREATE TABLE stacks(id INTEGER PRIMARY KEY, hash INTEGER NOT NULL UNIQUE,"
	"  nframes INTEGER NOT NULL);"
	"CREATE TABLE stack_frames(stack INTEGER NOT NULL, depth INTEGER NOT NULL,"
	"  frame INTEGER NOT NULL, PRIMARY KEY (stack, depth)) WITHOUT ROWID;"
	/* The timeline, clustered by (run, start_ns, id): a run's events in time order are one
	 * range scan, with no second index to maintain (ingest must sustain 1M events/s).
	 * Small fields are packed to keep the row short; events_v shows them unpacked:
	 *   info = kind (enum ffm_event_kind) | dir (enum ffm_dir) << 8 | api << 16
	 *   pid  = tgid << 32 | tid
	 * id is assigned by the store from seq('events'); stack -> stacks.id. */
	"CREATE TABLE events(run INTEGER NOT NULL, start_ns INTEGER NOT NULL, id INTEGER NOT NULL,"
	"  dur_ns INTEGER NOT NULL, wait_ns INTEGER NOT NULL, info INTEGER NOT NULL,"
	"  pid INTEGER NOT NULL, bytes INTEGER NOT NULL, stream INTEGER NOT NULL,"
	"  src INTEGER NOT NULL, dst INTEGER NOT NULL, stack INTEGER NOT NULL,"
	"  flags INTEGER NOT NULL, PRIMARY KEY (run, start_ns, id)) WITHOUT ROWID;"
	"CREATE VIEW events_v AS SELECT id, run, info & 255 AS kind, (info >> 8) & 255 AS dir,"
	"  info >> 16 AS api, pid >> 32 AS tgid, pid & 4294967295 AS tid, start_ns, dur_ns,"
	"  wait_ns, bytes, stream, src, dst, stack, flags FROM events;"
	/* next ids handed out by the store (events have no rowid) */
	"CREATE TABLE seq(name TEXT PRIMARY KEY, next INTEGER NOT NULL) WITHOUT ROWID;"
	"INSERT INTO seq VALUES('events', 1);"
	/* per (run, stack, kind, api) totals, kept in step with events by the ingest */
	"CREATE TABLE stack_stats(run INTEGER NOT NULL, stack INTEGER NOT NULL,"
	"  kind INTEGER NOT NULL, api INTEGER NOT NULL, count INTEGER NOT NULL,"
	"  dur_ns INTEGER NOT NULL, wait_ns INTEGER NOT NULL, bytes INTEGER NOT NULL,"
	"  PRIMARY KEY (run, stack, kind, api)) WITHOUT ROWID;"
	/* records lost; reason: enum ffm_drop_reason */
	"CREATE TABLE drops(run INTEGER NOT NULL, reason INTEGER NOT NULL,"
	"  count INTEGER NOT NULL, PRIMARY KEY (run, reason)) WITHOUT ROWID;"
	"PRAGMA application_id = 1179012435;";

/* v2: the stage 3 (transfer hashing) and stage 4 (sync-use) results. */
static const char step_v2[] =
	/* dup: enum ffm_dup_kind; first_* -> the first transfer with this content */
	"CREATE TABLE xfer_hashes(id INTEGER PRIMARY KEY, run INTEGER NOT NULL,"
	"  event INTEGER NOT NULL, stack INTEGER NOT NULL, hash INTEGER NOT NULL,"
	"  dst INTEGER NOT NULL, bytes INTEGER NOT NULL, first_event INTEGER NOT NULL DEFAULT 0,"
	"  first_stack INTEGER NOT NULL DEFAULT 0, dup INTEGER NOT NULL DEFAULT 0);"
	"CREATE INDEX xfer_hashes_run_hash ON xfer_hashes(run, hash);"
	"CREATE INDEX xfer_hashes_run_stack ON xfer_hashes(run, stack);"
	/* a sync, the range it protects and the first CPU use; use_delay_ns -1 = no use;
	 * flags: enum ffm_sync_use_flags */
	"CREATE TABLE sync_uses(id INTEGER PRIMARY KEY, run INTEGER NOT NULL,"
	"  event INTEGER NOT NULL, stack INTEGER NOT NULL, prot_lo INTEGER NOT NULL,"
	"  prot_hi INTEGER NOT NULL, use_addr INTEGER NOT NULL DEFAULT 0,"
	"  use_stack INTEGER NOT NULL DEFAULT 0, use_frame INTEGER NOT NULL DEFAULT 0,"
	"  use_delay_ns INTEGER NOT NULL DEFAULT -1, flags INTEGER NOT NULL DEFAULT 0);"
	"CREATE INDEX sync_uses_run_stack ON sync_uses(run, stack);";

/* v3: inlined functions are frames of their own, so (build_id, offset) is no longer one frame. */
static const char step_v3[] =
	"CREATE TABLE frames_v3(id INTEGER PRIMARY KEY, build_id TEXT NOT NULL,"
	"  offset INTEGER NOT NULL, module TEXT, func TEXT, demangled TEXT, folded TEXT,"
	"  file TEXT, line INTEGER NOT NULL DEFAULT 0, inlined INTEGER NOT NULL DEFAULT 0,"
	"  UNIQUE (build_id, offset, inlined));"
	"INSERT INTO frames_v3(id, build_id, offset, module, func, demangled, folded, file, line)"
	"  SELECT id, build_id, offset, module, func, demangled, folded, file, line FROM frames;"
	"DROP TABLE frames;"
	"ALTER TABLE frames_v3 RENAME TO frames;";

const char *const ffm_store_migrations[FFM_STORE_SCHEMA_VERSION] = {
	step_v1,
	step_v2,
	step_v3,
};
