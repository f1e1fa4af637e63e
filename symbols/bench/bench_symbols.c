/* SPDX-License-Identifier: MIT */
/*
 * bench_symbols: symbolization throughput of symbols/ffm_stack.h.
 *
 *   bench_symbols [-n FRAMES] [FILE...]
 *
 * Spreads FRAMES distinct file offsets (default 100000) evenly over the executable segments
 * of the given files (default: libc.so.6, whose DWARF comes from its separate debug file in
 * /usr/lib/debug when libc6-dbg is installed, libstdc++ (symbols only), and the -g builds of
 * this tree: ffmctl and the simulated driver's unstripped libcuda), symbolizes each once
 * (unique frames: symbol, demangling, folding, file:line) and then all again (cached frames).
 */
#include <errno.h>
#include <gelf.h>
#include <fcntl.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "symbols/ffm_stack.h"

struct seg {
	const char *path;
	uint64_t off, size;
};

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int exec_segments(const char *path, struct seg *out, int max)
{
	int fd = open(path, O_RDONLY), n = 0;
	Elf *e;
	size_t phnum;

	if (fd < 0)
		return -errno;
	elf_version(EV_CURRENT);
	e = elf_begin(fd, ELF_C_READ, NULL);
	if (!e || elf_getphdrnum(e, &phnum) < 0) {
		close(fd);
		return -ENOEXEC;
	}
	for (size_t i = 0; i < phnum && n < max; i++) {
		GElf_Phdr ph;

		if (gelf_getphdr(e, i, &ph) && ph.p_type == PT_LOAD && (ph.p_flags & PF_X))
			out[n++] = (struct seg){ path, ph.p_offset, ph.p_filesz };
	}
	elf_end(e);
	close(fd);
	return n;
}

int main(int argc, char **argv)
{
	static const char *defaults[] = { "/usr/lib/x86_64-linux-gnu/libc.so.6",
					  "/usr/lib/x86_64-linux-gnu/libstdc++.so.6",
					  "build/ffmctl", "build/fakecuda/libcuda.so.1.unstripped" };
	const char **files = defaults;
	int nfiles = sizeof(defaults) / sizeof(defaults[0]), nseg = 0, opt;
	long frames = 100000;
	struct seg segs[64];
	uint64_t total = 0, named = 0, lines = 0, hits, misses;
	struct ffm_symbolizer *s;
	size_t mods;
	double t0, t1, t2;

	while ((opt = getopt(argc, argv, "n:")) != -1) {
		if (opt == 'n')
			frames = atol(optarg);
		else {
			fprintf(stderr, "usage: %s [-n FRAMES] [FILE...]\n", argv[0]);
			return 2;
		}
	}
	if (optind < argc) {
		files = (const char **)argv + optind;
		nfiles = argc - optind;
	}
	for (int i = 0; i < nfiles; i++) {
		int n = exec_segments(files[i], segs + nseg, 64 - nseg);

		if (n < 0) {
			fprintf(stderr, "bench_symbols: %s: %s, skipping\n", files[i], strerror(-n));
			continue;
		}
		for (int k = 0; k < n; k++)
			total += segs[nseg + k].size;
		nseg += n;
	}
	if (!total || frames <= 0) {
		fprintf(stderr, "bench_symbols: nothing to symbolize\n");
		return 1;
	}
	if (ffm_symbolizer__new(NULL, &s)) {
		fprintf(stderr, "bench_symbols: out of memory\n");
		return 1;
	}
	for (int pass = 0; pass < 2; pass++) {
		double ts = now();
		long done = 0;

		for (int i = 0; i < nseg; i++) {
			/* This segment's share of the frames, at distinct offsets. */
			long n = (long)((double)frames * segs[i].size / total + 0.5);
			uint64_t stride = n ? segs[i].size / n : 0;

			if (i == nseg - 1)
				n = frames - done;
			if (!stride)
				stride = 1;
			for (long k = 0; k < n && (uint64_t)k * stride < segs[i].size; k++, done++) {
				const struct ffm_sym *sym;

				if (ffm_symbolizer__symbolize_file(s, segs[i].path,
								   segs[i].off + k * stride, false,
								   &sym))
					continue;
				if (pass)
					continue;
				named += sym->function != NULL;
				lines += sym->line > 0;
			}
		}
		if (pass == 0) {
			t1 = now() - ts;
			t0 = (double)done;
		} else {
			t2 = now() - ts;
		}
	}
	ffm_symbolizer__stats(s, &hits, &misses, &mods);
	printf("files: %d (%d executable segments, %.1f MiB of code)\n", nfiles, nseg,
	       total / 1048576.0);
	printf("unique frames: %.0f in %.3f s = %.0f frames/s (%.1f%% named, %.1f%% with file:line)\n",
	       t0, t1, t0 / t1, 100.0 * named / t0, 100.0 * lines / t0);
	printf("cached frames: %.0f in %.3f s = %.0f frames/s\n", t0, t2, t0 / t2);
	printf("cache: %llu hits, %llu misses, %zu modules\n", (unsigned long long)hits,
	       (unsigned long long)misses, mods);
	ffm_symbolizer__free(s);
	return 0;
}
