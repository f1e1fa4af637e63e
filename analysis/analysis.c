/* SPDX-License-Identifier: MIT */
/*
 * The store -> model glue of the report (see analysis.h for the contract and the decisions).
 * Memory: the event array (sized before the scan) and the model's graph dominate; everything
 * else is per call site or per problem, never per event.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/analysis.h"

/* ---- small helpers ------------------------------------------------------------------------ */

/* u64 -> u32 open addressing map; grows at 1/2 load. */
struct map {
	uint64_t *k;
	uint32_t *v; /* UINT32_MAX = empty */
	size_t cap, n;
};

static size_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	x ^= x >> 33;
	return (size_t)x;
}

static void map_fini(struct map *m)
{
	free(m->k);
	free(m->v);
	memset(m, 0, sizeof(*m));
}

static int map_grow(struct map *m)
{
	struct map n = { .cap = m->cap ? m->cap * 2 : 64 };

	n.k = malloc(n.cap * sizeof(*n.k));
	n.v = malloc(n.cap * sizeof(*n.v));
	if (!n.k || !n.v) {
		map_fini(&n);
		return -ENOMEM;
	}
	memset(n.v, 0xff, n.cap * sizeof(*n.v));
	for (size_t i = 0; i < m->cap; i++) {
		if (m->v[i] == UINT32_MAX)
			continue;
		size_t j = mix(m->k[i]) & (n.cap - 1);
		while (n.v[j] != UINT32_MAX)
			j = (j + 1) & (n.cap - 1);
		n.k[j] = m->k[i];
		n.v[j] = m->v[i];
	}
	n.n = m->n;
	map_fini(m);
	*m = n;
	return 0;
}

/* The value of key, or UINT32_MAX. */
static uint32_t map_get(const struct map *m, uint64_t key)
{
	if (!m->cap)
		return UINT32_MAX;
	for (size_t j = mix(key) & (m->cap - 1);; j = (j + 1) & (m->cap - 1)) {
		if (m->v[j] == UINT32_MAX)
			return UINT32_MAX;
		if (m->k[j] == key)
			return m->v[j];
	}
}

static int map_put(struct map *m, uint64_t key, uint32_t val)
{
	size_t j;

	if ((m->n + 1) * 2 > m->cap && map_grow(m))
		return -ENOMEM;
	for (j = mix(key) & (m->cap - 1); m->v[j] != UINT32_MAX; j = (j + 1) & (m->cap - 1))
		if (m->k[j] == key) {
			m->v[j] = val;
			return 0;
		}
	m->k[j] = key;
	m->v[j] = val;
	m->n++;
	return 0;
}

/* Grow *p (elements of sz bytes) to hold at least need; capacity doubles. */
static int grow(void **p, size_t *cap, size_t need, size_t sz)
{
	size_t ncap = *cap ? *cap : 8;
	void *n;

	if (need <= *cap)
		return 0;
	while (ncap < need)
		ncap *= 2;
	n = realloc(*p, ncap * sz);
	if (!n)
		return -ENOMEM;
	*p = n;
	*cap = ncap;
	return 0;
}

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ULL;
	return h;
}

#define FNV0 0xcbf29ce484222325ULL

static uint64_t str_hash(const char *s)
{
	return fnv(FNV0, s ? s : "", s ? strlen(s) : 0);
}

/* All strings the results point to; freed with the analysis. */
struct strpool {
	char **v;
	size_t n, cap;
};

static const char *pool_dup(struct strpool *p, const char *s, const char *dflt)
{
	char *d;

	if (!s || !*s)
		return dflt;
	if (grow((void **)&p->v, &p->cap, p->n + 1, sizeof(*p->v)))
		return NULL;
	d = strdup(s);
	if (!d)
		return NULL;
	p->v[p->n++] = d;
	return d;
}

static void pool_fini(struct strpool *p)
{
	for (size_t i = 0; i < p->n; i++)
		free(p->v[i]);
	free(p->v);
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

/* ---- state -------------------------------------------------------------------------------- */

/* Sync verdict of one occurrence. V_UNKNOWN: no use seen, but not every protected range was
 * watched (FFM_SYNC_USE_PARTIAL): an unseen use is likely, so it is not called unnecessary.
 * V_NONE_PART: no use seen, every range watched, but only its first WATCHED_BYTES (a hardware
 * watchpoint's width; stage 3 arms one per range): a use of other bytes goes unseen. Such an
 * occurrence is decided by its call site, which is where a fix would go: a site whose syncs
 * were seen protecting data the CPU used needs its sync (it cannot be removed for some
 * iterations only), so the occurrence is required; a site never seen used is unnecessary. */
enum { V_NONE = 0, V_USED = 1, V_UNKNOWN = 2, V_NONE_PART = 3 };
#define WATCHED_BYTES 8

/* Per-occurrence verdicts of one stack from one run, in occurrence order. */
struct verdicts {
	uint8_t *v;	/* V_* (sync) or enum ffm_dup_kind (transfers) */
	int64_t *delay; /* sync: first-use delay, -1 = none */
	size_t n, cap;
	int64_t last_event;
	/* majority verdict when the counts do not match the timeline's */
	bool majority;
	uint8_t maj_v;
	int64_t maj_delay;
};

struct site_int {
	struct verdicts s3, s4, x3; /* stage 3 syncs, stage 4 syncs, stage 3 transfers */
	uint64_t n2;		    /* timeline occurrences (stack_agg) */
	uint64_t seen;		    /* ... scanned so far */
	bool keep;		    /* its events go into the model (see keep_site()) */
	bool misplaced;		    /* its used syncs are misplaced (decide_misplaced()) */
	bool any_used3;		    /* stage 3 saw a use after at least one of its syncs */
	int64_t use_stack, use_frame;
	int64_t first_stack;
	int64_t *delays; /* applied first-use delays of misplaced/used occurrences, for the median */
	size_t n_delays, cap_delays;
};

struct thread {
	uint32_t tid, tgid;
	uint64_t call_end; /* end of the latest API call on this thread (nested wait events) */
};

struct seq_ref {
	struct ffm_group g; /* the model's sequence */
	uint32_t pattern;   /* index into res.groups before sorting -> pattern_of[] */
};

struct ffm_analysis {
	struct ffm_analysis_result res;
	struct ffm_analysis_opts o;
	struct strpool pool;
	struct ffm_store *s;
	struct map site_of;  /* store stack id -> site index */
	struct site_int *si; /* parallel to res.sites */
	size_t cap_sites;
	struct map api_of; /* api id -> index in res.apis */
	size_t cap_apis;
	struct map fold_of; /* folded-name hash -> fold id */
	uint32_t n_folds;
	struct thread *thr;
	size_t n_thr, cap_thr;
	struct map thr_of;
	struct map keep_of; /* stack id -> keep_site(), the scan threads' read-only copy */
	/* the timeline */
	struct ffm_event *ev;
	size_t n_ev, cap_ev;
	struct ffm_graph *g;
	/* sequences (keep_graph) */
	struct seq_ref *seqs;
	size_t n_seqs;
	uint64_t *pattern_key; /* pattern index (creation order) -> merge key */
	int err;
};

/* ---- runs --------------------------------------------------------------------------------- */

struct run_scan {
	struct ffm_analysis *a;
	size_t cap;
	int64_t job_last; /* last run id of opts->job_id */
};

static int on_run(const struct ffm_store_run *r, void *ctx)
{
	struct run_scan *rs = ctx;
	struct ffm_analysis_result *res = &rs->a->res;
	struct ffm_an_run *x;

	if (rs->a->o.job_id && r->job_id && !strcmp(rs->a->o.job_id, r->job_id))
		rs->job_last = r->id;
	if (rs->a->o.job_only && (!r->job_id || strcmp(rs->a->o.job_id, r->job_id)))
		return 0;
	if (grow((void **)&res->runs, &rs->cap, res->n_runs + 1, sizeof(*res->runs)))
		return -ENOMEM;
	x = &res->runs[res->n_runs++];
	memset(x, 0, sizeof(*x));
	x->id = r->id;
	x->stage = r->stage;
	snprintf(x->job_id, sizeof(x->job_id), "%s", r->job_id ? r->job_id : "");
	x->wall_s = r->wall_s;
	x->start_ns = r->start_ns;
	x->end_ns = r->end_ns;
	x->flags = r->flags;
	x->ended = r->end_ns != 0;
	return 0;
}

#define RUN_INCOMPLETE (FFM_RUN_PARTIAL | FFM_RUN_ABORTED)

/* The latest ended run of a stage, complete ones first. */
static struct ffm_an_run *pick_run(struct ffm_analysis_result *res, int stage)
{
	struct ffm_an_run *best = NULL;

	for (size_t i = 0; i < res->n_runs; i++) {
		struct ffm_an_run *r = &res->runs[i];

		if (!r->ended || r->stage != stage)
			continue;
		if (best && (r->flags & RUN_INCOMPLETE) && !(best->flags & RUN_INCOMPLETE))
			continue;
		best = r;
	}
	return best;
}

static int load_runs(struct ffm_analysis *a)
{
	struct ffm_analysis_result *res = &a->res;
	struct run_scan rs = { .a = a };
	int64_t *slot[5] = { NULL, &res->run_baseline, &res->run_timeline, &res->run_verdicts,
			     &res->run_first_use };
	int err;

	err = ffm_store__for_each_run(a->s, on_run, &rs);
	if (err)
		return err < 0 ? err : -EIO;
	if (a->o.job_id) {
		size_t n = 0;

		if (!rs.job_last)
			return -ENOENT;
		/* What was known when the job's last run ended. */
		while (n < res->n_runs && res->runs[n].id <= rs.job_last)
			n++;
		res->n_runs = n;
	}
	for (int st = 1; st <= 4; st++) {
		struct ffm_an_run *r = pick_run(res, st);

		if (!r)
			continue;
		r->role = st; /* enum ffm_an_role follows the stage numbers */
		*slot[st] = r->id;
		err = ffm_store__get_drops(a->s, r->id, &r->drops);
		if (err)
			return err;
		for (int d = 0; d < FFM_DROP__MAX; d++)
			res->q.drops[d] += r->drops.count[d];
		if (r->flags & (RUN_INCOMPLETE | FFM_RUN_DROPPED))
			res->q.incomplete_runs++;
	}
	return 0;
}

/* ---- api names ---------------------------------------------------------------------------- */

static struct ffm_an_api *api_slot(struct ffm_analysis *a, uint32_t api)
{
	struct ffm_analysis_result *res = &a->res;
	uint32_t i = map_get(&a->api_of, api);

	if (i != UINT32_MAX)
		return &res->apis[i];
	if (grow((void **)&res->apis, &a->cap_apis, res->n_apis + 1, sizeof(*res->apis)) ||
	    map_put(&a->api_of, api, (uint32_t)res->n_apis))
		return NULL;
	res->apis[res->n_apis] = (struct ffm_an_api){
		.api = api, .name = api ? "?" : "(unattributed wait)",
	};
	return &res->apis[res->n_apis++];
}

static int on_api_name(uint32_t api, const char *name, void *ctx)
{
	struct ffm_analysis *a = ctx;
	struct ffm_an_api *x = api_slot(a, api);

	if (!x || !(x->name = pool_dup(&a->pool, name, "?")))
		return -ENOMEM;
	return 0;
}

/* ---- sites -------------------------------------------------------------------------------- */

static bool is_driver_module(const char *module)
{
	const char *base = module ? strrchr(module, '/') : NULL;

	base = base ? base + 1 : module;
	return base && !strncmp(base, "libcuda.so", 10);
}

/*
 * NVIDIA's runtime libraries between the application and the driver (the CUDA runtime, the math
 * libraries, NCCL): stripped, and not where a user fixes anything. The site is named by the
 * first frame beyond them (a framework such as libtorch, or the application); their frames
 * still count in the site's identity.
 */
static bool is_vendor_module(const char *module)
{
	static const char *const libs[] = {
		"libcudart.so", "libcublas.so", "libcublasLt.so", "libcudnn", "libnccl.so",
		"libcufft.so", "libcurand.so", "libcusparse.so", "libcusolver.so", "libnvrtc.so",
		"libnvJitLink.so", "libcupti.so", "libnvToolsExt.so", "libnvshmem",
	};
	const char *base = module ? strrchr(module, '/') : NULL;

	base = base ? base + 1 : module;
	for (size_t i = 0; base && i < sizeof(libs) / sizeof(libs[0]); i++)
		if (!strncmp(base, libs[i], strlen(libs[i])))
			return true;
	return false;
}

struct frame_scan {
	int depth_app; /* depth of the chosen application frame, -1 none */
	bool has_line;
	bool vendor;     /* the chosen frame is in an NVIDIA runtime library */
	int last_driver; /* deepest driver frame seen so far */
	uint64_t key;
	struct ffm_store_frame f; /* chosen frame (strings copied below) */
	char func[512], demangled[512], folded[512], file[512], module[512];
};

static void copy_frame(struct frame_scan *fs, const struct ffm_store_frame *f, int depth)
{
	const char *base = f->module ? strrchr(f->module, '/') : NULL;

	fs->depth_app = depth;
	fs->has_line = f->file && f->line;
	fs->f = *f;
	snprintf(fs->func, sizeof(fs->func), "%s", f->func ? f->func : "");
	snprintf(fs->demangled, sizeof(fs->demangled), "%s", f->demangled ? f->demangled : "");
	snprintf(fs->folded, sizeof(fs->folded), "%s", f->folded ? f->folded : "");
	snprintf(fs->file, sizeof(fs->file), "%s", f->file ? f->file : "");
	snprintf(fs->module, sizeof(fs->module), "%s", base ? base + 1 : f->module ? f->module : "");
}

static int on_site_frame(const struct ffm_store_frame *f, uint32_t depth, void *ctx)
{
	struct frame_scan *fs = ctx;
	const char *id = f->build_id ? f->build_id : f->module ? f->module : "?";

	if (is_driver_module(f->module)) {
		/* Only the frames outside the driver name the site: a driver update or another
		 * internal path to the same call keeps the site's identity. */
		fs->last_driver = (int)depth;
		fs->key = FNV0;
		fs->depth_app = -1;
		return 0;
	}
	fs->key = fnv(fs->key, id, strlen(id) + 1);
	fs->key = fnv(fs->key, &f->offset, sizeof(f->offset));
	{
		bool vendor = is_vendor_module(f->module);

		/* The first frame outside the driver; then the first outside NVIDIA's libraries;
		 * then, among those, the first with a source line. */
		if (fs->depth_app < 0 || (fs->vendor && !vendor) ||
		    (!fs->vendor && !vendor && !fs->has_line && f->file && f->line)) {
			copy_frame(fs, f, (int)depth);
			fs->vendor = vendor;
		}
	}
	return 0;
}

static int new_site(struct ffm_analysis *a, int64_t stack, uint32_t *ret)
{
	struct ffm_analysis_result *res = &a->res;
	size_t cap = a->cap_sites;
	struct ffm_an_site *x;
	int err;

	if (grow((void **)&res->sites, &a->cap_sites, res->n_sites + 1, sizeof(*res->sites)))
		return -ENOMEM;
	if (a->cap_sites != cap) {
		struct site_int *n = realloc(a->si, a->cap_sites * sizeof(*n));

		if (!n)
			return -ENOMEM;
		a->si = n;
	}
	x = &res->sites[res->n_sites];
	memset(x, 0, sizeof(*x));
	memset(&a->si[res->n_sites], 0, sizeof(a->si[0]));
	x->stack = stack;
	x->api_name = x->function = x->file = x->module = x->folded = "";
	x->use_delay_ns = -1;
	x->first_xfer_site = -1;
	err = map_put(&a->site_of, (uint64_t)stack, (uint32_t)res->n_sites);
	if (err)
		return err;
	*ret = (uint32_t)res->n_sites++;
	return 0;
}

/* Fill a site's application frame and key from its stack's frames. */
static int describe_site(struct ffm_analysis *a, uint32_t idx)
{
	struct ffm_an_site *x = &a->res.sites[idx];
	struct frame_scan *fs = calloc(1, sizeof(*fs));
	struct ffm_an_api *api;
	uint64_t fh;
	uint32_t fid;
	int err = 0;

	if (!fs)
		return -ENOMEM;
	fs->depth_app = -1;
	fs->last_driver = -1;
	fs->key = FNV0;
	if (x->stack) {
		err = ffm_store__for_each_frame(a->s, x->stack, on_site_frame, fs);
		if (err == -ENOENT)
			err = 0; /* a stack id without a stack row: a lost stack record */
		if (err < 0)
			goto out;
		err = 0;
	}
	api = api_slot(a, x->api);
	if (!api) {
		err = -ENOMEM;
		goto out;
	}
	x->api_name = api->name;
	fs->key = fnv(fs->key, x->api_name, strlen(x->api_name) + 1);
	x->key = fs->key ? fs->key : 1;
	if (fs->depth_app >= 0) {
		x->function = pool_dup(&a->pool, fs->demangled[0] ? fs->demangled : fs->func, "?");
		x->file = pool_dup(&a->pool, fs->file, "");
		x->module = pool_dup(&a->pool, fs->module, "?");
		x->folded = pool_dup(&a->pool, fs->folded[0] ? fs->folded : x->function, "?");
		x->line = fs->f.line;
		x->offset = fs->f.offset;
	} else {
		x->function = x->folded = "?";
		x->module = "?";
	}
	if (!x->function || !x->file || !x->module || !x->folded) {
		err = -ENOMEM;
		goto out;
	}
	/* Fold id: interned by the folded name (the caller's function without template args). */
	fh = str_hash(x->folded);
	fid = map_get(&a->fold_of, fh);
	if (fid == UINT32_MAX) {
		fid = a->n_folds++;
		err = map_put(&a->fold_of, fh, fid);
	}
	x->fold_id = fid;
out:
	free(fs);
	return err;
}

static int site_for(struct ffm_analysis *a, int64_t stack, uint32_t api, uint32_t kind,
		    uint32_t *ret)
{
	uint32_t i = map_get(&a->site_of, (uint64_t)stack);
	int err;

	if (i != UINT32_MAX) {
		*ret = i;
		return 0;
	}
	err = new_site(a, stack, &i);
	if (err)
		return err;
	a->res.sites[i].api = api;
	a->res.sites[i].kind = kind;
	err = describe_site(a, i);
	*ret = i;
	return err;
}

static int on_agg(const struct ffm_store_stack_agg *g, void *ctx)
{
	struct ffm_analysis *a = ctx;
	struct ffm_an_site *x;
	uint32_t i;
	int err = site_for(a, g->stack, g->api, g->kind, &i);

	if (err)
		return err;
	x = &a->res.sites[i];
	x->in_timeline = true;
	x->count += g->count;
	x->dur_ns += g->dur_ns;
	x->wait_ns += g->wait_ns;
	x->bytes += g->bytes;
	a->si[i].n2 += g->count;
	return 0;
}

/* ---- stage 3/4 verdicts ------------------------------------------------------------------- */

static void verdicts_fini(struct verdicts *v)
{
	free(v->v);
	free(v->delay);
	memset(v, 0, sizeof(*v));
}

static int verdict_add(struct verdicts *v, int64_t event, uint8_t val, int64_t delay)
{
	size_t cap = v->cap;

	if (grow((void **)&v->v, &v->cap, v->n + 1, sizeof(*v->v)))
		return -ENOMEM;
	if (v->cap != cap) {
		int64_t *d = realloc(v->delay, v->cap * sizeof(*d));

		if (!d)
			return -ENOMEM;
		v->delay = d;
	}
	v->v[v->n] = val;
	v->delay[v->n] = delay;
	v->n++;
	v->last_event = event;
	return 0;
}

struct use_scan {
	struct ffm_analysis *a;
	bool stage4;
};

static int on_sync_use(const struct ffm_store_sync_use *u, void *ctx)
{
	struct use_scan *us = ctx;
	struct ffm_analysis *a = us->a;
	struct site_int *si;
	struct verdicts *v;
	uint32_t i;
	int err = site_for(a, u->stack, 0, FFM_EV_API, &i);
	bool used = !(u->flags & FFM_SYNC_USE_NONE) && u->use_delay_ns >= 0;
	bool part_range = u->prot_hi - u->prot_lo > WATCHED_BYTES;
	uint8_t val = used ? V_USED : (u->flags & FFM_SYNC_USE_PARTIAL) ? V_UNKNOWN :
		      part_range ? V_NONE_PART : V_NONE;

	if (err)
		return err;
	si = &a->si[i];
	v = us->stage4 ? &si->s4 : &si->s3;
	if (!us->stage4 && ((u->flags & FFM_SYNC_USE_PARTIAL) || val == V_NONE_PART))
		a->res.sites[i].n_partial++;
	if (used && !us->stage4)
		si->any_used3 = true;
	if (used && !si->use_stack && !si->use_frame) {
		si->use_stack = u->use_stack;
		si->use_frame = u->use_frame;
	}
	if (v->n && v->last_event == u->event && u->event) {
		/* Another protected range of the same sync: used if any range is used, at the
		 * earliest use. */
		size_t k = v->n - 1;

		if (used) {
			if (v->v[k] != V_USED || v->delay[k] < 0 || u->use_delay_ns < v->delay[k])
				v->delay[k] = u->use_delay_ns;
			v->v[k] = V_USED;
		} else if ((val == V_UNKNOWN || val == V_NONE_PART) &&
			   (v->v[k] == V_NONE || v->v[k] == V_NONE_PART)) {
			v->v[k] = val == V_UNKNOWN ? V_UNKNOWN : V_NONE_PART;
		}
		return 0;
	}
	return verdict_add(v, u->event, val, used ? u->use_delay_ns : -1);
}

static int on_xfer(const struct ffm_store_xfer_hash *h, void *ctx)
{
	struct ffm_analysis *a = ctx;
	struct site_int *si;
	uint32_t i;
	int err = site_for(a, h->stack, 0, FFM_EV_TRANSFER, &i);

	if (err)
		return err;
	si = &a->si[i];
	if (h->dup == FFM_DUP_SAME_DST && !si->first_stack && h->first_stack)
		si->first_stack = h->first_stack;
	if (si->x3.n && si->x3.last_event == h->event && h->event)
		return 0;
	return verdict_add(&si->x3, h->event, (uint8_t)h->dup, -1);
}

static int64_t median_i64(int64_t *v, size_t n)
{
	if (!n)
		return -1;
	qsort(v, n, sizeof(*v), cmp_i64);
	return v[n / 2];
}

/* Majority verdict of a stack whose count differs too much from the timeline's. */
static int set_majority(struct verdicts *v, bool sync)
{
	size_t cnt[4] = { 0 }, nd = 0;
	int64_t *d;

	if (!v->n)
		return 0;
	v->majority = true;
	for (size_t k = 0; k < v->n; k++)
		cnt[v->v[k] & 3]++;
	if (!sync) {
		uint8_t best = 0;

		for (uint8_t c = 1; c < 4; c++)
			if (cnt[c] > cnt[best])
				best = c;
		v->maj_v = best;
		return 0;
	}
	if ((cnt[V_NONE] + cnt[V_NONE_PART]) * 2 > v->n)
		v->maj_v = cnt[V_NONE_PART] ? V_NONE_PART : V_NONE;
	else
		v->maj_v = cnt[V_USED] >= cnt[V_UNKNOWN] ? V_USED : V_UNKNOWN;
	d = malloc(v->n * sizeof(*d));
	if (!d)
		return -ENOMEM;
	for (size_t k = 0; k < v->n; k++)
		if (v->v[k] == V_USED && v->delay[k] >= 0)
			d[nd++] = v->delay[k];
	v->maj_delay = median_i64(d, nd);
	free(d);
	return 0;
}

/*
 * Whether a site's required syncs are misplaced: judged per site on its typical occurrence
 * (median first-use delay against its mean wait, thresholds in analysis.h), so that the noise
 * of single measurements (a use a watchpoint trap late, a sync that found the GPU done) neither
 * makes a required sync "misplaced" now and then nor hides a misplaced one. Delays from stage 4
 * where it timed any, else stage 3's.
 */
static int decide_misplaced(const struct ffm_an_site *x, struct site_int *si)
{
	const struct verdicts *v = &si->s4;
	uint64_t mean_wait = x->count ? x->wait_ns / x->count : 0;
	int64_t *d, med;
	size_t nd = 0;

	for (int pass = 0; pass < 2 && !nd; pass++) {
		v = pass ? &si->s3 : &si->s4;
		for (size_t k = 0; k < v->n; k++)
			nd += v->v[k] == V_USED && v->delay[k] >= 0;
	}
	if (!nd)
		return 0;
	d = malloc(nd * sizeof(*d));
	if (!d)
		return -ENOMEM;
	nd = 0;
	for (size_t k = 0; k < v->n; k++)
		if (v->v[k] == V_USED && v->delay[k] >= 0)
			d[nd++] = v->delay[k];
	med = median_i64(d, nd);
	free(d);
	/* Moving it must save more than the noise per occurrence: a gap after a sync that found
	 * the GPU done saves nothing (min(gap, wait) = wait = ~0), and a sync misplaced by
	 * nothing stays required, so it still ends a sequence. */
	si->misplaced = med >= (int64_t)FFM_MISPLACED_FLOOR_NS &&
			mean_wait >= FFM_MISPLACED_FLOOR_NS &&
			((uint64_t)med * FFM_MISPLACED_WAIT_DIV >= mean_wait ||
			 (uint64_t)med >= FFM_MISPLACED_ABS_NS);
	return 0;
}

static bool counts_differ(uint64_t n2, uint64_t n)
{
	uint64_t diff = n2 > n ? n2 - n : n - n2, tol = n2 * FFM_JOIN_TOLERANCE_PCT / 100;

	return diff > (tol > 1 ? tol : 1);
}

static int load_verdicts(struct ffm_analysis *a)
{
	struct ffm_analysis_result *res = &a->res;
	struct use_scan us = { .a = a };
	int err;

	if (res->run_verdicts) {
		err = ffm_store__for_each_sync_use_by_stack(a->s, res->run_verdicts, on_sync_use, &us);
		if (!err)
			err = ffm_store__for_each_xfer_hash_by_stack(a->s, res->run_verdicts, on_xfer, a);
		if (err)
			return err < 0 ? err : -EIO;
	}
	if (res->run_first_use) {
		us.stage4 = true;
		err = ffm_store__for_each_sync_use_by_stack(a->s, res->run_first_use, on_sync_use, &us);
		if (err)
			return err < 0 ? err : -EIO;
	}
	for (size_t i = 0; i < res->n_sites; i++) {
		struct ffm_an_site *x = &res->sites[i];
		struct site_int *si = &a->si[i];
		bool div = false;

		if (si->s3.n || si->x3.n)
			res->have_problems = true;
		if (!x->in_timeline) {
			if (si->s3.n || si->s4.n || si->x3.n)
				res->q.unmatched_sites++;
			continue;
		}
		if (si->s3.n && counts_differ(si->n2, si->s3.n)) {
			div = true;
			err = set_majority(&si->s3, true);
		}
		if (!err && si->s4.n && counts_differ(si->n2, si->s4.n)) {
			div = true;
			err = set_majority(&si->s4, true);
		}
		if (!err && si->x3.n && counts_differ(si->n2, si->x3.n)) {
			div = true;
			err = set_majority(&si->x3, false);
		}
		if (!err)
			err = decide_misplaced(x, si);
		if (err)
			return err;
		x->divergent = div;
		res->q.divergent_sites += div;
	}
	/* A stage-3 run that saw no sync and no transfer still classified the timeline. */
	if (res->run_verdicts)
		res->have_problems = true;
	return 0;
}

/* The verdict for occurrence k of a site's n2 timeline occurrences. */
static bool verdict_at(const struct verdicts *v, uint64_t k, uint64_t n2, uint8_t *val,
		       int64_t *delay)
{
	size_t j;

	if (!v->n)
		return false;
	if (v->majority) {
		*val = v->maj_v;
		*delay = v->maj_delay;
		return true;
	}
	j = n2 ? (size_t)((unsigned __int128)k * v->n / n2) : 0;
	if (j >= v->n)
		j = v->n - 1;
	*val = v->v[j];
	*delay = v->delay ? v->delay[j] : -1;
	return true;
}

/* ---- the timeline ------------------------------------------------------------------------- */

static struct thread *thread_of(struct ffm_analysis *a, uint32_t tid, uint32_t tgid)
{
	uint32_t i = map_get(&a->thr_of, tid);

	if (i != UINT32_MAX)
		return &a->thr[i];
	if (grow((void **)&a->thr, &a->cap_thr, a->n_thr + 1, sizeof(*a->thr)) ||
	    map_put(&a->thr_of, tid, (uint32_t)a->n_thr))
		return NULL;
	a->thr[a->n_thr] = (struct thread){ .tid = tid, .tgid = tgid };
	return &a->thr[a->n_thr++];
}

static uint8_t call_kind(uint32_t ev_kind)
{
	switch (ev_kind) {
	case FFM_EV_WAIT:
	case FFM_EV_API: return FFM_CALL_SYNC;
	case FFM_EV_TRANSFER: return FFM_CALL_TRANSFER;
	case FFM_EV_ALLOC: return FFM_CALL_ALLOC;
	case FFM_EV_FREE: return FFM_CALL_FREE;
	case FFM_EV_MEMSET: return FFM_CALL_MEMSET;
	case FFM_EV_LAUNCH: return FFM_CALL_LAUNCH;
	default: return FFM_CALL_OTHER;
	}
}

static int push_event(struct ffm_analysis *a, const struct ffm_event *e)
{
	if (a->n_ev == a->cap_ev) {
		/* Only a split (dup + sync on one transfer) gets here: grow by an eighth. */
		size_t ncap = a->cap_ev + a->cap_ev / 8 + 64;
		struct ffm_event *n = realloc(a->ev, ncap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		a->ev = n;
		a->cap_ev = ncap;
	}
	a->ev[a->n_ev++] = *e;
	return 0;
}

static int note_delay(struct site_int *si, int64_t d)
{
	if (grow((void **)&si->delays, &si->cap_delays, si->n_delays + 1, sizeof(*si->delays)))
		return -ENOMEM;
	si->delays[si->n_delays++] = d;
	return 0;
}

struct ev_scan {
	struct ffm_analysis *a;
	int64_t last_stack;
	uint32_t last_site;
	uint64_t lo, hi; /* span of every event, dropped ones included */
};

/*
 * Whether a site's events go into the model. A call that neither waits nor has a problem is CPU
 * time between syncs to Figure 5, whether it is a CLaunch or CWork node: both count as time the
 * GPU may idle, nothing else reads them. Left out, they become part of the gap the model fills
 * with CWork, with the same durations, so every benefit is exactly the same while the event
 * array and the graph shrink by the launches (most of a CUDA program's calls). Kept: explicit
 * syncs and wait-function events, any site that waited, any site with a stage 3/4 verdict.
 */
static bool keep_site(const struct ffm_an_site *x)
{
	/* Decided from stage 2's per-stack totals alone, so the scan can start before stage 3's
	 * verdicts are loaded: every sync can get a sync verdict, every copy or memset a
	 * duplicate one. */
	return x->kind == FFM_EV_API || x->kind == FFM_EV_WAIT || x->wait_ns ||
	       x->kind == FFM_EV_TRANSFER || x->kind == FFM_EV_MEMSET;
}

/*
 * The timeline is read in P time slices in parallel (SQLite's row decoding is most of a big
 * report's time), each slice by a thread with its own read-only connection, into chunks of "raw"
 * events: struct ffm_event with the store's event kind in .kind and the tgid in .fold_id. The
 * calling thread meanwhile turns the chunks into model events in time order (slice by slice,
 * chunk by chunk, as they arrive) and hands each chunk back for reuse, so the scan and the
 * conversion overlap and few chunk pages are ever faulted in. The slices only drop events of
 * sites the model does not need (keep_site(): decided before the scan, read-only while the
 * threads run); everything that depends on order (occurrence counts, nested waits) happens in
 * the calling thread.
 */
#define CHUNK_EVENTS 32768

struct chunk {
	struct chunk *next;
	size_t n;
	struct ffm_event ev[CHUNK_EVENTS];
};

/* Chunks queued and not yet consumed, at most: while the calling thread loads stage 3's
 * verdicts the slices run ahead, by at most this much memory (128 × 1.75 MiB). */
#define MAX_QUEUED 128

struct scan_ctl {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct chunk *free; /* chunks handed back */
	unsigned queued;
	bool stop;	    /* the consumer failed: producers end early */
};

struct slice {
	struct ffm_analysis *a;
	struct scan_ctl *ctl;
	pthread_t th;
	bool started, done; /* done: no more chunks will be queued */
	uint64_t from, to;  /* cursor bounds: start_ns in [from, to], to 0 = none */
	struct chunk *head, *tail; /* queued for the consumer */
	struct chunk *cur;	   /* being filled */
	uint64_t scanned, lo, hi;
	int err;
};

static struct chunk *chunk_get(struct scan_ctl *ctl)
{
	struct chunk *c;

	pthread_mutex_lock(&ctl->mu);
	c = ctl->free;
	if (c)
		ctl->free = c->next;
	pthread_mutex_unlock(&ctl->mu);
	if (!c)
		c = malloc(sizeof(*c));
	if (c) {
		c->next = NULL;
		c->n = 0;
	}
	return c;
}

/* Queue the chunk being filled (if any) and, with done, say the slice has ended. */
static bool slice_flush(struct slice *sl, bool done)
{
	struct scan_ctl *ctl = sl->ctl;
	bool stop;

	pthread_mutex_lock(&ctl->mu);
	if (sl->cur) {
		if (sl->tail)
			sl->tail->next = sl->cur;
		else
			sl->head = sl->cur;
		sl->tail = sl->cur;
		sl->cur = NULL;
		ctl->queued++;
	}
	pthread_cond_broadcast(&ctl->cv);
	while (!done && !ctl->stop && ctl->queued >= MAX_QUEUED)
		pthread_cond_wait(&ctl->cv, &ctl->mu);
	if (done)
		sl->done = true;
	stop = ctl->stop;
	pthread_cond_broadcast(&ctl->cv);
	pthread_mutex_unlock(&ctl->mu);
	return stop;
}

static void *scan_slice(void *arg)
{
	struct slice *sl = arg;
	struct ffm_analysis *a = sl->a;
	struct ffm_store_opts so = { .sz = sizeof(so), .read_only = true };
	struct ffm_store *s = NULL;
	struct ffm_store_cursor *cur = NULL;
	struct ffm_store_event se;
	int err;

	err = ffm_store__open(ffm_store__path(a->s), &so, &s);
	if (!err)
		err = ffm_store_cursor__new_timing(s, a->res.run_timeline, sl->from, sl->to, &cur);
	while (!err && (err = ffm_store_cursor__next(cur, &se)) == 1) {
		uint32_t keep = map_get(&a->keep_of, (uint64_t)se.stack);

		err = 0;
		sl->scanned++;
		if (se.start_ns < sl->lo)
			sl->lo = se.start_ns;
		if (se.start_ns + se.dur_ns > sl->hi)
			sl->hi = se.start_ns + se.dur_ns;
		if (!keep)
			continue;
		if (sl->cur && sl->cur->n == CHUNK_EVENTS && slice_flush(sl, false))
			break;
		if (!sl->cur && !(sl->cur = chunk_get(sl->ctl))) {
			err = -ENOMEM;
			break;
		}
		sl->cur->ev[sl->cur->n++] = (struct ffm_event){
			.start_ns = se.start_ns, .dur_ns = se.dur_ns,
			.wait_ns = se.kind == FFM_EV_WAIT ? se.dur_ns : se.wait_ns,
			.stack_id = (uint64_t)se.stack, .tid = se.tid, .fold_id = se.tgid,
			.api_id = se.api, .kind = (uint8_t)se.kind,
		};
	}
	ffm_store_cursor__free(cur);
	ffm_store__free(s);
	sl->err = err;
	slice_flush(sl, true);
	return NULL;
}

/* One raw event, in time order: into the model's array with its verdicts. */
static int on_raw_event(struct ev_scan *sc, const struct ffm_event *raw)
{
	struct ffm_analysis *a = sc->a;
	struct ffm_analysis_result *res = &a->res;
	struct thread *t = thread_of(a, raw->tid, raw->fold_id);
	struct ffm_event e = *raw;
	struct ffm_an_site *x;
	struct site_int *si;
	uint8_t sv = 0, xv = 0;
	int64_t d3 = -1, d4 = -1, d;
	bool has_sv, has_xv;
	uint64_t k;
	int err;

	if (!t)
		return -ENOMEM;
	if (raw->kind == FFM_EV_WAIT && raw->start_ns < t->call_end)
		return 0; /* inside a probed call, which carries the wait already */
	if (raw->kind != FFM_EV_WAIT && raw->start_ns + raw->dur_ns > t->call_end)
		t->call_end = raw->start_ns + raw->dur_ns;
	if ((int64_t)raw->stack_id != sc->last_stack || sc->last_site == UINT32_MAX) {
		err = site_for(a, (int64_t)raw->stack_id, raw->api_id, raw->kind, &sc->last_site);
		if (err)
			return err;
		sc->last_stack = (int64_t)raw->stack_id;
		/* a stack the per-stack totals did not list: model it */
		if (!a->si[sc->last_site].n2)
			a->si[sc->last_site].keep = true;
	}
	x = &res->sites[sc->last_site];
	si = &a->si[sc->last_site];
	if (!si->keep)
		return 0;
	k = si->seen++;

	e.fold_id = x->fold_id;
	e.kind = call_kind(raw->kind);
	if (raw->kind == FFM_EV_WAIT || raw->kind == FFM_EV_API || e.wait_ns)
		e.flags |= FFM_EVENT_SYNC;

	has_sv = verdict_at(&si->s3, k, si->n2, &sv, &d3);
	if (has_sv && sv == V_NONE_PART) {
		/* Decided by the site (see V_NONE_PART). */
		sv = si->any_used3 ? V_UNKNOWN : V_NONE;
	}
	has_xv = (e.kind == FFM_CALL_TRANSFER || e.kind == FFM_CALL_MEMSET) &&
		 verdict_at(&si->x3, k, si->n2, &xv, &d);
	if (has_sv) {
		x->n_classified++;
		if (sv == V_NONE) {
			e.problem = FFM_PROBLEM_UNNECESSARY_SYNC;
		} else if (sv == V_UNKNOWN) {
			res->q.withheld_syncs++;
		} else {
			uint8_t v4;
			/* Stage 4 times the use without stage 3's hashing; where it did not
			 * time this occurrence, stage 3's delay stands. */
			bool from4 = verdict_at(&si->s4, k, si->n2, &v4, &d4) && d4 >= 0;

			d = from4 ? d4 : d3;
			if (d >= 0) {
				if (!from4)
					x->delays_from_stage3 = true;
				err = note_delay(si, d);
				if (err)
					return err;
			}
			if (si->misplaced && d > 0 && e.wait_ns) {
				e.problem = FFM_PROBLEM_MISPLACED_SYNC;
				e.first_use_ns = (uint64_t)d;
			}
		}
	} else if (e.flags & FFM_EVENT_SYNC && res->run_verdicts) {
		res->q.unclassified_syncs++;
		res->q.unclassified_wait_ns += e.wait_ns;
	}
	if (has_xv && xv == FFM_DUP_OTHER_DST)
		x->n_other_dst++;
	if (has_xv && xv == FFM_DUP_SAME_DST) {
		if (e.problem != FFM_PROBLEM_NONE) {
			/* Both: the copy part is the duplicate, the wait the sync problem. */
			struct ffm_event cp = e;
			uint64_t wait = e.wait_ns < e.dur_ns ? e.wait_ns : e.dur_ns;

			cp.dur_ns = e.dur_ns - wait;
			cp.wait_ns = 0;
			cp.flags = 0;
			cp.first_use_ns = 0;
			cp.problem = FFM_PROBLEM_DUPLICATE_TRANSFER;
			err = push_event(a, &cp);
			if (err)
				return err;
			e.start_ns += cp.dur_ns;
			e.dur_ns = wait;
			e.kind = FFM_CALL_SYNC;
		} else {
			e.problem = FFM_PROBLEM_DUPLICATE_TRANSFER;
		}
	}
	return push_event(a, &e);
}

static int scan_slices(struct ffm_analysis *a, struct ev_scan *sc, uint64_t lo, uint64_t hi)
{
	struct scan_ctl ctl = { .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER };
	unsigned n = a->o.scan_threads;
	struct slice *sl;
	int err = 0;

	if (!n) {
		long cpus = sysconf(_SC_NPROCESSORS_ONLN);

		/* More than one slice pays off for big runs only (a connection each). */
		n = a->cap_ev < 1000000 ? 1 : cpus > 4 ? 4 : cpus > 1 ? (unsigned)cpus : 1;
	}
	if (n > 64)
		n = 64;
	if (hi <= lo + n)
		n = 1;
	sl = calloc(n, sizeof(*sl));
	if (!sl)
		return -ENOMEM;
	for (unsigned i = 0; i < n; i++) {
		uint64_t span = (hi - lo) / n;

		sl[i].a = a;
		sl[i].ctl = &ctl;
		sl[i].lo = UINT64_MAX;
		sl[i].from = i ? lo + span * i : 0;
		sl[i].to = i + 1 < n ? lo + span * (i + 1) - 1 : 0;
		if (pthread_create(&sl[i].th, NULL, scan_slice, &sl[i])) {
			sl[i].err = -EAGAIN;
			sl[i].done = true;
		} else {
			sl[i].started = true;
		}
	}
	/* Stage 3/4's verdicts load while the slices read the timeline. */
	err = load_verdicts(a);
	if (err) {
		pthread_mutex_lock(&ctl.mu);
		ctl.stop = true;
		pthread_cond_broadcast(&ctl.cv);
		pthread_mutex_unlock(&ctl.mu);
	}
	/* Consume in time order: slice by slice, chunk by chunk. */
	for (unsigned i = 0; i < n && !err; i++) {
		for (;;) {
			struct chunk *c;

			pthread_mutex_lock(&ctl.mu);
			while (!sl[i].head && !sl[i].done)
				pthread_cond_wait(&ctl.cv, &ctl.mu);
			c = sl[i].head;
			if (c) {
				sl[i].head = c->next;
				if (!sl[i].head)
					sl[i].tail = NULL;
				ctl.queued--;
				pthread_cond_broadcast(&ctl.cv);
			}
			pthread_mutex_unlock(&ctl.mu);
			if (!c)
				break;
			for (size_t k = 0; k < c->n && !err; k++)
				err = on_raw_event(sc, &c->ev[k]);
			pthread_mutex_lock(&ctl.mu);
			c->next = ctl.free;
			ctl.free = c;
			if (err)
				ctl.stop = true;
			pthread_mutex_unlock(&ctl.mu);
			if (err)
				break;
		}
		if (err)
			break;
	}
	for (unsigned i = 0; i < n; i++) {
		if (sl[i].started)
			pthread_join(sl[i].th, NULL);
		if (!err && sl[i].err)
			err = sl[i].err;
		a->res.events += sl[i].scanned;
		if (sl[i].lo < sc->lo)
			sc->lo = sl[i].lo;
		if (sl[i].hi > sc->hi)
			sc->hi = sl[i].hi;
		for (struct chunk *c = sl[i].head, *next; c; c = next) {
			next = c->next;
			free(c);
		}
		free(sl[i].cur);
	}
	for (struct chunk *c = ctl.free, *next; c; c = next) {
		next = c->next;
		free(c);
	}
	free(sl);
	return err;
}

struct proc_scan {
	struct ffm_analysis *a;
	size_t cap;
	uint64_t lo, hi;
};

static int on_process(const struct ffm_store_process *p, void *ctx)
{
	struct proc_scan *ps = ctx;
	struct ffm_analysis_result *res = &ps->a->res;
	struct ffm_an_proc *x;

	if (grow((void **)&res->procs, &ps->cap, res->n_procs + 1, sizeof(*res->procs)))
		return -ENOMEM;
	x = &res->procs[res->n_procs++];
	*x = (struct ffm_an_proc){ .tgid = p->tgid, .start_ns = p->start_ns, .end_ns = p->end_ns };
	x->exe = pool_dup(&ps->a->pool, p->exe, "?");
	if (!x->exe)
		return -ENOMEM;
	if (p->start_ns && p->start_ns < ps->lo)
		ps->lo = p->start_ns;
	if (p->end_ns > ps->hi)
		ps->hi = p->end_ns;
	return 0;
}

static struct ffm_an_proc *proc_of(struct ffm_analysis_result *res, uint32_t tgid)
{
	/* The latest process of that tgid (a tgid may be reused within a run). */
	for (size_t i = res->n_procs; i-- > 0;)
		if (res->procs[i].tgid == tgid)
			return &res->procs[i];
	return NULL;
}

/* ---- model results ------------------------------------------------------------------------ */

static int cmp_group(const void *x, const void *y)
{
	const struct ffm_an_group *a = x, *b = y;

	if (a->benefit_ns != b->benefit_ns)
		return a->benefit_ns < b->benefit_ns ? 1 : -1;
	if (a->wait_ns != b->wait_ns)
		return a->wait_ns < b->wait_ns ? 1 : -1;
	return a->key < b->key ? -1 : a->key > b->key;
}

static int cmp_site(const void *x, const void *y)
{
	const struct ffm_an_site *a = x, *b = y;

	if (a->wait_ns != b->wait_ns)
		return a->wait_ns < b->wait_ns ? 1 : -1;
	if (a->dur_ns != b->dur_ns)
		return a->dur_ns < b->dur_ns ? 1 : -1;
	return a->key < b->key ? -1 : a->key > b->key;
}

static int cmp_api(const void *x, const void *y)
{
	const struct ffm_an_api *a = x, *b = y;

	if (a->wait_ns != b->wait_ns)
		return a->wait_ns < b->wait_ns ? 1 : -1;
	if (a->dur_ns != b->dur_ns)
		return a->dur_ns < b->dur_ns ? 1 : -1;
	return strcmp(a->name, b->name);
}

static uint32_t site_of_node(struct ffm_analysis *a, const struct ffm_node *n)
{
	uint32_t i = map_get(&a->site_of, n->stack_id);

	return i == UINT32_MAX ? 0 : i;
}

static void group_add_member(struct ffm_analysis *a, struct ffm_an_group *gr, uint32_t site,
			     unsigned problem)
{
	const struct ffm_an_site *x = &a->res.sites[site];

	gr->count++;
	gr->n_type[problem]++;
	gr->partial |= x->n_partial != 0;
	gr->divergent |= x->divergent;
}

/* Point and fold groups from the model's groups; member statistics from the problem nodes. */
static int make_key_groups(struct ffm_analysis *a, const struct ffm_group *mg, size_t n_mg,
			   bool fold, const uint32_t *node_site, const uint8_t *node_prob)
{
	struct ffm_analysis_result *res = &a->res;
	struct map idx = { 0 };
	int err = 0;

	res->groups = calloc(n_mg ? n_mg : 1, sizeof(*res->groups));
	if (!res->groups)
		return -ENOMEM;
	res->n_groups = n_mg;
	for (size_t i = 0; i < n_mg; i++) {
		struct ffm_an_group *gr = &res->groups[i];
		struct ffm_node n;

		err = ffm_graph__node(a->g, mg[i].first_node, &n);
		if (err)
			goto out;
		gr->site = site_of_node(a, &n);
		gr->key = fold ? str_hash(res->sites[gr->site].folded) : res->sites[gr->site].key;
		gr->problems = mg[i].problems;
		gr->wait_ns = mg[i].wait_ns;
		gr->benefit_ns = mg[i].benefit_ns;
		err = map_put(&idx, mg[i].key, (uint32_t)i);
		if (err)
			goto out;
	}
	for (size_t k = 0; k < res->problem_nodes; k++) {
		const struct ffm_an_site *x = &res->sites[node_site[k]];
		uint32_t gi = map_get(&idx, fold ? x->fold_id : (uint64_t)x->stack);

		if (gi != UINT32_MAX)
			group_add_member(a, &res->groups[gi], node_site[k], node_prob[k]);
	}
	for (size_t i = 0; i < n_mg; i++)
		res->groups[i].occurrences = res->groups[i].count;
out:
	map_fini(&idx);
	return err;
}

/* Sequence patterns: model sequences with the same member sites in the same order. */
static int make_seq_groups(struct ffm_analysis *a, const struct ffm_group *mg, size_t n_mg,
			   const uint32_t *node_site, const uint8_t *node_prob)
{
	struct ffm_analysis_result *res = &a->res;
	struct map pat = { 0 };
	size_t cap = 0, k = 0;
	int err = 0;

	if (a->o.keep_graph) {
		a->seqs = calloc(n_mg ? n_mg : 1, sizeof(*a->seqs));
		if (!a->seqs)
			return -ENOMEM;
		a->n_seqs = n_mg;
	}
	for (size_t i = 0; i < n_mg; i++) {
		uint64_t h = FNV0;
		struct ffm_an_group *gr;
		uint32_t pi;

		/* Members are the problem nodes k .. k + members - 1 (sequences are slices). */
		for (uint32_t m = 0; m < mg[i].members; m++)
			h = fnv(h, &res->sites[node_site[k + m]].key, sizeof(uint64_t));
		h = h ? h : 1;
		pi = map_get(&pat, h);
		if (pi == UINT32_MAX) {
			if (grow((void **)&res->groups, &cap, res->n_groups + 1, sizeof(*res->groups))) {
				err = -ENOMEM;
				goto out;
			}
			pi = (uint32_t)res->n_groups++;
			gr = &res->groups[pi];
			memset(gr, 0, sizeof(*gr));
			gr->key = h;
			gr->site = node_site[k];
			gr->n_members = mg[i].members;
			gr->seq_sites = malloc(mg[i].members * sizeof(*gr->seq_sites));
			err = gr->seq_sites ? map_put(&pat, h, pi) : -ENOMEM;
			if (err)
				goto out;
			for (uint32_t m = 0; m < mg[i].members; m++)
				gr->seq_sites[m] = node_site[k + m];
		}
		gr = &res->groups[pi];
		gr->occurrences++;
		gr->problems |= mg[i].problems;
		gr->wait_ns += mg[i].wait_ns;
		gr->benefit_ns += mg[i].benefit_ns;
		for (uint32_t m = 0; m < mg[i].members; m++)
			group_add_member(a, gr, node_site[k + m], node_prob[k + m]);
		if (a->seqs) {
			a->seqs[i].g = mg[i];
			a->seqs[i].pattern = pi;
		}
		k += mg[i].members;
	}
	if (a->seqs) {
		a->pattern_key = malloc((res->n_groups ? res->n_groups : 1) * sizeof(uint64_t));
		if (!a->pattern_key) {
			err = -ENOMEM;
			goto out;
		}
		for (size_t i = 0; i < res->n_groups; i++)
			a->pattern_key[i] = res->groups[i].key;
	}
out:
	map_fini(&pat);
	return err;
}

static int run_model(struct ffm_analysis *a)
{
	struct ffm_analysis_result *res = &a->res;
	struct ffm_group *pg = NULL, *mg = NULL;
	size_t n_pg = 0, n_mg = 0;
	uint64_t *ben = NULL;
	uint32_t *node_site = NULL, *api_cnt = NULL, *api_nodes = NULL;
	uint8_t *node_prob = NULL;
	int err;

	res->problem_nodes = ffm_graph__problem_count(a->g);
	res->wall_ns = ffm_graph__wall_ns(a->g);
	ben = malloc((res->problem_nodes + 1) * sizeof(*ben));
	node_site = malloc((res->problem_nodes + 1) * sizeof(*node_site));
	node_prob = malloc(res->problem_nodes + 1);
	api_cnt = calloc(res->n_apis + 1, sizeof(*api_cnt));
	if (!ben || !node_site || !node_prob || !api_cnt) {
		err = -ENOMEM;
		goto out;
	}
	err = ffm_model__benefit(a->g, ben, &res->totals);
	if (err)
		goto out;

	/* Per problem node: its site, type, thread's process, API. */
	for (size_t k = 0; k < res->problem_nodes; k++) {
		int64_t ni = ffm_graph__problem_node(a->g, k);
		struct ffm_an_site *x;
		struct ffm_node n;
		uint32_t ti, ai;

		if (ni < 0 || (err = ffm_graph__node(a->g, (size_t)ni, &n)))
			goto out;
		node_site[k] = site_of_node(a, &n);
		node_prob[k] = n.problem;
		x = &res->sites[node_site[k]];
		x->n_unnecessary += n.problem == FFM_PROBLEM_UNNECESSARY_SYNC;
		x->n_misplaced += n.problem == FFM_PROBLEM_MISPLACED_SYNC;
		x->n_dup += n.problem == FFM_PROBLEM_DUPLICATE_TRANSFER;
		ti = map_get(&a->thr_of, n.tid);
		if (ti != UINT32_MAX) {
			struct ffm_an_proc *p = proc_of(res, a->thr[ti].tgid);

			if (p)
				p->benefit_ns += ben[k];
		}
		ai = map_get(&a->api_of, x->api);
		if (ai != UINT32_MAX)
			api_cnt[ai]++;
	}
	free(ben); /* 8 bytes a problem: gone before the groupings allocate theirs */
	ben = NULL;

	/* Point groups always: they are the per-site benefits. */
	err = ffm_model__group(a->g, FFM_GROUP_POINT, &pg, &n_pg);
	if (err)
		goto out;
	for (size_t i = 0; i < n_pg; i++) {
		uint32_t si = map_get(&a->site_of, pg[i].key);

		if (si != UINT32_MAX)
			res->sites[si].benefit_ns = pg[i].benefit_ns;
	}

	/* Per API: fixing all of its problems, nothing else. */
	{
		size_t total = 0;
		uint32_t *off = calloc(res->n_apis + 1, sizeof(*off));

		if (!off) {
			err = -ENOMEM;
			goto out;
		}
		for (size_t i = 0; i < res->n_apis; i++) {
			off[i + 1] = off[i] + api_cnt[i];
			total += api_cnt[i];
		}
		api_nodes = malloc((total + 1) * sizeof(*api_nodes));
		if (!api_nodes) {
			free(off);
			err = -ENOMEM;
			goto out;
		}
		memcpy(api_cnt, off, res->n_apis * sizeof(*api_cnt)); /* fill cursors */
		for (size_t k = 0; k < res->problem_nodes; k++) {
			uint32_t ai = map_get(&a->api_of, res->sites[node_site[k]].api);

			if (ai != UINT32_MAX)
				api_nodes[api_cnt[ai]++] = (uint32_t)ffm_graph__problem_node(a->g, k);
		}
		for (size_t i = 0; i < res->n_apis && !err; i++) {
			res->apis[i].problems = off[i + 1] - off[i];
			err = ffm_model__estimate(a->g, api_nodes + off[i], off[i + 1] - off[i], NULL,
						  &res->apis[i].benefit_ns);
		}
		free(off);
		if (err)
			goto out;
	}

	/* The requested grouping. */
	if (a->o.grouping == FFM_GROUP_SEQUENCE) {
		err = ffm_model__group(a->g, FFM_GROUP_SEQUENCE, &mg, &n_mg);
		if (!err)
			err = make_seq_groups(a, mg, n_mg, node_site, node_prob);
	} else {
		bool fold = a->o.grouping == FFM_GROUP_FOLD;

		if (fold)
			err = ffm_model__group(a->g, FFM_GROUP_FOLD, &mg, &n_mg);
		err = err ? err : make_key_groups(a, fold ? mg : pg, fold ? n_mg : n_pg, fold,
						  node_site, node_prob);
	}
	if (err)
		goto out;
	/* Sequence patterns keep creation order until the caller sorts via result(); point and
	 * fold groups are sorted now. The subsequence lookup goes by key, so order is free. */
	if (res->n_groups) /* NULL when there is no group: qsort(NULL, 0) is UB */
		qsort(res->groups, res->n_groups, sizeof(*res->groups), cmp_group);

	/* A process cannot save more than it lasted. */
	for (size_t i = 0; i < res->n_procs; i++) {
		struct ffm_an_proc *p = &res->procs[i];
		uint64_t span = p->end_ns > p->start_ns ? p->end_ns - p->start_ns : res->wall_ns;

		if (p->benefit_ns > span)
			p->benefit_ns = span;
	}
out:
	free(pg);
	free(mg);
	free(ben);
	free(node_site);
	free(node_prob);
	free(api_cnt);
	free(api_nodes);
	return err;
}

/* First-use and first-transfer locations of the sites with problems. */
struct use_frame {
	struct ffm_analysis *a;
	const char *func, *file;
	uint32_t line;
	bool done;
};

static int on_use_frame(const struct ffm_store_frame *f, uint32_t depth, void *ctx)
{
	struct use_frame *u = ctx;

	if (u->done)
		return 0;
	u->done = true;
	u->func = pool_dup(&u->a->pool, f->demangled ? f->demangled : f->func, "?");
	u->file = pool_dup(&u->a->pool, f->file, "");
	u->line = f->line;
	return u->func && u->file ? 0 : -ENOMEM;
}

static int evidence(struct ffm_analysis *a)
{
	struct ffm_analysis_result *res = &a->res;

	for (size_t i = 0; i < res->n_sites; i++) {
		struct ffm_an_site *x = &res->sites[i];
		struct site_int *si = &a->si[i];
		struct use_frame u = { .a = a };
		int err = 0;

		x->use_delay_ns = median_i64(si->delays, si->n_delays);
		if (si->use_frame)
			err = ffm_store__get_frame(a->s, si->use_frame, on_use_frame, &u);
		else if (si->use_stack)
			err = ffm_store__for_each_frame(a->s, si->use_stack, on_use_frame, &u);
		if (err < 0 && err != -ENOENT)
			return err;
		if (u.done) {
			x->use_function = u.func;
			x->use_file = u.file;
			x->use_line = u.line;
		}
		x->first_xfer_stack = si->first_stack;
		if (si->first_stack) {
			uint32_t fi = map_get(&a->site_of, (uint64_t)si->first_stack);

			if (fi == UINT32_MAX) {
				err = site_for(a, si->first_stack, x->api, FFM_EV_TRANSFER, &fi);
				if (err)
					return err;
				x = &res->sites[i]; /* site_for may move the array */
			}
			x->first_xfer_site = (int)fi;
		}
		res->q.partial_syncs += x->n_partial;
	}
	return 0;
}

/* ---- entry points ------------------------------------------------------------------------- */

static int cmp_site_idx(const void *x, const void *y, void *arg)
{
	const struct ffm_an_site *s = arg;
	uint32_t i = *(const uint32_t *)x, j = *(const uint32_t *)y;
	int c = cmp_site(&s[i], &s[j]);

	return c ? c : i < j ? -1 : i > j;
}

/* Sort the sites (by time) once every index into them has been handed out, and renumber the
 * references: groups, first transfers, the stack map. The internal per-site state (a->si) is
 * not needed after the scan and stays in the old order. */
static int sort_sites(struct ffm_analysis *a)
{
	struct ffm_analysis_result *res = &a->res;
	size_t n = res->n_sites;
	struct ffm_an_site *tmp = NULL;
	uint32_t *perm = NULL, *inv = NULL;
	int err = 0;

	if (n < 2)
		return 0;
	tmp = malloc(n * sizeof(*tmp));
	perm = malloc(n * sizeof(*perm));
	inv = malloc(n * sizeof(*inv));
	if (!tmp || !perm || !inv) {
		err = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n; i++)
		perm[i] = (uint32_t)i;
	qsort_r(perm, n, sizeof(*perm), cmp_site_idx, res->sites);
	memcpy(tmp, res->sites, n * sizeof(*tmp));
	for (size_t i = 0; i < n; i++) {
		res->sites[i] = tmp[perm[i]];
		inv[perm[i]] = (uint32_t)i;
	}
	for (size_t i = 0; i < n; i++)
		if (res->sites[i].first_xfer_site >= 0)
			res->sites[i].first_xfer_site = (int)inv[res->sites[i].first_xfer_site];
	for (size_t i = 0; i < res->n_groups; i++) {
		struct ffm_an_group *gr = &res->groups[i];

		gr->site = inv[gr->site];
		for (uint32_t m = 0; m < gr->n_members; m++)
			gr->seq_sites[m] = inv[gr->seq_sites[m]];
	}
	map_fini(&a->site_of);
	for (size_t i = 0; i < n && !err; i++)
		err = map_put(&a->site_of, (uint64_t)res->sites[i].stack, (uint32_t)i);
out:
	free(tmp);
	free(perm);
	free(inv);
	return err;
}

static int load_timeline(struct ffm_analysis *a)
{
	struct ffm_analysis_result *res = &a->res;
	struct proc_scan ps = { .a = a, .lo = UINT64_MAX };
	struct ev_scan sc = { .a = a, .last_site = UINT32_MAX };
	struct ffm_graph_opts go = { 0 };
	uint64_t total = 0;
	int err;

	for (size_t i = 0; i < res->n_sites; i++) {
		a->si[i].keep = keep_site(&res->sites[i]);
		if (a->si[i].keep)
			total += a->si[i].n2;
		err = map_put(&a->keep_of, (uint64_t)res->sites[i].stack, a->si[i].keep);
		if (err)
			return err;
	}
	sc.lo = UINT64_MAX;
	a->cap_ev = total + total / 64 + 64;
	a->ev = malloc(a->cap_ev * sizeof(*a->ev));
	if (!a->ev)
		return -ENOMEM;
	/* The slices split the run's time: its processes' span, else the run's own. */
	err = ffm_store__for_each_process(a->s, res->run_timeline, on_process, &ps);
	if (err)
		return err < 0 ? err : -EIO;
	{
		uint64_t lo = ps.lo, hi = ps.hi;

		for (size_t i = 0; i < res->n_runs && (lo == UINT64_MAX || !hi); i++)
			if (res->runs[i].id == res->run_timeline) {
				lo = res->runs[i].start_ns;
				hi = res->runs[i].end_ns;
			}
		err = scan_slices(a, &sc, lo == UINT64_MAX ? 0 : lo, hi);
		if (err)
			return err;
	}
	res->modelled_events = a->n_ev;
	/* The verdicts are in the events now: give their memory back before the graph. */
	for (size_t i = 0; i < res->n_sites; i++) {
		verdicts_fini(&a->si[i].s3);
		verdicts_fini(&a->si[i].s4);
		verdicts_fini(&a->si[i].x3);
	}
	for (size_t i = 0; i < res->n_procs; i++) {
		struct ffm_an_proc *p = &res->procs[i];

		if (!p->end_ns)
			p->end_ns = ps.hi;
	}
	for (size_t i = 0; i < a->n_thr; i++) {
		struct ffm_an_proc *p = proc_of(res, a->thr[i].tgid);

		if (p)
			p->threads++;
	}
	/* The run: its processes' lifetimes, at least every event's span. */
	go.run_start_ns = ps.lo < sc.lo ? ps.lo : sc.lo != UINT64_MAX ? sc.lo : 0;
	go.run_end_ns = ps.hi > sc.hi ? ps.hi : sc.hi;
	err = ffm_graph__build(a->ev, a->n_ev, &go, &a->g);
	if (err)
		return err;
	err = run_model(a);
	if (err)
		return err;
	err = evidence(a);
	if (err)
		return err;
	if (!a->o.keep_graph) {
		a->g = ffm_graph__free(a->g);
		free(a->ev);
		a->ev = NULL;
	}
	return 0;
}

static int api_totals(struct ffm_analysis *a)
{
	struct ffm_analysis_result *res = &a->res;

	for (size_t i = 0; i < res->n_sites; i++) {
		const struct ffm_an_site *x = &res->sites[i];
		struct ffm_an_api *api;

		if (!x->in_timeline)
			continue;
		api = api_slot(a, x->api);
		if (!api)
			return -ENOMEM;
		api->calls += x->count;
		api->dur_ns += x->dur_ns;
		api->wait_ns += x->wait_ns;
	}
	return 0;
}

int ffm_analysis__run(struct ffm_store *s, const struct ffm_analysis_opts *opts,
		      struct ffm_analysis **ret)
{
	struct ffm_analysis *a;
	struct ffm_store_key key = { 0 };
	int64_t profile_run;
	int err;

	*ret = NULL;
	if (!s || (opts && opts->job_only && !opts->job_id))
		return -EINVAL;
	a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	if (opts)
		memcpy(&a->o, opts, opts->sz && opts->sz < sizeof(a->o) ? opts->sz : sizeof(a->o));
	a->s = s;
	if ((unsigned)a->o.grouping >= FFM_GROUP__MAX) {
		err = -EINVAL;
		goto fail;
	}
	err = ffm_store__key(s, &key);
	if (err && err != -ENOENT)
		goto fail;
	a->res.key = pool_dup(&a->pool, key.key, "?");
	err = load_runs(a);
	if (err)
		goto fail;
	err = ffm_store__for_each_api_name(s, on_api_name, a);
	if (err)
		goto fail;
	profile_run = a->res.run_timeline ? a->res.run_timeline : a->res.run_baseline;
	if (a->o.profile_stage == 1)
		profile_run = a->res.run_baseline;
	else if (a->o.profile_stage == 2)
		profile_run = a->res.run_timeline;
	a->res.run_profile = profile_run;
	if (profile_run) {
		err = ffm_store__for_each_stack_agg(s, profile_run, on_agg, a);
		if (err)
			goto fail;
	}
	err = api_totals(a);
	if (err)
		goto fail;
	if (a->res.run_timeline && profile_run == a->res.run_timeline) {
		err = load_timeline(a); /* stage 3/4 verdicts included */
		if (err)
			goto fail;
	} else if (a->res.run_baseline) {
		for (size_t i = 0; i < a->res.n_runs; i++)
			if (a->res.runs[i].id == a->res.run_baseline)
				a->res.wall_ns = (uint64_t)(a->res.runs[i].wall_s * 1e9);
	}
	err = sort_sites(a);
	if (err)
		goto fail;
	if (a->res.n_apis) /* NULL when no run named an API: qsort(NULL, 0) is UB */
		qsort(a->res.apis, a->res.n_apis, sizeof(*a->res.apis), cmp_api);
	map_fini(&a->api_of);
	*ret = a;
	return 0;
fail:
	ffm_analysis__free(a);
	return err;
}

const struct ffm_analysis_result *ffm_analysis__result(const struct ffm_analysis *a)
{
	return a ? &a->res : NULL;
}

int ffm_analysis__subsequence(const struct ffm_analysis *a, uint64_t key, uint32_t from,
			      uint32_t to, uint64_t *benefit_ns, uint64_t *occurrences)
{
	uint64_t sum = 0, occ = 0;
	bool found = false;

	if (!a || !a->g || !a->seqs || a->o.grouping != FFM_GROUP_SEQUENCE)
		return -EINVAL;
	for (size_t i = 0; i < a->n_seqs; i++) {
		uint64_t b;
		int err;

		if (a->pattern_key[a->seqs[i].pattern] != key)
			continue;
		found = true;
		err = ffm_model__subsequence(a->g, &a->seqs[i].g, from, to, &b);
		if (err)
			return err;
		sum += b;
		occ++;
	}
	if (!found)
		return -ENOENT;
	*benefit_ns = sum;
	if (occurrences)
		*occurrences = occ;
	return 0;
}

struct ffm_analysis *ffm_analysis__free(struct ffm_analysis *a)
{
	if (!a)
		return NULL;
	ffm_graph__free(a->g);
	free(a->ev);
	for (size_t i = 0; i < a->res.n_sites && a->si; i++) {
		verdicts_fini(&a->si[i].s3);
		verdicts_fini(&a->si[i].s4);
		verdicts_fini(&a->si[i].x3);
		free(a->si[i].delays);
	}
	free(a->si);
	for (size_t i = 0; i < a->res.n_groups; i++)
		free(a->res.groups[i].seq_sites);
	free(a->res.groups);
	free(a->res.sites);
	free(a->res.apis);
	free(a->res.procs);
	free(a->res.runs);
	free(a->seqs);
	free(a->pattern_key);
	free(a->thr);
	map_fini(&a->site_of);
	map_fini(&a->api_of);
	map_fini(&a->fold_of);
	map_fini(&a->thr_of);
	map_fini(&a->keep_of);
	pool_fini(&a->pool);
	free(a);
	return NULL;
}

const char *ffm_an_problem_name(unsigned problem)
{
	switch (problem) {
	case FFM_PROBLEM_UNNECESSARY_SYNC: return "unnecessary_sync";
	case FFM_PROBLEM_MISPLACED_SYNC: return "misplaced_sync";
	case FFM_PROBLEM_DUPLICATE_TRANSFER: return "duplicate_transfer";
	default: return "none";
	}
}
