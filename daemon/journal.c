/* SPDX-License-Identifier: MIT */
/*
 * The journal of active jobs, <state_dir>/ffmd-jobs: its format, writing it, reading it back.
 * It is rewritten atomically (a temporary file, fsync, rename) at each job start and end and
 * when a driver becomes ready, so that after a crash the next ffmd knows which jobs were
 * running and which driver files they used. What a line means when ffmd starts again (runs
 * closed, jobs resumed or ended) is the jobs' business: journal_resume in jobs.c.
 *
 * Values are %XX-escaped where they could break the line format; that escaping is this file's
 * alone. Runs on the loop: a few lines written and synced per job start or end.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/ffmd_int.h"
#include "daemon/jobrun.h"
#include "daemon/log.h"

/* @prefix, then @v %XX-escaped where it could break the line format. */
static void put_escaped(FILE *f, const char *prefix, const char *v)
{
	for (fputs(prefix, f); *v; v++) {
		unsigned char c = (unsigned char)*v;

		if (c == '%' || c == '\t' || c == '\n' || c < 0x20)
			fprintf(f, "%%%02X", c);
		else
			fputc(c, f);
	}
}

static void unescape(char *s)
{
	char *o = s;

	for (; *s; s++) {
		unsigned x;

		if (*s == '%' && sscanf(s + 1, "%2x", &x) == 1) {
			*o++ = (char)x;
			s += 2;
		} else {
			*o++ = *s;
		}
	}
	*o = 0;
}

/*
 * First one line per usable driver file, "driver=PATH": after a crash they are made ready (the
 * calibration is cached) before the jobs resume, so the resumed jobs' processes are probed from
 * their first call even when their libcuda is not the system's. Then one line per active job,
 * tab-separated name=value fields:
 *     job=ID  key=K  owner=UID  stage=N  run=RUN  rule=NAME  sel=TYPE:VALUE ...
 * A pid selector is written "pid:PID@STARTTIME" so that a reused pid is not taken for the job's.
 */
void journal_write(struct ffmd *d)
{
	char tmp[sizeof(d->node.journal) + 8];
	FILE *f;
	int fd;

	snprintf(tmp, sizeof(tmp), "%s.tmp", d->node.journal);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
	if (fd < 0 || !(f = fdopen(fd, "w"))) {
		log_err("cannot write %s: %s; jobs active now are not resumed after a crash", tmp,
			strerror(errno));
		if (fd >= 0)
			close(fd);
		return;
	}
	fprintf(f, "# ffmd's active jobs, resumed after a crash; do not edit\n");
	for (int i = 0; i < MAX_DRIVERS; i++) {
		if (!d->drvs[i].used || d->drvs[i].state != DRV_READY)
			continue;
		put_escaped(f, "driver=", d->drvs[i].path);
		fputc('\n', f);
	}
	for (int i = 0; i < FFM_MAX_JOBS; i++) {
		struct job *j = &d->jobs[i];

		if (!j->used)
			continue;
		put_escaped(f, "job=", j->id);
		put_escaped(f, "\tkey=", j->key);
		fprintf(f, "\towner=%u\tstage=%d\trun=%" PRId64, j->owner, j->override_stage,
			ffm_jobrun__run_id(j->jr));
		put_escaped(f, "\trule=", j->rule);
		for (int k = 0; k < j->nsel; k++) {
			fprintf(f, "\tsel=%s:", ffm_selector_name(j->sel[k].type));
			put_escaped(f, "", j->sel[k].value);
			if (j->sel[k].type == FFM_SEL_PID) {
				pid_t p = (pid_t)atoi(j->sel[k].value);

				fprintf(f, "@%llu", proc_start_time(p));
			}
		}
		fputc('\n', f);
	}
	if (fflush(f) != 0 || fsync(fileno(f)) != 0 || fclose(f) != 0) {
		log_err("cannot write %s: %s", tmp, strerror(errno));
		unlink(tmp);
		return;
	}
	if (rename(tmp, d->node.journal) < 0)
		log_err("cannot replace %s: %s", d->node.journal, strerror(errno));
}

/*
 * Read the journal at @path line by line, calling @fn for each driver line and each job line
 * with an id and a key. A job line's selectors come checked: a pid selector whose process is
 * gone or another one now (start time), or a cgroup that is gone, is left out. -errno when
 * the journal cannot be opened (none: -ENOENT).
 */
int journal_read(const char *path,
		 void (*fn)(struct ffmd *d, const struct journal_line *l, void *ctx),
		 struct ffmd *d, void *ctx)
{
	char line[65536];
	FILE *f = fopen(path, "re");

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		static struct job_spec sp;
		char *save = NULL, *id = NULL, *key = NULL, *rule = "", *tok;
		struct journal_line l = { .sp = &sp };

		if (line[0] == '#' || line[0] == '\n')
			continue;
		memset(&sp, 0, sizeof(sp));
		line[strcspn(line, "\n")] = 0;
		if (!strncmp(line, "driver=", 7)) {
			unescape(line + 7);
			l.driver = line + 7;
			fn(d, &l, ctx);
			continue;
		}
		for (tok = strtok_r(line, "\t", &save); tok; tok = strtok_r(NULL, "\t", &save)) {
			char *v = strchr(tok, '=');

			if (!v)
				continue;
			*v++ = 0;
			if (!strcmp(tok, "sel")) {
				char *c = strchr(v, ':');
				struct ffm_selector *s = &sp.sel[sp.nsel];

				if (!c || sp.nsel == FFM_MAX_SELECTORS)
					continue;
				*c++ = 0;
				if (ffm_selector_type(v, &s->type) < 0)
					continue;
				if (s->type == FFM_SEL_PID) {
					unsigned long long st = 0;
					pid_t p;

					/* Resume only the job's own process, not a pid's new owner. */
					if (sscanf(c, "%d@%llu", &p, &st) != 2 || !st || proc_start_time(p) != st)
						continue;
					snprintf(s->value, sizeof(s->value), "%d", p);
				} else {
					unescape(c);
					snprintf(s->value, sizeof(s->value), "%s", c);
					if (s->type == FFM_SEL_CGROUP && access(s->value, F_OK) < 0)
						continue;
				}
				sp.nsel++;
			} else {
				unescape(v);
				if (!strcmp(tok, "job"))
					id = v;
				else if (!strcmp(tok, "key"))
					key = v;
				else if (!strcmp(tok, "owner"))
					sp.owner = (uid_t)strtoul(v, NULL, 10);
				else if (!strcmp(tok, "stage"))
					sp.override_stage = atoi(v);
				else if (!strcmp(tok, "run"))
					l.run = strtoll(v, NULL, 10);
				else if (!strcmp(tok, "rule"))
					rule = v;
			}
		}
		if (!id || !key || !*id || !*key)
			continue;
		sp.id = id;
		sp.key = key;
		sp.rule = *rule ? rule : NULL;
		fn(d, &l, ctx);
	}
	fclose(f);
	return 0;
}
