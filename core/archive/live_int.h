/* live_int.h - what live.c (the live-inode table), openfile.c (the file
 * state and the file operations) and staging.c (the staged bytes) share;
 * the design is in openfile.h. Nothing outside these files includes it. */
#ifndef PD_LIVE_INT_H
#define PD_LIVE_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/fp.h"
#include "store/rec.h"

struct store;

/* An inode in the table. The kernel keeps an inode (and so its entry)
 * from its lookup until it evicts it (FORGET), which on a machine with
 * memory to spare is never: a crawl of millions of pages holds an entry
 * per file written. So the entry holds only what must outlive the calls on
 * the inode; the file state below (struct live: about 500 bytes with its
 * locks, hash and staging fields) exists while a handle or a call pins
 * the inode, or while it holds something (staged bytes, an open blob), and
 * is freed when the last pin goes with nothing held. */
struct live_ino {
	uint64_t ino;
	struct live_ino *next; /* hash chain */
	/* guarded by the table mutex */
	uint64_t nlookup;      /* kernel references */
	uint32_t pins;         /* open handles and calls in progress */
	bool orphan;           /* no name left: delete when no handle is open */
	bool deleted;          /* the orphan is gone from the store */
	/* guarded by state->mu while pinned (no one else reaches them) */
	bool kcache;           /* the kernel's page cache holds kcache_key's bytes */
	struct blobkey kcache_key;
	struct live *state;    /* NULL: not pinned, nothing held */
};

/* The file state of a pinned inode. What it caches from the inode row
 * (loaded and below) is read again when a new state is made. */
struct live {
	uint64_t ino;
	struct live_ino *ref;  /* its table entry */
	/* guarded by mu */
	pthread_mutex_t mu;
	bool loaded;           /* has_blob/blob/size below are read from the inode */
	bool has_blob;
	struct blobkey blob;
	uint64_t size;         /* current size (staged or sealed) */
	/* Staged bytes live in memory (in_mem) or in a staging file. */
	bool in_mem;
	char *mem;
	size_t mem_cap;
	int staging_fd;        /* -1: no staging file */
	char staging[48];
	bool dirty;            /* staged bytes not sealed yet */
	/* A seal of the staged bytes waiting for its batch (seal_later.h):
	 * the bytes stay in memory, not dirty, until it is resolved. */
	struct seal_later_page *pending;
	struct pd_time atime;  /* a utime's atime while it waits behind the seal */
	bool atime_set;
	uint32_t unflushed;    /* handles written through since their last close() */
	struct pd_time mtime;  /* mtime and ctime of the staged bytes */
	struct pd_time ctime;
	struct fp_ctx hash;    /* stream over bytes [0, hash_next) */
	bool hash_ok;
	uint64_t hash_next;
	int blob_fd;           /* -1: not open */
	bool blob_verified;
	/* A large packed page, decoded chunk by chunk into blob_fd (a memory
	 * file of its size) as reads reach them: done[i] set once chunk i is. */
	uint8_t *lazy_done;
	uint32_t lazy_chunks;
	unsigned lazy_shift;
	struct fprec lazy_rec;
	/* A packed page of one frame, decoded (and checked) into memory at the
	 * first read of an open, charged to the staging budget: reads copy
	 * from it, with no memory file to make, map and close per open. */
	char *page;
	size_t page_len;
};

/* live.c: pin ino's entry, made with its file state if need be (NULL: no
 * memory); pin the entry of ino if it exists (NULL: the inode is not in
 * use; with_state: only if it has a file state, NULL: nothing staged);
 * drop unpin pins and forget lookups, which may free the entry or its
 * state and delete an orphan (its status). */
struct live *live_pin_state(struct store *st, uint64_t ino);
struct live_ino *live_pin_entry(struct store *st, uint64_t ino, bool with_state);
int live_settle(struct store *st, struct live_ino *e, uint32_t unpin, uint64_t forget);
/* Is the caller's pin the entry's only one; *orphan: has it lost its last
 * name (read together, under the table mutex). */
bool live_only_pin(struct store *st, const struct live_ino *e, bool *orphan);
/* File states dropped so far: counted under the table mutex before a
 * state goes, so that a pin that finds none after reading this count
 * unchanged knows that no state went since (file_attr_epoch). */
uint64_t live_state_drops(struct store *st);

/* staging.c, entry mutex held: does li hold staged bytes; charge n bytes
 * to (false: over) and give them back from the staging memory budget
 * (-o stage_mem_mb), which decoded pages share; li's bytes in memory
 * freed; room for need bytes in memory (-EFBIG, -ENOMEM: stage in a file);
 * a staging file made and removed; the bytes in memory moved to a staging
 * file; a write and a truncate of the staged bytes, in memory while they
 * fit, spilled to a file past that. */
bool staging_held(const struct live *li);
bool staging_charge(struct store *st, size_t n);
void staging_uncharge(struct store *st, size_t n);
void staging_drop_mem(struct store *st, struct live *li);
int staging_reserve(struct store *st, struct live *li, uint64_t need);
int staging_file_open(struct store *st, struct live *li);
void staging_file_close(struct store *st, struct live *li);
int staging_spill(struct store *st, struct live *li);
int staging_write(struct store *st, struct live *li, const void *buf, size_t n, uint64_t off);
int staging_truncate(struct store *st, struct live *li, uint64_t size);

/* openfile.c: drop the staged bytes of a state (staging file, memory). */
void file_unstage(struct store *st, struct live *li);

#endif
