/* SPDX-License-Identifier: MIT */
/*
 * Internals of store/: shared by store.c (open, migrate), ingest.c (batched writes), jobs.c
 * (immediate writes), layout.c (where the files are) and query.c (reads).
 */
#ifndef FFM_STORE_INT_H
#define FFM_STORE_INT_H

#include <sqlite3.h>
#include <time.h>

#include "store/ffm_store.h"

#define FFM_STORE_APP_ID 1179012435 /* 'FFMS' */

extern const char *const ffm_store_migrations[FFM_STORE_SCHEMA_VERSION];

/* Cached statements (prepared on first use, SQLITE_PREPARE_PERSISTENT). */
enum st {
	ST_EVENT,
	ST_EVENT_CHUNK,
	ST_SEQ_GET,
	ST_SEQ_SET,
	ST_AGG_UPSERT,
	ST_THREAD,
	ST_THREAD_WAITS,
	ST_MANAGED_FAULTS,
	ST_PROCESS,
	ST_PROCESS_EXIT,
	ST_FRAME_UPSERT,
	ST_STACK_FIND,
	ST_STACK_INSERT,
	ST_STACK_FRAME,
	ST_DROPS,
	ST_XFER,
	ST_SYNC_USE,
	ST_SAMPLE,
	ST_CPU_SAMPLES,
	ST__MAX,
};

/* One entry of the per-batch stack totals (open addressing, key (run, stack, kind, api)). */
struct agg_ent {
	int64_t run, stack;
	uint32_t kind, api;
	uint64_t count, dur_ns, wait_ns, bytes;
	bool used;
};

/* Events are inserted EV_CHUNK rows per statement: per-statement overhead dominates otherwise. */
#define EV_CHUNK 64
#define EV_COLS 14

#define AGG_CAP 8192 /* power of two; spilled into stack_stats at 3/4 full and on commit */

struct ffm_store {
	int refs; /* ffm_store__ref */
	sqlite3 *db;
	char *path;
	struct ffm_store_opts opts;
	int version;
	bool in_txn;
	uint32_t pending;
	uint64_t batch_start_ms;
	sqlite3_stmt *st[ST__MAX];
	int64_t next_event; /* next event id, valid while in_txn */
	int64_t seq_event;  /* seq('events') as read at batch begin */
	uint32_t evn;	    /* events buffered in ev[] (part of the open batch) */
	struct ffm_store_event ev[EV_CHUNK];
	struct agg_ent *agg;
	uint32_t agg_n;
	struct ffm_store_key key; /* the key row, loaded on demand (strings owned) */
};

int ffm_store_err(sqlite3 *db, int rc);
int ffm_store_stmt(struct ffm_store *s, enum st which, sqlite3_stmt **ret);
int ffm_store_exec(struct ffm_store *s, const char *sql);
/* Write buffered events into the open transaction (so this connection's reads see them). */
int ffm_store_drain(struct ffm_store *s);

/* opts with its defaults filled in (in may be NULL or an older, shorter struct). */
void ffm_store_opts_copy(struct ffm_store_opts *o, const struct ffm_store_opts *in);

static inline sqlite3_int64 i64(uint64_t v)
{
	return (sqlite3_int64)v;
}

/* Step a cached write statement to completion and reset it. */
static inline int step_done(struct ffm_store *s, sqlite3_stmt *st)
{
	int rc = sqlite3_step(st);

	sqlite3_reset(st);
	return rc == SQLITE_DONE || rc == SQLITE_ROW ? 0 : ffm_store_err(s->db, rc);
}

static inline void bind_text(sqlite3_stmt *st, int i, const char *v)
{
	if (v)
		sqlite3_bind_text(st, i, v, -1, SQLITE_STATIC);
	else
		sqlite3_bind_null(st, i);
}

/* Integers bound to ?first, ?first+1, ...: BIND_I64(st, 1, run, stack, (u64 as its bits)). */
static inline void bind_i64s(sqlite3_stmt *st, int first, const int64_t *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		sqlite3_bind_int64(st, first + (int)i, v[i]);
}
#define BIND_I64(st, first, ...)                                                                   \
	bind_i64s(st, first, (const int64_t[]){ __VA_ARGS__ },                                      \
		  sizeof((const int64_t[]){ __VA_ARGS__ }) / sizeof(int64_t))

static inline uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

#endif
