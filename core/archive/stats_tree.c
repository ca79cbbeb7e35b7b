/* stats_tree.c - the figures of one directory's subtree (user.dedup.stats
 * on a directory, `pagededup stats DIR`): a crawl's own files, bytes,
 * distinct contents, and the contents no file outside it shares.
 *
 * A walk of the subtree, one directory listing at a time (each its own
 * read transaction, so a large crawl does not pin one LMDB snapshot), with
 * a hash set of the blobs met and how many of the subtree's inodes refer
 * to each. A blob whose refcount equals that number is held only here.
 * Hard links are counted once (a set of the multiply-linked inodes seen).
 * Cost: one inode read per entry and one record read per distinct blob. */
#include "stats.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "blob/blob.h"
#include "ns.h"

/* Open-addressing set of 20-byte keys with a count each. */
struct kset {
	uint8_t (*key)[BLOBKEY_BYTES + 8]; /* key, then the count (u64) */
	size_t cap, n;
};

static uint64_t key_hash(const uint8_t *k)
{
	uint64_t h;
	memcpy(&h, k, 8); /* an MD5 (or an inode number) is uniform enough */
	return h * 0x9E3779B97F4A7C15ull;
}

static int kset_grow(struct kset *s)
{
	size_t cap = s->cap ? 2 * s->cap : 1024;
	uint8_t (*k)[BLOBKEY_BYTES + 8] = calloc(cap, sizeof *k);
	if (!k)
		return -ENOMEM;
	static const uint8_t empty[BLOBKEY_BYTES + 8];
	for (size_t i = 0; i < s->cap; i++) {
		if (!memcmp(s->key[i], empty, sizeof empty))
			continue;
		size_t j = key_hash(s->key[i]) & (cap - 1);
		while (memcmp(k[j], empty, sizeof empty))
			j = (j + 1) & (cap - 1);
		memcpy(k[j], s->key[i], sizeof *k);
	}
	free(s->key);
	s->key = k;
	s->cap = cap;
	return 0;
}

/* Count one more of key; *first when it was not in the set. */
static int kset_add(struct kset *s, const uint8_t key[BLOBKEY_BYTES], bool *first)
{
	if (2 * (s->n + 1) > s->cap && kset_grow(s))
		return -ENOMEM;
	size_t j = key_hash(key) & (s->cap - 1);
	static const uint8_t zero[8];
	for (;;) {
		uint8_t *e = s->key[j];
		uint64_t cnt;
		memcpy(&cnt, e + BLOBKEY_BYTES, 8);
		if (!memcmp(e + BLOBKEY_BYTES, zero, 8)) {
			memcpy(e, key, BLOBKEY_BYTES);
			cnt = 1;
			memcpy(e + BLOBKEY_BYTES, &cnt, 8);
			s->n++;
			*first = true;
			return 0;
		}
		if (!memcmp(e, key, BLOBKEY_BYTES)) {
			cnt++;
			memcpy(e + BLOBKEY_BYTES, &cnt, 8);
			*first = false;
			return 0;
		}
		j = (j + 1) & (s->cap - 1);
	}
}

struct walk {
	struct stats_tree *t;
	struct kset blobs, links;
	uint64_t *stack; /* directories still to list */
	size_t n, cap;
	int err;
};

static int visit(void *ctx, const char *name, size_t len, uint64_t ino, uint32_t type, uint64_t next_off,
		 const struct inode *in)
{
	(void)type;
	struct walk *w = ctx;
	(void)next_off;
	if ((len == 1 && name[0] == '.') || (len == 2 && name[0] == '.' && name[1] == '.'))
		return 0;
	bool first = true;
	if (S_ISDIR(in->mode)) {
		w->t->dirs++;
		if (w->n == w->cap) {
			size_t cap = w->cap ? 2 * w->cap : 64;
			uint64_t *s = realloc(w->stack, cap * sizeof *s);
			if (!s)
				return w->err = -ENOMEM;
			w->stack = s;
			w->cap = cap;
		}
		w->stack[w->n++] = ino;
		return 0;
	}
	if (!S_ISREG(in->mode)) {
		w->t->others++;
		return 0;
	}
	if (in->nlink > 1) {
		uint8_t k[BLOBKEY_BYTES] = { 0 };
		memcpy(k, &ino, 8);
		if ((w->err = kset_add(&w->links, k, &first)))
			return w->err;
		if (!first)
			return 0;
	}
	w->t->files++;
	w->t->logical_bytes += in->size;
	if (in->flags & INODE_HAS_BLOB) {
		uint8_t k[BLOBKEY_BYTES];
		blobkey_encode(&in->blob, k);
		if ((w->err = kset_add(&w->blobs, k, &first)))
			return w->err;
	}
	return 0;
}

/* Each distinct blob: its size, and whether the subtree holds every
 * reference to it. */
static int tally_blobs(struct store *st, struct walk *w)
{
	MDB_txn *txn;
	int rc = ns_read_begin(st, &txn);
	if (rc)
		return rc;
	static const uint8_t zero[8];
	for (size_t i = 0; i < w->blobs.cap && !rc; i++) {
		uint8_t *e = w->blobs.key[i];
		if (!memcmp(e + BLOBKEY_BYTES, zero, 8))
			continue;
		uint64_t cnt;
		memcpy(&cnt, e + BLOBKEY_BYTES, 8);
		struct blobkey k;
		struct fprec r;
		blobkey_decode(e, &k);
		int g = blob_get(txn, st, &k, &r);
		if (g == -ENOENT)
			continue; /* released since the walk read its inode */
		if ((rc = g))
			break;
		w->t->blobs++;
		w->t->unique_bytes += r.size;
		if (r.refcount <= cnt) {
			w->t->own_blobs++;
			w->t->own_bytes += r.size;
		}
	}
	store_read_end(st, txn);
	return rc;
}

int stats_tree(struct store *st, uint64_t dir, struct stats_tree *t)
{
	memset(t, 0, sizeof *t);
	struct walk w = { .t = t };
	int rc = 0;
	uint64_t cur = dir;
	for (;;) {
		rc = ns_readdir(st, cur, 0, true, visit, &w);
		if (rc || (rc = w.err))
			break;
		if (!w.n)
			break;
		cur = w.stack[--w.n];
	}
	if (!rc)
		rc = tally_blobs(st, &w);
	free(w.blobs.key);
	free(w.links.key);
	free(w.stack);
	return rc;
}
