/* SPDX-License-Identifier: MIT */
/*
 * ffmctl report <jobid> [--json] [--top N]
 *
 * What the runs of a job's key have shown so far. With stages 1 and 2: the run's wall time,
 * which driver functions synchronized and how long the CPU waited in each, per call site with
 * the application's file:line. Problems and their expected benefit need stages 3 and 4; until
 * they have run the report says so and names the run that will tell more.
 *
 * JSON (schema_version 1): {"schema_version", "job_id", "key", "wall_s", "recoverable_s",
 * "stages": [{"stage", "run", "wall_s", "flags"}], "drops": {...}, "apis": [{"api", "calls",
 * "time_s", "wait_s"}], "call_sites": [...], "problems": [...], "next": "..."}.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/ffmctl.h"
#include "store/ffm_store.h"

#define MAX_APIS 512
#define MAX_SITES 4096

struct api_tot {
	uint32_t api;
	char name[96];
	uint64_t calls, dur_ns, wait_ns;
};

struct site {
	int64_t stack;
	uint32_t kind, api;
	uint64_t count, dur_ns, wait_ns, bytes;
};

struct rep {
	struct ffm_store *s;
	struct ffm_store_run runs[64];
	int nruns;
	int64_t best_run; /* the run whose data the tables show */
	int best_stage;
	struct api_tot apis[MAX_APIS];
	int napis;
	struct site sites[MAX_SITES];
	int nsites;
	uint32_t stages_done;
};

static int on_run(const struct ffm_store_run *r, void *ctx)
{
	struct rep *rp = ctx;

	if (rp->nruns < (int)(sizeof(rp->runs) / sizeof(rp->runs[0]))) {
		rp->runs[rp->nruns] = *r;
		rp->runs[rp->nruns].job_id = NULL; /* valid only during the callback */
		rp->nruns++;
	}
	if (r->end_ns)
		rp->stages_done |= 1u << r->stage;
	return 0;
}

static int on_api_name(uint32_t api, const char *name, void *ctx)
{
	struct rep *rp = ctx;

	for (int i = 0; i < rp->napis; i++)
		if (rp->apis[i].api == api) {
			snprintf(rp->apis[i].name, sizeof(rp->apis[i].name), "%s", name);
			return 0;
		}
	return 0;
}

static struct api_tot *api_slot(struct rep *rp, uint32_t api)
{
	for (int i = 0; i < rp->napis; i++)
		if (rp->apis[i].api == api)
			return &rp->apis[i];
	if (rp->napis == MAX_APIS)
		return NULL;
	rp->apis[rp->napis] = (struct api_tot){ .api = api };
	snprintf(rp->apis[rp->napis].name, sizeof(rp->apis[0].name), "%s", api ? "?" : "(unattributed)");
	return &rp->apis[rp->napis++];
}

static int on_agg(const struct ffm_store_stack_agg *a, void *ctx)
{
	struct rep *rp = ctx;
	struct api_tot *t = api_slot(rp, a->api);

	if (t) {
		t->calls += a->count;
		t->dur_ns += a->dur_ns;
		t->wait_ns += a->wait_ns;
	}
	if (rp->nsites < MAX_SITES)
		rp->sites[rp->nsites++] = (struct site){ a->stack, a->kind, a->api, a->count, a->dur_ns,
							 a->wait_ns, a->bytes };
	return 0;
}

static int cmp_api(const void *a, const void *b)
{
	const struct api_tot *x = a, *y = b;

	return x->wait_ns < y->wait_ns ? 1 : x->wait_ns > y->wait_ns ? -1 : strcmp(x->name, y->name);
}

static int cmp_site(const void *a, const void *b)
{
	const struct site *x = a, *y = b;
	uint64_t tx = x->wait_ns ? x->wait_ns : x->dur_ns, ty = y->wait_ns ? y->wait_ns : y->dur_ns;

	return tx < ty ? 1 : tx > ty ? -1 : 0;
}

/* The application frame of a stack: the first frame outside libcuda that has a source line,
 * else the first outside libcuda. */
struct app_frame {
	char func[256], file[256], module[256];
	uint32_t line;
	uint64_t offset;
	int found;
};

static int on_frame(const struct ffm_store_frame *f, uint32_t depth, void *ctx)
{
	struct app_frame *af = ctx;
	const char *base = f->module ? strrchr(f->module, '/') : NULL;

	base = base ? base + 1 : (f->module ? f->module : "?");
	if (!strncmp(base, "libcuda.so", 10))
		return 0;
	if (af->found == 2)
		return 0;
	if (af->found == 0 || (f->file && f->line)) {
		snprintf(af->func, sizeof(af->func), "%s", f->demangled ? f->demangled : f->func ? f->func : "?");
		snprintf(af->file, sizeof(af->file), "%s", f->file ? f->file : "");
		snprintf(af->module, sizeof(af->module), "%s", base);
		af->line = f->line;
		af->offset = f->offset;
		af->found = f->file && f->line ? 2 : 1;
	}
	return 0;
}

static void json_str(FILE *o, const char *s)
{
	fputc('"', o);
	for (; s && *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(o, "\\%c", c);
		else if (c < 0x20)
			fprintf(o, "\\u%04x", c);
		else
			fputc(c, o);
	}
	fputc('"', o);
}

static const char *kind_name(uint32_t k)
{
	static const char *n[] = { "?", "wait", "api", "transfer", "alloc", "free", "memset", "launch" };

	return k < sizeof(n) / sizeof(n[0]) ? n[k] : "?";
}

static const char *next_step(uint32_t done)
{
	if (!(done & (1u << 1)))
		return "the next run of this job key records stage 1 (which calls synchronize)";
	if (!(done & (1u << 2)))
		return "the next run records stage 2 (every sync and transfer, with call sites)";
	if (!(done & (1u << 3)))
		return "stage 3 (which syncs and transfers are needed) is not implemented yet: "
		       "no problems are classified, so no expected benefit is shown";
	if (!(done & (1u << 4)))
		return "the next run records stage 4 (time from sync to first use)";
	return "all stages have run";
}

int ffmctl_report_job(const char *job_id, bool json)
{
	struct ffm_store_opts so = { .sz = sizeof(so), .read_only = true };
	struct ffm_store_key key = {};
	struct ffm_store_drops drops = {};
	struct rep *rp;
	double wall = 0;
	int err, top = 20;

	rp = calloc(1, sizeof(*rp));
	if (!rp)
		return -ENOMEM;
	err = ffm_store__find_job(ffmctl_g.state_dir, job_id, &so, &rp->s);
	if (err < 0) {
		ffmctl_err("report", "no job '%s' under %s: %s", job_id, ffmctl_g.state_dir,
			   err == -ENOENT ? "no store holds it" : ffm_store__strerror(err));
		free(rp);
		return err;
	}
	ffm_store__key(rp->s, &key);
	ffm_store__for_each_run(rp->s, on_run, rp);

	/* The tables show the latest ended run of the most detailed stage that times calls
	 * (stage 2 over stage 1); runs come in id order, so a later one replaces an earlier. */
	{
		int best_stage = 0;

		for (int i = 0; i < rp->nruns; i++) {
			const struct ffm_store_run *r = &rp->runs[i];

			if (!r->end_ns || r->stage > 2 || r->stage < best_stage)
				continue;
			best_stage = r->stage;
			rp->best_run = r->id;
			rp->best_stage = r->stage;
			wall = r->wall_s;
		}
	}
	if (rp->best_run) {
		ffm_store__for_each_stack_agg(rp->s, rp->best_run, on_agg, rp);
		ffm_store__for_each_api_name(rp->s, on_api_name, rp);
		ffm_store__get_drops(rp->s, rp->best_run, &drops);
	}
	qsort(rp->apis, rp->napis, sizeof(rp->apis[0]), cmp_api);
	qsort(rp->sites, rp->nsites, sizeof(rp->sites[0]), cmp_site);

	if (json) {
		printf("{\"schema_version\":1,\"job_id\":");
		json_str(stdout, job_id);
		printf(",\"key\":");
		json_str(stdout, key.key);
		printf(",\"wall_s\":%.6f,\"recoverable_s\":0,\"stages\":[", wall);
		for (int i = 0; i < rp->nruns; i++)
			printf("%s{\"stage\":%d,\"run\":%" PRId64 ",\"wall_s\":%.6f,\"flags\":%u}", i ? "," : "",
			       rp->runs[i].stage, rp->runs[i].id, rp->runs[i].wall_s, rp->runs[i].flags);
		printf("],\"drops\":{\"ringbuf\":%" PRIu64 ",\"stack_depth\":%" PRIu64 ",\"map_full\":%" PRIu64 ",\"other\":%" PRIu64 "},\"apis\":[",
		       drops.count[0], drops.count[1], drops.count[2], drops.count[3]);
		for (int i = 0; i < rp->napis; i++) {
			printf("%s{\"api\":", i ? "," : "");
			json_str(stdout, rp->apis[i].name);
			printf(",\"calls\":%" PRIu64 ",\"time_s\":%.6f,\"wait_s\":%.6f}", rp->apis[i].calls,
			       rp->apis[i].dur_ns / 1e9, rp->apis[i].wait_ns / 1e9);
		}
		printf("],\"call_sites\":[");
		for (int i = 0; i < rp->nsites && i < top; i++) {
			struct app_frame af = {};
			const char *api = "?";

			ffm_store__for_each_frame(rp->s, rp->sites[i].stack, on_frame, &af);
			for (int j = 0; j < rp->napis; j++)
				if (rp->apis[j].api == rp->sites[i].api)
					api = rp->apis[j].name;
			printf("%s{\"stack\":%" PRId64 ",\"kind\":\"%s\",\"api\":", i ? "," : "", rp->sites[i].stack,
			       kind_name(rp->sites[i].kind));
			json_str(stdout, api);
			printf(",\"count\":%" PRIu64 ",\"time_s\":%.6f,\"wait_s\":%.6f,\"function\":",
			       rp->sites[i].count, rp->sites[i].dur_ns / 1e9, rp->sites[i].wait_ns / 1e9);
			json_str(stdout, af.func);
			printf(",\"file\":");
			json_str(stdout, af.file);
			printf(",\"line\":%u}", af.line);
		}
		printf("],\"problems\":[],\"next\":");
		json_str(stdout, next_step(rp->stages_done));
		printf("}\n");
	} else {
		printf("ffm report: job %s, key %s\n", job_id, key.key ? key.key : "?");
		printf("runs:");
		for (int i = 0; i < rp->nruns; i++)
			printf(" %sstage %d (%.2f s)", i ? ", " : "", rp->runs[i].stage, rp->runs[i].wall_s);
		printf("\nwall time: %.3f s (tables from the latest stage-%d run)\n", wall, rp->best_stage);
		printf("data quality: %" PRIu64 " records lost, %" PRIu64 " partial stacks, %" PRIu64 " map-full, %" PRIu64 " other\n",
		       drops.count[0], drops.count[1], drops.count[2], drops.count[3]);
		printf("\n%-28s %10s %12s %12s %8s\n", "driver function", "calls", "time (s)", "waited (s)", "% wall");
		for (int i = 0; i < rp->napis; i++)
			printf("%-28s %10" PRIu64 " %12.6f %12.6f %7.1f%%\n", rp->apis[i].name, rp->apis[i].calls,
			       rp->apis[i].dur_ns / 1e9, rp->apis[i].wait_ns / 1e9,
			       wall > 0 ? 100.0 * rp->apis[i].wait_ns / 1e9 / wall : 0.0);
		printf("\ncall sites (by time waited):\n");
		for (int i = 0; i < rp->nsites && i < top; i++) {
			struct app_frame af = {};
			const char *api = "?";

			ffm_store__for_each_frame(rp->s, rp->sites[i].stack, on_frame, &af);
			for (int j = 0; j < rp->napis; j++)
				if (rp->apis[j].api == rp->sites[i].api)
					api = rp->apis[j].name;
			printf("  %-22s %8" PRIu64 "x  waited %10.6f s  %s", api, rp->sites[i].count,
			       rp->sites[i].wait_ns / 1e9, af.func[0] ? af.func : "?");
			if (af.file[0])
				printf(" at %s:%u", af.file, af.line);
			else if (af.module[0])
				printf(" (%s+%#" PRIx64 ")", af.module, af.offset);
			printf("\n");
		}
		printf("\nnext: %s\n", next_step(rp->stages_done));
	}
	ffm_store__free(rp->s);
	free(rp);
	return 0;
}

int ffmctl_report(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'J' },
		{ "help", no_argument, NULL, 'h' },
		{},
	};
	bool json = false;
	int c;

	while ((c = getopt_long(argc, argv, "Jh", opts, NULL)) != -1) {
		switch (c) {
		case 'J':
			json = true;
			break;
		case 'h':
			printf("Usage: ffmctl report <jobid> [--json]\n");
			return EXIT_OK;
		default:
			return EXIT_USAGE;
		}
	}
	if (optind != argc - 1) {
		ffmctl_err("report", optind >= argc ? "no job id given" : "one job id, please");
		return EXIT_USAGE;
	}
	return ffmctl_report_job(argv[optind], json) == 0 ? EXIT_OK : EXIT_FAIL;
}
