/* SPDX-License-Identifier: MIT */
/*
 * The report's data quality (ffmctl report): the remarks in plain words, one a line, and the
 * same figures in the JSON's data_quality object (docs/report-json.md). Out of cli/report.c,
 * which holds the rest of the report.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>

#include "cli/ffmctl.h"
#include "cli/report.h"

static double s_of(uint64_t ns)
{
	return ns / 1e9;
}

static json_t *json_s(double s)
{
	return ffm_json_fixed(s, 9);
}

/*
 * The data quality: one remark a line, in plain words, with what the user can do. A remark is
 * shown where it changes a number above by the noise threshold or more, or where its effect
 * cannot be measured (lost records, failed or incomplete runs, the GPU's cap); the others are
 * counted in one line (--noise 0 shows them).
 */
struct remarks {
	FILE *o;
	int shown, hidden;
	bool all; /* --noise 0 */
};

static void __attribute__((format(printf, 3, 4)))
remark(struct remarks *r, bool show, const char *fmt, ...)
{
	va_list ap;

	if (!show && !r->all) {
		r->hidden++;
		return;
	}
	if (!r->shown++)
		fprintf(r->o, "data quality:\n");
	fprintf(r->o, "  - ");
	va_start(ap, fmt);
	vfprintf(r->o, fmt, ap);
	va_end(ap);
	fputc('\n', r->o);
}

/*
 * The benefit of the unnecessary syncs whose verdict rests on data watched only in part (no use
 * seen in the windows stage 3 watched), and the least coverage among them (-1: none).
 */
static uint64_t partial_benefit(const struct ffm_an_merged *m, double *least)
{
	uint64_t b = 0;

	*least = -1;
	for (size_t i = 0; i < m->n_groups; i++) {
		const struct ffm_an_group *g = &m->groups[i].g;

		if (!g->partial || !g->n_type[FFM_PROBLEM_UNNECESSARY_SYNC])
			continue;
		b += g->benefit_ns;
		if (g->coverage_known && (*least < 0 || g->coverage < *least))
			*least = g->coverage;
	}
	return b;
}

/* The benefit of the problems at call sites where the runs disagree. */
static uint64_t divergent_benefit(const struct ffm_an_merged *m)
{
	uint64_t b = 0;

	for (size_t i = 0; i < m->n_groups; i++)
		b += m->groups[i].g.divergent ? m->groups[i].g.benefit_ns : 0;
	return b;
}

/* The used runs that are incomplete, one remark per reason (its flags). */
static void incomplete_runs(struct remarks *rm, const struct ffmctl_job_stores *js)
{
	const uint32_t any = FFM_RUN_PARTIAL | FFM_RUN_ABORTED | FFM_RUN_DROPPED;

	for (uint32_t want = 1; want <= any; want++) {
		char list[512] = "";
		size_t len = 0, n = 0;

		if (want & ~any)
			continue;
		for (size_t ni = 0; ni < js->n; ni++) {
			const struct ffm_analysis_result *r = ffm_analysis__result(js->v[ni].an);

			for (size_t i = 0; i < r->n_runs; i++) {
				const struct ffm_an_run *x = &r->runs[i];

				if (!x->role || (x->flags & any) != want || len >= sizeof(list))
					continue;
				len += (size_t)snprintf(list + len, sizeof(list) - len,
					"%sstage %d run %" PRId64 "%s%s", n++ ? ", " : "", x->stage,
					x->id, js->n > 1 ? " on " : "",
					js->n > 1 ? js->v[ni].name : "");
			}
		}
		if (!n)
			continue;
		remark(rm, true, "%s %s incomplete:%s%s%s%s%s; a complete run of the stage is used "
		       "instead once there is one: run the job again", list, n == 1 ? "is" : "are",
		       want & FFM_RUN_PARTIAL ? " only part of the protected data could be watched"
					      : "",
		       want & FFM_RUN_PARTIAL && want & ~FFM_RUN_PARTIAL ? ";" : "",
		       want & FFM_RUN_ABORTED ? " the recording stopped before the program did (or "
						"began after it)" : "",
		       want & FFM_RUN_ABORTED && want & FFM_RUN_DROPPED ? ";" : "",
		       want & FFM_RUN_DROPPED ? " records were lost" : "");
	}
}

/* What the collection left out: records lost, stacks cut short, the job's bounds. */
static void lost_remarks(struct remarks *rm, const struct ffm_an_quality *q)
{
	const uint64_t *d = q->drops;
	uint64_t lost = d[FFM_DROP_RINGBUF_FULL] + d[FFM_DROP_MAP_FULL] + d[FFM_DROP_OTHER];
	uint64_t deep = d[FFM_DROP_STACK_TOO_DEEP];

	if (lost)
		remark(rm, true, "%" PRIu64 " record%s lost (%" PRIu64 " with the ring buffer "
		       "full, %" PRIu64 " with a map full, %" PRIu64 " other): the calls they "
		       "held are missing from the figures; give ffmd a larger ring buffer "
		       "(ringbuf_kib in ffmd.conf) and run the job again", lost, ffmctl_s(lost),
		       d[FFM_DROP_RINGBUF_FULL], d[FFM_DROP_MAP_FULL], d[FFM_DROP_OTHER]);
	if (deep)
		remark(rm, false, "%" PRIu64 " call stack%s deeper than ffm records %s cut short: "
		       "%s call site%s named by the frames kept", deep, ffmctl_s(deep),
		       deep == 1 ? "was" : "were", deep == 1 ? "its" : "their",
		       deep == 1 ? " is" : "s are");
	/* What the job's bounds left out (ffmd.conf(5), RESOURCE BOUNDS). */
	uint64_t stacks = d[FFM_DROP_STACK_CAP], recs = d[FFM_DROP_STORE_CAP];
	uint64_t procs = d[FFM_DROP_PROCS_QUOTA];

	if (stacks)
		remark(rm, true, "%" PRIu64 " new stack%s not stored (the job's bound: job_stacks, "
		       "job_stacks_per_s in ffmd.conf): the calls on them count without a call "
		       "site", stacks, ffmctl_s(stacks));
	if (recs)
		remark(rm, true, "%" PRIu64 " record%s not stored: the job's store reached its "
		       "bound (job_store_mib, or its user's user_store_mib in ffmd.conf); the "
		       "figures miss them", recs, ffmctl_s(recs));
	if (procs)
		remark(rm, true, "%" PRIu64 " process%s not tracked: the user's quota of tracked "
		       "processes was full (user_procs in ffmd.conf); their calls are missing",
		       procs, procs == 1 ? "" : "es");
}

void ffmctl_print_quality(FILE *o, const struct ffmctl_job_stores *js,
			  const struct ffm_an_merged *m, double noise_pct)
{
	const struct ffm_an_quality *q = &m->q;
	uint64_t noise_ns = (uint64_t)(noise_pct / 100.0 * (double)m->wall_sum_ns);
	uint64_t fixed = q->stream_busy_ns + q->stream_head_ns + q->stream_tail_ns;
	uint64_t rest = m->wall_sum_ns > fixed ? m->wall_sum_ns - fixed : 0;
	uint64_t unc = q->unclassified_syncs;
	struct remarks rm = { .o = o, .all = noise_pct <= 0 };
	double least;
	uint64_t pb = partial_benefit(m, &least), db = divergent_benefit(m);

	lost_remarks(&rm, q);
	if (q->failed_runs)
		remark(&rm, true, "the program failed in %u of the runs used (exit status %d): "
		       "what it does when it works may differ; fix the failure and run it again",
		       q->failed_runs, q->failed_status);
	incomplete_runs(&rm, js);
	if (q->stream_capped)
		remark(&rm, true, "%.6f s of the wall time is out of these fixes' reach: %.6f s "
		       "of CPU work before the GPU's first work, %.6f s of GPU work on its "
		       "busiest stream, %.6f s of CPU work after its last; the benefits are capped "
		       "at the rest (%.6f s); only faster set-up, tear-down or GPU work shortens "
		       "that part", s_of(fixed), s_of(q->stream_head_ns), s_of(q->stream_busy_ns),
		       s_of(q->stream_tail_ns), s_of(rest));
	if (pb && least >= 0)
		remark(&rm, pb >= noise_ns, "%.6f s of the recoverable time rests on syncs whose "
		       "protected data was watched only in part (as little as %.3g%% of it, no "
		       "use seen): if the CPU reads the rest of that data before the next sync, "
		       "they are required; check the problems marked 'coverage partial' below",
		       s_of(pb), 100 * least);
	if (q->withheld_syncs)
		remark(&rm, false, "%" PRIu64 " sync%s saw no use in the part of their data that "
		       "was watched: they count as required, not unnecessary (no benefit is "
		       "claimed for them)", q->withheld_syncs, ffmctl_s(q->withheld_syncs));
	if (q->site_misplaced_syncs)
		remark(&rm, false, "%" PRIu64 " sync%s with no use seen count as misplaced, as the "
		       "rest of their call site, at its median delay", q->site_misplaced_syncs,
		       ffmctl_s(q->site_misplaced_syncs));
	if (q->divergent_sites)
		remark(&rm, db >= noise_ns && db, "the runs disagree at %u call site%s (%.6f s of "
		       "the recoverable time): their call counts differ by more than %d%% between "
		       "stage 2 and stages 3/4, and each site's majority verdict is used; if the "
		       "program's work differs from run to run, give each input its own job key",
		       q->divergent_sites, ffmctl_s(q->divergent_sites), s_of(db),
		       FFM_JOIN_TOLERANCE_PCT);
	if (unc)
		remark(&rm, q->unclassified_wait_ns >= noise_ns, "%" PRIu64 " sync%s (%.6f s "
		       "waited) got no verdict: stage 3 did not see %s, so %s wait is not in the "
		       "recoverable time; a new stage-3 run of the key may classify %s", unc,
		       ffmctl_s(unc), s_of(q->unclassified_wait_ns), unc == 1 ? "it" : "them",
		       unc == 1 ? "its" : "their", unc == 1 ? "it" : "them");
	if (q->unmatched_sites)
		remark(&rm, false, "%u call site%s that stages 3/4 saw %s not in the timeline "
		       "(stage 2): their verdicts are not used", q->unmatched_sites,
		       ffmctl_s(q->unmatched_sites), q->unmatched_sites == 1 ? "is" : "are");
	if (!rm.shown && !rm.hidden)
		fprintf(o, "data quality: good (no drops, full coverage, runs agree)\n");
	else if (rm.hidden)
		fprintf(o, "%s%d %sremark%s change%s no figure by %g%% of the wall time or more "
			"(--noise 0 shows %s)\n", rm.shown ? "  - " : "data quality: good enough: ",
			rm.hidden, rm.shown ? "more " : "", ffmctl_s((uint64_t)rm.hidden),
			rm.hidden == 1 ? "s" : "", noise_pct, rm.hidden == 1 ? "it" : "them");
}

json_t *ffmctl_json_quality(const struct ffm_an_merged *m)
{
	const struct ffm_an_quality *q = &m->q;
	double least;
	uint64_t pb = partial_benefit(m, &least);

	return FFM_JSON_OBJ(
		{ "records_lost", ffm_json_u64(q->drops[0] + q->drops[2] + q->drops[3]) },
		{ "drops", FFM_JSON_OBJ({ "ringbuf", ffm_json_u64(q->drops[0]) },
					{ "stack_depth", ffm_json_u64(q->drops[1]) },
					{ "map_full", ffm_json_u64(q->drops[2]) },
					{ "other", ffm_json_u64(q->drops[3]) },
					{ "stack_cap", ffm_json_u64(q->drops[4]) },
					{ "store_cap", ffm_json_u64(q->drops[5]) },
					{ "procs_quota", ffm_json_u64(q->drops[6]) }) },
		{ "incomplete_runs", ffm_json_int(q->incomplete_runs) },
		{ "failed_runs", ffm_json_int(q->failed_runs) },
		{ "failed_exit_status", ffm_json_int(q->failed_status) },
		{ "partial_syncs", ffm_json_u64(q->partial_syncs) },
		{ "withheld_syncs", ffm_json_u64(q->withheld_syncs) },
		{ "site_misplaced_syncs", ffm_json_u64(q->site_misplaced_syncs) },
		{ "partial_coverage_benefit_s", json_s(s_of(pb)) },
		{ "partial_coverage_least", least < 0 ? json_null() : ffm_json_fixed(least, 4) },
		{ "divergent_sites", ffm_json_int(q->divergent_sites) },
		{ "unmatched_sites", ffm_json_int(q->unmatched_sites) },
		{ "unclassified_syncs", ffm_json_u64(q->unclassified_syncs) },
		{ "unclassified_wait_s", json_s(s_of(q->unclassified_wait_ns)) },
		{ "stream_busy_s", json_s(s_of(q->stream_busy_ns)) },
		{ "stream_head_s", json_s(s_of(q->stream_head_ns)) },
		{ "stream_tail_s", json_s(s_of(q->stream_tail_ns)) },
		{ "stream_capped", json_boolean(q->stream_capped) },
		{ "read_library_cpu_s", json_s(s_of(q->read_lib_cpu_ns)) },
		{ "hidden_wait_s", json_s(s_of(q->hidden_wait_ns)) },
		{ "hidden_wait_removed_s", json_s(s_of(q->hidden_removed_ns)) },
		{ "hidden_wait_baseline_runs", ffm_json_int(q->baseline_runs) },
		{ "gpu_idle_syncs", ffm_json_u64(q->gpu_idle_syncs) },
		{ "duplicate_time_trimmed_s", json_s(s_of(q->dup_trimmed_ns)) },
		{ "duplicate_time_added_s", json_s(s_of(q->dup_added_ns)) },
		{ "duplicate_price_runs", ffm_json_int(q->dup_price_runs) },
		{ "node_model", json_boolean(q->node_model) },
		{ "priced_calls", ffm_json_u64(q->priced_calls) },
		{ "priced_deleted_s", json_s(s_of(q->priced_deleted_ns)) },
		{ "unpriced_calls", ffm_json_u64(q->unpriced_calls) });
}
