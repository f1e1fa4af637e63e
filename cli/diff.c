/* SPDX-License-Identifier: MIT */
/*
 * ffmctl diff <jobid-before> <jobid-after> [--json] [--top N]
 *
 * Did the fix do what the report said? For two jobs of a key (usually: the job ffm analysed and
 * a later one with the fix), per call site: the benefit the before job's report predicted next
 * to the change the after job measured, and the same for the wall time. Sites are matched by
 * their identity (analysis/ffm_analysis.h: application frames + driver function, not store
 * ids), so the after job may come from another store, node or stage. Both sides are measured in the
 * same stage: stage 2 (time in each call) when the after job has a stage-2 run, else stage 1 (time
 * waited at each site), which is what a key's runs after stage 4 record (monitoring).
 *
 * The predicted benefit of a site is the benefit of fixing that site alone; the actual change
 * at a site can be larger (its calls' own cost goes too) or smaller (a later wait absorbs it:
 * the wall time is the honest total).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/ffmctl.h"
#include "cli/report.h"

#define DIFF_SCHEMA_VERSION 1

struct side {
	const char *job_id;
	struct ffmctl_job_stores js;
	struct ffm_analysis **pred; /* per node: the report's analysis (before only) */
	struct ffm_analysis **meas; /* per node: the measuring stage's sites */
	double wall_s;
	int64_t run;
};

static void side_free(struct side *s)
{
	for (size_t i = 0; i < s->js.n; i++) {
		if (s->pred)
			ffm_analysis__free(s->pred[i]);
		if (s->meas)
			ffm_analysis__free(s->meas[i]);
	}
	free(s->pred);
	free(s->meas);
	ffmctl_job_stores__close(&s->js);
}

static int side_open(struct side *s, const char *job_id)
{
	int err;

	s->job_id = job_id;
	err = ffmctl_job_stores__open(ffmctl_g.state_dir, job_id, &s->js);
	if (err) {
		ffmctl_no_job_err("diff", ffmctl_g.state_dir, job_id, err);
		return err;
	}
	s->pred = calloc(s->js.n, sizeof(*s->pred));
	s->meas = calloc(s->js.n, sizeof(*s->meas));
	return s->pred && s->meas ? 0 : -ENOMEM;
}

/* Analyse every node of a side; measured in stage `stage`; before also predicts. */
static int side_analyse(struct side *s, bool before, int stage)
{
	for (size_t i = 0; i < s->js.n; i++) {
		struct ffm_analysis_opts ao = { .sz = sizeof(ao), .job_id = s->job_id,
						.job_only = !before, .profile_stage = stage };
		const struct ffm_analysis_result *r;
		int err;

		if (before) {
			struct ffm_analysis_opts po = { .sz = sizeof(po), .job_id = s->job_id };

			err = ffm_analysis__run(s->js.v[i].store, &po, &s->pred[i]);
			if (err)
				return err;
		}
		err = ffm_analysis__run(s->js.v[i].store, &ao, &s->meas[i]);
		if (err)
			return err;
		r = ffm_analysis__result(s->meas[i]);
		/* The analysis's wall time, as the report's; several nodes: the longest node's */
		if (r->run_profile && r->wall_ns / 1e9 > s->wall_s)
			s->wall_s = r->wall_ns / 1e9;
		if (r->run_profile)
			s->run = r->run_profile;
	}
	return 0;
}

/* Whether any node of the after side has an ended stage-2 run of its own. */
static int after_stage(struct side *s)
{
	for (size_t i = 0; i < s->js.n; i++) {
		struct ffm_analysis_opts ao = { .sz = sizeof(ao), .job_id = s->job_id, .job_only = true,
						.profile_stage = 1 };
		struct ffm_analysis *a = NULL;
		bool two;

		if (ffm_analysis__run(s->js.v[i].store, &ao, &a))
			continue;
		two = ffm_analysis__result(a)->run_timeline != 0;
		ffm_analysis__free(a);
		if (two)
			return 2;
	}
	return 1;
}

/* Predicted and measured time per call site (analysis/merge.c). */
static int collect(struct side *b, struct side *a, int stage, struct ffm_an_diff_row **rows,
		   size_t *n)
{
	const struct ffm_analysis_result **r = calloc(2 * b->js.n + a->js.n + 1, sizeof(*r));
	int err;

	if (!r)
		return -ENOMEM;
	for (size_t i = 0; i < b->js.n; i++) {
		r[i] = ffm_analysis__result(b->pred[i]);
		r[b->js.n + i] = ffm_analysis__result(b->meas[i]);
	}
	for (size_t i = 0; i < a->js.n; i++)
		r[2 * b->js.n + i] = ffm_analysis__result(a->meas[i]);
	err = ffm_an_compare(r, r + b->js.n, b->js.n, r + 2 * b->js.n, a->js.n, stage, rows, n);
	free(r);
	return err;
}

static uint64_t predicted_total(const struct side *b)
{
	uint64_t t = 0;

	for (size_t i = 0; i < b->js.n; i++)
		t += ffm_analysis__result(b->pred[i])->totals.total_ns;
	return t;
}

static bool predictions_known(const struct side *b)
{
	for (size_t i = 0; i < b->js.n; i++)
		if (ffm_analysis__result(b->pred[i])->have_problems)
			return true;
	return false;
}

static void print_text(const struct side *b, const struct side *a, int stage,
		       const struct ffm_an_diff_row *rows, size_t n, int top)
{
	const char *kb = ffm_analysis__result(b->pred[0])->key;
	const char *ka = ffm_analysis__result(a->meas[0])->key;
	double pred = predicted_total(b) / 1e9, act = b->wall_s - a->wall_s;
	char buf[1024];

	printf("ffm diff: job %s (before) vs job %s (after), key %s", b->job_id, a->job_id, kb);
	if (strcmp(kb, ka))
		printf(" / %s (different keys: sites are matched by their code location)", ka);
	printf("\ncompared: stage-%d runs (%s per call site)\n", stage,
	       stage == 2 ? "time in the calls" : "time waited");
	printf("wall time: %.3f s -> %.3f s: saved %.3f s (%.1f%%)", b->wall_s, a->wall_s, act,
	       b->wall_s > 0 ? 100 * act / b->wall_s : 0.0);
	if (predictions_known(b))
		printf("; predicted %.3f s (%.1f%%)\n", pred, b->wall_s > 0 ? 100 * pred / b->wall_s : 0.0);
	else
		printf("; nothing predicted (the before job's key had no stage-3 run)\n");
	printf("\n  %12s %12s %12s %12s %15s  %s\n", "predicted", "actual", "before", "after", "calls",
	       "call site");
	for (size_t i = 0; i < n && (int)i < top; i++) {
		const struct ffm_an_diff_row *r = &rows[i];
		char calls[40];

		ffmctl_site_str(r->site, buf, sizeof(buf));
		snprintf(calls, sizeof(calls), "%" PRIu64 "->%" PRIu64, r->n_before, r->n_after);
		printf("  %10.6f s %+10.6f s %10.6f s %10.6f s %15s  %s %s\n", r->predicted_ns / 1e9,
		       ((double)r->before_ns - (double)r->after_ns) / 1e9, r->before_ns / 1e9,
		       r->after_ns / 1e9, calls, r->site->api_name, buf);
	}
	if ((int)n > top)
		printf("  ... %zu more (--top N)\n", n - (size_t)top);
}

static json_t *json_side(const struct side *x, struct ffm_analysis *an)
{
	return json_pack("{s:o,s:o,s:o}", "job_id", ffm_json_string(x->job_id),
			 "key", ffm_json_string(ffm_analysis__result(an)->key),
			 "wall_s", ffm_json_fixed(x->wall_s, 9));
}

/* docs/report-json.md, "Diff". */
static int print_json(const struct side *b, const struct side *a, int stage,
		      const struct ffm_an_diff_row *rows, size_t n, int top)
{
	json_t *sites = json_array();

	for (size_t i = 0; i < n && (int)i < top; i++) {
		const struct ffm_an_diff_row *r = &rows[i];

		double actual = ((double)r->before_ns - (double)r->after_ns) / 1e9;

		sites = ffm_json_append(sites, json_pack(
			"{s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o}",
			"api", ffm_json_string(r->site->api_name),
			"call_site", ffmctl_json_site(r->site),
			"predicted_s", ffm_json_fixed(r->predicted_ns / 1e9, 9),
			"actual_s", ffm_json_fixed(actual, 9),
			"before_s", ffm_json_fixed(r->before_ns / 1e9, 9),
			"after_s", ffm_json_fixed(r->after_ns / 1e9, 9),
			"count_before", ffm_json_u64(r->n_before),
			"count_after", ffm_json_u64(r->n_after)));
	}
	return ffm_json_print(stdout, json_pack(
		"{s:i,s:s,s:i,s:o,s:o,s:o,s:o,s:o}", "schema_version", DIFF_SCHEMA_VERSION,
		"measure", stage == 2 ? "call_time" : "wait_time", "stage", stage,
		"before", json_side(b, b->pred[0]), "after", json_side(a, a->meas[0]),
		"predicted_s", predictions_known(b) ? ffm_json_fixed(predicted_total(b) / 1e9, 9)
						    : json_null(),
		"actual_s", ffm_json_fixed(b->wall_s - a->wall_s, 9), "sites", sites));
}

static const char DIFF_HELP[] =
	"Usage: ffmctl diff <jobid-before> <jobid-after> [--json] [--top N]\n"
	"\n"
	"Did the fix do what the report said? Per call site, the benefit the first job's report\n"
	"predicted next to the change the second job measured; the same for the wall time.\n"
	"\n"
	"Options:\n"
	"  -j, --json   the comparison as JSON for tools (docs/report-json.md, \"Diff\")\n"
	"  --top N      show the first N call sites (default 20)\n";

int ffmctl_diff(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "top", required_argument, NULL, 't' },
		{ "help", no_argument, NULL, 'h' },
		{},
	};
	struct side b = { 0 }, a = { 0 };
	struct ffm_an_diff_row *rows = NULL;
	size_t n = 0;
	bool json = ffmctl_g.json;
	int c, top = 20, stage, err, ret = EXIT_FAIL;

	while ((c = getopt_long(argc, argv, ":jt:h", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			json = true;
			break;
		case 't':
			if (ffmctl_parse_top("diff", optarg, &top) < 0)
				return EXIT_USAGE;
			break;
		case 'h':
			fputs(DIFF_HELP, stdout);
			return EXIT_OK;
		default:
			return ffmctl_opt_err("diff", c, argv);
		}
	}
	if (argc - optind != 2) {
		ffmctl_err("diff", "two job ids, please: the one before the fix and the one after");
		return EXIT_USAGE;
	}
	err = side_open(&b, argv[optind]);
	if (!err)
		err = side_open(&a, argv[optind + 1]);
	if (err)
		goto out;
	stage = after_stage(&a);
	err = side_analyse(&b, true, stage);
	if (!err)
		err = side_analyse(&a, false, stage);
	if (err) {
		ffmctl_err("diff", "cannot analyse the jobs: %s", ffm_store__strerror(err));
		goto out;
	}
	if (!b.run || !a.run) {
		ffmctl_err("diff", "job %s has no ended stage-%d run to compare",
			   b.run ? a.job_id : b.job_id, stage);
		goto out;
	}
	err = collect(&b, &a, stage, &rows, &n);
	if (err) {
		ffmctl_err("diff", "out of memory");
		goto out;
	}
	err = json ? print_json(&b, &a, stage, rows, n, top) : 0;
	if (err < 0) {
		ffmctl_err("diff", "cannot write the JSON: %s", strerror(-err));
		goto out;
	}
	if (!json)
		print_text(&b, &a, stage, rows, n, top);
	ret = EXIT_OK;
out:
	free(rows);
	side_free(&b);
	side_free(&a);
	return ret;
}
