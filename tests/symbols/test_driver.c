/* SPDX-License-Identifier: MIT */
/*
 * symbols/ffm_driver.h: exports with file offsets (checked against the bytes the dynamic loader
 * maps), variants, FDE function ranges, version from the file name, ld.so.cache parsing and
 * discovery from fixture roots and /proc files, errors for bad files.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <limits.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>

#include "symbols/ffm_driver.h"
#include "tests/testutil.h"

static char tmpdir[256];

static const char *mktmp(void)
{
	if (!tmpdir[0]) {
		snprintf(tmpdir, sizeof(tmpdir), "/tmp/ffm-test-driver-XXXXXX");
		if (!mkdtemp(tmpdir))
			FAIL("mkdtemp: %s", strerror(errno));
	}
	return tmpdir;
}

static const char *helper(void)
{
	static char p[200];

	snprintf(p, sizeof(p), "%s/tests/symbols/helpers/libcuda.so.1.2.3", ffm_test_build_dir());
	if (access(p, R_OK))
		SKIP("the helper library is not built (make)");
	return p;
}

static void copy_file(const char *from, const char *to)
{
	char cmd[1200];

	snprintf(cmd, sizeof(cmd), "cp -f '%s' '%s'", from, to);
	ASSERT_EQ(system(cmd), 0);
}

static void slurp(const char *path, uint8_t **buf, size_t *len)
{
	FILE *f = fopen(path, "rb");
	struct stat st;

	ASSERT(f && fstat(fileno(f), &st) == 0);
	*buf = malloc(st.st_size);
	ASSERT(*buf && fread(*buf, 1, st.st_size, f) == (size_t)st.st_size);
	*len = st.st_size;
	fclose(f);
}

TEST(exports_and_offsets)
{
	struct ffm_driver *d;
	struct ffm_driver_sym sym, v[8];
	uint8_t *file;
	size_t len;
	void *h;
	const char *p = helper();

	ASSERT_OK(ffm_driver__open(p, NULL, &d));
	ASSERT_STREQ(ffm_driver__version(d), "1.2.3");
	ASSERT_EQ(strlen(ffm_driver__build_id(d)), 40);
	ASSERT_EQ(ffm_driver__sym_count(d), 7);
	ASSERT_EQ(ffm_driver__lookup(d, "notCuda", &sym), -ENOENT);
	ASSERT_EQ(ffm_driver__lookup(d, "cuNothing", &sym), -ENOENT);
	slurp(p, &file, &len);
	h = dlopen(p, RTLD_NOW | RTLD_LOCAL);
	ASSERT_MSG(h, "dlopen: %s", dlerror());
	for (size_t i = 0; i < ffm_driver__sym_count(d); i++) {
		void *mem;

		ASSERT_OK(ffm_driver__sym(d, i, &sym));
		ASSERT(!strncmp(sym.name, "cu", 2));
		/* Linked at 0x200000: addresses are not file offsets. */
		ASSERT(sym.vaddr != sym.offset);
		mem = dlsym(h, sym.name);
		ASSERT(mem);
		ASSERT(sym.offset + 16 <= len);
		ASSERT_MSG(!memcmp(file + sym.offset, mem, 16),
			   "%s: bytes at file offset %#llx differ from the loaded code", sym.name,
			   (unsigned long long)sym.offset);
	}
	ASSERT_EQ(ffm_driver__variants(d, "cuMemcpyDtoH", v, 8), 2);
	ASSERT_STREQ(v[0].name, "cuMemcpyDtoH_v2");
	ASSERT_STREQ(v[1].name, "cuMemcpyDtoH_v2_ptds");
	ASSERT_EQ(ffm_driver__variants(d, "cuMemcpyDtoHAsync", v, 8), 2);
	ASSERT_STREQ(v[1].name, "cuMemcpyDtoHAsync_v2_ptsz");
	ASSERT_EQ(ffm_driver__variants(d, "cuCtxSynchronize", v, 1), 2); /* count beyond max */
	dlclose(h);
	free(file);
	ffm_driver__free(d);
	ffm_driver__free(NULL);
}

TEST(fde_function_ranges)
{
	struct ffm_driver *d;
	struct ffm_driver_sym sym;
	struct ffm_func_range r;

	ASSERT_OK(ffm_driver__open(helper(), NULL, &d));
	for (size_t i = 0; i < ffm_driver__sym_count(d); i++) {
		ASSERT_OK(ffm_driver__sym(d, i, &sym));
		/* Any address inside the function gives its true entry and size. */
		for (uint64_t k = 0; k < sym.size; k += sym.size / 3 + 1) {
			ASSERT_OK(ffm_driver__func_at(d, sym.vaddr + k, &r));
			ASSERT_EQ(r.entry_vaddr, sym.vaddr);
			ASSERT_EQ(r.entry_offset, sym.offset);
			ASSERT_EQ(r.size, sym.size);
		}
		ASSERT_OK(ffm_driver__func_at_offset(d, sym.offset + 1, &r));
		ASSERT_EQ(r.entry_offset, sym.offset);
	}
	ASSERT_EQ(ffm_driver__func_at(d, 0x10, &r), -ENOENT);
	ffm_driver__free(d);
}

/* The address and size of a .symtab function of the unstripped simulated driver. */
static int symtab_lookup(const char *path, const char *name, uint64_t *addr, uint64_t *size)
{
	int fd = open(path, O_RDONLY), found = -ENOENT;
	Elf *e;
	Elf_Scn *scn = NULL;

	if (fd < 0)
		return -errno;
	elf_version(EV_CURRENT);
	e = elf_begin(fd, ELF_C_READ, NULL);
	while (e && (scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		Elf_Data *data;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_SYMTAB)
			continue;
		data = elf_getdata(scn, NULL);
		for (size_t i = 0; data && i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym s;
			const char *n;

			if (gelf_getsym(data, i, &s) && (n = elf_strptr(e, sh.sh_link, s.st_name)) &&
			    !strcmp(n, name)) {
				*addr = s.st_value;
				*size = s.st_size;
				found = 0;
			}
		}
	}
	if (e)
		elf_end(e);
	close(fd);
	return found;
}

TEST(fakecuda_exports_and_wait_fde)
{
	char stripped[512], unstripped[600];
	struct ffm_driver *d;
	struct ffm_driver_sym sym, v[8];
	struct ffm_func_range r;
	uint64_t addr = 0, size = 0, off;

	snprintf(stripped, sizeof(stripped), "%s/fakecuda/libcuda.so.1", ffm_test_build_dir());
	snprintf(unstripped, sizeof(unstripped), "%s.unstripped", stripped);
	if (access(stripped, R_OK) || access(unstripped, R_OK))
		SKIP("simulated driver not built");
	ASSERT_OK(symtab_lookup(unstripped, "fake_wait", &addr, &size));
	ASSERT_OK(ffm_driver__open(stripped, NULL, &d));
	ASSERT(ffm_driver__sym_count(d) > 100);
	ASSERT_OK(ffm_driver__lookup(d, "cuCtxSynchronize_v2", &sym));
	ASSERT(ffm_driver__variants(d, "cuMemcpyDtoH", v, 8) >= 2);
	/* The stripped file still knows the static wait function's extent through its FDE. */
	ASSERT_OK(ffm_driver__func_at(d, addr + size / 2, &r));
	ASSERT_EQ(r.entry_vaddr, addr);
	ASSERT_EQ(r.size, size);
	ASSERT_OK(ffm_driver__vaddr_to_offset(d, addr, &off));
	ASSERT_EQ(r.entry_offset, off);
	ASSERT_STREQ(ffm_driver__version(d), "unknown");
	ffm_driver__free(d);
}

TEST(bad_driver_files)
{
	char p[512];
	struct ffm_driver *d;
	uint8_t *buf;
	size_t len;
	FILE *f;

	snprintf(p, sizeof(p), "%s/notelf.so", mktmp());
	f = fopen(p, "w");
	fputs("this is not ELF\n", f);
	fclose(f);
	ASSERT_EQ(ffm_driver__open(p, NULL, &d), -ENOEXEC);
	ASSERT(d == NULL);
	slurp(helper(), &buf, &len);
	snprintf(p, sizeof(p), "%s/truncated.so", mktmp());
	f = fopen(p, "w");
	fwrite(buf, 1, 1500, f);
	fclose(f);
	free(buf);
	ASSERT_EQ(ffm_driver__open(p, NULL, &d), -ENOEXEC);
	ASSERT_EQ(ffm_driver__open("/nonexistent/libcuda.so.1", NULL, &d), -ENOENT);
}

/* A shared library that exports no cu* function opens with no API symbols (its empty list once
 * went to qsort as NULL: make sanitize). */
TEST(library_without_cu_exports)
{
	const char *lib = "/lib/x86_64-linux-gnu/libz.so.1";
	struct ffm_driver_sym syms[4];
	struct ffm_driver *d = NULL;

	if (access(lib, R_OK))
		SKIP("%s not found", lib);
	ASSERT_OK(ffm_driver__open(lib, NULL, &d));
	ASSERT_EQ(ffm_driver__variants(d, "cuCtxSynchronize", syms, 4), 0);
	ffm_driver__free(d);
}

TEST(version_from_name)
{
	char b[64];

	ASSERT_OK(ffm_driver_version_from_name("/usr/lib/libcuda.so.580.159.04", b, sizeof(b)));
	ASSERT_STREQ(b, "580.159.04");
	ASSERT_OK(ffm_driver_version_from_name("libcuda.so.535.54", b, sizeof(b)));
	ASSERT_STREQ(b, "535.54");
	ASSERT_EQ(ffm_driver_version_from_name("/usr/lib/libcuda.so.1", b, sizeof(b)), -ENOENT);
	ASSERT_EQ(ffm_driver_version_from_name("/usr/lib/libcuda.so", b, sizeof(b)), -ENOENT);
	ASSERT_EQ(ffm_driver_version_from_name("/usr/lib/libcudart.so.12.1", b, sizeof(b)), -ENOENT);
}

/* ------------------------------------------------------------------ discovery */

TEST(ld_cache_system)
{
	char **paths;
	size_t n;

	if (access("/etc/ld.so.cache", R_OK))
		SKIP("no /etc/ld.so.cache");
	ASSERT_OK(ffm_ld_cache_lookup("/etc/ld.so.cache", "libc.so.6", &paths, &n));
	ASSERT(n >= 1);
	ASSERT(strstr(paths[0], "libc.so.6"));
	for (size_t i = 0; i < n; i++)
		free(paths[i]);
	free(paths);
}

/* Write a "glibc-ld.so.cache1.1" file with the given (key, value) entries. */
static void write_ld_cache(const char *path, const char *const *kv, int n, bool old_header)
{
	FILE *f = fopen(path, "wb");
	uint32_t nl = n, strsz = 0, zero = 0;
	size_t base = 0, hdr = 48, ents = 24 * (size_t)n;
	uint32_t off;

	ASSERT(f);
	if (old_header) {
		/* ld.so-1.7.0 with no entries, padded to 8: the new format follows. */
		fwrite("ld.so-1.7.0", 1, 11, f);
		fputc(0, f);
		fwrite(&zero, 4, 1, f);
		base = 16;
	}
	for (int i = 0; i < 2 * n; i++)
		strsz += strlen(kv[i]) + 1;
	fwrite("glibc-ld.so.cache1.1", 1, 20, f);
	fwrite(&nl, 4, 1, f);
	fwrite(&strsz, 4, 1, f);
	for (int i = 0; i < 5; i++)
		fwrite(&zero, 4, 1, f); /* flags+pad, extension offset, unused[3] */
	ASSERT_EQ(ftell(f), (long)(base + hdr));
	off = hdr + ents;
	for (int i = 0; i < n; i++) {
		int32_t flags = 0x0303;
		uint32_t k = off, v;
		uint64_t hw = 0;

		off += strlen(kv[2 * i]) + 1;
		v = off;
		off += strlen(kv[2 * i + 1]) + 1;
		fwrite(&flags, 4, 1, f);
		fwrite(&k, 4, 1, f);
		fwrite(&v, 4, 1, f);
		fwrite(&zero, 4, 1, f);
		fwrite(&hw, 8, 1, f);
	}
	for (int i = 0; i < 2 * n; i++)
		fwrite(kv[i], 1, strlen(kv[i]) + 1, f);
	fclose(f);
}

TEST(discovery_from_fixture_root)
{
	char root[300], p[1200], cache[400];
	static const char *const kv[] = { "libc.so.6", "/lib/libc.so.6", "libcuda.so.1",
					  "/opt/nv/libcuda.so.1", "libcuda.so.1",
					  "/usr/lib64/libcuda.so.1" };
	struct ffm_driver_list *l;
	struct ffm_driver_find_opts o = { .sz = sizeof(o), .root = root, .no_default_dirs = true };
	char **paths;
	size_t n;
	const char *h = helper();

	snprintf(root, sizeof(root), "%s/root", mktmp());
	snprintf(p, sizeof(p), "mkdir -p %s/opt/nv %s/usr/lib64 %s/etc", root, root, root);
	ASSERT_EQ(system(p), 0);
	snprintf(p, sizeof(p), "%s/opt/nv/libcuda.so.1.2.3", root);
	copy_file(h, p);
	/* libcuda.so.1 -> the versioned file; a second name of the same file (hard link). */
	snprintf(p, sizeof(p), "ln -sf libcuda.so.1.2.3 %s/opt/nv/libcuda.so.1 && "
			       "ln -f %s/opt/nv/libcuda.so.1.2.3 %s/usr/lib64/libcuda.so.1",
		 root, root, root);
	ASSERT_EQ(system(p), 0);
	snprintf(cache, sizeof(cache), "%s/etc/ld.so.cache", root);
	write_ld_cache(cache, kv, 3, true);
	ASSERT_OK(ffm_ld_cache_lookup(cache, "libcuda.so.1", &paths, &n));
	ASSERT_EQ(n, 2);
	ASSERT_STREQ(paths[0], "/opt/nv/libcuda.so.1");
	for (size_t i = 0; i < n; i++)
		free(paths[i]);
	free(paths);
	write_ld_cache(cache, kv, 3, false);
	ASSERT_OK(ffm_driver_find_system(&o, &l));
	/* Two names, one inode: one driver. */
	ASSERT_EQ(l->n, 1);
	ASSERT_STREQ(l->locs[0].path, "/opt/nv/libcuda.so.1");
	ASSERT_EQ(strlen(l->locs[0].build_id), 40);
	struct ffm_driver *d;
	ASSERT_OK(ffm_driver__open(l->locs[0].open_path, NULL, &d));
	ASSERT_STREQ(ffm_driver__version(d), "1.2.3"); /* through the symlink */
	ffm_driver__free(d);
	ffm_driver_list__free(l);
	/* A garbage cache: an error from the parser, none from discovery. */
	FILE *f = fopen(cache, "w");
	fputs("garbage", f);
	fclose(f);
	ASSERT_EQ(ffm_ld_cache_lookup(cache, "libcuda.so.1", &paths, &n), -EINVAL);
	ASSERT_OK(ffm_driver_find_system(&o, &l));
	ASSERT_EQ(l->n, 0);
	ffm_driver_list__free(l);
}

TEST(discovery_in_this_process)
{
	struct ffm_driver_list *l;
	void *h;
	char bid[FFM_BUILD_ID_MAX];
	struct ffm_driver *d;
	const char *p = helper();

	h = dlopen(p, RTLD_NOW | RTLD_LOCAL);
	ASSERT(h);
	ASSERT_OK(ffm_driver_find_in_process(getpid(), NULL, &l));
	ASSERT_EQ(l->n, 1);
	ASSERT_EQ(l->locs[0].pid, getpid());
	ASSERT(strstr(l->locs[0].path, "libcuda.so.1.2.3"));
	ASSERT_OK(ffm_driver__open(p, NULL, &d));
	snprintf(bid, sizeof(bid), "%s", ffm_driver__build_id(d));
	ASSERT_STREQ(l->locs[0].build_id, bid);
	ffm_driver__free(d);
	ffm_driver_list__free(l);
	dlclose(h);
}

TEST(discovery_from_fixture_proc)
{
	char proc[512], p[1024], lib[768];
	struct ffm_driver_list *l;
	struct ffm_driver_find_opts o = { .sz = sizeof(o), .proc_root = proc };
	struct stat st;
	FILE *f;

	snprintf(proc, sizeof(proc), "%s/proc", mktmp());
	snprintf(p, sizeof(p), "mkdir -p '%s/4242/root/usr/lib/my dir'", proc);
	ASSERT_EQ(system(p), 0);
	/* The container's library, seen through /proc/PID/root (no map_files in a fixture). */
	snprintf(lib, sizeof(lib), "%s/4242/root/usr/lib/my dir/libcuda.so.1", proc);
	copy_file(helper(), lib);
	ASSERT_EQ(stat(lib, &st), 0);
	snprintf(p, sizeof(p), "%s/4242/maps", proc);
	f = fopen(p, "w");
	fprintf(f, "7f0000000000-7f0000001000 r--p 00000000 %02x:%02x %lu /usr/lib/my dir/libcuda.so.1\n",
		major(st.st_dev), minor(st.st_dev), (unsigned long)st.st_ino);
	fprintf(f, "7f0000001000-7f0000002000 r-xp 00001000 %02x:%02x %lu /usr/lib/my dir/libcuda.so.1\n",
		major(st.st_dev), minor(st.st_dev), (unsigned long)st.st_ino);
	/* Same path, other inode: replaced on disk; not openable as the mapped file. */
	fprintf(f, "7f0000100000-7f0000101000 r-xp 00000000 08:01 99999999 /usr/lib/old/libcuda.so.1 (deleted)\n");
	fprintf(f, "7f0000200000-7f0000201000 rw-p 00000000 00:00 0 \n");
	fclose(f);
	ASSERT_OK(ffm_driver_find_in_process(4242, &o, &l));
	ASSERT_EQ(l->n, 1);
	ASSERT_STREQ(l->locs[0].path, "/usr/lib/my dir/libcuda.so.1");
	ASSERT_STREQ(l->locs[0].open_path, lib);
	ASSERT_EQ(l->locs[0].ino, st.st_ino);
	ASSERT_EQ(strlen(l->locs[0].build_id), 40);
	ffm_driver_list__free(l);
	ASSERT_EQ(ffm_driver_find_in_process(4243, &o, &l), -ESRCH);
	ASSERT(l == NULL);
}

TEST_MAIN()
