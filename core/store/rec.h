/* rec.h - the on-disk records of the LMDB tables and their codecs.
 *
 * Every integer on disk has a fixed width. Keys are big-endian so that
 * LMDB's memcmp order is numeric order (a cursor walks one directory, one
 * inode's xattrs or one MD5's variants as a contiguous range); values are
 * little-endian. The layouts are written next to each struct.
 */
#ifndef PD_REC_H
#define PD_REC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/byteorder.h"
#include "filter/cbf.h"

#define PD_ROOT_INO 1
#define PD_NAME_MAX 255
#define PD_XATTR_NAME_MAX 255
#define PD_XATTR_VALUE_MAX 65536
#define PD_SYMLINK_MAX 4095

/* A blob's identity: the MD5 of its bytes and a variant number, 0 unless
 * another content with the same MD5 (a collision) or a -o nodedup copy came
 * first. Key layout: md5[16] then variant u32 big-endian (20 bytes). */
struct blobkey {
	uint8_t md5[16];
	uint32_t variant;
};
#define BLOBKEY_BYTES 20
void blobkey_encode(const struct blobkey *k, uint8_t out[BLOBKEY_BYTES]);
void blobkey_decode(const uint8_t in[BLOBKEY_BYTES], struct blobkey *k);
bool blobkey_equal(const struct blobkey *a, const struct blobkey *b);
/* Relative path of the blob file under the store: "objects/abc/<hex>[.N]".
 * One level of 4096 directories: a directory is made once per 4096 blobs
 * early on (two levels would make one per blob until 65536 exist), and a
 * billion blobs put about 250,000 names in each, which ext4's and xfs's
 * hashed directories handle. */
#define BLOBKEY_PATH_MAX 64
void blobkey_path(const struct blobkey *k, char out[BLOBKEY_PATH_MAX]);
/* The blob's file name: "<32 lowercase hex digits>" or that and
 * ".<variant>" (variant 1..2^32-1). */
#define BLOBKEY_NAME_MAX 48
void blobkey_name(const struct blobkey *k, char out[BLOBKEY_NAME_MAX]);
/* The inverse of blobkey_name: "<32 lowercase hex digits>" or
 * that and ".<variant>" (1..2^32-1, decimal, no leading zero). false for
 * any other name. */
bool blobkey_parse(const char *name, struct blobkey *k);

/* fingerprints: blobkey -> struct fprec, in one of two layouts.
 *
 * Layout 1 (every row of a store before format 6; 83 bytes for a packed
 * page with two filter lines and seven offsets):
 * Value (little-endian): refcount u64 | size u64 | xxh128 [16] | simhash u64 |
 *   flags u8 | nlines u8 | k u8 | reserved u8 | line u32 x nlines | off u8 x k |
 *   leaf u32 (present only with FPREC_LEAF) |
 *   sketch [64] (present only with FPREC_HAS_SKETCH) |
 *   pack u32 | offset u64 | length u64 | dictionary u32 (present only with
 *   FPREC_PACKED; dictionary: the id the record's encoding needs, 0 none)
 * The positions are on the filter leaf `leaf` (gfilter.h). Leaf 0 is not
 * written: records of the fixed filter, which had no leaf field, are on
 * leaf 0, the fixed filter's file.
 *
 * Layout 2 (format 6 on, store.h: every row a store of that format writes;
 * about 50 bytes for the same page). v is a varint (base/varint.h):
 *   tag u8 (FPREC_ROW2_TAG) | flags u8 (as layout 1's) | present u8 |
 *   refcount v | size v | xxh128 [16] |
 *   simhash u64 LE            (with FPREC_P_SIMHASH: a non-zero simhash) |
 *   nlines u8 | k u8 | line v x nlines | off u8 x k |
 *   leaf v                    (with FPREC_LEAF) |
 *   sketch [64]               (with FPREC_HAS_SKETCH) |
 *   pack v | offset v | length v  (with FPREC_PACKED) |
 *   dictionary v              (with FPREC_P_DICT: FPREC_PACKED and non-zero) |
 *   inode v                   (with FPREC_P_INO, format 7 on: the one inode
 *                              on the blob, non-zero; the blob then has no
 *                              `blob_inodes` rows, store.h) |
 *   pad u8 = 0                (only where the row without it would read as
 *                              layout 1, below)
 *   The fixed-width integers of layout 1 are mostly small (a refcount of 1,
 *   sizes of kilobytes, line numbers under 2^18, a pack number and offset).
 * A row is layout 1 when it is at least 44 bytes long, its byte 43 is zero
 * and its length is the one its bytes 40-42 give layout 1 (fprec_is_row1);
 * every other row is layout 2. The encoder of layout 2 adds the pad byte
 * to the rare row that would pass that test, so each row reads one way.
 * The decoder of layout 2 takes nothing its encoder would not write (a wrong tag,
 * unknown present bits, overlong varints, values past their width, bytes
 * left over), so fsck finds a damaged row as undecodable. */
#define FPREC_ROW2_TAG 0xf2
#define FPREC_P_SIMHASH 1u
#define FPREC_P_DICT 2u
#define FPREC_P_INO 4u
#define FPREC_HAS_SIMHASH 1u
#define FPREC_IN_FILTER 2u /* the positions were added to the filter */
#define FPREC_SIMHASH_LOW 4u /* the simhash is low-confidence (too little text) */
#define FPREC_LEAF 8u      /* a leaf id follows the offsets */
#define FPREC_HAS_SKETCH 16u /* a MinHash sketch follows (minhash.h) */
#define FPREC_SIG_PENDING 32u /* the near-duplicate signature is not computed
				* yet: the blob has a row in `sigq` (sigq.h) */
#define FPREC_PACKED 64u /* the bytes are a record in a pack (pack.h), not a
			  * file under objects/ (format 1) */
#define FPREC_BAD 128u   /* the record was found damaged: a read of it is
			  * EIO, and the next write of the same bytes stores
			  * them afresh and heals it (blob.h) */
#define FPREC_SKETCH_BYTES 64
struct fprec {
	uint64_t refcount;
	uint64_t size;
	uint8_t xxh128[16];
	uint64_t simhash;
	uint8_t flags;
	struct cbf_pos pos;
	uint32_t leaf;      /* filter leaf of pos */
	uint8_t sketch[FPREC_SKETCH_BYTES]; /* with FPREC_HAS_SKETCH */
	uint32_t pack;      /* with FPREC_PACKED: where the record is */
	uint64_t pack_off, pack_len;
	uint32_t pack_dict; /* and the dictionary it needs (0: none) */
	/* The blob's one inode when its row holds it (layout 2, format 7
	 * on: store_blob_inodes, store.h), else 0: its inodes are its
	 * `blob_inodes` rows. Layout 1 has no room for it. */
	uint64_t ino;
};
/* Layout 2's longest row (longer than layout 1's 136 + 4 * nlines + k):
 * three bytes, two u64 varints, the hash and simhash, nlines and k, the
 * lines, the offsets, the leaf, the sketch, the pack's four varints, the
 * inode, the pad. */
#define FPREC_MAX_BYTES (3 + 2 * 10 + 16 + 8 + 2 + 5 * CBF_MAX_LINES + CBF_MAX_K + 5 + FPREC_SKETCH_BYTES + 5 + 10 + 10 + 5 + 10 + 1)
/* r into out[FPREC_MAX_BYTES] in layout 2 when row2, else layout 1 (the
 * store's format says which: store_fp_row2); returns the length. Layout 1
 * drops r->ino: the caller keeps a store of layout 1 rows from putting an
 * inode in a row (store_ino_in_row). */
size_t fprec_encode(const struct fprec *r, bool row2, uint8_t *out);
/* Either layout; -EUCLEAN for a row that is neither. */
int fprec_decode(const void *in, size_t len, struct fprec *r);
/* Does the row read as layout 1? */
bool fprec_is_row1(const void *in, size_t len);

/* inodes: ino (u64 BE) -> struct inode, in one of two layouts, told apart
 * by the row's length.
 *
 * Layout 1 (every row of a store before format 4, and every symlink's row):
 *   96 bytes or more. Little-endian: mode u32 | uid u32 | gid u32 |
 *   nlink u32 | size u64 | atime s i64 | mtime s i64 | ctime s i64 |
 *   atime ns u32 | mtime ns u32 | ctime ns u32 | flags u32 | rdev u64 |
 *   blobkey [20] (zeros without INODE_HAS_BLOB) | reserved [4] (zeros) |
 *   symlink target (the rest).
 *
 * Layout 2 (format 4 on, every other inode whose row fits; store.h): fewer
 *   than 96 bytes. v is a varint, z a zigzag varint (base/varint.h):
 *   tag u8 (INODE_ROW2_TAG) | present u8 | mode v | uid v | gid v | nlink v |
 *   size v | mtime s z | mtime ns v |
 *   atime - mtime in ns z   (with INODE_P_ATIME; else atime = mtime) |
 *   ctime - mtime in ns z   (with INODE_P_CTIME; else ctime = mtime) |
 *   flags other than INODE_HAS_BLOB v (with INODE_P_FLAGS, non-zero) |
 *   rdev v                  (with INODE_P_RDEV, non-zero) |
 *   md5 [16] | variant v    (with INODE_P_BLOB, which is INODE_HAS_BLOB) |
 *   parent v | name hash u64 LE  (with INODE_P_NAME; format 5 on: the
 *                           inode's one name is the dirent (parent, hash)
 *                           whose child is this inode, and it has no
 *                           `links` row; parent non-zero, the hash as
 *                           dirent_hash makes them, bit 53 its top bit)
 *   A regular file's row is about 45 bytes instead of 96: times are one
 *   absolute value and two short differences, and zero fields are absent.
 *   The decoder takes nothing it would not write (unknown bits, overlong or
 *   out-of-range numbers, bytes left over, a symlink), so fsck finds a
 *   damaged row as undecodable. */
#define INODE_HAS_BLOB 1u
struct pd_time { int64_t sec; uint32_t nsec; };
struct inode {
	uint64_t ino;
	uint32_t mode, uid, gid, nlink;
	uint64_t size;
	struct pd_time atime, mtime, ctime;
	uint32_t flags;
	uint64_t rdev;
	struct blobkey blob; /* valid when flags & INODE_HAS_BLOB */
	/* Non-zero name_parent (layout 2 rows, format 5 on): the inode's one
	 * name is in dirent (name_parent, name_hash), and `links` has no row
	 * for it (ns.c says when a name is kept here). */
	uint64_t name_parent, name_hash;
};
#define INODE_FIXED_BYTES 96
#define INODE_ROW2_TAG 0x02
#define INODE_P_ATIME 1u
#define INODE_P_CTIME 2u
#define INODE_P_FLAGS 4u
#define INODE_P_RDEV 8u
#define INODE_P_BLOB 16u
#define INODE_P_NAME 32u
/* Layout 1 (which has no room for name_parent: the caller gives such an
 * inode a `links` row instead). */
size_t inode_encode(const struct inode *in, const char *target, size_t tlen, uint8_t *out);
/* Layout 2 into out[INODE_FIXED_BYTES]: its length (under 96), or 0 when
 * the inode has no layout 2 row (a symlink, a time difference past int64
 * nanoseconds, fields too large to fit): the caller writes layout 1. */
size_t inode_encode_row2(const struct inode *in, uint8_t *out);
/* Either layout; *target / *tlen point into `buf` (may be NULL; a layout 2
 * row has no target). -EUCLEAN for a row that is neither. */
int inode_decode(const void *buf, size_t len, struct inode *in, const char **target, size_t *tlen);

/* dirents: parent u64 BE | name hash u64 BE  (dup-sorted)
 *   -> name bytes | 0 | child ino u64 LE | type u8 (S_IFMT >> 12).
 * The hash gives readdir an offset that survives inserts and deletes
 * (as ext4's htree does); names that share a hash sit in one dup list. */
uint64_t dirent_hash(const char *name, size_t len);
#define DIRENT_VAL_MAX (PD_NAME_MAX + 1 + 8 + 1)
size_t dirent_val_encode(const char *name, size_t len, uint64_t child, uint32_t mode, uint8_t *out);
int dirent_val_decode(const void *buf, size_t blen, const char **name, size_t *len, uint64_t *child,
		      uint32_t *type);
/* readdir offsets: hash << 8 | (index within the hash's dup list + 1); 1 and 2
 * are "." and "..". */
uint64_t dirent_off(uint64_t hash, unsigned dupidx);

/* links: ino u64 BE (dup-sorted) -> parent u64 BE | name: every name of an
 * inode, except the one name of an inode whose row holds it (INODE_P_NAME,
 * format 5 on). */
#define LINK_VAL_MAX (8 + PD_NAME_MAX)

#endif
