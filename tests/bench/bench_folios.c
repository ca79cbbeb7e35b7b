/* bench_folios.c - what a 4 KiB pwrite() costs by the size of the page-cache
 * folio it lands in, the cost behind LMDB's map advice and the primed
 * reserve (core/store/store.c env_open, store_commit.c prime_pages).
 *
 *   build/release/bench/bench_folios [FILE] [MiB]
 *
 * FILE (default /var/tmp/pd-bench-folios, removed at the end) is made of
 * MiB (default 256) in each of these ways, then written 100,000 times a
 * 4 KiB page at a random page-aligned offset (LMDB's commit writes, as its
 * pwrite()s of dirty pages are), and the mean time of one such write is
 * printed beside the folio sizes the file's pages sit in (from
 * /proc/kpageflags when readable: root):
 *   writes-4k, writes-64k, writes-256k, writes-2m: the file written
 *       end to end in writes of that size (a write makes folios up to its
 *       own size);
 *   fallocate+mmap-readahead: allocated (posix_fallocate, as LMDB's reserve
 *       is), its cache dropped, then read through a mapping of default
 *       advice (a read of LMDB's map without MDB_NORDAHEAD): readahead's
 *       folios, the zeroed allocated range included;
 *   fallocate+mmap-random: the same read through a mapping advised
 *       MADV_RANDOM (MDB_NORDAHEAD);
 *   fallocate+primed: allocated, then read a page at a time through a
 *       descriptor advised POSIX_FADV_RANDOM (prime_pages).
 * A figure of the kernel (ext4's buffered write into a large folio), not of
 * pagededup: measured on one machine, its kernel in the output. */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096
#define WRITES 100000

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void die(const char *what)
{
	perror(what);
	exit(1);
}

static void write_through(int fd, size_t size, size_t chunk)
{
	char *buf = malloc(chunk);
	if (!buf)
		die("malloc");
	memset(buf, 1, chunk);
	for (size_t off = 0; off < size; off += chunk)
		if (pwrite(fd, buf, chunk, (off_t)off) != (ssize_t)chunk)
			die("pwrite");
	free(buf);
}

static void read_mapped(int fd, size_t size, int advice)
{
	if (fdatasync(fd) || posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED))
		die("drop");
	volatile unsigned char *m = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED)
		die("mmap");
	if (madvise((void *)m, size, advice))
		die("madvise");
	unsigned sum = 0;
	for (size_t off = 0; off < size; off += PAGE)
		sum += m[off];
	(void)sum;
	munmap((void *)m, size);
}

static void prime(int fd, size_t size)
{
	char self[64], page[PAGE];
	snprintf(self, sizeof self, "/proc/self/fd/%d", fd);
	int rfd = open(self, O_RDONLY);
	if (rfd < 0 || posix_fadvise(rfd, 0, 0, POSIX_FADV_RANDOM))
		die("prime");
	for (size_t off = 0; off < size; off += PAGE)
		if (pread(rfd, page, PAGE, (off_t)off) != PAGE)
			die("pread");
	close(rfd);
}

/* Pages in folios of 1, 2-15, 16-127, 128+ pages (-1: not readable). */
static void folio_census(int fd, size_t size, long out[4])
{
	memset(out, 0, 4 * sizeof out[0]);
	int pm = open("/proc/self/pagemap", O_RDONLY), kf = open("/proc/kpageflags", O_RDONLY);
	unsigned char *m = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
	if (pm < 0 || kf < 0 || m == MAP_FAILED) {
		out[0] = -1;
		goto done;
	}
	size_t run = 0;
	for (size_t off = 0; off <= size; off += PAGE) {
		uint64_t e = 0, f = 0;
		int tail = 0;
		if (off < size) {
			volatile unsigned char t = m[off];
			(void)t;
			if (pread(pm, &e, 8, (off_t)((uintptr_t)(m + off) / PAGE * 8)) != 8 || !(e & ((1ull << 55) - 1)) ||
			    pread(kf, &f, 8, (off_t)((e & ((1ull << 55) - 1)) * 8)) != 8) {
				out[0] = -1;
				goto done;
			}
			tail = (f >> 16) & 1;
		}
		if (tail) {
			run++;
			continue;
		}
		if (run)
			out[run == 1 ? 0 : run < 16 ? 1 : run < 128 ? 2 : 3] += (long)run;
		run = 1;
	}
done:
	if (m != MAP_FAILED)
		munmap(m, size);
	if (pm >= 0)
		close(pm);
	if (kf >= 0)
		close(kf);
}

static void run(const char *path, size_t size, const char *name)
{
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0)
		die(path);
	if (!strncmp(name, "writes-", 7)) {
		size_t chunk = !strcmp(name, "writes-4k") ? 4096 : !strcmp(name, "writes-64k") ? 65536 :
			       !strcmp(name, "writes-256k") ? 262144 : 2u << 20;
		write_through(fd, size, chunk);
	} else {
		if (posix_fallocate(fd, 0, (off_t)size))
			die("posix_fallocate");
		if (!strcmp(name, "fallocate+mmap-readahead"))
			read_mapped(fd, size, MADV_NORMAL);
		else if (!strcmp(name, "fallocate+mmap-random"))
			read_mapped(fd, size, MADV_RANDOM);
		else
			prime(fd, size);
	}
	long census[4];
	folio_census(fd, size, census);
	char page[PAGE];
	memset(page, 2, sizeof page);
	srand(1);
	double t = now();
	for (int i = 0; i < WRITES; i++) {
		size_t off = ((size_t)rand() % (size / PAGE)) * PAGE;
		if (pwrite(fd, page, PAGE, (off_t)off) != PAGE)
			die("pwrite");
	}
	double us = (now() - t) / WRITES * 1e6;
	long pages = (long)(size / PAGE);
	if (census[0] < 0)
		printf("%-26s %6.2f us a 4 KiB pwrite (folio sizes not readable)\n", name, us);
	else
		printf("%-26s %6.2f us a 4 KiB pwrite; pages in folios of 1 / 2-15 / 16-127 / 128+ pages: %.2f %.2f %.2f %.2f\n",
		       name, us, (double)census[0] / pages, (double)census[1] / pages, (double)census[2] / pages,
		       (double)census[3] / pages);
	close(fd);
	unlink(path);
}

int main(int argc, char **argv)
{
	const char *path = argc > 1 ? argv[1] : "/var/tmp/pd-bench-folios";
	size_t size = (size_t)(argc > 2 ? atoi(argv[2]) : 256) << 20;
	struct utsname u;
	if (!uname(&u))
		printf("kernel: %s %s\n", u.sysname, u.release);
	const char *ways[] = { "writes-4k", "writes-64k", "writes-256k", "writes-2m", "fallocate+mmap-readahead",
			       "fallocate+mmap-random", "fallocate+primed" };
	for (size_t i = 0; i < sizeof ways / sizeof *ways; i++)
		run(path, size, ways[i]);
	return 0;
}
