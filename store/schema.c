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
 *   a run's sampled spans and windows      sample_spans primary key (run, ...)
 *   a run's CPU samples by stack            cpu_samples primary key (run, stack, state)
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

/*
 * v4: the store as an interface for users' SQL (docs/STORE.md documents every table, view and
 * column): names for the integers and bit-packed columns, views that show them, indexes for the
 * queries by driver function and by call site, and the latest analysis's results.
 */
static const char step_v4[] =
	/* names of enum values (store/ffm_store.h, stages/ffm_model.h); tests/store/test_store
	 * pins them to the C enums */
	"CREATE TABLE event_kinds(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);"
	"INSERT INTO event_kinds VALUES(1,'wait'),(2,'api'),(3,'transfer'),(4,'alloc'),"
	"  (5,'free'),(6,'memset'),(7,'launch');"
	"CREATE TABLE directions(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);"
	"INSERT INTO directions VALUES(0,'none'),(1,'HtoD'),(2,'DtoH'),(3,'DtoD'),(4,'HtoH'),"
	"  (5,'peer');"
	"CREATE TABLE job_states(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);"
	"INSERT INTO job_states VALUES(1,'running'),(2,'done'),(3,'failed'),(4,'cancelled');"
	"CREATE TABLE run_flags(bit INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);"
	"INSERT INTO run_flags VALUES(1,'partial'),(2,'dropped'),(4,'divergent'),(8,'aborted');"
	"CREATE TABLE drop_reasons(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);"
	"INSERT INTO drop_reasons VALUES(0,'ringbuf_full'),(1,'stack_too_deep'),(2,'map_full'),"
	"  (3,'other');"
	"CREATE TABLE dup_kinds(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);"
	"INSERT INTO dup_kinds VALUES(0,'none'),(1,'same_dst'),(2,'other_dst');"
	"CREATE TABLE sync_use_flags(bit INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);"
	"INSERT INTO sync_use_flags VALUES(1,'partial'),(2,'no_use');"
	"CREATE TABLE problem_types(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);"
	"INSERT INTO problem_types VALUES(0,'none'),(1,'unnecessary_sync'),(2,'misplaced_sync'),"
	"  (3,'duplicate_transfer'),(4,'host_read_every_iteration'),(5,'launch_blocked');"

	/* events with names: the driver function, the kind, the direction */
	"CREATE VIEW calls AS SELECT e.id, e.run, e.kind AS kind_id, k.name AS kind,"
	"  coalesce(a.name, '') AS function, e.api, d.name AS direction, e.tgid, e.tid,"
	"  e.start_ns, e.dur_ns, e.wait_ns, e.bytes, e.stream, e.src, e.dst, e.stack, e.flags"
	"  FROM events_v e LEFT JOIN event_kinds k ON k.id = e.kind"
	"  LEFT JOIN directions d ON d.id = e.dir LEFT JOIN api_names a ON a.id = e.api;"
	"CREATE VIEW jobs_v AS SELECT j.*, s.name AS state_name FROM jobs j"
	"  LEFT JOIN job_states s ON s.id = j.state;"
	"CREATE VIEW runs_v AS SELECT r.*, j.job_id, (r.flags & 1) != 0 AS partial,"
	"  (r.flags & 2) != 0 AS dropped, (r.flags & 4) != 0 AS divergent,"
	"  (r.flags & 8) != 0 AS aborted, r.end_ns != 0 AS ended"
	"  FROM runs r LEFT JOIN jobs j ON j.id = r.job;"
	"CREATE VIEW drops_v AS SELECT d.run, d.reason, n.name AS reason_name, d.count FROM drops d"
	"  LEFT JOIN drop_reasons n ON n.id = d.reason;"
	"CREATE VIEW stack_stats_v AS SELECT s.*, k.name AS kind_name,"
	"  coalesce(a.name, '') AS function FROM stack_stats s"
	"  LEFT JOIN event_kinds k ON k.id = s.kind LEFT JOIN api_names a ON a.id = s.api;"
	"CREATE VIEW xfer_hashes_v AS SELECT x.*, k.name AS dup_name FROM xfer_hashes x"
	"  LEFT JOIN dup_kinds k ON k.id = x.dup;"
	"CREATE VIEW sync_uses_v AS SELECT u.*, (u.flags & 1) != 0 AS partial,"
	"  (u.flags & 2) != 0 AS no_use FROM sync_uses u;"
	/* frames of every stack, innermost (depth 0) first */
	"CREATE VIEW stack_frames_v AS SELECT sf.stack, sf.depth, f.* FROM stack_frames sf"
	"  JOIN frames f ON f.id = sf.frame;"
	/* by driver function and by call site across runs (a run's own: the primary key) */
	"CREATE INDEX stack_stats_api ON stack_stats(api, run);"
	"CREATE INDEX stack_stats_stack ON stack_stats(stack, run);"

	/*
	 * The latest analysis of each job (analysis/save.c writes it, ffmd at a job's end and ffmctl
	 * profile; a new analysis of a job replaces its previous one): what `ffmctl report` shows,
	 * as rows. Times in ns; the analysis's run choice in run_*.
	 */
	"CREATE TABLE analyses(id INTEGER PRIMARY KEY AUTOINCREMENT, job_id TEXT NOT NULL,"
	"  at_unix INTEGER NOT NULL, tool_version TEXT NOT NULL, grouping TEXT NOT NULL,"
	"  run_baseline INTEGER NOT NULL DEFAULT 0, run_timeline INTEGER NOT NULL DEFAULT 0,"
	"  run_verdicts INTEGER NOT NULL DEFAULT 0, run_first_use INTEGER NOT NULL DEFAULT 0,"
	"  have_problems INTEGER NOT NULL, wall_ns INTEGER NOT NULL, wait_ns INTEGER NOT NULL,"
	"  recoverable_ns INTEGER NOT NULL, recoverable_share REAL NOT NULL,"
	"  events INTEGER NOT NULL, records_lost INTEGER NOT NULL,"
	"  incomplete_runs INTEGER NOT NULL, divergent_sites INTEGER NOT NULL);"
	"CREATE INDEX analyses_job ON analyses(job_id);"
	/* per call site of the profile run: its totals and the verdicts applied to it */
	"CREATE TABLE analysis_sites(analysis INTEGER NOT NULL, stack INTEGER NOT NULL,"
	"  api INTEGER NOT NULL, kind INTEGER NOT NULL, function TEXT NOT NULL, file TEXT NOT NULL,"
	"  line INTEGER NOT NULL, driver_function TEXT NOT NULL, count INTEGER NOT NULL,"
	"  dur_ns INTEGER NOT NULL, wait_ns INTEGER NOT NULL, bytes INTEGER NOT NULL,"
	"  problem INTEGER NOT NULL, n_unnecessary INTEGER NOT NULL, n_misplaced INTEGER NOT NULL,"
	"  n_duplicate INTEGER NOT NULL, n_host_read INTEGER NOT NULL,"
	"  n_launch_blocked INTEGER NOT NULL, n_classified INTEGER NOT NULL,"
	"  benefit_ns INTEGER NOT NULL, use_delay_ns INTEGER NOT NULL, divergent INTEGER NOT NULL);"
	"CREATE INDEX analysis_sites_stack ON analysis_sites(analysis, stack);"
	/* the report's problems: groups by call site, largest expected benefit first (rank 1) */
	"CREATE TABLE analysis_problems(analysis INTEGER NOT NULL, rank INTEGER NOT NULL,"
	"  problem INTEGER NOT NULL, stack INTEGER NOT NULL, count INTEGER NOT NULL,"
	"  n_unnecessary INTEGER NOT NULL, n_misplaced INTEGER NOT NULL,"
	"  n_duplicate INTEGER NOT NULL, n_host_read INTEGER NOT NULL,"
	"  n_launch_blocked INTEGER NOT NULL, wait_ns INTEGER NOT NULL,"
	"  benefit_ns INTEGER NOT NULL, partial INTEGER NOT NULL, divergent INTEGER NOT NULL,"
	"  PRIMARY KEY (analysis, rank)) WITHOUT ROWID;"
	/* per driver function: its time and the benefit of fixing its problems alone */
	"CREATE TABLE analysis_benefits(analysis INTEGER NOT NULL, api INTEGER NOT NULL,"
	"  function TEXT NOT NULL, calls INTEGER NOT NULL, dur_ns INTEGER NOT NULL,"
	"  wait_ns INTEGER NOT NULL, problems INTEGER NOT NULL, benefit_ns INTEGER NOT NULL,"
	"  PRIMARY KEY (analysis, api)) WITHOUT ROWID;"
	"CREATE VIEW latest_analysis AS SELECT * FROM analyses"
	"  WHERE id = (SELECT max(id) FROM analyses);"
	"CREATE VIEW problems_v AS SELECT p.*, t.name AS problem_name, s.function, s.file, s.line,"
	"  s.driver_function FROM analysis_problems p LEFT JOIN problem_types t ON t.id = p.problem"
	"  LEFT JOIN analysis_sites s ON s.analysis = p.analysis AND s.stack = p.stack;";

/* v5: adaptive stage 1's sampling (stages/ffm_sampling.h), and the run flag of a re-trace. kind 0:
 * a span of a process's time traced by windows only (on_ns: the windows' time in it, the sampling
 * ratio on_ns / (end_ns - start_ns)); kind 1: a window (the probe on; on_ns = end_ns - start_ns).
 * Waits that start in a span outside its windows are not part of the estimate. */
static const char step_v5[] =
	"CREATE TABLE sample_spans(run INTEGER NOT NULL, tgid INTEGER NOT NULL,"
	"  kind INTEGER NOT NULL, start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL,"
	"  on_ns INTEGER NOT NULL, PRIMARY KEY (run, tgid, kind, start_ns)) WITHOUT ROWID;"
	/* a stage-2 run for drift (FFM_RUN_RETRACE): stages 3-4 before it are history */
	"INSERT INTO run_flags VALUES(16,'retrace');";

/* v6: CPU samples of a stage-2 run's Python threads, summed per (Python stack, state): state
 * 0 outside the probed driver calls, 1 inside one, 2 in its wait (enum ffm_sample_state of
 * bpf/ffm.h); n samples, ns the CPU time they stand for (the sum of their periods). */
static const char step_v6[] =
	"CREATE TABLE cpu_samples(run INTEGER NOT NULL, stack INTEGER NOT NULL,"
	"  state INTEGER NOT NULL, n INTEGER NOT NULL, ns INTEGER NOT NULL,"
	"  PRIMARY KEY (run, stack, state)) WITHOUT ROWID;"
	"CREATE TABLE sample_states(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);"
	"INSERT INTO sample_states VALUES(0,'user'),(1,'driver_call'),(2,'wait');";

/* v7: how much of a protected range stage 3 watched (its windows rotate over the range). Rows
 * written before watched the first 8 bytes of their range when they say it was watched (not
 * partial); 0 bytes is what a row of v7 says when no window was in place. */
static const char step_v7[] =
	"ALTER TABLE sync_uses ADD COLUMN watched_bytes INTEGER NOT NULL DEFAULT 0;"
	"ALTER TABLE sync_uses ADD COLUMN covered_bytes INTEGER NOT NULL DEFAULT 0;"
	"UPDATE sync_uses SET watched_bytes = min(8, prot_hi - prot_lo),"
	" covered_bytes = min(8, prot_hi - prot_lo) WHERE prot_hi > prot_lo AND (flags & 1) = 0;"
	"INSERT INTO sync_use_flags VALUES(4,'late_use');";

/* v8: what stage 2's probes had cost a call's thread before the call (ffm_store_event.probe_ns);
 * 0 in rows written before (not measured). events_v shows it. */
static const char step_v8[] =
	"ALTER TABLE events ADD COLUMN probe_ns INTEGER NOT NULL DEFAULT 0;"
	"DROP VIEW calls;"
	"DROP VIEW events_v;"
	"CREATE VIEW events_v AS SELECT id, run, info & 255 AS kind, (info >> 8) & 255 AS dir,"
	"  info >> 16 AS api, pid >> 32 AS tgid, pid & 4294967295 AS tid, start_ns, dur_ns,"
	"  wait_ns, bytes, stream, src, dst, stack, flags, probe_ns FROM events;"
	"CREATE VIEW calls AS SELECT e.id, e.run, e.kind AS kind_id, k.name AS kind,"
	"  coalesce(a.name, '') AS function, e.api, d.name AS direction, e.tgid, e.tid,"
	"  e.start_ns, e.dur_ns, e.wait_ns, e.bytes, e.stream, e.src, e.dst, e.stack, e.flags,"
	"  e.probe_ns FROM events_v e LEFT JOIN event_kinds k ON k.id = e.kind"
	"  LEFT JOIN directions d ON d.id = e.dir LEFT JOIN api_names a ON a.id = e.api;";

/* v9: the drops a run's bounds cause (enum ffm_drop_reason 4-6). */
static const char step_v9[] =
	"INSERT INTO drop_reasons VALUES(4,'stack_cap'),(5,'store_cap'),(6,'procs_quota');";

/* v10: kernel names per process of a run, as the program got each kernel's handle (its
 * CUfunction or CUkernel: cuModuleGetFunction, cuLibraryGetKernel, ...); a launch event's src
 * is the handle it launched. */
static const char step_v10[] =
	"CREATE TABLE kernels(run INTEGER NOT NULL, tgid INTEGER NOT NULL, handle INTEGER NOT NULL,"
	"  name TEXT NOT NULL, PRIMARY KEY (run, tgid, handle)) WITHOUT ROWID;";

/* v11: the price of a run's processes, per part (enum ffm_overhead_part: struct ffm_overhead), and
 * the flag of a run whose analysis the node left to its readers (analysis = reader). */
static const char step_v11[] =
	"CREATE TABLE run_overhead(run INTEGER NOT NULL, part INTEGER NOT NULL, ns INTEGER NOT NULL,"
	"  count INTEGER NOT NULL, PRIMARY KEY (run, part)) WITHOUT ROWID;"
	"CREATE TABLE overhead_parts(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);"
	"INSERT INTO overhead_parts VALUES(0,'held'),(1,'bpf'),(2,'waits_full'),(3,'waits_sampled'),"
	"  (4,'attach'),(5,'detach'),(6,'procfs'),(7,'python_check'),(8,'symbols'),(9,'driver');"
	"INSERT INTO run_flags VALUES(64,'no_analysis');";

/* v12: the node model of the driver's GPU (symbols/ffm_node_model.h, as JSON), with which the
 * analysis prices what a fix deletes (stages/ffm_price.h), NULL: none was measured; per thread,
 * its waits of 20 us and more and those it slept in (its context's schedule mode). */
static const char step_v12[] =
	"ALTER TABLE drivers ADD COLUMN node_model TEXT;"
	"ALTER TABLE threads ADD COLUMN waits INTEGER NOT NULL DEFAULT 0;"
	"ALTER TABLE threads ADD COLUMN waits_slept INTEGER NOT NULL DEFAULT 0;";

/* v13: stage 4's count, per call site, of its device operations on managed memory and of the
 * host's page faults in managed memory that followed them (analysis/managed.c prices them); the
 * name of problem type 6, a temporary buffer allocated and freed every step (analysis/reuse.c). */
static const char step_v13[] =
	"CREATE TABLE managed_faults(run INTEGER NOT NULL, stack INTEGER NOT NULL,"
	"  ops INTEGER NOT NULL, faults INTEGER NOT NULL, PRIMARY KEY (run, stack)) WITHOUT ROWID;"
	"INSERT INTO problem_types VALUES(6,'temp_buffer');";

const char *const ffm_store_migrations[FFM_STORE_SCHEMA_VERSION] = {
	step_v1,
	step_v2,
	step_v3,
	step_v4,
	step_v5,
	step_v6,
	step_v7,
	step_v8,
	step_v9,
	step_v10,
	step_v11,
	step_v12,
	step_v13,
};
