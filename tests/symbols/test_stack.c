/* SPDX-License-Identifier: MIT */
/*
 * symbols/ffm_stack.h: maps parsing, address spaces, in-process CFI unwinding of a snapshot
 * (this file is compiled with -fomit-frame-pointer, see symbols/symbols.mk), symbolization,
 * demangling and folding, and the errors for unusable files and processes.
 */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>

#include "symbols/ffm_maps.h"
#include "symbols/ffm_stack.h"
#include "tests/testutil.h"

/* ------------------------------------------------------------------ helpers */

static char tmpdir[256];

static const char *mktmp(void)
{
	if (!tmpdir[0]) {
		snprintf(tmpdir, sizeof(tmpdir), "/tmp/ffm-test-stack-XXXXXX");
		if (!mkdtemp(tmpdir))
			FAIL("mkdtemp: %s", strerror(errno));
	}
	return tmpdir;
}

static void write_file(const char *path, const void *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	ASSERT(fd >= 0);
	ASSERT_EQ(write(fd, data, len), (long long)len);
	close(fd);
}

/* ------------------------------------------------------------------ maps */

TEST(maps_fixture)
{
	char path[512];
	const char *fx =
		"55d0c0a00000-55d0c0a02000 r--p 00000000 fd:01 1234                       /usr/bin/app\n"
		"55d0c0a02000-55d0c0a05000 r-xp 00002000 fd:01 1234                       /usr/bin/app\n"
		"55d0c1000000-55d0c1021000 rw-p 00000000 00:00 0                          [heap]\n"
		"7f0000000000-7f0000001000 rw-p 00000000 00:00 0 \n"
		"7f0000100000-7f0000200000 r-xp 00010000 08:02 777                        /opt/my libs/lib cuda.so.1 (deleted)\n"
		"7f0000300000-7f0000301000 rw-s 00000000 00:05 99                         /dev/zero (deleted)\n"
		"7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0                          [stack]\n";
	struct ffm_map *m;
	size_t n;

	snprintf(path, sizeof(path), "%s/maps1", mktmp());
	write_file(path, fx, strlen(fx));
	ASSERT_OK(ffm_maps_parse(path, &m, &n));
	ASSERT_EQ(n, 7);
	ASSERT_EQ(m[1].start, 0x55d0c0a02000ull);
	ASSERT_EQ(m[1].offset, 0x2000);
	ASSERT_EQ(m[1].prot, FFM_MAP_R | FFM_MAP_X);
	ASSERT_EQ(m[1].dev, makedev(0xfd, 1));
	ASSERT_EQ(m[1].ino, 1234);
	ASSERT_STREQ(m[1].path, "/usr/bin/app");
	ASSERT_STREQ(m[2].path, "[heap]");
	ASSERT(m[3].path == NULL);
	ASSERT_STREQ(m[4].path, "/opt/my libs/lib cuda.so.1");
	ASSERT(m[4].deleted);
	ASSERT_EQ(m[4].dev, makedev(8, 2));
	ASSERT(m[5].prot & FFM_MAP_SHARED);
	ASSERT(m[5].deleted);
	ASSERT(!m[1].deleted);
	ffm_maps_free(m, n);

	/* Address space over the fixture: only file-backed mappings, lookups by address. */
	struct ffm_addr_space *as;
	struct ffm_addr_space_opts o = { .sz = sizeof(o), .maps_path = path };
	const struct ffm_map *f;

	ASSERT_OK(ffm_addr_space__new(1, &o, &as));
	ASSERT_EQ(ffm_addr_space__count(as), 4);
	f = ffm_addr_space__find(as, 0x55d0c0a03000ull);
	ASSERT(f && f->offset == 0x2000);
	f = ffm_addr_space__find(as, 0x7f0000150000ull);
	ASSERT(f && !strcmp(f->path, "/opt/my libs/lib cuda.so.1"));
	ASSERT(ffm_addr_space__find(as, 0x55d0c1000010ull) == NULL); /* heap: anonymous */
	ffm_addr_space__free(as);
	ffm_addr_space__free(NULL);
}

TEST(maps_malformed)
{
	char path[512];
	struct ffm_map *m;
	size_t n;

	snprintf(path, sizeof(path), "%s/maps2", mktmp());
	write_file(path, "not a maps line\n", 16);
	ASSERT_EQ(ffm_maps_parse(path, &m, &n), -EINVAL);
	snprintf(path, sizeof(path), "%s/nonexistent", mktmp());
	ASSERT_EQ(ffm_maps_parse(path, &m, &n), -ESRCH);
}

TEST(addr_space_errors)
{
	struct ffm_addr_space *as;
	pid_t pid = fork();
	int st;

	/* A process that no longer exists. */
	ASSERT(pid >= 0);
	if (pid == 0)
		_exit(0);
	waitpid(pid, &st, 0);
	ASSERT_EQ(ffm_addr_space__new(pid, NULL, &as), -ESRCH);
	ASSERT(as == NULL);
	ASSERT_EQ(ffm_addr_space__new(-5, NULL, &as), -ESRCH);
	if (geteuid() != 0) {
		/* init's maps are not ours to read. */
		ASSERT_EQ(ffm_addr_space__new(1, NULL, &as), -EACCES);
	}
}

/* ------------------------------------------------------------------ names */

TEST(fold_table)
{
	static const struct {
		const char *in, *out;
	} t[] = {
		{ "void ns::f<int, std::vector<float> >(int)", "ns::f" },
		{ "std::vector<int, std::allocator<int> >::push_back(int const&)", "std::vector::push_back" },
		{ "bool operator< <int>(A<int> const&, A<int> const&)", "operator<" },
		{ "std::ostream& operator<< <char>(std::ostream&, X const&)", "operator<<" },
		{ "ns::A::operator<<(int)", "ns::A::operator<<" },
		{ "ns::B::operator>>=(int)", "ns::B::operator>>=" },
		{ "ns::A::operator->() const", "ns::A::operator->" },
		{ "ns::A::operator()(int) const", "ns::A::operator()" },
		{ "ns::A<int>::operator int() const", "ns::A::operator int" },
		{ "ns::A::operator bool() const &&", "ns::A::operator bool" },
		{ "operator new(unsigned long)", "operator new" },
		{ "ns::A::operator delete[](void*)", "ns::A::operator delete[]" },
		{ "int& ns::A::operator&()", "ns::A::operator&" },
		{ "ns::f(int)::{lambda(int)#1}::operator()(int) const", "ns::f::{lambda#1}::operator()" },
		{ "(anonymous namespace)::g(int)", "(anonymous namespace)::g" },
		{ "std::function<void (int)>::operator()(int) const", "std::function::operator()" },
		{ "a::B<a::C<a::D<int> >, 3>::run<true>(a::E<1>&)", "a::B::run" },
		{ "ns::X<(ns::E)0>::f()", "ns::X::f" },
		{ "unsigned long ns::g<long>(long)", "ns::g" },
		{ "ns::f<int>() [clone .cold]", "ns::f" },
		{ "ns::foo[abi:cxx11](int)", "ns::foo" },
		{ "main", "main" },
		{ "cuCtxSynchronize", "cuCtxSynchronize" },
		{ "foo(int)", "foo" },
	};
	char buf[256];

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		ASSERT_OK(ffm_fold_function(t[i].in, buf, sizeof(buf)));
		ASSERT_MSG(!strcmp(buf, t[i].out), "fold(\"%s\") = \"%s\", want \"%s\"", t[i].in, buf,
			   t[i].out);
	}
	ASSERT_EQ(ffm_fold_function("ns::very_long_name", buf, 4), -ENOSPC);
}

TEST(demangle)
{
	char *d = ffm_demangle("_ZN2ns1fIiSt6vectorIfSaIfEEEEvi");
	char buf[256];

	ASSERT(d);
	ASSERT_STREQ(d, "void ns::f<int, std::vector<float, std::allocator<float> > >(int)");
	ASSERT_OK(ffm_fold_function(d, buf, sizeof(buf)));
	ASSERT_STREQ(buf, "ns::f");
	free(d);
	d = ffm_demangle("_ZlsRSoRK1X");
	ASSERT_STREQ(d, "operator<<(std::ostream&, X const&)");
	free(d);
	ASSERT(ffm_demangle("main") == NULL);
	ASSERT(ffm_demangle("_Znot a name") == NULL);
	ASSERT(ffm_demangle(NULL) == NULL);
}

/* ------------------------------------------------------------------ in-process unwinding */

struct capture {
	uint64_t ip, sp, bp;
	uint8_t stack[16384];
	size_t len;
};

static uint64_t stack_top(uint64_t sp)
{
	pthread_attr_t a;
	void *addr;
	size_t size;

	if (pthread_getattr_np(pthread_self(), &a))
		return sp + 4096;
	pthread_attr_getstack(&a, &addr, &size);
	pthread_attr_destroy(&a);
	return (uint64_t)(uintptr_t)addr + size;
}

static int capture_line;
static int level2_line;
static int level1_line;

/* Copies the stack as the BPF program does, whole: under ASan it holds the redzones of the
 * frames above, which an instrumented copy (or memcpy's interceptor) reports as overflows. */
static __attribute__((noinline, no_sanitize_address)) void copy_stack(uint8_t *dst, uint64_t sp,
								      size_t len)
{
	const volatile uint8_t *src = (const volatile uint8_t *)(uintptr_t)sp;

	for (size_t i = 0; i < len; i++)
		dst[i] = src[i];
}

static __attribute__((noinline)) void capture_regs(struct capture *c)
{
	uint64_t ip, sp, bp, top;

	capture_line = __LINE__ + 1;
	__asm__ volatile("lea 0(%%rip), %0\n\tmov %%rsp, %1\n\tmov %%rbp, %2"
			 : "=r"(ip), "=r"(sp), "=r"(bp));
	c->ip = ip;
	c->sp = sp;
	c->bp = bp;
	top = stack_top(sp);
	c->len = top - sp < sizeof(c->stack) ? top - sp : sizeof(c->stack);
	copy_stack(c->stack, sp, c->len);
	__asm__ volatile("" ::: "memory");
}

static __attribute__((noinline)) int unwind_level2(struct capture *c, int x)
{
	level2_line = __LINE__ + 1;
	capture_regs(c);
	__asm__ volatile("" ::: "memory");
	return x + 1;
}

static __attribute__((noinline)) int unwind_level1(struct capture *c, int x)
{
	int r;

	level1_line = __LINE__ + 1;
	r = unwind_level2(c, x * 3);
	__asm__ volatile("" ::: "memory");
	return r + 2;
}

TEST(unwind_in_process)
{
	static struct capture c;
	struct ffm_symbolizer *s;
	struct ffm_addr_space *as;
	struct ffm_frame f[64];
	const struct ffm_sym *sym;
	int n, idx[3] = { -1, -1, -1 };
	static const char *const want[] = { "capture_regs", "unwind_level2", "unwind_level1" };
	const int *lines[] = { &capture_line, &level2_line, &level1_line };

	ASSERT_EQ(unwind_level1(&c, 1), 6);
	ASSERT_OK(ffm_symbolizer__new(NULL, &s));
	ASSERT_OK(ffm_addr_space__new(getpid(), NULL, &as));
	struct ffm_stack_snapshot snap = { getpid(), c.ip, c.sp, c.bp, c.stack, c.len };

	n = ffm_stack__unwind(s, as, &snap, f, 64);
	ASSERT_OK(n);
	ASSERT_MSG(n >= 5, "only %d frames", n);
	for (int i = 0; i < n; i++) {
		int err = ffm_symbolizer__symbolize(s, as, f[i].pc, i > 0, &sym);

		printf("# #%d pc %#" PRIx64 " cfa %#" PRIx64 " slot %#" PRIx64 " how %d %s %s:%d\n", i,
		       f[i].pc, f[i].cfa, f[i].ra_slot, f[i].how, err ? "?" : sym->function,
		       err || !sym->file ? "?" : sym->file, err ? 0 : sym->line);
		if (err || !sym->function)
			continue;
		for (int k = 0; k < 3; k++)
			if (idx[k] < 0 && !strcmp(sym->function, want[k])) {
				idx[k] = i;
				ASSERT_MSG(sym->file && strstr(sym->file, "test_stack.c"), "file of %s",
					   want[k]);
				ASSERT_MSG(sym->line == *lines[k], "%s: line %d, want %d", want[k],
					   sym->line, *lines[k]);
			}
	}
	ASSERT_EQ(idx[0], 0);
	ASSERT_EQ(idx[1], 1);
	ASSERT_EQ(idx[2], 2);
	/* The app's frames were found by CFI, not by frame pointers (there are none here). */
	ASSERT_EQ(f[1].how, FFM_FRAME_CFI);
	ASSERT_EQ(f[2].how, FFM_FRAME_CFI);
	/* Each slot holds the next frame's return address, inside the copied stack. */
	for (int i = 0; i + 1 < n; i++) {
		uint64_t v;

		if (!f[i].ra_slot)
			continue;
		ASSERT(f[i].ra_slot >= c.sp && f[i].ra_slot + 8 <= c.sp + c.len);
		memcpy(&v, c.stack + (f[i].ra_slot - c.sp), 8);
		ASSERT_EQ(v, f[i + 1].pc);
		ASSERT_EQ(f[i].ra_slot, f[i].cfa - 8);
	}
	/* Second lookups come from the cache. */
	uint64_t h0, h1, miss;
	size_t mods;

	ffm_symbolizer__stats(s, &h0, &miss, &mods);
	ASSERT_OK(ffm_symbolizer__symbolize(s, as, f[1].pc, true, &sym));
	ffm_symbolizer__stats(s, &h1, &miss, &mods);
	ASSERT_EQ(h1, h0 + 1);
	ASSERT_STREQ(sym->folded, "unwind_level2");
	ASSERT(sym->build_id[0]);
	ffm_addr_space__free(as);
	ffm_symbolizer__free(s);
}

TEST(unwind_truncated_stack)
{
	static struct capture c;
	struct ffm_symbolizer *s;
	struct ffm_addr_space *as;
	struct ffm_frame f[64];
	int n;

	unwind_level1(&c, 2);
	ASSERT_OK(ffm_symbolizer__new(NULL, &s));
	ASSERT_OK(ffm_addr_space__new(getpid(), NULL, &as));
	/* Only 8 bytes of stack: the first step may still work, then the walk ends cleanly. */
	struct ffm_stack_snapshot snap = { getpid(), c.ip, c.sp, c.bp, c.stack, 8 };
	n = ffm_stack__unwind(s, as, &snap, f, 64);
	ASSERT(n >= 1 && n <= 3);
	struct ffm_stack_snapshot empty = { getpid(), 0, 0, 0, NULL, 0 };
	ASSERT_EQ(ffm_stack__unwind(s, as, &empty, f, 64), -EINVAL);
	ffm_addr_space__free(as);
	ffm_symbolizer__free(s);
}

/* ------------------------------------------------------------------ bad files */

TEST(bad_module_files)
{
	char p[512];
	struct ffm_symbolizer *s;
	const struct ffm_sym *sym;
	int fd;
	struct stat st;
	char *buf;

	ASSERT_OK(ffm_symbolizer__new(NULL, &s));
	snprintf(p, sizeof(p), "%s/notelf", mktmp());
	write_file(p, "hello, this is not an ELF file\n", 31);
	ASSERT_EQ(ffm_stack_check_module(p), -ENOEXEC);
	ASSERT_EQ(ffm_symbolizer__symbolize_file(s, p, 0, false, &sym), -ENOEXEC);

	/* Truncated: the first 2 KiB of this test binary. */
	fd = open("/proc/self/exe", O_RDONLY);
	ASSERT(fd >= 0 && fstat(fd, &st) == 0);
	buf = malloc(st.st_size);
	ASSERT_EQ(read(fd, buf, st.st_size), st.st_size);
	close(fd);
	snprintf(p, sizeof(p), "%s/truncated", mktmp());
	write_file(p, buf, 2048);
	ASSERT_EQ(ffm_stack_check_module(p), -ENOEXEC);
	ASSERT_EQ(ffm_symbolizer__symbolize_file(s, p, 0x1000, false, &sym), -ENOEXEC);
	free(buf);

	/* Stripped of CFI: objcopy removes .eh_frame and .eh_frame_hdr. */
	char cmd[1200], q[512];
	snprintf(q, sizeof(q), "%s/nocfi", mktmp());
	snprintf(cmd, sizeof(cmd),
		 "objcopy --remove-section=.eh_frame --remove-section=.eh_frame_hdr "
		 "--remove-section=.debug_frame /proc/%d/exe %s 2>/dev/null", getpid(), q);
	if (system(cmd) != 0)
		SKIP("objcopy not available");
	ASSERT_EQ(ffm_stack_check_module(q), -ENODATA);
	ASSERT_EQ(ffm_stack_check_module("/nonexistent/file"), -ENOENT);
	ASSERT_OK(ffm_stack_check_module("/proc/self/exe"));
	ffm_symbolizer__free(s);
}

TEST_MAIN()
