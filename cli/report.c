/* SPDX-License-Identifier: MIT */
/*
 * ffmctl report <jobid> [--json] [--group point|function|sequence] [--subsequence ID:FROM:TO]
 *               [--top N] [--noise PCT]
 *
 * The problems the runs of a job's key found, sorted by expected benefit (Figure 5 of the paper;
 * every number and verdict comes from analysis/ffm_analysis.h), each with its type, count,
 * driver function, the application's call site and its fix (the call to delete, move or use
 * instead: "what each problem is, and its fix" below); per driver function the time spent in it
 * next to the benefit of fixing it (the paper's Table 2); and what the data is worth (drops,
 * partial coverage, run-to-run differences: one remark a line, each with what to do, those that
 * change no figure by the noise threshold counted in one line). Until stage 3 has run it shows
 * what stages 1 and 2 know (time per driver function and call site) and which run will tell
 * more; after a profile's first stages, the command that runs the others. A job that ran on
 * several nodes (one store per node, see cli/report.h) is merged: problems by call-site
 * identity, plus a per-node and per-process breakdown with the load imbalance of recoverable
 * time (max/mean - 1).
 *
 * Text for people, --json for tools: docs/report-json.md documents the schema (versioned).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/ffmctl.h"
#include "cli/report.h"
#include "common/util.h"
#include "stages/ffm_plan.h"
#include "stages/ffm_price.h"

#define REPORT_SCHEMA_VERSION 2
/* Text output folds problems worth less than this share of the wall time into one line: a
 * clean program lists none, and the list stays about what is worth fixing. */
#define FFM_REPORT_NOISE_PCT 0.1

/* ---- formatting ------------------------------------------------------------------------- */

void ffmctl_site_str(const struct ffm_an_site *x, char *buf, size_t len)
{
	if (x->python)
		snprintf(buf, len, "%s:%u in %s", x->file, x->line, x->function);
	else if (x->file[0])
		snprintf(buf, len, "%s at %s:%u", x->function, x->file, x->line);
	else
		snprintf(buf, len, "%s (%s+%#" PRIx64 ")", x->function, x->module, x->offset);
}

json_t *ffmctl_json_site(const struct ffm_an_site *x)
{
	return json_pack("{s:o,s:o,s:I,s:o,s:o,s:b,s:o*,s:o*}", "function", ffm_json_string(x->function),
			 "file", ffm_json_string(x->file), "line", (json_int_t)x->line,
			 "module", ffm_json_string(x->module),
			 /* a Python line's offset is a 64-bit key, not a file offset */
			 "offset", x->python ? ffm_json_int(0) : ffm_json_u64(x->offset),
			 "python", x->python,
			 /* launches: the kernel launched here, when the program's getter named it */
			 "kernel", x->kernel ? ffm_json_string(x->kernel) : NULL,
			 "other_kernels", x->kernel ? ffm_json_u64(x->other_kernels) : NULL);
}

/* A launch site's kernel, as the report's rows show it (nothing when not named). */
static void print_kernel(FILE *o, const struct ffm_an_site *x)
{
	if (!x->kernel)
		return;
	fprintf(o, "  [kernel %s", x->kernel);
	if (x->other_kernels)
		fprintf(o, " and %u other%s", x->other_kernels, x->other_kernels == 1 ? "" : "s");
	fputc(']', o);
}

static double s_of(uint64_t ns)
{
	return ns / 1e9;
}

static double pct(uint64_t part, uint64_t whole)
{
	return whole ? 100.0 * (double)part / (double)whole : 0.0;
}

static const char *type_text(unsigned p)
{
	switch (p) {
	case FFM_PROBLEM_UNNECESSARY_SYNC: return "unnecessary sync";
	case FFM_PROBLEM_MISPLACED_SYNC: return "misplaced sync";
	case FFM_PROBLEM_DUPLICATE_TRANSFER: return "duplicate transfer";
	case FFM_PROBLEM_HOST_READ: return "host read every iteration";
	case FFM_PROBLEM_LAUNCH_BLOCKED: return "launch blocked";
	case FFM_PROBLEM_TEMP_BUFFER: return "temporary buffer";
	default: return "none";
	}
}

/* ---- merging nodes ---------------------------------------------------------------------- */

/* Every node's analysis merged into one (analysis/merge.c). */
static int merge(const struct ffmctl_job_stores *js, struct ffm_an_merged *m)
{
	const struct ffm_analysis_result **r = calloc(js->n + 1, sizeof(*r));
	int err;

	if (!r)
		return -ENOMEM;
	for (size_t ni = 0; ni < js->n; ni++)
		r[ni] = ffm_analysis__result(js->v[ni].an);
	err = ffm_an_merge(r, js->n, m);
	free(r);
	return err;
}

static const struct ffm_an_site *group_site(const struct ffmctl_job_stores *js,
					    const struct ffm_an_mgroup *mg)
{
	return &ffm_analysis__result(js->v[mg->node].an)->sites[mg->g.site];
}

static const struct ffm_an_site *pattern_site(const struct ffmctl_job_stores *js,
					      const struct ffm_an_mgroup *mg, uint32_t m)
{
	return &ffm_analysis__result(js->v[mg->node].an)->sites[mg->g.seq_sites[m]];
}

/*
 * What ffmd will do at the key's next run, asked of the stage plan (stages/ffm_plan.h) with what
 * each node's store knows of the key's runs: the earliest stage any node still needs, monitoring
 * only when every node monitors. Stage 0: no store could say.
 */
static struct ffm_plan next_plan(const struct ffmctl_job_stores *js)
{
	struct ffm_plan best = { 0 }, p;

	for (size_t ni = 0; ni < js->n; ni++) {
		if (ffm_plan__of_key(js->v[ni].store, &p) < 0)
			continue;
		if (!best.stage || best.reason == FFM_PLAN_MONITOR ||
		    (p.reason != FFM_PLAN_MONITOR && p.stage < best.stage))
			best = p;
	}
	return best;
}

/* The stages of @bits, "1", "3 and 4". */
static void stage_list(uint32_t bits, char *buf, size_t len)
{
	size_t off = 0;

	buf[0] = '\0';
	for (unsigned s = FFM_STAGE_BASELINE; s < FFM_STAGE__MAX && off < len; s++)
		if (bits & FFM_STAGE_BIT(s))
			off += (size_t)snprintf(buf + off, len - off, "%s%u",
						!off ? "" : (bits >> (s + 1)) ? ", " : " and ", s);
}

/* The "next:" line of @p: the stage's sentence, then why it repeats or what was given up. */
static const char *next_step(const struct ffm_plan *p, char *buf, size_t len)
{
	static const char *const what[FFM_STAGE__MAX] = {
		"the store could not say which stage the next run records",
		"the next run of this job key records stage 1 (which calls synchronize and how long "
		"they wait)",
		"the next run records stage 2 (every sync and transfer, timed, with call sites)",
		"the next run records stage 3 (which syncs protect data the CPU uses, which transfers "
		"repeat): then the problems and their expected benefit are shown",
		"the next run records stage 4 (time from each required sync to the first use of its "
		"data); until then first-use times come from stage 3, whose hashing slows the CPU side",
	};
	const char *s = p->stage < FFM_STAGE__MAX ? what[p->stage] : what[0];
	char skipped[32];
	size_t off;

	if (p->reason == FFM_PLAN_MONITOR)
		s = "all stages have run; further runs of this key only monitor (stage 1) and "
		    "re-trace when the behaviour changes";
	else if (p->reason == FFM_PLAN_DRIFT)
		s = "the behaviour changed since stages 2-4 ran: the next run re-traces them from "
		    "stage 2 (every sync and transfer, timed, with call sites)";
	off = (size_t)snprintf(buf, len, "%s", s);
	if (p->reason == FFM_PLAN_RETRY && off < len)
		off += (size_t)snprintf(buf + off, len - off,
					"; again, since its last run did not complete");
	stage_list(p->skipped, skipped, sizeof(skipped));
	if (p->skipped && off < len)
		snprintf(buf + off, len - off, "; given up: stage%s %s (its runs failed %d times)",
			 p->skipped & (p->skipped - 1) ? "s" : "", skipped, FFM_PLAN_MAX_FAILURES);
	return buf;
}

/* The first stage the next run records (0: none, only monitoring), as next_step() says it. */
static int next_stage(const struct ffm_plan *p)
{
	return p->reason == FFM_PLAN_MONITOR ? 0 : (int)p->stage;
}

/* @s as one shell word. */
static void shell_word(FILE *o, const char *s)
{
	static const char plain[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
				    "0123456789_./:=,+@%-";

	if (*s && strspn(s, plain) == strlen(s)) {
		fputs(s, o);
		return;
	}
	fputc('\'', o);
	for (; *s; s++) {
		if (*s == '\'')
			fputs("'\\''", o);
		else
			fputc(*s, o);
	}
	fputc('\'', o);
}

/* The command that continues a profile with the stages not run yet; 0: none (all have run). */
static int next_command(FILE *o, const struct ffm_plan *p, const struct ffmctl_next *nx)
{
	const char *dflt = getenv("FFM_STATE_DIR");
	int from = next_stage(p);

	if (!nx || !from)
		return 0;
	fputs("ffmctl ", o);
	if (strcmp(ffmctl_g.state_dir, dflt && *dflt ? dflt : "/var/lib/ffm")) {
		fputs("--state-dir ", o);
		shell_word(o, ffmctl_g.state_dir);
		fputc(' ', o);
	}
	fprintf(o, from == 4 ? "profile --stages 4 --key " : "profile --stages %d-4 --key ", from);
	shell_word(o, nx->key);
	fputs(" --", o);
	for (char *const *a = nx->cmd; *a; a++) {
		fputc(' ', o);
		shell_word(o, *a);
	}
	return 1;
}

/* next_command() as a JSON string, or null. */
static json_t *json_next_command(const struct ffm_plan *p, const struct ffmctl_next *nx)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	json_t *v = NULL;
	int n;

	if (!f)
		return NULL;
	n = next_command(f, p, nx);
	if (!fclose(f))
		v = n ? json_stringn(buf, len) : json_null();
	free(buf);
	return v;
}

/* ---- subsequence ------------------------------------------------------------------------ */

struct subseq {
	bool want;
	unsigned id, from, to; /* 1-based, as listed */
	uint64_t benefit_ns, whole_ns, occurrences;
	const struct ffm_an_mgroup *mg;
	int err;
};

static int parse_subseq(const char *s, struct subseq *q)
{
	char tail;

	if (sscanf(s, "%u:%u:%u%c", &q->id, &q->from, &q->to, &tail) != 3 || !q->id || !q->from ||
	    q->from > q->to)
		return -EINVAL;
	q->want = true;
	return 0;
}

/* Every node's share of the subsequence; the graphs are rebuilt one node at a time unless the
 * single node kept its own. */
static int compute_subseq(struct ffmctl_job_stores *js, const char *job_id,
			  struct ffm_an_merged *m, struct subseq *q)
{
	if (q->id > m->n_groups) {
		ffmctl_err("report", "--subsequence: no sequence %u (the report lists %zu)", q->id,
			   m->n_groups);
		return -ERANGE;
	}
	q->mg = &m->groups[q->id - 1];
	if (q->to > q->mg->g.n_members) {
		ffmctl_err("report", "--subsequence: sequence %u has %u entries, not %u", q->id,
			   q->mg->g.n_members, q->to);
		return -ERANGE;
	}
	q->whole_ns = q->mg->g.benefit_ns;
	for (size_t ni = 0; ni < js->n; ni++) {
		struct ffm_analysis_opts ao = { .sz = sizeof(ao), .job_id = job_id,
						.grouping = FFM_GROUP_SEQUENCE, .keep_graph = true };
		struct ffm_analysis *tmp = NULL, *an = js->v[ni].an;
		uint64_t b = 0, occ = 0;
		int err;

		if (js->n > 1) {
			err = ffm_analysis__run(js->v[ni].store, &ao, &tmp);
			if (err)
				return err;
			an = tmp;
		}
		err = ffm_analysis__subsequence(an, q->mg->g.key, q->from - 1, q->to - 1, &b, &occ);
		ffm_analysis__free(tmp);
		if (err == -ENOENT)
			continue;
		if (err)
			return err;
		q->benefit_ns += b;
		q->occurrences += occ;
	}
	return 0;
}

/* ---- call sites that read the same --------------------------------------------------------- */

/* Two call sites can read the same (driver function, function at file:line) and be two stacks:
 * two calls on one line, one line reached from two callers, or through two library paths.
 * Their frames, compared, say which. */
#define TWIN_DEPTH 64

struct twin_frame {
	char name[160], module[128];
	uint64_t offset;
	uint32_t inlined;
};

struct twin_stack {
	struct twin_frame f[TWIN_DEPTH];
	size_t n;
};

static int on_twin_frame(const struct ffm_store_frame *f, uint32_t depth, void *ctx)
{
	struct twin_stack *t = ctx;
	struct twin_frame *x;
	const char *fn = f->demangled ? f->demangled : f->func ? f->func : "?";
	const char *mod = f->module ? strrchr(f->module, '/') : NULL;

	(void)depth;
	if (t->n == TWIN_DEPTH)
		return 0;
	x = &t->f[t->n++];
	mod = mod ? mod + 1 : f->module ? f->module : "?";
	if (f->file && *f->file)
		snprintf(x->name, sizeof(x->name), "%s at %s:%u", fn, f->file, f->line);
	else
		snprintf(x->name, sizeof(x->name), "%s (%s+%#" PRIx64 ")", fn, mod, f->offset);
	snprintf(x->module, sizeof(x->module), "%s", f->module ? f->module : "");
	x->offset = f->offset;
	x->inlined = f->inlined;
	return 0;
}

static bool same_frame(const struct twin_frame *a, const struct twin_frame *b)
{
	return a->offset == b->offset && a->inlined == b->inlined && !strcmp(a->module, b->module);
}

static bool same_words(const struct ffm_an_site *a, const struct ffm_an_site *b)
{
	return a->python == b->python && a->line == b->line && !strcmp(a->api_name, b->api_name) &&
	       !strcmp(a->function, b->function) && !strcmp(a->file, b->file) &&
	       (a->file[0] || (a->offset == b->offset && !strcmp(a->module, b->module)));
}

/*
 * When another listed site of @r reads as site @i does: what tells @i apart from it, in @buf
 * (true); false when none does.
 */
static bool site_twin(struct ffm_store *s, const struct ffm_analysis_result *r, size_t i,
		      char *buf, size_t len)
{
	const struct ffm_an_site *x = &r->sites[i];
	struct twin_stack *a, *b;
	size_t j, k, app;

	for (j = 0; j < r->n_sites; j++)
		if (j != i && r->sites[j].in_timeline && r->sites[j].count &&
		    same_words(x, &r->sites[j]))
			break;
	if (j == r->n_sites)
		return false;
	snprintf(buf, len, "stack %" PRId64 ", not %" PRId64, x->stack, r->sites[j].stack);
	a = calloc(2, sizeof(*a));
	if (!a)
		return true;
	b = a + 1;
	if (ffm_store__for_each_frame(s, x->stack, on_twin_frame, a) < 0 ||
	    ffm_store__for_each_frame(s, r->sites[j].stack, on_twin_frame, b) < 0)
		goto out;
	for (app = 0; app < a->n && a->f[app].offset != x->offset; app++)
		;
	for (k = 0; k < a->n && k < b->n && same_frame(&a->f[k], &b->f[k]); k++)
		;
	if (k == a->n) /* this stack is the other's inner part: the other goes on outward */
		snprintf(buf, len, "its stack ends there; the other's goes on to %s",
			 k < b->n ? b->f[k].name : "?");
	else if (k == app)
		snprintf(buf, len, "another call on the same line: at %s+%#" PRIx64,
			 strrchr(a->f[k].module, '/') ? strrchr(a->f[k].module, '/') + 1
						      : a->f[k].module, a->f[k].offset);
	else
		snprintf(buf, len, "%s %s", k < app ? "through" : "called from", a->f[k].name);
out:
	free(a);
	return true;
}

/* ---- text --------------------------------------------------------------------------------- */

static void print_runs(FILE *o, const struct ffm_analysis_result *r)
{
	static const char *role[] = { "", "baseline", "timeline", "problems", "first use" };
	bool first = true;

	for (size_t i = 0; i < r->n_runs; i++) {
		const struct ffm_an_run *x = &r->runs[i];

		fprintf(o, "%s stage %d run %" PRId64 " (%.2f s%s%s%s%s)", first ? "" : ",", x->stage,
			x->id, x->wall_s, x->role ? ", used: " : "", x->role ? role[x->role] : "",
			!x->ended ? ", not ended" : "",
			x->flags & (FFM_RUN_PARTIAL | FFM_RUN_ABORTED) ? ", incomplete" : "");
		first = false;
	}
	if (first)
		fprintf(o, " none");
	fputc('\n', o);
}

/* One problem type of a group: what it is, then how to fix it. */
static void __attribute__((format(printf, 5, 6)))
evidence(FILE *o, unsigned p, const struct ffm_an_site *x, const char *name, const char *fmt, ...)
{
	char buf[512];
	va_list ap;

	fprintf(o, "       %s: ", name);
	va_start(ap, fmt);
	vfprintf(o, fmt, ap);
	va_end(ap);
	fprintf(o, "\n         fix: %s\n", ffmctl_fix_text(p, x, buf, sizeof(buf)));
}

static void print_evidence(FILE *o, const struct ffmctl_job_stores *js,
			   const struct ffm_an_mgroup *mg, const struct ffm_an_site *x)
{
	const struct ffm_analysis_result *r = ffm_analysis__result(js->v[mg->node].an);
	const uint64_t *n = mg->g.n_type;
	char buf[1024], use[1024] = "";

	fprintf(o, "       %.6f s waited in these calls; fixing them saves %.6f s", s_of(mg->g.wait_ns),
		s_of(mg->g.benefit_ns));
	if (mg->g.wait_ns > mg->g.benefit_ns && n[FFM_PROBLEM_UNNECESSARY_SYNC])
		fprintf(o, " (later waits absorb the rest: the GPU work is still there)");
	else if (mg->g.benefit_ns > mg->g.wait_ns)
		fprintf(o, " (with the CPU time of the calls the fix deletes)");
	fputc('\n', o);
	if (n[FFM_PROBLEM_UNNECESSARY_SYNC])
		evidence(o, FFM_PROBLEM_UNNECESSARY_SYNC, x, "unnecessary",
			 "%s (%" PRIu64 " call%s)", ffmctl_unnecessary_text(x),
			 n[FFM_PROBLEM_UNNECESSARY_SYNC],
			 ffmctl_s(n[FFM_PROBLEM_UNNECESSARY_SYNC]));
	if (n[FFM_PROBLEM_MISPLACED_SYNC] && x->use_delay_ns >= 0) {
		if (x->use_function)
			snprintf(use, sizeof(use), ", at %s%s%s:%u", x->use_function,
				 x->use_file[0] ? " at " : "", x->use_file, x->use_line);
		evidence(o, FFM_PROBLEM_MISPLACED_SYNC, x, "misplaced",
			 "the first use of the protected data comes %.3f ms after the sync "
			 "(median)%s%s", x->use_delay_ns / 1e6, use, x->delays_from_stage3 ?
			 " (time from stage 3, stage 4 will refine it)" : "");
	}
	if (n[FFM_PROBLEM_DUPLICATE_TRANSFER]) {
		buf[0] = 0;
		if (x->first_xfer_site >= 0) {
			ffmctl_site_str(&r->sites[x->first_xfer_site], use, sizeof(use));
			snprintf(buf, sizeof(buf), "; first sent by %s", use);
		}
		evidence(o, FFM_PROBLEM_DUPLICATE_TRANSFER, x, "duplicate",
			 "%s (%" PRIu64 " of %" PRIu64 " transfer%s)%s", ffmctl_dup_text(x),
			 n[FFM_PROBLEM_DUPLICATE_TRANSFER], x->count, ffmctl_s(x->count), buf);
	}
	if (n[FFM_PROBLEM_HOST_READ])
		evidence(o, FFM_PROBLEM_HOST_READ, x, "host read",
			 "the CPU reads %" PRIu64 " byte%s of GPU results at once after every "
			 "one of these syncs", x->read_bytes, ffmctl_s(x->read_bytes));
	if (n[FFM_PROBLEM_LAUNCH_BLOCKED])
		evidence(o, FFM_PROBLEM_LAUNCH_BLOCKED, x, "launch blocked",
			 "%" PRIu64 " launch%s waited for the GPU (its queue was full)",
			 n[FFM_PROBLEM_LAUNCH_BLOCKED],
			 n[FFM_PROBLEM_LAUNCH_BLOCKED] == 1 ? "" : "es");
	if (n[FFM_PROBLEM_TEMP_BUFFER])
		evidence(o, FFM_PROBLEM_TEMP_BUFFER, x, "temporary buffer",
			 "temporary buffer allocated and freed every step: reuse one (%" PRIu64
			 " allocation%s of %" PRIu64 " bytes)", n[FFM_PROBLEM_TEMP_BUFFER],
			 ffmctl_s(n[FFM_PROBLEM_TEMP_BUFFER]),
			 x->count ? x->bytes / x->count : 0);
	if (mg->g.partial && mg->g.coverage_known)
		fprintf(o, "       coverage partial: %.1f%% of the protected data was watched at least "
			"once over these syncs; a use of the rest only would go unseen\n",
			100 * mg->g.coverage);
	else if (mg->g.partial)
		fprintf(o, "       coverage partial: only part of the protected data could be watched\n");
	if (mg->g.divergent)
		fprintf(o, "       runs differ here: the site's majority verdict is used\n");
}

/* A site's problems, all types (a line's group lists its sites). */
static uint64_t site_problems(const struct ffm_an_site *s)
{
	return s->n_unnecessary + s->n_misplaced + s->n_dup + s->n_host_read + s->n_launch_blocked +
	       s->n_temp_buffer;
}

/* The driver calls of a line that makes several, fixed together (point groups). */
static void print_line_sites(FILE *o, const struct ffmctl_job_stores *js,
			     const struct ffm_an_mgroup *mg)
{
	fprintf(o, "       this line's calls, fixed together:");
	for (uint32_t k = 0; k < mg->g.n_members; k++) {
		const struct ffm_an_site *s = pattern_site(js, mg, k);

		fprintf(o, "%s %s (%" PRIu64 "x %s)", k ? ";" : "", s->api_name, site_problems(s),
			type_text(ffm_an_site_problem(s)));
	}
	fputc('\n', o);
}

/* Where the value of conditional read @x was first used ("file:line" or the function), ""
 * when the store does not say. */
static const char *use_line_str(const struct ffm_an_site *x, char *buf, size_t len)
{
	if (!x->use_function)
		snprintf(buf, len, "%s", "");
	else if (x->use_file[0] && x->use_line)
		snprintf(buf, len, "%s:%u", x->use_file, x->use_line);
	else
		snprintf(buf, len, "%s", x->use_function);
	return buf;
}

/* The conditional price's sentence (stages/ffm_price.h) of group @mg. */
static const char *conditional_str(const struct ffmctl_job_stores *js,
				   const struct ffm_an_mgroup *mg, char *buf, size_t len)
{
	const struct ffm_an_site *x = group_site(js, mg);
	struct ffm_price p = { .conditional_ns = (double)mg->g.benefit_ns,
			       .every_n = ffm_analysis__result(js->v[mg->node].an)->read_every };
	char use[1024];

	if (ffm_price__conditional_text(buf, len, use_line_str(x, use, sizeof(use)), &p))
		snprintf(buf, len, "if the value can wait, reading it less often saves %.3f s",
			 s_of(mg->g.benefit_ns));
	return buf;
}

/* The conditional host reads (the required-read rule, docs/ACCURACY.md): after the problems
 * that count, in none of the totals above. */
static void print_conditional(FILE *o, const struct ffmctl_job_stores *js,
			      const struct ffm_an_merged *m, int top, bool point)
{
	char site[1024], text[2048];
	int shown = 0;

	for (size_t i = 0; i < m->n_groups; i++) {
		const struct ffm_an_mgroup *mg = &m->groups[i];
		const struct ffm_an_site *x = group_site(js, mg);

		if (!mg->g.conditional)
			continue;
		if (!shown)
			fprintf(o, "\nconditional: reads whose value the next GPU step may need "
				   "(in no total above):\n");
		if (shown++ == top) {
			fprintf(o, "  ... more (--top N)\n");
			break;
		}
		ffmctl_site_str(x, site, sizeof(site));
		conditional_str(js, mg, text, sizeof(text));
		fprintf(o, "  %2d  %s\n       host read, %" PRIu64 "x %s in %s\n", shown, text,
			mg->g.count, x->api_name, site);
		if (point && mg->g.n_members > 1)
			print_line_sites(o, js, mg);
	}
}

/* Members @from..@to - 1 of a sequence, numbered from 1. */
static void print_members(FILE *o, const struct ffmctl_job_stores *js,
			  const struct ffm_an_mgroup *mg, uint32_t from, uint32_t to)
{
	char buf[1024];

	for (uint32_t k = from; k < to; k++) {
		const struct ffm_an_site *s = pattern_site(js, mg, k);

		ffmctl_site_str(s, buf, sizeof(buf));
		fprintf(o, "       %u. %s %s in %s\n", k + 1, type_text(ffm_an_site_problem(s)),
			s->api_name, buf);
	}
}

/* The width of the driver-function columns: the longest name shown, at least @min. */
static int api_width(const struct ffm_an_merged *m, const struct ffm_analysis_result *r0, int min)
{
	size_t w = (size_t)min;

	for (size_t i = 0; i < m->n_apis; i++)
		if (strlen(m->apis[i].name) > w)
			w = strlen(m->apis[i].name);
	for (size_t i = 0; i < r0->n_sites; i++)
		if (strlen(r0->sites[i].api_name) > w)
			w = strlen(r0->sites[i].api_name);
	return (int)(w < 64 ? w : 64);
}

/* Under the noise threshold: the groups from @from on (they are sorted by benefit) in one line. */
static void print_noise(FILE *o, const struct ffm_an_merged *m, size_t from, double noise_pct)
{
	uint64_t sum = 0;
	size_t to = from;

	for (; to < m->n_groups && !m->groups[to].g.conditional; to++) /* those: listed apart */
		sum += m->groups[to].g.benefit_ns;
	fprintf(o, "  ... %zu more problem%s worth less than %g%% of the wall time each, %.6f s "
		"together (--noise 0 lists them)\n",
		to - from, ffmctl_s(to - from), noise_pct, s_of(sum));
}

/* The headline is Figure 5 over every problem at once; one line says how that compares with the
 * problems' own benefits added up (threads waiting side by side, waits that land on one later
 * sync, make the whole less than the sum). */
static void print_joint(FILE *o, const struct ffm_an_merged *m)
{
	uint64_t sum = 0;
	size_t n = 0;

	for (size_t i = 0; i < m->n_groups; i++) /* conditional reads: in no total */
		if (!m->groups[i].g.conditional) {
			sum += m->groups[i].g.benefit_ns;
			n++;
		}
	if (n < 2 || sum == m->rec_ns)
		return;
	fprintf(o, "  together: fixing all %zu saves %.6f s, %.6f s %s than their own benefits added "
		"up (%.6f s)%s\n",
		n, s_of(m->rec_ns), s_of(sum > m->rec_ns ? sum - m->rec_ns : m->rec_ns - sum),
		sum > m->rec_ns ? "less" : "more", s_of(sum),
		sum > m->rec_ns ? ": threads that wait side by side save the wall time once, and "
				  "removed waits that land on one later sync count once"
				: ": removing one sync lets a later fix recover more (see --group sequence)");
}

/*
 * The combined-fix lead (docs/REPORT.md): the problems that count, fixed together, save more
 * than their own benefits added up (one fix lets another recover what a later wait would
 * absorb) by the noise threshold or more, and by more than the largest of them saves alone:
 * then no line of the list is the story, their combination is, and the report leads with it.
 * The sum of their own benefits in *parts, how many in *n.
 */
static bool combined_lead(const struct ffm_an_merged *m, double noise_pct, uint64_t *parts,
			  size_t *n)
{
	uint64_t noise_ns = (uint64_t)(noise_pct / 100.0 * (double)m->wall_sum_ns), top = 0;

	*parts = 0;
	*n = 0;
	for (size_t i = 0; i < m->n_groups; i++)
		if (!m->groups[i].g.conditional) {
			*parts += m->groups[i].g.benefit_ns;
			top = m->groups[i].g.benefit_ns > top ? m->groups[i].g.benefit_ns : top;
			++*n;
		}
	return m->have_problems && *n >= 2 && m->rec_ns > *parts &&
	       m->rec_ns - *parts >= noise_ns && m->rec_ns - *parts > top;
}

#define LEAD_LINES 3 /* lines the lead names; the rest are counted */

/* "lines A and B, fixed together: X s" (the banner's first lines hold it). */
static void print_lead(FILE *o, const struct ffmctl_job_stores *js, const struct ffm_an_merged *m,
		       double noise_pct)
{
	uint64_t parts;
	size_t n;
	char buf[1024];

	if (!combined_lead(m, noise_pct, &parts, &n))
		return;
	fprintf(o, "lead: lines ");
	for (size_t i = 0; i < n && i < LEAD_LINES; i++) {
		bool last = i + 1 == n || i + 1 == LEAD_LINES;

		ffmctl_site_str(group_site(js, &m->groups[i]), buf, sizeof(buf));
		fprintf(o, "%s%s", i ? (last ? " and " : ", ") : "", buf);
	}
	if (n > LEAD_LINES)
		fprintf(o, " (and %zu more)", n - LEAD_LINES);
	fprintf(o, ", fixed together: %.6f s (%.1f%%); their own benefits add up to %.6f s: fixing "
		   "one alone leaves a later wait to absorb what it frees\n",
		s_of(m->rec_ns), pct(m->rec_ns, m->wall_sum_ns), s_of(parts));
}

/* The call sites as stages 1/2 measured them (the single node's), @top at most. */
static void print_sites(FILE *o, const struct ffmctl_job_stores *js, const struct ffm_an_merged *m,
			int aw, int top)
{
	const struct ffm_analysis_result *r0 = ffm_analysis__result(js->v[0].an);
	char buf[1024];

	fprintf(o, "\ncall sites by time waited%s%s:\n", m->have_problems ? "" : " (known so far)",
		r0->sampled ? "; sampled (adaptive stage 1): counts and times estimated from "
			      "windows, +- one standard error" : "");
	for (size_t i = 0, shown = 0; i < r0->n_sites && (int)shown < top; i++) {
		const struct ffm_an_site *x = &r0->sites[i];

		if (!x->in_timeline || !x->count)
			continue;
		shown++;
		ffmctl_site_str(x, buf, sizeof(buf));
		fprintf(o, "  %-*s %8" PRIu64 "x  time %10.6f s  waited %10.6f s  %s", aw,
			x->api_name, x->count, s_of(x->dur_ns), s_of(x->wait_ns), buf);
		print_kernel(o, x);
		if (x->sampled)
			fprintf(o, "  [sampled: +-%.0f calls, +-%.6f s]", x->count_se, s_of((uint64_t)x->wait_se_ns));
		if (x->benefit_ns)
			fprintf(o, "  [%s %.6f s]", x->read_conditional ? "conditional" : "benefit",
				s_of(x->benefit_ns));
		if (site_twin(js->v[0].store, r0, i, buf, sizeof(buf)))
			fprintf(o, "  [%s]", buf);
		fputc('\n', o);
	}
}

/* Time and benefit per driver function: what a profiler shows beside what fixing saves. */
static void print_apis(FILE *o, const struct ffm_an_merged *m, int fw)
{
	fprintf(o, "\ntime spent vs expected benefit per driver function (what a profiler shows, "
		"what fixing saves):\n");
	fprintf(o, "  %-*s %9s %11s %11s %7s %12s %7s\n", fw, "driver function", "calls",
		"time (s)", "waited (s)", "% wall", "benefit (s)", "% wall");
	for (size_t i = 0; i < m->n_apis; i++) {
		const struct ffm_an_api *a = &m->apis[i];

		fprintf(o, "  %-*s %9" PRIu64 " %11.6f %11.6f %6.1f%% ", fw, a->name, a->calls,
			s_of(a->dur_ns), s_of(a->wait_ns), pct(a->wait_ns, m->wall_sum_ns));
		if (m->have_problems)
			fprintf(o, "%12.6f %6.1f%%\n", s_of(a->benefit_ns),
				pct(a->benefit_ns, m->wall_sum_ns));
		else
			fprintf(o, "%12s %7s\n", "?", "");
	}
}

/* Per node and process (several of either): recoverable time and the load imbalance. */
static void print_nodes(FILE *o, const struct ffmctl_job_stores *js, const struct ffm_an_merged *m)
{
	if (js->n == 1 && m->n_procs <= 1)
		return;
	fprintf(o, "\nper node and process (recoverable time; load imbalance = max/mean - 1):\n");
	for (size_t ni = 0; ni < js->n; ni++) {
		const struct ffm_analysis_result *r = ffm_analysis__result(js->v[ni].an);

		fprintf(o, "  node %-20s wall %.3f s  recoverable %.6f s (%.1f%%)\n", js->v[ni].name,
			s_of(r->wall_ns), s_of(r->totals.total_ns),
			pct(r->totals.total_ns, r->wall_ns));
		for (size_t i = 0; i < r->n_procs; i++) {
			const struct ffm_an_proc *p = &r->procs[i];

			if (!p->threads)
				continue;
			fprintf(o, "    pid %-8u %-30s wall %.3f s  recoverable %.6f s\n", p->tgid,
				p->exe, s_of(p->end_ns - p->start_ns), s_of(p->benefit_ns));
		}
	}
	if (m->imbalance >= 0)
		fprintf(o, "  load imbalance over nodes: %.1f%%\n", 100 * m->imbalance);
	if (m->proc_imbalance >= 0)
		fprintf(o, "  load imbalance over processes: %.1f%%\n", 100 * m->proc_imbalance);
}

/* The "next:" line and the command that runs it. */
static void print_next(FILE *o, const struct ffmctl_job_stores *js, const struct ffmctl_next *nx)
{
	struct ffm_plan plan = next_plan(js);
	char next[512];

	fprintf(o, "\nnext: %s\n", next_step(&plan, next, sizeof(next)));
	if (nx && next_stage(&plan)) {
		fputs("  to run it: ", o);
		next_command(o, &plan, nx);
		fputc('\n', o);
	}
}

static void print_text(FILE *o, const char *job_id, const struct ffmctl_job_stores *js,
		       const struct ffm_an_merged *m, enum ffm_grouping grouping, int top,
		       const struct subseq *q, double noise_pct, const struct ffmctl_next *nx)
{
	uint64_t noise_ns = (uint64_t)(noise_pct / 100.0 * (double)m->wall_sum_ns);
	const struct ffm_analysis_result *r0 = ffm_analysis__result(js->v[0].an);
	const int aw = api_width(m, r0, 22), fw = aw > 26 ? aw : 26;
	char buf[1024];

	fprintf(o, "ffm report: job %s, key %s", job_id, r0->key);
	if (js->n > 1)
		fprintf(o, ", %zu nodes", js->n);
	fputc('\n', o);
	for (size_t ni = 0; ni < js->n; ni++) {
		fprintf(o, "runs%s%s:", js->n > 1 ? " on " : "", js->n > 1 ? js->v[ni].name : "");
		print_runs(o, ffm_analysis__result(js->v[ni].an));
	}
	fprintf(o, "wall time: %.3f s%s\n", s_of(m->wall_max_ns), js->n > 1 ? " (longest node)" : "");
	{
		json_t *price = ffmctl_job_overhead(js, job_id);

		ffmctl_print_overhead(o, price, "");
		ffmctl_print_blind_spot(o, price);
		json_decref(price);
	}
	if (m->have_problems)
		fprintf(o, "recoverable: %.3f s (%.1f%% of the wall time%s) by fixing every problem below\n",
			s_of(m->rec_ns), pct(m->rec_ns, m->wall_sum_ns),
			js->n > 1 ? ", node-seconds over all nodes" : "");
	else
		fprintf(o, "recoverable: not known yet (no stage-3 run: no problem is classified)\n");
	print_lead(o, js, m, noise_pct);
	ffmctl_print_quality(o, js, m, noise_pct);

	if (m->have_problems) {
		fprintf(o, "\nproblems by expected benefit (grouped by %s):\n",
			grouping == FFM_GROUP_FOLD ? "function" :
			grouping == FFM_GROUP_SEQUENCE ? "sequence" : "call site");
		if (!m->n_groups || m->groups[0].g.conditional)
			fprintf(o, "  none: every sync protects data the CPU uses soon after it, no transfer repeats\n");
		for (size_t i = 0; i < m->n_groups && (int)i < top; i++) {
			const struct ffm_an_mgroup *mg = &m->groups[i];
			const struct ffm_an_site *x = group_site(js, mg);

			if (mg->g.conditional) /* listed apart, after these */
				break;
			if (mg->g.benefit_ns < noise_ns) {
				print_noise(o, m, i, noise_pct);
				break;
			}
			if (grouping == FFM_GROUP_SEQUENCE) {
				fprintf(o, "  %2zu  %.6f s  %5.1f%%  sequence of %u problem%s, %" PRIu64 "x%s\n",
					i + 1, s_of(mg->g.benefit_ns), pct(mg->g.benefit_ns, m->wall_sum_ns),
					mg->g.n_members, ffmctl_s(mg->g.n_members), mg->g.occurrences,
					mg->g.partial ? " (coverage partial)" : "");
				if (mg->g.period)
					fprintf(o, "       a loop: entr%s%s%u repeat%s %u times in a row%s\n",
						mg->g.period == 1 ? "y " : "ies 1-", "", mg->g.period,
						mg->g.period == 1 ? "s" : "", mg->g.repeats,
						mg->g.n_members > mg->g.period ? ", then the rest once" : "");
				print_members(o, js, mg, 0, mg->g.n_members < 50 ? mg->g.n_members : 50);
				if (mg->g.n_members > 50)
					fprintf(o, "       ... %u more\n", mg->g.n_members - 50);
				continue;
			}
			if (grouping == FFM_GROUP_FOLD)
				snprintf(buf, sizeof(buf), "%s", x->folded);
			else
				ffmctl_site_str(x, buf, sizeof(buf));
			fprintf(o, "  %2zu  %.6f s  %5.1f%%  %-25s %7" PRIu64 "x  %-*s %s", i + 1,
				s_of(mg->g.benefit_ns), pct(mg->g.benefit_ns, m->wall_sum_ns),
				type_text(ffm_an_main_problem(mg->g.n_type)), mg->g.count, aw, x->api_name, buf);
			print_kernel(o, x);
			fputc('\n', o);
			print_evidence(o, js, mg, x);
			if (grouping == FFM_GROUP_POINT && mg->g.n_members > 1)
				print_line_sites(o, js, mg);
		}
		if ((int)m->n_groups > top && m->groups[top].g.benefit_ns >= noise_ns &&
		    !m->groups[top].g.conditional)
			fprintf(o, "  ... %zu more (--top N)\n", m->n_groups - (size_t)top);
		print_joint(o, m);
		print_conditional(o, js, m, top, grouping == FFM_GROUP_POINT);
		if (q && q->want && q->mg) {
			fprintf(o, "\nsubsequence %u:%u-%u: fixing entries %u to %u of sequence %u "
				"saves %.6f s (%.1f%%) over %" PRIu64 " occurrence%s; the whole "
				"sequence: %.6f s\n",
				q->id, q->from, q->to, q->from, q->to, q->id, s_of(q->benefit_ns),
				pct(q->benefit_ns, m->wall_sum_ns), q->occurrences, ffmctl_s(q->occurrences),
				s_of(q->whole_ns));
			print_members(o, js, q->mg, q->from - 1, q->to);
		}
	}

	print_apis(o, m, fw);

	if (!m->have_problems || js->n == 1)
		print_sites(o, js, m, aw, top);
	print_nodes(o, js, m);
	print_next(o, js, nx);
}

/* ---- JSON --------------------------------------------------------------------------------- */

/* Seconds as the schema has them: rounded to the nanosecond. */
static json_t *json_s(double s)
{
	return ffm_json_fixed(s, 9);
}

/* An imbalance: null when there is none to speak of (one node, one process). */
static json_t *json_ratio(double r)
{
	return r >= 0 ? ffm_json_fixed(r, 6) : json_null();
}

static json_t *json_types(const uint64_t *n_type)
{
	json_t *o = json_object();

	for (unsigned t = 1; t < FFM_PROBLEM__MAX; t++)
		if (n_type[t])
			o = ffm_json_set(o, ffm_an_problem_name(t), ffm_json_u64(n_type[t]));
	return o;
}

/* Per problem type of a group, its fix (as the text's "fix:" lines): at the first member of a
 * line or sequence with that type, else at the group's site. */
static json_t *json_fixes(const struct ffmctl_job_stores *js, const struct ffm_an_mgroup *mg,
			  const struct ffm_an_site *x, bool members)
{
	json_t *o = json_object();
	char buf[512];

	for (unsigned t = 1; t < FFM_PROBLEM__MAX; t++) {
		const struct ffm_an_site *s = x;

		if (!mg->g.n_type[t])
			continue;
		for (uint32_t k = 0; members && k < mg->g.n_members; k++)
			if (ffm_an_site_problem(pattern_site(js, mg, k)) == t) {
				s = pattern_site(js, mg, k);
				break;
			}
		o = ffm_json_set(o, ffm_an_problem_name(t),
				 json_string(ffmctl_fix_text(t, s, buf, sizeof(buf))));
	}
	return o;
}

static json_t *json_evidence(const struct ffmctl_job_stores *js, const struct ffm_an_mgroup *mg,
			     const struct ffm_an_site *x)
{
	const struct ffm_analysis_result *r = ffm_analysis__result(js->v[mg->node].an);
	json_t *use = json_null(), *xfer = json_null(), *delay = json_null();

	if (mg->g.n_type[FFM_PROBLEM_MISPLACED_SYNC] && x->use_delay_ns >= 0)
		delay = json_s(x->use_delay_ns / 1e9);
	if (x->use_function)
		use = json_pack("{s:o,s:o,s:I}", "function", ffm_json_string(x->use_function),
				"file", ffm_json_string(x->use_file),
				"line", (json_int_t)x->use_line);
	if (mg->g.n_type[FFM_PROBLEM_DUPLICATE_TRANSFER] && x->first_xfer_site >= 0)
		xfer = ffmctl_json_site(&r->sites[x->first_xfer_site]);
	return json_pack("{s:o,s:o,s:i,s:o,s:o,s:b,s:b,s:o}", "wait_s", json_s(s_of(mg->g.wait_ns)),
			 "first_use_s", delay, "first_use_from_stage",
			 x->use_delay_ns < 0 ? 0 : x->delays_from_stage3 ? 3 : 4,
			 "first_use_site", use, "first_transfer_site", xfer,
			 "partial", mg->g.partial, "divergent", mg->g.divergent,
			 "coverage", mg->g.coverage_known ? ffm_json_fixed(mg->g.coverage, 4) : json_null());
}

static json_t *json_stages(const struct ffmctl_job_stores *js)
{
	static const char *role[] = { NULL, "baseline", "timeline", "problems", "first_use" };
	json_t *a = json_array();

	for (size_t ni = 0; ni < js->n; ni++) {
		const struct ffm_analysis_result *r = ffm_analysis__result(js->v[ni].an);

		for (size_t i = 0; i < r->n_runs; i++) {
			const struct ffm_an_run *x = &r->runs[i];

			a = ffm_json_append(a, json_pack(
				"{s:o,s:i,s:I,s:o,s:o,s:b,s:b,s:b,s:b,s:o}",
				"node", ffm_json_string(js->v[ni].name), "stage", x->stage,
				"run", (json_int_t)x->id, "job_id", ffm_json_string(x->job_id),
				"wall_s", json_s(x->wall_s), "ended", x->ended,
				"partial", !!(x->flags & FFM_RUN_PARTIAL),
				"aborted", !!(x->flags & FFM_RUN_ABORTED),
				"dropped", !!(x->flags & FFM_RUN_DROPPED),
				"used_as", x->role ? json_string(role[x->role]) : json_null()));
		}
	}
	return a;
}

/* A line's call sites (point groups of several). */
static json_t *json_line_sites(const struct ffmctl_job_stores *js, const struct ffm_an_mgroup *mg)
{
	json_t *a = json_array();

	for (uint32_t k = 0; k < mg->g.n_members; k++) {
		const struct ffm_an_site *s = pattern_site(js, mg, k);

		a = ffm_json_append(a, json_pack("{s:s,s:o,s:o,s:o,s:o}",
						 "type", ffm_an_problem_name(ffm_an_site_problem(s)),
						 "api", ffm_json_string(s->api_name),
						 "count", ffm_json_u64(site_problems(s)),
						 "benefit_s", json_s(s_of(s->benefit_ns)),
						 "call_site", ffmctl_json_site(s)));
	}
	return a;
}

/* A sequence's members, in order. */
static json_t *json_members(const struct ffmctl_job_stores *js, const struct ffm_an_mgroup *mg)
{
	json_t *a = json_array();

	for (uint32_t k = 0; k < mg->g.n_members; k++) {
		const struct ffm_an_site *s = pattern_site(js, mg, k);

		a = ffm_json_append(a, json_pack("{s:I,s:s,s:o,s:o}", "entry", (json_int_t)k + 1,
						 "type", ffm_an_problem_name(ffm_an_site_problem(s)),
						 "api", ffm_json_string(s->api_name),
						 "call_site", ffmctl_json_site(s)));
	}
	return a;
}

static json_t *json_problem(const struct ffmctl_job_stores *js, const struct ffm_an_merged *m,
			    size_t i, enum ffm_grouping grouping)
{
	const struct ffm_an_mgroup *mg = &m->groups[i];
	const struct ffm_an_site *x = group_site(js, mg);
	bool seq = grouping == FFM_GROUP_SEQUENCE;
	bool line = grouping == FFM_GROUP_POINT && mg->g.n_members > 1;
	const char *type = seq ? "sequence" : ffm_an_problem_name(ffm_an_main_problem(mg->g.n_type));

	/* o*: a sequence's id and members, a line's sites, left out for the other groupings */
	return json_pack("{s:I,s:s,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:I,s:o,s:o,s:o,"
			 "s:o*,s:o*,s:o*,s:o*,s:o*}",
			 "rank", (json_int_t)i + 1, "type", type,
			 "types", json_types(mg->g.n_type),
			 "fixes", json_fixes(js, mg, x, seq || line),
			 "api", ffm_json_string(x->api_name),
			 "benefit_s", json_s(s_of(mg->g.benefit_ns)),
			 "benefit_pct", ffm_json_fixed(pct(mg->g.benefit_ns, m->wall_sum_ns), 4),
			 "wait_s", json_s(s_of(mg->g.wait_ns)),
			 "count", ffm_json_u64(mg->g.count),
			 "occurrences", ffm_json_u64(mg->g.occurrences),
			 "nodes", (json_int_t)mg->nodes,
			 "call_site", ffmctl_json_site(x),
			 "function", ffm_json_string(grouping == FFM_GROUP_FOLD ? x->folded
									      : x->function),
			 "evidence", json_evidence(js, mg, x),
			 "sequence_id", seq ? json_integer((json_int_t)i + 1) : NULL,
			 "members", seq ? json_members(js, mg) : NULL,
			 "sites", line ? json_line_sites(js, mg) : NULL,
			 "period", seq ? json_integer(mg->g.period) : NULL,
			 "repeats", seq ? json_integer(mg->g.repeats) : NULL);
}

/* The combined-fix lead as JSON: the lines, the benefit together and their own added up. */
static json_t *json_lead(const struct ffmctl_job_stores *js, const struct ffm_an_merged *m,
			 double noise_pct)
{
	json_t *lines;
	uint64_t parts;
	size_t n;

	if (!combined_lead(m, noise_pct, &parts, &n))
		return json_null();
	lines = json_array();
	for (size_t i = 0; i < n; i++)
		lines = ffm_json_append(lines, ffmctl_json_site(group_site(js, &m->groups[i])));
	return json_pack("{s:o,s:o,s:o,s:o}", "lines", lines,
			 "benefit_s", json_s(s_of(m->rec_ns)), "parts_s", json_s(s_of(parts)),
			 "benefit_pct", ffm_json_fixed(pct(m->rec_ns, m->wall_sum_ns), 4));
}

/* The conditional host reads: what reading every N iterations would save, in no total. */
static json_t *json_conditional(const struct ffmctl_job_stores *js,
				const struct ffm_an_merged *m, int top, bool point)
{
	json_t *a = json_array();
	char text[2048];
	int n = 0;

	for (size_t i = 0; i < m->n_groups && n < top; i++) {
		const struct ffm_an_mgroup *mg = &m->groups[i];
		const struct ffm_an_site *x = group_site(js, mg);
		unsigned every = ffm_analysis__result(js->v[mg->node].an)->read_every;

		if (!mg->g.conditional)
			continue;
		n++;
		a = ffm_json_append(a, json_pack(
			"{s:I,s:s,s:o,s:o,s:o,s:o,s:I,s:o,s:o,s:s}", "rank", (json_int_t)n,
			"type", ffm_an_problem_name(FFM_PROBLEM_HOST_READ),
			"api", ffm_json_string(x->api_name), "call_site", ffmctl_json_site(x),
			"count", ffm_json_u64(mg->g.count),
			"benefit_s", json_s(s_of(mg->g.benefit_ns)), "every_n", (json_int_t)every,
			"uses_before_submit", ffm_json_u64(x->n_use_first),
			"use", !x->use_function ? json_null() :
			       json_pack("{s:o,s:o,s:I}",
					 "function", ffm_json_string(x->use_function),
					 "file", ffm_json_string(x->use_file),
					 "line", (json_int_t)x->use_line),
			"text", conditional_str(js, mg, text, sizeof(text))));
		if (point && mg->g.n_members > 1) /* a line's calls, fixed together */
			json_object_set_new(json_array_get(a, json_array_size(a) - 1), "sites",
					    json_line_sites(js, mg));
	}
	return a;
}

static json_t *json_apis(const struct ffm_an_merged *m)
{
	json_t *a = json_array();

	for (size_t i = 0; i < m->n_apis; i++) {
		const struct ffm_an_api *x = &m->apis[i];

		a = ffm_json_append(a, json_pack(
			"{s:o,s:o,s:o,s:o,s:o,s:o}", "api", ffm_json_string(x->name),
			"calls", ffm_json_u64(x->calls), "time_s", json_s(s_of(x->dur_ns)),
			"wait_s", json_s(s_of(x->wait_ns)),
			"benefit_s", m->have_problems ? json_s(s_of(x->benefit_ns)) : json_null(),
			"problems", ffm_json_u64(x->problems)));
	}
	return a;
}

/* The timeline's call sites, node by node, @top at most in all. */
static json_t *json_call_sites(const struct ffmctl_job_stores *js, int top)
{
	json_t *a = json_array();
	char buf[512];
	int shown = 0;

	for (size_t ni = 0; ni < js->n; ni++) {
		const struct ffm_analysis_result *r = ffm_analysis__result(js->v[ni].an);

		for (size_t i = 0; i < r->n_sites && shown < top; i++) {
			const struct ffm_an_site *x = &r->sites[i];

			if (!x->in_timeline || !x->count)
				continue;
			shown++;
			json_t *o = json_pack(
				"{s:o,s:o,s:o,s:o,s:o,s:o,s:o}",
				"node", ffm_json_string(js->v[ni].name),
				"api", ffm_json_string(x->api_name),
				"count", ffm_json_u64(x->count),
				"time_s", json_s(s_of(x->dur_ns)),
				"wait_s", json_s(s_of(x->wait_ns)),
				"benefit_s", json_s(s_of(x->benefit_ns)),
				"call_site", ffmctl_json_site(x));

			if (o && x->coverage_known)
				json_object_set_new(o, "coverage", ffm_json_fixed(x->coverage, 4));
			if (o && x->read_conditional) /* benefit_s: the conditional price */
				json_object_set_new(o, "conditional", json_true());
			/* another call site that reads the same: what tells this one apart */
			if (o && site_twin(js->v[ni].store, r, i, buf, sizeof(buf)))
				json_object_set_new(o, "differs_by", json_string(buf));
			/* adaptive stage 1: estimates, with one standard error */
			if (o && x->sampled)
				json_object_update_new(o, json_pack("{s:b,s:o,s:o}", "sampled", 1,
								    "count_pm", ffm_json_fixed(x->count_se, 1),
								    "wait_s_pm", json_s(s_of((uint64_t)x->wait_se_ns))));
			a = ffm_json_append(a, o);
		}
	}
	return a;
}

static json_t *json_nodes(const struct ffmctl_job_stores *js)
{
	json_t *a = json_array();

	for (size_t ni = 0; ni < js->n; ni++) {
		const struct ffm_analysis_result *r = ffm_analysis__result(js->v[ni].an);
		json_t *procs = json_array();

		for (size_t i = 0; i < r->n_procs; i++) {
			const struct ffm_an_proc *p = &r->procs[i];

			if (!p->threads)
				continue;
			procs = ffm_json_append(procs, json_pack(
				"{s:I,s:o,s:o,s:o,s:I}", "pid", (json_int_t)p->tgid,
				"exe", ffm_json_string(p->exe),
				"wall_s", json_s(s_of(p->end_ns - p->start_ns)),
				"recoverable_s", json_s(s_of(p->benefit_ns)),
				"threads", (json_int_t)p->threads));
		}
		a = ffm_json_append(a, json_pack("{s:o,s:o,s:o,s:o,s:I,s:o,s:o}",
						 "node", ffm_json_string(js->v[ni].name),
						 "wall_s", json_s(s_of(r->wall_ns)),
						 "recoverable_s", json_s(s_of(r->totals.total_ns)),
						 "threads_sum_s", json_s(s_of(r->totals.sum_ns)),
						 "max_chain_tid", (json_int_t)r->totals.max_chain_tid,
						 "max_chain_s", json_s(s_of(r->totals.max_chain_ns)),
						 "processes", procs));
	}
	return a;
}

/* docs/report-json.md: the schema. */
static int print_json(FILE *o, const char *job_id, const struct ffmctl_job_stores *js,
		      const struct ffm_an_merged *m, enum ffm_grouping grouping, int top,
		      const struct subseq *q, const struct ffmctl_next *nx, double noise_pct)
{
	const struct ffm_analysis_result *r0 = ffm_analysis__result(js->v[0].an);
	struct ffm_plan plan = next_plan(js);
	bool known = m->have_problems;
	json_t *problems = json_array(), *v;
	char next[512];

	for (size_t i = 0; i < m->n_groups && (int)i < top && !m->groups[i].g.conditional; i++)
		problems = ffm_json_append(problems, json_problem(js, m, i, grouping));
	v = FFM_JSON_OBJ(
		{ "schema_version", ffm_json_int(REPORT_SCHEMA_VERSION) },
		{ "job_id", ffm_json_string(job_id) },
		{ "key", ffm_json_string(r0->key) },
		{ "grouping", json_string(ffm_an_grouping_name(grouping)) },
		{ "wall_s", json_s(s_of(m->wall_max_ns)) },
		{ "recoverable_s", known ? json_s(s_of(m->rec_ns)) : json_null() },
		{ "recoverable_pct",
		  known ? ffm_json_fixed(pct(m->rec_ns, m->wall_sum_ns), 4) : json_null() },
		{ "problems_known", json_boolean(known) },
		{ "lead", json_lead(js, m, noise_pct) },
		{ "stages", json_stages(js) },
		{ "data_quality", ffmctl_json_quality(m) },
		{ "problems", problems },
		{ "conditional", json_conditional(js, m, top, grouping == FFM_GROUP_POINT) },
		{ "apis", json_apis(m) },
		{ "call_sites", json_call_sites(js, top) },
		{ "nodes", json_nodes(js) },
		{ "load_imbalance", json_ratio(m->imbalance) },
		{ "process_imbalance", json_ratio(m->proc_imbalance) });
	if (q && q->want && q->mg)
		v = ffm_json_set(v, "subsequence", json_pack(
			"{s:I,s:I,s:I,s:o,s:o,s:o}", "sequence_id", (json_int_t)q->id,
			"from", (json_int_t)q->from, "to", (json_int_t)q->to,
			"benefit_s", json_s(s_of(q->benefit_ns)),
			"sequence_benefit_s", json_s(s_of(q->whole_ns)),
			"occurrences", ffm_json_u64(q->occurrences)));
	v = ffm_json_set(v, "overhead", ffmctl_job_overhead(js, job_id) ?: json_null());
	v = ffm_json_set(v, "next", json_string(next_step(&plan, next, sizeof(next))));
	v = ffm_json_set(v, "next_command", json_next_command(&plan, nx));
	return ffm_json_print(o, v);
}

/* ---- the verb ----------------------------------------------------------------------------- */

static int report(FILE *o, const char *job_id, bool json, enum ffm_grouping grouping, int top,
		  double noise_pct, struct subseq *q, const struct ffmctl_next *nx)
{
	struct ffmctl_job_stores js;
	struct ffm_an_merged m = { 0 };
	struct ffmctl_progress pr;
	int err;

	ffmctl_progress__start(&pr, "report", job_id);
	err = ffmctl_job_stores__open(ffmctl_g.state_dir, job_id, &js);
	if (err) {
		ffmctl_progress__stop(&pr);
		ffmctl_no_job_err("report", ffmctl_g.state_dir, job_id, err);
		return err;
	}
	for (size_t ni = 0; ni < js.n; ni++) {
		struct ffm_analysis_opts ao = {
			.sz = sizeof(ao), .job_id = job_id, .grouping = grouping,
			/* one node: keep its graph for the subsequence instead of rebuilding it */
			.keep_graph = q && q->want && js.n == 1,
			.progress = pr.running ? &pr.an : NULL, /* none kept when none is shown */
		};

		ffmctl_progress__node(&pr, ni, js.n);
		err = ffm_analysis__run(js.v[ni].store, &ao, &js.v[ni].an);
		if (err) {
			ffmctl_progress__stop(&pr);
			ffmctl_err("report", "cannot analyse %s (node %s): %s",
				   ffm_store__path(js.v[ni].store), js.v[ni].name,
				   err == -ENOENT ? "the job has no runs there" : ffm_store__strerror(err));
			goto out;
		}
	}
	ffmctl_progress__stop(&pr);
	err = merge(&js, &m);
	if (err) {
		ffmctl_err("report", "out of memory");
		goto out;
	}
	if (q && q->want) {
		if (!m.have_problems) {
			ffmctl_err("report", "--subsequence: no problems are known yet (stage 3 has not run)");
			err = -ENOENT;
			goto out;
		}
		err = compute_subseq(&js, job_id, &m, q);
		if (err)
			goto out;
	}
	if (json) {
		err = print_json(o, job_id, &js, &m, grouping, top, q, nx, noise_pct);
		if (err < 0)
			ffmctl_err("report", "cannot write the JSON: %s", strerror(-err));
	} else {
		print_text(o, job_id, &js, &m, grouping, top, q, noise_pct, nx);
	}
	if (fflush(o) && !err)
		err = -errno;
out:
	ffmctl_progress__stop(&pr);
	ffm_an_merged_free(&m);
	ffmctl_job_stores__close(&js);
	return err;
}

int ffmctl_report_job(FILE *o, const char *job_id, bool json, const struct ffmctl_next *next)
{
	return report(o, job_id, json, FFM_GROUP_POINT, 20, FFM_REPORT_NOISE_PCT, NULL, next);
}

static const char REPORT_HELP[] =
	"Usage: ffmctl report <jobid> [--json] [--group point|function|sequence] [--subsequence "
	"ID:FROM:TO] [--top N] [--noise PCT]\n"
	"\n"
	"What to fix in job <jobid> (ffmctl jobs lists them), by the time fixing each problem\n"
	"saves, with the call site, evidence and fix of each; the time per driver function; the\n"
	"data quality; which run of the job's key tells more.\n"
	"\n"
	"Options:\n"
	"  -j, --json        the report as JSON for tools (docs/report-json.md); lists every\n"
	"                    problem, whatever --noise says\n"
	"  --group point|function|sequence\n"
	"                    one problem per line of code (point, the default), per function\n"
	"                    (function), or per sequence of problems between two required\n"
	"                    syncs, identical sequences (a loop's iterations) counted as one\n"
	"  --subsequence ID:FROM:TO\n"
	"                    the benefit of fixing only entries FROM to TO (1-based) of\n"
	"                    sequence ID as --group sequence numbers them, from the stored runs\n"
	"  --top N           show the first N problems and call sites (default 20)\n"
	"  --noise PCT       fold the problems, and the data-quality remarks, that change the\n"
	"                    wall time by less than PCT percent each into one line (default\n"
	"                    0.1; 0 shows everything)\n";

int ffmctl_report(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "group", required_argument, NULL, 'g' },
		{ "subsequence", required_argument, NULL, 's' },
		{ "top", required_argument, NULL, 't' },
		{ "noise", required_argument, NULL, 'n' },
		{ "help", no_argument, NULL, 'h' },
		{},
	};
	enum ffm_grouping grouping = FFM_GROUP_POINT;
	struct subseq q = { 0 };
	bool json = ffmctl_g.json, group_set = false;
	int c, top = 20;
	double noise = FFM_REPORT_NOISE_PCT;
	char *end;

	while ((c = getopt_long(argc, argv, ":jg:s:t:n:h", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			json = true;
			break;
		case 'g':
			group_set = true;
			if (!strcmp(optarg, "point") || !strcmp(optarg, "site"))
				grouping = FFM_GROUP_POINT;
			else if (!strcmp(optarg, "function") || !strcmp(optarg, "fold"))
				grouping = FFM_GROUP_FOLD;
			else if (!strcmp(optarg, "sequence"))
				grouping = FFM_GROUP_SEQUENCE;
			else {
				ffmctl_err("report", "--group wants point, function or sequence, not '%s'", optarg);
				return EXIT_USAGE;
			}
			break;
		case 's':
			if (parse_subseq(optarg, &q) < 0) {
				ffmctl_err("report", "--subsequence wants ID:FROM:TO (1-based, FROM <= TO), not '%s'",
					   optarg);
				return EXIT_USAGE;
			}
			break;
		case 't':
			if (ffmctl_parse_top("report", optarg, &top) < 0)
				return EXIT_USAGE;
			break;
		case 'n':
			noise = strtod(optarg, &end);
			if (end == optarg || *end || !(noise >= 0 && noise <= 100)) {
				ffmctl_err("report", "--noise wants a percentage of the wall time from 0 to 100, not '%s'",
					   optarg);
				return EXIT_USAGE;
			}
			break;
		case 'h':
			fputs(REPORT_HELP, stdout);
			return EXIT_OK;
		default:
			return ffmctl_opt_err("report", c, argv);
		}
	}
	if (q.want) {
		if (group_set && grouping != FFM_GROUP_SEQUENCE) {
			ffmctl_err("report", "--subsequence numbers sequences: use it with --group sequence");
			return EXIT_USAGE;
		}
		grouping = FFM_GROUP_SEQUENCE;
	}
	if (ffmctl_one_jobid("report", argc, argv))
		return EXIT_USAGE;
	return report(stdout, argv[optind], json, grouping, top, noise, &q, NULL) == 0 ? EXIT_OK
										      : EXIT_FAIL;
}
