/* store_ckpt.c - the last commit known whole on disk, kept beside LMDB for
 * a power cut.
 *
 * Commits are not synced by default (MDB_NOSYNC, store.c): LMDB writes a
 * commit's pages, then its meta page, into the page cache, and the sync
 * thread writes them out every sync_ms. Neither syncfs() nor fdatasync()
 * writes in order: a power cut in the middle of one can leave on disk the
 * meta page of a commit whose tree is only partly there, or pages of later
 * commits written over pages that the last durable meta page still names
 * (LMDB reuses freed pages). It is LMDB's documented risk of MDB_NOSYNC,
 * and it was measured: the default mode's power-cut test
 * (tests/stress/s_crash.sh powercut_default) lost a whole store in its
 * first cycle (LMDB came back with no format record) and, in another run,
 * left pages that read EIO and a tree that no prefix of the writes gives.
 *
 * So a sync is a checkpoint (store_checkpoint):
 *   1. with no commit running (store_commits_hold), the two meta pages of
 *      meta/data.mdb are copied and a read transaction is begun on the
 *      same commit N: LMDB reuses no page of N's tree while it lives;
 *   2. the store's files are synced: N's tree and every pack record N
 *      names are on disk (records are appended before their commit);
 *   3. the copy is written to meta/ckpt with N, and synced;
 *   4. the read transaction of the checkpoint before ends.
 * The file therefore always names a commit whose tree is whole on disk.
 * An open that finds the page cache of the last run gone (another boot,
 * or LMDB's meta page no longer cached: the file system went away under
 * it, as a power cut takes it) and a later commit in LMDB's meta pages
 * writes the copy back before LMDB opens: the store is at N, and what was
 * committed after N is lost as a whole (at most sync_ms and a sync's
 * time), as the README says of a power cut. A killed daemon leaves its
 * page cache behind, and the store opens at its last commit as before.
 * A clean close marks the file closed; -o sync_blobs makes each commit
 * durable in LMDB's own order, and the file says so (closed).
 *
 * The file: two slots of CKPT_SLOT(psize) bytes, written in turn, each
 *   0  magic "PDCKPT" 0 1      8  state (u32)     12 LMDB's page size (u32)
 *   16 sequence (u64)         24 commit N (u64)   32 data.mdb's inode (u64)
 *   40 data.mdb's device (u64)                    48 boot id (40 bytes)
 *   88 when N was taken (CLOCK_MONOTONIC, ns: what a power-cut test
 *      compares with its writers' clocks)
 *   96 meta pages 0 and 1 of data.mdb at N
 *   96 + 2 * psize: XXH3-64 of the bytes before it
 * (little-endian). The valid slot with the highest sequence is the file's
 * word; a torn write leaves the other. */
#include "store_int.h"
#include "base/byteorder.h"
#include "base/clock.h"
#include "base/fdio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

static const uint8_t ckpt_magic[8] = { 'P', 'D', 'C', 'K', 'P', 'T', 0, 1 };
#define CKPT_HEAD 96
#define CKPT_BOOT_LEN 40
#define CKPT_SLOT(psize) (((CKPT_HEAD + 2 * (uint64_t)(psize) + 8) + (psize) - 1) / (psize) * (psize))

/* LMDB's meta page (lmdb's mdb.c, format 1 of 0.9): a page header of 16
 * bytes, then MDB_meta, whose magic is at 0 and whose txnid is at 128 on
 * a 64-bit build. Read to check a copy and to compare commits, never
 * written but as whole pages. */
#define LMDB_META_MAGIC 0xBEEFC0DEu
#define LMDB_META_MAGIC_AT 16
#define LMDB_META_TXNID_AT (16 + 128)

struct ckpt_slot {
	uint32_t state;
	uint32_t psize;
	uint64_t seq, txnid, ino, dev, taken_ns;
	char boot[CKPT_BOOT_LEN];
	const uint8_t *pages; /* 2 * psize bytes */
};

static void boot_id(char out[CKPT_BOOT_LEN])
{
	memset(out, 0, CKPT_BOOT_LEN);
	int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	ssize_t n = read(fd, out, CKPT_BOOT_LEN - 1);
	close(fd);
	if (n > 0)
		out[strcspn(out, "\n")] = 0;
	else
		memset(out, 0, CKPT_BOOT_LEN);
}

/* The commit a meta page holds, 0 if it is not one. */
static uint64_t meta_txnid(const uint8_t *page)
{
	return get_le32(page + LMDB_META_MAGIC_AT) == LMDB_META_MAGIC ? get_le64(page + LMDB_META_TXNID_AT) : 0;
}

static uint64_t newest_txnid(const uint8_t *pages, uint32_t psize)
{
	uint64_t a = meta_txnid(pages), b = meta_txnid(pages + psize);
	return a > b ? a : b;
}

static void slot_encode(uint8_t *buf, const struct ckpt_slot *s)
{
	memset(buf, 0, CKPT_SLOT(s->psize));
	memcpy(buf, ckpt_magic, 8);
	put_le32(buf + 8, s->state);
	put_le32(buf + 12, s->psize);
	put_le64(buf + 16, s->seq);
	put_le64(buf + 24, s->txnid);
	put_le64(buf + 32, s->ino);
	put_le64(buf + 40, s->dev);
	memcpy(buf + 48, s->boot, CKPT_BOOT_LEN);
	put_le64(buf + 88, s->taken_ns);
	if (s->pages)
		memcpy(buf + CKPT_HEAD, s->pages, 2 * (size_t)s->psize);
	size_t end = CKPT_HEAD + 2 * (size_t)s->psize;
	put_le64(buf + end, XXH3_64bits(buf, end));
}

/* Slot at buf valid for page size psize: *s filled (pages into buf). */
static bool slot_decode(const uint8_t *buf, uint32_t psize, struct ckpt_slot *s)
{
	size_t end = CKPT_HEAD + 2 * (size_t)psize;
	if (memcmp(buf, ckpt_magic, 8) || get_le32(buf + 12) != psize || get_le64(buf + end) != XXH3_64bits(buf, end))
		return false;
	s->state = get_le32(buf + 8);
	s->psize = psize;
	s->seq = get_le64(buf + 16);
	s->txnid = get_le64(buf + 24);
	s->ino = get_le64(buf + 32);
	s->dev = get_le64(buf + 40);
	memcpy(s->boot, buf + 48, CKPT_BOOT_LEN);
	s->boot[CKPT_BOOT_LEN - 1] = 0;
	s->pages = buf + CKPT_HEAD;
	return true;
}

/* The file's word: the valid slot with the highest sequence (buf holds
 * both slots); false when neither is valid. */
static bool newest_slot(const uint8_t *buf, ssize_t got, uint32_t psize, struct ckpt_slot *out)
{
	struct ckpt_slot s[2];
	bool ok[2] = { false, false };
	uint64_t stride = CKPT_SLOT(psize);
	for (int i = 0; i < 2; i++)
		ok[i] = got >= (ssize_t)((uint64_t)(i + 1) * stride) && slot_decode(buf + i * stride, psize, &s[i]);
	if (!ok[0] && !ok[1])
		return false;
	*out = ok[0] && (!ok[1] || s[0].seq > s[1].seq) ? s[0] : s[1];
	return true;
}

static uint32_t os_page_size(void)
{
	long p = sysconf(_SC_PAGESIZE);
	return p > 0 ? (uint32_t)p : 4096;
}

/* Are data.mdb's two meta pages in the page cache? Asked before anything
 * here reads them; one mapping and one mincore() for both. */
static void meta_pages_cached(int fd, uint32_t psize, bool cached[2])
{
	cached[0] = cached[1] = true; /* cannot tell: trust the page cache, as before */
	void *m = mmap(NULL, 2 * (size_t)psize, PROT_READ, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED)
		return;
	unsigned char vec[64] = { 0 };
	if (mincore(m, 2 * (size_t)psize, vec) == 0)
		for (int i = 0; i < 2; i++)
			cached[i] = vec[(size_t)i * psize / os_page_size()] & 1;
	munmap(m, 2 * (size_t)psize);
}

/* What an open finds in meta/: the checkpoint, and data.mdb as LMDB left
 * it; writes the checkpoint's meta pages back when the page cache that
 * held later commits is gone. */
static int recover_in(int metafd, const char *dir, char note[PD_ERRLEN])
{
	uint32_t psize = os_page_size();
	uint64_t stride = CKPT_SLOT(psize);
	int cfd = openat(metafd, "ckpt", O_RDONLY | O_CLOEXEC);
	if (cfd < 0)
		return errno == ENOENT ? 0 : -errno;
	uint8_t *buf = malloc(2 * stride);
	int rc = buf ? 0 : -ENOMEM;
	ssize_t got = rc ? 0 : fd_pread_full(cfd, buf, 2 * stride, 0);
	close(cfd);
	struct ckpt_slot s;
	if (rc || got < 0 || !newest_slot(buf, got, psize, &s) || s.state != CKPT_OPEN) {
		free(buf);
		return rc ? rc : got < 0 ? (int)got : 0;
	}
	int dfd = openat(metafd, "data.mdb", O_RDWR | O_CLOEXEC);
	struct stat sb;
	if (dfd < 0 || fstat(dfd, &sb) || (uint64_t)sb.st_ino != s.ino || (uint64_t)sb.st_dev != s.dev) {
		/* no file, or another one (a rewrite renamed over it): the
		 * checkpoint names nothing here */
		if (dfd >= 0)
			close(dfd);
		free(buf);
		return 0;
	}
	/* Which meta page holds the newest commit, asked of the page cache
	 * before the read below brings the pages in. */
	bool cached[2];
	meta_pages_cached(dfd, psize, cached);
	uint8_t *now = malloc(2 * (size_t)psize);
	rc = now ? 0 : -ENOMEM;
	if (!rc && fd_pread_full(dfd, now, 2 * (size_t)psize, 0) != (ssize_t)(2 * (size_t)psize))
		rc = -EIO;
	uint64_t newest = rc ? 0 : newest_txnid(now, psize);
	char boot[CKPT_BOOT_LEN];
	boot_id(boot);
	bool same_boot = !*boot || !strcmp(boot, s.boot); /* no boot id here: the cache tells */
	int at = !rc && meta_txnid(now + psize) == newest ? 1 : 0;
	if (!rc && newest > s.txnid && !(same_boot && cached[at])) {
		rc = fd_pwrite_all(dfd, s.pages, 2 * (size_t)psize, 0);
		if (!rc && fdatasync(dfd))
			rc = -errno;
		if (!rc) {
			snprintf(note, PD_ERRLEN,
				 "%s: the page cache of its last run is gone (%s) and LMDB's last commits may not be whole on disk: back at its last checkpoint, commit %llu of %llu",
				 dir, same_boot ? "its file system was unmounted" : "the machine restarted",
				 (unsigned long long)s.txnid, (unsigned long long)newest);
			rc = 1;
		}
	}
	free(now);
	close(dfd);
	free(buf);
	return rc;
}

static int recover_locked(const char *dir, char note[PD_ERRLEN])
{
	char path[4096];
	if (snprintf(path, sizeof path, "%s/meta", dir) >= (int)sizeof path)
		return -ENAMETOOLONG;
	/* Never under a running daemon, whatever the page cache seems to say
	 * (a store on a file system without one): the store's lock, as
	 * store_open takes it, held for the recovery; busy, nothing is done. */
	char lock[4200];
	snprintf(lock, sizeof lock, "%s/lock", dir);
	int lockfd = open(lock, O_RDONLY | O_CLOEXEC);
	if (lockfd >= 0 && flock(lockfd, LOCK_EX | LOCK_NB)) {
		close(lockfd);
		return 0;
	}
	int rc = 0, metafd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (metafd < 0)
		rc = errno == ENOENT ? 0 : -errno;
	else
		rc = recover_in(metafd, dir, note);
	if (metafd >= 0)
		close(metafd);
	if (lockfd >= 0)
		close(lockfd);
	return rc;
}

int store_ckpt_recover(const char *dir, char err[PD_ERRLEN])
{
	char note[PD_ERRLEN] = "";
	int rc = recover_locked(dir, note);
	if (rc > 0)
		fprintf(stderr, "pagededup: %s\n", note);
	else if (rc < 0)
		snprintf(err, PD_ERRLEN, "cannot read the checkpoint of %s (%s/meta/ckpt): %s", dir, dir, strerror(-rc));
	return rc;
}

int store_ckpt_open(struct store *st)
{
	char path[4200];
	snprintf(path, sizeof path, "%s/meta", st->dir);
	int metafd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (metafd < 0)
		return -errno;
	int rc = 0;
	st->ckpt_psize = os_page_size();
	st->ckpt_data_fd = openat(metafd, "data.mdb", O_RDONLY | O_CLOEXEC);
	bool existed = faccessat(metafd, "ckpt", F_OK, 0) == 0;
	st->ckpt_fd = openat(metafd, "ckpt", O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (st->ckpt_data_fd < 0 || st->ckpt_fd < 0)
		rc = -errno;
	uint64_t stride = CKPT_SLOT(st->ckpt_psize);
	/* Both slots' blocks taken now: a checkpoint written later only
	 * overwrites them, and a full disk cannot refuse it (the compactor's
	 * and the close's syncs are checkpoints). */
	struct stat sb;
	if (!rc && fstat(st->ckpt_fd, &sb))
		rc = -errno;
	if (!rc && (uint64_t)sb.st_size < 2 * stride) {
		uint8_t *zero = calloc(1, 2 * stride);
		rc = zero ? fd_pwrite_all(st->ckpt_fd, zero + sb.st_size, 2 * stride - (uint64_t)sb.st_size, (uint64_t)sb.st_size) : -ENOMEM;
		free(zero);
		if (!rc && fdatasync(st->ckpt_fd))
			rc = -errno;
	}
	uint8_t *buf = rc ? NULL : malloc(2 * stride);
	if (!rc && !buf)
		rc = -ENOMEM;
	/* the numbering goes on from the file's newest slot */
	struct ckpt_slot s;
	ssize_t got = rc ? 0 : fd_pread_full(st->ckpt_fd, buf, 2 * stride, 0);
	st->ckpt_seq = got > 0 && newest_slot(buf, got, st->ckpt_psize, &s) ? s.seq + 1 : 1;
	free(buf);
	/* a new file's name durable before any checkpoint relies on it */
	if (!rc && !existed && fsync(metafd))
		rc = -errno;
	close(metafd);
	return rc;
}

void store_ckpt_close(struct store *st)
{
	if (st->ckpt_pin)
		mdb_txn_abort(st->ckpt_pin);
	st->ckpt_pin = NULL;
	if (st->ckpt_fd >= 0)
		close(st->ckpt_fd);
	if (st->ckpt_data_fd >= 0)
		close(st->ckpt_data_fd);
	st->ckpt_fd = st->ckpt_data_fd = -1;
}

/* Write the next slot and sync it. */
static int ckpt_put(struct store *st, uint32_t state, uint64_t txnid, uint64_t taken_ns, const uint8_t *pages)
{
	struct stat sb;
	if (fstat(st->ckpt_data_fd, &sb))
		return -errno;
	struct ckpt_slot s = { .state = state, .psize = st->ckpt_psize, .seq = st->ckpt_seq, .txnid = txnid,
			       .ino = (uint64_t)sb.st_ino, .dev = (uint64_t)sb.st_dev, .taken_ns = taken_ns,
			       .pages = pages };
	boot_id(s.boot);
	uint64_t stride = CKPT_SLOT(st->ckpt_psize);
	uint8_t *buf = malloc(stride);
	if (!buf)
		return -ENOMEM;
	slot_encode(buf, &s);
	int rc = fd_pwrite_all(st->ckpt_fd, buf, stride, (s.seq % 2) * stride);
	if (!rc && fdatasync(st->ckpt_fd))
		rc = -errno;
	free(buf);
	if (!rc)
		st->ckpt_seq++;
	return rc;
}

int store_ckpt_mark_closed(struct store *st)
{
	return st->ckpt_fd < 0 ? 0 : ckpt_put(st, CKPT_CLOSED, 0, pd_clock_ns(CLOCK_MONOTONIC), NULL);
}

/* Step 1: the meta pages of the last commit and a read transaction on it
 * (commits held by the caller; the map lock held too when nested, by the
 * commit that called). */
static int capture(struct store *st, bool nested, uint8_t *pages, MDB_txn **pin, uint64_t *txnid)
{
	if (fd_pread_full(st->ckpt_data_fd, pages, 2 * (size_t)st->ckpt_psize, 0) != (ssize_t)(2 * (size_t)st->ckpt_psize))
		return -EIO;
	if (!nested)
		pthread_rwlock_rdlock(&st->map_lock);
	int rc = pd_mdb_err(mdb_txn_begin(st->env, NULL, MDB_RDONLY, pin));
	MDB_envinfo info;
	if (!rc && mdb_env_info(st->env, &info) == 0)
		__atomic_store_n(&st->ckpt_top, (uint64_t)info.me_last_pgno, __ATOMIC_RELAXED);
	if (!nested)
		pthread_rwlock_unlock(&st->map_lock);
	if (rc)
		return rc;
	*txnid = (uint64_t)mdb_txn_id(*pin);
	/* the copy must be that commit's: LMDB's meta layout as read here */
	if (newest_txnid(pages, st->ckpt_psize) != *txnid) {
		mdb_txn_abort(*pin);
		*pin = NULL;
		return -EPROTO;
	}
	return 0;
}

/* Steps 2 to 4, and the dead records of the commits so far punched once
 * they are durable (store_commit.c, "Punched once durable"). Commits are
 * held before sync_run_mu is taken, by every caller alike (a commit that
 * finds the disk full calls this while it leads the group commit): no
 * thread waits for the commits while it holds sync_run_mu. */
int store_checkpoint(struct store *st, int (*sync_files)(struct store *st))
{
	bool take = st->ckpt_fd >= 0;
	bool nested = take ? store_commits_hold(st) : false;
	pthread_mutex_lock(&st->sync_run_mu);
	struct store_punches dead = store_punches_take(st);
	uint64_t taken_ns = pd_clock_ns(CLOCK_MONOTONIC), txnid = 0;
	MDB_txn *pin = NULL;
	uint8_t *pages = take ? malloc(2 * (size_t)st->ckpt_psize) : NULL;
	/* without a capture (durable commits, or none to be had) the sync
	 * alone, as without checkpoints */
	take = pages && capture(st, nested, pages, &pin, &txnid) == 0;
	if (st->ckpt_fd >= 0)
		store_commits_release(st, nested);
	int rc = sync_files(st);
	if (!rc && take)
		rc = ckpt_put(st, CKPT_OPEN, txnid, taken_ns, pages);
	if (!rc && take) {
		/* the checkpoint before is no longer needed: its pages may go */
		if (st->ckpt_pin)
			mdb_txn_abort(st->ckpt_pin);
		st->ckpt_pin = pin;
	} else if (pin) {
		mdb_txn_abort(pin);
	}
	free(pages);
	store_punches_settle(st, &dead, rc == 0);
	pthread_mutex_unlock(&st->sync_run_mu);
	return rc;
}

/* Early. The checkpoint's read transaction keeps every page freed after
 * it from reuse, so between two checkpoints LMDB's file grows by what the
 * commits of that while free: some 30 pages a commit of one page's rows,
 * 60 MB a second of a fast copy, which left a 22 MB tree in a file of
 * 160-480 MB (tests/bench/README.md, "Checkpoints for a power cut"). A
 * commit that finds the file grown CKPT_EARLY_BYTES past its last page at
 * the last capture wakes the sync thread for a checkpoint now, not at the
 * end of sync_ms: the next capture lets the pages freed before it go. */
#define CKPT_EARLY_BYTES (8u << 20)

void store_ckpt_watch(struct store *st)
{
	/* one kick is enough: the thread has not taken it yet */
	if (st->ckpt_fd < 0 || !st->ckpt_psize || store_syncer_kicked(st))
		return;
	uint64_t top = __atomic_load_n(&st->ckpt_top, __ATOMIC_RELAXED);
	MDB_envinfo info;
	if (!top || store_env_info(st, &info, NULL))
		return;
	if ((uint64_t)info.me_last_pgno >= top + CKPT_EARLY_BYTES / st->ckpt_psize)
		store_syncer_kick(st);
}
