/* SPDX-License-Identifier: MIT */
/*
 * Tests of store/: creation and reopening, migration of a v1 and a v3 file, the v4 names (pinned
 * to the C enums) and stored analysis results, refusal of files that are
 * not (usable) ffm stores without changing them, batched ingest and queries, event order,
 * per-stack totals, SIGKILL durability, key file names and job lookup across key files, the
 * layout of the state directory (every node's stores) and the stable ids writers store.
 *
 * SQLite is used directly only to hand-make the odd files (an older schema, a newer one, a
 * foreign database): that is the store's own test, the one place besides store/ allowed to.
 */
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "analysis/ffm_analysis.h"
#include "bpf/ffm.h"
#include "store/ffm_store.h"
#include "tests/testutil.h"

static char tmp_dirs[32][64];
static int tmp_n;

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	remove(path);
	return 0;
}

static void rm_tmp_dirs(void)
{
	for (int i = 0; i < tmp_n && i < 32; i++)
		nftw(tmp_dirs[i], rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* A fresh temporary directory, removed with everything in it when the test program exits. */
static char *mktmp(void)
{
	char *d;

	if (tmp_n >= 32)
		FAIL("too many temporary directories");
	if (!tmp_n)
		atexit(rm_tmp_dirs);
	d = tmp_dirs[tmp_n++];
	snprintf(d, 64, "/tmp/ffm-store-test-XXXXXX");
	if (!mkdtemp(d))
		FAIL("mkdtemp: %s", strerror(errno));
	return d;
}

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;

	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = malloc(n ? n : 1);
	if (buf && fread(buf, 1, n, f) != (size_t)n) {
		free(buf);
		buf = NULL;
	}
	fclose(f);
	*len = (size_t)n;
	return buf;
}

static void sql(const char *path, const char *q)
{
	sqlite3 *db;
	char *msg = NULL;

	ASSERT_EQ(sqlite3_open(path, &db), SQLITE_OK);
	if (sqlite3_exec(db, q, NULL, NULL, &msg) != SQLITE_OK)
		FAIL("sql %s: %s", q, msg);
	sqlite3_close(db);
}

static const struct ffm_store_opts wopts = { .sz = sizeof(wopts), .create = true };
static const struct ffm_store_opts ropts = { .sz = sizeof(ropts), .read_only = true };

/* A store at <dir>/s.db with one job "1" and one run of stage 1; returns the run id. */
static int64_t new_store(const char *path, struct ffm_store **s)
{
	struct ffm_store_job j = { .job_id = "1", .uid = 7, .start_unix = 100, .node = "n1" };
	struct ffm_store_run r = { .job_id = "1", .stage = 1, .start_ns = 1000 };
	int64_t run = 0;

	ASSERT_OK(ffm_store__open(path, &wopts, s));
	ASSERT_OK(ffm_store__job_begin(*s, &j, NULL));
	ASSERT_OK(ffm_store__run_begin(*s, &r, &run));
	ASSERT(run > 0);
	return run;
}

static int count_cb(const struct ffm_store_event *ev, void *ctx)
{
	(*(long *)ctx)++;
	return 0;
}

static long count_events(struct ffm_store *s, int64_t run)
{
	long n = 0;

	ASSERT_OK(ffm_store__for_each_event(s, run, count_cb, &n));
	return n;
}

static void put_events(struct ffm_store *s, int64_t run, int n, uint64_t t0)
{
	for (int i = 0; i < n; i++) {
		struct ffm_store_event ev = { .run = run, .kind = FFM_EV_WAIT, .tgid = 1, .tid = 1,
					      .start_ns = t0 + (uint64_t)i, .dur_ns = 1 };
		ASSERT_OK(ffm_store__put_event(s, &ev, NULL));
	}
}

TEST(create_and_reopen)
{
	char *d = mktmp(), path[256];
	struct ffm_store_key k = { .key = "job-a", .uid = 1000, .exe = "/bin/app", .args_hash = 42 }, got;
	struct ffm_store *s = NULL;
	struct stat st;

	ASSERT_EQ(ffm_store__open_key(d, &k, &ropts, &s), -ENOENT); /* read-only never creates */
	umask(077);
	ASSERT_OK(ffm_store__open_key(d, &k, &wopts, &s));
	umask(022);
	ASSERT_EQ(ffm_store__schema_version(s), FFM_STORE_SCHEMA_VERSION);
	ASSERT_OK(ffm_store__key(s, &got));
	ASSERT_STREQ(got.key, "job-a");
	ASSERT_STREQ(got.exe, "/bin/app");
	ASSERT_EQ(got.uid, 1000);
	ASSERT_EQ(got.args_hash, 42);
	ASSERT_OK(ffm_store__check(s, true));
	s = ffm_store__free(s);
	ASSERT(s == NULL);
	ffm_store__free(NULL);

	snprintf(path, sizeof(path), "%s/keys/job-a@1000.db", d); /* the owner's store */
	ASSERT_OK(stat(path, &st));
	ASSERT_EQ(st.st_mode & 07777, 0640);
	snprintf(path, sizeof(path), "%s/keys", d);
	ASSERT_OK(stat(path, &st));
	ASSERT_EQ(st.st_mode & 07777, 0750);

	/* reopen, read-only and read-write; no temporary files left behind */
	ASSERT_OK(ffm_store__open_key(d, &k, &ropts, &s));
	ASSERT_OK(ffm_store__key(s, &got));
	ASSERT_STREQ(got.key, "job-a");
	s = ffm_store__free(s);
	ASSERT_OK(ffm_store__open_key(d, &k, &wopts, &s));
	s = ffm_store__free(s);
	ASSERT_EQ(ffm_store__open(path, &ropts, &s), -EBADMSG); /* a directory */
}

/* What v5 added (store/schema.c), dropped to hand-make an older file. */
#define DROP_V5 "DROP TABLE sample_spans; DELETE FROM run_flags WHERE bit = 16;"
/* What v6 added. */
#define DROP_V6 "DROP TABLE cpu_samples; DROP TABLE sample_states;"
/* What v7 added. */
#define DROP_V7                                                                                   \
	"ALTER TABLE sync_uses DROP COLUMN watched_bytes;"                                         \
	"ALTER TABLE sync_uses DROP COLUMN covered_bytes;"                                         \
	"DELETE FROM sync_use_flags WHERE bit = 4;"

/* What v8 added: the events' probe_ns column, in both views that show it. */
/* What v13 added: stage 4's managed-memory fault counts, the name of problem type 6. */
#define DROP_V13 "DROP TABLE managed_faults; DELETE FROM problem_types WHERE id = 6;"
/* What v12 added: the driver's node model. */
#define DROP_V12                                                                                   \
	"ALTER TABLE drivers DROP COLUMN node_model; ALTER TABLE threads DROP COLUMN waits;"        \
	"ALTER TABLE threads DROP COLUMN waits_slept;"
#define DROP_V11 "DROP TABLE run_overhead; DROP TABLE overhead_parts; DELETE FROM run_flags WHERE bit = 64;"
#define DROP_V9 "DELETE FROM drop_reasons WHERE id >= 4;"
/* What v10 added: kernel names. */
#define DROP_V10 "DROP TABLE kernels;"
#define DROP_V8                                                                                   \
	"DROP VIEW calls; DROP VIEW events_v; ALTER TABLE events DROP COLUMN probe_ns;"            \
	"CREATE VIEW events_v AS SELECT id, run, info & 255 AS kind, (info >> 8) & 255 AS dir,"    \
	"  info >> 16 AS api, pid >> 32 AS tgid, pid & 4294967295 AS tid, start_ns, dur_ns,"       \
	"  wait_ns, bytes, stream, src, dst, stack, flags FROM events;"                            \
	"CREATE VIEW calls AS SELECT e.id, e.run, e.kind AS kind_id, k.name AS kind,"              \
	"  coalesce(a.name, '') AS function, e.api, d.name AS direction, e.tgid, e.tid,"           \
	"  e.start_ns, e.dur_ns, e.wait_ns, e.bytes, e.stream, e.src, e.dst, e.stack, e.flags"     \
	"  FROM events_v e LEFT JOIN event_kinds k ON k.id = e.kind"                               \
	"  LEFT JOIN directions d ON d.id = e.dir LEFT JOIN api_names a ON a.id = e.api;"

/* What v4 added (store/schema.c), dropped to hand-make an older file. */
#define DROP_V4                                                                                   \
	"DROP VIEW calls; DROP VIEW jobs_v; DROP VIEW runs_v; DROP VIEW drops_v;"                 \
	"DROP VIEW stack_stats_v; DROP VIEW xfer_hashes_v; DROP VIEW sync_uses_v;"                \
	"DROP VIEW stack_frames_v; DROP VIEW latest_analysis; DROP VIEW problems_v;"              \
	"DROP INDEX stack_stats_api; DROP INDEX stack_stats_stack;"                               \
	"DROP TABLE event_kinds; DROP TABLE directions; DROP TABLE job_states;"                   \
	"DROP TABLE run_flags; DROP TABLE drop_reasons; DROP TABLE dup_kinds;"                    \
	"DROP TABLE sync_use_flags; DROP TABLE problem_types; DROP TABLE analyses;"               \
	"DROP TABLE analysis_sites; DROP TABLE analysis_problems; DROP TABLE analysis_benefits;"  \
	"DELETE FROM sqlite_sequence WHERE name = 'analyses';"

/* One integer from @q on the file at @path (-1 when no row). */
static int64_t sql_int(const char *path, const char *q)
{
	sqlite3_stmt *st;
	sqlite3 *db;
	int64_t v = -1;

	ASSERT_EQ(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
	if (sqlite3_prepare_v2(db, q, -1, &st, NULL) != SQLITE_OK)
		FAIL("sql %s: %s", q, sqlite3_errmsg(db));
	if (sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	sqlite3_close(db);
	return v;
}

/* A v3 file gets v4's names, views and results tables from its writer, and keeps its data. */
TEST(migrate_from_v3)
{
	char *d = mktmp(), path[256];
	struct ffm_store *s = NULL;
	int64_t run;

	snprintf(path, sizeof(path), "%s/v3.db", d);
	run = new_store(path, &s);
	put_events(s, run, 50, 7000);
	ASSERT_OK(ffm_store__flush(s));
	s = ffm_store__free(s);
	sql(path, "BEGIN;" DROP_V13 DROP_V12 DROP_V11 DROP_V10 DROP_V9 DROP_V8 DROP_V7 DROP_V6 DROP_V5 DROP_V4 "UPDATE meta SET value = '3' WHERE name = 'schema_version';"
		  "PRAGMA user_version = 3; COMMIT;");
	ASSERT_OK(ffm_store__open(path, &ropts, &s));
	ASSERT_EQ(ffm_store__schema_version(s), 3);
	ASSERT_EQ(count_events(s, run), 50);
	s = ffm_store__free(s);
	ASSERT_OK(ffm_store__open(path, &wopts, &s));
	ASSERT_EQ(ffm_store__schema_version(s), FFM_STORE_SCHEMA_VERSION);
	s = ffm_store__free(s);
	ASSERT_EQ(sql_int(path, "SELECT count(*) FROM calls WHERE kind = 'wait'"), 50);
	ASSERT_EQ(sql_int(path, "SELECT value FROM meta WHERE name = 'schema_version'"), FFM_STORE_SCHEMA_VERSION);
	ASSERT_EQ(sql_int(path, "SELECT count(*) FROM analyses"), 0);
}

/* A v6 file's stage-3 rows get what they watched: the first 8 bytes of their range, none when
 * the row says not every range was watched. */
TEST(migrate_from_v6_watched_bytes)
{
	static const struct { uint64_t bytes; uint32_t flags; int64_t watched; } rows[] = {
		{ 4096, FFM_SYNC_USE_NONE, 8 }, { 4, FFM_SYNC_USE_NONE, 4 },
		{ 4096, FFM_SYNC_USE_NONE | FFM_SYNC_USE_PARTIAL, 0 }, { 0, FFM_SYNC_USE_NONE, 0 },
	};
	char *d = mktmp(), path[256], q[160];
	struct ffm_store *s = NULL;
	int64_t run, ids[4];

	snprintf(path, sizeof(path), "%s/v6.db", d);
	run = new_store(path, &s);
	for (size_t i = 0; i < 4; i++) {
		struct ffm_store_sync_use u = { .run = run, .event = 1, .stack = 1, .prot_lo = 0x1000,
						.prot_hi = 0x1000 + rows[i].bytes, .use_delay_ns = -1,
						.flags = rows[i].flags };

		ASSERT_OK(ffm_store__put_sync_use(s, &u, &ids[i]));
	}
	ASSERT_OK(ffm_store__flush(s));
	s = ffm_store__free(s);
	sql(path, "BEGIN;" DROP_V13 DROP_V12 DROP_V11 DROP_V10 DROP_V9 DROP_V8 DROP_V7 "UPDATE meta SET value = '6' WHERE name = 'schema_version';"
		  "PRAGMA user_version = 6; COMMIT;");
	ASSERT_OK(ffm_store__open(path, &wopts, &s));
	ASSERT_EQ(ffm_store__schema_version(s), FFM_STORE_SCHEMA_VERSION);
	s = ffm_store__free(s);
	for (size_t i = 0; i < 4; i++) {
		snprintf(q, sizeof(q), "SELECT watched_bytes FROM sync_uses WHERE id = %" PRId64, ids[i]);
		ASSERT_MSG(sql_int(path, q) == rows[i].watched, "row %zu", i);
		snprintf(q, sizeof(q), "SELECT covered_bytes FROM sync_uses WHERE id = %" PRId64, ids[i]);
		ASSERT_MSG(sql_int(path, q) == rows[i].watched, "row %zu", i);
	}
}

static int probe_cb(const struct ffm_store_event *ev, void *ctx)
{
	uint64_t *v = ctx;

	v[ev->start_ns - 1] = ev->probe_ns;
	return 0;
}

/* A call's probe cost goes in and comes back; a v7 file, which has none, reads 0 before its
 * writer migrates it and keeps its events after. */
TEST(probe_ns_and_v7_files)
{
	static const uint64_t want[3] = { 0, 1500, 1ull << 40 };
	char *d = mktmp(), path[256];
	struct ffm_store *s = NULL;
	uint64_t got[3] = { 7, 7, 7 };
	int64_t run;

	snprintf(path, sizeof(path), "%s/v7.db", d);
	run = new_store(path, &s);
	for (size_t i = 0; i < 3; i++) {
		struct ffm_store_event ev = { .run = run, .kind = FFM_EV_LAUNCH, .tgid = 1, .tid = 1,
					      .start_ns = i + 1, .dur_ns = 1, .probe_ns = want[i] };

		ASSERT_OK(ffm_store__put_event(s, &ev, NULL));
	}
	ASSERT_OK(ffm_store__flush(s));
	ASSERT_OK(ffm_store__for_each_event(s, run, probe_cb, got));
	for (size_t i = 0; i < 3; i++)
		ASSERT_MSG(got[i] == want[i], "event %zu: %" PRIu64, i, got[i]);
	s = ffm_store__free(s);
	ASSERT_EQ(sql_int(path, "SELECT sum(probe_ns = 1500) FROM calls"), 1);

	sql(path, "BEGIN;" DROP_V13 DROP_V12 DROP_V11 DROP_V10 DROP_V9 DROP_V8 "UPDATE meta SET value = '7' WHERE name = 'schema_version';"
		  "PRAGMA user_version = 7; COMMIT;");
	ASSERT_OK(ffm_store__open(path, &ropts, &s));
	ASSERT_EQ(ffm_store__schema_version(s), 7);
	ASSERT_OK(ffm_store__for_each_event(s, run, probe_cb, got));
	for (size_t i = 0; i < 3; i++)
		ASSERT_MSG(got[i] == 0, "v7 event %zu: %" PRIu64, i, got[i]);
	s = ffm_store__free(s);
	ASSERT_OK(ffm_store__open(path, &wopts, &s));
	ASSERT_EQ(ffm_store__schema_version(s), FFM_STORE_SCHEMA_VERSION);
	ASSERT_EQ(count_events(s, run), 3);
	s = ffm_store__free(s);
	ASSERT_EQ(sql_int(path, "SELECT count(*) FROM calls WHERE probe_ns = 0"), 3);
}

/* The lookup tables name the C enums' values (the report's problem names: tests/analysis). */
TEST(names_match_the_enums)
{
	char *d = mktmp(), path[256], q[160];
	struct ffm_store *s = NULL;
	static const struct { const char *table; int64_t id; const char *name; } pins[] = {
		{ "event_kinds", FFM_EV_WAIT, "wait" }, { "event_kinds", FFM_EV_API, "api" },
		{ "event_kinds", FFM_EV_TRANSFER, "transfer" }, { "event_kinds", FFM_EV_ALLOC, "alloc" },
		{ "event_kinds", FFM_EV_FREE, "free" }, { "event_kinds", FFM_EV_MEMSET, "memset" },
		{ "event_kinds", FFM_EV_LAUNCH, "launch" }, { "directions", FFM_DIR_NONE, "none" },
		{ "directions", FFM_DIR_HTOD, "HtoD" }, { "directions", FFM_DIR_DTOH, "DtoH" },
		{ "directions", FFM_DIR_DTOD, "DtoD" }, { "directions", FFM_DIR_HTOH, "HtoH" },
		{ "directions", FFM_DIR_PEER, "peer" }, { "job_states", FFM_JOB_RUNNING, "running" },
		{ "job_states", FFM_JOB_DONE, "done" }, { "job_states", FFM_JOB_FAILED, "failed" },
		{ "job_states", FFM_JOB_CANCELLED, "cancelled" },
		{ "run_flags", FFM_RUN_PARTIAL, "partial" }, { "run_flags", FFM_RUN_DROPPED, "dropped" },
		{ "run_flags", FFM_RUN_DIVERGENT, "divergent" },
		{ "run_flags", FFM_RUN_ABORTED, "aborted" }, { "run_flags", FFM_RUN_RETRACE, "retrace" },
		{ "drop_reasons", FFM_DROP_RINGBUF_FULL, "ringbuf_full" },
		{ "drop_reasons", FFM_DROP_STACK_TOO_DEEP, "stack_too_deep" },
		{ "drop_reasons", FFM_DROP_MAP_FULL, "map_full" },
		{ "drop_reasons", FFM_DROP_OTHER, "other" }, { "dup_kinds", FFM_DUP_NONE, "none" },
		{ "drop_reasons", FFM_DROP_STACK_CAP, "stack_cap" },
		{ "drop_reasons", FFM_DROP_STORE_CAP, "store_cap" },
		{ "drop_reasons", FFM_DROP_PROCS_QUOTA, "procs_quota" },
		{ "dup_kinds", FFM_DUP_SAME_DST, "same_dst" },
		{ "dup_kinds", FFM_DUP_OTHER_DST, "other_dst" },
		{ "sync_use_flags", FFM_SYNC_USE_PARTIAL, "partial" },
		{ "sync_use_flags", FFM_SYNC_USE_NONE, "no_use" },
		{ "sample_states", FFM_SAMPLE_USER, "user" },
		{ "sample_states", FFM_SAMPLE_CALL, "driver_call" },
		{ "sample_states", FFM_SAMPLE_WAIT, "wait" },
		{ "sync_use_flags", FFM_SYNC_USE_LATE, "late_use" },
	};

	snprintf(path, sizeof(path), "%s/names.db", d);
	new_store(path, &s);
	s = ffm_store__free(s);
	for (size_t i = 0; i < sizeof(pins) / sizeof(pins[0]); i++) {
		bool bits = !strcmp(pins[i].table, "run_flags") || !strcmp(pins[i].table, "sync_use_flags");

		snprintf(q, sizeof(q), "SELECT count(*) FROM %s WHERE %s = %lld AND name = '%s'",
			 pins[i].table, bits ? "bit" : "id", (long long)pins[i].id, pins[i].name);
		if (sql_int(path, q) != 1)
			FAIL("%s: %lld is not '%s'", pins[i].table, (long long)pins[i].id, pins[i].name);
	}
	for (unsigned p = 0; p < FFM_PROBLEM__MAX; p++) {
		snprintf(q, sizeof(q), "SELECT count(*) FROM problem_types WHERE id = %u AND name = '%s'",
			 p, ffm_an_problem_name(p));
		if (sql_int(path, q) != 1)
			FAIL("problem_types: %u is not '%s'", p, ffm_an_problem_name(p));
	}
	ASSERT_EQ(sql_int(path, "SELECT count(*) FROM problem_types"), FFM_PROBLEM__MAX);
	ASSERT_EQ(sql_int(path, "SELECT count(*) FROM event_kinds"), 7);
	ASSERT_EQ(sql_int(path, "SELECT count(*) FROM drop_reasons"), FFM_DROP__MAX);
}

/* Stored results: one set per job, the newest replacing the job's previous one. */
TEST(results_replace_per_job)
{
	char *d = mktmp(), path[256];
	struct ffm_store *s = NULL;
	struct ffm_store_site_result site = { .stack = 3, .api = 9, .function = "f", .file = "a.c",
					      .line = 12, .driver_function = "cuCtxSynchronize",
					      .count = 4, .problem = 1, .n.unnecessary = 4,
					      .benefit_ns = 900, .use_delay_ns = -1 };
	struct ffm_store_problem_result prob = { .problem = 1, .stack = 3, .count = 4,
						 .n.unnecessary = 4, .benefit_ns = 900 };
	struct ffm_store_benefit_result ben = { .api = 9, .function = "cuCtxSynchronize",
						.calls = 4, .benefit_ns = 900 };
	struct ffm_store_results r = {
		.a = { .job_id = "1", .at_unix = 5, .tool_version = "t", .have_problems = true,
		       .wall_ns = 10000, .recoverable_ns = 900, .recoverable_share = 0.09 },
		.sites = &site, .n_sites = 1, .problems = &prob, .n_problems = 1,
		.benefits = &ben, .n_benefits = 1,
	};
	int64_t id1 = 0, id2 = 0;

	snprintf(path, sizeof(path), "%s/res.db", d);
	new_store(path, &s);
	ASSERT_OK(ffm_store__put_results(s, &r, &id1));
	r.a.recoverable_ns = 800;
	ASSERT_OK(ffm_store__put_results(s, &r, &id2));
	ASSERT(id2 > id1);
	r.a.job_id = "";
	ASSERT_EQ(ffm_store__put_results(s, &r, NULL), -EINVAL);
	s = ffm_store__free(s);
	ASSERT_EQ(sql_int(path, "SELECT count(*) FROM analyses"), 1);
	ASSERT_EQ(sql_int(path, "SELECT recoverable_ns FROM latest_analysis"), 800);
	ASSERT_EQ(sql_int(path, "SELECT count(*) FROM analysis_sites"), 1);
	ASSERT_EQ(sql_int(path, "SELECT count(*) FROM problems_v WHERE problem_name ="
				" 'unnecessary_sync' AND line = 12 AND rank = 1"), 1);
	r.a.job_id = "1";
	ASSERT_OK(ffm_store__open(path, &ropts, &s));
	ASSERT_EQ(ffm_store__put_results(s, &r, NULL), -EROFS);
	s = ffm_store__free(s);
}

/* A v1 file: the current schema minus what v2, v4, v5, v6, v7 and v8 added, user_version 1, with data in it. */
TEST(migrate_from_v1)
{
	char *d = mktmp(), path[256];
	struct ffm_store *s = NULL;
	struct ffm_store_xfer_hash h = { .hash = 5, .bytes = 64 };
	int64_t run, id = 0;

	snprintf(path, sizeof(path), "%s/old.db", d);
	run = new_store(path, &s);
	put_events(s, run, 100, 5000);
	ASSERT_OK(ffm_store__flush(s));
	s = ffm_store__free(s);
	sql(path, "BEGIN;" DROP_V13 DROP_V12 DROP_V11 DROP_V10 DROP_V9 DROP_V8 DROP_V7 DROP_V6 DROP_V5 DROP_V4 "DROP TABLE xfer_hashes; DROP TABLE sync_uses;"
		  "UPDATE meta SET value = '1' WHERE name = 'schema_version';"
		  "PRAGMA user_version = 1; COMMIT;");

	/* a reader does not migrate: it sees v1 and the v2 tables are absent */
	ASSERT_OK(ffm_store__open(path, &ropts, &s));
	ASSERT_EQ(ffm_store__schema_version(s), 1);
	ASSERT_EQ(count_events(s, run), 100);
	s = ffm_store__free(s);

	ASSERT_OK(ffm_store__open(path, &wopts, &s));
	ASSERT_EQ(ffm_store__schema_version(s), FFM_STORE_SCHEMA_VERSION);
	ASSERT_EQ(count_events(s, run), 100);
	h.run = run;
	ASSERT_OK(ffm_store__put_xfer_hash(s, &h, &id));
	ASSERT(id > 0);
	ASSERT_OK(ffm_store__check(s, true));
	s = ffm_store__free(s);
	ASSERT_OK(ffm_store__open(path, &ropts, &s));
	ASSERT_EQ(ffm_store__schema_version(s), FFM_STORE_SCHEMA_VERSION);
	s = ffm_store__free(s);
}

/* open(path) must fail with want and leave the file byte-for-byte as it was. */
static void assert_refused(const char *path, int want)
{
	struct ffm_store *s = NULL;
	size_t n0, n1;
	char *b0 = slurp(path, &n0), *b1;

	ASSERT(b0);
	ASSERT_EQ(ffm_store__open(path, &wopts, &s), want);
	ASSERT(s == NULL);
	ASSERT_EQ(ffm_store__open(path, &ropts, &s), want);
	b1 = slurp(path, &n1);
	ASSERT(b1);
	ASSERT_EQ(n0, n1);
	ASSERT(memcmp(b0, b1, n0) == 0);
	free(b0);
	free(b1);
}

TEST(refuse_newer_version)
{
	char *d = mktmp(), path[256];
	struct ffm_store *s = NULL;

	snprintf(path, sizeof(path), "%s/new.db", d);
	new_store(path, &s);
	s = ffm_store__free(s);
	sql(path, "PRAGMA user_version = 99");
	assert_refused(path, -ENOTSUP);
}

TEST(refuse_foreign_sqlite)
{
	char *d = mktmp(), path[256];

	snprintf(path, sizeof(path), "%s/foreign.db", d);
	sql(path, "CREATE TABLE t(a, b); INSERT INTO t VALUES(1, 2);");
	assert_refused(path, -EPROTO);
	/* a different application's id */
	snprintf(path, sizeof(path), "%s/other.db", d);
	sql(path, "PRAGMA application_id = 1234; CREATE TABLE events(x);");
	assert_refused(path, -EPROTO);
}

TEST(refuse_not_sqlite_empty_truncated)
{
	char *d = mktmp(), path[256], big[256];
	struct ffm_store *s = NULL;
	struct stat st;
	int64_t run;
	FILE *f;

	snprintf(path, sizeof(path), "%s/text.db", d);
	f = fopen(path, "w");
	ASSERT(f);
	for (int i = 0; i < 200; i++)
		fputs("this is not a database at all\n", f);
	fclose(f);
	assert_refused(path, -EBADMSG);

	snprintf(path, sizeof(path), "%s/empty.db", d);
	f = fopen(path, "w");
	fclose(f);
	assert_refused(path, -EBADMSG);

	snprintf(path, sizeof(path), "%s/short.db", d);
	f = fopen(path, "w");
	fputs("SQLite format 3", f);
	fputc(0, f);
	fclose(f);
	assert_refused(path, -EBADMSG);

	/* a real store cut short: at a page boundary, and mid-page */
	snprintf(big, sizeof(big), "%s/big.db", d);
	run = new_store(big, &s);
	put_events(s, run, 20000, 1);
	s = ffm_store__free(s);
	ASSERT_OK(stat(big, &st));
	ASSERT(st.st_size > 4 * 16384);
	snprintf(path, sizeof(path), "%s/big.db", d);
	ASSERT_OK(truncate(path, st.st_size / 2 / 16384 * 16384));
	assert_refused(path, -EBADMSG);
	ASSERT_OK(truncate(path, 16384 + 100));
	assert_refused(path, -EBADMSG);
}

struct rt {
	int events;
	uint64_t last_start;
	int64_t last_id;
	bool sorted;
	int frames;
	int aggs;
	uint64_t agg_count, agg_wait;
	const char *api1;
};

static int rt_event(const struct ffm_store_event *ev, void *ctx)
{
	struct rt *r = ctx;

	if (r->events && (ev->start_ns < r->last_start ||
			  (ev->start_ns == r->last_start && ev->id < r->last_id)))
		r->sorted = false;
	r->last_start = ev->start_ns;
	r->last_id = ev->id;
	r->events++;
	return 0;
}

static int rt_frame(const struct ffm_store_frame *f, uint32_t depth, void *ctx)
{
	struct rt *r = ctx;

	if (depth == 0) {
		ASSERT_STREQ(f->build_id, "b1");
		ASSERT_STREQ(f->func, "cuStreamSynchronize");
		ASSERT_EQ(f->offset, 0x10);
	} else {
		ASSERT(f->build_id == NULL); /* identified by module path */
		ASSERT_STREQ(f->module, "/bin/app");
		ASSERT_STREQ(f->file, "app.cu"); /* filled in by a later put_frame */
		ASSERT_EQ(f->line, 42);
	}
	r->frames++;
	return 0;
}

static int rt_agg(const struct ffm_store_stack_agg *a, void *ctx)
{
	struct rt *r = ctx;

	r->aggs++;
	r->agg_count += a->count;
	r->agg_wait += a->wait_ns;
	return 0;
}

static int rt_api(uint32_t api, const char *name, void *ctx)
{
	if (api == 1)
		((struct rt *)ctx)->api1 = strdup(name);
	return 0;
}

static int rt_job(const struct ffm_store_job_info *j, void *ctx)
{
	ASSERT_STREQ(j->job_id, "1");
	ASSERT_STREQ(j->node, "n1");
	ASSERT_EQ(j->runs, 1);
	ASSERT_EQ(j->stages_done, 1u << 2);
	ASSERT_EQ(j->state, FFM_JOB_DONE);
	(*(int *)ctx)++;
	return 0;
}

static int rt_xfer(const struct ffm_store_xfer_hash *h, void *ctx)
{
	ASSERT_EQ(h->hash, 0xfedcba9876543210ull);
	ASSERT_EQ(h->dup, FFM_DUP_SAME_DST);
	(*(int *)ctx)++;
	return 0;
}

static int rt_sync(const struct ffm_store_sync_use *u, void *ctx)
{
	ASSERT_EQ(u->use_delay_ns, -1);
	ASSERT_EQ(u->flags, FFM_SYNC_USE_NONE);
	(*(int *)ctx)++;
	return 0;
}

static int stop_cb(const struct ffm_store_event *ev, void *ctx)
{
	return ++*(int *)ctx == 3 ? 77 : 0;
}

/* Threads' wait counts, by tid order 11, 12 into got[0], got[1]: tid, waits, slept. */
static int thread_waits_cb(uint32_t tgid, uint32_t tid, uint64_t waits, uint64_t slept, void *ctx)
{
	uint64_t (*got)[3] = ctx;
	int i = tid == 11 ? 0 : 1;

	(void)tgid;
	got[i][0] = tid;
	got[i][1] = waits;
	got[i][2] = slept;
	return 0;
}

/* Managed-fault counts by stack: got[stack % 2] = { ops, faults }. */
static int managed_faults_cb(int64_t stack, uint64_t ops, uint64_t faults, void *ctx)
{
	uint64_t (*got)[2] = ctx;

	got[stack % 2][0] = ops;
	got[stack % 2][1] = faults;
	return 0;
}

TEST(ingest_flush_query_roundtrip)
{
	char *d = mktmp(), path[256];
	struct ffm_store_opts o = wopts;
	struct ffm_store *s = NULL, *r = NULL;
	struct ffm_store_driver drv = { .path = "/usr/lib/libcuda.so.1", .build_id = "dd",
					.wait_off = 0x1234, .wait_size = 99 };
	struct ffm_store_frame fr[2] = {
		{ .build_id = "b1", .module = "/lib/libcuda.so.1", .offset = 0x10,
		  .func = "cuStreamSynchronize" },
		{ .module = "/bin/app", .offset = 0x20 },
	};
	struct ffm_store_frame late = { .module = "/bin/app", .offset = 0x20, .func = "main",
					.file = "app.cu", .line = 42 };
	struct ffm_store_job j = { .job_id = "1", .uid = 7, .start_unix = 100, .node = "n1" };
	struct ffm_store_run run_in = { .job_id = "1", .stage = 2, .start_ns = 1000 }, run_out;
	int64_t any = -1;
	struct ffm_store_process p = { .tgid = 10, .ptgid = 1, .exe = "/bin/app", .start_ns = 1 };
	struct ffm_store_drops drops;
	struct ffm_store_stage_history hist;
	struct rt rt = { .sorted = true };
	int64_t drv_id, drv_id2, stack, stack2, run, ev_id = 0, frame_id = 0;
	int n = 0;

	snprintf(path, sizeof(path), "%s/rt.db", d);
	o.batch_events = 10;
	o.batch_ms = 1000000;
	ASSERT_OK(ffm_store__open(path, &o, &s));
	ASSERT_OK(ffm_store__put_driver(s, &drv, &drv_id));
	drv.node_model = "{\"version\":1}";
	ASSERT_OK(ffm_store__put_driver(s, &drv, &drv_id2));
	ASSERT_EQ(drv_id, drv_id2);
	drv.node_model = NULL; /* a NULL keeps the stored model */
	ASSERT_OK(ffm_store__put_driver(s, &drv, &drv_id2));
	ASSERT_OK(ffm_store__job_begin(s, &j, NULL));
	run_in.driver = drv_id;
	ASSERT_EQ(ffm_store__run_begin(s, &(struct ffm_store_run){ .job_id = "nope", .stage = 1 },
				       &run),
		  -ENOENT);
	ASSERT_EQ(ffm_store__run_begin(s, &(struct ffm_store_run){ .job_id = "1", .stage = 9 },
				       &run),
		  -EINVAL);
	ASSERT_OK(ffm_store__run_begin(s, &run_in, &run));
	{
		char *nm = NULL;

		ASSERT_OK(ffm_store__run_node_model(s, run, &nm));
		ASSERT_STREQ(nm, "{\"version\":1}");
		free(nm);
		ASSERT_EQ(ffm_store__run_node_model(s, run + 100, &nm), -ENOENT);
		ASSERT(!nm);
	}
	ASSERT_OK(ffm_store__put_api_name(s, 1, "cuStreamSynchronize"));
	p.run = run;
	ASSERT_OK(ffm_store__put_process(s, &p));
	ASSERT_OK(ffm_store__put_thread(s, run, 10, 11));
	ASSERT_OK(ffm_store__put_thread(s, run, 10, 11)); /* idempotent */
	ASSERT_OK(ffm_store__add_thread_waits(s, run, 10, 11, 5, 3));
	ASSERT_OK(ffm_store__add_thread_waits(s, run, 10, 11, 2, 1)); /* adds up */
	ASSERT_OK(ffm_store__add_thread_waits(s, run, 10, 12, 4, 0)); /* a thread not put yet */
	ASSERT_EQ(ffm_store__add_thread_waits(s, run, 10, 11, 1, 2), -EINVAL);
	ASSERT_OK(ffm_store__add_managed_faults(s, run, 4, 10, 5120));
	ASSERT_OK(ffm_store__add_managed_faults(s, run, 4, 2, 1024)); /* adds up */
	ASSERT_OK(ffm_store__add_managed_faults(s, run, 5, 3, 0));
	ASSERT_EQ(ffm_store__add_managed_faults(s, run, 5, UINT64_MAX, 0), -EINVAL);
	ASSERT_EQ(ffm_store__put_stack(s, 0xabcdef0123456789ull, fr, 2, &stack), 1);
	ASSERT_EQ(ffm_store__put_stack(s, 0xabcdef0123456789ull, fr, 2, &stack2), 0);
	ASSERT_EQ(stack, stack2);
	ASSERT_OK(ffm_store__put_frame(s, &late, &frame_id));
	ASSERT(frame_id > 0);
	ASSERT_OK(ffm_store__flush(s));
	{
		uint64_t got[2][3] = { 0 };

		ASSERT_OK(ffm_store__for_each_thread_waits(s, run, thread_waits_cb, got));
		ASSERT_EQ(got[0][0], 11); /* tid 11: 7 waits, 4 slept; tid 12: 4, 0 */
		ASSERT_EQ(got[0][1], 7);
		ASSERT_EQ(got[0][2], 4);
		ASSERT_EQ(got[1][0], 12);
		ASSERT_EQ(got[1][1], 4);
		ASSERT_EQ(got[1][2], 0);
	}
	{
		uint64_t got[2][2] = { 0 };

		ASSERT_OK(ffm_store__for_each_managed_faults(s, run, managed_faults_cb, got));
		ASSERT_EQ(got[0][0], 12); /* stack 4: 12 operations, 6144 faults; 5: 3, 0 */
		ASSERT_EQ(got[0][1], 6144);
		ASSERT_EQ(got[1][0], 3);
		ASSERT_EQ(got[1][1], 0);
	}

	/* 25 events with batches of 10: a concurrent reader sees whole batches only */
	ASSERT_OK(ffm_store__open(path, &ropts, &r));
	for (int i = 0; i < 25; i++) {
		struct ffm_store_event ev = {
			.run = run, .kind = FFM_EV_API, .api = 1, .tgid = 10, .tid = 11,
			.start_ns = 10000 - (uint64_t)i * 100, /* reverse time order */
			.dur_ns = 50, .wait_ns = 40, .bytes = 8, .dir = FFM_DIR_DTOH,
			.stream = 3, .src = 0xffff800000000000ull, .dst = 0x7f00, .stack = stack,
			.flags = 5,
		};
		ASSERT_OK(ffm_store__put_event(s, &ev, &ev_id));
	}
	ASSERT(ev_id > 0);
	ASSERT_EQ(count_events(r, run), 20);
	ASSERT_OK(ffm_store__flush(s));
	ASSERT_EQ(count_events(r, run), 25);
	ASSERT_OK(ffm_store__process_exit(s, run, 10, 99, 3));
	ASSERT_EQ(ffm_store__process_exit(s, run, 12345, 99, 3), -ENOENT);
	ASSERT_OK(ffm_store__add_drops(s, run, FFM_DROP_RINGBUF_FULL, 3));
	ASSERT_OK(ffm_store__add_drops(s, run, FFM_DROP_RINGBUF_FULL, 4));
	ASSERT_OK(ffm_store__add_drops(s, run, FFM_DROP_MAP_FULL, 1));
	ASSERT_EQ(ffm_store__add_drops(s, run, FFM_DROP__MAX, 1), -EINVAL);
	ASSERT_OK(ffm_store__put_xfer_hash(
		s,
		&(struct ffm_store_xfer_hash){ .run = run, .event = ev_id, .stack = stack,
					       .hash = 0xfedcba9876543210ull, .dst = 0x7f00,
					       .bytes = 8, .dup = FFM_DUP_SAME_DST },
		NULL));
	ASSERT_OK(ffm_store__put_sync_use(
		s,
		&(struct ffm_store_sync_use){ .run = run, .event = ev_id, .stack = stack,
					      .prot_lo = 0x1000, .prot_hi = 0x2000,
					      .use_delay_ns = -1, .flags = FFM_SYNC_USE_NONE },
		NULL));
	ASSERT_OK(ffm_store__run_end(s, run, 20000, 1.5, 0, FFM_RUN_DROPPED));
	ASSERT_OK(ffm_store__job_end(s, "1", FFM_JOB_DONE, 200));
	ASSERT_EQ(ffm_store__job_end(s, "2", FFM_JOB_DONE, 200), -ENOENT);
	s = ffm_store__free(s);

	/* everything back through the reader (opened before most of it was written) */
	ASSERT_OK(ffm_store__for_each_event(r, run, rt_event, &rt));
	ASSERT_EQ(rt.events, 25);
	ASSERT(rt.sorted);
	n = 0;
	ASSERT_EQ(ffm_store__for_each_event(r, run, stop_cb, &n), 77);
	ASSERT_EQ(n, 3);
	ASSERT_EQ(ffm_store__for_each_frame(r, stack, rt_frame, &rt), 2);
	ASSERT_EQ(rt.frames, 2);
	ASSERT_EQ(ffm_store__for_each_frame(r, 999, rt_frame, &rt), -ENOENT);
	ASSERT_OK(ffm_store__for_each_stack_agg(r, run, rt_agg, &rt));
	ASSERT_EQ(rt.aggs, 1);
	ASSERT_EQ(rt.agg_count, 25);
	ASSERT_EQ(rt.agg_wait, 25 * 40);
	ASSERT_OK(ffm_store__dup_transfers(r, run, &any));
	ASSERT_EQ(any, 1);
	ASSERT_OK(ffm_store__dup_transfers(r, run + 1, &any));
	ASSERT_EQ(any, 0);
	ASSERT_OK(ffm_store__for_each_api_name(r, rt_api, &rt));
	ASSERT_STREQ(rt.api1, "cuStreamSynchronize");
	free((void *)rt.api1);
	ASSERT_OK(ffm_store__get_drops(r, run, &drops));
	ASSERT_EQ(drops.count[FFM_DROP_RINGBUF_FULL], 7);
	ASSERT_EQ(drops.count[FFM_DROP_MAP_FULL], 1);
	ASSERT_EQ(drops.count[FFM_DROP_STACK_TOO_DEEP], 0);
	ASSERT_OK(ffm_store__get_run(r, run, &run_out));
	ASSERT_EQ(run_out.stage, 2);
	ASSERT_EQ(run_out.driver, drv_id);
	ASSERT_EQ(run_out.end_ns, 20000);
	ASSERT_NEAR(run_out.wall_s, 1.5, 1e-9);
	ASSERT_EQ(run_out.flags, FFM_RUN_DROPPED);
	ASSERT_EQ(ffm_store__get_run(r, run + 100, &run_out), -ENOENT);
	n = 0;
	ASSERT_OK(ffm_store__for_each_job(r, rt_job, &n));
	ASSERT_EQ(n, 1);
	n = 0;
	ASSERT_OK(ffm_store__for_each_xfer_hash(r, run, rt_xfer, &n));
	ASSERT_EQ(n, 1);
	n = 0;
	ASSERT_OK(ffm_store__for_each_sync_use(r, run, rt_sync, &n));
	ASSERT_EQ(n, 1);
	ASSERT_OK(ffm_store__stage_history(r, &hist));
	ASSERT_EQ(hist.runs[2], 1);
	ASSERT_EQ(hist.runs[1], 0);
	ASSERT_EQ(hist.last_run[2], run);
	ASSERT_EQ(hist.open_runs, 0);
	/* writes on a reader */
	ASSERT_EQ(ffm_store__put_thread(r, run, 1, 1), -EROFS);
	ASSERT_EQ(ffm_store__job_end(r, "1", FFM_JOB_DONE, 1), -EROFS);
	r = ffm_store__free(r);
}

struct ord {
	long n;
	uint64_t last;
	int64_t last_id;
	bool ok;
	struct ffm_store_event first;
};

static int ord_cb(const struct ffm_store_event *ev, void *ctx)
{
	struct ord *o = ctx;

	if (o->n && (ev->start_ns < o->last || (ev->start_ns == o->last && ev->id <= o->last_id)))
		o->ok = false;
	if (!o->n)
		o->first = *ev;
	o->last = ev->start_ns;
	o->last_id = ev->id;
	o->n++;
	return 0;
}

TEST(event_iteration_order_and_cursor)
{
	char *d = mktmp(), path[256];
	struct ffm_store *s = NULL;
	struct ffm_store_cursor *c = NULL;
	struct ffm_store_event ev;
	struct ord o = { .ok = true };
	int64_t run, run2;
	long n = 0;
	int r;

	snprintf(path, sizeof(path), "%s/o.db", d);
	run = new_store(path, &s);
	ASSERT_OK(ffm_store__run_begin(s, &(struct ffm_store_run){ .job_id = "1", .stage = 2 },
				       &run2));
	srand(1);
	for (int i = 0; i < 20000; i++) {
		struct ffm_store_event e = { .run = i % 2 ? run : run2, .kind = FFM_EV_LAUNCH,
					     .tgid = 0xfffffff0u, .tid = 0xfffffff1u,
					     .api = 0x12345678, .dir = 255,
					     .start_ns = (uint64_t)(rand() % 5000) + 1 };
		ASSERT_OK(ffm_store__put_event(s, &e, NULL));
	}
	/* the writer's own reads see its unflushed batch */
	ASSERT_OK(ffm_store__for_each_event(s, run, ord_cb, &o));
	ASSERT_EQ(o.n, 10000);
	ASSERT(o.ok);
	ASSERT_EQ(o.first.tgid, 0xfffffff0u);
	ASSERT_EQ(o.first.tid, 0xfffffff1u);
	ASSERT_EQ(o.first.api, 0x12345678);
	ASSERT_EQ(o.first.dir, 255);
	ASSERT_EQ(o.first.kind, FFM_EV_LAUNCH);
	ASSERT_EQ(ffm_store__put_event(s, &(struct ffm_store_event){ .run = run, .kind = 256 },
				       NULL),
		  -EINVAL);
	s = ffm_store__free(s);

	ASSERT_OK(ffm_store__open(path, &ropts, &s));
	ASSERT_OK(ffm_store_cursor__new(s, run2, 1000, 1999, &c));
	while ((r = ffm_store_cursor__next(c, &ev)) == 1) {
		ASSERT(ev.start_ns >= 1000 && ev.start_ns <= 1999);
		ASSERT_EQ(ev.run, run2);
		n++;
	}
	ASSERT_EQ(r, 0);
	ASSERT_EQ(ffm_store_cursor__next(c, &ev), 0);
	ASSERT(n > 1500 && n < 2500);
	c = ffm_store_cursor__free(c);
	ASSERT(c == NULL);
	s = ffm_store__free(s);
}

struct aggsum {
	uint64_t count, dur, wait, bytes;
	int rows;
};

static int aggsum_cb(const struct ffm_store_stack_agg *a, void *ctx)
{
	struct aggsum *g = ctx;

	g->rows++;
	g->count += a->count;
	g->dur += a->dur_ns;
	g->wait += a->wait_ns;
	g->bytes += a->bytes;
	if (a->stack == 7) {
		/* stack 7 got every 10000th event below */
		ASSERT_EQ(a->count, 3);
	}
	return 0;
}

TEST(per_stack_aggregates)
{
	char *d = mktmp(), path[256];
	struct ffm_store_opts o = wopts;
	struct ffm_store *s = NULL;
	struct aggsum g = { 0 };
	uint64_t dur = 0, wait = 0, bytes = 0;
	int64_t run;
	const int n = 30000;

	snprintf(path, sizeof(path), "%s/a.db", d);
	o.batch_events = 7000; /* several commits, and the in-memory totals spill mid-batch */
	ASSERT_OK(ffm_store__open(path, &o, &s));
	ASSERT_OK(ffm_store__job_begin(s, &(struct ffm_store_job){ .job_id = "1" }, NULL));
	ASSERT_OK(ffm_store__run_begin(s, &(struct ffm_store_run){ .job_id = "1", .stage = 2 },
				       &run));
	for (int i = 0; i < n; i++) {
		/* 9000 distinct stacks: more than the in-memory table holds */
		struct ffm_store_event e = { .run = run, .kind = FFM_EV_TRANSFER, .api = 3,
					     .start_ns = (uint64_t)i, .dur_ns = (uint64_t)i % 100,
					     .wait_ns = (uint64_t)i % 10, .bytes = 4096,
					     .stack = i % 10000 == 0 ? 7 : 100 + i % 9000 };
		dur += e.dur_ns;
		wait += e.wait_ns;
		bytes += e.bytes;
		ASSERT_OK(ffm_store__put_event(s, &e, NULL));
	}
	ASSERT_OK(ffm_store__flush(s));
	ASSERT_OK(ffm_store__for_each_stack_agg(s, run, aggsum_cb, &g));
	ASSERT_EQ(g.count, n);
	ASSERT_EQ(g.dur, dur);
	ASSERT_EQ(g.wait, wait);
	ASSERT_EQ(g.bytes, bytes);
	ASSERT_EQ(g.rows, 9001);
	s = ffm_store__free(s);
}

/* A stage-1 run's totals are its waits: a monitoring run's timed copies hold them again. */
TEST(stage1_aggregates_are_waits)
{
	char *d = mktmp(), path[256];
	struct ffm_store *s = NULL;
	struct aggsum g = { 0 };
	int64_t run[2];

	snprintf(path, sizeof(path), "%s/a.db", d);
	ASSERT_OK(ffm_store__open(path, &wopts, &s));
	ASSERT_OK(ffm_store__job_begin(s, &(struct ffm_store_job){ .job_id = "1" }, NULL));
	for (int k = 0; k < 2; k++) {
		ASSERT_OK(ffm_store__run_begin(s, &(struct ffm_store_run){ .job_id = "1",
					       .stage = k ? 2 : 1 }, &run[k]));
		ASSERT_OK(ffm_store__put_event(s, &(struct ffm_store_event){ .run = run[k],
					       .kind = FFM_EV_WAIT, .start_ns = 10, .dur_ns = 5, .stack = 8 }, NULL));
		ASSERT_OK(ffm_store__put_event(s, &(struct ffm_store_event){ .run = run[k],
					       .kind = FFM_EV_TRANSFER, .api = 3, .start_ns = 9, .dur_ns = 9,
					       .wait_ns = 5, .stack = 8 }, NULL));
	}
	ASSERT_OK(ffm_store__flush(s));
	ASSERT_OK(ffm_store__for_each_stack_agg(s, run[0], aggsum_cb, &g));
	ASSERT_EQ(g.rows, 1);
	ASSERT_EQ(g.wait, 0); /* a wait record's time is its dur */
	ASSERT_EQ(g.dur, 5);
	memset(&g, 0, sizeof(g));
	ASSERT_OK(ffm_store__for_each_stack_agg(s, run[1], aggsum_cb, &g));
	ASSERT_EQ(g.rows, 2);
	s = ffm_store__free(s);
}

/* CPU samples add up per (run, stack, state); a state outside the enum is refused. */
static int cpu_sum_cb(const struct ffm_store_cpu_samples *x, void *ctx)
{
	uint64_t *v = ctx;

	v[0]++;
	v[1] += x->n;
	v[2] += x->ns;
	if (x->stack == 9 && x->state == FFM_SAMPLE_CALL)
		v[3] = x->ns;
	return 0;
}

TEST(cpu_samples_add_up)
{
	char *d = mktmp(), path[256];
	struct ffm_store *s = NULL;
	uint64_t v[4] = { 0 };
	int64_t run, other;

	snprintf(path, sizeof(path), "%s/c.db", d);
	run = new_store(path, &s);
	ASSERT_OK(ffm_store__run_begin(s, &(struct ffm_store_run){ .job_id = "1", .stage = 2 },
				       &other));
	for (int i = 0; i < 10; i++)
		ASSERT_OK(ffm_store__add_cpu_samples(s, run, &(struct ffm_store_cpu_samples){
			.stack = 7 + i % 3, .state = (uint32_t)(i % 2), .n = 2, .ns = 1000 }));
	ASSERT_OK(ffm_store__add_cpu_samples(s, other, &(struct ffm_store_cpu_samples){
		.stack = 7, .state = 0, .n = 1, .ns = 5 }));
	ASSERT_EQ(ffm_store__add_cpu_samples(s, run, &(struct ffm_store_cpu_samples){
		.stack = 7, .state = 3, .n = 1, .ns = 5 }), -EINVAL);
	ASSERT_OK(ffm_store__flush(s));
	ASSERT_OK(ffm_store__for_each_cpu_samples(s, run, cpu_sum_cb, v));
	ASSERT_EQ(v[0], 6); /* 3 stacks x 2 states */
	ASSERT_EQ(v[1], 20);
	ASSERT_EQ(v[2], 10000);
	ASSERT_EQ(v[3], 1000); /* stack 9 (i = 2, 5, 8): state 1 once (i = 5) */
	s = ffm_store__free(s);
}

/*
 * SIGKILL the writer mid-ingest: the file must pass integrity_check and hold every batch that
 * was committed (the child reports each commit through a pipe after it returns), and only
 * whole batches.
 */
TEST(sigkill_durability)
{
	char *d = mktmp(), path[256];
	struct ffm_store *s = NULL;
	struct ord o = { .ok = true };
	long committed = 0, got;
	int pfd[2];
	pid_t pid;
	int64_t run;

	snprintf(path, sizeof(path), "%s/k.db", d);
	run = new_store(path, &s);
	s = ffm_store__free(s);
	ASSERT_OK(pipe(pfd));
	pid = fork();
	ASSERT(pid >= 0);
	if (pid == 0) {
		struct ffm_store_opts wo = wopts;
		long i = 0;

		close(pfd[0]);
		wo.batch_events = 1000;
		wo.batch_ms = 1000000;
		if (ffm_store__open(path, &wo, &s))
			_exit(1);
		for (;;) {
			struct ffm_store_event e = { .run = run, .kind = FFM_EV_WAIT,
						     .start_ns = (uint64_t)i + 1, .dur_ns = 1 };
			if (ffm_store__put_event(s, &e, NULL))
				_exit(2);
			if (++i % 1000 == 0 && write(pfd[1], &i, sizeof(i)) != sizeof(i))
				_exit(3);
		}
	}
	close(pfd[1]);
	while (committed < 50000 && read(pfd[0], &got, sizeof(got)) == sizeof(got))
		committed = got;
	usleep(3000); /* let it be somewhere inside the next batch */
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	close(pfd[0]);
	ASSERT(committed >= 50000);

	ASSERT_OK(ffm_store__open(path, &wopts, &s));
	ASSERT_OK(ffm_store__check(s, true));
	ASSERT_OK(ffm_store__for_each_event(s, run, ord_cb, &o));
	ASSERT(o.ok);
	ASSERT(o.n >= committed);
	ASSERT_EQ(o.n % 1000, 0);
	ASSERT_EQ(o.last, (uint64_t)o.n); /* 1..n, none missing */
	/* the writer can go on after the crash */
	put_events(s, run, 10, 1ull << 40);
	ASSERT_OK(ffm_store__flush(s));
	ASSERT_EQ(count_events(s, run), o.n + 10);
	s = ffm_store__free(s);
}

TEST(key_file_names)
{
	static const char *keys[] = { "../x", "../../etc/passwd", "a/b", "a%2Fb", ".hidden", "..",
				      ".", "sp ace", "ünï", "-", "x.db", NULL };
	char *d = mktmp(), name[256], path[4400], names[16][256];
	char longkey[400];
	struct ffm_store *s = NULL;
	struct ffm_store_key k = { .uid = 0 }, got;
	int i, r;

	for (i = 0; keys[i]; i++) {
		r = ffm_store__key_file_name(keys[i], names[i], sizeof(names[i]));
		ASSERT(r > 3);
		ASSERT(!strchr(names[i], '/'));
		ASSERT(names[i][0] != '.');
		for (int j = 0; j < i; j++)
			ASSERT(strcmp(names[i], names[j])); /* injective */
		k.key = keys[i];
		ASSERT_OK(ffm_store__open_key(d, &k, &wopts, &s));
		snprintf(path, sizeof(path), "%s/keys/%s", d, names[i]);
		ASSERT_STREQ(ffm_store__path(s), path);
		ASSERT_OK(ffm_store__key(s, &got));
		ASSERT_STREQ(got.key, keys[i]);
		s = ffm_store__free(s);
		ASSERT_OK(access(path, F_OK));
	}
	ASSERT_STREQ(names[0], "%2e.%2fx.db");
	/* nothing escaped the keys directory */
	snprintf(path, sizeof(path), "%s/x.db", d);
	ASSERT(access(path, F_OK) < 0);
	ASSERT_EQ(ffm_store__key_file_name("", name, sizeof(name)), -EINVAL);
	ASSERT_EQ(ffm_store__key_file_name("abc", name, 5), -ENAMETOOLONG);

	/* long keys: bounded name, distinct for keys that differ only at the end */
	memset(longkey, '/', sizeof(longkey) - 1);
	longkey[sizeof(longkey) - 1] = 0;
	r = ffm_store__key_file_name(longkey, names[0], sizeof(names[0]));
	ASSERT(r > 0 && r < 200);
	longkey[sizeof(longkey) - 2] = 'z';
	ffm_store__key_file_name(longkey, names[1], sizeof(names[1]));
	ASSERT(strcmp(names[0], names[1]));
	k.key = longkey;
	ASSERT_OK(ffm_store__open_key(d, &k, &wopts, &s));
	s = ffm_store__free(s);
}

struct keylist {
	int good, bad;
};

static int keylist_cb(struct ffm_store *s, const char *path, const char *key, int err,
		      void *ctx)
{
	struct keylist *l = ctx;

	if (key)
		l->good++;
	else
		l->bad++;
	return 0;
}

TEST(find_job_across_keys)
{
	char *d = mktmp(), path[512];
	struct ffm_store *s = NULL;
	struct ffm_store_key k = { .uid = 1 }, got;
	struct keylist l = { 0 };
	static const struct {
		const char *key, *job;
		int64_t start;
	} rows[] = {
		{ "alpha", "100", 10 }, { "alpha", "101", 20 }, { "beta", "200", 30 },
		{ "gamma", "300", 40 }, { "gamma", "shared", 50 }, { "beta", "shared", 60 },
	};
	FILE *f;

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		k.key = rows[i].key;
		ASSERT_OK(ffm_store__open_key(d, &k, &wopts, &s));
		ASSERT_OK(ffm_store__job_begin(
			s, &(struct ffm_store_job){ .job_id = rows[i].job, .start_unix = rows[i].start },
			NULL));
		s = ffm_store__free(s);
	}
	/* junk in the directory is skipped, not fatal */
	snprintf(path, sizeof(path), "%s/keys/junk.db", d);
	f = fopen(path, "w");
	fputs("junk", f);
	fclose(f);

	ASSERT_OK(ffm_store__find_job(d, "200", &ropts, &s));
	ASSERT_OK(ffm_store__key(s, &got));
	ASSERT_STREQ(got.key, "beta");
	s = ffm_store__free(s);
	ASSERT_OK(ffm_store__find_job(d, "101", &ropts, &s));
	ASSERT_OK(ffm_store__key(s, &got));
	ASSERT_STREQ(got.key, "alpha");
	s = ffm_store__free(s);
	ASSERT_OK(ffm_store__find_job(d, "shared", &ropts, &s)); /* latest start wins */
	ASSERT_OK(ffm_store__key(s, &got));
	ASSERT_STREQ(got.key, "beta");
	s = ffm_store__free(s);
	ASSERT_EQ(ffm_store__find_job(d, "999", &ropts, &s), -ENOENT);
	ASSERT_EQ(ffm_store__find_job("/nonexistent-ffm", "1", &ropts, &s), -ENOENT);

	ASSERT_OK(ffm_store__for_each_key(d, keylist_cb, &l));
	ASSERT_EQ(l.good, 3);
	ASSERT_EQ(l.bad, 1);
}

TEST(stable_ids)
{
	struct ffm_store_frame f[3] = {
		{ .build_id = "0123abcd", .module = "/lib/libcuda.so.1", .offset = 0x1234 },
		{ .module = "/usr/bin/app", .offset = 0x42 },
		{ .offset = 7 },
	};

	/* Stores on disk hold these values: they never change. */
	ASSERT_EQ(ffm_store_api_id("cuCtxSynchronize"), 1572037212u);
	ASSERT_EQ(ffm_store_api_id("cuMemcpyDtoH"), 92564723u);
	ASSERT_EQ(ffm_store_api_id(""), 18652613u);
	ASSERT_EQ(ffm_store_stack_hash(f, 3), 0x1c23adf8cbcc35ccull);
	ASSERT(ffm_store_stack_hash(f, 0) != 0);
}

TEST(state_paths)
{
	char *d = mktmp(), buf[512], want[512];

	ASSERT(ffm_state_path(d, FFM_STATE_KEYS, NULL, buf, sizeof(buf)) > 0);
	snprintf(want, sizeof(want), "%s/keys", d);
	ASSERT_STREQ(buf, want);
	ASSERT(ffm_state_path(d, FFM_STATE_KEY, "a/b", buf, sizeof(buf)) > 0);
	snprintf(want, sizeof(want), "%s/keys/a%%2fb.db", d);
	ASSERT_STREQ(buf, want);
	ASSERT(ffm_state_path(d, FFM_STATE_DRIVERS, NULL, buf, sizeof(buf)) > 0);
	snprintf(want, sizeof(want), "%s/drivers", d);
	ASSERT_STREQ(buf, want);
	ASSERT(ffm_state_path(d, FFM_STATE_JOURNAL, NULL, buf, sizeof(buf)) > 0);
	snprintf(want, sizeof(want), "%s/ffmd-jobs", d);
	ASSERT_STREQ(buf, want);
	ASSERT(ffm_state_path(d, FFM_STATE_HOLDS, NULL, buf, sizeof(buf)) > 0);
	snprintf(want, sizeof(want), "%s/ffmd-held", d);
	ASSERT_STREQ(buf, want);
	ASSERT_EQ(ffm_state_path(d, FFM_STATE_KEY, "", buf, sizeof(buf)), -EINVAL);
	ASSERT_EQ(ffm_state_path(NULL, FFM_STATE_KEYS, NULL, buf, sizeof(buf)), -EINVAL);
	ASSERT_EQ(ffm_state_path(d, FFM_STATE_KEYS, NULL, buf, 8), -ENAMETOOLONG);

	/* a node's store root: the state directory until nodes/ exists */
	ASSERT(ffm_state_path(d, FFM_STATE_ROOT, "gpu01", buf, sizeof(buf)) > 0);
	ASSERT_STREQ(buf, d);
	ASSERT(ffm_state_path(d, FFM_STATE_NODES, NULL, buf, sizeof(buf)) > 0);
	ASSERT_OK(mkdir(buf, 0750));
	ASSERT(ffm_state_path(d, FFM_STATE_ROOT, "gpu01", buf, sizeof(buf)) > 0);
	snprintf(want, sizeof(want), "%s/nodes/gpu01", d);
	ASSERT_STREQ(buf, want);
	ASSERT(ffm_state_path(d, FFM_STATE_ROOT, "../a/b", buf, sizeof(buf)) > 0);
	snprintf(want, sizeof(want), "%s/nodes/_._a_b", d);
	ASSERT_STREQ(buf, want);
	ASSERT(ffm_state_path(d, FFM_STATE_ROOT, "", buf, sizeof(buf)) > 0);
	ASSERT_STREQ(buf, d);
	/* ffmd's own files are its node's: two nodes never share a journal */
	ASSERT(ffm_state_path(d, FFM_STATE_JOURNAL, "gpu01", buf, sizeof(buf)) > 0);
	snprintf(want, sizeof(want), "%s/nodes/gpu01/ffmd-jobs", d);
	ASSERT_STREQ(buf, want);
	ASSERT(ffm_state_path(d, FFM_STATE_HOLDS, "gpu01", buf, sizeof(buf)) > 0);
	snprintf(want, sizeof(want), "%s/nodes/gpu01/ffmd-held", d);
	ASSERT_STREQ(buf, want);
}

struct seen {
	char what[16][128];
	int n;
};

static int seen_store(const struct ffm_state_store *st, void *ctx)
{
	struct seen *v = ctx;

	if (v->n < 16)
		snprintf(v->what[v->n++], sizeof(v->what[0]), "%s:%s:%d", st->node ? st->node : "-",
			 st->key ? st->key : "?", st->err < 0);
	return 0;
}

static int seen_job(struct ffm_store *s, const char *node, void *ctx)
{
	struct seen *v = ctx;
	struct ffm_store_key k;

	ASSERT_OK(ffm_store__key(s, &k));
	if (v->n < 16)
		snprintf(v->what[v->n++], sizeof(v->what[0]), "%s:%s", node ? node : "-", k.key);
	ffm_store__free(s);
	return 0;
}

static int stop_job(struct ffm_store *s, const char *node, void *ctx)
{
	ffm_store__free(s);
	return -ECANCELED;
}

/* A store of @key under @root with job @job started at @start. */
/* A store of @key with job @job under the store root @root, published as its writer does. */
static void key_job(const char *root, const char *key, const char *job, int64_t start)
{
	struct ffm_store *s = NULL;
	uint32_t owner;

	ASSERT_OK(ffm_store__open_key(root, &(struct ffm_store_key){ .key = key }, &wopts, &s));
	ASSERT_OK(ffm_store__job_begin(s, &(struct ffm_store_job){ .job_id = job, .start_unix = start },
				       NULL));
	ASSERT_OK(ffm_store__publish(ffm_store__path(s), root, &owner));
	ASSERT_EQ(owner, 0);
	ffm_store__free(s);
}

TEST(state_stores_of_every_node)
{
	char *d = mktmp(), root[512], path[600];
	struct seen v = { 0 };
	FILE *f;

	/* an empty state directory, and one that is not there: no stores, no error */
	ASSERT_OK(ffm_state_for_each_store(d, seen_store, &v));
	ASSERT_OK(ffm_state_for_each_store("/nonexistent-ffm", seen_store, &v));
	ASSERT_EQ(v.n, 0);
	ASSERT_EQ(ffm_state_open_job(d, "j", &ropts, seen_job, &v), 0);

	key_job(d, "local", "j", 10);
	ASSERT(ffm_state_path(d, FFM_STATE_NODES, NULL, path, sizeof(path)) > 0);
	ASSERT_OK(mkdir(path, 0750));
	snprintf(path + strlen(path), 64, "/gpu00"); /* a node being set up: no keys/ yet */
	ASSERT_OK(mkdir(path, 0750));
	ASSERT(ffm_state_path(d, FFM_STATE_ROOT, "gpu02", root, sizeof(root)) > 0);
	key_job(root, "k", "j", 30);
	key_job(root, "other", "x", 40);
	ASSERT(ffm_state_path(d, FFM_STATE_ROOT, "gpu01", root, sizeof(root)) > 0);
	key_job(root, "k", "j", 20);
	key_job(root, "k2", "j", 25); /* a node holding two keys of the job: the later one */
	/* a node's stores are read from their published copies */
	ASSERT(ffm_state_path(root, FFM_STATE_DONE, NULL, path, sizeof(path)) > 0);
	strcat(path, "/0/junk.db");
	ASSERT((f = fopen(path, "w")));
	fputs("junk", f);
	fclose(f);

	ASSERT_OK(ffm_state_for_each_store(d, seen_store, &v));
	ASSERT_EQ(v.n, 6);
	ASSERT_STREQ(v.what[0], "-:local:0");
	/* nodes in name order; within a node, directory order */
	for (int i = 1; i < 4; i++)
		ASSERT(!strncmp(v.what[i], "gpu01:", 6));
	for (int i = 4; i < 6; i++)
		ASSERT(!strncmp(v.what[i], "gpu02:", 6));
	v.n = 0;
	ASSERT_EQ(ffm_state_open_job(d, "j", &ropts, seen_job, &v), 3);
	ASSERT_EQ(v.n, 3);
	ASSERT_STREQ(v.what[0], "-:local");
	ASSERT_STREQ(v.what[1], "gpu01:k2");
	ASSERT_STREQ(v.what[2], "gpu02:k");
	v.n = 0;
	ASSERT_EQ(ffm_state_open_job(d, "x", &ropts, seen_job, &v), 1);
	ASSERT_STREQ(v.what[0], "gpu02:other");
	ASSERT_EQ(ffm_state_open_job(d, "none", &ropts, seen_job, &v), 0);
	ASSERT_EQ(ffm_state_open_job(d, "j", &ropts, stop_job, &v), -ECANCELED);
}

static int count_jobs(const struct ffm_store_job_info *j, void *ctx)
{
	(void)j;
	++*(int *)ctx;
	return 0;
}

/* A published copy: rollback mode, 0640, the owner's ACL; opened immutable it makes no file. */
TEST(published_copies)
{
	char *d = mktmp(), path[600], side[640];
	struct ffm_store_opts io = { .sz = sizeof(io), .immutable = true };
	struct ffm_store_key k = { .key = "pub", .uid = 4242 };
	unsigned char h[20], acl[64];
	struct ffm_store *s = NULL;
	uint32_t owner = 1;
	struct stat st;
	int fd, jobs = 0;
	ssize_t n;

	ASSERT_OK(ffm_store__open_key(d, &k, &wopts, &s));
	ASSERT_OK(ffm_store__job_begin(s, &(struct ffm_store_job){ .job_id = "j", .uid = 4242 }, NULL));
	/* the store root of an admin group (setgid): the copies are that group's */
	ASSERT_OK(chown(d, (uid_t)-1, 4243));
	ASSERT_OK(chmod(d, 02751));
	ASSERT_OK(ffm_store__publish(ffm_store__path(s), d, &owner));
	ASSERT_EQ(owner, 4242);
	snprintf(path, sizeof(path), "%s/done/4242/pub@4242.db", d);
	ASSERT_OK(stat(path, &st));
	ASSERT_EQ(st.st_mode & 07777, 0640);
	ASSERT_EQ(st.st_uid, 0);
	ASSERT_EQ(st.st_gid, 4243);
	ASSERT((fd = open(path, O_RDONLY)) >= 0);
	ASSERT_EQ(pread(fd, h, sizeof(h), 0), (ssize_t)sizeof(h));
	close(fd);
	ASSERT(h[18] == 1 && h[19] == 1); /* not WAL */
	/* user 4242 named in the file's ACL with read only (kernel layout: tag 2, perm 4, id) */
	n = getxattr(path, "system.posix_acl_access", acl, sizeof(acl));
	ASSERT_EQ(n, 44);
	ASSERT(acl[12] == 2 && acl[14] == 4 && acl[16] == (4242 & 0xff) && acl[17] == (4242 >> 8));
	/* done/ lists to root and the group only; the owner may go through it (search only) */
	snprintf(side, sizeof(side), "%s/done", d);
	ASSERT_OK(stat(side, &st));
	ASSERT_EQ(st.st_mode & 07777, 02750);
	ASSERT(getxattr(side, "system.posix_acl_access", acl, sizeof(acl)) == 44);
	ASSERT(acl[12] == 2 && acl[14] == 1 && acl[16] == (4242 & 0xff) && acl[17] == (4242 >> 8));
	snprintf(side, sizeof(side), "%s/done/4242", d);
	ASSERT_OK(stat(side, &st));
	ASSERT_EQ(st.st_mode & 07777, 02750);
	ASSERT(getxattr(side, "system.posix_acl_access", acl, sizeof(acl)) == 44);

	/* a later job of the key: the copy is replaced whole, the reader of the old one unharmed */
	struct ffm_store *old = NULL;
	ASSERT_OK(ffm_store__open(path, &io, &old));
	ASSERT_OK(ffm_store__job_begin(s, &(struct ffm_store_job){ .job_id = "j2", .uid = 4242 }, NULL));
	ASSERT_OK(ffm_store__publish(ffm_store__path(s), d, &owner));
	ASSERT_OK(ffm_store__for_each_job(old, count_jobs, &jobs));
	ASSERT_EQ(jobs, 1);
	old = ffm_store__free(old);
	ASSERT_OK(ffm_store__open(path, &io, &old));
	jobs = 0;
	ASSERT_OK(ffm_store__for_each_job(old, count_jobs, &jobs));
	ASSERT_EQ(jobs, 2);
	old = ffm_store__free(old);
	for (const char *x = "-wal\0-shm\0-journal\0"; *x; x += strlen(x) + 1) {
		snprintf(side, sizeof(side), "%s%s", path, x);
		ASSERT(access(side, F_OK) < 0);
	}

	/* a job of another uid in the store: the copy is root's alone */
	ASSERT_OK(ffm_store__job_begin(s, &(struct ffm_store_job){ .job_id = "x", .uid = 7 }, NULL));
	ASSERT_OK(ffm_store__publish(ffm_store__path(s), d, &owner));
	ASSERT_EQ(owner, 0);
	snprintf(side, sizeof(side), "%s/done/0/pub@4242.db", d);
	ASSERT_OK(access(side, F_OK));
	ASSERT(getxattr(side, "system.posix_acl_access", acl, sizeof(acl)) < 0);
	s = ffm_store__free(s);

	/* an owner's file that names another owner is not written as theirs */
	snprintf(path, sizeof(path), "%s/keys/pub@4242.db", d);
	snprintf(side, sizeof(side), "%s/keys/pub@99.db", d);
	ASSERT_OK(rename(path, side));
	k.uid = 99;
	ASSERT_EQ(ffm_store__open_key(d, &k, &wopts, &s), -EEXIST);
	ASSERT_OK(ffm_store__open_key(d, &k, &ropts, &s));
	s = ffm_store__free(s);
	ASSERT_EQ(ffm_store__owner_file_name("a@b", 5, (char *)acl, sizeof(acl)), 10);
	ASSERT_STREQ((char *)acl, "a%40b@5.db");
	ASSERT_EQ(ffm_store__owner_file_name("a", 0, (char *)acl, sizeof(acl)), 4);
}

TEST(stage_history)
{
	char *d = mktmp(), path[256];
	struct ffm_store *s = NULL;
	struct ffm_store_stage_history h;
	int64_t r1, r2, r3;

	snprintf(path, sizeof(path), "%s/h.db", d);
	r1 = new_store(path, &s);
	ASSERT_OK(ffm_store__stage_history(s, &h));
	ASSERT_EQ(h.open_runs, 1);
	ASSERT_EQ(h.runs[1], 0);
	ASSERT_OK(ffm_store__run_end(s, r1, 5, 1.0, 0, 0));
	ASSERT_OK(ffm_store__run_begin(s, &(struct ffm_store_run){ .job_id = "1", .stage = 2 }, &r2));
	ASSERT_OK(ffm_store__run_end(s, r2, 5, 1.0, 0, FFM_RUN_PARTIAL));
	ASSERT_OK(ffm_store__run_begin(s, &(struct ffm_store_run){ .job_id = "1", .stage = 2 }, &r3));
	ASSERT_OK(ffm_store__run_end(s, r3, 5, 1.0, 0, 0));
	ASSERT_OK(ffm_store__stage_history(s, &h));
	ASSERT_EQ(h.open_runs, 0);
	ASSERT_EQ(h.runs[1], 1);
	ASSERT_EQ(h.runs[2], 2);
	ASSERT_EQ(h.partial[2], 1);
	ASSERT_EQ(h.last_run[2], r3);
	ASSERT_EQ(h.runs[3], 0);
	ASSERT_EQ(h.last_run[3], 0);
	s = ffm_store__free(s);
}

TEST(strerror_and_errno_mapping)
{
	ASSERT(strstr(ffm_store__strerror(-ENOTSUP), "newer"));
	{
		char up[32];

		snprintf(up, sizeof(up), "up to %d", FFM_STORE_SCHEMA_VERSION);
		ASSERT(strstr(ffm_store__strerror(-ENOTSUP), up));
	}
	ASSERT(strstr(ffm_store__strerror(-EPROTO), "not an ffm store"));
	ASSERT(strstr(ffm_store__strerror(EBADMSG), "truncated"));
	ASSERT(ffm_store__strerror(-ENOENT));
}

TEST_MAIN()
