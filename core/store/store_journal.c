/* store_journal.c - what a request of store_write_later needs to be done
 * again after a crash, kept until its batch commits. See store.h,
 * "The journal".
 *
 * Two files, meta/journal-0 and meta/journal-1, one of them taking the
 * appends. An append that finds every entry of the file before it
 * committed starts the file again (ftruncate to 0); past JOURNAL_SWITCH
 * bytes the appends go to the other file once every entry of that one
 * committed. So the files hold about one batch's entries, and their pages
 * are dropped from the page cache before the kernel's writeback reaches
 * them, as a rule: the journal costs a copy into memory, not a write to
 * the disk.
 *
 * Entry (every integer little-endian):
 *    0  magic u32          JOURNAL_MAGIC ("PDJ1")
 *    4  payload bytes u32
 *    8  seq u64            from 1, one more for each entry the store
 *                          ever appended (the meta row "journal_seq"
 *                          holds the last one committed)
 *   16  payload
 *       check u64          XXH3-64 of the bytes before it
 * An entry that does not check (a kill in its pwrite, a power cut that
 * kept part of it) ends the file's entries.
 */
#include "store_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>
#include <xxhash.h>

#include "base/byteorder.h"
#include "base/fdio.h"

#define JOURNAL_MAGIC 0x314a4450u /* "PDJ1" */
#define JOURNAL_HDR 16
#define JOURNAL_CHECK 8
#define JOURNAL_SWITCH (4u << 20)
#define JOURNAL_IOV 4 /* pieces of an entry's payload */
#define JOURNAL_META_KEY STORE_JOURNAL_META_KEY

struct store_journal {
	pthread_mutex_t mu;
	int fd[2];
	int active;        /* the file taking appends */
	uint64_t size[2];  /* bytes in each file */
	uint64_t last[2];  /* the last seq in each file, 0: none */
	uint64_t seq;      /* the last seq given */
	uint64_t applied;  /* the last seq committed (atomic) */
};

static int open_file(struct store *st, int i)
{
	char name[32];
	snprintf(name, sizeof name, "meta/journal-%d", i);
	int fd = openat(st->dirfd, name, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	return fd < 0 ? -errno : fd;
}

int store_journal_open(struct store *st)
{
	struct store_journal *j = calloc(1, sizeof *j);
	if (!j)
		return -ENOMEM;
	pthread_mutex_init(&j->mu, NULL);
	j->fd[0] = j->fd[1] = -1;
	int rc = 0;
	for (int i = 0; i < 2 && !rc; i++)
		if ((j->fd[i] = open_file(st, i)) < 0)
			rc = j->fd[i];
	MDB_txn *txn;
	if (!rc && !(rc = store_read_begin(st, &txn))) {
		rc = store_meta_get_u64(txn, st->db_meta, JOURNAL_META_KEY, &j->seq);
		if (rc == -ENOENT)
			rc = 0, j->seq = 0;
		store_read_end(st, txn);
	}
	j->applied = j->seq;
	for (int i = 0; i < 2 && !rc; i++) {
		off_t end = lseek(j->fd[i], 0, SEEK_END);
		if (end < 0)
			rc = -errno;
		else
			j->size[i] = (uint64_t)end;
	}
	st->journal = j;
	return rc;
}

void store_journal_close(struct store *st)
{
	struct store_journal *j = st->journal;
	if (!j)
		return;
	for (int i = 0; i < 2; i++)
		if (j->fd[i] >= 0)
			close(j->fd[i]);
	pthread_mutex_destroy(&j->mu);
	free(j);
	st->journal = NULL;
}

/* File i holds nothing still needed: it starts again (mu held). */
static int restart(struct store_journal *j, int i)
{
	if (j->size[i] && ftruncate(j->fd[i], 0))
		return -errno;
	j->size[i] = 0;
	j->last[i] = 0;
	return 0;
}

static bool all_applied(struct store_journal *j, int i)
{
	return j->last[i] <= __atomic_load_n(&j->applied, __ATOMIC_ACQUIRE);
}

/* Where the next entry goes (mu held): the active file, started again if
 * everything in it committed, or the other one once the active one is
 * long and the other is done with. */
static int choose_file(struct store_journal *j)
{
	int a = j->active, o = 1 - a;
	if (j->size[a] && all_applied(j, a))
		return restart(j, a);
	if (j->size[a] >= JOURNAL_SWITCH && all_applied(j, o)) {
		int rc = restart(j, o);
		if (!rc)
			j->active = o;
		return rc;
	}
	return 0;
}

int store_journal_append(struct store *st, const struct iovec *data, int n_data,
			 int (*then)(struct store *st, uint64_t seq, void *ctx), void *ctx)
{
	struct store_journal *j = st->journal;
	if (!j)
		return -EROFS;
	if (n_data < 1 || n_data > JOURNAL_IOV)
		return -EINVAL;
	size_t len = 0;
	for (int i = 0; i < n_data; i++)
		len += data[i].iov_len;
	if (len > UINT32_MAX - JOURNAL_HDR - JOURNAL_CHECK)
		return -EFBIG;
	pthread_mutex_lock(&j->mu);
	int rc = choose_file(j);
	if (rc) {
		pthread_mutex_unlock(&j->mu);
		return rc;
	}
	int a = j->active;
	uint64_t seq = j->seq + 1;
	uint8_t hdr[JOURNAL_HDR], check[JOURNAL_CHECK];
	put_le32(hdr, JOURNAL_MAGIC);
	put_le32(hdr + 4, (uint32_t)len);
	put_le64(hdr + 8, seq);
	XXH3_state_t *xs = XXH3_createState();
	if (!xs) {
		pthread_mutex_unlock(&j->mu);
		return -ENOMEM;
	}
	XXH3_64bits_reset(xs);
	XXH3_64bits_update(xs, hdr, sizeof hdr);
	struct iovec iov[JOURNAL_IOV + 2];
	iov[0] = (struct iovec){ hdr, sizeof hdr };
	for (int i = 0; i < n_data; i++) {
		XXH3_64bits_update(xs, data[i].iov_base, data[i].iov_len);
		iov[1 + i] = data[i];
	}
	put_le64(check, XXH3_64bits_digest(xs));
	XXH3_freeState(xs);
	iov[1 + n_data] = (struct iovec){ check, sizeof check };
	size_t total = sizeof hdr + len + sizeof check;
	ssize_t n = pwritev(j->fd[a], iov, n_data + 2, (off_t)j->size[a]);
	if (n != (ssize_t)total) {
		rc = n < 0 ? -errno : -ENOSPC;
		/* nothing of it may be read back */
		if (ftruncate(j->fd[a], (off_t)j->size[a]))
			rc = -errno;
		pthread_mutex_unlock(&j->mu);
		return rc;
	}
	if ((rc = then(st, seq, ctx))) {
		/* not queued: the entry must not be done again after a crash */
		if (ftruncate(j->fd[a], (off_t)j->size[a]))
			fprintf(stderr, "pagededupfs: journal: an entry not queued could not be taken back: %s\n",
				strerror(errno));
		pthread_mutex_unlock(&j->mu);
		return rc;
	}
	j->seq = seq;
	j->size[a] += total;
	j->last[a] = seq;
	pthread_mutex_unlock(&j->mu);
	return 0;
}

int wtx_journal_applied(struct wtx *w, uint64_t seq)
{
	return store_meta_put_u64(w->txn, w->st->db_meta, JOURNAL_META_KEY, seq);
}

void store_journal_done(struct store *st, uint64_t seq)
{
	struct store_journal *j = st->journal;
	if (!j)
		return;
	uint64_t cur = __atomic_load_n(&j->applied, __ATOMIC_RELAXED);
	while (cur < seq && !__atomic_compare_exchange_n(&j->applied, &cur, seq, false, __ATOMIC_RELEASE,
							 __ATOMIC_RELAXED))
		;
}

void store_journal_trim(struct store *st)
{
	struct store_journal *j = st->journal;
	if (!j)
		return;
	pthread_mutex_lock(&j->mu);
	for (int i = 0; i < 2; i++)
		if (all_applied(j, i))
			(void)restart(j, i); /* a file left long is only room, not a fault */
	pthread_mutex_unlock(&j->mu);
}

/* ---- replay ------------------------------------------------------------------ */

struct jentry {
	uint64_t seq;
	const uint8_t *data;
	uint32_t len;
};

struct jread {
	uint8_t *buf[2];
	struct jentry *v;
	size_t n, cap;
};

static int read_whole(int fd, uint64_t size, uint8_t **out)
{
	*out = malloc(size ? size : 1);
	if (!*out)
		return -ENOMEM;
	ssize_t n = fd_pread_full(fd, *out, size, 0);
	return n < 0 ? (int)n : (uint64_t)n == size ? 0 : -EIO;
}

/* The entries of one file that check, up to the first that does not. */
static int parse(struct jread *r, const uint8_t *b, uint64_t size)
{
	uint64_t off = 0;
	while (size - off >= JOURNAL_HDR + JOURNAL_CHECK) {
		const uint8_t *e = b + off;
		uint32_t len = get_le32(e + 4);
		if (get_le32(e) != JOURNAL_MAGIC || len > size - off - JOURNAL_HDR - JOURNAL_CHECK)
			break;
		if (XXH3_64bits(e, JOURNAL_HDR + (size_t)len) != get_le64(e + JOURNAL_HDR + len))
			break;
		if (r->n == r->cap) {
			size_t cap = r->cap ? 2 * r->cap : 64;
			struct jentry *v = realloc(r->v, cap * sizeof *v);
			if (!v)
				return -ENOMEM;
			r->v = v;
			r->cap = cap;
		}
		r->v[r->n++] = (struct jentry){ get_le64(e + 8), e + JOURNAL_HDR, len };
		off += JOURNAL_HDR + (uint64_t)len + JOURNAL_CHECK;
	}
	return 0;
}

static int by_seq(const void *a, const void *b)
{
	uint64_t x = ((const struct jentry *)a)->seq, y = ((const struct jentry *)b)->seq;
	return x < y ? -1 : x > y;
}

static int seq_cb(struct wtx *w, void *arg)
{
	return wtx_journal_applied(w, *(uint64_t *)arg);
}

int store_journal_replay(struct store *st, int (*fn)(struct store *st, uint64_t seq, const void *data, size_t len, void *ctx),
			 void *ctx, uint64_t *replayed, uint64_t *dropped)
{
	struct store_journal *j = st->journal;
	*replayed = *dropped = 0;
	if (!j)
		return 0;
	struct jread r = { { NULL, NULL }, NULL, 0, 0 };
	int rc = 0;
	for (int i = 0; i < 2 && !rc; i++)
		if (!(rc = read_whole(j->fd[i], j->size[i], &r.buf[i])))
			rc = parse(&r, r.buf[i], j->size[i]);
	if (!rc && r.n)
		qsort(r.v, r.n, sizeof *r.v, by_seq);
	uint64_t next = j->seq + 1, top = j->seq;
	for (size_t i = 0; i < r.n && !rc; i++) {
		if (r.v[i].seq > top)
			top = r.v[i].seq;
		if (r.v[i].seq < next)
			continue; /* committed before the crash */
		if (r.v[i].seq > next) {
			(*dropped)++; /* after a gap: a power cut kept it, not one before it */
			continue;
		}
		if (!(rc = fn(st, r.v[i].seq, r.v[i].data, r.v[i].len, ctx))) {
			(*replayed)++;
			next++;
		}
	}
	if (!rc && top >= next)
		rc = store_write(st, seq_cb, &top); /* the next entry's seq follows every one seen */
	if (!rc) {
		/* what was done is committed; nothing in the files is needed */
		j->seq = top;
		__atomic_store_n(&j->applied, top, __ATOMIC_RELEASE);
		for (int i = 0; i < 2 && !rc; i++)
			rc = restart(j, i);
		j->active = 0;
	}
	free(r.buf[0]);
	free(r.buf[1]);
	free(r.v);
	return rc;
}

int store_journal_count(int dirfd, uint64_t applied, uint64_t *n)
{
	struct jread r = { { NULL, NULL }, NULL, 0, 0 };
	int rc = 0;
	*n = 0;
	for (int i = 0; i < 2 && !rc; i++) {
		char name[32];
		snprintf(name, sizeof name, "meta/journal-%d", i);
		int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			rc = errno == ENOENT ? 0 : -errno;
			continue;
		}
		off_t end = lseek(fd, 0, SEEK_END);
		if (end < 0)
			rc = -errno;
		else if (!(rc = read_whole(fd, (uint64_t)end, &r.buf[i])))
			rc = parse(&r, r.buf[i], (uint64_t)end);
		close(fd);
	}
	for (size_t i = 0; i < r.n && !rc; i++)
		*n += r.v[i].seq > applied;
	free(r.buf[0]);
	free(r.buf[1]);
	free(r.v);
	return rc;
}
