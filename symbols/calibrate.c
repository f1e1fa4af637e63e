/* SPDX-License-Identifier: MIT */
/* Wait-function calibration: see ffm_calibrate.h for the method and the contract. */
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "symbols/ffm_calibrate.h"
#include "symbols/ffm_driver.h"
#include "common/ffm_json.h"
#include "common/util.h"
#include "symbols/ffm_maps.h"
#include "symbols/ffm_node_model.h"
#include "symbols/uprobe_count.h"

struct ffm_calibration {
	char build_id[FFM_BUILD_ID_MAX];
	char *driver_path;
	char *driver_version;
	bool verified, from_cache;
	uint64_t wait_offset, wait_size;
	double seconds;
	char *reason;
	json_t *evidence; /* array of the stacks sampled and the calls counted */
	struct ffm_node_model *models; /* one per GPU key, current version only */
	size_t nmodels;
	char *model_error; /* why this calibration has no node model of its GPU */
};

static const char *const sync_calls[] = { "ctx_sync", "stream_sync", "event_sync", "memcpy_dtoh",
					   "mem_free", "memcpy_dtoh_async_pageable" };
static const char *const nosync_calls[] = { "launch", "driver_version", "memcpy_htod_async_pinned",
					     "event_record" };
static const char *const default_modes[] = { "spin", "yield", "blocking", NULL };

#define NSYNC (sizeof(sync_calls) / sizeof(sync_calls[0]))
#define NNOSYNC (sizeof(nosync_calls) / sizeof(nosync_calls[0]))

/* ------------------------------------------------------------------ accessors */

struct ffm_calibration *ffm_calibration__free(struct ffm_calibration *c)
{
	if (!c)
		return NULL;
	free(c->driver_path);
	free(c->driver_version);
	free(c->reason);
	json_decref(c->evidence);
	free(c->models);
	free(c->model_error);
	free(c);
	return NULL;
}

const char *ffm_calibration__build_id(const struct ffm_calibration *c) { return c->build_id; }
const char *ffm_calibration__driver_path(const struct ffm_calibration *c) { return c->driver_path; }
const char *ffm_calibration__driver_version(const struct ffm_calibration *c)
{
	return c->driver_version;
}
bool ffm_calibration__verified(const struct ffm_calibration *c) { return c->verified; }
bool ffm_calibration__from_cache(const struct ffm_calibration *c) { return c->from_cache; }
uint64_t ffm_calibration__wait_offset(const struct ffm_calibration *c) { return c->wait_offset; }
uint64_t ffm_calibration__wait_size(const struct ffm_calibration *c) { return c->wait_size; }
double ffm_calibration__seconds(const struct ffm_calibration *c) { return c->seconds; }
const char *ffm_calibration__reason(const struct ffm_calibration *c)
{
	return c->reason ? c->reason : "";
}
const json_t *ffm_calibration__evidence(const struct ffm_calibration *c) { return c->evidence; }

const struct ffm_node_model *ffm_calibration__node_models(const struct ffm_calibration *c,
							  size_t *n)
{
	*n = c->nmodels;
	return c->models;
}

const struct ffm_node_model *ffm_calibration__node_model(const struct ffm_calibration *c,
							 const char *gpu)
{
	if (!gpu)
		return c->nmodels == 1 ? &c->models[0] : NULL;
	for (size_t i = 0; i < c->nmodels; i++)
		if (!strcmp(c->models[i].gpu, gpu))
			return &c->models[i];
	return NULL;
}

const char *ffm_calibration__node_model_error(const struct ffm_calibration *c)
{
	return c->model_error ? c->model_error : "";
}

/* Put @nm in @c, in place of a model of the same GPU. */
static int add_model(struct ffm_calibration *c, const struct ffm_node_model *nm)
{
	struct ffm_node_model *v;

	for (size_t i = 0; i < c->nmodels; i++)
		if (!strcmp(c->models[i].gpu, nm->gpu)) {
			c->models[i] = *nm;
			return 0;
		}
	v = realloc(c->models, (c->nmodels + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	c->models = v;
	c->models[c->nmodels++] = *nm;
	return 0;
}

/* ------------------------------------------------------------------ JSON */

static json_t *models_value(const struct ffm_calibration *c)
{
	json_t *a = json_array();

	for (size_t i = 0; a && i < c->nmodels; i++)
		ffm_json_append(a, ffm_node_model__to_json(&c->models[i]));
	return a;
}

static json_t *to_value(const struct ffm_calibration *c)
{
	char hex[32];

	snprintf(hex, sizeof(hex), "%#" PRIx64, c->wait_offset);
	return json_pack("{s:o,s:o,s:o,s:{s:o,s:s,s:o},s:b,s:o,s:o,s:b,s:o,s:o,s:o*}",
			 "build_id", ffm_json_string(c->build_id),
			 "driver_path", ffm_json_string(c->driver_path),
			 "driver_version", ffm_json_string(c->driver_version),
			 "wait_function", "offset", ffm_json_u64(c->wait_offset), "offset_hex", hex,
			 "size", ffm_json_u64(c->wait_size),
			 "verified", c->verified, "reason", ffm_json_string(c->reason),
			 "seconds", ffm_json_fixed(c->seconds, 3), "from_cache", c->from_cache,
			 "evidence", c->evidence ? json_incref(c->evidence) : json_array(),
			 "node_models", models_value(c), "node_model_error",
			 c->model_error ? ffm_json_string(c->model_error) : NULL);
}

int ffm_calibration__to_json(const struct ffm_calibration *c, char **json)
{
	json_t *v = to_value(c);

	*json = v ? json_dumps(v, FFM_JSON_FLAGS) : NULL;
	json_decref(v);
	return *json ? 0 : -ENOMEM;
}

/* Fill @c from a cache file's object: -EINVAL unless it holds a result for @build_id. */
static int from_value(struct ffm_calibration *c, json_t *root, const char *build_id)
{
	const char *id, *path, *version, *reason = NULL;
	json_t *verified, *seconds = NULL, *ev = NULL, *models, *it;
	json_int_t off, size;
	size_t i;

	/* Only a result for this very build of the driver counts. */
	if (json_unpack(root, "{s:s,s:s,s:s,s?s,s:{s:I,s:I},s:o,s?o,s?o}", "build_id", &id,
			"driver_path", &path, "driver_version", &version, "reason", &reason,
			"wait_function", "offset", &off, "size", &size, "verified", &verified,
			"seconds", &seconds, "evidence", &ev) ||
	    strcmp(id, build_id) || off < 0 || size < 0)
		return -EINVAL;
	snprintf(c->build_id, sizeof(c->build_id), "%s", id);
	c->driver_path = strdup(path);
	c->driver_version = strdup(version);
	c->reason = reason ? strdup(reason) : NULL;
	c->wait_offset = (uint64_t)off;
	c->wait_size = (uint64_t)size;
	c->verified = json_is_true(verified);
	c->seconds = json_number_value(seconds);
	if (json_is_array(ev))
		c->evidence = json_incref(ev);
	/* A model of another version, or a bad one, is left out: measured again. */
	models = json_object_get(root, "node_models");
	json_array_foreach(models, i, it) {
		struct ffm_node_model nm;

		if (ffm_node_model__from_json(it, &nm) == 0 && add_model(c, &nm) < 0)
			return -ENOMEM;
	}
	return c->driver_path && c->driver_version ? 0 : -ENOMEM;
}

int ffm_calibration__load_cached(const char *cache_dir, const char *build_id,
				 struct ffm_calibration **ret)
{
	char path[PATH_MAX];
	struct ffm_calibration *c;
	json_error_t jerr;
	json_t *root;
	FILE *f;
	int err;

	*ret = NULL;
	if (!build_id || !build_id[0] || strchr(build_id, '/'))
		return -EINVAL;
	if (!cache_dir)
		return -ENOENT;
	snprintf(path, sizeof(path), "%s/%s.json", cache_dir, build_id);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	root = json_loadf(f, 0, &jerr);
	fclose(f);
	if (!root)
		return -EINVAL;
	c = calloc(1, sizeof(*c));
	err = c ? from_value(c, root, build_id) : -ENOMEM;
	json_decref(root);
	if (err) {
		ffm_calibration__free(c);
		return err;
	}
	c->from_cache = true;
	*ret = c;
	return 0;
}

int ffm_calibration__save(const struct ffm_calibration *c, const char *cache_dir)
{
	char path[PATH_MAX + 256], tmp[PATH_MAX + 300];
	FILE *f;
	int fd, err;

	if (!c->build_id[0])
		return -EINVAL;
	err = ffm_mkdir_p(cache_dir, 0755);
	if (err)
		return err;
	snprintf(path, sizeof(path), "%s/%s.json", cache_dir, c->build_id);
	snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid());
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || !(f = fdopen(fd, "w"))) {
		err = -errno;
		if (fd >= 0)
			close(fd);
		return err;
	}
	err = ffm_json_print(f, to_value(c));
	if (!err && (fflush(f) || fsync(fileno(f)) < 0))
		err = -errno;
	if (fclose(f) && !err)
		err = -EIO;
	if (!err && rename(tmp, path) < 0)
		err = -errno;
	if (err)
		unlink(tmp);
	return err;
}

/* ------------------------------------------------------------------ the probe process */

struct probe {
	pid_t pid;
	int in, out; /* our ends: write commands to in, read replies from out */
	char buf[4096];
	size_t len;
	int timeout_ms;
};

static int probe_start(struct probe *p, const char *prog, const char *driver)
{
	int to[2], from[2];

	if (pipe2(to, O_CLOEXEC) < 0)
		return -errno;
	if (pipe2(from, O_CLOEXEC) < 0) {
		close(to[0]);
		close(to[1]);
		return -errno;
	}
	p->pid = fork();
	if (p->pid < 0) {
		int err = -errno;

		close(to[0]), close(to[1]), close(from[0]), close(from[1]);
		return err;
	}
	if (p->pid == 0) {
		int null = open("/dev/null", O_WRONLY);

		dup2(to[0], 0);
		dup2(from[1], 1);
		if (null >= 0)
			dup2(null, 2);
		execl(prog, prog, driver, (char *)NULL);
		_exit(127);
	}
	close(to[0]);
	close(from[1]);
	p->in = to[1];
	p->out = from[0];
	p->len = 0;
	return 0;
}

/* Next reply line (without newline) into @line. */
static int probe_read(struct probe *p, char *line, size_t size)
{
	uint64_t deadline = ffm_now_ns() / 1000000 + p->timeout_ms;

	for (;;) {
		char *nl = memchr(p->buf, '\n', p->len);
		struct pollfd pfd = { p->out, POLLIN, 0 };
		int64_t left;
		ssize_t r;

		if (nl) {
			size_t l = nl - p->buf;

			snprintf(line, size, "%.*s", (int)l, p->buf);
			memmove(p->buf, nl + 1, p->len - l - 1);
			p->len -= l + 1;
			if (!strncmp(line, "ERROR", 5))
				return -EPROTO;
			return 0;
		}
		left = (int64_t)(deadline - ffm_now_ns() / 1000000);
		if (left <= 0)
			return -ETIMEDOUT;
		if (poll(&pfd, 1, (int)left) < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (!(pfd.revents & (POLLIN | POLLHUP)))
			continue;
		if (p->len == sizeof(p->buf))
			p->len = 0; /* an absurd line: drop it */
		r = read(p->out, p->buf + p->len, sizeof(p->buf) - p->len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -ESRCH; /* the probe died */
		p->len += r;
	}
}

/*
 * write() to the probe without dying of SIGPIPE when it has exited: the signal is blocked for
 * this thread and a pending one consumed (a library must not change the process's handlers).
 */
static ssize_t write_nosig(int fd, const void *buf, size_t len)
{
	sigset_t set, old;
	ssize_t n;
	int saved;

	sigemptyset(&set);
	sigaddset(&set, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &set, &old);
	n = write(fd, buf, len);
	saved = errno;
	if (n < 0 && errno == EPIPE) {
		struct timespec zero = { 0, 0 };

		while (sigtimedwait(&set, NULL, &zero) < 0 && errno == EINTR)
			;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	errno = saved;
	return n;
}

/* Send a command, read its reply line into @reply. */
static int probe_cmd(struct probe *p, const char *fmt, const char *a, const char *b, char *reply,
		     size_t size)
{
	char line[256];
	int n = snprintf(line, sizeof(line), fmt, a, b);

	if (write_nosig(p->in, line, n) != n)
		return -ESRCH;
	return probe_read(p, reply, size);
}

static void probe_stop(struct probe *p)
{
	uint64_t deadline;
	int st;

	if (p->pid <= 0)
		return;
	if (p->in >= 0)
		(void)!write_nosig(p->in, "RELEASE\nQUIT\n", 13);
	deadline = ffm_now_ns() / 1000000 + 2000;
	while (waitpid(p->pid, &st, WNOHANG) == 0) {
		if (ffm_now_ns() / 1000000 > deadline) {
			kill(p->pid, SIGKILL);
			waitpid(p->pid, &st, 0);
			break;
		}
		usleep(2000);
	}
	if (p->in >= 0)
		close(p->in);
	if (p->out >= 0)
		close(p->out);
	p->pid = -1;
	p->in = p->out = -1;
}

/* ------------------------------------------------------------------ stacks */

#define MAX_FRAMES 96
#define MAX_FUNCS 32

struct stack_sample {
	int nframes;
	int nfuncs;
	uint64_t funcs[MAX_FUNCS]; /* libcuda function entries (file offsets), innermost first */
	uint64_t size[MAX_FUNCS];
};

struct frame_ctx {
	uint64_t pcs[MAX_FRAMES];
	int n;
};

static int frame_cb(Dwfl_Frame *state, void *arg)
{
	struct frame_ctx *fc = arg;
	Dwarf_Addr pc;
	bool act;

	if (!dwfl_frame_pc(state, &pc, &act))
		return DWARF_CB_ABORT;
	fc->pcs[fc->n++] = act ? pc : pc - 1;
	return fc->n < MAX_FRAMES ? DWARF_CB_OK : DWARF_CB_ABORT;
}

struct cal_ctx {
	const struct ffm_calibrate_opts *o;
	struct ffm_driver *drv;
	uint64_t dev, ino;
	struct probe probe;
	Dwfl *dwfl;
	struct ffm_map *maps; /* libcuda mappings of the probe */
	size_t nmaps;
	json_t *ev; /* evidence being gathered (an array) */
};

/* libcuda's mappings in the probe: identified by inode, as maps says. */
static int load_maps(struct cal_ctx *cx)
{
	char path[64];
	struct ffm_map *m;
	size_t n, w = 0;
	int err;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)cx->probe.pid);
	err = ffm_maps_parse(path, &m, &n);
	if (err)
		return err;
	for (size_t i = 0; i < n; i++) {
		if (m[i].path && m[i].ino == cx->ino)
			m[w++] = m[i];
		else
			free(m[i].path);
	}
	cx->maps = m;
	cx->nmaps = w;
	return w ? 0 : -ENOENT;
}

static int sample_stack(struct cal_ctx *cx, pid_t tid, struct stack_sample *s)
{
	struct frame_ctx fc = { .n = 0 };
	int r = dwfl_getthread_frames(cx->dwfl, tid, frame_cb, &fc);

	/* A walk that ends early (end of CFI, our frame limit) still gave frames. */
	if (r != 0 && fc.n == 0)
		return -EIO;
	s->nframes = fc.n;
	s->nfuncs = 0;
	for (int i = 0; i < fc.n; i++) {
		for (size_t k = 0; k < cx->nmaps; k++) {
			const struct ffm_map *m = &cx->maps[k];
			struct ffm_func_range fr;

			if (fc.pcs[i] < m->start || fc.pcs[i] >= m->end)
				continue;
			if (ffm_driver__func_at_offset(cx->drv, fc.pcs[i] - m->start + m->offset, &fr) ==
				    0 &&
			    s->nfuncs < MAX_FUNCS &&
			    (!s->nfuncs || s->funcs[s->nfuncs - 1] != fr.entry_offset)) {
				s->funcs[s->nfuncs] = fr.entry_offset;
				s->size[s->nfuncs++] = fr.size;
			}
			break;
		}
	}
	return 0;
}

/* Evidence is for people: a record that cannot be added for want of memory is left out. */
static void ev_stack(struct cal_ctx *cx, const char *call, const char *mode,
		     const struct stack_sample *s)
{
	json_t *funcs = json_array();
	char hex[32];

	for (int i = 0; funcs && i < s->nfuncs; i++) {
		snprintf(hex, sizeof(hex), "%#" PRIx64, s->funcs[i]);
		json_array_append_new(funcs, json_string(hex));
	}
	json_array_append_new(cx->ev, json_pack("{s:s,s:o,s:o,s:i,s:o}", "kind", "stack",
						 "call", ffm_json_string(call),
						 "mode", ffm_json_string(mode),
						 "frames", s->nframes, "libcuda_functions", funcs));
}

static void ms_sleep(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* Block in every synchronizing call under every mode, sampling the waiting stacks. */
static int find_candidate(struct cal_ctx *cx, const char *const *modes, uint64_t *entry,
			  uint64_t *size)
{
	int nsamples = cx->o->samples > 0 ? cx->o->samples : 3;
	uint64_t cand[MAX_FUNCS], csize[MAX_FUNCS];
	int ncand = -1;

	for (const char *const *mode = modes; *mode; mode++) {
		for (size_t c = 0; c < NSYNC; c++) {
			char line[256], call[64], md[32];
			long tid;
			int err, valid = 0;

			err = probe_cmd(&cx->probe, "RUN %s %s\n", sync_calls[c], *mode, line, sizeof(line));
			if (err)
				return err;
			if (sscanf(line, "BLOCKING %63s %31s %ld", call, md, &tid) != 3)
				return -EPROTO;
			/* Let it get into the wait, then look a few times. */
			ms_sleep(20);
			for (int k = 0; k < nsamples; k++) {
				struct stack_sample s;

				if (k)
					ms_sleep(5);
				if (sample_stack(cx, (pid_t)tid, &s) < 0)
					continue;
				ev_stack(cx, sync_calls[c], *mode, &s);
				if (!s.nfuncs)
					continue; /* not (yet) inside libcuda */
				valid++;
				if (ncand < 0) {
					ncand = s.nfuncs;
					memcpy(cand, s.funcs, sizeof(cand[0]) * ncand);
					memcpy(csize, s.size, sizeof(csize[0]) * ncand);
					continue;
				}
				/* Keep the candidates (in innermost-first order) seen here too. */
				int w = 0;
				for (int i = 0; i < ncand; i++)
					for (int j = 0; j < s.nfuncs; j++)
						if (cand[i] == s.funcs[j]) {
							cand[w] = cand[i];
							csize[w++] = csize[i];
							break;
						}
				ncand = w;
			}
			err = probe_cmd(&cx->probe, "RELEASE\n", NULL, NULL, line, sizeof(line));
			if (err)
				return err;
			if (strncmp(line, "DONE ", 5))
				return -EPROTO;
			if (!valid)
				return -ENODATA; /* never caught waiting inside libcuda */
		}
	}
	if (ncand <= 0)
		return -ENODATA;
	*entry = cand[0];
	*size = csize[0];
	return 0;
}

/* Count entries of the candidate per call; fills c->verified / c->reason. */
static int verify(struct cal_ctx *cx, const char *const *modes, struct ffm_calibration *c)
{
	struct ffm_uprobe_counter *ctr;
	char reason[512] = "";
	int err;

	err = ffm_uprobe_counter__open(cx->o->driver_path, c->wait_offset, false, cx->probe.pid,
				       &ctr);
	if (err) {
		char caps[256] = "", hint[200];

		if (err == -EPERM || err == -EACCES)
			snprintf(caps, sizeof(caps), " (counting uprobe hits %s)",
				 ffm_caps_hint(FFM_UPROBE_COUNTER_CAPS, UINT64_MAX, hint, sizeof(hint)));
		snprintf(reason, sizeof(reason), "cannot count uprobe hits at %s+%#" PRIx64 ": %s%s",
			 cx->o->driver_path, c->wait_offset, strerror(-err), caps);
		c->reason = strdup(reason);
		c->verified = false;
		return 0;
	}
	c->verified = true;
	for (const char *const *mode = modes; *mode && !err; mode++) {
		/* Synchronizing calls first: a context switch at the first call of a mode waits
		 * too (cuCtxDestroy), which must not be charged to a non-synchronizing call. */
		for (size_t i = 0; i < NSYNC + NNOSYNC && !err; i++) {
			bool sync = i < NSYNC;
			const char *call = sync ? sync_calls[i] : nosync_calls[i - NSYNC];
			char line[256];
			int64_t hits;
			bool ok;

			err = ffm_uprobe_counter__reset(ctr);
			if (!err)
				err = probe_cmd(&cx->probe, "CALL %s %s\n", call, *mode, line, sizeof(line));
			if (err)
				break;
			hits = ffm_uprobe_counter__read(ctr);
			if (hits < 0) {
				err = (int)hits;
				break;
			}
			ok = sync ? hits >= 1 : hits == 0;
			json_array_append_new(cx->ev, json_pack("{s:s,s:o,s:o,s:b,s:I,s:b}",
					"kind", "count", "call", ffm_json_string(call),
					"mode", ffm_json_string(*mode), "synchronizing", sync,
					"hits", (json_int_t)hits, "ok", ok));
			if (!ok && c->verified) {
				c->verified = false;
				snprintf(reason, sizeof(reason),
					 "%s call %s (%s mode) entered the candidate %" PRId64 " times",
					 sync ? "synchronizing" : "non-synchronizing", call, *mode, hits);
			}
		}
	}
	ffm_uprobe_counter__free(ctr);
	if (err) {
		c->verified = false;
		snprintf(reason, sizeof(reason), "verification stopped: %s", strerror(-err));
	}
	if (!c->verified)
		c->reason = strdup(reason);
	return 0;
}

/*
 * The node model of the probe's GPU (symbols/ffm_node_model.h). A failure leaves the wait
 * function's result as it is and says why in c->model_error; only a dead probe is an error.
 */
static int measure_node(struct cal_ctx *cx, struct ffm_calibration *c)
{
	struct ffm_node_model nm;
	char line[512], why[640];
	int r = 0, err;

	ffm_node_model__init(&nm);
	err = probe_cmd(&cx->probe, "MEASURE\n", NULL, NULL, line, sizeof(line));
	while (!err && (r = ffm_node_model__parse_line(&nm, line)) == 0)
		err = probe_read(&cx->probe, line, sizeof(line));
	if (err == -ESRCH)
		return err;
	if (err == -EPROTO) /* line holds the probe's ERROR */
		snprintf(why, sizeof(why), "the probe said: %.400s", line);
	else if (err)
		snprintf(why, sizeof(why), "measuring stopped: %s", strerror(-err));
	else if (r < 0)
		snprintf(why, sizeof(why), "the probe's measurement \"%.200s\" is malformed", line);
	else if (ffm_node_model__complete(&nm))
		snprintf(why, sizeof(why), "the probe's measurement is incomplete");
	else
		return add_model(c, &nm);
	free(c->model_error);
	c->model_error = strdup(why);
	return 0;
}

/* Start the probe, wait for READY, find libcuda in it and attach the unwinder to it. */
static int probe_attach(struct cal_ctx *cx)
{
	static const Dwfl_Callbacks proc_cb = {
		.find_elf = dwfl_linux_proc_find_elf,
		.find_debuginfo = dwfl_standard_find_debuginfo,
	};
	char line[256];
	int err;

	cx->probe.timeout_ms = cx->o->timeout_ms > 0 ? cx->o->timeout_ms : 10000;
	err = probe_start(&cx->probe, cx->o->probe_path, cx->o->driver_path);
	if (!err)
		err = probe_read(&cx->probe, line, sizeof(line));
	if (!err && strncmp(line, "READY", 5))
		err = -EPROTO;
	if (!err)
		err = load_maps(cx);
	if (err)
		return err;
	cx->dwfl = dwfl_begin(&proc_cb);
	if (!cx->dwfl)
		return -ENOMEM;
	if (dwfl_linux_proc_report(cx->dwfl, cx->probe.pid) != 0 ||
	    dwfl_report_end(cx->dwfl, NULL, NULL) != 0)
		return -ESRCH;
	err = dwfl_linux_proc_attach(cx->dwfl, cx->probe.pid, false);
	return err ? (err > 0 ? -err : -EPERM) : 0;
}

/* One polling and the blocking mode at least: with polling modes alone, the poll helper
 * below the wait function is common to all stacks too (and passes verification). */
static bool modes_ok(const char *const *modes)
{
	bool blocking = false, polling = false;

	for (const char *const *m = modes; *m; m++) {
		blocking |= !strcmp(*m, "blocking");
		polling |= strcmp(*m, "blocking") != 0;
	}
	return blocking && polling;
}

/*
 * 1 with the cached result in *ret when it is used as is: verified, and with a node model (or
 * none asked for). Else 0 (calibrate: an unverified result is redone, and so is one whose model
 * is missing or of an older version), with the cached models, of other GPUs too, in *old: they
 * are kept, and this GPU's measured again.
 */
static int cached_result(const struct ffm_calibrate_opts *o, const char *build_id,
			 struct ffm_calibration **ret, struct ffm_node_model **old, size_t *nold)
{
	struct ffm_calibration *c;

	if (!o->cache_dir || !build_id[0] ||
	    ffm_calibration__load_cached(o->cache_dir, build_id, &c) < 0)
		return 0;
	if (!o->force && c->verified && (c->nmodels || o->skip_node_model)) {
		*ret = c;
		return 1;
	}
	*old = c->models;
	*nold = c->nmodels;
	c->models = NULL;
	ffm_calibration__free(c);
	return 0;
}

int ffm_calibrate(const struct ffm_calibrate_opts *o, struct ffm_calibration **ret)
{
	const char *const *modes = o->modes ? o->modes : default_modes;
	struct cal_ctx cx = { .o = o, .probe = { .pid = -1, .in = -1, .out = -1 } };
	struct ffm_calibration *c = NULL;
	struct ffm_node_model *old_models = NULL;
	size_t nold = 0;
	double t0 = ffm_now_s();
	int err;

	*ret = NULL;
	if (!o->driver_path)
		return -EINVAL;
	if (!modes_ok(modes))
		return -EINVAL;
	err = ffm_driver__open(o->driver_path,
			       &(struct ffm_driver_opts){.sz = sizeof(struct ffm_driver_opts),
							 .display_path = o->display_path},
			       &cx.drv);
	if (err)
		return err;
	ffm_driver__dev_ino(cx.drv, &cx.dev, &cx.ino);
	if (cached_result(o, ffm_driver__build_id(cx.drv), ret, &old_models, &nold)) {
		ffm_driver__free(cx.drv);
		return 0;
	}
	if (!o->probe_path) {
		err = -EINVAL;
		goto out;
	}
	c = calloc(1, sizeof(*c));
	cx.ev = json_array();
	if (!c || !cx.ev) {
		err = -ENOMEM;
		goto out;
	}
	snprintf(c->build_id, sizeof(c->build_id), "%s", ffm_driver__build_id(cx.drv));
	c->driver_path = strdup(o->display_path ? o->display_path : o->driver_path);
	c->driver_version = strdup(ffm_driver__version(cx.drv));
	if (!c->driver_path || !c->driver_version) {
		err = -ENOMEM;
		goto out;
	}
	err = probe_attach(&cx);
	if (err)
		goto out;
	err = find_candidate(&cx, modes, &c->wait_offset, &c->wait_size);
	if (err)
		goto out;
	err = verify(&cx, modes, c);
	if (err)
		goto out;
	for (size_t i = 0; i < nold && !err; i++)
		err = add_model(c, &old_models[i]);
	if (!err && c->verified && !o->skip_node_model)
		err = measure_node(&cx, c);
	if (err)
		goto out;
	c->evidence = cx.ev;
	cx.ev = NULL;
	c->seconds = ffm_now_s() - t0;
	if (o->cache_dir)
		err = ffm_calibration__save(c, o->cache_dir);
out:
	probe_stop(&cx.probe);
	if (cx.dwfl)
		dwfl_end(cx.dwfl);
	json_decref(cx.ev);
	ffm_maps_free(cx.maps, cx.nmaps);
	ffm_driver__free(cx.drv);
	free(old_models);
	if (err) {
		ffm_calibration__free(c);
		return err;
	}
	*ret = c;
	return 0;
}
