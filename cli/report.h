/* SPDX-License-Identifier: MIT */
/*
 * What `ffmctl report`, `diff` and `export` share: the stores of one job on every node, and the
 * way a call site is written.
 *
 * Node layout (store/ffm_store.h, the state directory): <state>/keys/ is the single-node layout;
 * a state directory shared by a cluster holds <state>/nodes/<node>/keys/. A job's stores are
 * the stores that know its job id in any of those directories, one per node.
 */
#ifndef FFMCTL_REPORT_H
#define FFMCTL_REPORT_H


#include "analysis/ffm_analysis.h"
#include "common/ffm_json.h"

struct ffmctl_node {
	char name[256];		/* node name: nodes/<name>, else the job row's node */
	struct ffm_store *store;
	struct ffm_analysis *an; /* NULL until analysed */
};

struct ffmctl_job_stores {
	struct ffmctl_node *v;
	size_t n, cap;
};

/* cli/overhead.c: what the job's processes paid (struct ffm_overhead summed over its runs on every
 * node, with the blind spot of adaptive stage 1's sampling), NULL when no run stored one. */
json_t *ffmctl_job_overhead(const struct ffmctl_job_stores *js, const char *job_id);
/* The price of ffmctl status or report (ffm_overhead_json's fields) in text, and the blind spot. */
void ffmctl_print_overhead(FILE *o, const json_t *price, const char *indent);
void ffmctl_print_blind_spot(FILE *o, const json_t *price);

/* cli/quality.c: the report's data-quality remarks in text (those that change a figure by
 * @noise_pct of the wall time or more), and the JSON's data_quality object. */
void ffmctl_print_quality(FILE *o, const struct ffmctl_job_stores *js,
			  const struct ffm_an_merged *m, double noise_pct);
json_t *ffmctl_json_quality(const struct ffm_an_merged *m);

/* Open the job's store on every node (read-only). -ENOENT: no store knows the job. */
int ffmctl_job_stores__open(const char *state_dir, const char *job_id,
			    struct ffmctl_job_stores *out);
void ffmctl_job_stores__close(struct ffmctl_job_stores *js);
/*
 * @verb's error for a job whose stores could not be opened (@err from ffmctl_job_stores__open).
 * For -ENOENT it names each store file under @state_dir (every node's) that was refused, and
 * why: the lookup skips files that are not usable stores (corrupt, not an ffm store, written
 * by a newer ffm, unreadable), and the job's data may be in one of them.
 */
void ffmctl_no_job_err(const char *verb, const char *state_dir, const char *job_id, int err);
/* For a user denied access to the state directory: how they may read their jobs ("" for root). */
const char *ffmctl_access_hint(void);

/* "function at file:line" or "function (module+0xoff)". */
void ffmctl_site_str(const struct ffm_an_site *x, char *buf, size_t len);
/* {"function":...,"file":...,"line":...,"module":...,"offset":...}; NULL when out of memory. */
json_t *ffmctl_json_site(const struct ffm_an_site *x);

/* cli/words.c: the words of a problem of type @p at @s, and of its fix (into @buf). */
const char *ffmctl_fix_text(unsigned p, const struct ffm_an_site *s, char *buf, size_t len);
const char *ffmctl_unnecessary_text(const struct ffm_an_site *s);
const char *ffmctl_dup_text(const struct ffm_an_site *s);

#endif
