/* fsck_int.h - what the parts of fsck share (private to core/fsck*.c):
 * the struct fsck that every pass reads and fills, the kinds of report
 * lines, the repairs recorded by the check, and the functions one part
 * calls in another. The public API is fsck.h; the design is in fsck.c. */
#ifndef PD_FSCK_INT_H
#define PD_FSCK_INT_H

#include "fsck.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "blob/blob.h"
#include "base/fp.h"
#include "archive/ns.h"
#include "archive/paths.h"
#include "store/rec.h"
#include "near/sigq.h"
#include "store/store.h"

#define REPORT_LINES 50        /* lines per kind of problem, then a count */
#define PROGRESS_EVERY 16384   /* items between progress calls */
#define MAX_THREADS 16

/* ---- growable arrays and a byte arena -------------------------------- */

struct vec {
	char *v;
	size_t n, cap, el;
};

#define VEC(type) { NULL, 0, 0, sizeof(type) }
#define AT(vec, type, i) (((type *)(vec).v)[i])

/* ---- what the check keeps -------------------------------------------- */

/* Kinds of report lines: each kind shows REPORT_LINES lines, then counts. */
enum kind {
	K_NOTE, K_REPAIR, K_INODE, K_NAME, K_LINK, K_NLINK, K_TREE, K_ORPHAN, K_BLOBREF,
	K_REFCOUNT, K_BLOB, K_FILE, K_FILTER, K_NEAR, K_TOTAL, K_LEFTOVER, K_LEFT, K_N
};

struct dnode {
	uint64_t ino, parent; /* parent: of its first link record, 0 if none */
	uint32_t nlink, names, subdirs;
	uint8_t state;        /* tree walk: 0 unknown, 1 on the path, 2 connected, 3 not */
	bool orphan;
};

/* A (blob, ino) reference. */
struct bref {
	uint8_t key[BLOBKEY_BYTES];
	uint64_t ino;
};

/* Name repairs. */
enum nfix_kind {
	NF_DANGLING,      /* dirent whose inode does not exist: remove */
	NF_STRAY_LINK,    /* link record of an inode that does not exist: remove */
	NF_ADD_LINK,      /* dirent without its link record: add it */
	NF_ADD_DIRENT,    /* link record without its dirent: restore it, or drop the link */
	NF_LINK_MISMATCH, /* link record whose name is another inode: remove */
	NF_TYPE,          /* dirent with the wrong type: rewrite */
	NF_REHASH,        /* dirent under the wrong hash: refile */
	NF_BAD_PARENT,    /* dirent in something that is not a directory: to lost+found */
	NF_BAD_NAME,      /* dirent with an impossible name: to lost+found */
	NF_RAW_DIRENT,    /* undecodable dirent: remove (key, value in the arena) */
	NF_RAW_LINK,      /* malformed link record: remove */
	NF_RAW_BLOBREF,   /* malformed blob_inodes entry: remove */
	NF_RAW_FP,        /* fingerprint record with a malformed key: remove */
};
struct nfix {
	uint8_t kind;
	uint32_t type;          /* S_IFMT of the dirent */
	uint64_t parent, child, hash;
	size_t off;             /* name (or raw key then value) in the arena */
	uint32_t len, vlen;     /* name length (raw: key length, value length) */
};

/* Per-blob repairs. */
enum kfix_kind { KF_REFCOUNT, KF_UNREFERENCED, KF_LOST, KF_RECREATE, KF_REPOS };
struct kfix {
	uint8_t key[BLOBKEY_BYTES];
	uint8_t kind;
	bool file;      /* its file is in objects/ */
	bool damaged;   /* KF_LOST: the file holds other bytes (moved to damaged/) */
	bool bad_record; /* the record is undecodable */
	uint64_t refs;
};

/* A file to remove after the commit (offset of its path in the arena). */
struct pathref {
	size_t off;
	uint32_t len;
};

struct fsck {
	const struct fsck_opts *o;
	struct fsck_result *res;
	const char *dir;
	int lockfd;
	struct store sh;        /* environment, tables, dir fd, filter */
	MDB_txn *txn;
	bool writable, clean, filter_trusted;
	uint64_t generation;
	struct pd_counters stored; /* the totals in meta */
	struct pd_counters computed;
	struct pd_time now;
	uint64_t shown[K_N];
	/* namespace */
	struct vec dirs;        /* struct dnode, by ino */
	XXH128_hash_t s_dirent, s_link, s_iblob, s_bi;
	uint64_t n_dirent, n_link, n_iblob, n_bi;
	uint64_t bad_inodes;
	/* filter: the tree, and each leaf's first index in tally (by leaf id;
	 * UINT64_MAX for ids the tree does not hold) */
	struct gf_tree tree;
	uint64_t *leaf_base;
	uint64_t ncounters;
	uint8_t *tally;         /* stored positions per counter, up to 255 */
	struct vec tally_over;  /* struct { idx, count } for counters at 255 and more */
	struct gfilter *anon;   /* positions when the filter files are unusable */
	/* what repair does */
	struct vec nfix, arena, stale, missing, kfix, rm_files;
	bool fix_filter, fix_near, fix_sigs, fix_sigq, fix_packs, fix_deltas, fix_any;
	bool fix_layout; /* near tables of an older layout (near.h) */
	bool fix_names;  /* names in link records that inode rows may hold (ns.h) */
	bool fix_fprows; /* fingerprint rows of layout 1 (rec.h) */
	bool fix_bi;     /* blobs whose inodes are not in format 7's form (store.h) */
	bool fix_near0;  /* near0 of an older layout (near.h) */
	uint64_t journal_waiting; /* pages the journal holds not committed (sealed by the repair's open) */
	uint64_t bi_lone;     /* blobs of one inode listed in blob_inodes (format 7: in their row) */
	uint64_t bi_rows;     /* inodes held by fingerprint rows (format 7) */
	uint64_t names_to_rows;
	/* repair: the names inode rows held before the names' round trip,
	 * (ino, parent, hash) triples ascending by ino (fsck_repair.c) */
	struct vec names_held;
	uint64_t fp_rows1;    /* fingerprint rows of layout 1 (rec.h): a writable open converts them */
	struct vec pack_index;  /* repair: every page record of the packs (fsck_packs.c) */
	/* What pass 3's walk of the fingerprint rows tallied for the pack
	 * checks (fsck_packs.c: fsck_rows_tally), so that they need no walk
	 * of their own: each pack's live sums, each dictionary's records. */
	struct vec row_sums;    /* struct pack_sum */
	uint64_t *row_dicts;    /* records by dictionary id, row_dicts_cap ids */
	size_t row_dicts_cap;
	bool pack_index_built;
	uint64_t lf_ino;        /* repair: the lost+found directory */
	unsigned threads;
};

/* A damaged blob file moved out of objects/ (from) to damaged/ (to). */
struct moved {
	char from[BLOBKEY_PATH_MAX], to[128];
};

/* ---- fsck.c: arrays, report and progress lines, opening the store, recording repairs */

void *fsck_vec_push(struct vec *a);
void fsck_vec_free(struct vec *a);
size_t fsck_arena_add(struct vec *a, const void *p, size_t len);
void fsck_say(struct fsck *f, enum kind k, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void fsck_prog(struct fsck *f, const char *phase, uint64_t done, uint64_t total);
void fsck_tick(struct fsck *f, const char *phase, uint64_t *done, uint64_t total);
uint64_t entries(struct fsck *f, MDB_dbi db);
void fsck_blob_name(const uint8_t key[BLOBKEY_BYTES], char out[48]);
/* fn(f, key, r, ctx) for every fingerprint row that decodes (one that does
 * not is pass 4's to report); non-zero stops the walk with that value. */
int fsck_fp_rows_each(struct fsck *f, int (*fn)(struct fsck *f, const uint8_t *key, const struct fprec *r, void *ctx),
		      void *ctx);
const char *fsck_type_name(uint32_t mode);
bool fsck_name_valid(const char *name, size_t len);
int fsck_counters_write(struct fsck *f, struct pd_counters *c);
const struct gfilter *fsck_geometry_filter(struct fsck *f);
/* The tally index of counter idx of leaf; UINT64_MAX if out of the tree. */
uint64_t fsck_tally_index(const struct fsck *f, uint32_t leaf, uint64_t idx);
int fsck_add_nfix(struct fsck *f, enum nfix_kind kind, uint64_t parent, uint64_t child, uint64_t hash,
	     uint32_t type, const void *name, size_t len, const void *val, size_t vlen);
int fsck_add_raw(struct fsck *f, enum nfix_kind kind, const MDB_val *k, const MDB_val *v);
int fsck_add_kfix(struct fsck *f, const uint8_t *key, enum kfix_kind kind, bool file, bool damaged,
	     uint64_t refs);
int fsck_add_rm_file(struct fsck *f, const char *rel);

/* ---- fsck_ns.c: facts and sums, passes 1 and 2, the directory tree */

void fsck_blob_fact(XXH128_hash_t *s, const uint8_t key[BLOBKEY_BYTES], uint64_t ino);
bool fsck_sums_equal(XXH128_hash_t a, XXH128_hash_t b);
int fsck_pass_inodes(struct fsck *f);
int fsck_tree_walk(struct vec *dirs, void (*fn)(void *ctx, struct dnode *top, bool cycle), void *ctx,
	      uint64_t *cut_off);
int fsck_check_dirs(struct fsck *f);
int fsck_pass_dirents(struct fsck *f);
int fsck_dirent_lookup(MDB_cursor *c, uint64_t parent, const char *name, size_t len, uint64_t *child,
		  uint32_t *type);
int fsck_diagnose_names(struct fsck *f);

/* ---- fsck_blobindex.c: pass 3 */

int fsck_pass_blob_index(struct fsck *f);

/* ---- fsck_blobs.c: pass 4, the near-duplicate tables, staging */

int fsck_pass_blobs(struct fsck *f);
int fsck_check_near(struct fsck *f);
int fsck_walk_staging(struct fsck *f);

/* ---- fsck_filter.c: pass 5 and the totals */

int fsck_pass_filter(struct fsck *f);
void fsck_check_totals(struct fsck *f);
int fsck_repair_totals(struct fsck *f);

/* ---- fsck_packs.c: pack totals, records rebuilt from the packs */

/* The live records of one pack, summed from the fingerprint rows. */
struct pack_sum {
	uint32_t pack;
	uint64_t bytes, records;
};
/* Tally fingerprint row r for the pack checks (f->row_sums, f->row_dicts:
 * pass 3's walk calls it for every row that decodes). */
int fsck_rows_tally(struct fsck *f, const struct fprec *r);
/* The packs' live totals and the dictionaries' counts against what
 * fsck_rows_tally counted (after pass 3). */
int fsck_check_packs(struct fsck *f);
int fsck_repair_pack_totals(struct fsck *f);
/* The deltas' link rows and kept bases (blob.h): check; repair rebuilds
 * the links from the records' headers and frees kept bases nothing hangs
 * on (before the pack totals are recounted). */
int fsck_check_deltas(struct fsck *f);
int fsck_repair_deltas(struct fsck *f);
/* A delta record (header h) of blob k: its base exists and its link row
 * too. -EIO with the reason in why when the base is gone. */
int fsck_check_delta_rec(struct fsck *f, const struct blobkey *k, const struct pack_rec_hdr *h, char why[160]);
/* Make key's record again from its newest intact pack record: 0 done, 1
 * none found (or it does not decode to that MD5), or -errno. */
int fsck_recreate_from_packs(struct fsck *f, const uint8_t *key, const struct vec *inos);
/* Put blob k's rebuilt record r (refcount, size, xxh128, place set) with
 * signature sig, its filter positions from geometry g, its shingle set,
 * and give its inodes (inos) the page's size. */
int fsck_put_rebuilt(struct fsck *f, const struct gfilter *g, const struct blobkey *k, struct fprec *r,
		     struct near_sig *sig, const struct vec *inos);

/* ---- fsck_repair.c: the repair steps of the namespace */

int fsck_repair_names_to_links(struct fsck *f, bool last);
int fsck_repair_names_to_rows(struct fsck *f);
int fsck_repair_names(struct fsck *f);
int fsck_repair_nameless(struct fsck *f);
int fsck_repair_tree(struct fsck *f);
int fsck_repair_counts(struct fsck *f);
void fsck_remove_files(struct fsck *f);
/* Move every name of ino into lost+found (give it one if it has none).
 * lost: its bytes are gone; it no longer refers to a blob, and the xattrs
 * of fsck.h say what it held. The caller fixes blob_inodes and the record. */
int fsck_lf_adopt(struct fsck *f, uint64_t ino, const uint8_t *lost);

/* ---- fsck_repair_blobs.c: the repair steps of the blobs */

int fsck_repair_blob_index(struct fsck *f);
int fsck_move_damaged(struct fsck *f, const uint8_t *key, struct moved *m);
int fsck_repair_blobs(struct fsck *f, struct vec *moves);

#endif
