/* SPDX-License-Identifier: MIT */
/* Per-job metrics in the Prometheus text format, written atomically (daemon/metrics.h). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/ffm_json.h"
#include "daemon/metrics.h"

/* Running jobs (at most FFM_MAX_JOBS) and the newest ended ones. */
#define MAX_JOBS 128

struct mjob {
	bool used, running, analysed;
	char job_id[128], key[128];
	uint32_t uid;
	int stage;
	uint64_t seq; /* last change: the oldest ended job gives way */
	struct ffm_store_analysis head;
};

struct ffm_metrics {
	int dfd;
	gid_t gid; /* the directory's group: the file's readers (the exporter's group) */
	bool up;
	uint64_t seq;
	struct mjob jobs[MAX_JOBS];
};

int ffm_metrics__open(const char *dir, struct ffm_metrics **ret, char *why, size_t len)
{
	struct ffm_metrics *m;
	struct stat st;
	int fd, err;

	fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		err = -errno;
		snprintf(why, len, "%s: %s", dir, lstat(dir, &st) == 0 && S_ISLNK(st.st_mode) ?
			 "a symbolic link" : err == -ENOTDIR ? "not a directory" : strerror(-err));
		return err;
	}
	if (fstat(fd, &st) < 0) {
		err = -errno;
		snprintf(why, len, "%s: %s", dir, strerror(-err));
		close(fd);
		return err;
	}
	if (st.st_uid != geteuid() || (st.st_mode & 022)) {
		snprintf(why, len, "%s: must be a directory of uid %u that no one else may write "
			 "(it is uid %u's, mode %03o)", dir, (unsigned)geteuid(), (unsigned)st.st_uid,
			 (unsigned)(st.st_mode & 0777));
		close(fd);
		return -EPERM;
	}
	m = calloc(1, sizeof(*m));
	if (!m) {
		close(fd);
		return -ENOMEM;
	}
	m->dfd = fd;
	m->gid = st.st_gid;
	m->up = true;
	*ret = m;
	return 0;
}

struct ffm_metrics *ffm_metrics__free(struct ffm_metrics *m)
{
	if (m) {
		close(m->dfd);
		free(m);
	}
	return NULL;
}

void ffm_metrics__set_up(struct ffm_metrics *m, bool up)
{
	m->up = up;
}

/* The entry of @job_id, made when new (taking the oldest ended job's when full). */
static struct mjob *job_of(struct ffm_metrics *m, const char *job_id, bool make)
{
	struct mjob *free_slot = NULL, *oldest = NULL;

	for (int i = 0; i < MAX_JOBS; i++) {
		struct mjob *j = &m->jobs[i];

		if (j->used && !strcmp(j->job_id, job_id))
			return j;
		if (!j->used && !free_slot)
			free_slot = j;
		if (j->used && !j->running && (!oldest || j->seq < oldest->seq))
			oldest = j;
	}
	if (!make)
		return NULL;
	if (!free_slot)
		free_slot = oldest;
	if (free_slot) {
		memset(free_slot, 0, sizeof(*free_slot));
		free_slot->used = true;
		snprintf(free_slot->job_id, sizeof(free_slot->job_id), "%s", job_id);
	}
	return free_slot;
}

void ffm_metrics__job(struct ffm_metrics *m, const char *job_id, const char *key, uint32_t uid,
		      int stage, bool running)
{
	struct mjob *j = job_of(m, job_id, true);

	if (!j)
		return;
	snprintf(j->key, sizeof(j->key), "%s", key);
	j->uid = uid;
	if (stage)
		j->stage = stage;
	j->running = running;
	j->seq = ++m->seq;
}

void ffm_metrics__analysis(struct ffm_metrics *m, const char *job_id,
			   const struct ffm_store_analysis *h)
{
	struct mjob *j = job_of(m, job_id, false);

	if (!j)
		return;
	j->head = *h;
	j->head.job_id = j->head.tool_version = j->head.grouping = NULL;
	j->analysed = true;
	j->seq = ++m->seq;
}

/* A label value: UTF-8 (invalid bytes as U+FFFD), with \, " and newline escaped. */
static void put_label(FILE *f, const char *name, const char *v, bool first)
{
	char *u = ffm_utf8_sanitize(v);

	fprintf(f, "%s%s=\"", first ? "" : ",", name);
	for (const char *p = u ? u : ""; *p; p++) {
		if (*p == '\\' || *p == '"')
			fputc('\\', f);
		if (*p == '\n')
			fputs("\\n", f);
		else
			fputc(*p, f);
	}
	fputc('"', f);
	free(u);
}

static void put_labels(FILE *f, const struct mjob *j)
{
	char uid[16];

	snprintf(uid, sizeof(uid), "%u", j->uid);
	fputc('{', f);
	put_label(f, "job", j->job_id, true);
	put_label(f, "key", j->key, false);
	put_label(f, "uid", uid, false);
	fputc('}', f);
}

enum mval { V_RUNNING, V_STAGE, V_WALL, V_REC, V_SHARE, V_LOST, V_AT };

static const struct family {
	const char *name, *help;
	enum mval v;
	bool analysed; /* only for jobs with an analysis (V_REC, V_SHARE: with problems known) */
} families[] = {
	{ "ffm_job_running", "1 while the job runs, 0 after it ended.", V_RUNNING, false },
	{ "ffm_job_stage", "FFM stage of the job's current or last run (1 waits, 2 calls and "
	  "transfers, 3 protected memory, 4 first use, 5 monitoring).", V_STAGE, false },
	{ "ffm_job_wall_seconds", "Wall time of the run the job's last analysis measured.", V_WALL,
	  true },
	{ "ffm_job_recoverable_seconds", "Wall time that fixing every problem found would save "
	  "(ffmctl report's recoverable); absent until stage 3 has classified the syncs.", V_REC,
	  true },
	{ "ffm_job_recoverable_ratio", "ffm_job_recoverable_seconds / ffm_job_wall_seconds (0 to 1).",
	  V_SHARE, true },
	{ "ffm_job_records_lost", "Records lost in the runs the job's last analysis used.", V_LOST,
	  true },
	{ "ffm_job_analysis_timestamp_seconds", "When the job's last analysis ran (Unix time).",
	  V_AT, true },
};

static bool value_of(const struct mjob *j, const struct family *fa, double *v)
{
	const struct ffm_store_analysis *h = &j->head;

	if (fa->analysed && !j->analysed)
		return false;
	if ((fa->v == V_REC || fa->v == V_SHARE) && !h->have_problems)
		return false;
	*v = fa->v == V_RUNNING ? j->running : fa->v == V_STAGE ? j->stage :
	     fa->v == V_WALL ? h->wall_ns / 1e9 : fa->v == V_REC ? h->recoverable_ns / 1e9 :
	     fa->v == V_SHARE ? h->recoverable_share : fa->v == V_LOST ? (double)h->records_lost :
	     (double)h->at_unix;
	return true;
}

int ffm_metrics__format(const struct ffm_metrics *m, FILE *f)
{
	int active = 0;

	for (int i = 0; i < MAX_JOBS; i++)
		active += m->jobs[i].used && m->jobs[i].running;
	fprintf(f, "# HELP ffm_up 1 while ffmd runs and keeps this file current, 0 once it stopped.\n"
		   "# TYPE ffm_up gauge\nffm_up %d\n", m->up);
	fprintf(f, "# HELP ffm_jobs_active Jobs ffmd measures now.\n"
		   "# TYPE ffm_jobs_active gauge\nffm_jobs_active %d\n", active);
	for (size_t k = 0; k < sizeof(families) / sizeof(families[0]); k++) {
		const struct family *fa = &families[k];

		fprintf(f, "# HELP %s %s\n# TYPE %s gauge\n", fa->name, fa->help, fa->name);
		for (int i = 0; i < MAX_JOBS; i++) {
			double v;

			if (!m->jobs[i].used || !value_of(&m->jobs[i], fa, &v))
				continue;
			fputs(fa->name, f);
			put_labels(f, &m->jobs[i]);
			fprintf(f, " %.15g\n", v);
		}
	}
	return ferror(f) ? -EIO : 0;
}

int ffm_metrics__write(struct ffm_metrics *m)
{
	static const char tmp[] = "." FFM_METRICS_FILE ".tmp"; /* not *.prom: the collector skips it */
	FILE *f;
	int fd, err;

	/* Nobody else writes this directory (checked at open): a leftover is ours. */
	unlinkat(m->dfd, tmp, 0);
	fd = openat(m->dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	/* Every job's id, key and owner: root's and the directory's group's only (the exporter
	 * reads it through that group), never everyone's. */
	if (fchown(fd, (uid_t)-1, m->gid) < 0 || fchmod(fd, FFM_METRICS_MODE) < 0 ||
	    !(f = fdopen(fd, "w"))) {
		err = -errno;
		close(fd);
		unlinkat(m->dfd, tmp, 0);
		return err;
	}
	err = ffm_metrics__format(m, f);
	if (fclose(f) != 0 && !err)
		err = -errno;
	if (!err && renameat(m->dfd, tmp, m->dfd, FFM_METRICS_FILE) < 0)
		err = -errno;
	if (err)
		unlinkat(m->dfd, tmp, 0);
	return err;
}
