/* SPDX-License-Identifier: MIT */
/*
 * Pass "build the graph" (analysis/analysis.c runs the passes): the model's dependency graph of
 * the timeline's events (stages/ffm_model.h), over the run's span. The graph borrows the event
 * array: it stays unchanged until the graph is freed.
 */
#include "analysis/analysis_int.h"

int an_build_graph(const struct an_timeline *tl, struct ffm_graph **g)
{
	struct ffm_graph_opts go = {
		.run_start_ns = tl->run_start_ns,
		.run_end_ns = tl->run_end_ns,
		.deleted_of = &tl->deleted,
	};

	return ffm_graph__build(tl->ev, tl->n_ev, &go, g);
}
