/* near_rows.c - the simhash tables' keys and rows: a hash cut into blocks,
 * a block's key, the rest of the hash in a row's value, and near0's tail
 * (near.h, "Tables"). What near.c's changes and queries and near_check.c's
 * fsck share. */
#include "near_int.h"

#include <errno.h>
#include <stdlib.h>

/* Widths differ by at most one bit; the wider blocks come first. */
void near_block_span(unsigned i, unsigned ntables, unsigned *start, unsigned *width)
{
	unsigned base = 64 / ntables, extra = 64 % ntables;
	*width = base + (i < extra);
	*start = i * base + (i < extra ? i : extra);
}

uint64_t near_block(uint64_t h, unsigned i, unsigned ntables)
{
	unsigned start, width;
	near_block_span(i, ntables, &start, &width);
	return width == 64 ? h : (h << start) >> (64 - width);
}

/* Big-endian n-byte integers (n <= 8). */
static void put_be(uint8_t *p, uint64_t v, size_t n)
{
	for (size_t j = 0; j < n; j++)
		p[j] = (uint8_t)(v >> (8 * (n - 1 - j)));
}

uint64_t near_get_be(const uint8_t *p, size_t n)
{
	uint64_t v = 0;
	for (size_t j = 0; j < n; j++)
		v = v << 8 | p[j];
	return v;
}

static uint64_t low_bits(uint64_t v, unsigned bits)
{
	return bits >= 64 ? v : v & ((1ull << bits) - 1);
}

/* The key of block i of h: big-endian, as few bytes as the width needs. */
MDB_val near_block_key(uint8_t kb[8], uint64_t h, unsigned i, unsigned ntables)
{
	unsigned start, width;
	near_block_span(i, ntables, &start, &width);
	size_t n = (width + 7) / 8;
	put_be(kb, near_block(h, i, ntables), n);
	return (MDB_val){ n, kb };
}

/* A row keeps the bits of the hash that its key does not: the 48 others
 * for 16-bit blocks, in 6 bytes instead of 8 (a tenth of the index). */
size_t near_rest_bytes(unsigned i, unsigned ntables)
{
	unsigned start, width;
	near_block_span(i, ntables, &start, &width);
	return (64 - width + 7) / 8;
}

static uint64_t rest_of(uint64_t h, unsigned i, unsigned ntables)
{
	unsigned start, width;
	near_block_span(i, ntables, &start, &width);
	unsigned below = 64 - start - width;
	uint64_t above = start ? h >> (64 - start) : 0;
	return (below ? above << below : above) | low_bits(h, below);
}

/* The hash of a row: its key's block and the rest bits of its value. */
static uint64_t join(uint64_t block, uint64_t rest, unsigned i, unsigned ntables)
{
	unsigned start, width;
	near_block_span(i, ntables, &start, &width);
	unsigned below = 64 - start - width;
	uint64_t above = below < 64 ? rest >> below : 0;
	uint64_t h = start ? above << (64 - start) : 0;
	h |= width < 64 ? block << below : block;
	return h | low_bits(rest, below);
}

/* What follows the rest in a near0 row: the blob key (near0 layout 1)
 * or the first NEAR0_PREFIX bytes of its MD5 (layout 2, near.h). */
size_t near_tail0_bytes(const struct store *st)
{
	return st->near0_keys ? BLOBKEY_BYTES : NEAR0_PREFIX;
}

/* Bytes of a row's value: the rest, and in near0 the blob's tail after it. */
size_t near_row_bytes(const struct store *st, unsigned i, unsigned ntables)
{
	return near_rest_bytes(i, ntables) + (i ? 0 : near_tail0_bytes(st));
}

/* The value of h's row in table i (k: the blob, near0 only; NULL gives
 * the smallest row of h, for a range lookup). */
MDB_val near_row_val(const struct store *st, uint8_t vb[NEAR_ROW_MAX], uint64_t h, unsigned i, unsigned ntables,
		     const struct blobkey *k)
{
	size_t r = near_rest_bytes(i, ntables);
	put_be(vb, rest_of(h, i, ntables), r);
	if (!i && k && st->near0_keys)
		blobkey_encode(k, vb + r);
	else if (!i && k)
		memcpy(vb + r, k->md5, NEAR0_PREFIX);
	else if (!i)
		memset(vb + r, 0, near_tail0_bytes(st));
	return (MDB_val){ near_row_bytes(st, i, ntables), vb };
}

/* The hash of a row of table i, whose key's block is `block`. */
uint64_t near_row_hash(uint64_t block, const uint8_t *val, unsigned i, unsigned ntables)
{
	return join(block, near_get_be(val, near_rest_bytes(i, ntables)), i, ntables);
}

/* The blobs a near0 row of layout 2 stands for: those of its MD5 prefix
 * whose record has simhash h, other than `skip` (may be NULL), in key
 * order, into *v (malloc'd, *n of them; v NULL: counted only). Nearly always one: a 32-bit
 * prefix is shared by a second blob about once in 4 billion / blobs, and
 * then the simhash tells them apart but for variants of one MD5 (a
 * collision, -o nodedup copies), which the row stands for together. */
int near_prefix_blobs(MDB_txn *txn, struct store *st, const uint8_t *prefix, uint64_t h,
		      const struct blobkey *skip, struct blobkey **v, size_t *n)
{
	uint8_t kb[BLOBKEY_BYTES] = { 0 };
	memcpy(kb, prefix, NEAR0_PREFIX);
	if (v)
		*v = NULL;
	*n = 0;
	MDB_cursor *c;
	int rc = pd_mdb_err(mdb_cursor_open(txn, st->db_fp, &c));
	if (rc)
		return rc;
	size_t cap = 0;
	MDB_val key = { BLOBKEY_BYTES, kb }, val;
	int mrc;
	for (mrc = mdb_cursor_get(c, &key, &val, MDB_SET_RANGE);
	     mrc == 0 && !rc && key.mv_size == BLOBKEY_BYTES && !memcmp(key.mv_data, prefix, NEAR0_PREFIX);
	     mrc = mdb_cursor_get(c, &key, &val, MDB_NEXT)) {
		struct fprec r;
		struct blobkey k;
		if (fprec_decode(val.mv_data, val.mv_size, &r) || !(r.flags & FPREC_HAS_SIMHASH) || r.simhash != h)
			continue; /* (an undecodable record is fsck's to report) */
		blobkey_decode(key.mv_data, &k);
		if (skip && blobkey_equal(&k, skip))
			continue;
		if (!v) {
			(*n)++;
			continue;
		}
		if (*n == cap) {
			struct blobkey *m = realloc(*v, (cap = cap ? 2 * cap : 2) * sizeof *m);
			if (!m) {
				rc = -ENOMEM;
				break;
			}
			*v = m;
		}
		(*v)[(*n)++] = k;
	}
	mdb_cursor_close(c);
	if (!rc && mrc && mrc != MDB_NOTFOUND)
		rc = pd_mdb_err(mrc);
	if (rc && v) {
		free(*v);
		*v = NULL;
	}
	if (rc)
		*n = 0;
	return rc;
}
