/* SPDX-License-Identifier: MIT */
/*
 * Opening, validating and migrating the per-key store, its key row and its lifetime (see
 * ffm_store.h for the contract, schema.c for the tables, ingest.c and jobs.c for writing,
 * layout.c for where the files are, query.c for reading).
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
#define ROOT_DIR_MODE 0751
#define PAGE_SIZE_NEW 16384 /* measured: fastest ingest of 4K..64K on the 2-core VM */

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
	int fd, err;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0)
		n = -1;
	else /* not a regular file: no header at all */
		n = S_ISREG(st.st_mode) ? pread(fd, h, sizeof(h), 0) : 0;
	err = n < 0 ? -errno : 0;
	close(fd);
	if (err || n < (ssize_t)sizeof(h) || memcmp(h, "SQLite format 3", 16))
		return err ? err : -EBADMSG;
	page = (uint32_t)h[16] << 8 | h[17];
	if (page == 1)
		page = 65536;
	if (page < 512 || page > 65536 || (page & (page - 1)) || st.st_size % page)
		return -EBADMSG;
	/* In-header page count: valid when the change counter matches version-valid-for. */
	npages = be32(h + 28);
	if (npages && be32(h + 24) == be32(h + 92) && (uint64_t)npages * page > (uint64_t)st.st_size) {
		/* A checkpoint in progress may have grown the header first; the WAL still holds
		 * the pages then. Without a WAL the pages are gone. */
		snprintf(wal, sizeof(wal), "%s-wal", path);
		if (stat(wal, &wst) < 0 || wst.st_size == 0)
			return -EBADMSG;
	}
	return 0;
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

/* "file:PATH?immutable=1" with PATH's '%', '?' and '#' escaped (key file names have '%'). */
static char *immutable_uri(const char *path)
{
	size_t n = strlen(path);
	char *u = malloc(3 * n + 32), *p = u;

	if (!u)
		return NULL;
	p += sprintf(p, "file:");
	for (const char *c = path; *c; c++)
		p += strchr("%?#", *c) ? sprintf(p, "%%%02X", (unsigned char)*c) : sprintf(p, "%c", *c);
	strcpy(p, "?immutable=1");
	return u;
}

static int open_db(const char *path, int flags, uint32_t busy_ms, sqlite3 **ret)
{
	sqlite3 *db = NULL;
	char *uri = NULL;
	int rc;

	if (flags & SQLITE_OPEN_URI) {
		if (!(uri = immutable_uri(path)))
			return -ENOMEM;
		path = uri;
	}
	rc = sqlite3_open_v2(path, &db, flags | SQLITE_OPEN_NOMUTEX, NULL);
	free(uri);
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

	err = open_db(path, SQLITE_OPEN_READONLY | (o->immutable ? SQLITE_OPEN_URI : 0),
		      o->busy_timeout_ms, &db);
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

void ffm_store_opts_copy(struct ffm_store_opts *o, const struct ffm_store_opts *in)
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
	if (!s)
		return -ENOMEM;
	s->refs = 1;
	ffm_store_opts_copy(&s->opts, in);
	if (s->opts.immutable) /* a published copy is never written */
		s->opts.read_only = true;
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
		if (!err && s->opts.keep_wal)
			sqlite3_db_config(s->db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, NULL);
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

static int mkdir_mode(const char *dir, mode_t mode)
{
	if (mkdir(dir, mode) == 0)
		return chmod(dir, mode) < 0 ? -errno : 0; /* whatever the umask */
	return errno == EEXIST ? 0 : -errno;
}

int ffm_store__open_key(const char *root, const struct ffm_store_key *key,
			const struct ffm_store_opts *opts, struct ffm_store **ret)
{
	char path[PATH_MAX];
	struct ffm_store_key have;
	struct ffm_store *s = NULL;
	int err;

	if (!root || !key || !key->key || !ret)
		return -EINVAL;
	err = ffm_state_path(root, FFM_STATE_KEYS, NULL, path, sizeof(path));
	if (err >= 0 && (size_t)err + 1 < sizeof(path)) {
		path[err] = '/';
		err = ffm_store__owner_file_name(key->key, key->uid, path + err + 1,
						 sizeof(path) - (size_t)err - 1);
	}
	if (err < 0)
		return err;
	if (opts && opts->create && !opts->read_only) {
		char dir[PATH_MAX];

		/* The owners go through the root to their published copies (done/<uid>/). */
		err = mkdir_mode(root, ROOT_DIR_MODE);
		if (err)
			return err;
		err = ffm_state_path(root, FFM_STATE_KEYS, NULL, dir, sizeof(dir));
		if (err < 0 || (err = mkdir_mode(dir, DIR_MODE)))
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
	/* The long-name hash of two keys clashed; or an owner's file of another owner. */
	if (strcmp(have.key, key->key) || (key->uid && !s->opts.read_only && have.uid != key->uid)) {
		err = -EEXIST;
		goto fail;
	}
	*ret = s;
	return 0;
fail:
	ffm_store__free(s);
	return err;
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
	free((char *)s->key.key);
	free((char *)s->key.exe);
	free(s->path);
	free(s);
	return NULL;
}

const char *ffm_store__path(const struct ffm_store *s)
{
	return s->path;
}

bool ffm_store__immutable(const struct ffm_store *s)
{
	return s->opts.immutable;
}

int ffm_store__schema_version(struct ffm_store *s)
{
	return s->version;
}

int ffm_store__key(struct ffm_store *s, struct ffm_store_key *out)
{
	sqlite3_stmt *st;
	int rc, err = 0;

	if (!s->key.key) {
		rc = sqlite3_prepare_v2(s->db, "SELECT key, uid, exe, args_hash FROM keys", -1,
					&st, NULL);
		if (rc != SQLITE_OK)
			return ffm_store_err(s->db, rc);
		rc = sqlite3_step(st);
		if (rc == SQLITE_ROW) {
			const char *k = (const char *)sqlite3_column_text(st, 0);
			const char *e = (const char *)sqlite3_column_text(st, 2);
			s->key = (struct ffm_store_key){
				.key = strdup(k ? k : ""), .exe = e ? strdup(e) : NULL,
				.uid = sqlite3_column_int64(st, 1), .args_hash = sqlite3_column_int64(st, 3),
			};
			if (!s->key.key || (e && !s->key.exe))
				err = -ENOMEM;
		} else {
			err = rc == SQLITE_DONE ? -ENOENT : ffm_store_err(s->db, rc);
		}
		sqlite3_finalize(st);
		if (err) {
			free((char *)s->key.key);
			free((char *)s->key.exe);
			s->key = (struct ffm_store_key){ 0 };
			return err;
		}
	}
	*out = s->key;
	return 0;
}

int ffm_store__check(struct ffm_store *s, bool full)
{
	int err = ffm_store__flush(s);

	return err ? err : run_check(s->db, full);
}

#define STR_(x) #x
#define XSTR_(x) STR_(x)
#define FFM_STORE_SCHEMA_STR XSTR_(FFM_STORE_SCHEMA_VERSION)

const char *ffm_store__strerror(int err)
{
	switch (err < 0 ? -err : err) {
	case EBADMSG:
		return "not a usable SQLite database (empty, truncated, corrupt or not SQLite)";
	case EPROTO:
		return "an SQLite database, but not an ffm store";
	case ENOTSUP:
		return "an ffm store of a newer schema (this ffm reads store schema versions up to "
		       FFM_STORE_SCHEMA_STR ": use the ffm that wrote it, or a newer one)";
	case EBUSY:
		return "store is locked by another writer (busy timeout)";
	case EEXIST:
		return "constraint violated, or the key file holds another key";
	default:
		return strerror(err < 0 ? -err : err);
	}
}
