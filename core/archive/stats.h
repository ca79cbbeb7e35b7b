/* stats.h - what the store holds, what it takes on disk and how well it
 * de-duplicates, for `pagededup stats` and the user.dedup.stats
 * attributes; and the same figures for one subtree of the namespace (a
 * crawl's directory). */
#ifndef PD_STATS_H
#define PD_STATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "blob/blob.h"
#include "store/store.h"

/* Bytes the store takes on disk (allocated blocks, as du counts them), by
 * part. stats_disk() is the one place that knows the parts: a new kind of
 * file in the store (packs) gets a field here and a line in its table. */
struct stats_disk {
	uint64_t packs;    /* packs/: page records and dictionaries (blob_pack_usage splits it) */
	uint64_t blobs;    /* objects/: one file per distinct page (format 1) */
	uint64_t lmdb;     /* meta/: every table */
	uint64_t filter;   /* filter, filter.d/ */
	uint64_t staging;  /* staging/: pages being written */
	uint64_t other;    /* anything else (lock, damaged/ ...) */
	uint64_t total;
};
int stats_disk(const char *dir, struct stats_disk *d);

/* The figures of one directory's subtree (stats_tree.c). */
struct stats_tree {
	uint64_t files, dirs, others; /* regular files (hard links once), directories below, the rest */
	uint64_t logical_bytes;       /* sum of the files' sizes */
	uint64_t blobs, unique_bytes; /* distinct contents among them, their bytes */
	uint64_t own_blobs, own_bytes;/* contents no file outside the subtree shares:
				       * what removing the subtree frees */
};
int stats_tree(struct store *st, uint64_t dir, struct stats_tree *t);

/* What the process holding a writable store has in memory and in its
 * queues now (running: false for a read-only open, which has none): for a
 * mounted store, the daemon's. */
struct stats_daemon {
	bool running;
	uint64_t inodes_held;      /* live-inode table entries (openfile.h) */
	uint64_t file_states;      /* of them, with a file state (open, or holding bytes) */
	uint64_t staged_bytes;     /* pages held in memory: being written, decoded for reads */
	uint64_t sign_queue;       /* pages waiting for their signature (sigq.h) */
	uint64_t signed_by_thread, signed_by_writers, signed_by_drain;
	uint64_t delta_queue;      /* pages waiting for their delta step (ndelta.h) */
	uint64_t delta_dropped;    /* pushed on a full queue (left to the nursery sweep) */
	uint64_t delta_tried, delta_candidates; /* pages the step took, candidates it examined */
	uint64_t delta_by_writers; /* of them, done by close() while the nursery was behind */
	uint64_t nursery_bypassed; /* pages sealed past the nursery's bound (blob.h) */
	uint64_t heap_give_backs;  /* the heap's free pages given back after a burst (base/heap.h) */
};
void stats_daemon(struct store *st, struct stats_daemon *out);

struct pd_stats {
	struct pd_counters c;
	struct stats_disk disk;
	double disk_ratio;         /* disk.total / logical bytes (0 when empty) */
	uint32_t format;           /* the store's format as opened (store.h) */
	char made_by[STORE_VERSION_LEN], written_by[STORE_VERSION_LEN];
	double saved_ratio;        /* 1 - stored/logical */
	uint64_t filter_bytes;     /* counters of every leaf */
	uint64_t filter_counters;
	uint64_t filter_nonzero;
	uint64_t filter_saturated;
	double filter_fill;        /* nonzero / counters */
	double filter_fpr_estimate;/* from the leaves' fill */
	double filter_fpr_design;  /* from the leaves' key counts: what a new page meets */
	double filter_fpr_worst;   /* the highest leaf's rate by its key count */
	double filter_fpr_target, filter_fmax;
	uint64_t filter_leaves;    /* leaves routed to */
	uint64_t filter_keys;
	uint32_t filter_depth;     /* routing bits of the deepest leaf */
	uint32_t filter_lines;
	bool filter_splitting;
	uint64_t lmdb_bytes;       /* pages in use times page size */
	uint64_t lmdb_mapsize;
	uint64_t lmdb_free_bytes;  /* of lmdb_bytes, on LMDB's freelist */
	uint64_t lmdb_pinned_bytes; /* of those, freed after the oldest reader's snapshot */
	uint32_t lmdb_readers;     /* read transactions running (this one too) */
	uint64_t lmdb_reader_lag;  /* commits since the oldest one's snapshot */
	uint64_t lmdb_longest_reader;       /* the most commits one reader lived through since the open */
	char lmdb_longest_reader_in[64];    /* the function that ended it */
	struct blob_pack_usage packs; /* the page bytes on disk (blob_pack_usage) */
	struct blob_compact_stats compact; /* what the compactor did (blob_compact_stats) */
	struct blob_delta_usage deltas; /* pages stored as deltas (blob_delta_usage: a walk) */
	struct stats_daemon daemon;
};

int stats_collect(struct store *st, struct pd_stats *out);

/* JSON (one object, sizes in bytes), aligned text lines with exact
 * numbers, or the same with sizes in KiB/MiB/GiB (`stats -h`). */
enum stats_format { STATS_TEXT, STATS_HUMAN, STATS_JSON };
/* Format; returns the length (snprintf-like: may exceed size). */
size_t stats_format(const struct pd_stats *s, enum stats_format f, char *buf, size_t size);
/* The same for a subtree: its path in the archive, its figures. */
size_t stats_tree_format(const char *path, const struct stats_tree *t, enum stats_format f, char *buf,
			 size_t size);

#endif
