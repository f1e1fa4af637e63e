/* SPDX-License-Identifier: MIT */
/*
 * Address spaces, modules (one libdwfl Dwfl per module file, addresses = ELF vaddrs), the
 * symbol cache and the CFI unwinder. See ffm_stack.h for the contract.
 */
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/oatab.h"
#include "symbols/elfutil.h"
#include "symbols/ffm_driver.h"
#include "symbols/ffm_stack.h"

/* ------------------------------------------------------------------ address space */

struct ffm_addr_space {
	pid_t pid;
	char *maps_path;
	char *proc_root;
	struct ffm_map *maps; /* file-backed only, sorted by start */
	size_t n;
	uint64_t last_miss_refresh_ns;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

int ffm_addr_space__refresh(struct ffm_addr_space *as)
{
	struct ffm_map *maps;
	size_t n, w = 0;
	int err = ffm_maps_parse(as->maps_path, &maps, &n);

	if (err)
		return err;
	for (size_t i = 0; i < n; i++) {
		if (!maps[i].path || maps[i].path[0] != '/' || !maps[i].ino) {
			free(maps[i].path);
			continue;
		}
		maps[w++] = maps[i];
	}
	ffm_maps_free(as->maps, as->n);
	as->maps = maps;
	as->n = w;
	return 0;
}

int ffm_addr_space__new(pid_t pid, const struct ffm_addr_space_opts *opts,
			struct ffm_addr_space **ret)
{
	const char *proc = opts && opts->proc_root ? opts->proc_root : "/proc";
	struct ffm_addr_space *as;
	char p[PATH_MAX];
	int err;

	*ret = NULL;
	as = calloc(1, sizeof(*as));
	if (!as)
		return -ENOMEM;
	as->pid = pid;
	snprintf(p, sizeof(p), "%s/%d/maps", proc, (int)pid);
	as->maps_path = strdup(opts && opts->maps_path ? opts->maps_path : p);
	as->proc_root = strdup(proc);
	if (!as->maps_path || !as->proc_root) {
		ffm_addr_space__free(as);
		return -ENOMEM;
	}
	err = ffm_addr_space__refresh(as);
	if (err) {
		ffm_addr_space__free(as);
		return err;
	}
	*ret = as;
	return 0;
}

static const struct ffm_map *as_lookup(const struct ffm_addr_space *as, uint64_t addr)
{
	size_t lo = 0, hi = as->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (as->maps[mid].start <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo && addr < as->maps[lo - 1].end)
		return &as->maps[lo - 1];
	return NULL;
}

const struct ffm_map *ffm_addr_space__find(struct ffm_addr_space *as, uint64_t addr)
{
	const struct ffm_map *m = as_lookup(as, addr);
	uint64_t now;

	if (m)
		return m;
	/* A library loaded since: read maps again, but not for every stray pc of one stack. */
	now = now_ns();
	if (as->last_miss_refresh_ns && now - as->last_miss_refresh_ns < 10000000ull)
		return NULL;
	as->last_miss_refresh_ns = now;
	if (ffm_addr_space__refresh(as) < 0)
		return NULL;
	return as_lookup(as, addr);
}

pid_t ffm_addr_space__pid(const struct ffm_addr_space *as) { return as->pid; }
size_t ffm_addr_space__count(const struct ffm_addr_space *as) { return as->n; }

struct ffm_addr_space *ffm_addr_space__free(struct ffm_addr_space *as)
{
	if (!as)
		return NULL;
	ffm_maps_free(as->maps, as->n);
	free(as->maps_path);
	free(as->proc_root);
	free(as);
	return NULL;
}

/* ------------------------------------------------------------------ modules */

struct module {
	char *path;
	uint64_t dev, ino;
	struct ffm_elf *elf;
	Dwfl *dwfl;
	Dwfl_Module *mod;
	bool cfi_done;
	Dwarf_CFI *eh_cfi, *dw_cfi;
	Dwarf_Addr eh_bias, dw_bias;
	int err; /* a module that could not be opened: remembered, not retried */
	/* Function symbols sorted by address (libdwfl 0.188's addrinfo scans linearly). */
	bool syms_done;
	size_t nsyms;
	struct msym *syms;
};

struct msym {
	uint64_t addr, size;
	const char *name;
	int prio; /* GLOBAL 2, WEAK 1, LOCAL 0 */
};

struct symentry {
	struct ffm_sym sym;
	char *demangled, *folded;
	struct ffm_sym_inline *inl; /* FFM_SYM_MAX_INLINED slots, or NULL */
};

static void symentry_free(struct symentry *e)
{
	for (int i = 0; e->inl && i < e->sym.n_inlined; i++) {
		if (e->inl[i].folded != e->inl[i].function)
			free((char *)e->inl[i].folded);
		if (e->inl[i].function != e->inl[i].name)
			free((char *)e->inl[i].function);
	}
	free(e->inl);
	free(e->demangled);
	free(e->folded);
	free(e);
}

/* The cache's table entry: key (module, offset << 1 | retaddr). */
struct sym_slot {
	struct oa_key k;
	struct symentry *e;
};

struct ffm_symbolizer {
	Dwfl_Callbacks cb;
	char *debuginfo_path;
	bool no_lines;
	struct module **mods;
	size_t nmods;
	struct module *last;
	struct oatab tab; /* struct sym_slot */
	uint64_t hits, misses;
};

static struct module *module_free(struct module *m)
{
	if (!m)
		return NULL;
	if (m->dwfl)
		dwfl_end(m->dwfl);
	free(m->syms);
	ffm_elf_close(m->elf);
	free(m->path);
	free(m);
	return NULL;
}

int ffm_symbolizer__new(const struct ffm_symbolizer_opts *opts, struct ffm_symbolizer **ret)
{
	struct ffm_symbolizer *s = calloc(1, sizeof(*s));

	*ret = NULL;
	if (!s)
		return -ENOMEM;
	s->debuginfo_path = strdup(opts && opts->debuginfo_path ? opts->debuginfo_path
								 : ":.debug:/usr/lib/debug");
	s->tab = OATAB_INIT(struct sym_slot);
	if (!s->debuginfo_path || oatab_reserve(&s->tab, 512)) {
		ffm_symbolizer__free(s);
		return -ENOMEM;
	}
	s->no_lines = opts && opts->no_lines;
	s->cb.find_elf = dwfl_build_id_find_elf;
	s->cb.find_debuginfo = dwfl_standard_find_debuginfo;
	s->cb.section_address = dwfl_offline_section_address;
	s->cb.debuginfo_path = &s->debuginfo_path;
	*ret = s;
	return 0;
}

struct ffm_symbolizer *ffm_symbolizer__free(struct ffm_symbolizer *s)
{
	if (!s)
		return NULL;
	for (size_t i = 0; i < s->tab.cap; i++) {
		struct sym_slot *sl = oatab_slot(&s->tab, i);

		if (!sl)
			continue;
		symentry_free(sl->e);
	}
	oatab_free(&s->tab);
	for (size_t i = 0; i < s->nmods; i++)
		module_free(s->mods[i]);
	free(s->mods);
	free(s->debuginfo_path);
	free(s);
	return NULL;
}

void ffm_symbolizer__stats(const struct ffm_symbolizer *s, uint64_t *hits, uint64_t *misses,
			   size_t *modules)
{
	*hits = s->hits;
	*misses = s->misses;
	*modules = s->nmods;
}

static int module_open(struct ffm_symbolizer *s, int fd, const char *path, struct module **ret)
{
	struct module *m = calloc(1, sizeof(*m));
	struct stat st;
	int err, fd2;

	*ret = NULL;
	if (!m) {
		close(fd);
		return -ENOMEM;
	}
	if (fstat(fd, &st) == 0) {
		m->dev = st.st_dev;
		m->ino = st.st_ino;
	}
	fd2 = dup(fd);
	err = ffm_elf_open_fd(fd, &m->elf);
	if (err) {
		if (fd2 >= 0)
			close(fd2);
		module_free(m);
		return err;
	}
	m->path = strdup(path);
	m->dwfl = dwfl_begin(&s->cb);
	if (!m->path || !m->dwfl || fd2 < 0) {
		if (fd2 >= 0)
			close(fd2);
		module_free(m);
		return -ENOMEM;
	}
	dwfl_report_begin(m->dwfl);
	/* base 0 + add_p_vaddr: module addresses are the ELF file's own vaddrs (bias 0). */
	m->mod = dwfl_report_elf(m->dwfl, path, path, fd2, 0, true);
	dwfl_report_end(m->dwfl, NULL, NULL);
	if (!m->mod) {
		module_free(m);
		return -ENOEXEC;
	}
	*ret = m;
	return 0;
}

static int add_module(struct ffm_symbolizer *s, struct module *m)
{
	struct module **nm = realloc(s->mods, (s->nmods + 1) * sizeof(*nm));

	if (!nm)
		return -ENOMEM;
	s->mods = nm;
	s->mods[s->nmods++] = m;
	return 0;
}

/* The module of a mapping; opened (and cached per dev/ino) on first use. */
static int module_for_map(struct ffm_symbolizer *s, const struct ffm_addr_space *as,
			  const struct ffm_map *map, struct module **ret)
{
	char cand[3][PATH_MAX];
	int err = -ENOENT;

	if (s->last && s->last->dev == map->dev && s->last->ino == map->ino && !s->last->err) {
		*ret = s->last;
		return 0;
	}
	for (size_t i = 0; i < s->nmods; i++) {
		struct module *m = s->mods[i];

		/* maps' dev may be the overlay's while stat gives the lower one: ino + path. */
		if (m->ino == map->ino && (m->dev == map->dev || !strcmp(m->path, map->path))) {
			if (m->err)
				return m->err;
			s->last = m;
			*ret = m;
			return 0;
		}
	}
	snprintf(cand[0], sizeof(cand[0]), "%s/%d/map_files/%" PRIx64 "-%" PRIx64, as->proc_root,
		 (int)as->pid, map->start, map->end);
	snprintf(cand[1], sizeof(cand[1]), "%s/%d/root%s", as->proc_root, (int)as->pid, map->path);
	snprintf(cand[2], sizeof(cand[2]), "%s", map->path);
	for (int c = 0; c < 3; c++) {
		int fd = ffm_open_regular(cand[c]);
		struct stat st;
		struct module *m;

		if (fd < 0) {
			if (err == -ENOENT)
				err = fd;
			continue;
		}
		if (fstat(fd, &st) < 0 || (uint64_t)st.st_ino != map->ino) {
			close(fd);
			continue; /* replaced on disk: not the mapped file */
		}
		err = module_open(s, fd, map->path, &m);
		if (err)
			break;
		m->dev = map->dev; /* identify by what maps says */
		err = add_module(s, m);
		if (err) {
			module_free(m);
			return err;
		}
		s->last = m;
		*ret = m;
		return 0;
	}
	/* Remember the failure so a stack full of its pcs does not retry each time. */
	{
		struct module *m = calloc(1, sizeof(*m));

		if (m) {
			m->dev = map->dev;
			m->ino = map->ino;
			m->path = strdup(map->path);
			m->err = err;
			if (!m->path || add_module(s, m))
				module_free(m);
		}
	}
	return err;
}

static int module_for_path(struct ffm_symbolizer *s, const char *path, struct module **ret)
{
	struct stat st;
	struct module *m = NULL;
	int fd, err;

	if (stat(path, &st) < 0)
		return -errno;
	for (size_t i = 0; i < s->nmods; i++)
		if (s->mods[i]->ino == (uint64_t)st.st_ino && s->mods[i]->dev == (uint64_t)st.st_dev &&
		    !s->mods[i]->err) {
			*ret = s->mods[i];
			return 0;
		}
	fd = ffm_open_regular(path);
	if (fd < 0)
		return fd;
	err = module_open(s, fd, path, &m);
	if (err)
		return err;
	err = add_module(s, m);
	if (err) {
		module_free(m);
		return err;
	}
	*ret = m;
	return 0;
}

static void module_cfi(struct module *m)
{
	if (m->cfi_done)
		return;
	m->cfi_done = true;
	m->eh_cfi = dwfl_module_eh_cfi(m->mod, &m->eh_bias);
	/* .debug_frame may sit in a separate debug file; libdwfl finds it. */
	m->dw_cfi = dwfl_module_dwarf_cfi(m->mod, &m->dw_bias);
}

int ffm_stack_check_module(const char *path)
{
	struct ffm_elf *e;
	int err = ffm_elf_open(path, &e);

	if (err)
		return err;
	err = e->ehframe_vaddr || e->ehhdr_vaddr || e->has_debug_frame ? 0 : -ENODATA;
	ffm_elf_close(e);
	return err;
}

/* ------------------------------------------------------------------ symbolization */

/* Name of a subprogram or inlined-subroutine DIE: its linkage name, else its own. */
static const char *die_func_name(Dwarf_Die *d)
{
	Dwarf_Attribute a;
	Dwarf_Die origin;
	const char *name = NULL;

	if (dwarf_attr_integrate(d, DW_AT_linkage_name, &a))
		name = dwarf_formstring(&a);
	if (!name && dwarf_hasattr(d, DW_AT_abstract_origin) &&
	    dwarf_formref_die(dwarf_attr(d, DW_AT_abstract_origin, &a), &origin))
		name = dwarf_diename(&origin);
	return name ? name : dwarf_diename(d);
}

/* Name of the innermost function DIE (also inlined) at @addr, from DWARF. */
static const char *dwarf_func_name(Dwfl_Module *mod, Dwarf_Addr addr)
{
	Dwarf_Addr bias;
	Dwarf_Die *cu = dwfl_module_addrdie(mod, addr, &bias), *scopes = NULL;
	const char *name = NULL;
	int n;

	if (!cu)
		return NULL;
	n = dwarf_getscopes(cu, addr - bias, &scopes);
	for (int i = 0; i < n && !name; i++) {
		int tag = dwarf_tag(&scopes[i]);

		if (tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine)
			name = die_func_name(&scopes[i]);
	}
	free(scopes);
	return name;
}

/* Where an inlined-subroutine DIE was inlined: its caller's DW_AT_call_file:DW_AT_call_line. */
static void die_call_site(Dwarf_Die *cu, Dwarf_Die *d, const char **file, int *line)
{
	Dwarf_Attribute a;
	Dwarf_Files *files;
	Dwarf_Word w;
	size_t nfiles;

	*file = NULL;
	*line = 0;
	if (dwarf_formudata(dwarf_attr(d, DW_AT_call_line, &a), &w) == 0 && w <= INT32_MAX)
		*line = (int)w;
	if (dwarf_formudata(dwarf_attr(d, DW_AT_call_file, &a), &w) == 0 &&
	    dwarf_getsrcfiles(cu, &files, &nfiles) == 0 && w < nfiles)
		*file = dwarf_filesrc(files, w, NULL, NULL);
}

static void inline_names(struct ffm_sym_inline *in, const char *name)
{
	char buf[1024], *dem = name ? ffm_demangle(name) : NULL;

	in->name = name;
	in->function = dem ? dem : name;
	in->folded = NULL;
	if (in->function && ffm_fold_function(in->function, buf, sizeof(buf)) >= 0)
		in->folded = strdup(buf);
	if (!in->folded)
		in->folded = in->function;
}

/*
 * The functions the compiler inlined at @addr, each with the line inside it; e->sym's file:line
 * then moves to where the outermost one is called from. dwarf_getscopes finds the innermost
 * inlined instance (the scopes it lists after one are its abstract definition's), and
 * dwarf_getscopes_die the concrete instances around it, innermost first. Past
 * FFM_SYM_MAX_INLINED levels the middle ones are left out, never the outer line.
 */
static void symbolize_inlines(struct symentry *e, Dwfl_Module *mod, Dwarf_Addr addr)
{
	Dwarf_Addr bias;
	Dwarf_Die *cu = dwfl_module_addrdie(mod, addr, &bias), *scopes = NULL, *chain = NULL;
	const char *file = e->sym.file;
	int n, k = 0, line = e->sym.line, i = 0;

	if (!cu || (n = dwarf_getscopes(cu, addr - bias, &scopes)) <= 0)
		return;
	while (i < n && dwarf_tag(&scopes[i]) != DW_TAG_inlined_subroutine &&
	       dwarf_tag(&scopes[i]) != DW_TAG_subprogram)
		i++; /* lexical blocks */
	if (i == n || dwarf_tag(&scopes[i]) != DW_TAG_inlined_subroutine ||
	    (n = dwarf_getscopes_die(&scopes[i], &chain)) <= 0)
		goto out;
	for (i = 0; i < n; i++) {
		int tag = dwarf_tag(&chain[i]);

		if (tag == DW_TAG_subprogram)
			break;
		if (tag != DW_TAG_inlined_subroutine)
			continue; /* a lexical block */
		if (!e->inl && !(e->inl = calloc(FFM_SYM_MAX_INLINED, sizeof(*e->inl))))
			break;
		if (k < FFM_SYM_MAX_INLINED) {
			inline_names(&e->inl[k], die_func_name(&chain[i]));
			e->inl[k].file = file;
			e->inl[k].line = line;
			k++;
		}
		die_call_site(cu, &chain[i], &file, &line);
	}
	if (k) {
		e->sym.inlined = e->inl;
		e->sym.n_inlined = k;
		e->sym.file = file;
		e->sym.line = line;
	}
out:
	free(chain);
	free(scopes);
}

static int msym_cmp(const void *a, const void *b)
{
	const struct msym *x = a, *y = b;

	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	return y->prio - x->prio; /* the preferred name first among aliases */
}

/* All function symbols of the module (symtab of the file or its debug file, else dynsym). */
static void module_syms(struct module *m)
{
	int n;
	size_t cap = 0;

	if (m->syms_done)
		return;
	m->syms_done = true;
	n = dwfl_module_getsymtab(m->mod);
	for (int i = 1; i < n; i++) {
		GElf_Sym sym;
		GElf_Addr addr;
		const char *name = dwfl_module_getsym_info(m->mod, i, &sym, &addr, NULL, NULL, NULL);
		int type = GELF_ST_TYPE(sym.st_info), bind = GELF_ST_BIND(sym.st_info);

		if (!name || !*name || sym.st_shndx == SHN_UNDEF ||
		    (type != STT_FUNC && type != STT_GNU_IFUNC))
			continue;
		if (m->nsyms == cap) {
			struct msym *ns;

			cap = cap ? cap * 2 : 1024;
			ns = realloc(m->syms, cap * sizeof(*ns));
			if (!ns)
				return;
			m->syms = ns;
		}
		m->syms[m->nsyms++] = (struct msym){ addr, sym.st_size, name,
						     bind == STB_GLOBAL ? 2 : bind == STB_WEAK ? 1 : 0 };
	}
	if (m->nsyms)
		qsort(m->syms, m->nsyms, sizeof(*m->syms), msym_cmp);
}

/* The function symbol containing @addr: the nearest one below that covers it. */
static const struct msym *msym_lookup(struct module *m, uint64_t addr)
{
	size_t lo = 0, hi;

	module_syms(m);
	hi = m->nsyms;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (m->syms[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* Walk down a few entries: a sized symbol that covers addr wins over a closer
	 * one that ends before it (nested or overlapping symbols are rare). */
	for (size_t i = lo, k = 0; i > 0 && k < 8; i--, k++) {
		const struct msym *c = &m->syms[i - 1];

		if (addr < c->addr + c->size)
			return c;
		if (!c->size && k == 0)
			return c; /* a sizeless symbol: trust the nearest one (as libdwfl does) */
	}
	return NULL;
}

static int symbolize_in(struct ffm_symbolizer *s, struct module *m, uint64_t offset, bool retaddr,
			const struct ffm_sym **ret)
{
	uint64_t key = offset << 1 | retaddr, vaddr;
	struct sym_slot *slot = oatab_get(&s->tab, (uintptr_t)m, key);
	struct symentry *e;
	GElf_Off symoff = 0;
	const struct msym *ms;
	const char *name = NULL;
	Dwarf_Addr addr;

	if (slot) {
		s->hits++;
		*ret = &slot->e->sym;
		return 0;
	}
	s->misses++;
	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->sym.module = m->path;
	e->sym.build_id = m->elf->build_id;
	e->sym.offset = offset;
	if (ffm_elf_offset_to_vaddr(m->elf, offset, &vaddr) < 0)
		vaddr = offset; /* outside every PT_LOAD: keep the offset */
	e->sym.elf_addr = vaddr;
	addr = vaddr - (retaddr ? 1 : 0);
	ms = msym_lookup(m, addr);
	if (ms) {
		name = ms->name;
		symoff = addr - ms->addr;
	}
	if (!name && !s->no_lines) {
		name = dwarf_func_name(m->mod, addr);
		symoff = 0;
	}
	if (name) {
		char buf[1024];

		const char *at = strchr(name, '@');

		e->sym.name = name;
		e->sym.sym_offset = symoff + (retaddr ? 1 : 0);
		if (at && at != name) {
			/* "__libc_start_main@@GLIBC_2.34": the version is not part of the name. */
			char *plain = strndup(name, at - name);

			e->demangled = plain ? ffm_demangle(plain) : NULL;
			if (!e->demangled)
				e->demangled = plain;
			else
				free(plain);
		} else {
			e->demangled = ffm_demangle(name);
		}
		e->sym.function = e->demangled ? e->demangled : name;
		if (ffm_fold_function(e->sym.function, buf, sizeof(buf)) >= 0)
			e->folded = strdup(buf);
		e->sym.folded = e->folded ? e->folded : e->sym.function;
	}
	if (!s->no_lines) {
		Dwfl_Line *l = dwfl_module_getsrc(m->mod, addr);
		int line = 0;

		if (l) {
			e->sym.file = dwfl_lineinfo(l, NULL, &line, NULL, NULL, NULL);
			e->sym.line = line;
		}
		symbolize_inlines(e, m->mod, addr);
	}
	slot = oatab_find(&s->tab, (uintptr_t)m, key, true);
	if (!slot) {
		symentry_free(e);
		return -ENOMEM;
	}
	slot->e = e;
	*ret = &e->sym;
	return 0;
}

int ffm_symbolizer__symbolize(struct ffm_symbolizer *s, struct ffm_addr_space *as, uint64_t pc,
			      bool retaddr, const struct ffm_sym **ret)
{
	const struct ffm_map *map = ffm_addr_space__find(as, pc - (retaddr ? 1 : 0));
	struct module *m;
	int err;

	*ret = NULL;
	if (!map)
		return -ENOENT;
	err = module_for_map(s, as, map, &m);
	if (err)
		return err;
	return symbolize_in(s, m, pc - map->start + map->offset, retaddr, ret);
}

int ffm_symbolizer__symbolize_file(struct ffm_symbolizer *s, const char *path, uint64_t offset,
				   bool retaddr, const struct ffm_sym **ret)
{
	struct module *m = NULL;
	int err;

	*ret = NULL;
	err = module_for_path(s, path, &m);
	if (err)
		return err;
	return symbolize_in(s, m, offset, retaddr, ret);
}

/* ------------------------------------------------------------------ unwinding */

/* x86-64 DWARF register numbers. */
enum { R_RBX = 3, R_RBP = 6, R_RSP = 7, R_R12 = 12, R_R15 = 15, R_RA = 16, NREGS = 17 };

struct uregs {
	uint64_t v[NREGS];
	uint32_t known; /* bit per register */
};

struct stackmem {
	uint64_t lo, hi; /* [lo, hi) */
	const uint8_t *p;
};

static int mem_read(const struct stackmem *sm, uint64_t addr, uint64_t *v)
{
	if (addr < sm->lo || addr > sm->hi - 8 || sm->hi - sm->lo < 8)
		return -EFAULT;
	memcpy(v, sm->p + (addr - sm->lo), 8);
	return 0;
}

static int reg_get(const struct uregs *r, unsigned reg, uint64_t *v)
{
	if (reg >= NREGS || !(r->known & (1u << reg)))
		return -ENODATA;
	*v = r->v[reg];
	return 0;
}

/*
 * Evaluate a DWARF expression as libdw hands out CFA and register rules. *is_value says whether
 * the result is a value (DW_OP_stack_value, register) or a location to read.
 */
static int eval_ops(const Dwarf_Op *ops, size_t nops, const struct uregs *r,
		    const struct stackmem *sm, uint64_t cfa, bool have_cfa, uint64_t *out,
		    bool *is_value)
{
	uint64_t st[16];
	int sp = 0;

	*is_value = false;
#define PUSH(x)                                                                                    \
	do {                                                                                       \
		uint64_t _x = (x);                                                                 \
		if (sp >= 16)                                                                      \
			return -E2BIG;                                                             \
		st[sp++] = _x;                                                                     \
	} while (0)
#define NEED(k)                                                                                    \
	do {                                                                                       \
		if (sp < (k))                                                                      \
			return -EINVAL;                                                            \
	} while (0)
	for (size_t i = 0; i < nops; i++) {
		const Dwarf_Op *op = &ops[i];
		uint8_t a = op->atom;
		uint64_t v, x;

		if (a >= DW_OP_lit0 && a <= DW_OP_lit31) {
			PUSH(a - DW_OP_lit0);
		} else if (a >= DW_OP_breg0 && a <= DW_OP_breg31) {
			if (reg_get(r, a - DW_OP_breg0, &v))
				return -ENODATA;
			PUSH(v + (int64_t)op->number);
		} else if (a >= DW_OP_reg0 && a <= DW_OP_reg31) {
			if (reg_get(r, a - DW_OP_reg0, &v))
				return -ENODATA;
			PUSH(v);
			*is_value = true;
		} else {
			switch (a) {
			case DW_OP_bregx:
				if (reg_get(r, op->number, &v))
					return -ENODATA;
				PUSH(v + (int64_t)op->number2);
				break;
			case DW_OP_regx:
				if (reg_get(r, op->number, &v))
					return -ENODATA;
				PUSH(v);
				*is_value = true;
				break;
			case DW_OP_call_frame_cfa:
				if (!have_cfa)
					return -EINVAL;
				PUSH(cfa);
				break;
			case DW_OP_addr: case DW_OP_const1u: case DW_OP_const2u: case DW_OP_const4u:
			case DW_OP_const8u: case DW_OP_constu:
				PUSH(op->number);
				break;
			case DW_OP_const1s: case DW_OP_const2s: case DW_OP_const4s:
			case DW_OP_const8s: case DW_OP_consts:
				PUSH((uint64_t)(int64_t)op->number);
				break;
			case DW_OP_plus_uconst: NEED(1); st[sp - 1] += op->number; break;
			case DW_OP_dup: NEED(1); PUSH(st[sp - 1]); break;
			case DW_OP_drop: NEED(1); sp--; break;
			case DW_OP_over: NEED(2); PUSH(st[sp - 2]); break;
			case DW_OP_swap: NEED(2); x = st[sp - 1]; st[sp - 1] = st[sp - 2]; st[sp - 2] = x; break;
			case DW_OP_deref:
				NEED(1);
				if (mem_read(sm, st[sp - 1], &v))
					return -EFAULT;
				st[sp - 1] = v;
				break;
			case DW_OP_neg: NEED(1); st[sp - 1] = -st[sp - 1]; break;
			case DW_OP_not: NEED(1); st[sp - 1] = ~st[sp - 1]; break;
			case DW_OP_abs: NEED(1); if ((int64_t)st[sp - 1] < 0) st[sp - 1] = -st[sp - 1]; break;
			case DW_OP_nop: break;
			case DW_OP_stack_value: *is_value = true; break;
			case DW_OP_plus: case DW_OP_minus: case DW_OP_and: case DW_OP_or:
			case DW_OP_xor: case DW_OP_mul: case DW_OP_shl: case DW_OP_shr:
			case DW_OP_shra: case DW_OP_ge: case DW_OP_gt: case DW_OP_le:
			case DW_OP_lt: case DW_OP_eq: case DW_OP_ne: {
				uint64_t b, c;

				NEED(2);
				b = st[--sp];
				c = st[sp - 1];
				switch (a) {
				case DW_OP_plus: c += b; break;
				case DW_OP_minus: c -= b; break;
				case DW_OP_and: c &= b; break;
				case DW_OP_or: c |= b; break;
				case DW_OP_xor: c ^= b; break;
				case DW_OP_mul: c *= b; break;
				case DW_OP_shl: c = b < 64 ? c << b : 0; break;
				case DW_OP_shr: c = b < 64 ? c >> b : 0; break;
				case DW_OP_shra: c = b < 64 ? (uint64_t)((int64_t)c >> b) : 0; break;
				case DW_OP_ge: c = (int64_t)c >= (int64_t)b; break;
				case DW_OP_gt: c = (int64_t)c > (int64_t)b; break;
				case DW_OP_le: c = (int64_t)c <= (int64_t)b; break;
				case DW_OP_lt: c = (int64_t)c < (int64_t)b; break;
				case DW_OP_eq: c = c == b; break;
				case DW_OP_ne: c = c != b; break;
				}
				st[sp - 1] = c;
				break;
			}
			default:
				return -EOPNOTSUPP;
			}
		}
	}
#undef PUSH
#undef NEED
	if (sp < 1)
		return -EINVAL;
	*out = st[sp - 1];
	return 0;
}

/* The CFI frame for @vaddr (an ELF vaddr) of @m; caller frees. */
static Dwarf_Frame *cfi_frame(struct module *m, uint64_t vaddr)
{
	Dwarf_Frame *f = NULL;

	module_cfi(m);
	if (m->eh_cfi && dwarf_cfi_addrframe(m->eh_cfi, vaddr - m->eh_bias, &f) == 0)
		return f;
	if (m->dw_cfi && dwarf_cfi_addrframe(m->dw_cfi, vaddr - m->dw_bias, &f) == 0)
		return f;
	return NULL;
}

/*
 * One step with CFI: compute the caller's registers. 1 = outermost frame (RA undefined),
 * 0 = stepped, <0 = CFI could not be evaluated.
 */
static int cfi_step(Dwarf_Frame *f, const struct uregs *r, const struct stackmem *sm,
		    struct uregs *caller, uint64_t *cfa_out, uint64_t *ra_slot)
{
	static const unsigned saved[] = { R_RA, R_RBP, R_RBX, R_R12, 13, 14, R_R15 };
	Dwarf_Op *ops, ops_mem[3];
	size_t nops;
	uint64_t cfa;
	bool isval;
	int err;

	if (dwarf_frame_cfa(f, &ops, &nops) != 0 || !nops)
		return -EINVAL;
	err = eval_ops(ops, nops, r, sm, 0, false, &cfa, &isval);
	if (err)
		return err;
	*cfa_out = cfa;
	*caller = (struct uregs){ 0 };
	*ra_slot = 0;
	for (size_t i = 0; i < sizeof(saved) / sizeof(saved[0]); i++) {
		unsigned reg = saved[i];
		uint64_t v, loc;

		if (dwarf_frame_register(f, reg, ops_mem, &ops, &nops) != 0)
			return -EINVAL;
		if (nops == 0) {
			if (ops == NULL && reg != R_RA && !reg_get(r, reg, &v)) { /* same value */
				caller->v[reg] = v;
				caller->known |= 1u << reg;
			}
			if (reg == R_RA && ops != NULL)
				return 1; /* undefined return address: the outermost frame */
			if (reg == R_RA)
				return -EINVAL;
			continue;
		}
		err = eval_ops(ops, nops, r, sm, cfa, true, &loc, &isval);
		if (err) {
			if (reg == R_RA)
				return err;
			continue;
		}
		if (isval) {
			v = loc;
		} else {
			if (mem_read(sm, loc, &v)) {
				if (reg == R_RA)
					return -EFAULT;
				continue;
			}
			if (reg == R_RA)
				*ra_slot = loc;
		}
		caller->v[reg] = v;
		caller->known |= 1u << reg;
	}
	caller->v[R_RSP] = cfa; /* x86-64: the CFA is the caller's sp */
	caller->known |= 1u << R_RSP;
	return 0;
}

int ffm_stack__unwind(struct ffm_symbolizer *s, struct ffm_addr_space *as,
		      const struct ffm_stack_snapshot *snap, struct ffm_frame *frames, size_t max)
{
	struct stackmem sm = { snap->sp, snap->sp + snap->stack_len, snap->stack };
	struct uregs r = { 0 };
	size_t n = 0;

	if (!max || !snap->ip)
		return -EINVAL;
	r.v[R_RA] = snap->ip;
	r.v[R_RSP] = snap->sp;
	r.v[R_RBP] = snap->bp;
	r.known = 1u << R_RA | 1u << R_RSP | 1u << R_RBP;
	while (n < max) {
		uint64_t pc = r.v[R_RA], lookup = n ? pc - 1 : pc, cfa = 0, slot = 0;
		const struct ffm_map *map;
		struct module *m = NULL;
		struct uregs caller;
		Dwarf_Frame *f = NULL;
		int st = -ENOENT;

		frames[n] = (struct ffm_frame){ pc, 0, 0, n ? frames[n].how : FFM_FRAME_IP };
		n++;
		map = ffm_addr_space__find(as, lookup);
		if (map && module_for_map(s, as, map, &m) == 0) {
			uint64_t vaddr;

			if (ffm_elf_offset_to_vaddr(m->elf, lookup - map->start + map->offset, &vaddr) == 0 &&
			    (f = cfi_frame(m, vaddr))) {
				st = cfi_step(f, &r, &sm, &caller, &cfa, &slot);
				free(f);
			}
		}
		if (st == 1)
			break; /* outermost */
		if (st == 0 && (caller.known & (1u << R_RA))) {
			if (n < max)
				frames[n].how = FFM_FRAME_CFI;
		} else {
			/* No CFI here: the rbp chain (ra at bp+8, saved bp at bp). */
			uint64_t bp, nbp, ra;

			if (reg_get(&r, R_RBP, &bp) || bp < r.v[R_RSP] || mem_read(&sm, bp + 8, &ra) ||
			    mem_read(&sm, bp, &nbp))
				break;
			caller = (struct uregs){ 0 };
			caller.v[R_RA] = ra;
			caller.v[R_RBP] = nbp;
			caller.v[R_RSP] = bp + 16;
			caller.known = 1u << R_RA | 1u << R_RBP | 1u << R_RSP;
			cfa = bp + 16;
			slot = bp + 8;
			if (n < max)
				frames[n].how = FFM_FRAME_FP;
		}
		frames[n - 1].cfa = cfa;
		/* The stack must grow towards higher addresses as we go out: no loops. */
		if (!caller.v[R_RA] || caller.v[R_RSP] <= r.v[R_RSP])
			break;
		frames[n - 1].ra_slot = slot;
		r = caller;
	}
	return (int)n;
}
