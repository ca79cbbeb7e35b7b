/* bench_roundtrip - the cost of a FUSE round trip as a program sees it:
 * N open() + close() pairs of one file (an OPEN and a FLUSH request each;
 * the RELEASE that follows is asynchronous), timed on the monotonic clock.
 *
 *   bench_roundtrip FILE [N]      prints "us_per_open_close: X"
 *
 * Run it pinned (taskset -c 0) and unpinned to see what the CPU a request
 * is served on costs (bench-fs.sh does, for each transport). */
#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static double seconds(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: bench_roundtrip FILE [N]\n");
		return 2;
	}
	long n = argc > 2 ? atol(argv[2]) : 20000;
	if (n <= 0)
		n = 20000;
	double t0 = seconds();
	for (long i = 0; i < n; i++) {
		int fd = open(argv[1], O_RDONLY);
		if (fd < 0) {
			perror(argv[1]);
			return 1;
		}
		close(fd);
	}
	printf("us_per_open_close: %.1f\n", (seconds() - t0) * 1e6 / (double)n);
	return 0;
}
