/* SPDX-License-Identifier: MIT */
/*
 * What a job's processes paid for being measured (store/ffm_store.h, struct ffm_overhead; issue
 * 40's fixed price per process), as ffmctl status and ffmctl report show it, and the blind spot
 * of adaptive stage 1's sampling (the time its processes ran with the wait probe off). The
 * JSON is daemon/jobrun.h's ffm_overhead_json, so both verbs print the same fields.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/ffmctl.h"
#include "cli/report.h"
#include "common/ffm_json.h"
#include "daemon/jobrun.h"
#include "store/ffm_store.h"

static double part_ms(const json_t *parts, const char *name, double *count)
{
	const json_t *p = json_object_get(parts, name);

	*count = ffm_json_get_num(p, "count", 0);
	return ffm_json_get_num(p, "ms", 0);
}

void ffmctl_print_overhead(FILE *o, const json_t *pr, const char *indent)
{
	const json_t *parts = json_object_get(pr, "parts");
	double n_held, n_bpf, n_full, n_smp, n, held, bpf, waits;

	if (!pr)
		return;
	held = part_ms(parts, "held", &n_held);
	bpf = part_ms(parts, "bpf", &n_bpf);
	waits = part_ms(parts, "waits_full", &n_full) + part_ms(parts, "waits_sampled", &n_smp);
	fprintf(o, "%soverhead: %.3f%% of the run in its processes (%.1f ms): held %.1f ms (%.0f), BPF "
		"at exec/mmap/fork/exit %.2f ms (%.0f runs), waits traced in full %.0f and sampled "
		"%.0f (%.1f ms)\n", indent, ffm_json_get_num(pr, "cost_pct", 0),
		ffm_json_get_num(pr, "process_ms", 0), held, n_held, bpf, n_bpf, n_full, n_smp, waits);
	fprintf(o, "%s  ffmd's own %.1f ms:", indent, ffm_json_get_num(pr, "ffmd_ms", 0));
	for (int i = FFM_OVERHEAD_FFMD; i < FFM_OVERHEAD_N; i++) {
		double ms = part_ms(parts, ffm_overhead_part_name(i), &n);

		fprintf(o, " %s %.1f ms (%.0f)%s", ffm_overhead_part_name(i), ms, n,
			i + 1 < FFM_OVERHEAD_N ? "," : "\n");
	}
}

/* The sampled spans of one run: their time, the windows' time, the longest time a process's
 * wait probe stayed off (between two windows, or after its last window to its span's end).
 * Rows come by process, its spans before its windows. */
struct blind {
	uint64_t span_ns, on_ns, gap_ns;
	uint32_t tgid;
	uint64_t last_end, span_end; /* process tgid's last window's end, its last span's end */
};

static void gap(struct blind *b, uint64_t from, uint64_t to)
{
	if (from && to > from && to - from > b->gap_ns)
		b->gap_ns = to - from;
}

static int blind_row(const struct ffm_store_sample *x, void *ctx)
{
	struct blind *b = ctx;

	if (x->tgid != b->tgid) {
		gap(b, b->last_end, b->span_end);
		*b = (struct blind){ .span_ns = b->span_ns, .on_ns = b->on_ns, .gap_ns = b->gap_ns,
				     .tgid = x->tgid };
	}
	if (x->kind == FFM_SAMPLE_SPAN) {
		b->span_ns += x->end_ns - x->start_ns;
		b->on_ns += x->on_ns;
		if (x->end_ns > b->span_end)
			b->span_end = x->end_ns;
		return 0;
	}
	gap(b, b->last_end, x->start_ns);
	b->last_end = x->end_ns;
	return 0;
}

json_t *ffmctl_job_overhead(const struct ffmctl_job_stores *js, const char *job_id)
{
	struct ffm_overhead sum = { 0 };
	struct blind b = { 0 };
	double run_s = 0;
	bool any = false;

	for (size_t ni = 0; ni < js->n; ni++) {
		const struct ffm_analysis_result *r = ffm_analysis__result(js->v[ni].an);

		for (size_t i = 0; r && i < r->n_runs; i++) {
			struct ffm_overhead p;

			if (strcmp(r->runs[i].job_id, job_id) ||
			    ffm_store__get_overhead(js->v[ni].store, r->runs[i].id, &p) < 0)
				continue;
			for (int k = 0; k < FFM_OVERHEAD_N; k++) {
				sum.ns[k] += p.ns[k];
				sum.n[k] += p.n[k];
				any = any || p.n[k];
			}
			run_s += r->runs[i].wall_s;
			ffm_store__for_each_sample(js->v[ni].store, r->runs[i].id, blind_row, &b);
			blind_row(&(struct ffm_store_sample){ .tgid = 0 }, &b); /* the last process */
		}
	}
	if (!any)
		return NULL; /* no price stored: a run of ffmctl profile, or before schema v11 */
	json_t *o = ffm_overhead_json(&sum, run_s);

	if (o && b.span_ns)
		json_object_set_new(o, "blind_spot", json_pack(
			"{s:o,s:o,s:o,s:o}", "sampled_s", ffm_json_fixed(b.span_ns / 1e9, 3),
			"probe_off_s", ffm_json_fixed((b.span_ns - b.on_ns) / 1e9, 3),
			"probe_off_pct", ffm_json_fixed(100.0 * (b.span_ns - b.on_ns) / b.span_ns, 2),
			"longest_gap_s", ffm_json_fixed(b.gap_ns / 1e9, 3)));
	return o;
}

void ffmctl_print_blind_spot(FILE *o, const json_t *pr)
{
	const json_t *b = json_object_get(pr, "blind_spot");

	if (!b)
		return;
	fprintf(o, "blind spot of sampling: the wait probe was off for %.3f s of %.3f s sampled "
		"(%.1f%%); a call site that waits only in bursts shorter than %.3f s (the longest gap "
		"between two windows) may be missing\n", ffm_json_get_num(b, "probe_off_s", 0),
		ffm_json_get_num(b, "sampled_s", 0), ffm_json_get_num(b, "probe_off_pct", 0),
		ffm_json_get_num(b, "longest_gap_s", 0));
}
