/* SPDX-License-Identifier: MIT */
/*
 * Opening, validating, migrating and writing the per-key store (see ffm_store.h for the
 * contract, schema.c for the tables).
 *
 * Opening an existing file is two steps so that a file we refuse is never modified:
 *   1. the first 100 bytes are read with plain read(2): empty, short, wrong magic, a page size
 *      that is not one, a size that is not a whole number of pages, or fewer pages than the
 *      header's own page count (truncation; checked only when no -wal file could hold them)
 *      are -EBADMSG;
 *   2. a read-only connection with checkpoint-on-close disabled reads application_id and
 *      user_version: another application id or an unmarked database with tables is -EPROTO,
 *      a newer schema -ENOTSUP.
 * Only then is a read-write connection opened and, if the file is older, migrated in one
 * IMMEDIATE transaction (re-reading user_version inside it, so two openers do not race).
 *
 * New files are built under a temporary name and link(2)ed into place, so a store file is
 * never seen empty or half-made, and two creators cannot both win.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "store/store_int.h"

#define FILE_MODE 0640
#define DIR_MODE 0750
#define PAGE_SIZE_NEW 16384 /* measured: fastest ingest of 4K..64K on the 2-core VM */

/*
 * Events go in with OR ROLLBACK: a statement that can only fail as a whole needs no statement
 * journal, and writing one (every page a 64-row insert touches, copied to a temp file) cost
 * half the ingest rate. A failing event insert discards the open batch, which is what
 * put_event does on any error anyway.
 */
static const char *const stmt_sql[ST__MAX] = {
	[ST_EVENT] = "INSERT OR ROLLBACK INTO events(run, start_ns, id, dur_ns, wait_ns, info, pid, bytes,"
		     " stream, src, dst, stack, flags) VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
	[ST_EVENT_CHUNK] = NULL, /* built by event_chunk_sql() */
	[ST_SEQ_GET] = "SELECT next FROM seq WHERE name = 'events'",
	[ST_SEQ_SET] = "UPDATE seq SET next = ?1 WHERE name = 'events'",
	[ST_AGG_UPSERT] = "INSERT INTO stack_stats(run, stack, kind, api, count, dur_ns, wait_ns,"
			  " bytes) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"
			  " ON CONFLICT(run, stack, kind, api) DO UPDATE SET"
			  " count = count + excluded.count, dur_ns = dur_ns + excluded.dur_ns,"
			  " wait_ns = wait_ns + excluded.wait_ns, bytes = bytes + excluded.bytes",
	[ST_THREAD] = "INSERT OR IGNORE INTO threads(run, tgid, tid) VALUES(?1, ?2, ?3)",
	[ST_PROCESS] = "INSERT INTO processes(run, tgid, ptgid, exe, start_ns, end_ns, exit_code)"
		       " VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7)",
	[ST_PROCESS_EXIT] = "UPDATE processes SET end_ns = ?3, exit_code = ?4 WHERE id ="
			    " (SELECT id FROM processes WHERE run = ?1 AND tgid = ?2"
			    "  ORDER BY start_ns DESC, id DESC LIMIT 1)",
	[ST_FRAME_UPSERT] = "INSERT INTO frames(build_id, offset, module, func, demangled, folded,"
			    " file, line) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"
			    " ON CONFLICT(build_id, offset) DO UPDATE SET"
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
			" use_stack, use_frame, use_delay_ns, flags)"
			" VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
};

/*
 * SQLite result code -> -errno. BUSY/LOCKED -EBUSY, NOMEM -ENOMEM, CONSTRAINT -EEXIST,
 * CORRUPT/NOTADB -EBADMSG, READONLY -EROFS, FULL -ENOSPC, PERM/AUTH -EACCES, IOERR/CANTOPEN the
 * OS errno when SQLite kept one, else -EIO.
 */
int ffm_store_err(sqlite3 *db, int rc)
{
	int sys;

	switch (rc & 0xff) {
	case SQLITE_OK:
	case SQLITE_ROW:
	case SQLITE_DONE:
		return 0;
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
		return -EBUSY;
	case SQLITE_NOMEM:
		return -ENOMEM;
	case SQLITE_CONSTRAINT:
		return -EEXIST;
	case SQLITE_CORRUPT:
	case SQLITE_NOTADB:
		return -EBADMSG;
	case SQLITE_READONLY:
		return -EROFS;
	case SQLITE_FULL:
		return -ENOSPC;
	case SQLITE_PERM:
	case SQLITE_AUTH:
		return -EACCES;
	case SQLITE_IOERR:
	case SQLITE_CANTOPEN:
		sys = db ? sqlite3_system_errno(db) : 0;
		return sys > 0 ? -sys : -EIO;
	default:
		return -EIO;
	}
}

int ffm_store_exec(struct ffm_store *s, const char *sql)
{
	return ffm_store_err(s->db, sqlite3_exec(s->db, sql, NULL, NULL, NULL));
}

/* The ST_EVENT insert with EV_CHUNK row tuples. Caller frees. */
static char *event_chunk_sql(void)
{
	static const char row[] = "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";
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

/* Step a cached write statement to completion and reset it. */
static int step_done(struct ffm_store *s, sqlite3_stmt *st)
{
	int rc = sqlite3_step(st);

	sqlite3_reset(st);
	return rc == SQLITE_DONE || rc == SQLITE_ROW ? 0 : ffm_store_err(s->db, rc);
}

static void bind_text(sqlite3_stmt *st, int i, const char *v)
{
	if (v)
		sqlite3_bind_text(st, i, v, -1, SQLITE_STATIC);
	else
		sqlite3_bind_null(st, i);
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* ---- opening ---------------------------------------------------------------------------- */

static uint32_t be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Step 1: the file must look like a complete SQLite database. */
static int check_header(const char *path)
{
	unsigned char h[100];
	struct stat st, wst;
	char wal[PATH_MAX + 8];
	uint32_t page, npages;
	ssize_t n;
	int fd, err = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0) {
		err = -errno;
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		err = -EBADMSG;
		goto out;
	}
	n = pread(fd, h, sizeof(h), 0);
	if (n < 0) {
		err = -errno;
		goto out;
	}
	if (n < (ssize_t)sizeof(h) || memcmp(h, "SQLite format 3", 16)) {
		err = -EBADMSG;
		goto out;
	}
	page = (uint32_t)h[16] << 8 | h[17];
	if (page == 1)
		page = 65536;
	if (page < 512 || page > 65536 || (page & (page - 1)) || st.st_size % page) {
		err = -EBADMSG;
		goto out;
	}
	/* In-header page count: valid when the change counter matches version-valid-for. */
	npages = be32(h + 28);
	if (npages && be32(h + 24) == be32(h + 92) && (uint64_t)npages * page > (uint64_t)st.st_size) {
		/* A checkpoint in progress may have grown the header first; the WAL still holds
		 * the pages then. Without a WAL the pages are gone. */
		snprintf(wal, sizeof(wal), "%s-wal", path);
		if (stat(wal, &wst) < 0 || wst.st_size == 0)
			err = -EBADMSG;
	}
out:
	close(fd);
	return err;
}

static int pragma_int(sqlite3 *db, const char *sql, int64_t *out)
{
	sqlite3_stmt *st;
	int rc;

	rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
	if (rc != SQLITE_OK)
		return ffm_store_err(db, rc);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		*out = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	if (rc == SQLITE_ROW)
		return 0;
	return rc == SQLITE_DONE ? -EBADMSG : ffm_store_err(db, rc);
}

/* PRAGMA quick_check / integrity_check: 0 when the only row is "ok". */
static int run_check(sqlite3 *db, bool full)
{
	sqlite3_stmt *st;
	int rc, err = 0;

	rc = sqlite3_prepare_v2(db, full ? "PRAGMA integrity_check" : "PRAGMA quick_check", -1,
				&st, NULL);
	if (rc != SQLITE_OK)
		return ffm_store_err(db, rc);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		const char *r = (const char *)sqlite3_column_text(st, 0);
		if (!r || strcmp(r, "ok"))
			err = -EBADMSG;
	}
	if (rc != SQLITE_DONE && !err)
		err = ffm_store_err(db, rc);
	sqlite3_finalize(st);
	return err;
}

static int open_db(const char *path, int flags, uint32_t busy_ms, sqlite3 **ret)
{
	sqlite3 *db = NULL;
	int rc;

	rc = sqlite3_open_v2(path, &db, flags | SQLITE_OPEN_NOMUTEX, NULL);
	if (rc != SQLITE_OK) {
		int err = ffm_store_err(db, rc);
		sqlite3_close_v2(db);
		return err;
	}
	sqlite3_extended_result_codes(db, 1);
	sqlite3_busy_timeout(db, (int)busy_ms);
	*ret = db;
	return 0;
}

/*
 * Step 2: classify through a read-only connection that will not checkpoint on close. On
 * success *version is the file's schema version and, when keep is set, *ret the connection.
 */
static int inspect(const char *path, const struct ffm_store_opts *o, int *version, sqlite3 **ret)
{
	sqlite3 *db = NULL;
	int64_t app = 0, ver = 0, ntables = 0;
	int err;

	err = open_db(path, SQLITE_OPEN_READONLY, o->busy_timeout_ms, &db);
	if (err)
		return err;
	sqlite3_db_config(db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, NULL);
	err = pragma_int(db, "PRAGMA application_id", &app);
	if (!err)
		err = pragma_int(db, "PRAGMA user_version", &ver);
	if (!err)
		err = pragma_int(db, "SELECT count(*) FROM sqlite_schema", &ntables);
	if (err)
		goto out;
	if (app != FFM_STORE_APP_ID)
		err = -EPROTO; /* another application's file, or a plain SQLite file */
	else if (ver > FFM_STORE_SCHEMA_VERSION)
		err = -ENOTSUP;
	else if (ver < 1 || !ntables)
		err = -EBADMSG; /* marked as ours but without our schema */
	if (!err && o->verify)
		err = run_check(db, false);
out:
	if (err || !ret) {
		sqlite3_close_v2(db);
	} else {
		*ret = db;
	}
	*version = (int)ver;
	return err;
}

static int set_pragmas(sqlite3 *db, bool writer)
{
	int rc;

	/* 64 MiB page cache: a batch of events fits without spilling mid-transaction. */
	rc = sqlite3_exec(db, "PRAGMA cache_size = -65536; PRAGMA temp_store = FILE;", NULL, NULL,
			  NULL);
	if (rc == SQLITE_OK && writer)
		rc = sqlite3_exec(db,
				  "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;"
				  "PRAGMA journal_size_limit = 67108864;"
				  "PRAGMA wal_autocheckpoint = 4096;",
				  NULL, NULL, NULL);
	return ffm_store_err(db, rc);
}

/* Apply migrations from the file's version to the current one, in one transaction. */
static int migrate(sqlite3 *db, int *version)
{
	char sql[64];
	int64_t ver;
	int err, rc;

	err = ffm_store_err(db, sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL));
	if (err)
		return err;
	err = pragma_int(db, "PRAGMA user_version", &ver);
	if (err)
		goto fail;
	if (ver > FFM_STORE_SCHEMA_VERSION) {
		err = -ENOTSUP;
		goto fail;
	}
	for (int v = (int)ver; v < FFM_STORE_SCHEMA_VERSION; v++) {
		rc = sqlite3_exec(db, ffm_store_migrations[v], NULL, NULL, NULL);
		if (rc == SQLITE_OK) {
			snprintf(sql, sizeof(sql), "PRAGMA user_version = %d", v + 1);
			rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
		}
		if (rc != SQLITE_OK) {
			err = ffm_store_err(db, rc);
			goto fail;
		}
	}
	if (ver < FFM_STORE_SCHEMA_VERSION) {
		snprintf(sql, sizeof(sql),
			 "INSERT OR REPLACE INTO meta VALUES('schema_version', '%d')",
			 FFM_STORE_SCHEMA_VERSION);
		err = ffm_store_err(db, sqlite3_exec(db, sql, NULL, NULL, NULL));
		if (err)
			goto fail;
	}
	err = ffm_store_err(db, sqlite3_exec(db, "COMMIT", NULL, NULL, NULL));
	if (err)
		goto fail;
	*version = FFM_STORE_SCHEMA_VERSION;
	return 0;
fail:
	sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
	return err;
}

static int insert_key(sqlite3 *db, const struct ffm_store_key *k)
{
	sqlite3_stmt *st;
	int rc;

	rc = sqlite3_prepare_v2(db,
				"INSERT OR IGNORE INTO keys(id, key, uid, exe, args_hash)"
				" VALUES(1, ?1, ?2, ?3, ?4)",
				-1, &st, NULL);
	if (rc != SQLITE_OK)
		return ffm_store_err(db, rc);
	bind_text(st, 1, k->key);
	sqlite3_bind_int64(st, 2, k->uid);
	bind_text(st, 3, k->exe);
	sqlite3_bind_int64(st, 4, i64(k->args_hash));
	rc = sqlite3_step(st);
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? 0 : ffm_store_err(db, rc);
}

static void unlink_db_files(const char *path)
{
	char p[PATH_MAX + 8];

	unlink(path);
	snprintf(p, sizeof(p), "%s-wal", path);
	unlink(p);
	snprintf(p, sizeof(p), "%s-shm", path);
	unlink(p);
}

/* Build a complete new store under a temporary name and link it to path. */
static int create_file(const char *path, const struct ffm_store_opts *o,
		       const struct ffm_store_key *key)
{
	char tmp[PATH_MAX], sql[128];
	sqlite3 *db = NULL;
	int fd, err, ver = 0;
	char *q;

	if (snprintf(tmp, sizeof(tmp), "%s.new.%d.%lx", path, (int)getpid(),
		     (unsigned long)now_ms()) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	fd = open(tmp, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, FILE_MODE);
	if (fd < 0)
		return -errno;
	if (fchmod(fd, FILE_MODE) < 0) { /* whatever the umask */
		err = -errno;
		close(fd);
		goto out;
	}
	close(fd);

	err = open_db(tmp, SQLITE_OPEN_READWRITE, o->busy_timeout_ms, &db);
	if (err)
		goto out;
	snprintf(sql, sizeof(sql), "PRAGMA page_size = %d; PRAGMA journal_mode = WAL;",
		 PAGE_SIZE_NEW);
	err = ffm_store_err(db, sqlite3_exec(db, sql, NULL, NULL, NULL));
	if (!err)
		err = migrate(db, &ver);
	if (err)
		goto out;
	q = sqlite3_mprintf("BEGIN; INSERT INTO meta VALUES('created', '%lld');"
			    "INSERT INTO meta VALUES('tool_version', %Q);",
			    (long long)time(NULL), o->tool_version ? o->tool_version : "unknown");
	if (!q) {
		err = -ENOMEM;
		goto out;
	}
	err = ffm_store_err(db, sqlite3_exec(db, q, NULL, NULL, NULL));
	sqlite3_free(q);
	if (!err && key)
		err = insert_key(db, key);
	if (!err)
		err = ffm_store_err(db, sqlite3_exec(db, "COMMIT", NULL, NULL, NULL));
	if (err)
		goto out;
	/* Closing the last connection checkpoints and removes the WAL: one complete file. */
	err = ffm_store_err(db, sqlite3_close(db));
	db = NULL;
	if (err)
		goto out;
	if (link(tmp, path) < 0 && errno != EEXIST) /* EEXIST: another creator won, use theirs */
		err = -errno;
out:
	sqlite3_close_v2(db);
	unlink_db_files(tmp);
	return err;
}

static void opts_copy(struct ffm_store_opts *o, const struct ffm_store_opts *in)
{
	size_t sz;

	memset(o, 0, sizeof(*o));
	if (in) {
		sz = in->sz && in->sz < sizeof(*o) ? in->sz : sizeof(*o);
		memcpy(o, in, sz);
	}
	o->sz = sizeof(*o);
	if (!o->batch_events)
		o->batch_events = 65536;
	if (!o->batch_ms)
		o->batch_ms = 250;
	if (!o->busy_timeout_ms)
		o->busy_timeout_ms = 5000;
}

static int open_impl(const char *path, const struct ffm_store_opts *in,
		     const struct ffm_store_key *key, struct ffm_store **ret)
{
	struct ffm_store *s;
	struct stat st;
	sqlite3 *ro = NULL;
	int err, ver = 0;

	if (!path || !*path || !ret)
		return -EINVAL;
	s = calloc(1, sizeof(*s));
	if (s)
		s->refs = 1;
	if (!s)
		return -ENOMEM;
	opts_copy(&s->opts, in);
	s->path = strdup(path);
	if (!s->path) {
		err = -ENOMEM;
		goto fail;
	}
	if (stat(path, &st) < 0) {
		err = -errno;
		if (err != -ENOENT || !s->opts.create || s->opts.read_only)
			goto fail;
		err = create_file(path, &s->opts, key);
		if (err)
			goto fail;
	}
	err = check_header(path);
	if (err)
		goto fail;
	err = inspect(path, &s->opts, &ver, s->opts.read_only ? &ro : NULL);
	if (err)
		goto fail;
	if (s->opts.read_only) {
		s->db = ro;
		s->version = ver;
		err = set_pragmas(s->db, false);
		if (err)
			goto fail;
	} else {
		err = open_db(path, SQLITE_OPEN_READWRITE, s->opts.busy_timeout_ms, &s->db);
		if (!err)
			err = set_pragmas(s->db, true);
		if (err)
			goto fail;
		s->version = ver;
		if (ver < FFM_STORE_SCHEMA_VERSION) {
			err = migrate(s->db, &s->version);
			if (err)
				goto fail;
		}
		s->agg = calloc(AGG_CAP, sizeof(*s->agg));
		if (!s->agg) {
			err = -ENOMEM;
			goto fail;
		}
	}
	*ret = s;
	return 0;
fail:
	ffm_store__free(s);
	return err;
}

int ffm_store__open(const char *path, const struct ffm_store_opts *opts, struct ffm_store **ret)
{
	return open_impl(path, opts, NULL, ret);
}

static int mkdir_mode(const char *dir)
{
	if (mkdir(dir, DIR_MODE) == 0)
		return chmod(dir, DIR_MODE) < 0 ? -errno : 0; /* whatever the umask */
	return errno == EEXIST ? 0 : -errno;
}

int ffm_store__key_file_name(const char *key, char *buf, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	char name[3 * 256 + 32];
	size_t n = 0, max = 200;
	uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a 64 */
	bool cut = false;

	if (!key || !*key)
		return -EINVAL;
	for (const unsigned char *p = (const unsigned char *)key; *p; p++) {
		unsigned char c = *p;
		bool safe = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			    (c >= '0' && c <= '9') || c == '_' || c == '-' ||
			    (c == '.' && p != (const unsigned char *)key);
		h = (h ^ c) * 0x100000001b3ull;
		if (cut)
			continue;
		if (n + 3 > max) {
			cut = true;
			continue;
		}
		if (safe) {
			name[n++] = (char)c;
		} else {
			name[n++] = '%';
			name[n++] = hex[c >> 4];
			name[n++] = hex[c & 15];
		}
	}
	if (cut) {
		n = 160;
		/* do not end inside a %XX escape */
		if (name[n - 1] == '%')
			n -= 1;
		else if (name[n - 2] == '%')
			n -= 2;
		name[n++] = '~';
		for (int i = 15; i >= 0; i--)
			name[n++] = hex[(h >> (i * 4)) & 15];
	}
	memcpy(name + n, ".db", 4);
	n += 3;
	if (n + 1 > len)
		return -ENAMETOOLONG;
	memcpy(buf, name, n + 1);
	return (int)n;
}

static int key_path(const char *state_dir, const char *key, char *buf, size_t len)
{
	char name[256];
	int r;

	r = ffm_store__key_file_name(key, name, sizeof(name));
	if (r < 0)
		return r;
	if ((size_t)snprintf(buf, len, "%s/keys/%s", state_dir, name) >= len)
		return -ENAMETOOLONG;
	return 0;
}

int ffm_store__open_key(const char *state_dir, const struct ffm_store_key *key,
			const struct ffm_store_opts *opts, struct ffm_store **ret)
{
	char path[PATH_MAX];
	struct ffm_store_key have;
	struct ffm_store *s = NULL;
	int err;

	if (!state_dir || !key || !key->key || !ret)
		return -EINVAL;
	err = key_path(state_dir, key->key, path, sizeof(path));
	if (err)
		return err;
	if (opts && opts->create && !opts->read_only) {
		char dir[PATH_MAX];
		err = mkdir_mode(state_dir);
		if (err)
			return err;
		snprintf(dir, sizeof(dir), "%s/keys", state_dir);
		err = mkdir_mode(dir);
		if (err)
			return err;
	}
	err = open_impl(path, opts, key, &s);
	if (err)
		return err;
	/* A file made by plain ffm_store__open has no key row yet. */
	if (!s->opts.read_only) {
		err = insert_key(s->db, key);
		if (err)
			goto fail;
	}
	err = ffm_store__key(s, &have);
	if (err)
		goto fail;
	if (strcmp(have.key, key->key)) {
		err = -EEXIST; /* the long-name hash of two keys clashed */
		goto fail;
	}
	*ret = s;
	return 0;
fail:
	ffm_store__free(s);
	return err;
}

int ffm_store__for_each_key(const char *state_dir, ffm_store_key_cb cb, void *ctx)
{
	char dir[PATH_MAX], path[PATH_MAX + 256];
	struct ffm_store_opts o = { .sz = sizeof(o), .read_only = true };
	struct ffm_store_key k;
	struct dirent *de;
	DIR *d;
	int r = 0;

	snprintf(dir, sizeof(dir), "%s/keys", state_dir);
	d = opendir(dir);
	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		struct ffm_store *s = NULL;
		size_t n = strlen(de->d_name);
		int err;

		if (n < 4 || strcmp(de->d_name + n - 3, ".db") || de->d_name[0] == '.')
			continue;
		if (strstr(de->d_name, ".db.new."))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		err = ffm_store__open(path, &o, &s);
		if (!err)
			err = ffm_store__key(s, &k);
		r = cb(path, err ? NULL : k.key, err, ctx);
		ffm_store__free(s);
		if (r)
			break;
	}
	closedir(d);
	return r;
}

struct find_job_ctx {
	const char *job_id;
	char best[PATH_MAX + 256];
	int64_t best_start;
	bool found;
};

static int find_job_cb(const char *path, const char *key, int err, void *ctx)
{
	struct ffm_store_opts o = { .sz = sizeof(o), .read_only = true };
	struct find_job_ctx *f = ctx;
	struct ffm_store *s = NULL;
	sqlite3_stmt *st = NULL;

	if (err)
		return 0;
	if (ffm_store__open(path, &o, &s))
		return 0;
	if (sqlite3_prepare_v2(s->db, "SELECT start_unix FROM jobs WHERE job_id = ?1", -1, &st,
			       NULL) == SQLITE_OK) {
		sqlite3_bind_text(st, 1, f->job_id, -1, SQLITE_STATIC);
		if (sqlite3_step(st) == SQLITE_ROW) {
			int64_t start = sqlite3_column_int64(st, 0);
			if (!f->found || start > f->best_start) {
				f->found = true;
				f->best_start = start;
				snprintf(f->best, sizeof(f->best), "%s", path);
			}
		}
	}
	sqlite3_finalize(st);
	ffm_store__free(s);
	return 0;
}

int ffm_store__find_job(const char *state_dir, const char *job_id,
			const struct ffm_store_opts *opts, struct ffm_store **ret)
{
	struct find_job_ctx f = { .job_id = job_id };
	struct ffm_store_opts o;
	int err;

	if (!state_dir || !job_id || !ret)
		return -EINVAL;
	err = ffm_store__for_each_key(state_dir, find_job_cb, &f);
	if (err)
		return err;
	if (!f.found)
		return -ENOENT;
	opts_copy(&o, opts);
	o.create = false;
	return ffm_store__open(f.best, &o, ret);
}

struct ffm_store *ffm_store__ref(struct ffm_store *s)
{
	if (s)
		s->refs++;
	return s;
}

struct ffm_store *ffm_store__free(struct ffm_store *s)
{
	if (!s || --s->refs > 0)
		return NULL;
	if (s->db && s->in_txn)
		ffm_store__flush(s);
	for (int i = 0; i < ST__MAX; i++)
		sqlite3_finalize(s->st[i]);
	sqlite3_close_v2(s->db);
	free(s->agg);
	free(s->key);
	free(s->exe);
	free(s->path);
	free(s);
	return NULL;
}

const char *ffm_store__path(const struct ffm_store *s)
{
	return s->path;
}

int ffm_store__schema_version(struct ffm_store *s)
{
	return s->version;
}

int ffm_store__key(struct ffm_store *s, struct ffm_store_key *out)
{
	sqlite3_stmt *st;
	int rc, err = 0;

	if (!s->key) {
		rc = sqlite3_prepare_v2(s->db, "SELECT key, uid, exe, args_hash FROM keys", -1,
					&st, NULL);
		if (rc != SQLITE_OK)
			return ffm_store_err(s->db, rc);
		rc = sqlite3_step(st);
		if (rc == SQLITE_ROW) {
			const char *k = (const char *)sqlite3_column_text(st, 0);
			const char *e = (const char *)sqlite3_column_text(st, 2);
			s->key = strdup(k ? k : "");
			s->exe = e ? strdup(e) : NULL;
			s->uid = (uint32_t)sqlite3_column_int64(st, 1);
			s->args_hash = (uint64_t)sqlite3_column_int64(st, 3);
			if (!s->key || (e && !s->exe))
				err = -ENOMEM;
		} else {
			err = rc == SQLITE_DONE ? -ENOENT : ffm_store_err(s->db, rc);
		}
		sqlite3_finalize(st);
		if (err) {
			free(s->key);
			free(s->exe);
			s->key = s->exe = NULL;
			return err;
		}
	}
	out->key = s->key;
	out->exe = s->exe;
	out->uid = s->uid;
	out->args_hash = s->args_hash;
	return 0;
}

int ffm_store__set_key(struct ffm_store *s, const struct ffm_store_key *key)
{
	sqlite3_stmt *st;
	int rc, err;

	if (s->opts.read_only)
		return -EROFS;
	if (!key || !key->key || !*key->key)
		return -EINVAL;
	rc = sqlite3_prepare_v2(s->db,
				"INSERT OR REPLACE INTO keys(id, key, uid, exe, args_hash)"
				" VALUES(1, ?1, ?2, ?3, ?4)",
				-1, &st, NULL);
	if (rc != SQLITE_OK)
		return ffm_store_err(s->db, rc);
	bind_text(st, 1, key->key);
	sqlite3_bind_int64(st, 2, key->uid);
	bind_text(st, 3, key->exe);
	sqlite3_bind_int64(st, 4, i64(key->args_hash));
	rc = sqlite3_step(st);
	sqlite3_finalize(st);
	err = rc == SQLITE_DONE ? 0 : ffm_store_err(s->db, rc);
	free(s->key);
	free(s->exe);
	s->key = s->exe = NULL;
	return err;
}

int ffm_store__check(struct ffm_store *s, bool full)
{
	int err = ffm_store__flush(s);

	return err ? err : run_check(s->db, full);
}

const char *ffm_store__strerror(int err)
{
	switch (err < 0 ? -err : err) {
	case EBADMSG:
		return "not a usable SQLite database (empty, truncated, corrupt or not SQLite)";
	case EPROTO:
		return "an SQLite database, but not an ffm store";
	case ENOTSUP:
		return "an ffm store written by a newer ffm (schema version too new)";
	case EBUSY:
		return "store is locked by another writer (busy timeout)";
	case EEXIST:
		return "constraint violated, or the key file holds another key";
	default:
		return strerror(err < 0 ? -err : err);
	}
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
		sqlite3_bind_int64(st, 1, e->run);
		sqlite3_bind_int64(st, 2, e->stack);
		sqlite3_bind_int64(st, 3, e->kind);
		sqlite3_bind_int64(st, 4, e->api);
		sqlite3_bind_int64(st, 5, i64(e->count));
		sqlite3_bind_int64(st, 6, i64(e->dur_ns));
		sqlite3_bind_int64(st, 7, i64(e->wait_ns));
		sqlite3_bind_int64(st, 8, i64(e->bytes));
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
	sqlite3_bind_int64(st, b + 1, ev->run);
	sqlite3_bind_int64(st, b + 2, i64(ev->start_ns));
	sqlite3_bind_int64(st, b + 3, ev->id);
	sqlite3_bind_int64(st, b + 4, i64(ev->dur_ns));
	sqlite3_bind_int64(st, b + 5, i64(ev->wait_ns));
	sqlite3_bind_int64(st, b + 6, (sqlite3_int64)(ev->kind | ev->dir << 8 | (uint64_t)ev->api << 16));
	sqlite3_bind_int64(st, b + 7, (sqlite3_int64)((uint64_t)ev->tgid << 32 | ev->tid));
	sqlite3_bind_int64(st, b + 8, i64(ev->bytes));
	sqlite3_bind_int64(st, b + 9, i64(ev->stream));
	sqlite3_bind_int64(st, b + 10, i64(ev->src));
	sqlite3_bind_int64(st, b + 11, i64(ev->dst));
	sqlite3_bind_int64(st, b + 12, ev->stack);
	sqlite3_bind_int64(st, b + 13, ev->flags);
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

int ffm_store__put_thread(struct ffm_store *s, int64_t run, uint32_t tgid, uint32_t tid)
{
	sqlite3_stmt *st;
	int err;

	err = batch_begin(s);
	if (!err)
		err = ffm_store_stmt(s, ST_THREAD, &st);
	if (err)
		return err;
	sqlite3_bind_int64(st, 1, run);
	sqlite3_bind_int64(st, 2, tgid);
	sqlite3_bind_int64(st, 3, tid);
	err = step_done(s, st);
	return err ? err : batch_note(s);
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
	sqlite3_bind_int64(st, 1, p->run);
	sqlite3_bind_int64(st, 2, p->tgid);
	sqlite3_bind_int64(st, 3, p->ptgid);
	bind_text(st, 4, p->exe);
	sqlite3_bind_int64(st, 5, i64(p->start_ns));
	sqlite3_bind_int64(st, 6, i64(p->end_ns));
	sqlite3_bind_int64(st, 7, p->exit_code);
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
	sqlite3_bind_int64(st, 1, run);
	sqlite3_bind_int64(st, 2, tgid);
	sqlite3_bind_int64(st, 3, i64(end_ns));
	sqlite3_bind_int64(st, 4, exit_code);
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
	sqlite3_bind_int64(ins, 1, i64(hash));
	sqlite3_bind_int64(ins, 2, (sqlite3_int64)n);
	err = step_done(s, ins);
	if (err)
		goto fail;
	id = sqlite3_last_insert_rowid(s->db);
	for (size_t i = 0; i < n; i++) {
		err = frame_upsert(s, &frames[i], &fid);
		if (err)
			goto fail;
		sqlite3_bind_int64(sf, 1, id);
		sqlite3_bind_int64(sf, 2, (sqlite3_int64)i);
		sqlite3_bind_int64(sf, 3, fid);
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
	sqlite3_stmt *st;
	int err;

	if ((unsigned)reason >= FFM_DROP__MAX)
		return -EINVAL;
	err = batch_begin(s);
	if (!err)
		err = ffm_store_stmt(s, ST_DROPS, &st);
	if (err)
		return err;
	sqlite3_bind_int64(st, 1, run);
	sqlite3_bind_int64(st, 2, reason);
	sqlite3_bind_int64(st, 3, i64(count));
	err = step_done(s, st);
	return err ? err : batch_note(s);
}

int ffm_store__put_xfer_hash(struct ffm_store *s, const struct ffm_store_xfer_hash *h,
			     int64_t *ret_id)
{
	sqlite3_stmt *st;
	int err;

	err = batch_begin(s);
	if (!err)
		err = ffm_store_stmt(s, ST_XFER, &st);
	if (err)
		return err;
	sqlite3_bind_int64(st, 1, h->run);
	sqlite3_bind_int64(st, 2, h->event);
	sqlite3_bind_int64(st, 3, h->stack);
	sqlite3_bind_int64(st, 4, i64(h->hash));
	sqlite3_bind_int64(st, 5, i64(h->dst));
	sqlite3_bind_int64(st, 6, i64(h->bytes));
	sqlite3_bind_int64(st, 7, h->first_event);
	sqlite3_bind_int64(st, 8, h->first_stack);
	sqlite3_bind_int64(st, 9, h->dup);
	err = step_done(s, st);
	if (!err && ret_id)
		*ret_id = sqlite3_last_insert_rowid(s->db);
	return err ? err : batch_note(s);
}

int ffm_store__put_sync_use(struct ffm_store *s, const struct ffm_store_sync_use *u,
			    int64_t *ret_id)
{
	sqlite3_stmt *st;
	int err;

	err = batch_begin(s);
	if (!err)
		err = ffm_store_stmt(s, ST_SYNC_USE, &st);
	if (err)
		return err;
	sqlite3_bind_int64(st, 1, u->run);
	sqlite3_bind_int64(st, 2, u->event);
	sqlite3_bind_int64(st, 3, u->stack);
	sqlite3_bind_int64(st, 4, i64(u->prot_lo));
	sqlite3_bind_int64(st, 5, i64(u->prot_hi));
	sqlite3_bind_int64(st, 6, i64(u->use_addr));
	sqlite3_bind_int64(st, 7, u->use_stack);
	sqlite3_bind_int64(st, 8, u->use_frame);
	sqlite3_bind_int64(st, 9, u->use_delay_ns);
	sqlite3_bind_int64(st, 10, u->flags);
	err = step_done(s, st);
	if (!err && ret_id)
		*ret_id = sqlite3_last_insert_rowid(s->db);
	return err ? err : batch_note(s);
}

/* ---- immediate writes: commit the open batch, then this row, at once --------------------- */

/* Prepare sql, let bind() fill it, step it in its own transaction (after the batch). */
static int write_now(struct ffm_store *s, const char *sql, void (*bind)(sqlite3_stmt *, const void *),
		     const void *arg, int64_t *ret_id)
{
	sqlite3_stmt *st;
	int rc, err;

	if (s->opts.read_only)
		return -EROFS;
	err = ffm_store__flush(s);
	if (err)
		return err;
	rc = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL);
	if (rc != SQLITE_OK)
		return ffm_store_err(s->db, rc);
	bind(st, arg);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW && ret_id)
		*ret_id = sqlite3_column_int64(st, 0);
	else if (rc == SQLITE_DONE && ret_id)
		*ret_id = sqlite3_last_insert_rowid(s->db);
	if (rc == SQLITE_ROW)
		rc = sqlite3_step(st);
	err = rc == SQLITE_DONE ? 0 : ffm_store_err(s->db, rc);
	if (!err && !sqlite3_changes(s->db))
		err = -ENOENT;
	sqlite3_finalize(st);
	return err;
}

static void bind_job(sqlite3_stmt *st, const void *arg)
{
	const struct ffm_store_job *j = arg;

	bind_text(st, 1, j->job_id);
	sqlite3_bind_int64(st, 2, j->uid);
	sqlite3_bind_int64(st, 3, j->state ? j->state : FFM_JOB_RUNNING);
	sqlite3_bind_int64(st, 4, j->start_unix);
	sqlite3_bind_int64(st, 5, j->end_unix);
	bind_text(st, 6, j->node);
}

int ffm_store__job_begin(struct ffm_store *s, const struct ffm_store_job *job, int64_t *ret_id)
{
	if (!job || !job->job_id || !*job->job_id)
		return -EINVAL;
	return write_now(s,
			 "INSERT INTO jobs(job_id, uid, state, start_unix, end_unix, node)"
			 " VALUES(?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT(job_id) DO UPDATE SET"
			 " uid = excluded.uid, state = excluded.state,"
			 " node = coalesce(excluded.node, node) RETURNING id",
			 bind_job, job, ret_id);
}

struct job_end_arg {
	const char *job_id;
	int32_t state;
	int64_t end_unix;
};

static void bind_job_end(sqlite3_stmt *st, const void *arg)
{
	const struct job_end_arg *a = arg;

	bind_text(st, 1, a->job_id);
	sqlite3_bind_int64(st, 2, a->state);
	sqlite3_bind_int64(st, 3, a->end_unix);
}

int ffm_store__job_end(struct ffm_store *s, const char *job_id, int32_t state, int64_t end_unix)
{
	struct job_end_arg a = { job_id, state, end_unix };

	if (!job_id)
		return -EINVAL;
	return write_now(s, "UPDATE jobs SET state = ?2, end_unix = ?3 WHERE job_id = ?1",
			 bind_job_end, &a, NULL);
}

static void bind_driver(sqlite3_stmt *st, const void *arg)
{
	const struct ffm_store_driver *d = arg;

	bind_text(st, 1, d->build_id);
	bind_text(st, 2, d->path);
	sqlite3_bind_int64(st, 3, i64(d->wait_off));
	sqlite3_bind_int64(st, 4, i64(d->wait_size));
}

int ffm_store__put_driver(struct ffm_store *s, const struct ffm_store_driver *d, int64_t *ret_id)
{
	if (!d || !d->build_id || !d->path)
		return -EINVAL;
	return write_now(s,
			 "INSERT INTO drivers(build_id, path, wait_off, wait_size)"
			 " VALUES(?1, ?2, ?3, ?4) ON CONFLICT(build_id) DO UPDATE SET"
			 " path = excluded.path, wait_off = excluded.wait_off,"
			 " wait_size = excluded.wait_size RETURNING id",
			 bind_driver, d, ret_id);
}

static void bind_run(sqlite3_stmt *st, const void *arg)
{
	const struct ffm_store_run *r = arg;

	bind_text(st, 1, r->job_id);
	sqlite3_bind_int64(st, 2, r->stage);
	sqlite3_bind_int64(st, 3, r->driver);
	sqlite3_bind_int64(st, 4, i64(r->start_ns));
	sqlite3_bind_int64(st, 5, i64(r->end_ns));
	sqlite3_bind_int64(st, 6, r->start_unix);
	sqlite3_bind_double(st, 7, r->wall_s);
	sqlite3_bind_int64(st, 8, r->exit_status);
	sqlite3_bind_int64(st, 9, r->flags);
}

int ffm_store__run_begin(struct ffm_store *s, const struct ffm_store_run *r, int64_t *ret_run)
{
	if (!r || !r->job_id || r->stage < 1 || r->stage > FFM_STORE_MAX_STAGE)
		return -EINVAL;
	/* INSERT ... SELECT inserts nothing (-ENOENT) when the job is unknown. */
	return write_now(s,
			 "INSERT INTO runs(job, stage, driver, start_ns, end_ns, start_unix, wall_s,"
			 " exit_status, flags) SELECT id, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9"
			 " FROM jobs WHERE job_id = ?1 RETURNING id",
			 bind_run, r, ret_run);
}

struct run_end_arg {
	int64_t run;
	uint64_t end_ns;
	double wall_s;
	int32_t exit_status;
	uint32_t flags;
};

static void bind_run_end(sqlite3_stmt *st, const void *arg)
{
	const struct run_end_arg *a = arg;

	sqlite3_bind_int64(st, 1, a->run);
	sqlite3_bind_int64(st, 2, i64(a->end_ns));
	sqlite3_bind_double(st, 3, a->wall_s);
	sqlite3_bind_int64(st, 4, a->exit_status);
	sqlite3_bind_int64(st, 5, a->flags);
}

int ffm_store__run_end(struct ffm_store *s, int64_t run, uint64_t end_ns, double wall_s,
		       int32_t exit_status, uint32_t flags)
{
	struct run_end_arg a = { run, end_ns, wall_s, exit_status, flags };

	return write_now(s,
			 "UPDATE runs SET end_ns = ?2, wall_s = ?3, exit_status = ?4,"
			 " flags = flags | ?5 WHERE id = ?1",
			 bind_run_end, &a, NULL);
}

struct api_arg {
	uint32_t api;
	const char *name;
};

static void bind_api(sqlite3_stmt *st, const void *arg)
{
	const struct api_arg *a = arg;

	sqlite3_bind_int64(st, 1, a->api);
	bind_text(st, 2, a->name);
}

int ffm_store__put_api_name(struct ffm_store *s, uint32_t api, const char *name)
{
	struct api_arg a = { api, name };

	if (!name)
		return -EINVAL;
	return write_now(s, "INSERT OR REPLACE INTO api_names(id, name) VALUES(?1, ?2)", bind_api,
			 &a, NULL);
}
