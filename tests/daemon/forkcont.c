// SPDX-License-Identifier: MIT
/*
 * A parent that undoes the stop of its forked children (tests/daemon/test_sec_loop.sh): it loads
 * libcuda.so.1 and calls cuInit (so that, in per-process scope, ffmd gives it probes and BPF
 * stops each child it forks, until ffmd gives the child its own), then forks N children, GAP
 * milliseconds apart, and sends each a SIGCONT at once, which discards the pending stop or ends
 * it. Each child sleeps MS milliseconds, never stopped, then exits. Prints "FORKED <n>" when
 * its children are done.
 *
 *	forkcont [N [MS [GAP]]]
 */
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 10, ms = argc > 2 ? atoi(argv[2]) : 1000, made = 0;
	int gap = argc > 3 ? atoi(argv[3]) : 0;
	void *cuda = dlopen("libcuda.so.1", RTLD_NOW);
	int (*init)(unsigned) = cuda ? (int (*)(unsigned))dlsym(cuda, "cuInit") : NULL;

	if (!init || init(0) != 0) {
		fprintf(stderr, "forkcont: no libcuda.so.1 or cuInit failed\n");
		return 2;
	}
	for (; made < n; made++) {
		pid_t pid = fork();

		if (pid < 0)
			break;
		if (pid == 0) {
			usleep((useconds_t)ms * 1000);
			_exit(0);
		}
		kill(pid, SIGCONT);
		usleep((useconds_t)gap * 1000);
	}
	while (wait(NULL) > 0)
		;
	printf("FORKED %d\n", made);
	return made == n ? 0 : 1;
}
