/* SPDX-License-Identifier: MIT */
/*
 * /etc/ffm/ffmd.conf: "name = value" lines, '#' comments, and [rule NAME] sections:
 *
 *     state_dir = /var/lib/ffm
 *     runtime_dir = /run/ffm
 *     admin_group = ffm
 *     flush_ms = 200
 *     ringbuf_kib = 65536   # ring buffer size, a power of two >= 64 (default 64 MiB)
 *     ringbuf_wakeup_kib = 8192
 *     probe_scope = process # or system (read at start only; see README, "Overhead")
 *     metrics_dir = /var/lib/node_exporter/textfile_collector  # off when unset (start only)
 *     trusted_driver_dirs = /opt/nvidia/lib:/srv/drivers # root's drivers there are trusted
 *                           # on any file system, nosuid mounts included (start only)
 *     sample_budget = 0.1%  # adaptive stage 1's budget of a process's time; 0: trace all
 *     wait_cost_us = 2.8    # what one traced wait costs a process on this node
 *     analysis = node       # or reader: where a run's analysis runs (docs/REPORT.md)
 *
 *     # resource bounds per job and user (0: none; see ffmd.conf(5) and docs/SECURITY.md)
 *     job_stacks = 20000         # new stacks a job's run stores
 *     job_stacks_per_s = 1000    # ... per second (bursts of 5 s' worth)
 *     job_code_objects = 65536   # Python code objects a run remembers
 *     frame_string_bytes = 2048  # bytes kept of a frame's name or file
 *     job_store_mib = 512        # what a run may add to its store
 *     user_store_mib = 1024      # what one user's active runs may add together
 *     user_procs = 512           # processes one user may have tracked (start only)
 *     consume_ms = 50            # longest one read of the ring buffer holds the loop
 *
 *     [rule gpu-users]
 *     uid = 1000            # selectors as in `ffmctl job start`: uid, cgroup, exe (repeatable)
 *     key = nightly         # optional; default: uid + executable + arguments
 *     stage = 1             # optional override
 *
 * At most FFM_MAX_RULES rules (half of the job slots, daemon/config.h says why).
 *
 * Unknown names and malformed lines are errors (a daemon that ignores a typo in its config
 * does something else than the admin asked). So is a config that is not a regular file: a
 * directory reads as an empty file, and a FIFO would block ffmd (and its SIGHUP reload)
 * until some writer came.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/collector.h"
#include "daemon/config.h"

static char *trim(char *s)
{
	char *e;

	while (isspace((unsigned char)*s))
		s++;
	e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = 0;
	return s;
}

static int parse_u32(const char *v, uint32_t max, uint32_t *out)
{
	char *end;
	unsigned long x;

	errno = 0;
	x = strtoul(v, &end, 10);
	if (errno || end == v || *end || x > max || *v == '-')
		return -EINVAL;
	*out = (uint32_t)x;
	return 0;
}

/* A number in [0, @max], with an optional trailing '%' (@pct: the value is a percentage,
 * stored as a fraction; without it a plain number is one too). */
static int parse_num(const char *v, double max, bool pct, double *out)
{
	char *end;
	double x;

	errno = 0;
	x = strtod(v, &end);
	if (errno || end == v || x < 0 || x != x)
		return -EINVAL;
	if (pct && *end == '%')
		end++;
	if (*end)
		return -EINVAL;
	if (pct)
		x /= 100;
	if (x > max)
		return -EINVAL;
	*out = x;
	return 0;
}

static int copy(char *dst, size_t len, const char *v)
{
	if (strlen(v) >= len)
		return -ENAMETOOLONG;
	strcpy(dst, v);
	return 0;
}

/*
 * "[rule NAME]" (blanks allowed around each part) into @name. Exactly one name: "[rule a b]"
 * is not rule "a" with something ignored, nor is "[rulea]" rule "a"; and a name too long is
 * an error, not a shorter name (the name identifies a rule across reloads).
 */
static int parse_section(const char *s, char *name, size_t len)
{
	char buf[4096], *in, *end;
	size_t n = strlen(s);

	if (n < 2 || n - 2 >= sizeof(buf) || s[0] != '[' || s[n - 1] != ']')
		return -EINVAL;
	memcpy(buf, s + 1, n - 2);
	buf[n - 2] = 0;
	in = trim(buf);
	if (strncmp(in, "rule", 4) || !isspace((unsigned char)in[4]))
		return -EINVAL;
	in = trim(in + 4);
	for (end = in; *end && !isspace((unsigned char)*end) && *end != '[' && *end != ']'; end++)
		;
	if (end == in || *end)
		return -EINVAL;
	if ((size_t)(end - in) >= len)
		return -ENAMETOOLONG;
	strcpy(name, in);
	return 0;
}

/*
 * @path opened for reading, if it is a regular file. O_NONBLOCK: opening a FIFO must not wait
 * for a writer (fstat then refuses it); it changes nothing for a regular file. fstat of the
 * descriptor, not stat of the path, so what is checked is what is read.
 */
static FILE *open_regular(const char *path, char *err, size_t errlen, int *r)
{
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	struct stat st;
	FILE *f;

	if (fd < 0 || fstat(fd, &st) < 0)
		goto fail;
	if (!S_ISREG(st.st_mode)) {
		*r = S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL;
		snprintf(err, errlen, "%s: not a regular file (%s); want a config file",
			 path, S_ISDIR(st.st_mode) ? "a directory" : S_ISFIFO(st.st_mode) ? "a FIFO" :
			 S_ISCHR(st.st_mode) ? "a character device" : S_ISSOCK(st.st_mode) ? "a socket" :
			 S_ISBLK(st.st_mode) ? "a block device" : "a special file");
		close(fd);
		return NULL;
	}
	if ((f = fdopen(fd, "r")))
		return f;
fail:
	*r = -errno;
	snprintf(err, errlen, "%s: %s", path, strerror(errno));
	if (fd >= 0)
		close(fd);
	return NULL;
}

/* ---- resource bounds per job and user ------------------------------------------------------ */

/* A bound in MiB into bytes. */
static int parse_mib(const char *v, uint64_t *out)
{
	uint32_t m;
	int err = parse_u32(v, 1u << 24, &m);

	if (!err)
		*out = (uint64_t)m << 20;
	return err;
}

/* A bound of the global section: 0, -ENOENT (not one), -EINVAL. */
static int set_bound(struct ffmd_config *cfg, const char *name, const char *val)
{
	struct ffm_run_limits *l = &cfg->limits;

	if (!strcmp(name, "job_stacks"))
		return parse_u32(val, UINT32_MAX, &l->stacks);
	if (!strcmp(name, "job_stacks_per_s"))
		return parse_u32(val, 1000000, &l->stacks_per_s);
	if (!strcmp(name, "job_code_objects"))
		return parse_u32(val, UINT32_MAX, &l->code_objects);
	if (!strcmp(name, "frame_string_bytes"))
		return parse_u32(val, 1u << 20, &l->string_bytes) ||
		       (l->string_bytes && l->string_bytes < 16) ? -EINVAL : 0;
	if (!strcmp(name, "job_store_mib"))
		return parse_mib(val, &l->store_bytes);
	if (!strcmp(name, "user_store_mib"))
		return parse_mib(val, &l->user_store_bytes);
	if (!strcmp(name, "user_procs"))
		return parse_u32(val, FFM_MAX_PROCS, &cfg->user_procs);
	if (!strcmp(name, "consume_ms"))
		return parse_u32(val, 1000, &cfg->consume_ms) || !cfg->consume_ms ? -EINVAL : 0;
	return -ENOENT;
}

static void bounds_default(struct ffmd_config *cfg)
{
	cfg->limits = FFM_RUN_LIMITS_DEFAULT;
	cfg->consume_ms = FFM_CONSUME_MS;
	cfg->user_procs = FFM_USER_PROCS_DEFAULT;
}

/* ---- settings ------------------------------------------------------------------------------ */

/* Setting @name = @val of the global section (@rule NULL) or of @rule: 0, -ENOENT for a name
 * that is no setting there, or -errno for a bad value. */
static int set_value(struct ffmd_config *cfg, struct ffmd_rule *rule, const char *name,
		     const char *val)
{
	struct ffm_selector *sel;
	uint32_t u;

	if (!rule && !strcmp(name, "state_dir"))
		return copy(cfg->state_dir, sizeof(cfg->state_dir), val);
	if (!rule && !strcmp(name, "runtime_dir"))
		return copy(cfg->runtime_dir, sizeof(cfg->runtime_dir), val);
	if (!rule && !strcmp(name, "metrics_dir"))
		return copy(cfg->metrics_dir, sizeof(cfg->metrics_dir), val);
	if (!rule && !strcmp(name, "trusted_driver_dirs"))
		return copy(cfg->trusted_driver_dirs, sizeof(cfg->trusted_driver_dirs), val);
	if (!rule && !strcmp(name, "admin_group"))
		return copy(cfg->admin_group, sizeof(cfg->admin_group), val);
	if (!rule && !strcmp(name, "flush_ms"))
		return parse_u32(val, 60000, &cfg->flush_ms);
	if (!rule && !strcmp(name, "ringbuf_wakeup_kib"))
		return parse_u32(val, 65536, &cfg->wakeup_kib);
	if (!rule && !strcmp(name, "sample_budget"))
		return parse_num(val, 1, true, &cfg->sample_budget);
	if (!rule && !strcmp(name, "wait_cost_us"))
		return parse_num(val, 1000, false, &cfg->wait_cost_us) || cfg->wait_cost_us <= 0 ? -EINVAL : 0;
	if (!rule && !strcmp(name, "analysis")) {
		cfg->analysis_on_read = !strcmp(val, "reader");
		return cfg->analysis_on_read || !strcmp(val, "node") ? 0 : -EINVAL;
	}
	if (!rule && !strcmp(name, "probe_scope")) {
		cfg->system_scope = !strcmp(val, "system");
		return cfg->system_scope || !strcmp(val, "process") ? 0 : -EINVAL;
	}
	/* BPF ring buffers are a power of two pages; one stack record (about 17 KiB) must fit
	 * several times over. */
	if (!rule && !strcmp(name, "ringbuf_kib"))
		return parse_u32(val, 1u << 20, &cfg->ringbuf_kib) || cfg->ringbuf_kib < 64 ||
		       (cfg->ringbuf_kib & (cfg->ringbuf_kib - 1)) ? -EINVAL : 0;
	if (!rule)
		return set_bound(cfg, name, val);
	if (!strcmp(name, "key"))
		return copy(rule->key, sizeof(rule->key), val);
	if (!strcmp(name, "stage")) {
		if (parse_u32(val, 4, &u) || u < 1)
			return -EINVAL;
		rule->stage = (int)u;
		return 0;
	}
	if (strcmp(name, "uid") && strcmp(name, "cgroup") && strcmp(name, "exe"))
		return -ENOENT;
	if (rule->nsel == FFM_MAX_SELECTORS)
		return -ENOSPC;
	sel = &rule->sel[rule->nsel++];
	ffm_selector_type(name, &sel->type);
	if (sel->type == FFM_SEL_UID && parse_u32(val, UINT32_MAX - 1, &u))
		return -EINVAL;
	return copy(sel->value, sizeof(sel->value), val);
}

int ffmd_config_load(struct ffmd_config *cfg, const char *path, char *err, size_t errlen)
{
	struct ffmd_rule *rule = NULL;
	char line[4096];
	int lineno = 0, r = 0;
	FILE *f;

	memset(cfg, 0, sizeof(*cfg));
	strcpy(cfg->state_dir, FFMD_DEFAULT_STATE_DIR);
	strcpy(cfg->runtime_dir, "/run/ffm");
	cfg->flush_ms = 200;
	cfg->wakeup_kib = 8192;
	cfg->sample_budget = 0.001;
	cfg->wait_cost_us = 2.8;
	bounds_default(cfg);
	if (!path)
		return 0;
	if (copy(cfg->config_path, sizeof(cfg->config_path), path) < 0) {
		snprintf(err, errlen, "%s: path too long", path);
		return -ENAMETOOLONG;
	}
	f = open_regular(path, err, errlen, &r);
	if (!f)
		return r;
	while (fgets(line, sizeof(line), f)) {
		char *s, *eq, *name, *val, *hash;

		lineno++;
		if (!strchr(line, '\n') && !feof(f)) {
			snprintf(err, errlen, "%s:%d: line too long", path, lineno);
			r = -EINVAL;
			break;
		}
		hash = strchr(line, '#');
		if (hash)
			*hash = 0;
		s = trim(line);
		if (!*s)
			continue;
		if (*s == '[') {
			char rname[64];

			r = parse_section(s, rname, sizeof(rname));
			if (r) {
				snprintf(err, errlen, "%s:%d: want [rule NAME] with one name%s, not %s",
					 path, lineno, r == -ENAMETOOLONG ? " of at most 63 bytes" : "", s);
				break;
			}
			if (cfg->nrules == FFM_MAX_RULES) {
				snprintf(err, errlen, "%s:%d: more than %d rules (each rule holds one of "
					 "ffmd's %d job slots; the other %d are kept for jobs)", path,
					 lineno, FFM_MAX_RULES, FFM_MAX_JOBS, FFM_MAX_JOBS - FFM_MAX_RULES);
				r = -ENOSPC;
				break;
			}
			for (int i = 0; i < cfg->nrules; i++)
				if (!strcmp(cfg->rules[i].name, rname)) {
					/* The name identifies a rule across reloads. */
					snprintf(err, errlen, "%s:%d: a second [rule %s]", path, lineno, rname);
					r = -EEXIST;
					break;
				}
			if (r)
				break;
			rule = &cfg->rules[cfg->nrules++];
			strcpy(rule->name, rname);
			continue;
		}
		eq = strchr(s, '=');
		if (!eq) {
			snprintf(err, errlen, "%s:%d: want name = value", path, lineno);
			r = -EINVAL;
			break;
		}
		*eq = 0;
		name = trim(s);
		val = trim(eq + 1);
		if (!*val) {
			snprintf(err, errlen, "%s:%d: %s has no value", path, lineno, name);
			r = -EINVAL;
			break;
		}
		r = set_value(cfg, rule, name, val);
		if (r) {
			snprintf(err, errlen, "%s:%d: %s '%s'", path, lineno,
				 r == -ENOENT ? "unknown setting" : "bad value for", name);
			break;
		}
	}
	/* fgets stops at a read error as at the end: a file read in part is no config. */
	if (!r && ferror(f)) {
		snprintf(err, errlen, "%s:%d: read error", path, lineno + 1);
		r = -EIO;
	}
	fclose(f);
	for (int i = 0; !r && i < cfg->nrules; i++)
		if (!cfg->rules[i].nsel) {
			snprintf(err, errlen, "%s: rule %s has no selector (uid, cgroup or exe)", path,
				 cfg->rules[i].name);
			r = -EINVAL;
		}
	return r;
}

static const char *const sel_names[] = { [FFM_SEL_CGROUP] = "cgroup", [FFM_SEL_PID] = "pid",
					   [FFM_SEL_UID] = "uid", [FFM_SEL_EXE] = "exe" };

const char *ffm_selector_name(enum ffm_sel_type t)
{
	return (unsigned)t <= FFM_SEL_EXE ? sel_names[t] : "exe";
}

int ffm_selector_type(const char *n, enum ffm_sel_type *t)
{
	for (unsigned i = 0; i <= FFM_SEL_EXE; i++)
		if (!strcmp(n, sel_names[i])) {
			*t = (enum ffm_sel_type)i;
			return 0;
		}
	return -EINVAL;
}
