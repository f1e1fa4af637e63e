/* SPDX-License-Identifier: MIT */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"
#include "symbols/elfutil.h"
#include "symbols/ffm_driver.h"
#include "symbols/ffm_maps.h"

struct ffm_driver {
	struct ffm_elf *elf;
	char *path;
	char version[64];
	uint64_t dev, ino;
	size_t nsyms;
	struct ffm_driver_sym *syms; /* sorted by name; names point into the mapped file */
};

/* ------------------------------------------------------------------ ld.so.cache */

struct ld_new_hdr {
	char magic[17];
	char version[3];
	uint32_t nlibs, len_strings;
	uint8_t flags, pad[3];
	uint32_t ext_off, unused[3];
};
struct ld_new_entry {
	int32_t flags;
	uint32_t key, value, osversion;
	uint64_t hwcap;
};

static int read_whole(const char *path, char **buf, size_t *len)
{
	int fd = ffm_open_regular(path); /* a container's ld.so.cache is its user's file */
	struct stat st;
	char *b;
	size_t got = 0;

	if (fd < 0)
		return fd;
	if (fstat(fd, &st) < 0 || st.st_size > (64 << 20)) {
		int err = st.st_size > (64 << 20) ? -EFBIG : -errno;

		close(fd);
		return err;
	}
	b = malloc(st.st_size + 1);
	if (!b) {
		close(fd);
		return -ENOMEM;
	}
	while (got < (size_t)st.st_size) {
		ssize_t r = read(fd, b + got, st.st_size - got);

		if (r <= 0)
			break;
		got += r;
	}
	close(fd);
	b[got] = 0;
	*buf = b;
	*len = got;
	return 0;
}

int ffm_ld_cache_lookup(const char *cache_path, const char *soname, char ***paths, size_t *n)
{
	char *buf = NULL, **out = NULL;
	size_t len = 0, cnt = 0, cap = 0, base = 0;
	const struct ld_new_hdr *h;
	int err;

	*paths = NULL;
	*n = 0;
	err = read_whole(cache_path, &buf, &len);
	if (err)
		return err;
	if (len >= 16 && !memcmp(buf, "ld.so-1.7.0", 11)) {
		uint32_t nold;

		memcpy(&nold, buf + 12, 4);
		base = 16 + (size_t)nold * 12;
		base = (base + 7) & ~(size_t)7;
	}
	if (base + sizeof(*h) > len || memcmp(buf + base, "glibc-ld.so.cache1.1", 20)) {
		free(buf);
		return -EINVAL;
	}
	h = (const struct ld_new_hdr *)(buf + base);
	if (h->nlibs > (len - base - sizeof(*h)) / sizeof(struct ld_new_entry)) {
		free(buf);
		return -EINVAL;
	}
	for (uint32_t i = 0; i < h->nlibs; i++) {
		struct ld_new_entry e;
		const char *key, *val;

		memcpy(&e, buf + base + sizeof(*h) + i * sizeof(e), sizeof(e));
		if (base + e.key >= len || base + e.value >= len)
			continue;
		key = buf + base + e.key;
		val = buf + base + e.value;
		if (strcmp(key, soname))
			continue;
		if (FFM_GROW(out, cap, cnt + 1) || !(out[cnt] = strdup(val))) {
			for (size_t j = 0; j < cnt; j++)
				free(out[j]);
			free(out);
			free(buf);
			return -ENOMEM;
		}
		cnt++;
	}
	free(buf);
	*paths = out;
	*n = cnt;
	return 0;
}

int ffm_driver_version_from_name(const char *name, char *buf, size_t len)
{
	const char *b = strrchr(name, '/'), *v;
	bool dot = false;

	b = b ? b + 1 : name;
	if (strncmp(b, "libcuda.so.", 11))
		return -ENOENT;
	v = b + 11;
	if (!isdigit((unsigned char)*v))
		return -ENOENT;
	for (const char *p = v; *p; p++) {
		if (*p == '.')
			dot = true;
		else if (!isdigit((unsigned char)*p))
			return -ENOENT;
	}
	if (!dot) /* "libcuda.so.1" is the soname, not a version */
		return -ENOENT;
	snprintf(buf, len, "%s", v);
	return 0;
}

/* ------------------------------------------------------------------ lists */

struct ffm_driver_list *ffm_driver_list__free(struct ffm_driver_list *l)
{
	if (!l)
		return NULL;
	for (size_t i = 0; i < l->n; i++) {
		free(l->locs[i].path);
		free(l->locs[i].open_path);
	}
	free(l->locs);
	free(l);
	return NULL;
}

static int list_add(struct ffm_driver_list *l, const char *path, const char *open_path,
		    uint64_t dev, uint64_t ino, pid_t pid, bool deleted)
{
	struct ffm_driver_loc *nl, *loc;

	for (size_t i = 0; i < l->n; i++)
		if (l->locs[i].ino == ino && l->locs[i].dev == dev)
			return 0; /* one file, several names */
	nl = realloc(l->locs, (l->n + 1) * sizeof(*nl));
	if (!nl)
		return -ENOMEM;
	l->locs = nl;
	loc = &nl[l->n];
	memset(loc, 0, sizeof(*loc));
	loc->path = strdup(path);
	loc->open_path = strdup(open_path);
	if (!loc->path || !loc->open_path) {
		free(loc->path);
		free(loc->open_path);
		return -ENOMEM;
	}
	loc->dev = dev;
	loc->ino = ino;
	loc->pid = pid;
	loc->deleted = deleted;
	ffm_elf_build_id_of(open_path, loc->build_id, sizeof(loc->build_id));
	l->n++;
	return 0;
}

static int add_system_path(struct ffm_driver_list *l, const char *root, const char *path)
{
	char full[PATH_MAX];
	struct stat st;

	snprintf(full, sizeof(full), "%s%s", strcmp(root, "/") ? root : "", path);
	if (stat(full, &st) < 0 || !S_ISREG(st.st_mode))
		return 0;
	return list_add(l, path, full, st.st_dev, st.st_ino, 0, false);
}

int ffm_driver_find_system(const struct ffm_driver_find_opts *opts, struct ffm_driver_list **ret)
{
	static const char *const dirs[] = { "/usr/local/nvidia/lib64", "/usr/lib/x86_64-linux-gnu",
					    "/usr/lib64", "/usr/lib", "/usr/lib/wsl/lib" };
	const char *root = opts && opts->root ? opts->root : "/";
	char cache[PATH_MAX], **paths = NULL;
	size_t n = 0;
	struct ffm_driver_list *l;
	int err = 0;

	*ret = NULL;
	l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	if (opts && opts->ld_cache)
		snprintf(cache, sizeof(cache), "%s", opts->ld_cache);
	else
		snprintf(cache, sizeof(cache), "%s/etc/ld.so.cache", strcmp(root, "/") ? root : "");
	/* A missing or unreadable cache is not an error: the directories still count. */
	if (ffm_ld_cache_lookup(cache, "libcuda.so.1", &paths, &n) == 0) {
		for (size_t i = 0; i < n && !err; i++)
			err = add_system_path(l, root, paths[i]);
		for (size_t i = 0; i < n; i++)
			free(paths[i]);
		free(paths);
	}
	for (size_t i = 0; !err && !(opts && opts->no_default_dirs) && i < sizeof(dirs) / sizeof(dirs[0]);
	     i++) {
		char p[PATH_MAX];

		snprintf(p, sizeof(p), "%s/libcuda.so.1", dirs[i]);
		err = add_system_path(l, root, p);
	}
	if (err) {
		ffm_driver_list__free(l);
		return err;
	}
	*ret = l;
	return 0;
}

enum ffm_module_owner ffm_module_owner(const char *path)
{
	static const char *const nvidia[] = {
		"libcudart.so", "libcublas.so", "libcublasLt.so", "libcudnn", "libnccl.so",
		"libcufft.so", "libcurand.so", "libcusparse.so", "libcusolver.so", "libnvrtc.so",
		"libnvJitLink.so", "libcupti.so", "libnvToolsExt.so", "libnvshmem",
	};
	const char *b = path ? strrchr(path, '/') : NULL;

	b = b ? b + 1 : path;
	if (!b)
		return FFM_MODULE_OTHER;
	if (!strncmp(b, "libcuda.so", 10))
		return FFM_MODULE_DRIVER;
	for (size_t i = 0; i < sizeof(nvidia) / sizeof(nvidia[0]); i++)
		if (!strncmp(b, nvidia[i], strlen(nvidia[i])))
			return FFM_MODULE_NVIDIA;
	return FFM_MODULE_OTHER;
}

int ffm_driver_find_in_process(pid_t pid, const struct ffm_driver_find_opts *opts,
			       struct ffm_driver_list **ret)
{
	const char *proc = opts && opts->proc_root ? opts->proc_root : "/proc";
	char mp[PATH_MAX];
	struct ffm_map *maps;
	size_t n;
	struct ffm_driver_list *l;
	int err;

	*ret = NULL;
	snprintf(mp, sizeof(mp), "%s/%d/maps", proc, (int)pid);
	err = ffm_maps_parse(mp, &maps, &n);
	if (err)
		return err;
	l = calloc(1, sizeof(*l));
	if (!l) {
		ffm_maps_free(maps, n);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n && !err; i++) {
		const struct ffm_map *m = &maps[i];
		char cand[2][PATH_MAX];
		bool found = false;

		if (!m->path || !m->ino || m->path[0] != '/' || ffm_module_owner(m->path) != FFM_MODULE_DRIVER)
			continue;
		/* map_files/ sees the mapped file even when deleted or in another namespace. */
		snprintf(cand[0], sizeof(cand[0]), "%s/%d/map_files/%" PRIx64 "-%" PRIx64, proc,
			 (int)pid, m->start, m->end);
		snprintf(cand[1], sizeof(cand[1]), "%s/%d/root%s", proc, (int)pid, m->path);
		for (int c = 0; c < 2 && !found; c++) {
			struct stat st;

			if (stat(cand[c], &st) < 0 || (uint64_t)st.st_ino != m->ino)
				continue;
			err = list_add(l, m->path, cand[c], m->dev, m->ino, pid, m->deleted);
			found = true;
		}
	}
	ffm_maps_free(maps, n);
	if (err) {
		ffm_driver_list__free(l);
		return err;
	}
	*ret = l;
	return 0;
}

/* ------------------------------------------------------------------ one driver */

static int sym_cmp(const void *a, const void *b)
{
	const struct ffm_driver_sym *x = a, *y = b;
	int c = strcmp(x->name, y->name);

	return c ? c : (x->vaddr > y->vaddr) - (x->vaddr < y->vaddr);
}

static int load_dynsym(struct ffm_driver *d)
{
	Elf_Scn *scn = NULL;
	size_t cap = 0;

	while ((scn = elf_nextscn(d->elf->elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *data;
		size_t cnt;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNSYM || !sh.sh_entsize)
			continue;
		data = elf_getdata(scn, NULL);
		if (!data)
			return -ENOEXEC;
		cnt = sh.sh_size / sh.sh_entsize;
		for (size_t i = 0; i < cnt; i++) {
			GElf_Sym s;
			const char *name;
			uint64_t off;

			if (!gelf_getsym(data, i, &s) || s.st_shndx == SHN_UNDEF ||
			    (GELF_ST_TYPE(s.st_info) != STT_FUNC &&
			     GELF_ST_TYPE(s.st_info) != STT_GNU_IFUNC))
				continue;
			name = elf_strptr(d->elf->elf, sh.sh_link, s.st_name);
			if (!name || strncmp(name, "cu", 2))
				continue;
			if (ffm_elf_vaddr_to_offset(d->elf, s.st_value, &off) < 0)
				continue;
			if (FFM_GROW(d->syms, cap, d->nsyms + 1))
				return -ENOMEM;
			d->syms[d->nsyms++] = (struct ffm_driver_sym){ name, off, s.st_value, s.st_size };
		}
		break;
	}
	if (!d->elf->has_dynsym)
		return -ENODATA;
	if (d->nsyms) /* NULL when no cu* function is exported: qsort(NULL, 0) is UB */
		qsort(d->syms, d->nsyms, sizeof(*d->syms), sym_cmp);
	/* Several symbol versions of one name at one address: keep one. */
	size_t w = 0;
	for (size_t i = 0; i < d->nsyms; i++)
		if (!w || strcmp(d->syms[w - 1].name, d->syms[i].name) ||
		    d->syms[w - 1].vaddr != d->syms[i].vaddr)
			d->syms[w++] = d->syms[i];
	d->nsyms = w;
	return 0;
}

int ffm_driver__open(const char *path, const struct ffm_driver_opts *opts, struct ffm_driver **ret)
{
	const char *disp = opts && opts->display_path ? opts->display_path : path;
	struct ffm_driver *d;
	struct stat st;
	int err;

	*ret = NULL;
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	err = ffm_elf_open(path, &d->elf);
	if (err)
		goto fail;
	if (fstat(d->elf->fd, &st) == 0) {
		d->dev = st.st_dev;
		d->ino = st.st_ino;
	}
	d->path = strdup(disp);
	if (!d->path) {
		err = -ENOMEM;
		goto fail;
	}
	/* The version: from the file name the symlinks lead to, else from the name given. */
	for (int i = 0; i < 3 && !d->version[0]; i++) {
		char *name = i < 2 ? realpath(i ? disp : path, NULL) : strdup(disp);

		if (name)
			ffm_driver_version_from_name(name, d->version, sizeof(d->version));
		free(name);
	}
	if (!d->version[0])
		snprintf(d->version, sizeof(d->version), "unknown");
	err = load_dynsym(d);
	if (err)
		goto fail;
	*ret = d;
	return 0;
fail:
	ffm_driver__free(d);
	return err;
}

struct ffm_driver *ffm_driver__free(struct ffm_driver *d)
{
	if (!d)
		return NULL;
	free(d->syms);
	free(d->path);
	ffm_elf_close(d->elf);
	free(d);
	return NULL;
}

const char *ffm_driver__path(const struct ffm_driver *d) { return d->path; }
const char *ffm_driver__build_id(const struct ffm_driver *d) { return d->elf->build_id; }
const char *ffm_driver__version(const struct ffm_driver *d) { return d->version; }

void ffm_driver__dev_ino(const struct ffm_driver *d, uint64_t *dev, uint64_t *ino)
{
	*dev = d->dev;
	*ino = d->ino;
}

/* The index of the first symbol whose name is >= @name (d->nsyms: none). */
static size_t first_ge(const struct ffm_driver *d, const char *name)
{
	size_t lo = 0, hi = d->nsyms;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (strcmp(d->syms[mid].name, name) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

int ffm_driver__lookup(const struct ffm_driver *d, const char *name, struct ffm_driver_sym *sym)
{
	size_t lo = first_ge(d, name);

	if (lo < d->nsyms && !strcmp(d->syms[lo].name, name)) {
		*sym = d->syms[lo];
		return 0;
	}
	return -ENOENT;
}

size_t ffm_driver__sym_count(const struct ffm_driver *d) { return d->nsyms; }

int ffm_driver__sym(const struct ffm_driver *d, size_t i, struct ffm_driver_sym *sym)
{
	if (i >= d->nsyms)
		return -ERANGE;
	*sym = d->syms[i];
	return 0;
}

/* Is @rest a variant suffix: ("_v" digits)? ("_ptds" | "_ptsz")? */
static bool variant_suffix(const char *rest)
{
	if (!strncmp(rest, "_v", 2) && isdigit((unsigned char)rest[2])) {
		rest += 2;
		while (isdigit((unsigned char)*rest))
			rest++;
	}
	if (!strcmp(rest, "_ptds") || !strcmp(rest, "_ptsz"))
		return true;
	return *rest == 0;
}

int ffm_driver__variants(const struct ffm_driver *d, const char *base, struct ffm_driver_sym *syms,
			 size_t max)
{
	size_t bl = strlen(base);
	int cnt = 0;

	for (size_t i = first_ge(d, base); i < d->nsyms && !strncmp(d->syms[i].name, base, bl); i++) {
		if (!variant_suffix(d->syms[i].name + bl))
			continue;
		if ((size_t)cnt < max)
			syms[cnt] = d->syms[i];
		cnt++;
	}
	return cnt;
}

int ffm_driver__func_at(const struct ffm_driver *d, uint64_t vaddr, struct ffm_func_range *r)
{
	uint64_t start, size;
	int err = ffm_elf_fde_lookup(d->elf, vaddr, &start, &size);

	if (err)
		return err;
	r->entry_vaddr = start;
	r->size = size;
	return ffm_elf_vaddr_to_offset(d->elf, start, &r->entry_offset);
}

int ffm_driver__func_at_offset(const struct ffm_driver *d, uint64_t offset,
			       struct ffm_func_range *r)
{
	uint64_t vaddr;
	int err = ffm_elf_offset_to_vaddr(d->elf, offset, &vaddr);

	return err ? err : ffm_driver__func_at(d, vaddr, r);
}

int ffm_driver__vaddr_to_offset(const struct ffm_driver *d, uint64_t vaddr, uint64_t *offset)
{
	return ffm_elf_vaddr_to_offset(d->elf, vaddr, offset);
}

int ffm_driver__offset_to_vaddr(const struct ffm_driver *d, uint64_t offset, uint64_t *vaddr)
{
	return ffm_elf_offset_to_vaddr(d->elf, offset, vaddr);
}
