/* bench_fsck - how long fsck takes on a store of a million pages, and the
 * memory it needs.
 *
 * The store: N pages (default 1,000,000) of about 200 bytes in 1000
 * directories, every content twice (N/2 blobs, in different directories).
 * Sealing a million pages one by one through the filesystem's calls takes
 * minutes, so pages are made in batches of BATCH per write transaction:
 * the namespace records (inode, dirent, link) are written with the codecs
 * of rec.h as ns.c writes them, and the blobs go through blob.c
 * (blob_insert, blob_ref: records, blob_inodes, filter counters, exact
 * counts, totals, and the near-duplicate tables from each page's simhash
 * and sketch), with each new blob's file written to its place in
 * objects/. The store is closed through store_close(), and the timed check
 * must find it clean: that is what proves the shortcut made a store the
 * real code keeps consistent.
 *
 * fsck runs in a child process (its own peak RSS), first as it is after
 * the build (warm page cache), then, with --cold and root, after dropping
 * the page cache; --deep also times a deep check. Figures, one per line:
 *   build_seconds, fsck_seconds_1e6_pages (for N = 1e6; else
 *   fsck_seconds_N_pages), fsck_pages_per_s, fsck_peak_rss_mb (VmHWM:
 *   heap and the LMDB pages it mapped), fsck_peak_anon_mb (heap only,
 *   sampled at each progress call), and the same with _cold / _deep.
 *
 *   bench_fsck DIR [pages] [--cold] [--deep] [--keep] [--reuse]
 * (--keep leaves DIR/store in place; --reuse checks the one an earlier
 * --keep run left instead of building one.)
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "archive/archive.h"
#include "blob/blob.h"
#include "base/fp.h"
#include "fsck/fsck.h"
#include "near/near.h"
#include "archive/ns.h"
#include "store/rec.h"
#include "store/store.h"

enum { BATCH = 10000, NDIRS = 1000, PAGE_MAX = 512 };

static const struct pd_cred root = { 0, 0, 0, NULL };

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *what, int rc)
{
	fprintf(stderr, "bench_fsck: %s: %s\n", what, strerror(rc < 0 ? -rc : rc));
	exit(1);
}

/* Page i holds content i / 2: about 200 bytes of HTML. */
static size_t make_page(long i, char *buf)
{
	long c = i / 2;
	int n = snprintf(buf, PAGE_MAX,
			 "<!DOCTYPE html><html><head><title>Page %ld</title></head><body><h1>Article %ld</h1>"
			 "<p>Crawled copy of article %ld; the text is %lx.</p></body></html>\n",
			 c, c, c, (unsigned long)(c * 2654435761u));
	return (size_t)n;
}

struct batch {
	long first, n;
	const uint64_t *dirs;
};

static int put_name(struct wtx *w, uint64_t parent, const char *name, uint64_t ino, uint32_t mode)
{
	size_t len = strlen(name);
	uint8_t kb[16], vb[DIRENT_VAL_MAX], lk[8], lv[LINK_VAL_MAX];
	put_be64(kb, parent);
	put_be64(kb + 8, dirent_hash(name, len));
	MDB_val k = { 16, kb }, v = { dirent_val_encode(name, len, ino, mode, vb), vb };
	int rc = pd_mdb_err(mdb_put(w->txn, w->st->db_dirents, &k, &v, MDB_NODUPDATA));
	put_be64(lk, ino);
	put_be64(lv, parent);
	memcpy(lv + 8, name, len);
	MDB_val k2 = { 8, lk }, v2 = { 8 + len, lv };
	return rc ? rc : pd_mdb_err(mdb_put(w->txn, w->st->db_links, &k2, &v2, MDB_NODUPDATA));
}

static int write_file(struct store *st, const char *path, const char *buf, size_t len)
{
	int fd = openat(st->dirfd, path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	int rc = write(fd, buf, len) == (ssize_t)len ? 0 : -EIO;
	close(fd);
	return rc;
}

/* A batch of pages in one transaction (it may run again after a map
 * resize: it keeps no state but its argument, and rewrites its files). */
static int batch_cb(struct wtx *w, void *arg)
{
	struct batch *b = arg;
	char buf[PAGE_MAX], name[64];
	for (long i = b->first; i < b->first + b->n; i++) {
		size_t len = make_page(i, buf);
		struct fp fp;
		struct inode in = { .mode = S_IFREG | 0644, .nlink = 1, .size = len, .flags = INODE_HAS_BLOB };
		in.atime = in.mtime = in.ctime = w->now;
		int rc = fp_of_buf(buf, len, &fp);
		if (!rc)
			rc = wtx_next_ino(w, &in.ino);
		if (rc)
			return rc;
		memcpy(in.blob.md5, fp.md5, 16);
		in.blob.variant = 0;
		snprintf(name, sizeof name, "page-%07ld.html", i);
		if ((rc = put_name(w, b->dirs[i % NDIRS], name, in.ino, in.mode)) ||
		    (rc = ns_put_inode(w->txn, w->st, &in)))
			return rc;
		w->delta.pages++;
		w->delta.logical_bytes += (int64_t)len;
		if (i % 2) { /* the second copy of the content */
			if ((rc = blob_ref(w, &in.blob, in.ino)))
				return rc;
			w->delta.seals++;
			w->delta.dup_seals++;
			continue;
		}
		char path[BLOBKEY_PATH_MAX];
		blobkey_path(&in.blob, path);
		struct fprec r = { .size = len };
		struct near_sig sig;
		memcpy(r.xxh128, fp.xxh128, 16);
		if ((rc = near_sig_of_page(buf, len, &sig)))
			return rc;
		near_sig_to_rec(&sig, &r); /* so that fsck checks the near tables too */
		if ((rc = blob_mkdirs(w->st, &in.blob)) || (rc = write_file(w->st, path, buf, len)) ||
		    (rc = blob_insert(w, &in.blob, &r, in.ino, true)))
			return rc;
		w->delta.seals++;
	}
	return 0;
}

static long peak_anon_kb;

static long status_kb(const char *field)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long v = -1;
	size_t n = strlen(field);
	while (f && fgets(line, sizeof line, f))
		if (!strncmp(line, field, n) && line[n] == ':')
			v = atol(line + n + 1);
	if (f)
		fclose(f);
	return v;
}

static void sample(void *ctx, const char *phase, uint64_t done, uint64_t total)
{
	(void)ctx;
	(void)phase;
	(void)done;
	(void)total;
	long a = status_kb("RssAnon");
	if (a > peak_anon_kb)
		peak_anon_kb = a;
}

static void lines(void *ctx, const char *line)
{
	long *n = ctx;
	if ((*n)++ < 20)
		fprintf(stderr, "fsck: %s\n", line);
}

/* The child: a fresh process (exec'd, so that its memory is fsck's
 * alone) that checks the store and writes its figures to fd 1. */
static int check_child(const char *dir, bool deep)
{
	long nlines = 0;
	struct fsck_opts o = { .deep = deep, .report = lines, .progress = sample, .ctx = &nlines };
	struct fsck_result r;
	char err[512];
	double t0 = now_s();
	int rc = fsck_run(dir, &o, &r, err);
	double secs = now_s() - t0;
	if (rc)
		fprintf(stderr, "fsck: %s\n", err);
	sample(NULL, NULL, 0, 0);
	printf("%d %.3f %llu %llu %llu %ld %ld\n", rc, secs, (unsigned long long)r.problems,
	       (unsigned long long)r.pages, (unsigned long long)r.blobs, status_kb("VmHWM"), peak_anon_kb);
	return 0;
}

/* Run fsck in a child; print its figures with the suffix. */
static void timed_fsck(const char *dir, long npages, bool deep, const char *suffix)
{
	int pfd[2];
	if (pipe(pfd))
		die("pipe", errno);
	pid_t pid = fork();
	if (pid < 0)
		die("fork", errno);
	if (pid == 0) {
		close(pfd[0]);
		dup2(pfd[1], 1);
		close(pfd[1]);
		execl("/proc/self/exe", "bench_fsck", "--check", dir, deep ? "--deep" : NULL, (char *)NULL);
		_exit(127);
	}
	close(pfd[1]);
	char in[512] = "";
	ssize_t n = read(pfd[0], in, sizeof in - 1);
	close(pfd[0]);
	int status;
	waitpid(pid, &status, 0);
	int rc;
	double secs;
	unsigned long long problems, pages, blobs;
	long hwm, anon;
	if (n <= 0 || sscanf(in, "%d %lf %llu %llu %llu %ld %ld", &rc, &secs, &problems, &pages, &blobs, &hwm,
			     &anon) != 7) {
		fprintf(stderr, "bench_fsck: the fsck child failed\n");
		exit(1);
	}
	if (rc)
		die("fsck", rc);
	if (problems || pages != (unsigned long long)npages) {
		fprintf(stderr, "bench_fsck: fsck found %llu problems, %llu pages (expected a clean store of %ld)\n",
			problems, pages, npages);
		exit(1);
	}
	if (npages == 1000000)
		printf("fsck%s_seconds_1e6_pages: %.2f s\n", suffix, secs);
	else
		printf("fsck%s_seconds_%ld_pages: %.2f s\n", suffix, npages, secs);
	printf("fsck%s_pages_per_s: %.0f pages/s\n", suffix, (double)npages / secs);
	printf("fsck%s_peak_rss_mb: %.1f MB\n", suffix, (double)hwm / 1024);
	printf("fsck%s_peak_anon_mb: %.1f MB\n", suffix, (double)anon / 1024);
	char path[4200];
	struct stat sb;
	snprintf(path, sizeof path, "%s/meta/data.mdb", dir);
	if (!*suffix && stat(path, &sb) == 0)
		printf("lmdb_data_mb: %.1f MB (mapped read-only; its pages count in fsck_peak_rss_mb)\n",
		       (double)sb.st_blocks * 512 / 1048576);
	fflush(stdout);
}

static bool drop_caches(void)
{
	sync();
	int fd = open("/proc/sys/vm/drop_caches", O_WRONLY);
	if (fd < 0)
		return false;
	bool ok = write(fd, "3\n", 2) == 2;
	close(fd);
	return ok;
}

static int rm_tree(const char *path)
{
	char cmd[4200];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
	return system(cmd);
}

int main(int argc, char **argv)
{
	if (argc >= 3 && !strcmp(argv[1], "--check"))
		return check_child(argv[2], argc > 3 && !strcmp(argv[3], "--deep"));
	const char *base = NULL;
	long npages = 1000000;
	bool cold = false, deep = false, keep = false, reuse = false;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--cold"))
			cold = true;
		else if (!strcmp(argv[i], "--deep"))
			deep = true;
		else if (!strcmp(argv[i], "--keep"))
			keep = true;
		else if (!strcmp(argv[i], "--reuse"))
			reuse = keep = true;
		else if (!base)
			base = argv[i];
		else
			npages = (long)strtod(argv[i], NULL);
	}
	if (!base || npages < 2) {
		fprintf(stderr, "usage: bench_fsck DIR [pages] [--cold] [--deep] [--keep] [--reuse]\n");
		return 2;
	}
	char dir[4096], err[PD_ERRLEN];
	snprintf(dir, sizeof dir, "%s/store", base);
	struct store_params p;
	store_params_default(&p);
	if ((uint64_t)npages > p.expected_pages)
		p.expected_pages = (uint64_t)npages;
	struct stat sb;
	char meta[4200];
	snprintf(meta, sizeof meta, "%s/meta/data.mdb", dir);
	if (reuse && stat(meta, &sb) == 0) {
		printf("pages: %ld (the store made by an earlier run)\n", npages);
		timed_fsck(dir, npages, false, "");
		if (cold && drop_caches())
			timed_fsck(dir, npages, false, "_cold");
		if (deep)
			timed_fsck(dir, npages, true, "_deep");
		return 0;
	}
	int rc = archive_mkfs(dir, &p, err);
	struct store *st;
	struct store_opts o = { 0 };
	if (rc || (rc = archive_open(dir, &o, &st, err))) {
		fprintf(stderr, "bench_fsck: %s\n", err);
		return 1;
	}
	double t0 = now_s();
	uint64_t *dirs = malloc(NDIRS * sizeof *dirs);
	for (int d = 0; d < NDIRS; d++) {
		char name[32];
		struct inode in;
		snprintf(name, sizeof name, "site-%03d", d);
		if ((rc = ns_mknode(st, PD_ROOT_INO, name, S_IFDIR | 0755, 0, NULL, &root, &in)))
			die("mkdir", rc);
		dirs[d] = in.ino;
	}
	for (long first = 0; first < npages; first += BATCH) {
		struct batch b = { first, npages - first < BATCH ? npages - first : BATCH, dirs };
		if ((rc = store_write(st, batch_cb, &b)))
			die("batch", rc);
		if (first % 100000 == 0)
			fprintf(stderr, "\rbuilding: %ld pages", first);
	}
	if ((rc = store_close(st)))
		die("close", rc);
	double build = now_s() - t0;
	fprintf(stderr, "\rbuilding: %ld pages\n", npages);
	printf("pages: %ld\nblobs: %ld\ndirectories: %d\n", npages, (npages + 1) / 2, NDIRS);
	printf("build_seconds: %.1f s\n", build);
	fflush(stdout);
	timed_fsck(dir, npages, false, "");
	if (cold) {
		if (drop_caches())
			timed_fsck(dir, npages, false, "_cold");
		else
			printf("fsck_cold: not measured (cannot drop the page cache; run as root)\n");
	}
	if (deep)
		timed_fsck(dir, npages, true, "_deep");
	free(dirs);
	if (!keep)
		rm_tree(dir);
	return 0;
}
