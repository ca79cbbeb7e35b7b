/* rec.c - record codecs. See rec.h for every layout. */
#include "rec.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <xxhash.h>

#include "base/fp.h"
#include "base/varint.h"

void blobkey_encode(const struct blobkey *k, uint8_t out[BLOBKEY_BYTES])
{
	memcpy(out, k->md5, 16);
	out[16] = (uint8_t)(k->variant >> 24);
	out[17] = (uint8_t)(k->variant >> 16);
	out[18] = (uint8_t)(k->variant >> 8);
	out[19] = (uint8_t)k->variant;
}

void blobkey_decode(const uint8_t in[BLOBKEY_BYTES], struct blobkey *k)
{
	memcpy(k->md5, in, 16);
	k->variant = (uint32_t)in[16] << 24 | (uint32_t)in[17] << 16 | (uint32_t)in[18] << 8 | in[19];
}

bool blobkey_equal(const struct blobkey *a, const struct blobkey *b)
{
	return a->variant == b->variant && memcmp(a->md5, b->md5, 16) == 0;
}

void blobkey_name(const struct blobkey *k, char out[BLOBKEY_NAME_MAX])
{
	fp_hex(k->md5, out);
	if (k->variant)
		snprintf(out + 32, BLOBKEY_NAME_MAX - 32, ".%u", k->variant);
}

void blobkey_path(const struct blobkey *k, char out[BLOBKEY_PATH_MAX])
{
	char name[BLOBKEY_NAME_MAX];
	blobkey_name(k, name);
	snprintf(out, BLOBKEY_PATH_MAX, "objects/%.3s/%s", name, name);
}

bool blobkey_parse(const char *name, struct blobkey *k)
{
	size_t len = strlen(name);
	k->variant = 0;
	if (len < 32)
		return false;
	for (int i = 0; i < 32; i++)
		if (!((name[i] >= '0' && name[i] <= '9') || (name[i] >= 'a' && name[i] <= 'f')))
			return false;
	if (len > 32) {
		if (name[32] != '.' || len > 43 || name[33] < '1' || name[33] > '9')
			return false;
		uint64_t v = 0;
		for (size_t i = 33; i < len; i++) {
			if (name[i] < '0' || name[i] > '9')
				return false;
			v = v * 10 + (uint64_t)(name[i] - '0');
		}
		if (v > UINT32_MAX)
			return false;
		k->variant = (uint32_t)v;
	}
	return fp_unhex(name, k->md5) == 0;
}

static size_t fprec_encode_row1(const struct fprec *r, uint8_t *out)
{
	put_le64(out, r->refcount);
	put_le64(out + 8, r->size);
	memcpy(out + 16, r->xxh128, 16);
	put_le64(out + 32, r->simhash);
	out[40] = (uint8_t)(r->leaf ? r->flags | FPREC_LEAF : r->flags & ~FPREC_LEAF);
	out[41] = r->pos.nlines;
	out[42] = r->pos.k;
	out[43] = 0;
	size_t n = 44;
	for (unsigned i = 0; i < r->pos.nlines; i++, n += 4)
		put_le32(out + n, r->pos.line[i]);
	memcpy(out + n, r->pos.off, r->pos.k);
	n += r->pos.k;
	if (r->leaf) {
		put_le32(out + n, r->leaf);
		n += 4;
	}
	if (r->flags & FPREC_HAS_SKETCH) {
		memcpy(out + n, r->sketch, FPREC_SKETCH_BYTES);
		n += FPREC_SKETCH_BYTES;
	}
	if (r->flags & FPREC_PACKED) {
		put_le32(out + n, r->pack);
		put_le64(out + n + 4, r->pack_off);
		put_le64(out + n + 12, r->pack_len);
		put_le32(out + n + 20, r->pack_dict);
		n += 24;
	}
	return n;
}

static int fprec_decode_row1(const void *in, size_t len, struct fprec *r)
{
	const uint8_t *p = in;
	if (len < 44)
		return -EUCLEAN;
	r->refcount = get_le64(p);
	r->size = get_le64(p + 8);
	memcpy(r->xxh128, p + 16, 16);
	r->simhash = get_le64(p + 32);
	r->flags = p[40];
	memset(&r->pos, 0, sizeof r->pos);
	r->pos.nlines = p[41];
	r->pos.k = p[42];
	size_t leaf_bytes = (r->flags & FPREC_LEAF) ? 4 : 0;
	size_t sketch_bytes = (r->flags & FPREC_HAS_SKETCH) ? FPREC_SKETCH_BYTES : 0;
	size_t pack_bytes = (r->flags & FPREC_PACKED) ? 24 : 0;
	if (r->pos.nlines > CBF_MAX_LINES || r->pos.k > CBF_MAX_K ||
	    len != 44 + 4u * r->pos.nlines + r->pos.k + leaf_bytes + sketch_bytes + pack_bytes)
		return -EUCLEAN;
	size_t n = 44;
	for (unsigned i = 0; i < r->pos.nlines; i++, n += 4)
		r->pos.line[i] = get_le32(p + n);
	memcpy(r->pos.off, p + n, r->pos.k);
	n += r->pos.k;
	r->leaf = leaf_bytes ? get_le32(p + n) : 0;
	r->flags &= (uint8_t)~FPREC_LEAF;
	n += leaf_bytes;
	if (sketch_bytes)
		memcpy(r->sketch, p + n, FPREC_SKETCH_BYTES);
	n += sketch_bytes;
	r->pack = 0;
	r->pack_off = r->pack_len = 0;
	r->pack_dict = 0;
	r->ino = 0;
	if (pack_bytes) {
		r->pack = get_le32(p + n);
		r->pack_off = get_le64(p + n + 4);
		r->pack_len = get_le64(p + n + 12);
		r->pack_dict = get_le32(p + n + 20);
	}
	return 0;
}

/* Layout 1's length for the flags, nlines and k of a row's bytes 40-42. */
static size_t row1_len(const uint8_t *p)
{
	return 44 + 4u * p[41] + p[42] + ((p[40] & FPREC_LEAF) ? 4 : 0) + ((p[40] & FPREC_HAS_SKETCH) ? FPREC_SKETCH_BYTES : 0) +
	       ((p[40] & FPREC_PACKED) ? 24 : 0);
}

bool fprec_is_row1(const void *in, size_t len)
{
	const uint8_t *p = in;
	return len >= 44 && p[43] == 0 && len == row1_len(p);
}

static size_t fprec_encode_row2(const struct fprec *r, uint8_t *out)
{
	uint8_t flags = (uint8_t)(r->leaf ? r->flags | FPREC_LEAF : r->flags & ~FPREC_LEAF);
	uint8_t present = (uint8_t)((r->simhash ? FPREC_P_SIMHASH : 0) |
				    ((flags & FPREC_PACKED) && r->pack_dict ? FPREC_P_DICT : 0) |
				    (r->ino ? FPREC_P_INO : 0));
	size_t n = 0;
	out[n++] = FPREC_ROW2_TAG;
	out[n++] = flags;
	out[n++] = present;
	n += varint_put(out + n, r->refcount);
	n += varint_put(out + n, r->size);
	memcpy(out + n, r->xxh128, 16);
	n += 16;
	if (present & FPREC_P_SIMHASH) {
		put_le64(out + n, r->simhash);
		n += 8;
	}
	out[n++] = r->pos.nlines;
	out[n++] = r->pos.k;
	for (unsigned i = 0; i < r->pos.nlines; i++)
		n += varint_put(out + n, r->pos.line[i]);
	memcpy(out + n, r->pos.off, r->pos.k);
	n += r->pos.k;
	if (flags & FPREC_LEAF)
		n += varint_put(out + n, r->leaf);
	if (flags & FPREC_HAS_SKETCH) {
		memcpy(out + n, r->sketch, FPREC_SKETCH_BYTES);
		n += FPREC_SKETCH_BYTES;
	}
	if (flags & FPREC_PACKED) {
		n += varint_put(out + n, r->pack);
		n += varint_put(out + n, r->pack_off);
		n += varint_put(out + n, r->pack_len);
		if (present & FPREC_P_DICT)
			n += varint_put(out + n, r->pack_dict);
	}
	if (present & FPREC_P_INO)
		n += varint_put(out + n, r->ino);
	if (fprec_is_row1(out, n))
		out[n++] = 0; /* the pad: read as layout 2, not 1 */
	return n;
}

size_t fprec_encode(const struct fprec *r, bool row2, uint8_t *out)
{
	return row2 ? fprec_encode_row2(r, out) : fprec_encode_row1(r, out);
}

/* One varint of at most `max` at *n of p[0..len), moved past. */
static bool take_varint(const uint8_t *p, size_t len, size_t *n, uint64_t max, uint64_t *v)
{
	size_t got = *n < len ? varint_get(p + *n, len - *n, v) : 0;
	*n += got;
	return got && *v <= max;
}

static int fprec_decode_row2(const uint8_t *p, size_t len, struct fprec *r)
{
	memset(r, 0, sizeof *r);
	if (len < 3 + 2 + 16 + 2 || p[0] != FPREC_ROW2_TAG ||
	    (p[2] & ~(FPREC_P_SIMHASH | FPREC_P_DICT | FPREC_P_INO)))
		return -EUCLEAN;
	uint8_t flags = p[1], present = p[2];
	if ((present & FPREC_P_DICT) && !(flags & FPREC_PACKED))
		return -EUCLEAN;
	size_t n = 3;
	uint64_t v;
	if (!take_varint(p, len, &n, UINT64_MAX, &r->refcount) || !take_varint(p, len, &n, UINT64_MAX, &r->size) ||
	    len - n < 16)
		return -EUCLEAN;
	memcpy(r->xxh128, p + n, 16);
	n += 16;
	if (present & FPREC_P_SIMHASH) {
		if (len - n < 8 || !(r->simhash = get_le64(p + n)))
			return -EUCLEAN;
		n += 8;
	}
	if (len - n < 2 || p[n] > CBF_MAX_LINES || p[n + 1] > CBF_MAX_K)
		return -EUCLEAN;
	r->pos.nlines = p[n++];
	r->pos.k = p[n++];
	for (unsigned i = 0; i < r->pos.nlines; i++) {
		if (!take_varint(p, len, &n, UINT32_MAX, &v))
			return -EUCLEAN;
		r->pos.line[i] = (uint32_t)v;
	}
	if (len - n < r->pos.k)
		return -EUCLEAN;
	memcpy(r->pos.off, p + n, r->pos.k);
	n += r->pos.k;
	if (flags & FPREC_LEAF) {
		if (!take_varint(p, len, &n, UINT32_MAX, &v) || !v)
			return -EUCLEAN;
		r->leaf = (uint32_t)v;
	}
	if (flags & FPREC_HAS_SKETCH) {
		if (len - n < FPREC_SKETCH_BYTES)
			return -EUCLEAN;
		memcpy(r->sketch, p + n, FPREC_SKETCH_BYTES);
		n += FPREC_SKETCH_BYTES;
	}
	if (flags & FPREC_PACKED) {
		if (!take_varint(p, len, &n, UINT32_MAX, &v))
			return -EUCLEAN;
		r->pack = (uint32_t)v;
		if (!take_varint(p, len, &n, UINT64_MAX, &r->pack_off) ||
		    !take_varint(p, len, &n, UINT64_MAX, &r->pack_len))
			return -EUCLEAN;
		if (present & FPREC_P_DICT) {
			if (!take_varint(p, len, &n, UINT32_MAX, &v) || !v)
				return -EUCLEAN;
			r->pack_dict = (uint32_t)v;
		}
	}
	if ((present & FPREC_P_INO) && (!take_varint(p, len, &n, UINT64_MAX, &r->ino) || !r->ino))
		return -EUCLEAN;
	r->flags = (uint8_t)(flags & ~FPREC_LEAF);
	if (n + 1 == len && p[n] == 0 && fprec_is_row1(p, n))
		n++; /* the pad */
	return n == len ? 0 : -EUCLEAN;
}

int fprec_decode(const void *in, size_t len, struct fprec *r)
{
	return fprec_is_row1(in, len) ? fprec_decode_row1(in, len, r) : fprec_decode_row2(in, len, r);
}

size_t inode_encode(const struct inode *in, const char *target, size_t tlen, uint8_t *out)
{
	put_le32(out, in->mode);
	put_le32(out + 4, in->uid);
	put_le32(out + 8, in->gid);
	put_le32(out + 12, in->nlink);
	put_le64(out + 16, in->size);
	put_le64(out + 24, (uint64_t)in->atime.sec);
	put_le64(out + 32, (uint64_t)in->mtime.sec);
	put_le64(out + 40, (uint64_t)in->ctime.sec);
	put_le32(out + 48, in->atime.nsec);
	put_le32(out + 52, in->mtime.nsec);
	put_le32(out + 56, in->ctime.nsec);
	put_le32(out + 60, in->flags);
	put_le64(out + 64, in->rdev);
	if (in->flags & INODE_HAS_BLOB)
		blobkey_encode(&in->blob, out + 72);
	else
		memset(out + 72, 0, BLOBKEY_BYTES);
	memset(out + 92, 0, 4);
	if (tlen)
		memcpy(out + INODE_FIXED_BYTES, target, tlen);
	return INODE_FIXED_BYTES + tlen;
}

#define NS_PER_S 1000000000

/* t - m in nanoseconds; false when it does not fit (about 292 years). */
static bool time_diff_ns(const struct pd_time *t, const struct pd_time *m, int64_t *d)
{
	int64_t ds;
	if (t->nsec >= NS_PER_S || __builtin_sub_overflow(t->sec, m->sec, &ds) || ds > 9000000000 ||
	    ds < -9000000000)
		return false;
	*d = ds * NS_PER_S + (int64_t)t->nsec - (int64_t)m->nsec;
	return true;
}

static int time_add_ns(const struct pd_time *m, int64_t d, struct pd_time *t)
{
	int64_t ds = d / NS_PER_S, n = (int64_t)m->nsec + d % NS_PER_S;
	if (n < 0) {
		n += NS_PER_S;
		ds--;
	} else if (n >= NS_PER_S) {
		n -= NS_PER_S;
		ds++;
	}
	if (__builtin_add_overflow(m->sec, ds, &t->sec))
		return -EUCLEAN;
	t->nsec = (uint32_t)n;
	return 0;
}

size_t inode_encode_row2(const struct inode *in, uint8_t *out)
{
	uint8_t b[2 + 13 * VARINT_MAX_BYTES + 16 + 8];
	int64_t da = 0, dc = 0;
	if (S_ISLNK(in->mode) || in->mtime.nsec >= NS_PER_S || !time_diff_ns(&in->atime, &in->mtime, &da) ||
	    !time_diff_ns(&in->ctime, &in->mtime, &dc))
		return 0;
	uint32_t extra = in->flags & ~INODE_HAS_BLOB;
	uint8_t present = (da ? INODE_P_ATIME : 0) | (dc ? INODE_P_CTIME : 0) | (extra ? INODE_P_FLAGS : 0) |
			  (in->rdev ? INODE_P_RDEV : 0) | (in->flags & INODE_HAS_BLOB ? INODE_P_BLOB : 0) |
			  (in->name_parent ? INODE_P_NAME : 0);
	size_t n = 0;
	b[n++] = INODE_ROW2_TAG;
	b[n++] = present;
	n += varint_put(b + n, in->mode);
	n += varint_put(b + n, in->uid);
	n += varint_put(b + n, in->gid);
	n += varint_put(b + n, in->nlink);
	n += varint_put(b + n, in->size);
	n += varint_put(b + n, zigzag_encode(in->mtime.sec));
	n += varint_put(b + n, in->mtime.nsec);
	if (da)
		n += varint_put(b + n, zigzag_encode(da));
	if (dc)
		n += varint_put(b + n, zigzag_encode(dc));
	if (extra)
		n += varint_put(b + n, extra);
	if (in->rdev)
		n += varint_put(b + n, in->rdev);
	if (in->flags & INODE_HAS_BLOB) {
		memcpy(b + n, in->blob.md5, 16);
		n += 16;
		n += varint_put(b + n, in->blob.variant);
	}
	if (in->name_parent) {
		n += varint_put(b + n, in->name_parent);
		put_le64(b + n, in->name_hash);
		n += 8;
	}
	if (n >= INODE_FIXED_BYTES)
		return 0; /* the lengths tell the layouts apart */
	memcpy(out, b, n);
	return n;
}

/* A layout 2 row's next varint, no larger than max. */
static bool row2_num(const uint8_t *p, size_t len, size_t *pos, uint64_t max, uint64_t *v)
{
	size_t k = varint_get(p + *pos, len - *pos, v);
	*pos += k;
	return k && *v <= max;
}

static int inode_decode_row2(const uint8_t *p, size_t len, struct inode *in)
{
	uint64_t mode, uid, gid, nlink, msec, mnsec, da = 0, dc = 0, extra = 0, rdev = 0, variant = 0;
	size_t pos = 2;
	if (len < 2 || p[0] != INODE_ROW2_TAG || p[1] & ~(INODE_P_ATIME | INODE_P_CTIME | INODE_P_FLAGS |
							  INODE_P_RDEV | INODE_P_BLOB | INODE_P_NAME))
		return -EUCLEAN;
	uint8_t present = p[1];
	if (!row2_num(p, len, &pos, UINT32_MAX, &mode) || !row2_num(p, len, &pos, UINT32_MAX, &uid) ||
	    !row2_num(p, len, &pos, UINT32_MAX, &gid) || !row2_num(p, len, &pos, UINT32_MAX, &nlink) ||
	    !row2_num(p, len, &pos, UINT64_MAX, &in->size) || !row2_num(p, len, &pos, UINT64_MAX, &msec) ||
	    !row2_num(p, len, &pos, NS_PER_S - 1, &mnsec) ||
	    (present & INODE_P_ATIME && (!row2_num(p, len, &pos, UINT64_MAX, &da) || !da)) ||
	    (present & INODE_P_CTIME && (!row2_num(p, len, &pos, UINT64_MAX, &dc) || !dc)) ||
	    (present & INODE_P_FLAGS &&
	     (!row2_num(p, len, &pos, UINT32_MAX & ~INODE_HAS_BLOB, &extra) || !extra || extra & INODE_HAS_BLOB)) ||
	    (present & INODE_P_RDEV && (!row2_num(p, len, &pos, UINT64_MAX, &rdev) || !rdev)))
		return -EUCLEAN;
	if (present & INODE_P_BLOB) {
		if (len - pos < 16)
			return -EUCLEAN;
		memcpy(in->blob.md5, p + pos, 16);
		pos += 16;
		if (!row2_num(p, len, &pos, UINT32_MAX, &variant))
			return -EUCLEAN;
	} else {
		memset(in->blob.md5, 0, 16);
	}
	in->name_parent = in->name_hash = 0;
	if (present & INODE_P_NAME) {
		if (!row2_num(p, len, &pos, UINT64_MAX, &in->name_parent) || !in->name_parent || len - pos < 8)
			return -EUCLEAN;
		in->name_hash = get_le64(p + pos);
		pos += 8;
		if (in->name_hash >> 53 != 1)
			return -EUCLEAN;
	}
	if (pos != len || S_ISLNK((mode_t)mode))
		return -EUCLEAN;
	in->mode = (uint32_t)mode;
	in->uid = (uint32_t)uid;
	in->gid = (uint32_t)gid;
	in->nlink = (uint32_t)nlink;
	in->mtime.sec = zigzag_decode(msec);
	in->mtime.nsec = (uint32_t)mnsec;
	if (time_add_ns(&in->mtime, zigzag_decode(da), &in->atime) ||
	    time_add_ns(&in->mtime, zigzag_decode(dc), &in->ctime))
		return -EUCLEAN;
	in->flags = (uint32_t)extra | (present & INODE_P_BLOB ? INODE_HAS_BLOB : 0);
	in->rdev = rdev;
	in->blob.variant = (uint32_t)variant;
	return 0;
}

int inode_decode(const void *buf, size_t len, struct inode *in, const char **target, size_t *tlen)
{
	const uint8_t *p = buf;
	if (len < INODE_FIXED_BYTES) {
		if (target)
			*target = NULL;
		if (tlen)
			*tlen = 0;
		return inode_decode_row2(p, len, in);
	}
	in->mode = get_le32(p);
	in->uid = get_le32(p + 4);
	in->gid = get_le32(p + 8);
	in->nlink = get_le32(p + 12);
	in->size = get_le64(p + 16);
	in->atime.sec = (int64_t)get_le64(p + 24);
	in->mtime.sec = (int64_t)get_le64(p + 32);
	in->ctime.sec = (int64_t)get_le64(p + 40);
	in->atime.nsec = get_le32(p + 48);
	in->mtime.nsec = get_le32(p + 52);
	in->ctime.nsec = get_le32(p + 56);
	in->flags = get_le32(p + 60);
	in->rdev = get_le64(p + 64);
	blobkey_decode(p + 72, &in->blob);
	in->name_parent = in->name_hash = 0;
	if (target)
		*target = (const char *)p + INODE_FIXED_BYTES;
	if (tlen)
		*tlen = len - INODE_FIXED_BYTES;
	return 0;
}

uint64_t dirent_hash(const char *name, size_t len)
{
	/* 53 bits with the top one set: offsets stay above 2 ("." and "..")
	 * and below 2^62 (positive in a signed off_t). */
	return (XXH3_64bits(name, len) >> 11) | (1ull << 53);
}

uint64_t dirent_off(uint64_t hash, unsigned dupidx)
{
	return hash << 8 | (dupidx + 1);
}

size_t dirent_val_encode(const char *name, size_t len, uint64_t child, uint32_t mode, uint8_t *out)
{
	memcpy(out, name, len);
	out[len] = 0;
	put_le64(out + len + 1, child);
	out[len + 9] = (uint8_t)((mode & S_IFMT) >> 12);
	return len + 10;
}

int dirent_val_decode(const void *buf, size_t blen, const char **name, size_t *len, uint64_t *child,
		      uint32_t *type)
{
	const uint8_t *p = buf;
	const uint8_t *nul = memchr(p, 0, blen);
	if (!nul || (size_t)(nul - p) + 10 != blen)
		return -EUCLEAN;
	*name = buf;
	*len = (size_t)(nul - p);
	*child = get_le64(nul + 1);
	*type = (uint32_t)nul[9] << 12;
	return 0;
}
