/* SPDX-License-Identifier: MIT */
/*
 * The layout of the state directory (ffm_store.h, "the state directory"): the path of each
 * part, the file name of a key's store, and finding stores and jobs in one store root or in
 * every root of a state directory (its keys/ and each node's).
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bpf/ffm_hash.h"
#include "store/store_int.h"

#define KEYS_DIR "keys"
#define NODES_DIR "nodes"
#define DRIVERS_DIR "drivers"
#define JOURNAL_FILE "ffmd-jobs"
#define HOLDS_FILE "ffmd-held"
#define DONE_DIR "done"

/* <dir>/<a>[/<b>] into buf: its length, or -ENAMETOOLONG. */
static int join(char *buf, size_t len, const char *dir, const char *a, const char *b)
{
	int n = snprintf(buf, len, "%s/%s%s%s", dir, a, b ? "/" : "", b ? b : "");

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : n;
}

/* FFM_STATE_ROOT: see ffm_store.h. */
static int node_root(const char *dir, const char *node, char *buf, size_t len)
{
	char nodes[PATH_MAX], name[256];
	struct stat st;
	int n;

	n = join(nodes, sizeof(nodes), dir, NODES_DIR, NULL);
	if (n < 0)
		return n;
	if (!node || !*node || stat(nodes, &st) < 0 || !S_ISDIR(st.st_mode)) {
		n = snprintf(buf, len, "%s", dir);
		return (size_t)n >= len ? -ENAMETOOLONG : n;
	}
	snprintf(name, sizeof(name), "%s", node);
	for (char *c = name; *c; c++)
		if (*c == '/' || (c == name && *c == '.'))
			*c = '_';
	return join(buf, len, dir, NODES_DIR, name);
}

int ffm_state_path(const char *dir, enum ffm_state_part what, const char *name, char *buf,
		   size_t len)
{
	char file[256], root[PATH_MAX];
	int n;

	if (!dir || !buf)
		return -EINVAL;
	switch (what) {
	case FFM_STATE_ROOT:
		return node_root(dir, name, buf, len);
	case FFM_STATE_KEYS:
		return join(buf, len, dir, KEYS_DIR, NULL);
	case FFM_STATE_KEY:
		n = ffm_store__key_file_name(name, file, sizeof(file));
		return n < 0 ? n : join(buf, len, dir, KEYS_DIR, file);
	case FFM_STATE_NODES:
		return join(buf, len, dir, NODES_DIR, NULL);
	case FFM_STATE_DRIVERS:
		return join(buf, len, dir, DRIVERS_DIR, NULL);
	case FFM_STATE_DONE:
		return join(buf, len, dir, DONE_DIR, NULL);
	case FFM_STATE_JOURNAL:
	case FFM_STATE_HOLDS:
		/* ffmd's own files, one ffmd per node: beside the node's stores. */
		n = node_root(dir, name, root, sizeof(root));
		if (n < 0)
			return n;
		return join(buf, len, root, what == FFM_STATE_JOURNAL ? JOURNAL_FILE : HOLDS_FILE, NULL);
	}
	return -EINVAL;
}

int ffm_store__key_file_name(const char *key, char *buf, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	char name[3 * 256 + 32];
	size_t n = 0, max = 200;
	uint64_t h = FFM_FNV1A_INIT;
	bool cut = false;

	if (!key || !*key)
		return -EINVAL;
	for (const unsigned char *p = (const unsigned char *)key; *p; p++) {
		unsigned char c = *p;
		bool safe = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			    (c >= '0' && c <= '9') || c == '_' || c == '-' ||
			    (c == '.' && p != (const unsigned char *)key);
		h = ffm_fnv1a_byte(h, c);
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

int ffm_store__owner_file_name(const char *key, uint32_t uid, char *buf, size_t len)
{
	int n = ffm_store__key_file_name(key, buf, len);

	if (n < 0 || !uid)
		return n;
	n -= 3; /* ".db" */
	if (snprintf(buf + n, len - (size_t)n, "@%u.db", uid) >= (int)(len - (size_t)n))
		return -ENAMETOOLONG;
	return (int)strlen(buf);
}

/* cb on each store file in @dir (a keys/ or a done/<uid>/), opened read-only; a published
 * copy (@published) immutable. */
static int for_each_in(const char *dir, bool published, ffm_store_key_cb cb, void *ctx)
{
	char path[PATH_MAX + 256];
	struct ffm_store_opts o = { .sz = sizeof(o), .read_only = true, .immutable = published };
	struct ffm_store_key k;
	struct dirent *de;
	DIR *d;
	int r = 0;

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
		r = cb(err ? NULL : s, path, err ? NULL : k.key, err, ctx);
		ffm_store__free(s);
		if (r)
			break;
	}
	closedir(d);
	return r;
}

int ffm_store__for_each_key(const char *root, ffm_store_key_cb cb, void *ctx)
{
	char dir[PATH_MAX];
	int r = ffm_state_path(root, FFM_STATE_KEYS, NULL, dir, sizeof(dir));

	return r < 0 ? r : for_each_in(dir, false, cb, ctx);
}

/*
 * What a reader takes from the store root @root (ffm_store.h, "what a reader opens"): its live
 * keys/ when @live_ok (the state directory itself, not another host's node) and readable by
 * us; else the published copies we may read. cb as for_each_in; *published says which.
 */
static int for_each_readable(const char *root, bool live_ok, bool *published,
			     ffm_store_key_cb cb, void *ctx)
{
	char dir[PATH_MAX], sub[PATH_MAX + 272];
	struct dirent **names;
	int n, r;

	*published = false;
	r = ffm_state_path(root, FFM_STATE_KEYS, NULL, dir, sizeof(dir));
	if (r >= 0 && live_ok && access(dir, R_OK | X_OK) == 0)
		return for_each_in(dir, false, cb, ctx);
	*published = true;
	r = ffm_state_path(root, FFM_STATE_DONE, NULL, dir, sizeof(dir));
	if (r < 0)
		return r;
	n = scandir(dir, &names, NULL, alphasort);
	if (n < 0 && errno == EACCES) { /* an owner: their own copies */
		snprintf(sub, sizeof(sub), "%s/%u", dir, (unsigned)geteuid());
		return for_each_in(sub, true, cb, ctx);
	}
	if (n < 0)
		return -errno;
	r = 0;
	for (int i = 0; i < n; i++) {
		if (!r && names[i]->d_name[0] != '.') {
			snprintf(sub, sizeof(sub), "%s/%s", dir, names[i]->d_name);
			r = for_each_in(sub, true, cb, ctx);
			if (r == -ENOENT || r == -ENOTDIR || r == -EACCES)
				r = 0; /* not a directory of copies, or another owner's */
		}
		free(names[i]);
	}
	free(names);
	return r;
}

struct find_job_ctx {
	const char *job_id;
	char best[PATH_MAX + 256];
	int64_t best_start;
	bool found;
};

static int find_job_cb(struct ffm_store *s, const char *path, const char *key, int err, void *ctx)
{
	struct find_job_ctx *f = ctx;
	sqlite3_stmt *st = NULL;

	if (err)
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
	return 0;
}

/* find_job in the stores of @root that a reader takes (@readable), else in its keys/. */
static int find_job(const char *root, bool readable, bool live_ok, const char *job_id,
		    const struct ffm_store_opts *opts, struct ffm_store **ret)
{
	struct find_job_ctx f = { .job_id = job_id };
	struct ffm_store_opts o;
	bool published = false;
	int err;

	if (!root || !job_id || !ret)
		return -EINVAL;
	err = readable ? for_each_readable(root, live_ok, &published, find_job_cb, &f) :
			 ffm_store__for_each_key(root, find_job_cb, &f);
	if (err)
		return err;
	if (!f.found)
		return -ENOENT;
	ffm_store_opts_copy(&o, opts);
	o.create = false;
	o.immutable = published;
	return ffm_store__open(f.best, &o, ret);
}

int ffm_store__find_job(const char *root, const char *job_id,
			const struct ffm_store_opts *opts, struct ffm_store **ret)
{
	return find_job(root, false, true, job_id, opts, ret);
}

/* ---- every store root of a state directory ------------------------------------------------ */

static int not_dot(const struct dirent *de)
{
	return de->d_name[0] != '.';
}

/* No keys/ in a store root (a new state directory, a node being set up): nothing there. */
static bool no_keys_dir(int err)
{
	return err == -ENOENT || err == -ENOTDIR;
}

/* fn on each store root: the state directory (node NULL), then each node's in name order. A
 * nonzero return of fn stops and is returned. */
static int for_each_root(const char *state_dir, int (*fn)(const char *root, const char *node,
							   void *ctx), void *ctx)
{
	char dir[PATH_MAX], root[PATH_MAX];
	struct dirent **names;
	int n, err;

	if (!state_dir)
		return -EINVAL;
	err = fn(state_dir, NULL, ctx);
	if (err)
		return err;
	err = ffm_state_path(state_dir, FFM_STATE_NODES, NULL, dir, sizeof(dir));
	if (err < 0)
		return err;
	n = scandir(dir, &names, not_dot, alphasort);
	if (n < 0) /* no nodes/: the single-node layout */
		return errno == ENOENT || errno == ENOTDIR ? 0 : -errno;
	err = 0;
	for (int i = 0; i < n; i++) {
		if (!err && (err = join(root, sizeof(root), state_dir, NODES_DIR, names[i]->d_name)) >= 0)
			err = fn(root, names[i]->d_name, ctx);
		free(names[i]);
	}
	free(names);
	return err;
}

struct each_store_ctx {
	const char *node;
	ffm_state_store_cb cb;
	void *ctx;
	int ret; /* cb's nonzero return, told apart from a directory's -ENOENT */
	bool published;
};

static int each_store_key(struct ffm_store *s, const char *path, const char *key, int err,
			  void *ctx)
{
	struct each_store_ctx *c = ctx;
	struct ffm_state_store st = { .path = path, .node = c->node, .key = key, .err = err,
				      .published = c->published };

	c->ret = c->cb(&st, c->ctx);
	return c->ret;
}

static int each_store_root(const char *root, const char *node, void *ctx)
{
	struct each_store_ctx *c = ctx;
	int err;

	c->node = node;
	/* The state directory's own keys/ is this host's; a node's is read from its copies. */
	err = for_each_readable(root, !node, &c->published, each_store_key, c);
	if (c->ret)
		return c->ret;
	return no_keys_dir(err) ? 0 : err;
}

int ffm_state_for_each_store(const char *state_dir, ffm_state_store_cb cb, void *ctx)
{
	struct each_store_ctx c = { .cb = cb, .ctx = ctx };
	int err = for_each_root(state_dir, each_store_root, &c);

	return c.ret ? c.ret : err;
}

struct open_job_ctx {
	const char *job_id;
	const struct ffm_store_opts *opts;
	ffm_state_job_cb cb;
	void *ctx;
	int n, ret;
};

static int open_job_root(const char *root, const char *node, void *ctx)
{
	struct open_job_ctx *c = ctx;
	struct ffm_store *s = NULL;
	int err;

	err = find_job(root, true, !node, c->job_id, c->opts, &s);
	if (no_keys_dir(err))
		return 0; /* no usable store of this root knows the job, or no keys/ */
	if (err < 0)
		return err;
	c->n++;
	c->ret = c->cb(s, node, c->ctx);
	return c->ret;
}

int ffm_state_open_job(const char *state_dir, const char *job_id,
		       const struct ffm_store_opts *opts, ffm_state_job_cb cb, void *ctx)
{
	struct open_job_ctx c = { .job_id = job_id, .opts = opts, .cb = cb, .ctx = ctx };
	int err;

	if (!job_id)
		return -EINVAL;
	err = for_each_root(state_dir, open_job_root, &c);
	if (c.ret)
		return c.ret;
	return err < 0 ? err : c.n;
}
