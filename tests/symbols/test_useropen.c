/* SPDX-License-Identifier: MIT */
/*
 * symbols/useropen.h: files a job's user names are opened as that user, regular files only,
 * never blocking the caller past the deadline, within a per-user budget of slow opens. Needs
 * root (it switches to other uids).
 */
#include <fcntl.h>
#include <grp.h>
#include <linux/fuse.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <time.h>

#include "symbols/useropen.h"
#include "tests/testutil.h"

#define NOBODY 65534u
#define GROUP 65533u /* a group nobody is not in, unless given */

static char dir[256];

static void setup(void)
{
	if (geteuid() != 0)
		SKIP("needs root (switches fs credentials)");
	if (dir[0])
		return;
	snprintf(dir, sizeof(dir), "/tmp/ffm-test-useropen-XXXXXX");
	ASSERT(mkdtemp(dir));
	ASSERT_OK(chmod(dir, 0755));
}

static void mkfile(const char *name, const char *text, uid_t uid, gid_t gid, mode_t mode)
{
	char p[512];
	int fd;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	unlink(p);
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	ASSERT(fd >= 0);
	ASSERT_EQ(write(fd, text, strlen(text)), (long long)strlen(text));
	close(fd);
	ASSERT_OK(chown(p, uid, gid));
	ASSERT_OK(chmod(p, mode));
}

static const char *at(const char *name)
{
	static char p[4][512];
	static int i;

	i = (i + 1) % 4;
	snprintf(p[i], sizeof(p[i]), "%s/%s", dir, name);
	return p[i];
}

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static const struct ffm_user user = { .uid = NOBODY, .gid = NOBODY };

TEST(fifo_fails_at_once)
{
	double t0;
	int fd;

	setup();
	unlink(at("fifo"));
	ASSERT_OK(mkfifo(at("fifo"), 0666));
	t0 = now_ms();
	fd = ffm_user_open(&user, AT_FDCWD, at("fifo"), 0, NULL);
	ASSERT_EQ(fd, -EINVAL);
	ASSERT_EQ(ffm_user_open(&ffm_user_root, AT_FDCWD, at("fifo"), 0, NULL), -EINVAL);
	ASSERT_MSG(now_ms() - t0 < 100, "a FIFO took %.0f ms", now_ms() - t0);
}

TEST(link_to_root_only_file_refused)
{
	int fd;

	setup();
	mkfile("secret", "root only\n", 0, 0, 0600);
	unlink(at("link"));
	ASSERT_OK(symlink(at("secret"), at("link")));
	ASSERT_OK(lchown(at("link"), NOBODY, NOBODY));
	ASSERT_EQ(ffm_user_open(&user, AT_FDCWD, at("link"), 0, NULL), -EACCES);
	ASSERT_EQ(ffm_user_open(&user, AT_FDCWD, at("secret"), 0, NULL), -EACCES);
	/* root's own open of it still works: the refusal is the user's */
	fd = ffm_user_open(&ffm_user_root, AT_FDCWD, at("link"), 0, NULL);
	ASSERT(fd >= 0);
	close(fd);
}

TEST(device_refused)
{
	double t0 = now_ms();

	setup();
	/* A null device of the test's own (/dev/null itself may have been clobbered). */
	unlink(at("null"));
	ASSERT_OK(mknod(at("null"), S_IFCHR | 0666, makedev(1, 3)));
	ASSERT_EQ(ffm_user_open(&user, AT_FDCWD, at("null"), 0, NULL), -EINVAL);
	ASSERT_EQ(ffm_user_open(&ffm_user_root, AT_FDCWD, at("null"), 0, NULL), -EINVAL);
	ASSERT_EQ(ffm_user_open(&user, AT_FDCWD, dir, 0, NULL), -EISDIR);
	ASSERT(now_ms() - t0 < 100);
}

TEST(users_own_file_opens)
{
	struct stat st, st2;
	char buf[64] = "";
	int fd;

	setup();
	mkfile("mine", "the user's\n", NOBODY, NOBODY, 0600);
	fd = ffm_user_open(&user, AT_FDCWD, at("mine"), 0, &st);
	ASSERT_OK(fd);
	ASSERT_EQ(read(fd, buf, sizeof(buf) - 1), 11);
	ASSERT_STREQ(buf, "the user's\n");
	ASSERT_OK(fstat(fd, &st2));
	ASSERT_EQ(st.st_ino, st2.st_ino);
	ASSERT(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	ASSERT(fcntl(fd, F_GETFL) & O_NONBLOCK);
	close(fd);
	/* a path relative to the caller's working directory */
	ASSERT_OK(chdir(dir));
	fd = ffm_user_open(&user, AT_FDCWD, "mine", 0, NULL);
	ASSERT_OK(chdir("/"));
	ASSERT_OK(fd);
	close(fd);
	/* The switch was the helper thread's only: this thread is still root, groups unchanged. */
	ASSERT_EQ(syscall(SYS_setfsuid, -1), 0);
	ASSERT_EQ(syscall(SYS_setfsgid, -1), 0);
}

TEST(supplementary_groups)
{
	struct ffm_user g = user;
	int fd;

	setup();
	mkfile("grp", "group's\n", 0, GROUP, 0640);
	ASSERT_EQ(ffm_user_open(&g, AT_FDCWD, at("grp"), 0, NULL), -EACCES);
	g.groups[g.ngroups++] = GROUP;
	fd = ffm_user_open(&g, AT_FDCWD, at("grp"), 0, NULL);
	ASSERT_OK(fd);
	close(fd);
}

TEST(in_root_and_magic_links)
{
	int rootfd, fd;

	setup();
	mkfile("inroot", "x\n", NOBODY, NOBODY, 0644);
	rootfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	ASSERT(rootfd >= 0);
	fd = ffm_user_open(&user, rootfd, "/inroot", FFM_UOPEN_IN_ROOT, NULL);
	ASSERT_OK(fd);
	close(fd);
	/* an absolute link resolves inside the root, not to the host's file */
	unlink(at("abs"));
	ASSERT_OK(symlink("/etc/passwd", at("abs")));
	ASSERT_EQ(ffm_user_open(&user, rootfd, "/abs", FFM_UOPEN_IN_ROOT, NULL), -ENOENT);
	ASSERT_EQ(ffm_user_open(&user, rootfd, "../../etc/passwd", FFM_UOPEN_IN_ROOT, NULL),
		  -ENOENT);
	close(rootfd);
	/* a link through /proc's magic links is refused for user paths */
	unlink(at("magic"));
	ASSERT_OK(symlink("/proc/self/root/etc/passwd", at("magic")));
	ASSERT_EQ(ffm_user_open(&user, AT_FDCWD, at("magic"), 0, NULL), -ELOOP);
	fd = ffm_user_open(&ffm_user_root, AT_FDCWD, "/proc/self/exe", FFM_UOPEN_MAGICLINKS, NULL);
	ASSERT_OK(fd);
	close(fd);
}

static void stall(const char *path)
{
	if (strstr(path, "stall"))
		usleep(600 * 1000);
}

TEST(deadline_and_stuck_bound)
{
	double t0, dt;
	int fd;

	setup();
	mkfile("stall", "slow\n", NOBODY, NOBODY, 0644);
	ffm_user_open__set_test_hook(stall);
	t0 = now_ms();
	fd = ffm_user_open(&user, AT_FDCWD, at("stall"), 0, NULL);
	dt = now_ms() - t0;
	ASSERT_EQ(fd, -ETIMEDOUT);
	ASSERT_MSG(dt >= FFM_USER_OPEN_DEADLINE_MS - 5 && dt < FFM_USER_OPEN_DEADLINE_MS + 150,
		   "timed out after %.0f ms", dt);
	ASSERT_EQ(ffm_user_open_stuck(), 1);
	/* More stuck threads up to the bound, then refused at once. */
	ffm_user_open__set_deadline_ms(20);
	for (int i = 1; i < FFM_USER_OPEN_MAX_STUCK; i++)
		ASSERT_EQ(ffm_user_open(&user, AT_FDCWD, at("stall"), 0, NULL), -ETIMEDOUT);
	ASSERT_EQ(ffm_user_open_stuck(), FFM_USER_OPEN_MAX_STUCK);
	t0 = now_ms();
	ASSERT_EQ(ffm_user_open(&user, AT_FDCWD, at("mine"), 0, NULL), -EAGAIN);
	ASSERT(now_ms() - t0 < 5);
	/* The stuck threads finish by themselves and close what they opened. */
	usleep(900 * 1000);
	ASSERT_EQ(ffm_user_open_stuck(), 0);
	ffm_user_open__set_test_hook(NULL);
	ffm_user_open__set_deadline_ms(0);
	fd = ffm_user_open(&user, AT_FDCWD, at("stall"), 0, NULL);
	ASSERT_OK(fd);
	close(fd);
}

static void slow(const char *path)
{
	if (strstr(path, "slowly"))
		usleep(150 * 1000);
}

TEST(slow_budget_per_user)
{
	const struct ffm_user other = { .uid = 65000, .gid = 65000 };
	const struct ffm_user slowpoke = { .uid = 65001, .gid = 65001 };
	double t0;
	int fd, n = 0;

	setup();
	mkfile("slowly", "slow\n", 0, 0, 0644);
	ffm_user_open__set_test_hook(slow);
	/* 150 ms each, under the deadline: charged until the 1 s budget is spent */
	while ((fd = ffm_user_open(&slowpoke, AT_FDCWD, at("slowly"), 0, NULL)) >= 0 && n < 20) {
		close(fd);
		n++;
	}
	ffm_user_open__set_test_hook(NULL);
	ASSERT_EQ(fd, -EAGAIN);
	ASSERT_MSG(n >= 6 && n <= 8, "%d slow opens before the refusal", n);
	t0 = now_ms();
	ASSERT_EQ(ffm_user_open(&slowpoke, AT_FDCWD, at("slowly"), 0, NULL), -EAGAIN);
	ASSERT(now_ms() - t0 < 5);
	/* another user is not affected */
	fd = ffm_user_open(&other, AT_FDCWD, at("slowly"), 0, NULL);
	ASSERT_OK(fd);
	close(fd);
}

/* ------------------------------------------------------------------ a FUSE file system */

/*
 * A tiny FUSE server on the raw /dev/fuse protocol (no libfuse here), in a child process:
 * "file" (FUSE_BYTES of a pattern) and "stall" (a lookup never answered: a stalled server).
 */
#define FUSE_BYTES (300 * 1024)

static void fuse_reply(int fd, uint64_t unique, int error, const void *data, size_t len)
{
	char buf[sizeof(struct fuse_out_header) + 128 * 1024];
	struct fuse_out_header *h = (void *)buf;

	if (len > sizeof(buf) - sizeof(*h))
		len = sizeof(buf) - sizeof(*h);
	h->len = (uint32_t)(sizeof(*h) + (error ? 0 : len));
	h->error = error;
	h->unique = unique;
	if (!error && len)
		memcpy(buf + sizeof(*h), data, len);
	if (write(fd, buf, h->len) < 0)
		_exit(0);
}

static void fuse_attr_of(uint64_t node, struct fuse_attr *a)
{
	memset(a, 0, sizeof(*a));
	a->ino = node;
	a->nlink = 1;
	a->blksize = 4096;
	a->mode = node == FUSE_ROOT_ID ? S_IFDIR | 0755 : S_IFREG | 0644;
	a->size = node == FUSE_ROOT_ID ? 0 : FUSE_BYTES;
}

static void fuse_serve(int fd)
{
	static char in[FUSE_MIN_READ_BUFFER + 128 * 1024];

	alarm(60); /* bounded, whatever the test does */
	for (;;) {
		ssize_t n = read(fd, in, sizeof(in));
		struct fuse_in_header *h = (void *)in;
		void *arg = in + sizeof(*h);

		if (n < (ssize_t)sizeof(*h)) {
			if (n < 0 && errno == EINTR)
				continue;
			_exit(0);
		}
		switch (h->opcode) {
		case FUSE_INIT: {
			struct fuse_init_in *ii = arg;
			struct fuse_init_out o = { .major = FUSE_KERNEL_VERSION,
						   .max_readahead = ii->max_readahead,
						   .max_write = 4096 };

			o.minor = ii->minor < FUSE_KERNEL_MINOR_VERSION ? ii->minor
									: FUSE_KERNEL_MINOR_VERSION;
			fuse_reply(fd, h->unique, 0, &o, sizeof(o));
			break;
		}
		case FUSE_LOOKUP: {
			struct fuse_entry_out o = { .nodeid = 2 };

			if (!strcmp(arg, "stall"))
				break; /* never answered */
			if (strcmp(arg, "file")) {
				fuse_reply(fd, h->unique, -ENOENT, NULL, 0);
				break;
			}
			fuse_attr_of(2, &o.attr);
			fuse_reply(fd, h->unique, 0, &o, sizeof(o));
			break;
		}
		case FUSE_GETATTR: {
			struct fuse_attr_out o = { 0 };

			fuse_attr_of(h->nodeid, &o.attr);
			fuse_reply(fd, h->unique, 0, &o, sizeof(o));
			break;
		}
		case FUSE_OPEN: {
			struct fuse_open_out o = { .fh = 1 };

			fuse_reply(fd, h->unique, 0, &o, sizeof(o));
			break;
		}
		case FUSE_READ: {
			struct fuse_read_in *r = arg;
			static char data[128 * 1024];
			size_t len = r->size < sizeof(data) ? r->size : sizeof(data);

			if (r->offset >= FUSE_BYTES)
				len = 0;
			else if (len > FUSE_BYTES - r->offset)
				len = FUSE_BYTES - r->offset;
			for (size_t i = 0; i < len; i++)
				data[i] = (char)('a' + (r->offset + i) % 26);
			fuse_reply(fd, h->unique, 0, data, len);
			break;
		}
		case FUSE_STATFS: {
			struct fuse_statfs_out o = { .st = { .bsize = 4096, .namelen = 255 } };

			fuse_reply(fd, h->unique, 0, &o, sizeof(o));
			break;
		}
		case FUSE_FORGET:
		case FUSE_BATCH_FORGET:
		case FUSE_INTERRUPT:
			break;
		case FUSE_FLUSH:
		case FUSE_RELEASE:
			fuse_reply(fd, h->unique, 0, NULL, 0);
			break;
		default:
			fuse_reply(fd, h->unique, -ENOSYS, NULL, 0);
		}
	}
}

/* Mount it on @mnt; the server's pid, or SKIP where FUSE cannot be mounted. */
static pid_t fuse_start(const char *mnt)
{
	char opts[128];
	pid_t pid;
	int fd = open("/dev/fuse", O_RDWR | O_CLOEXEC);

	if (fd < 0)
		SKIP("no /dev/fuse: %s", strerror(errno));
	snprintf(opts, sizeof(opts), "fd=%d,rootmode=40000,user_id=0,group_id=0,allow_other", fd);
	if (mount("ffm-test", mnt, "fuse.ffm-test", MS_NOSUID | MS_NODEV, opts) < 0) {
		close(fd);
		SKIP("cannot mount FUSE: %s", strerror(errno));
	}
	pid = fork();
	ASSERT(pid >= 0);
	if (pid == 0)
		fuse_serve(fd);
	close(fd);
	return pid;
}

static void fuse_stop(const char *mnt, pid_t pid)
{
	umount2(mnt, MNT_DETACH);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

TEST(fuse_copied_and_stalls_bounded)
{
	struct stat st, mst;
	struct statfs sf;
	char mnt[512], buf[64];
	double t0, dt;
	pid_t srv;
	int fd;

	setup();
	snprintf(mnt, sizeof(mnt), "%s/fuse", dir);
	mkdir(mnt, 0755);
	srv = fuse_start(mnt);
	/* The file comes back as a copy (a memfd): later reads never reach the server. */
	fd = ffm_user_open(&user, AT_FDCWD, at("fuse/file"), 0, &st);
	if (fd < 0)
		fuse_stop(mnt, srv);
	ASSERT_OK(fd);
	ASSERT_EQ(st.st_ino, 2);
	ASSERT_OK(fstat(fd, &mst));
	ASSERT_OK(fstatfs(fd, &sf));
	ASSERT((uint32_t)sf.f_type != 0x65735546u);
	ASSERT_EQ(mst.st_size, FUSE_BYTES);
	ASSERT_EQ(pread(fd, buf, 4, 26 * 1000 + 1), 4);
	ASSERT(!memcmp(buf, "bcde", 4));
	close(fd);
	/* A lookup the server never answers: failed at the deadline. */
	t0 = now_ms();
	fd = ffm_user_open(&user, AT_FDCWD, at("fuse/stall"), 0, NULL);
	dt = now_ms() - t0;
	ASSERT_EQ(ffm_user_open_stuck(), 1);
	fuse_stop(mnt, srv); /* the stuck thread's lookup then fails, and the thread ends */
	ASSERT_EQ(fd, -ETIMEDOUT);
	ASSERT_MSG(dt < FFM_USER_OPEN_DEADLINE_MS + 150, "stalled open took %.0f ms", dt);
	for (int i = 0; i < 100 && ffm_user_open_stuck(); i++)
		usleep(10000);
	ASSERT_EQ(ffm_user_open_stuck(), 0);
	rmdir(mnt);
}

TEST(credentials_of_a_process)
{
	struct ffm_user u;

	setup();
	ASSERT_OK(ffm_user_of_pid(NULL, getpid(), &u));
	ASSERT_EQ(u.uid, 0);
	ASSERT_EQ(u.gid, 0);
	ASSERT_EQ(ffm_user_of_pid("/nonexistent", getpid(), &u), -ESRCH);
	ASSERT_EQ(u.uid, NOBODY);
}

TEST(cleanup)
{
	char cmd[600];

	if (!dir[0])
		SKIP("nothing made");
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ASSERT_OK(system(cmd));
}

TEST_MAIN()
