/* SPDX-License-Identifier: MIT */
/*
 * symbols/ffm_stack.h after a process exits (issue 38 defect 9c): the symbolizer may then open
 * a mapped file's path only where it is still the very file maps named. A process in a mount
 * namespace of its own maps D/lib from a tmpfs there; after it exits, D/lib in ffm's namespace
 * is another file on another tmpfs with the same inode number (fresh tmpfs instances number
 * their first files alike). It must not be taken for the mapped one. Needs root.
 */
#include <sched.h>
#include <stdbool.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "symbols/ffm_stack.h"
#include "tests/testutil.h"

static int copy(const char *from, const char *to)
{
	char cmd[1200];

	snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", from, to);
	return system(cmd) == 0 ? 0 : -1;
}

/* The child: its own mount namespace, a tmpfs on @d, a copy of itself mapped from there. */
static void child(const char *d, int ready)
{
	char lib[600];
	int fd;
	void *p;

	if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
	    mount("ffm-a", d, "tmpfs", 0, "size=16m") < 0)
		_exit(1);
	snprintf(lib, sizeof(lib), "%s/lib", d);
	if (copy("/proc/self/exe", lib) < 0 || (fd = open(lib, O_RDONLY)) < 0)
		_exit(1);
	p = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
	if (p == MAP_FAILED)
		_exit(1);
	if (write(ready, &p, sizeof(p)) != sizeof(p))
		_exit(1);
	pause();
	_exit(0);
}

TEST(exited_process_same_inode_other_device)
{
	char d[256], lib[600], used[600] = "";
	struct ffm_addr_space *as = NULL;
	struct ffm_symbolizer *s = NULL;
	const struct ffm_sym *sym;
	struct stat st;
	void *addr = NULL;
	int pfd[2], err;
	bool same_dev = false;
	pid_t pid;

	if (geteuid() != 0)
		SKIP("needs root (mount namespaces, tmpfs)");
	snprintf(d, sizeof(d), "/tmp/ffm-test-exited-XXXXXX");
	ASSERT(mkdtemp(d));
	ASSERT_OK(pipe(pfd));
	pid = fork();
	ASSERT(pid >= 0);
	if (pid == 0)
		child(d, pfd[1]);
	close(pfd[1]);
	if (read(pfd[0], &addr, sizeof(addr)) != sizeof(addr)) {
		waitpid(pid, NULL, 0);
		rmdir(d);
		SKIP("the child could not mount a tmpfs in a namespace of its own");
	}
	close(pfd[0]);
	ASSERT_OK(ffm_symbolizer__new(NULL, &s));
	ASSERT_OK(ffm_addr_space__new(pid, NULL, &as));
	/* Here: another tmpfs on d (mounted while the child's lives: another device number), its
	 * first file another program with the same inode number. */
	ASSERT_OK(mount("ffm-b", d, "tmpfs", 0, "size=16m"));
	snprintf(lib, sizeof(lib), "%s/lib", d);
	err = copy("/bin/true", lib);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	if (!err && stat(lib, &st) == 0) {
		const struct ffm_map *m = ffm_addr_space__find(as, (uint64_t)addr);

		if (!m || m->ino != (uint64_t)st.st_ino) {
			umount2(d, MNT_DETACH);
			rmdir(d);
			SKIP("the two tmpfs instances numbered their files differently");
		}
		same_dev = m->dev == (uint64_t)st.st_dev;
		err = ffm_symbolizer__symbolize(s, as, (uint64_t)addr + 16, false, &sym);
		if (!err)
			snprintf(used, sizeof(used), "%s", sym->module);
	}
	umount2(d, MNT_DETACH);
	rmdir(d);
	ffm_addr_space__free(as);
	ffm_symbolizer__free(s);
	ASSERT(!same_dev);
	ASSERT_MSG(err < 0, "symbolized through another file with the same inode (%s)", used);
}

TEST_MAIN()
