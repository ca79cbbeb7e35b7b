/* main.c - pagededupfs start-up: options, the store, the FUSE session and
 * its loop; the operations are in pagededupfs.c. */
#define FUSE_USE_VERSION 314

#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <limits.h>
#include <malloc.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>
#include <syslog.h>
#include <unistd.h>

#include "archive/archive.h"
#include "auto_unmount.h"
#include "kernel_io.h"
#include "pdfs.h"
#include "archive/mounts.h"
#include "base/version.h"
#include "near/ndelta.h"
#include "store/store.h"
#include "uring_io.h"

struct options {
	char *store;
	int nodedup, sync_blobs, no_sign_thread, no_uring, auto_unmount, blob_files, nocompact, nonursery;
	long nursery_level;
	unsigned long nursery_mb, nursery_raw_mb;
	double compact;
	unsigned long compact_min_kb, compact_period_ms;
	unsigned long uring_threads, pack_mb;
	long pack_level, compact_level;
	char *delta;
	unsigned long mapsize_mb, sync_ms, sign_queue, delta_candidates, lmdb_rewrite_mb, idle_compact;
	long delta_window; /* LONG_MIN: not given */
	double entry_timeout, attr_timeout, negative_timeout;
	int nstores;
};

#define KEY_AUTO_UNMOUNT 1
#define OPT(t, p) { t, offsetof(struct options, p), 1 }
static const struct fuse_opt option_spec[] = {
	OPT("nodedup", nodedup),
	OPT("sync_blobs", sync_blobs),
	{ "mapsize_mb=%lu", offsetof(struct options, mapsize_mb), 0 },
	{ "lmdb_rewrite_mb=%lu", offsetof(struct options, lmdb_rewrite_mb), 0 },
	{ "sync_ms=%lu", offsetof(struct options, sync_ms), 0 },
	OPT("no_sign_thread", no_sign_thread),
	OPT("no_uring", no_uring),
	OPT("blob_files", blob_files),
	{ "pack_level=%ld", offsetof(struct options, pack_level), 0 },
	{ "pack_mb=%lu", offsetof(struct options, pack_mb), 0 },
	OPT("nocompact", nocompact),
	OPT("nonursery", nonursery),
	{ "nursery_level=%ld", offsetof(struct options, nursery_level), 0 },
	{ "nursery_mb=%lu", offsetof(struct options, nursery_mb), 0 },
	{ "nursery_raw_mb=%lu", offsetof(struct options, nursery_raw_mb), 0 },
	{ "compact=%lf", offsetof(struct options, compact), 0 },
	{ "compact_min_kb=%lu", offsetof(struct options, compact_min_kb), 0 },
	{ "compact_period_ms=%lu", offsetof(struct options, compact_period_ms), 0 },
	{ "compact_level=%ld", offsetof(struct options, compact_level), 0 },
	{ "idle_compact=%lu", offsetof(struct options, idle_compact), 0 },
	{ "delta=%s", offsetof(struct options, delta), 0 },
	{ "delta_candidates=%lu", offsetof(struct options, delta_candidates), 0 },
	{ "delta_window=%ld", offsetof(struct options, delta_window), 0 },
	{ "uring_threads=%lu", offsetof(struct options, uring_threads), 0 },
	{ "sign_queue=%lu", offsetof(struct options, sign_queue), 0 },
	{ "entry_timeout=%lf", offsetof(struct options, entry_timeout), 0 },
	{ "attr_timeout=%lf", offsetof(struct options, attr_timeout), 0 },
	{ "negative_timeout=%lf", offsetof(struct options, negative_timeout), 0 },
	FUSE_OPT_KEY("auto_unmount", KEY_AUTO_UNMOUNT), /* seen, and passed on to libfuse */
	FUSE_OPT_END
};

static int opt_proc(void *data, const char *arg, int key, struct fuse_args *outargs)
{
	(void)outargs;
	struct options *o = data;
	if (key == KEY_AUTO_UNMOUNT)
		o->auto_unmount = 1;
	if (key == FUSE_OPT_KEY_NONOPT && !o->store) {
		o->store = realpath(arg, NULL);
		if (!o->store)
			o->store = strdup(arg); /* may not exist yet: mkfs makes it */
		o->nstores++;
		return 0;
	}
	return 1;
}

static void usage(const char *prog)
{
	printf("usage: %s STORE MOUNTPOINT [options]\n\n"
	       "Mounts the pagededup store STORE (made by 'pagededup mkfs STORE') on\n"
	       "MOUNTPOINT; neither may be inside the other. In the background (without -f)\n"
	       "messages go to syslog (the journal). Exit 0 when mounted, 1 when not.\n\n"
	       "pagededupfs options (-o name[=value],...):\n"
	       "    nodedup                store every file as a blob of its own (a baseline)\n"
	       "    sync_blobs             fsync each blob and commit durably before close() returns\n"
	       "    sync_ms=N              otherwise, sync the store every N ms (default 1000)\n"
	       "    mapsize_mb=N           initial LMDB map size (grows by itself when full)\n"
	       "    lmdb_rewrite_mb=N      at unmount, when the mount grew LMDB's file by an eighth,\n"
	       "                           write it again in key order (as 'pagededup compact'\n"
	       "                           does) if its pages in use are at most N MiB and\n"
	       "                           the disk has room\n"
	       "                           (default 256; 0: never)\n"
	       "    sign_queue=N           new pages waiting for their near-duplicate signature\n"
	       "                           before a close() signs the oldest itself (default 4096)\n"
	       "    no_sign_thread         no background signer: pages are signed by near queries,\n"
	       "                           by close() past sign_queue and at unmount\n"
	       "    pack_level=N           zstd level of new pack records (default 3; -1: raw)\n"
	       "    pack_mb=N              a pack file is closed past N MiB (default 256)\n"
	       "    nursery_level=N        zstd level a page is written at by close(), into the\n"
	       "                           nursery; its final record comes later (default: raw\n"
	       "                           below nursery_raw_mb with nursery_mb free on the disk,\n"
	       "                           then 1; -1: raw always)\n"
	       "    nursery_raw_mb=N       the nursery's pages are raw below N MiB (default 256)\n"
	       "    nursery_mb=N           past N MiB in the nursery, close() writes the final\n"
	       "                           record itself (default 1024)\n"
	       "    nonursery              close() writes the final record itself, always\n"
	       "    compact=S              rewrite a pack whose live share falls below S (default\n"
	       "                           0.5) in the background, its old file then removed\n"
	       "    compact_min_kb=N       ... once it has N KiB to give back (default 1024)\n"
	       "    compact_period_ms=N    how often the compactor looks (default 10000)\n"
	       "    compact_level=N        zstd level the compactor encodes the whole pages it\n"
	       "                           copies again at, kept when smaller (default 9; -1: as\n"
	       "                           they are)\n"
	       "    idle_compact=S         once the store has been at rest S seconds, the packs\n"
	       "                           not yet encoded cold are, at compact_level with a\n"
	       "                           window, until a page is written (default 300; 0: never)\n"
	       "    nocompact              no background compactor ('pagededup compact' unmounted)\n"
	       "    delta=RULE             near-duplicates stored as deltas against the base\n"
	       "                           RULE picks: resemblance (default), simhash, trial, off\n"
	       "    delta_candidates=N     near neighbours a base is chosen among (default 8, at\n"
	       "                           most 32; fewer cost less CPU per page at scale)\n"
	       "    delta_window=N         a page no neighbour gives a delta is tried as a delta\n"
	       "                           on N of the last 16 pages the delta step did, those\n"
	       "                           of the closest markup (default 2, at most 64; 0: none)\n"
	       "    blob_files             keep a format 1 store's layout: new pages as files\n"
	       "                           under objects/ (tests of format 1 stores)\n"
	       "    entry_timeout=S        kernel name cache timeout in seconds (default 5)\n"
	       "    attr_timeout=S         kernel attribute cache timeout in seconds (default 5)\n"
	       "    negative_timeout=S     kernel cache of absent names (default 1)\n"
	       "    no_uring               serve requests through /dev/fuse only, even when the\n"
	       "                           kernel offers FUSE over io_uring (fuse module parameter\n"
	       "                           enable_uring=Y, Linux 6.14 and later)\n"
	       "    uring_threads=N        io_uring threads per CPU (default 4)\n"
	       "    allow_other            let other users in (the kernel checks permissions)\n"
	       "    auto_unmount           unmount when the daemon ends, even if killed (serves\n"
	       "                           through /dev/fuse, not io_uring)\n\n",
	       prog);
	fuse_cmdline_help();
	fuse_lowlevel_help();
}

/* Start in the background the way a mount command expects: the parent
 * returns only when the store is open and mounted, and with its error if
 * it could not be. */
static int background(int *notify_fd)
{
	int p[2];
	if (pipe(p))
		return -1;
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid > 0) {
		close(p[1]);
		char msg[PD_ERRLEN + 8];
		ssize_t n = read(p[0], msg, sizeof msg - 1);
		if (n > 0 && msg[0] == 'k')
			_exit(0);
		if (n > 1)
			fprintf(stderr, "%.*s\n", (int)n - 1, msg + 1);
		_exit(1);
	}
	close(p[0]);
	setsid();
	*notify_fd = p[1];
	return 0;
}

static void notify(int fd, const char *err)
{
	if (fd < 0)
		return;
	if (err) {
		char msg[PD_ERRLEN + 8];
		int n = snprintf(msg, sizeof msg, "e%s", err);
		if (write(fd, msg, (size_t)n) < 0)
			return;
	} else if (write(fd, "k", 1) < 0) {
		return;
	}
	close(fd);
}

static void detach_stdio(void)
{
	int fd = open("/dev/null", O_RDWR);
	if (fd < 0)
		return;
	dup2(fd, 0);
	dup2(fd, 1);
	dup2(fd, 2);
	if (fd > 2)
		close(fd);
	if (chdir("/"))
		return;
}

/* In the background, the daemon's messages (its own, core's and
 * libfuse's, all written to stderr) go to syslog, which is the journal
 * under systemd: stderr becomes a stream whose lines are syslog records.
 * Errors that reach a writer are LOG_ERR, the rest LOG_NOTICE. Sanitizer
 * reports write to the file descriptor and still go to /dev/null then;
 * the tests run the daemon in the foreground. */
static char log_line[1024];
static size_t log_len;

static void log_flush_line(void)
{
	if (!log_len)
		return;
	log_line[log_len] = 0;
	const char *msg = log_line;
	if (!strncmp(msg, "pagededupfs: ", 13))
		msg += 13; /* syslog names the program already */
	bool error = strstr(log_line, "fail") || strstr(log_line, "error") || strstr(log_line, "cannot");
	syslog(error ? LOG_ERR : LOG_NOTICE, "%s", msg);
	log_len = 0;
}

/* Called under the stream's lock, so one writer at a time. */
static ssize_t log_write(void *cookie, const char *buf, size_t size)
{
	(void)cookie;
	for (size_t i = 0; i < size; i++) {
		if (buf[i] == '\n' || log_len == sizeof log_line - 1)
			log_flush_line();
		if (buf[i] != '\n')
			log_line[log_len++] = buf[i];
	}
	return (ssize_t)size;
}

static void log_fuse(enum fuse_log_level level, const char *fmt, va_list ap)
{
	char msg[1024];
	vsnprintf(msg, sizeof msg, fmt, ap);
	msg[strcspn(msg, "\n")] = 0;
	syslog((int)level, "%s", msg);
}

static void log_to_syslog(void)
{
	openlog("pagededupfs", LOG_PID | LOG_NDELAY, LOG_DAEMON);
	FILE *f = fopencookie(NULL, "w", (cookie_io_functions_t){ .write = log_write });
	if (f) {
		setvbuf(f, NULL, _IOLBF, 0);
		stderr = f;
	}
	fuse_set_log_func(log_fuse);
}

/* glibc's thresholds, fixed. Each thread keeps the arena glibc gives it:
 * two arenas for every thread (M_ARENA_MAX 2) made the threads'
 * allocations contend and fragment one another's heaps, and at millions
 * of pages the delta step's malloc, LMDB and kernel time grew with the
 * archive (tests/bench/README.md, "One arena a thread").
 *
 * A page's work allocates buffers of 128 KiB to a few MiB several times
 * (the page decoded, encoded, its text, zstd's workspace as it grows, a
 * base read for its delta). Below PD_MMAP_THRESHOLD they come from the
 * thread's arena, and a freed one stays there for the next page until the
 * arena's free top passes PD_TRIM_THRESHOLD; above, each is a fresh mmap
 * whose every 4 KiB page is a fault and a zeroed page, and an munmap that
 * flushes every CPU's TLB. With both at 128 KiB (what this code did
 * before) the daemon took 12-30 faults a page written, 16% of its CPU,
 * on a paravirtualized machine; at 2 MiB, 4-11 a page, and its CPU a
 * page 0.68-0.79 of what it was on three inputs (tests/bench/README.md,
 * "The malloc thresholds, measured where a fault is dear"). What the
 * arenas keep between pages raised the peak of RssAnon by 4-15 MiB (a cp
 * of 40,000 pages: 48 -> 57 MiB, inside the filter + 64 MiB); 4 MiB saved
 * a little more CPU for up to 24 MiB, to the goal's edge. The heap's free
 * pages go back to the system at the end of a burst (base/heap.h). */
#define PD_MMAP_THRESHOLD (2 << 20)
#define PD_TRIM_THRESHOLD (2 << 20)
static void tune_malloc(void)
{
	mallopt(M_MMAP_THRESHOLD, PD_MMAP_THRESHOLD);
	mallopt(M_TRIM_THRESHOLD, PD_TRIM_THRESHOLD);
}

/* A start-up failure: said once, by the process the user waits on (the
 * parent when in the background, which prints what the child sends). */
static void start_failed(int notify_fd, const char *fmt, ...)
{
	char msg[PD_ERRLEN + 64];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (notify_fd >= 0)
		notify(notify_fd, msg);
	else
		fprintf(stderr, "%s\n", msg);
}

static void say_waiting(void *ctx, const char *pid)
{
	fprintf(stderr, "pagededupfs: %s is still being closed by pid %s (unmounted a moment ago); waiting for it\n",
		(const char *)ctx, pid);
}

/* What must hold before anything is opened or created: the store exists
 * and is a store, and neither path holds the other. */
static int check_paths(const char *store, const char *mnt)
{
	struct stat sb;
	char meta[PATH_MAX + 32];
	if (stat(store, &sb) || !S_ISDIR(sb.st_mode)) {
		fprintf(stderr, "pagededupfs: %s: %s; make a store with 'pagededup mkfs %s'\n", store,
			errno && !S_ISDIR(sb.st_mode) ? strerror(errno) : "not a directory", store);
		return -1;
	}
	snprintf(meta, sizeof meta, "%s/meta/data.mdb", store);
	if (stat(meta, &sb)) {
		fprintf(stderr, "pagededupfs: %s is not a pagededup store; 'pagededup mkfs %s' makes one "
				"(in an empty or new directory)\n", store, store);
		return -1;
	}
	if (mounts_paths_nest(store, mnt)) {
		fprintf(stderr, "pagededupfs: the store %s and the mount point %s are one inside the other; "
				"put them apart\n", store, mnt);
		return -1;
	}
	return 0;
}

int main(int argc, char *argv[])
{
	tune_malloc();
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	/* the LMDB rewrite's bound: about 3 s at unmount on this project's
	 * machines (tests/bench/README.md, "LMDB written again at unmount");
	 * the idle pass after five minutes at rest, long past a crawler's
	 * pause between hosts (core/blob/blob.h) */
	struct options o = { .entry_timeout = 5, .attr_timeout = 5, .negative_timeout = 1, .lmdb_rewrite_mb = 256,
			     .idle_compact = 300, .delta_window = LONG_MIN };
	struct fuse_cmdline_opts cl = { 0 };
	int ret = 1, notify_fd = -1;
	struct fuse_session *se = NULL;
	struct store *st = NULL;
	char err[PD_ERRLEN] = "";

	if (fuse_opt_parse(&args, &o, option_spec, opt_proc) == -1)
		goto usage_error;
	if (fuse_parse_cmdline(&args, &cl) != 0)
		goto usage_error;
	if (cl.show_help) {
		usage(argv[0]);
		ret = 0;
		goto out_args;
	}
	if (cl.show_version) {
		printf("pagededupfs %s (store format %d), FUSE library %s\n", pd_version(), PD_FORMAT_VERSION,
		       fuse_pkgversion());
		ret = 0;
		goto out_args;
	}
	if (!o.store || !cl.mountpoint || o.nstores > 1) {
		fprintf(stderr, "pagededupfs: %s\n", !o.store ? "no STORE given" : !cl.mountpoint ? "no MOUNTPOINT given"
							: "more than one STORE and MOUNTPOINT given");
		goto usage_error;
	}
	if (check_paths(o.store, cl.mountpoint))
		goto out_args;
	char fsname[PATH_MAX + 16];
	snprintf(fsname, sizeof fsname, "-ofsname=%s,subtype=pagededupfs,default_permissions", o.store);
	fuse_opt_add_arg(&args, fsname);
	/* Every option is checked (libfuse names an unknown one) before the
	 * store is touched. */
	char mnt_abs[PATH_MAX];
	struct pdfs fs = { NULL, o.entry_timeout, o.attr_timeout, o.negative_timeout, NULL,
			   realpath(cl.mountpoint, mnt_abs) ? mnt_abs : cl.mountpoint };
	se = fuse_session_new(&args, &pd_ops, sizeof pd_ops, &fs);
	fs.se = se;
	if (!se)
		goto usage_error;

	if (!cl.foreground && background(&notify_fd))
		goto out_session;
	char mnt[PATH_MAX];
	int rc = mounts_wait_closing(o.store, 0, say_waiting, o.store, mnt, sizeof mnt);
	if (rc) {
		if (rc == -EBUSY)
			start_failed(notify_fd, "pagededupfs: %s is already mounted on %s", o.store, mnt);
		else
			start_failed(notify_fd, "pagededupfs: %s/lock: %s", o.store, strerror(-rc));
		goto out_session;
	}
	struct store_opts so = { .nodedup = o.nodedup, .sync_blobs = o.sync_blobs,
				 .mapsize = (uint64_t)o.mapsize_mb << 20, .sync_ms = (unsigned)o.sync_ms,
				 .no_sign_thread = o.no_sign_thread, .sign_queue = (unsigned)o.sign_queue,
				 .pack_level = (int)o.pack_level, .pack_max_bytes = (uint64_t)o.pack_mb << 20,
				 .blob_files = o.blob_files,
				 .compact_share = o.nocompact ? -1 : o.compact,
				 .compact_min_dead = (uint64_t)o.compact_min_kb << 10,
				 .compact_period_ms = (unsigned)o.compact_period_ms,
				 .compact_level = (int)o.compact_level,
				 .nursery = !o.nonursery && !o.blob_files, .nursery_level = (int)o.nursery_level,
				 .nursery_max_bytes = (uint64_t)o.nursery_mb << 20,
				 .nursery_raw_bytes = (uint64_t)o.nursery_raw_mb << 20,
				 .delta_candidates = (unsigned)o.delta_candidates,
				 .delta_window = o.delta_window == LONG_MIN ? 0 : o.delta_window == 0 ? -1 : (int)o.delta_window,
				 .lmdb_rewrite_max = (uint64_t)o.lmdb_rewrite_mb << 20,
				 .idle_compact_s = o.idle_compact > UINT_MAX ? UINT_MAX : (unsigned)o.idle_compact };
	if (o.delta && ndelta_rule_parse(o.delta, &so.delta_rule)) {
		start_failed(notify_fd, "pagededupfs: -o delta=%s: not a rule (resemblance, simhash, trial, off)", o.delta);
		goto out_session;
	}
	if (o.compact_level < -1 || o.compact_level > 22) {
		start_failed(notify_fd, "pagededupfs: -o compact_level=%ld: a zstd level from 1 to 22, or -1 (copy as they are)",
			     o.compact_level);
		goto out_session;
	}
	if (o.delta_candidates > NDELTA_CANDIDATES) {
		start_failed(notify_fd, "pagededupfs: -o delta_candidates=%lu: at most %d", o.delta_candidates,
			     NDELTA_CANDIDATES);
		goto out_session;
	}
	if (o.delta_window != LONG_MIN && (o.delta_window < 0 || o.delta_window > NDELTA_WINDOW_MAX)) {
		start_failed(notify_fd, "pagededupfs: -o delta_window=%ld: from 0 (none) to %d", o.delta_window,
			     NDELTA_WINDOW_MAX);
		goto out_session;
	}
	if (archive_open(o.store, &so, &st, err)) {
		start_failed(notify_fd, "pagededupfs: %s", err);
		goto out_session;
	}
	fs.st = st;
	if (fuse_set_signal_handlers(se) != 0 || fuse_session_mount(se, cl.mountpoint) != 0) {
		start_failed(notify_fd, "pagededupfs: cannot mount on %s", cl.mountpoint);
		goto out_store;
	}
	if (o.auto_unmount && auto_unmount_order_fds(fuse_session_fd(se)) != 0) {
		start_failed(notify_fd, "pagededupfs: auto_unmount: cannot hold the FUSE device of %s", cl.mountpoint);
		goto out_unmount;
	}
	if (kernel_io_install(se) != 0) {
		start_failed(notify_fd, "pagededupfs: cannot use the FUSE device of %s", cl.mountpoint);
		goto out_unmount;
	}
	/* fusermount3's auto_unmount watches for the daemon's end and then
	 * unmounts; after a kill the io_uring queues outlive the process a
	 * while and it gives up (Linux 6.14), so auto_unmount keeps to
	 * /dev/fuse. */
	uring_io_configure(!o.no_uring && !o.auto_unmount, (unsigned)o.uring_threads);
	if (!cl.foreground) {
		detach_stdio();
		log_to_syslog();
	}
	notify(notify_fd, NULL);
	ret = kernel_io_serve(se, &cl);
out_unmount:
	auto_unmount_release();
	fuse_session_unmount(se);
	uring_io_stop();
	fuse_remove_signal_handlers(se);
out_store:
	if (store_close(st)) {
		fprintf(stderr, "pagededupfs: closing the store failed; it will be checked at the next mount\n");
		ret = 1;
	}
out_session:
	if (se)
		fuse_session_destroy(se);
out_args:
	free(cl.mountpoint);
	free(o.store);
	free(o.delta);
	fuse_opt_free_args(&args);
	return ret ? 1 : 0;
usage_error:
	fprintf(stderr, "Try 'pagededupfs --help' for more information.\n");
	ret = 1;
	goto out_session;
}
