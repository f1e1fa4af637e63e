/* SPDX-License-Identifier: MIT */
/*
 * The store, part 2: call sites, their identity and their application frame, created on first
 * use by the passes that meet them. In: the store's frames, opts' library lists. Out: the
 * catalog's sites (res->sites, struct site_int, the stack and fold maps; struct an_catalog).
 */
#include <errno.h>
#include <stdio.h>

#include "analysis/analysis_int.h"
#include "symbols/ffm_driver.h"
#include "symbols/ffm_stack.h"

/*
 * A site is named by its first frame outside the driver and, when there are, outside NVIDIA's
 * runtime libraries (ffm_module_owner: stripped, and not where a user fixes anything): a
 * framework such as libtorch, or the application; among those, the first with a source line
 * outside the toolkit's and the standard library's headers (ffm_an_src_library), else the
 * first with a line. Every machine frame outside the driver counts in the site's identity;
 * inlined frames do not, so a site keeps its identity from before they were stored.
 */
struct frame_scan {
	int depth_app; /* depth of the chosen application frame, -1 none */
	int rank;        /* the chosen frame's an_frame_rank */
	bool py, py_user; /* the chosen frame is Python code; ... outside the libraries */
	const char *const *py_library, *const *src_library;
	uint64_t key;
	struct an_py_anchor anchor;
	struct ffm_store_frame f; /* chosen frame (strings copied below) */
	char func[512], demangled[512], folded[512], file[512], module[512];
	char inner[512]; /* the previous (inner) frame's function, demangled */
};

static void copy_frame(struct frame_scan *fs, const struct ffm_store_frame *f, int depth)
{
	const char *base = f->module ? strrchr(f->module, '/') : NULL;

	fs->depth_app = depth;
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

	if (ffm_module_owner(f->module) == FFM_MODULE_DRIVER) {
		/* Only the frames outside the driver name the site: a driver update or another
		 * internal path to the same call keeps the site's identity. */
		fs->key = FFM_FNV1A_INIT;
		fs->depth_app = -1;
		fs->py = fs->py_user = false;
		fs->inner[0] = 0;
		return 0;
	}
	an_py_anchor_frame(&fs->anchor, f, fs->py_library);
	if (!f->inlined) {
		fs->key = ffm_fnv1a(fs->key, id, strlen(id) + 1);
		fs->key = ffm_fnv1a(fs->key, &f->offset, sizeof(f->offset));
	}
	if (ffm_an_py_frame(f)) {
		/* A Python program's site is Python code: its first frame outside the installed
		 * libraries, else its first. */
		bool lib = ffm_an_py_library(f->file, fs->py_library);

		if (!fs->py || (!fs->py_user && !lib)) {
			copy_frame(fs, f, (int)depth);
			fs->py = true;
			fs->py_user = !lib;
		}
		return 0;
	}
	if (!fs->py) {
		int rank = ffm_an_frame_rank(f, fs->src_library);

		/* nvcc's host function of a kernel: at the kernel's line, not the launch's */
		if (ffm_an_nvcc_kernel_wrapper(fs->inner, f->func))
			rank &= ~2;
		if (fs->depth_app < 0 || rank > fs->rank) {
			copy_frame(fs, f, (int)depth);
			fs->rank = rank;
		}
	}
	snprintf(fs->inner, sizeof(fs->inner), "%s",
		 f->demangled ? f->demangled : f->func ? f->func : "");
	return 0;
}

static int new_site(struct an_catalog *cat, int64_t stack, uint32_t *ret)
{
	struct ffm_analysis_result *res = cat->res;
	size_t cap = cat->cap_sites;
	struct ffm_an_site *x;
	int err;

	if (ffm_grow((void **)&res->sites, &cat->cap_sites, res->n_sites + 1, sizeof(*res->sites)))
		return -ENOMEM;
	if (cat->cap_sites != cap) {
		struct site_int *n = realloc(cat->si, cat->cap_sites * sizeof(*n));

		if (!n)
			return -ENOMEM;
		cat->si = n;
	}
	x = &res->sites[res->n_sites];
	memset(x, 0, sizeof(*x));
	memset(&cat->si[res->n_sites], 0, sizeof(cat->si[0]));
	x->stack = stack;
	x->api_name = x->function = x->file = x->module = x->folded = "";
	x->use_delay_ns = -1;
	x->first_xfer_site = -1;
	err = oatab_put_u32(&cat->site_of, (uint64_t)stack, (uint32_t)res->n_sites);
	if (err)
		return err;
	*ret = (uint32_t)res->n_sites++;
	return 0;
}

/* The frames of @stack scanned into a new *ret (free() it). */
static int scan_frames(struct an_catalog *cat, int64_t stack, struct frame_scan **ret)
{
	struct frame_scan *fs = calloc(1, sizeof(*fs));
	int err = 0;

	*ret = fs;
	if (!fs)
		return -ENOMEM;
	fs->depth_app = -1;
	fs->key = FFM_FNV1A_INIT;
	fs->py_library = cat->o->py_library;
	fs->src_library = cat->o->src_library;
	if (stack)
		err = ffm_store__for_each_frame(cat->s, stack, on_site_frame, fs);
	if (err == -ENOENT)
		err = 0; /* a stack id without a stack row: a lost stack record */
	return err < 0 ? err : 0;
}

int an_site_key(struct an_catalog *cat, int64_t stack, uint32_t api, uint64_t *key)
{
	struct ffm_an_api *x = an_api_slot(cat, api);
	struct frame_scan *fs;
	int err = scan_frames(cat, stack, &fs);

	if (!err && !x)
		err = -ENOMEM;
	if (!err) {
		fs->key = ffm_fnv1a(fs->key, x->name, strlen(x->name) + 1);
		*key = fs->key ? fs->key : 1;
	}
	free(fs);
	return err;
}

int an_event_key(struct an_catalog *cat, struct an_key_cache *c, const struct ffm_store_event *ev,
		 uint64_t *key)
{
	struct an_stack_key *sk;
	int err;

	*key = 0;
	/* (stack 0, api 0) is the empty key of the table: such an event has no site anyway */
	sk = oatab_find(&c->stacks, (uint64_t)ev->stack, ev->api, true);
	if (!sk)
		return ev->stack || ev->api ? -ENOMEM : 0;
	if (!sk->key) {
		err = an_site_key(cat, ev->stack, ev->api, &sk->key);
		if (err)
			return err;
	}
	*key = sk->key;
	return 0;
}

void an_key_cache_fini(struct an_key_cache *c)
{
	oatab_free(&c->stacks);
}

int an_scan_run(struct ffm_store *s, int64_t run,
		int (*fn)(const struct ffm_store_event *ev, void *ctx), void *ctx)
{
	struct ffm_store_cursor *c;
	struct ffm_store_event ev;
	int r = ffm_store_cursor__new_timing(s, run, 0, 0, &c);

	if (r)
		return r;
	while ((r = ffm_store_cursor__next(c, &ev)) == 1 && !(r = fn(&ev, ctx)))
		;
	ffm_store_cursor__free(c);
	return r;
}

/*
 * Whether driver function @name sets the program up or takes it down: cuInit, a context's
 * creation, retain, release, reset or destruction, a module's or library's load or unload, a
 * link. A wait inside one is the driver's own work, which the program cannot do without, not
 * a synchronization that a fix removes: on the H100 the CUDA runtime's first call waited
 * 2.4 ms in cuDevicePrimaryCtxRetain, and a clean program's report listed it as an
 * unnecessary sync, the only problem above the noise threshold.
 */
static bool setup_api(const char *name)
{
	static const char *const prefixes[] = {
		"cuInit", "cuDevicePrimaryCtx", "cuCtxCreate", "cuCtxDestroy", "cuModuleLoad",
		"cuModuleUnload", "cuLibraryLoad", "cuLibraryUnload", "cuLinkComplete",
	};

	for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
		if (!strncmp(name, prefixes[i], strlen(prefixes[i])))
			return true;
	return false;
}

/* Fill a site's application frame and key from its stack's frames. */
static int describe_site(struct an_catalog *cat, uint32_t idx)
{
	struct ffm_an_site *x = &cat->res->sites[idx];
	struct frame_scan *fs;
	struct ffm_an_api *api;
	uint64_t fh;
	uint32_t fid;
	int err = scan_frames(cat, x->stack, &fs);

	if (err)
		goto out;
	api = an_api_slot(cat, x->api);
	if (!api) {
		err = -ENOMEM;
		goto out;
	}
	x->api_name = api->name;
	/* Decided once per site, not per event: the timeline scan reads them for every call. */
	cat->si[idx].explicit_sync = strstr(x->api_name, "Synchronize") != NULL;
	cat->si[idx].launch_api = !strncmp(x->api_name, "cuLaunch", 8);
	cat->si[idx].setup_api = setup_api(x->api_name);
	cat->si[idx].stream_scoped = !strcmp(x->api_name, "cuStreamSynchronize") ||
				   x->kind == FFM_EV_TRANSFER || x->kind == FFM_EV_MEMSET;
	cat->si[idx].async_copy = x->kind == FFM_EV_TRANSFER && strstr(x->api_name, "Async");
	fs->key = ffm_fnv1a(fs->key, x->api_name, strlen(x->api_name) + 1);
	x->key = fs->key ? fs->key : 1;
	if (fs->depth_app >= 0) {
		x->function = an_pool_dup(cat->pool, fs->demangled[0] ? fs->demangled : fs->func, "?");
		x->file = an_pool_dup(cat->pool, fs->file, "");
		x->module = an_pool_dup(cat->pool, fs->module, "?");
		x->folded = an_pool_dup(cat->pool, fs->folded[0] ? fs->folded : x->function, "?");
		x->line = fs->f.line;
		x->offset = fs->f.offset;
		x->python = fs->py;
		cat->si[idx].py_anchor = fs->py_user ? fs->anchor.h : 0;
	} else {
		x->function = x->folded = "?";
		x->module = "?";
	}
	if (!x->function || !x->file || !x->module || !x->folded) {
		err = -ENOMEM;
		goto out;
	}
	/* Fold id: interned by the folded name (the caller's function without template args). */
	fh = an_str_hash(x->folded);
	fid = oatab_get_u32(&cat->fold_of, fh);
	if (fid == UINT32_MAX) {
		fid = cat->n_folds++;
		err = oatab_put_u32(&cat->fold_of, fh, fid);
	}
	x->fold_id = fid;
out:
	free(fs);
	return err;
}

/* A kernel @name that the launches of @stack launched @n times (most first). */
static int on_site_kernel(int64_t stack, const char *name, uint64_t n, void *ctx)
{
	struct an_catalog *cat = ctx;
	uint32_t i = oatab_get_u32(&cat->site_of, (uint64_t)stack);
	struct ffm_an_site *x;
	char *dm;

	(void)n;
	if (i == UINT32_MAX || !name)
		return 0;
	x = &cat->res->sites[i];
	if (x->kernel) {
		x->other_kernels++;
		return 0;
	}
	dm = ffm_demangle(name); /* NULL: not a C++ name, or no demangler */
	x->kernel = an_pool_dup(cat->pool, dm ? dm : name, "?");
	free(dm);
	return x->kernel ? 0 : -ENOMEM;
}

int an_site_kernels(struct an_catalog *cat, int64_t run)
{
	return run ? ffm_store__for_each_site_kernel(cat->s, run, on_site_kernel, cat) : 0;
}

int an_site_for(struct an_catalog *cat, int64_t stack, uint32_t api, uint32_t kind,
		uint32_t *ret)
{
	uint32_t i = oatab_get_u32(&cat->site_of, (uint64_t)stack);
	int err;

	if (i != UINT32_MAX) {
		*ret = i;
		return 0;
	}
	err = new_site(cat, stack, &i);
	if (err)
		return err;
	cat->res->sites[i].api = api;
	cat->res->sites[i].kind = kind;
	err = describe_site(cat, i);
	*ret = i;
	return err;
}

int an_on_agg(const struct ffm_store_stack_agg *g, void *ctx)
{
	struct an_catalog *cat = ctx;
	struct ffm_an_site *x;
	uint32_t i;
	int err = an_site_for(cat, g->stack, g->api, g->kind, &i);

	if (err)
		return err;
	x = &cat->res->sites[i];
	x->in_timeline = true;
	x->count += g->count;
	x->dur_ns += g->dur_ns;
	x->wait_ns += g->wait_ns;
	x->bytes += g->bytes;
	cat->si[i].n2 += g->count;
	return 0;
}

void an_catalog_fini(struct an_catalog *cat)
{
	free(cat->si);
	oatab_free(&cat->site_of);
	oatab_free(&cat->api_of);
	oatab_free(&cat->fold_of);
}
