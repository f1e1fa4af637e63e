/* SPDX-License-Identifier: MIT */
/*
 * Writing events and what comes with them (processes, threads, frames, stacks, drops, stage 3/4
 * rows) in batches: one open transaction committed every batch_events puts or batch_ms, events
 * buffered EV_CHUNK at a time, per-stack totals kept in memory until the batch spills them
 * (see Durability and Ingest rate in ffm_store.h).
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/store_int.h"

/*
 * Events go in with OR ROLLBACK: a statement that can only fail as a whole needs no statement
 * journal, and writing one (every page a 64-row insert touches, copied to a temp file) cost
 * half the ingest rate. A failing event insert discards the open batch, which is what
 * put_event does on any error anyway.
 */
static const char *const stmt_sql[ST__MAX] = {
	[ST_EVENT] = "INSERT OR ROLLBACK INTO events(run, start_ns, id, dur_ns, wait_ns, info, pid, bytes,"
		     " stream, src, dst, stack, flags, probe_ns)"
		     " VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
	[ST_EVENT_CHUNK] = NULL, /* built by event_chunk_sql() */
	[ST_SEQ_GET] = "SELECT next FROM seq WHERE name = 'events'",
	[ST_SEQ_SET] = "UPDATE seq SET next = ?1 WHERE name = 'events'",
	[ST_AGG_UPSERT] = "INSERT INTO stack_stats(run, stack, kind, api, count, dur_ns, wait_ns,"
			  " bytes) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"
			  " ON CONFLICT(run, stack, kind, api) DO UPDATE SET"
			  " count = count + excluded.count, dur_ns = dur_ns + excluded.dur_ns,"
			  " wait_ns = wait_ns + excluded.wait_ns, bytes = bytes + excluded.bytes",
	[ST_THREAD] = "INSERT OR IGNORE INTO threads(run, tgid, tid) VALUES(?1, ?2, ?3)",
	[ST_THREAD_WAITS] = "INSERT INTO threads(run, tgid, tid, waits, waits_slept)"
			    " VALUES(?1, ?2, ?3, ?4, ?5) ON CONFLICT(run, tgid, tid) DO UPDATE SET"
			    " waits = waits + excluded.waits,"
			    " waits_slept = waits_slept + excluded.waits_slept",
	[ST_MANAGED_FAULTS] = "INSERT INTO managed_faults(run, stack, ops, faults)"
			      " VALUES(?1, ?2, ?3, ?4) ON CONFLICT(run, stack) DO UPDATE SET"
			      " ops = ops + excluded.ops, faults = faults + excluded.faults",
	[ST_PROCESS] = "INSERT INTO processes(run, tgid, ptgid, exe, start_ns, end_ns, exit_code)"
		       " VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7)",
	[ST_PROCESS_EXIT] = "UPDATE processes SET end_ns = ?3, exit_code = ?4 WHERE id ="
			    " (SELECT id FROM processes WHERE run = ?1 AND tgid = ?2"
			    "  ORDER BY start_ns DESC, id DESC LIMIT 1)",
	[ST_FRAME_UPSERT] = "INSERT INTO frames(build_id, offset, module, func, demangled, folded,"
			    " file, line, inlined) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"
			    " ON CONFLICT(build_id, offset, inlined) DO UPDATE SET"
			    " module = coalesce(module, excluded.module),"
			    " func = coalesce(excluded.func, func),"
			    " demangled = coalesce(excluded.demangled, demangled),"
			    " folded = coalesce(excluded.folded, folded),"
			    " file = coalesce(excluded.file, file),"
			    " line = CASE WHEN excluded.line != 0 THEN excluded.line ELSE line END"
			    " RETURNING id",
	[ST_STACK_FIND] = "SELECT id FROM stacks WHERE hash = ?1",
	[ST_STACK_INSERT] = "INSERT INTO stacks(hash, nframes) VALUES(?1, ?2)",
	[ST_STACK_FRAME] = "INSERT INTO stack_frames(stack, depth, frame) VALUES(?1, ?2, ?3)",
	[ST_DROPS] = "INSERT INTO drops(run, reason, count) VALUES(?1, ?2, ?3)"
		     " ON CONFLICT(run, reason) DO UPDATE SET count = count + excluded.count",
	[ST_XFER] = "INSERT INTO xfer_hashes(run, event, stack, hash, dst, bytes, first_event,"
		    " first_stack, dup) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
	[ST_SYNC_USE] = "INSERT INTO sync_uses(run, event, stack, prot_lo, prot_hi, use_addr,"
			" use_stack, use_frame, use_delay_ns, flags, watched_bytes, covered_bytes)"
			" VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
	[ST_SAMPLE] = "INSERT OR REPLACE INTO sample_spans(run, tgid, kind, start_ns, end_ns, on_ns)"
		      " VALUES(?1, ?2, ?3, ?4, ?5, ?6)",
	[ST_CPU_SAMPLES] = "INSERT INTO cpu_samples(run, stack, state, n, ns) VALUES(?1, ?2, ?3, ?4, ?5)"
			   " ON CONFLICT(run, stack, state) DO UPDATE SET n = n + excluded.n,"
			   " ns = ns + excluded.ns",
};

/* The ST_EVENT insert with EV_CHUNK row tuples. Caller frees. */
static char *event_chunk_sql(void)
{
	static const char row[] = "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";
	const char *head = stmt_sql[ST_EVENT];
	size_t hl = strlen(head) - (sizeof(row) - 1), n = 0;
	char *q;

	_Static_assert(sizeof(row) == EV_COLS * 3 + 1, "row tuple matches EV_COLS");
	q = malloc(hl + EV_CHUNK * sizeof(row) + 1);
	if (!q)
		return NULL;
	memcpy(q, head, hl);
	n = hl;
	for (int i = 0; i < EV_CHUNK; i++) {
		if (i)
			q[n++] = ',';
		memcpy(q + n, row, sizeof(row) - 1);
		n += sizeof(row) - 1;
	}
	q[n] = 0;
	return q;
}

int ffm_store_stmt(struct ffm_store *s, enum st which, sqlite3_stmt **ret)
{
	char *sql = NULL;
	int rc;

	if (!s->st[which]) {
		if (which == ST_EVENT_CHUNK && !(sql = event_chunk_sql()))
			return -ENOMEM;
		rc = sqlite3_prepare_v3(s->db, sql ? sql : stmt_sql[which], -1,
					SQLITE_PREPARE_PERSISTENT, &s->st[which], NULL);
		free(sql);
		if (rc != SQLITE_OK)
			return ffm_store_err(s->db, rc);
	}
	*ret = s->st[which];
	return 0;
}

/* ---- batched writing -------------------------------------------------------------------- */

static int agg_spill(struct ffm_store *s)
{
	sqlite3_stmt *st;
	int err;

	if (!s->agg_n)
		return 0;
	err = ffm_store_stmt(s, ST_AGG_UPSERT, &st);
	if (err)
		return err;
	for (uint32_t i = 0; i < AGG_CAP && s->agg_n; i++) {
		struct agg_ent *e = &s->agg[i];
		if (!e->used)
			continue;
		BIND_I64(st, 1, e->run, e->stack, e->kind, e->api, e->count, e->dur_ns, e->wait_ns,
			 e->bytes);
		err = step_done(s, st);
		if (err)
			return err;
		e->used = false;
		s->agg_n--;
	}
	return 0;
}

static int agg_add(struct ffm_store *s, const struct ffm_store_event *ev)
{
	uint64_t h = (uint64_t)ev->run * 0x9e3779b97f4a7c15ull ^
		     (uint64_t)ev->stack * 0xc2b2ae3d27d4eb4full ^
		     ((uint64_t)ev->kind << 32 | ev->api) * 0x165667b19e3779f9ull;
	uint32_t i = (uint32_t)(h >> 40) & (AGG_CAP - 1);
	struct agg_ent *e;
	int err;

	for (;; i = (i + 1) & (AGG_CAP - 1)) {
		e = &s->agg[i];
		if (!e->used)
			break;
		if (e->run == ev->run && e->stack == ev->stack && e->kind == ev->kind &&
		    e->api == ev->api)
			goto add;
	}
	if (s->agg_n >= AGG_CAP * 3 / 4) {
		err = agg_spill(s);
		if (err)
			return err;
		return agg_add(s, ev);
	}
	*e = (struct agg_ent){ .run = ev->run, .stack = ev->stack, .kind = ev->kind,
			       .api = ev->api, .used = true };
	s->agg_n++;
add:
	e->count++;
	e->dur_ns += ev->dur_ns;
	e->wait_ns += ev->wait_ns;
	e->bytes += ev->bytes;
	return 0;
}

/* Drop the open batch: the file keeps its last commit. */
static void batch_abort(struct ffm_store *s)
{
	sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
	for (uint32_t i = 0; i < AGG_CAP; i++)
		s->agg[i].used = false;
	s->agg_n = 0;
	s->evn = 0;
	s->in_txn = false;
	s->pending = 0;
}

static int batch_begin(struct ffm_store *s)
{
	sqlite3_stmt *st;
	int rc, err;

	if (s->opts.read_only)
		return -EROFS;
	if (s->in_txn)
		return 0;
	err = ffm_store_exec(s, "BEGIN IMMEDIATE");
	if (err)
		return err;
	s->in_txn = true;
	s->pending = 0;
	s->evn = 0;
	s->batch_start_ms = now_ms();
	/* Event ids: read under the write lock, written back at commit. */
	err = ffm_store_stmt(s, ST_SEQ_GET, &st);
	if (err)
		goto fail;
	rc = sqlite3_step(st);
	s->seq_event = s->next_event = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
	sqlite3_reset(st);
	if (rc != SQLITE_ROW) {
		err = rc == SQLITE_DONE ? -EBADMSG : ffm_store_err(s->db, rc);
		goto fail;
	}
	return 0;
fail:
	batch_abort(s);
	return err;
}

static void bind_event(sqlite3_stmt *st, int b, const struct ffm_store_event *ev)
{
	BIND_I64(st, b + 1, ev->run, ev->start_ns, ev->id, ev->dur_ns, ev->wait_ns,
		 ev->kind | ev->dir << 8 | (uint64_t)ev->api << 16, (uint64_t)ev->tgid << 32 | ev->tid,
		 ev->bytes, ev->stream, ev->src, ev->dst, ev->stack, ev->flags, ev->probe_ns);
}

int ffm_store_drain(struct ffm_store *s)
{
	sqlite3_stmt *st;
	int err;

	if (!s->evn)
		return 0;
	if (s->evn == EV_CHUNK) {
		err = ffm_store_stmt(s, ST_EVENT_CHUNK, &st);
		if (err)
			return err;
		for (uint32_t i = 0; i < EV_CHUNK; i++)
			bind_event(st, (int)i * EV_COLS, &s->ev[i]);
		err = step_done(s, st);
	} else {
		err = ffm_store_stmt(s, ST_EVENT, &st);
		for (uint32_t i = 0; !err && i < s->evn; i++) {
			bind_event(st, 0, &s->ev[i]);
			err = step_done(s, st);
		}
	}
	if (!err)
		s->evn = 0;
	return err;
}

int ffm_store__flush(struct ffm_store *s)
{
	sqlite3_stmt *st;
	int err;

	if (!s || !s->in_txn)
		return 0;
	err = ffm_store_drain(s);
	if (!err)
		err = agg_spill(s);
	if (!err && s->next_event != s->seq_event) {
		err = ffm_store_stmt(s, ST_SEQ_SET, &st);
		if (!err) {
			sqlite3_bind_int64(st, 1, s->next_event);
			err = step_done(s, st);
		}
	}
	if (!err)
		err = ffm_store_exec(s, "COMMIT");
	if (err) {
		batch_abort(s); /* the batch is lost; the file keeps the previous commit */
		return err;
	}
	s->in_txn = false;
	s->pending = 0;
	return 0;
}

/* Count one put; commit when the batch is full or old. */
static int batch_note(struct ffm_store *s)
{
	if (++s->pending >= s->opts.batch_events || now_ms() - s->batch_start_ms >= s->opts.batch_ms)
		return ffm_store__flush(s);
	return 0;
}

int ffm_store__put_event(struct ffm_store *s, const struct ffm_store_event *ev, int64_t *ret_id)
{
	struct ffm_store_event *e;
	int err;

	if (ev->kind > 255 || ev->dir > 255)
		return -EINVAL;
	err = batch_begin(s);
	if (err)
		return err;
	if (s->evn == EV_CHUNK) {
		err = ffm_store_drain(s);
		if (err) {
			batch_abort(s); /* these events are in agg already: drop both together */
			return err;
		}
	}
	e = &s->ev[s->evn++];
	*e = *ev;
	e->id = s->next_event++;
	if (ret_id)
		*ret_id = e->id;
	err = agg_add(s, e);
	if (err) {
		batch_abort(s);
		return err;
	}
	return batch_note(s);
}

/* A batched put of one row of integers (cached statement @which): its rowid in *ret_id. */
static int put_row(struct ffm_store *s, enum st which, const int64_t *v, size_t n, int64_t *ret_id)
{
	sqlite3_stmt *st;
	int err = batch_begin(s);

	if (!err)
		err = ffm_store_stmt(s, which, &st);
	if (err)
		return err;
	bind_i64s(st, 1, v, n);
	err = step_done(s, st);
	if (!err && ret_id)
		*ret_id = sqlite3_last_insert_rowid(s->db);
	return err ? err : batch_note(s);
}
#define PUT_ROW(s, which, ret_id, ...)                                                             \
	put_row(s, which, (const int64_t[]){__VA_ARGS__},                                          \
		sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t), ret_id)

int ffm_store__put_thread(struct ffm_store *s, int64_t run, uint32_t tgid, uint32_t tid)
{
	return PUT_ROW(s, ST_THREAD, NULL, run, tgid, tid);
}

int ffm_store__add_thread_waits(struct ffm_store *s, int64_t run, uint32_t tgid, uint32_t tid,
				uint64_t waits, uint64_t slept)
{
	if (slept > waits)
		return -EINVAL;
	return PUT_ROW(s, ST_THREAD_WAITS, NULL, run, tgid, tid, (int64_t)waits, (int64_t)slept);
}

int ffm_store__add_managed_faults(struct ffm_store *s, int64_t run, int64_t stack, uint64_t ops,
				  uint64_t faults)
{
	if (ops > INT64_MAX || faults > INT64_MAX)
		return -EINVAL;
	return PUT_ROW(s, ST_MANAGED_FAULTS, NULL, run, stack, (int64_t)ops, (int64_t)faults);
}

int ffm_store__put_process(struct ffm_store *s, const struct ffm_store_process *p)
{
	sqlite3_stmt *st;
	int err;

	err = batch_begin(s);
	if (!err)
		err = ffm_store_stmt(s, ST_PROCESS, &st);
	if (err)
		return err;
	BIND_I64(st, 1, p->run, p->tgid, p->ptgid);
	bind_text(st, 4, p->exe);
	BIND_I64(st, 5, p->start_ns, p->end_ns, p->exit_code);
	err = step_done(s, st);
	return err ? err : batch_note(s);
}

int ffm_store__process_exit(struct ffm_store *s, int64_t run, uint32_t tgid, uint64_t end_ns,
			    int32_t exit_code)
{
	sqlite3_stmt *st;
	int err;

	err = batch_begin(s);
	if (!err)
		err = ffm_store_stmt(s, ST_PROCESS_EXIT, &st);
	if (err)
		return err;
	BIND_I64(st, 1, run, tgid, end_ns, exit_code);
	err = step_done(s, st);
	if (!err && !sqlite3_changes(s->db))
		err = -ENOENT;
	return err ? err : batch_note(s);
}

/* Frame upsert inside the open batch; does not count as a put. */
static int frame_upsert(struct ffm_store *s, const struct ffm_store_frame *f, int64_t *ret_id)
{
	char bid[PATH_MAX + 8];
	sqlite3_stmt *st;
	int rc, err;

	if (f->build_id && *f->build_id)
		snprintf(bid, sizeof(bid), "%s", f->build_id);
	else if (f->module && *f->module)
		snprintf(bid, sizeof(bid), "path:%s", f->module);
	else
		return -EINVAL;
	err = ffm_store_stmt(s, ST_FRAME_UPSERT, &st);
	if (err)
		return err;
	sqlite3_bind_text(st, 1, bid, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, i64(f->offset));
	bind_text(st, 3, f->module);
	bind_text(st, 4, f->func);
	bind_text(st, 5, f->demangled);
	bind_text(st, 6, f->folded);
	bind_text(st, 7, f->file);
	sqlite3_bind_int64(st, 8, f->line);
	sqlite3_bind_int64(st, 9, f->inlined);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW && ret_id)
		*ret_id = sqlite3_column_int64(st, 0);
	if (rc == SQLITE_ROW)
		rc = sqlite3_step(st); /* run the statement to completion */
	sqlite3_reset(st);
	return rc == SQLITE_DONE ? 0 : ffm_store_err(s->db, rc);
}

int ffm_store__put_frame(struct ffm_store *s, const struct ffm_store_frame *f, int64_t *ret_id)
{
	int err;

	err = batch_begin(s);
	if (!err)
		err = frame_upsert(s, f, ret_id);
	return err ? err : batch_note(s);
}

int ffm_store__put_stack(struct ffm_store *s, uint64_t hash, const struct ffm_store_frame *frames,
			 size_t n, int64_t *ret_id)
{
	sqlite3_stmt *find, *ins, *sf;
	int64_t id, fid = 0;
	int rc, err;

	err = batch_begin(s);
	if (!err)
		err = ffm_store_stmt(s, ST_STACK_FIND, &find);
	if (!err)
		err = ffm_store_stmt(s, ST_STACK_INSERT, &ins);
	if (!err)
		err = ffm_store_stmt(s, ST_STACK_FRAME, &sf);
	if (err)
		return err;
	sqlite3_bind_int64(find, 1, i64(hash));
	rc = sqlite3_step(find);
	if (rc == SQLITE_ROW) {
		id = sqlite3_column_int64(find, 0);
		sqlite3_reset(find);
		if (ret_id)
			*ret_id = id;
		return 0;
	}
	sqlite3_reset(find);
	if (rc != SQLITE_DONE)
		return ffm_store_err(s->db, rc);

	/* One savepoint so a failing frame leaves no half stack behind. */
	err = ffm_store_exec(s, "SAVEPOINT stack");
	if (err)
		return err;
	BIND_I64(ins, 1, hash, n);
	err = step_done(s, ins);
	if (err)
		goto fail;
	id = sqlite3_last_insert_rowid(s->db);
	for (size_t i = 0; i < n; i++) {
		err = frame_upsert(s, &frames[i], &fid);
		if (err)
			goto fail;
		BIND_I64(sf, 1, id, i, fid);
		err = step_done(s, sf);
		if (err)
			goto fail;
	}
	err = ffm_store_exec(s, "RELEASE stack");
	if (err)
		goto fail;
	if (ret_id)
		*ret_id = id;
	err = batch_note(s);
	return err ? err : 1;
fail:
	sqlite3_exec(s->db, "ROLLBACK TO stack; RELEASE stack", NULL, NULL, NULL);
	return err;
}

int ffm_store__add_drops(struct ffm_store *s, int64_t run, enum ffm_drop_reason reason,
			 uint64_t count)
{
	if ((unsigned)reason >= FFM_DROP__MAX)
		return -EINVAL;
	return PUT_ROW(s, ST_DROPS, NULL, run, reason, count);
}

int ffm_store__put_xfer_hash(struct ffm_store *s, const struct ffm_store_xfer_hash *h,
			     int64_t *ret_id)
{
	return PUT_ROW(s, ST_XFER, ret_id, h->run, h->event, h->stack, h->hash, h->dst, h->bytes,
		       h->first_event, h->first_stack, h->dup);
}

int ffm_store__put_sync_use(struct ffm_store *s, const struct ffm_store_sync_use *u,
			    int64_t *ret_id)
{
	return PUT_ROW(s, ST_SYNC_USE, ret_id, u->run, u->event, u->stack, u->prot_lo, u->prot_hi,
		       u->use_addr, u->use_stack, u->use_frame, u->use_delay_ns, u->flags,
		       u->watched_bytes, u->covered_bytes);
}

int ffm_store__add_cpu_samples(struct ffm_store *s, int64_t run,
			       const struct ffm_store_cpu_samples *x)
{
	if (x->state > 2 || !x->stack)
		return -EINVAL;
	return PUT_ROW(s, ST_CPU_SAMPLES, NULL, run, x->stack, x->state, i64(x->n), i64(x->ns));
}

int ffm_store__put_sample(struct ffm_store *s, int64_t run, const struct ffm_store_sample *x)
{
	if (x->kind > FFM_SAMPLE_WINDOW || x->end_ns < x->start_ns)
		return -EINVAL;
	return PUT_ROW(s, ST_SAMPLE, NULL, run, x->tgid, x->kind, i64(x->start_ns), i64(x->end_ns),
		       i64(x->on_ns));
}
