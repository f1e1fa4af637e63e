/* SPDX-License-Identifier: MIT */
/* The node model: see ffm_node_model.h. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "symbols/ffm_node_model.h"
#include "common/ffm_json.h"

static const char *const kind_names[FFM_MEM_KINDS] = { "pageable", "pinned", "managed" };
static const char *const dir_names[FFM_COPY_DIRS] = { "h2d", "d2h" };
static const char *const mode_names[FFM_SCHED_MODES] = { "spin", "yield", "blocking" };

/* No figure of a calibration on a real node exceeds a minute; anything above is garbage. */
#define MAX_FIGURE_NS 60e9

static int index_of(const char *const *names, int n, const char *s)
{
	for (int i = 0; s && i < n; i++)
		if (!strcmp(names[i], s))
			return i;
	return -1;
}

const char *ffm_mem_kind_name(enum ffm_mem_kind k)
{
	return (unsigned)k < FFM_MEM_KINDS ? kind_names[k] : "?";
}

const char *ffm_copy_dir_name(enum ffm_copy_dir d)
{
	return (unsigned)d < FFM_COPY_DIRS ? dir_names[d] : "?";
}

const char *ffm_sched_mode_name(enum ffm_sched_mode m)
{
	return (unsigned)m < FFM_SCHED_MODES ? mode_names[m] : "?";
}

int ffm_mem_kind_of(const char *s) { return index_of(kind_names, FFM_MEM_KINDS, s); }
int ffm_copy_dir_of(const char *s) { return index_of(dir_names, FFM_COPY_DIRS, s); }
int ffm_sched_mode_of(const char *s) { return index_of(mode_names, FFM_SCHED_MODES, s); }

void ffm_node_model__init(struct ffm_node_model *nm)
{
	memset(nm, 0, sizeof(*nm));
	nm->version = FFM_NODE_MODEL_VERSION;
	nm->to_device_ns_per_page = nm->to_host_ns_per_page = -1;
	for (int d = 0; d < FFM_COPY_DIRS; d++)
		for (int k = 0; k < FFM_MEM_KINDS; k++)
			for (int i = 0; i < FFM_NM_MAX_POINTS; i++)
				nm->copy_ns[d][k][i] = -1;
	for (int m = 0; m < FFM_SCHED_MODES; m++)
		for (int i = 0; i < FFM_NM_MAX_POINTS; i++)
			nm->exit_ns[m][i] = NAN;
}

static int figure_ok(double ns)
{
	return isfinite(ns) && ns >= 0 && ns <= MAX_FIGURE_NS;
}

/* The index of point @x in @pts (adding it at the end when new and larger than the last). */
static int point_at(uint64_t *pts, int *n, uint64_t x)
{
	for (int i = 0; i < *n; i++)
		if (pts[i] == x)
			return i;
	if (!x || *n == FFM_NM_MAX_POINTS || (*n && pts[*n - 1] > x))
		return -EINVAL;
	pts[*n] = x;
	return (*n)++;
}

static int parse_copy(struct ffm_node_model *nm, const char *args)
{
	char dir[16], kind[16];
	unsigned long long bytes;
	double ns;
	int d, k, i;

	if (sscanf(args, "%15s %15s %llu %lf", dir, kind, &bytes, &ns) != 4 || !figure_ok(ns))
		return -EINVAL;
	d = ffm_copy_dir_of(dir);
	k = ffm_mem_kind_of(kind);
	if (d < 0 || k < 0)
		return -EINVAL;
	i = point_at(nm->size, &nm->nsizes, bytes);
	if (i < 0)
		return i;
	nm->copy_ns[d][k][i] = ns;
	return 0;
}

static int parse_migrate(struct ffm_node_model *nm, const char *args)
{
	unsigned long long page, pages;
	char way[16];
	double ns;

	if (sscanf(args, "%15s %llu %llu %lf", way, &page, &pages, &ns) != 4 || !figure_ok(ns) ||
	    !page || (page & (page - 1)) || !pages || (nm->page_size && nm->page_size != page))
		return -EINVAL;
	nm->page_size = page;
	if (!strcmp(way, "to_device"))
		nm->to_device_ns_per_page = ns / (double)pages;
	else if (!strcmp(way, "to_host"))
		nm->to_host_ns_per_page = ns / (double)pages;
	else
		return -EINVAL;
	return 0;
}

/* FAULTS to_host PAGES FAULTS: the page faults of the host's reads of PAGES pages. */
static int parse_faults(struct ffm_node_model *nm, const char *args)
{
	unsigned long long pages, faults;
	char way[16];

	if (sscanf(args, "%15s %llu %llu", way, &pages, &faults) != 3 || strcmp(way, "to_host") ||
	    !pages || !faults || faults > pages)
		return -EINVAL;
	nm->host_pages_per_fault = (double)pages / (double)faults;
	return 0;
}

static int parse_exit(struct ffm_node_model *nm, const char *args)
{
	unsigned long long wait;
	char mode[16];
	double ns;
	int m, i;

	/* Exit latency may come out negative by a little (timer granularity): kept as is. */
	if (sscanf(args, "%15s %llu %lf", mode, &wait, &ns) != 3 || !isfinite(ns) ||
	    fabs(ns) > MAX_FIGURE_NS)
		return -EINVAL;
	m = ffm_sched_mode_of(mode);
	if (m < 0)
		return -EINVAL;
	i = point_at(nm->wait_ns, &nm->nwaits, wait);
	if (i < 0)
		return i;
	nm->exit_ns[m][i] = ns;
	return 0;
}

int ffm_node_model__parse_line(struct ffm_node_model *nm, const char *line)
{
	if (!strncmp(line, "GPU ", 4)) {
		if (!line[4] || strlen(line + 4) >= sizeof(nm->gpu))
			return -EINVAL;
		snprintf(nm->gpu, sizeof(nm->gpu), "%s", line + 4);
		return 0;
	}
	if (!strncmp(line, "COPY ", 5))
		return parse_copy(nm, line + 5);
	if (!strncmp(line, "MIGRATE ", 8))
		return parse_migrate(nm, line + 8);
	if (!strncmp(line, "FAULTS ", 7))
		return parse_faults(nm, line + 7);
	if (!strncmp(line, "EXIT ", 5))
		return parse_exit(nm, line + 5);
	if (!strncmp(line, "MEASURED ", 9)) {
		double s;

		if (sscanf(line + 9, "%lf", &s) != 1 || !figure_ok(s * 1e9))
			return -EINVAL;
		nm->seconds = s;
		return 1;
	}
	return -EINVAL;
}

int ffm_node_model__complete(const struct ffm_node_model *nm)
{
	if (!nm->gpu[0] || !nm->nsizes || !nm->nwaits || !nm->page_size ||
	    nm->to_device_ns_per_page < 0 || nm->to_host_ns_per_page < 0)
		return -ENODATA;
	for (int i = 0; i < nm->nsizes; i++)
		for (int d = 0; d < FFM_COPY_DIRS; d++)
			for (int k = 0; k < FFM_MEM_KINDS; k++)
				if (nm->copy_ns[d][k][i] < 0)
					return -ENODATA;
	for (int i = 0; i < nm->nwaits; i++)
		for (int m = 0; m < FFM_SCHED_MODES; m++)
			if (isnan(nm->exit_ns[m][i]))
				return -ENODATA;
	return 0;
}

double ffm_node_model__copy_ns(const struct ffm_node_model *nm, enum ffm_copy_dir dir,
			       enum ffm_mem_kind kind, uint64_t bytes)
{
	const double *t;
	int n, i;

	if (!nm || (unsigned)dir >= FFM_COPY_DIRS || (unsigned)kind >= FFM_MEM_KINDS || !nm->nsizes)
		return -1;
	t = nm->copy_ns[dir][kind];
	n = nm->nsizes;
	for (i = 0; i < n; i++)
		if (t[i] < 0)
			return -1;
	if (bytes <= nm->size[0] || n == 1)
		return n == 1 ? t[0] * (double)bytes / (double)nm->size[0] : t[0];
	for (i = 1; i < n - 1 && bytes > nm->size[i]; i++)
		;
	/* Between points i-1 and i, or beyond the last on the last segment's slope. */
	double x0 = (double)nm->size[i - 1], x1 = (double)nm->size[i];
	double v = t[i - 1] + (t[i] - t[i - 1]) * ((double)bytes - x0) / (x1 - x0);

	return v > 0 ? v : 0;
}

double ffm_node_model__staging_ns(const struct ffm_node_model *nm, enum ffm_copy_dir dir,
				  uint64_t bytes)
{
	double pageable = ffm_node_model__copy_ns(nm, dir, FFM_MEM_PAGEABLE, bytes);
	double pinned = ffm_node_model__copy_ns(nm, dir, FFM_MEM_PINNED, bytes);

	if (pageable < 0 || pinned < 0)
		return -1;
	return pageable > pinned ? pageable - pinned : 0;
}

double ffm_node_model__exit_ns(const struct ffm_node_model *nm, enum ffm_sched_mode mode,
			       uint64_t wait_ns)
{
	const double *t;
	int n, i;

	if (!nm || (unsigned)mode >= FFM_SCHED_MODES || !nm->nwaits)
		return -1;
	t = nm->exit_ns[mode];
	n = nm->nwaits;
	for (i = 0; i < n; i++)
		if (isnan(t[i]))
			return -1;
	if (wait_ns <= nm->wait_ns[0])
		return t[0];
	if (wait_ns >= nm->wait_ns[n - 1])
		return t[n - 1];
	for (i = 1; wait_ns > nm->wait_ns[i]; i++)
		;
	double l0 = log((double)nm->wait_ns[i - 1]), l1 = log((double)nm->wait_ns[i]);

	return t[i - 1] + (t[i] - t[i - 1]) * (log((double)wait_ns) - l0) / (l1 - l0);
}

json_t *ffm_node_model__to_json(const struct ffm_node_model *nm)
{
	json_t *copies = json_array(), *exits = json_array();

	for (int d = 0; copies && d < FFM_COPY_DIRS; d++)
		for (int k = 0; k < FFM_MEM_KINDS; k++)
			for (int i = 0; i < nm->nsizes; i++)
				if (nm->copy_ns[d][k][i] >= 0)
					ffm_json_append(copies, json_pack("{s:s,s:s,s:o,s:o}",
						"direction", dir_names[d], "memory", kind_names[k],
						"bytes", ffm_json_u64(nm->size[i]),
						"ns", ffm_json_fixed(nm->copy_ns[d][k][i], 0)));
	for (int m = 0; exits && m < FFM_SCHED_MODES; m++)
		for (int i = 0; i < nm->nwaits; i++)
			if (!isnan(nm->exit_ns[m][i]))
				ffm_json_append(exits, json_pack("{s:s,s:o,s:o}", "mode",
						mode_names[m], "wait_ns", ffm_json_u64(nm->wait_ns[i]),
						"ns", ffm_json_fixed(nm->exit_ns[m][i], 0)));
	return json_pack("{s:i,s:o,s:o,s:o,s:{s:o,s:o,s:o,s:o},s:o}", "version", nm->version,
			 "gpu", ffm_json_string(nm->gpu), "seconds", ffm_json_fixed(nm->seconds, 3),
			 "copies", copies ? copies : json_null(), "migration",
			 "page_size", ffm_json_u64(nm->page_size),
			 "to_device_ns_per_page", ffm_json_fixed(nm->to_device_ns_per_page, 1),
			 "to_host_ns_per_page", ffm_json_fixed(nm->to_host_ns_per_page, 1),
			 "host_pages_per_fault", ffm_json_fixed(nm->host_pages_per_fault, 2),
			 "exit_latency", exits ? exits : json_null());
}

/* Each item of the cached object goes through the probe's line parser: one set of checks. */
static int from_items(struct ffm_node_model *nm, const json_t *copies, const json_t *exits)
{
	char line[256];
	size_t i;
	json_t *it;

	json_array_foreach(copies, i, it) {
		snprintf(line, sizeof(line), "COPY %s %s %.0f %.17g",
			 ffm_json_get_str(it, "direction", "?"), ffm_json_get_str(it, "memory", "?"),
			 ffm_json_get_num(it, "bytes", 0), ffm_json_get_num(it, "ns", -1));
		if (ffm_node_model__parse_line(nm, line))
			return -EINVAL;
	}
	json_array_foreach(exits, i, it) {
		snprintf(line, sizeof(line), "EXIT %s %.0f %.17g", ffm_json_get_str(it, "mode", "?"),
			 ffm_json_get_num(it, "wait_ns", 0), ffm_json_get_num(it, "ns", NAN));
		if (ffm_node_model__parse_line(nm, line))
			return -EINVAL;
	}
	return 0;
}

int ffm_node_model__from_json(const json_t *v, struct ffm_node_model *nm)
{
	const json_t *copies = json_object_get(v, "copies"), *exits, *mig;
	const char *gpu = ffm_json_get_str(v, "gpu", "");
	double page, to_dev, to_host, ppf;

	ffm_node_model__init(nm);
	if (!json_is_object(v))
		return -EINVAL;
	if (json_integer_value(json_object_get(v, "version")) != FFM_NODE_MODEL_VERSION)
		return -ESTALE;
	exits = json_object_get(v, "exit_latency");
	mig = json_object_get(v, "migration");
	if (!gpu[0] || strlen(gpu) >= sizeof(nm->gpu) || !json_is_array(copies) ||
	    !json_is_array(exits) || !json_is_object(mig))
		return -EINVAL;
	snprintf(nm->gpu, sizeof(nm->gpu), "%s", gpu);
	nm->seconds = ffm_json_get_num(v, "seconds", 0);
	page = ffm_json_get_num(mig, "page_size", 0);
	to_dev = ffm_json_get_num(mig, "to_device_ns_per_page", -1);
	to_host = ffm_json_get_num(mig, "to_host_ns_per_page", -1);
	if (!figure_ok(page) || !figure_ok(to_dev) || !figure_ok(to_host) ||
	    ((uint64_t)page & ((uint64_t)page - 1)))
		return -EINVAL;
	nm->page_size = (uint64_t)page;
	nm->to_device_ns_per_page = to_dev;
	nm->to_host_ns_per_page = to_host;
	/* absent from the models cached before it was counted: 0, taken as 1 */
	ppf = ffm_json_get_num(mig, "host_pages_per_fault", 0);
	if (!isfinite(ppf) || ppf < 0 || (ppf > 0 && ppf < 1) || ppf > (double)(1u << 20))
		return -EINVAL;
	nm->host_pages_per_fault = ppf;
	return from_items(nm, copies, exits);
}
