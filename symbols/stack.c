/* SPDX-License-Identifier: MIT */
/*
 * Address spaces, modules (one libdwfl Dwfl per module file, addresses = ELF vaddrs), the
 * symbol cache and the CFI unwinder. See ffm_stack.h for the contract.
 *
 * Files a process's user names (ffmd runs as root): every file opened for a process's module
 * is opened by symbols/useropen.h as that process's user (fs credentials kept from its status
 * when the address space is made), regular files only, without blocking past a deadline:
 *   - the module: /proc/PID/map_files/<range> (the mapped file itself), else its path inside
 *     the process's root (an O_PATH fd of /proc/PID/root kept by the address space, so also
 *     after the process exits; same inode as maps says), else its path in ffmd's own
 *     namespace, accepted only when device and inode both are what maps says;
 *   - its separate debug file: libdwfl's standard find_debuginfo (a plain open as root of the
 *     paths .gnu_debuglink names) is replaced by find_debuginfo below: the build-id under the
 *     debug directories, then the debuglink candidates (the binary's directory, its .debug/,
 *     /usr/lib/debug/<directory>), inside the process's root, each accepted only when its
 *     build-id is the module's (or, for a module without one, its CRC32 is the debuglink's);
 *     a dwz alt file the same way by the build-id .gnu_debugaltlink gives;
 *   - libdw's own lookups, which open as root with a plain open (a dwz alt file it was not
 *     given, split DWARF .dwo files), are never reached: a module whose DWARF would need
 *     either is used without DWARF (symbols from its symbol tables only).
 * symbolize_file's paths come from ffm's own caller and are opened with root's rights (still
 * regular files only, without blocking).
 */
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "common/oatab.h"
#include "symbols/elfutil.h"
#include "symbols/ffm_driver.h"
#include "symbols/ffm_stack.h"
#include "symbols/useropen.h"

/* ------------------------------------------------------------------ address space */

struct ffm_addr_space {
	pid_t pid;
	char *maps_path;
	char *proc_root;
	struct ffm_map *maps; /* file-backed only, sorted by start */
	size_t n;
	uint64_t last_miss_refresh_ns;
	struct ffm_user user; /* whose rights its files are opened with */
	int rootfd;           /* O_PATH of the process's root directory, -1 when unknown */
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

/*
 * ffmd's own root, opened once: a process whose root is the same mount and directory shares it
 * (an fd per address space would be one per process a job ever ran).
 */
static int host_root = -1;
static struct statx host_root_stx;
static pthread_once_t host_root_once = PTHREAD_ONCE_INIT;

static void host_root_open(void)
{
	int fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);

	if (fd >= 0 &&
	    statx(fd, "", AT_EMPTY_PATH, STATX_INO | STATX_MNT_ID, &host_root_stx) == 0 &&
	    (host_root_stx.stx_mask & STATX_MNT_ID))
		host_root = fd;
	else if (fd >= 0)
		close(fd);
}

/* @fd (an O_PATH of a process's root, taken) or the shared host root when it is the same. */
static int root_fd(int fd)
{
	struct statx stx;

	pthread_once(&host_root_once, host_root_open);
	if (fd >= 0 && host_root >= 0 &&
	    statx(fd, "", AT_EMPTY_PATH, STATX_INO | STATX_MNT_ID, &stx) == 0 &&
	    (stx.stx_mask & STATX_MNT_ID) && stx.stx_mnt_id == host_root_stx.stx_mnt_id &&
	    stx.stx_ino == host_root_stx.stx_ino &&
	    stx.stx_dev_major == host_root_stx.stx_dev_major &&
	    stx.stx_dev_minor == host_root_stx.stx_dev_minor) {
		close(fd);
		return host_root;
	}
	return fd;
}

static void root_close(int fd)
{
	if (fd >= 0 && fd != host_root)
		close(fd);
}

static int root_dup(int fd)
{
	return fd < 0 || fd == host_root ? fd : fcntl(fd, F_DUPFD_CLOEXEC, 3);
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
	as->rootfd = -1;
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
	/* Unreadable credentials: nobody's rights (never root's). */
	ffm_user_of_pid(proc, pid, &as->user);
	snprintf(p, sizeof(p), "%s/%d/root", proc, (int)pid);
	as->rootfd = root_fd(open(p, O_PATH | O_DIRECTORY | O_CLOEXEC));
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
	root_close(as->rootfd);
	free(as->maps_path);
	free(as->proc_root);
	free(as);
	return NULL;
}

/* ------------------------------------------------------------------ modules */

struct module {
	char *path;
	uint64_t dev, ino;
	uint64_t file_dev; /* the device fstat gave (maps' may be an overlay's) */
	struct ffm_elf *elf;
	/* Whose rights its debug files are looked up with, and where (see the top comment). */
	struct ffm_symbolizer *s;
	struct ffm_user user;
	int rootfd; /* a dup of the address space's, -1: ffmd's own namespace */
	bool debug_tried;
	char *debug_dir;  /* directory of the debug file found (its dwz alt file may be there) */
	char *alt_name;   /* .gnu_debugaltlink of the file with the DWARF, NULL when none */
	char alt_id[FFM_BUILD_ID_HEX_MAX];
	bool alt_found, dw_checked, dw_safe;
	Dwfl *dwfl;
	Dwfl_Module *mod;
	bool cfi_done;
	Dwarf_CFI *eh_cfi, *dw_cfi;
	Dwarf_Addr eh_bias, dw_bias;
	int err; /* a module that could not be opened: remembered, not retried (but see retry_due) */
	uint64_t err_ns;
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
	root_close(m->rootfd);
	free(m->debug_dir);
	free(m->alt_name);
	free(m->syms);
	ffm_elf_close(m->elf);
	free(m->path);
	free(m);
	return NULL;
}

static int find_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname,
			  Dwarf_Addr base, const char *file_name, const char *debuglink,
			  GElf_Word crc, char **debuginfo_file_name);
static int no_find_elf(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
		       char **file_name, Elf **elfp);

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
	s->cb.find_elf = no_find_elf;
	s->cb.find_debuginfo = find_debuginfo;
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

/* ------------------------------------------------------------------ debug files */

static struct module *module_new(void)
{
	struct module *m = calloc(1, sizeof(*m));

	if (m)
		m->rootfd = -1;
	return m;
}

/* Open @path (a path of the process's namespace) as the module's user. */
static int open_in_proc(const struct module *m, const char *path, struct stat *st)
{
	if (m->rootfd >= 0)
		return ffm_user_open(&m->user, m->rootfd, path, FFM_UOPEN_IN_ROOT, st);
	return ffm_user_open(&m->user, AT_FDCWD, path, 0, st);
}

static void to_hex(const uint8_t *id, size_t len, char *hex, size_t cap)
{
	hex[0] = 0;
	for (size_t i = 0; i < len && 2 * i + 2 < cap; i++)
		snprintf(hex + 2 * i, 3, "%02x", id[i]);
}

/* .gnu_debugaltlink of @elf: the alt file's name and build-id (hex). */
static void elf_altlink(Elf *elf, char **name, char *idhex)
{
	size_t shstrndx;
	Elf_Scn *scn = NULL;

	*name = NULL;
	idhex[0] = 0;
	if (elf_getshdrstrndx(elf, &shstrndx) < 0)
		return;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		const char *sname;
		Elf_Data *d;
		const char *nul;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS ||
		    !(sname = elf_strptr(elf, shstrndx, sh.sh_name)) ||
		    strcmp(sname, ".gnu_debugaltlink") || !(d = elf_rawdata(scn, NULL)) ||
		    !d->d_buf || !(nul = memchr(d->d_buf, 0, d->d_size)))
			continue;
		to_hex((const uint8_t *)nul + 1, d->d_size - (size_t)(nul + 1 - (char *)d->d_buf),
		       idhex, FFM_BUILD_ID_HEX_MAX);
		*name = strdup(d->d_buf);
		return;
	}
}

static uint32_t file_crc(int fd)
{
	unsigned char buf[1 << 16];
	uLong crc = crc32(0, NULL, 0);
	off_t off = 0;
	ssize_t n;

	while ((n = pread(fd, buf, sizeof(buf), off)) > 0) {
		crc = crc32(crc, buf, (uInt)n);
		off += n;
	}
	return (uint32_t)crc;
}

/*
 * Whether the file at @fd is the one wanted: its build-id is @id (hex) when @id is set, else
 * its CRC32 is @crc. An accepted debug file's dwz alt link is recorded in @m.
 */
static bool debug_matches(struct module *m, int fd, const char *id, uint32_t crc, bool debug)
{
	Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	char hex[FFM_BUILD_ID_HEX_MAX];
	const void *bid;
	ssize_t n;
	bool ok;

	if (!e)
		return false;
	n = elf_kind(e) == ELF_K_ELF ? dwelf_elf_gnu_build_id(e, &bid) : -1;
	hex[0] = 0;
	if (n > 0)
		to_hex(bid, (size_t)n, hex, sizeof(hex));
	if (elf_kind(e) != ELF_K_ELF)
		ok = false;
	else if (id && *id)
		ok = !strcmp(hex, id);
	else
		ok = file_crc(fd) == crc;
	if (ok && debug) {
		free(m->alt_name);
		elf_altlink(e, &m->alt_name, m->alt_id);
	}
	elf_end(e);
	return ok;
}

/* Try one candidate: fd when accepted (*out = its name), else -1. */
static int try_debug(struct module *m, const char *path, bool in_proc, const char *id,
		     uint32_t crc, bool debug, char **out)
{
	struct stat st;
	int fd = in_proc ? open_in_proc(m, path, &st)
			 : ffm_user_open(&m->user, AT_FDCWD, path, 0, &st);

	if (fd < 0)
		return -1;
	/* the module itself is not its own debug file */
	if (((uint64_t)st.st_ino == m->ino && (uint64_t)st.st_dev == m->file_dev) ||
	    !debug_matches(m, fd, id, crc, debug)) {
		close(fd);
		return -1;
	}
	*out = strdup(path);
	if (!*out) {
		close(fd);
		return -1;
	}
	return fd;
}

/* The debug directories of the configuration (elfutils syntax), one at a time. */
static const char *next_dir(const char **p, char *buf, size_t len)
{
	const char *c = *p, *end;

	if (!c)
		return NULL;
	end = strchr(c, ':');
	snprintf(buf, len, "%.*s", (int)(end ? end - c : (ptrdiff_t)strlen(c)), c);
	*p = end ? end + 1 : NULL;
	return buf[0] == '+' || buf[0] == '-' ? buf + 1 : buf;
}

/* By build-id under the absolute debug directories: the process's root first, then ffmd's. */
static int find_by_build_id(struct module *m, const char *id, bool debug, char **out)
{
	char buf[PATH_MAX], path[PATH_MAX];
	const char *p = m->s->debuginfo_path, *d;
	int fd;

	if (strlen(id) < 4)
		return -1;
	while ((d = next_dir(&p, buf, sizeof(buf)))) {
		if (d[0] != '/')
			continue;
		snprintf(path, sizeof(path), "%s/.build-id/%.2s/%s.debug", d, id, id + 2);
		if ((fd = try_debug(m, path, true, id, 0, debug, out)) >= 0)
			return fd;
		if (m->rootfd >= 0 && (fd = try_debug(m, path, false, id, 0, debug, out)) >= 0)
			return fd;
	}
	return -1;
}

/* The .gnu_debuglink candidates: next to the binary, in its .debug/, under /usr/lib/debug. */
static int find_by_debuglink(struct module *m, const char *link, uint32_t crc, char **out)
{
	char buf[PATH_MAX], dir[PATH_MAX], path[PATH_MAX];
	const char *p = m->s->debuginfo_path, *d, *slash = strrchr(m->path, '/');
	int fd;

	if (!slash || strchr(link, '/'))
		return -1;
	snprintf(dir, sizeof(dir), "%.*s", (int)(slash - m->path), m->path);
	while ((d = next_dir(&p, buf, sizeof(buf)))) {
		int n;

		if (!d[0])
			n = snprintf(path, sizeof(path), "%s/%s", dir, link);
		else if (d[0] != '/')
			n = snprintf(path, sizeof(path), "%s/%s/%s", dir, d, link);
		else
			n = snprintf(path, sizeof(path), "%s%s/%s", d, dir, link);
		if (n < 0 || (size_t)n >= sizeof(path))
			continue;
		if ((fd = try_debug(m, path, true, m->elf->build_id, crc, true, out)) >= 0)
			return fd;
	}
	return -1;
}

/* A dwz alt file: by its build-id, else by its name (relative: to the debug file's directory). */
static int find_alt(struct module *m, char **out)
{
	char path[PATH_MAX];
	int fd = find_by_build_id(m, m->alt_id, false, out);

	if (fd < 0 && m->alt_id[0] && (m->alt_name[0] == '/' || m->debug_dir)) {
		if (m->alt_name[0] == '/')
			snprintf(path, sizeof(path), "%s", m->alt_name);
		else
			snprintf(path, sizeof(path), "%s/%s", m->debug_dir, m->alt_name);
		fd = try_debug(m, path, true, m->alt_id, 0, false, out);
	}
	m->alt_found = fd >= 0;
	return fd;
}

/*
 * libdwfl's find_debuginfo callback (libdwfl.h): it owns the fd returned and frees
 * *debuginfo_file_name; -1 with errno when nothing fits (then *debuginfo_file_name must stay
 * NULL, or libdwfl opens that name itself). Also called for the dwz alt file of the file that
 * has the DWARF (the alt file's name, CRC 0).
 */
static int find_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname,
			  Dwarf_Addr base, const char *file_name, const char *debuglink,
			  GElf_Word crc, char **debuginfo_file_name)
{
	struct module *m = userdata ? *userdata : NULL;
	char *name = NULL, *slash;
	int fd = -1;

	(void)mod, (void)modname, (void)base, (void)file_name;
	if (!m)
		goto none;
	if (crc == 0 && debuglink && m->alt_name && !strcmp(debuglink, m->alt_name)) {
		fd = find_alt(m, &name);
		goto out;
	}
	if (m->debug_tried)
		goto none;
	m->debug_tried = true;
	if (m->elf->build_id[0])
		fd = find_by_build_id(m, m->elf->build_id, true, &name);
	if (fd < 0 && debuglink)
		fd = find_by_debuglink(m, debuglink, crc, &name);
	if (fd >= 0 && (slash = strrchr(name, '/')))
		m->debug_dir = strndup(name, (size_t)(slash - name));
out:
	if (fd >= 0) {
		*debuginfo_file_name = name;
		return fd;
	}
none:
	errno = ENOENT;
	return -1;
}

/* libdwfl never needs to find a module's main file: each is reported with its fd. */
static int no_find_elf(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
		       char **file_name, Elf **elfp)
{
	(void)mod, (void)userdata, (void)modname, (void)base, (void)file_name, (void)elfp;
	errno = ENOENT;
	return -1;
}

/*
 * Whether the module's DWARF may be used: libdw looks up a dwz alt file it was not given and
 * split DWARF (.dwo) files itself, with a plain open as root; such a module goes without.
 */
static bool module_dwarf_safe(struct module *m)
{
	Dwarf_Addr bias;
	Dwarf *dw;
	Dwarf_CU *cu = NULL;
	uint8_t ut;

	if (m->dw_checked)
		return m->dw_safe;
	m->dw_checked = true;
	dw = dwfl_module_getdwarf(m->mod, &bias); /* runs find_debuginfo */
	root_close(m->rootfd);
	m->rootfd = -1;
	if (!dw)
		return false;
	{
		const char *alt;
		const void *id;

		if (dwelf_dwarf_gnu_debugaltlink(dw, &alt, &id) > 0 && !m->alt_found)
			return false;
	}
	while (dwarf_get_units(dw, cu, &cu, NULL, &ut, NULL, NULL) == 0)
		if (ut == DW_UT_skeleton || ut == DW_UT_split_compile || ut == DW_UT_split_type)
			return false;
	m->dw_safe = true;
	return true;
}

/* ------------------------------------------------------------------ module files */

#define MODULE_RETRY_NS (10ull * 1000000000ull)

/* A module over @fd (taken), opened for @u with the process root @rootfd (-1: ffmd's own). */
static int module_open(struct ffm_symbolizer *s, int fd, const char *path, const struct stat *st,
		       const struct ffm_user *u, int rootfd, struct module **ret)
{
	struct module *m = module_new();
	void **ud;
	int err, fd2;

	*ret = NULL;
	if (!m) {
		close(fd);
		return -ENOMEM;
	}
	m->dev = m->file_dev = st->st_dev;
	m->ino = st->st_ino;
	m->s = s;
	m->user = *u;
	m->rootfd = root_dup(rootfd);
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
	elf_altlink(m->elf->elf, &m->alt_name, m->alt_id);
	dwfl_report_begin(m->dwfl);
	/* base 0 + add_p_vaddr: module addresses are the ELF file's own vaddrs (bias 0). */
	m->mod = dwfl_report_elf(m->dwfl, path, path, fd2, 0, true);
	dwfl_report_end(m->dwfl, NULL, NULL);
	if (!m->mod) {
		module_free(m);
		return -ENOEXEC;
	}
	/* find_debuginfo's userdata */
	if (dwfl_module_info(m->mod, &ud, NULL, NULL, NULL, NULL, NULL, NULL))
		*ud = m;
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

/*
 * The mapped file, as the process's user: map_files while the process lives, else its path
 * in the process's root (same inode), else in ffmd's namespace (same device and inode).
 */
static int open_mapped(const struct ffm_addr_space *as, const struct ffm_map *map,
		       struct stat *st)
{
	char p[PATH_MAX];
	int err = -ENOENT;

	for (int c = 0; c < 3; c++) {
		int fd;

		if (c == 0) {
			snprintf(p, sizeof(p), "%s/%d/map_files/%" PRIx64 "-%" PRIx64,
				 as->proc_root, (int)as->pid, map->start, map->end);
			fd = ffm_user_open(&as->user, AT_FDCWD, p, FFM_UOPEN_MAGICLINKS, st);
		} else if (c == 1) {
			if (as->rootfd < 0)
				continue;
			fd = ffm_user_open(&as->user, as->rootfd, map->path, FFM_UOPEN_IN_ROOT, st);
		} else {
			fd = ffm_user_open(&as->user, AT_FDCWD, map->path, 0, st);
		}
		if (fd < 0) {
			if (err == -ENOENT)
				err = fd;
			continue;
		}
		/* maps' dev may be the overlay's while fstat gives the lower one: ino in the
		 * process's own view; in ffmd's namespace both must match */
		if ((uint64_t)st->st_ino == map->ino &&
		    (c < 2 || (uint64_t)st->st_dev == map->dev))
			return fd;
		close(fd); /* replaced on disk: not the mapped file */
	}
	return err;
}

/*
 * A failed module's slot when it is time to try again: a file system that did not answer in
 * time (or too many stuck opens) may answer later; other failures are final.
 */
static struct module **retry_due(struct ffm_symbolizer *s, size_t i)
{
	struct module *m = s->mods[i];

	if (m->err != -ETIMEDOUT && m->err != -EAGAIN)
		return NULL;
	if (now_ns() - m->err_ns < MODULE_RETRY_NS)
		return NULL;
	return &s->mods[i];
}

/* The module of a mapping; opened (and cached per dev/ino) on first use. */
static int module_for_map(struct ffm_symbolizer *s, const struct ffm_addr_space *as,
			  const struct ffm_map *map, struct module **ret)
{
	struct module **failed = NULL;
	struct stat st;
	struct module *m;
	int err, fd;

	if (s->last && s->last->dev == map->dev && s->last->ino == map->ino && !s->last->err) {
		*ret = s->last;
		return 0;
	}
	for (size_t i = 0; i < s->nmods; i++) {
		m = s->mods[i];
		/* maps' dev may be the overlay's while stat gives the lower one: ino + path. */
		if (m->ino == map->ino && (m->dev == map->dev || !strcmp(m->path, map->path))) {
			if (m->err && !(failed = retry_due(s, i)))
				return m->err;
			if (m->err)
				break;
			s->last = m;
			*ret = m;
			return 0;
		}
	}
	fd = open_mapped(as, map, &st);
	err = fd < 0 ? fd : module_open(s, fd, map->path, &st, &as->user, as->rootfd, &m);
	if (!err) {
		m->dev = map->dev; /* identify by what maps says */
		if (failed) {
			module_free(*failed);
			*failed = m;
		} else if ((err = add_module(s, m))) {
			module_free(m);
			return err;
		}
		s->last = m;
		*ret = m;
		return 0;
	}
	/* Remember the failure so a stack full of its pcs does not retry each time. */
	if (failed) {
		(*failed)->err = err;
		(*failed)->err_ns = now_ns();
	} else if ((m = module_new())) {
		m->dev = map->dev;
		m->ino = map->ino;
		m->path = strdup(map->path);
		m->err = err;
		m->err_ns = now_ns();
		if (!m->path || add_module(s, m))
			module_free(m);
	}
	return err;
}

/* A file ffm's own caller names: root's rights, still regular files only, never blocking. */
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
	fd = ffm_user_open(&ffm_user_root, AT_FDCWD, path, FFM_UOPEN_MAGICLINKS, &st);
	if (fd < 0)
		return fd;
	err = module_open(s, fd, path, &st, &ffm_user_root, -1, &m);
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
	if (!name && !s->no_lines && module_dwarf_safe(m)) {
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
	if (!s->no_lines && module_dwarf_safe(m)) {
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

/* The stack a DWARF expression is evaluated on. */
struct dwstack {
	uint64_t v[16];
	int n;
};

static int dw_push(struct dwstack *s, uint64_t x)
{
	if (s->n >= 16)
		return -E2BIG;
	s->v[s->n++] = x;
	return 0;
}

/* Pushes what a register, the CFA or a constant operator names (@is_value set for a register):
 * 0, -ENODATA (a register not known), -EINVAL (no CFA), -E2BIG, or 1 when @op is none of them. */
static int dw_push_op(struct dwstack *s, const Dwarf_Op *op, const struct uregs *r, uint64_t cfa,
		      bool have_cfa, bool *is_value)
{
	uint8_t a = op->atom;
	uint64_t v;
	int err;

	if (a >= DW_OP_lit0 && a <= DW_OP_lit31)
		return dw_push(s, a - DW_OP_lit0);
	if (a >= DW_OP_breg0 && a <= DW_OP_breg31)
		return reg_get(r, a - DW_OP_breg0, &v) ? -ENODATA : dw_push(s, v + (int64_t)op->number);
	if (a == DW_OP_bregx)
		return reg_get(r, op->number, &v) ? -ENODATA : dw_push(s, v + (int64_t)op->number2);
	if ((a >= DW_OP_reg0 && a <= DW_OP_reg31) || a == DW_OP_regx) {
		if (reg_get(r, a == DW_OP_regx ? op->number : (uint64_t)(a - DW_OP_reg0), &v))
			return -ENODATA;
		err = dw_push(s, v);
		if (!err)
			*is_value = true;
		return err;
	}
	switch (a) {
	case DW_OP_call_frame_cfa:
		return have_cfa ? dw_push(s, cfa) : -EINVAL;
	case DW_OP_addr: case DW_OP_const1u: case DW_OP_const2u: case DW_OP_const4u:
	case DW_OP_const8u: case DW_OP_constu:
		return dw_push(s, op->number);
	case DW_OP_const1s: case DW_OP_const2s: case DW_OP_const4s:
	case DW_OP_const8s: case DW_OP_consts:
		return dw_push(s, (uint64_t)(int64_t)op->number);
	default:
		return 1;
	}
}

/* @c (below the top) and @b (the top) combined by the binary operator @a. */
static uint64_t dw_binary(uint8_t a, uint64_t c, uint64_t b)
{
	switch (a) {
	case DW_OP_plus: return c + b;
	case DW_OP_minus: return c - b;
	case DW_OP_and: return c & b;
	case DW_OP_or: return c | b;
	case DW_OP_xor: return c ^ b;
	case DW_OP_mul: return c * b;
	case DW_OP_shl: return b < 64 ? c << b : 0;
	case DW_OP_shr: return b < 64 ? c >> b : 0;
	case DW_OP_shra: return b < 64 ? (uint64_t)((int64_t)c >> b) : 0;
	case DW_OP_ge: return (int64_t)c >= (int64_t)b;
	case DW_OP_gt: return (int64_t)c > (int64_t)b;
	case DW_OP_le: return (int64_t)c <= (int64_t)b;
	case DW_OP_lt: return (int64_t)c < (int64_t)b;
	case DW_OP_eq: return c == b;
	case DW_OP_ne: return c != b;
	}
	return c;
}

/* Applies an operator on the entries at the top of @s (@is_value set by DW_OP_stack_value):
 * 0, -EINVAL (too few entries), -E2BIG, -EFAULT (an address outside @sm), -EOPNOTSUPP. */
static int dw_stack_op(struct dwstack *s, const Dwarf_Op *op, const struct stackmem *sm,
		       bool *is_value)
{
	uint64_t *top = s->n ? &s->v[s->n - 1] : NULL, v;
	uint8_t a = op->atom;
	int need;

	switch (a) {
	case DW_OP_nop: return 0;
	case DW_OP_stack_value: *is_value = true; return 0;
	case DW_OP_plus_uconst: case DW_OP_dup: case DW_OP_drop: case DW_OP_deref:
	case DW_OP_neg: case DW_OP_not: case DW_OP_abs:
		need = 1;
		break;
	case DW_OP_over: case DW_OP_swap:
	case DW_OP_plus: case DW_OP_minus: case DW_OP_and: case DW_OP_or:
	case DW_OP_xor: case DW_OP_mul: case DW_OP_shl: case DW_OP_shr:
	case DW_OP_shra: case DW_OP_ge: case DW_OP_gt: case DW_OP_le:
	case DW_OP_lt: case DW_OP_eq: case DW_OP_ne:
		need = 2;
		break;
	default:
		return -EOPNOTSUPP;
	}
	if (s->n < need)
		return -EINVAL;
	switch (a) {
	case DW_OP_plus_uconst: *top += op->number; return 0;
	case DW_OP_dup: return dw_push(s, *top);
	case DW_OP_drop: s->n--; return 0;
	case DW_OP_over: return dw_push(s, top[-1]);
	case DW_OP_swap: v = *top; *top = top[-1]; top[-1] = v; return 0;
	case DW_OP_deref: return mem_read(sm, *top, top) ? -EFAULT : 0;
	case DW_OP_neg: *top = -*top; return 0;
	case DW_OP_not: *top = ~*top; return 0;
	case DW_OP_abs: if ((int64_t)*top < 0) *top = -*top; return 0;
	default:
		s->n--;
		top[-1] = dw_binary(a, top[-1], *top);
		return 0;
	}
}

/*
 * Evaluate a DWARF expression as libdw hands out CFA and register rules. *is_value says whether
 * the result is a value (DW_OP_stack_value, register) or a location to read.
 */
static int eval_ops(const Dwarf_Op *ops, size_t nops, const struct uregs *r,
		    const struct stackmem *sm, uint64_t cfa, bool have_cfa, uint64_t *out,
		    bool *is_value)
{
	struct dwstack s = { .n = 0 };

	*is_value = false;
	for (size_t i = 0; i < nops; i++) {
		int err = dw_push_op(&s, &ops[i], r, cfa, have_cfa, is_value);

		if (err == 1)
			err = dw_stack_op(&s, &ops[i], sm, is_value);
		if (err)
			return err;
	}
	if (s.n < 1)
		return -EINVAL;
	*out = s.v[s.n - 1];
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
