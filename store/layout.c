/* SPDX-License-Identifier: MIT */
/*
 * Where the stores are: the file name of a key's store, and finding stores and jobs among
 * the files of a directory (see ffm_store.h).
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/store_int.h"

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

int ffm_store_key_path(const char *state_dir, const char *key, char *buf, size_t len)
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
	ffm_store_opts_copy(&o, opts);
	o.create = false;
	return ffm_store__open(f.best, &o, ret);
}
