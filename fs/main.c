/* main.c - pagededupfs start-up: options, the store, the FUSE session and
 * its loop; the operations are in pagededupfs.c. */
#define FUSE_USE_VERSION 314

#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <limits.h>
#include <malloc.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "archive/archive.h"
#include "kernel_io.h"
#include "pdfs.h"
#include "store/store.h"
#include "uring_io.h"

struct options {
	char *store;
	int nodedup, sync_blobs, no_sign_thread, no_uring, blob_files;
	unsigned long uring_threads, pack_mb;
	long pack_level;
	unsigned long mapsize_mb, sync_ms, sign_queue;
	double entry_timeout, attr_timeout, negative_timeout;
	int nstores;
};

#define OPT(t, p) { t, offsetof(struct options, p), 1 }
static const struct fuse_opt option_spec[] = {
	OPT("nodedup", nodedup),
	OPT("sync_blobs", sync_blobs),
	{ "mapsize_mb=%lu", offsetof(struct options, mapsize_mb), 0 },
	{ "sync_ms=%lu", offsetof(struct options, sync_ms), 0 },
	OPT("no_sign_thread", no_sign_thread),
	OPT("no_uring", no_uring),
	OPT("blob_files", blob_files),
	{ "pack_level=%ld", offsetof(struct options, pack_level), 0 },
	{ "pack_mb=%lu", offsetof(struct options, pack_mb), 0 },
	{ "uring_threads=%lu", offsetof(struct options, uring_threads), 0 },
	{ "sign_queue=%lu", offsetof(struct options, sign_queue), 0 },
	{ "entry_timeout=%lf", offsetof(struct options, entry_timeout), 0 },
	{ "attr_timeout=%lf", offsetof(struct options, attr_timeout), 0 },
	{ "negative_timeout=%lf", offsetof(struct options, negative_timeout), 0 },
	FUSE_OPT_END
};

static int opt_proc(void *data, const char *arg, int key, struct fuse_args *outargs)
{
	(void)outargs;
	struct options *o = data;
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
	       "Mounts the pagededup store STORE (made by 'pagededup mkfs', or made with\n"
	       "defaults when STORE is an empty or missing directory) on MOUNTPOINT.\n\n"
	       "pagededupfs options (-o name[=value],...):\n"
	       "    nodedup                store every file as a blob of its own (a baseline)\n"
	       "    sync_blobs             fsync each blob and commit durably before close() returns\n"
	       "    sync_ms=N              otherwise, sync the store every N ms (default 1000)\n"
	       "    mapsize_mb=N           initial LMDB map size (grows by itself when full)\n"
	       "    sign_queue=N           new pages waiting for their near-duplicate signature\n"
	       "                           before a close() signs the oldest itself (default 256)\n"
	       "    no_sign_thread         no background signer: pages are signed by near queries,\n"
	       "                           by close() past sign_queue and at unmount\n"
	       "    pack_level=N           zstd level of new pack records (default 3; -1: raw)\n"
	       "    pack_mb=N              a pack file is closed past N MiB (default 256)\n"
	       "    blob_files             keep a format 1 store's layout: new pages as files\n"
	       "                           under objects/ (tests of format 1 stores)\n"
	       "    entry_timeout=S        kernel name cache timeout in seconds (default 5)\n"
	       "    attr_timeout=S         kernel attribute cache timeout in seconds (default 5)\n"
	       "    negative_timeout=S     kernel cache of absent names (default 1)\n"
	       "    no_uring               serve requests through /dev/fuse only, even when the\n"
	       "                           kernel offers FUSE over io_uring (fuse module parameter\n"
	       "                           enable_uring=Y, Linux 6.14 and later)\n"
	       "    uring_threads=N        io_uring threads per CPU (default 4)\n"
	       "    allow_other            let other users in (the kernel checks permissions)\n\n",
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

/* glibc gives each of the worker threads an arena of its own and raises
 * its mmap threshold after the first large free, so the 4 KiB..1 MiB
 * buffers of pages being written (openfile.c) stay in the heaps once freed:
 * 36 MiB anonymous after a cp of 40,000 pages, 15 MiB with two arenas and
 * a fixed threshold (buffers from 128 KiB up go back to the system). */
static void tune_malloc(void)
{
	mallopt(M_ARENA_MAX, 2);
	mallopt(M_MMAP_THRESHOLD, 128 * 1024);
}

int main(int argc, char *argv[])
{
	tune_malloc();
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct options o = { .entry_timeout = 5, .attr_timeout = 5, .negative_timeout = 1 };
	struct fuse_cmdline_opts cl;
	int ret = 1, notify_fd = -1;
	struct fuse_session *se = NULL;
	struct store *st = NULL;
	char err[PD_ERRLEN] = "";

	if (fuse_opt_parse(&args, &o, option_spec, opt_proc) == -1)
		return 1;
	if (fuse_parse_cmdline(&args, &cl) != 0)
		return 1;
	if (cl.show_help) {
		usage(argv[0]);
		ret = 0;
		goto out_args;
	}
	if (cl.show_version) {
		printf("pagededupfs (store format %d), FUSE library %s\n", PD_FORMAT_VERSION, fuse_pkgversion());
		ret = 0;
		goto out_args;
	}
	if (!o.store || !cl.mountpoint) {
		fprintf(stderr, "usage: %s STORE MOUNTPOINT [options]  (--help for more)\n", argv[0]);
		goto out_args;
	}
	char fsname[PATH_MAX + 16];
	snprintf(fsname, sizeof fsname, "-ofsname=%s,subtype=pagededupfs,default_permissions", o.store);
	fuse_opt_add_arg(&args, fsname);

	if (!cl.foreground && background(&notify_fd))
		goto out_args;
	struct store_opts so = { .nodedup = o.nodedup, .sync_blobs = o.sync_blobs,
				 .mapsize = (uint64_t)o.mapsize_mb << 20, .sync_ms = (unsigned)o.sync_ms,
				 .no_sign_thread = o.no_sign_thread, .sign_queue = (unsigned)o.sign_queue,
				 .pack_level = (int)o.pack_level, .pack_max_bytes = (uint64_t)o.pack_mb << 20,
				 .blob_files = o.blob_files, .create = true };
	if (archive_open(o.store, &so, &st, err)) {
		fprintf(stderr, "pagededupfs: %s\n", err);
		notify(notify_fd, err);
		goto out_args;
	}
	struct pdfs fs = { st, o.entry_timeout, o.attr_timeout, o.negative_timeout, NULL };
	se = fuse_session_new(&args, &pd_ops, sizeof pd_ops, &fs);
	fs.se = se;
	if (!se) {
		notify(notify_fd, "pagededupfs: bad mount options");
		goto out_store;
	}
	if (fuse_set_signal_handlers(se) != 0 || fuse_session_mount(se, cl.mountpoint) != 0) {
		snprintf(err, sizeof err, "pagededupfs: cannot mount on %s", cl.mountpoint);
		notify(notify_fd, err);
		goto out_session;
	}
	if (kernel_io_install(se) != 0) {
		snprintf(err, sizeof err, "pagededupfs: cannot use the FUSE device of %s", cl.mountpoint);
		notify(notify_fd, err);
		goto out_unmount;
	}
	uring_io_configure(!o.no_uring, (unsigned)o.uring_threads);
	if (!cl.foreground)
		detach_stdio();
	notify(notify_fd, NULL);
	ret = kernel_io_serve(se, &cl);
out_unmount:
	fuse_session_unmount(se);
	uring_io_stop();
	fuse_remove_signal_handlers(se);
out_session:
	fuse_session_destroy(se);
out_store:
	if (store_close(st)) {
		fprintf(stderr, "pagededupfs: closing the store failed; it will be checked at the next mount\n");
		ret = 1;
	}
out_args:
	free(cl.mountpoint);
	free(o.store);
	fuse_opt_free_args(&args);
	return ret ? 1 : 0;
}
