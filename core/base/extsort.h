/* extsort.h - fixed-size records sorted in bounded memory.
 *
 * Records are gathered in a buffer of at most `mem` bytes; each time it
 * fills, it is sorted in place (a radix sort: no copy) and written out as
 * a run to an unnamed file (Linux O_TMPFILE: nothing to clean up after a
 * crash). Reading merges the runs through a heap, each run read through a
 * buffer of its own (mem shared among them, the sort's buffer freed), so
 * the records come back in memcmp order with one sequential write and
 * one read of each. When every record fits the buffer, no file is made.
 *
 * For fsck's check of tables too large to hold in memory (near_setcheck.c):
 * the rows the records ask for, sorted, are met by one ordered pass over
 * the table, at any size, where probing each row is a random walk of the
 * table.
 *
 * Errors are negative errno values: -ENOMEM, or the file's (-ENOSPC on a
 * full disk); after one the sort is unusable. */
#ifndef PD_EXTSORT_H
#define PD_EXTSORT_H

#include <stddef.h>
#include <stdint.h>

struct extsort;

/* The largest record. */
#define EXTSORT_REC_MAX 256

/* A sort of records of rec_bytes (1..EXTSORT_REC_MAX), holding at most
 * mem bytes of them in memory (at least a few records' worth whatever
 * mem says; while merging, 4 KiB to 1 MiB a run). Runs
 * go to an unnamed file in the directory of dirfd (-1: none), else in
 * $TMPDIR, /var/tmp or /tmp, the first that takes one. */
int extsort_new(size_t rec_bytes, size_t mem, int dirfd, struct extsort **out);
void extsort_free(struct extsort *s);
int extsort_add(struct extsort *s, const void *rec);
/* No more records: the merge starts. */
int extsort_finish(struct extsort *s);
/* The next record in order: 1 and *rec (valid until the next call), 0
 * when there are no more, or a negative errno. */
int extsort_next(struct extsort *s, const void **rec);
/* Runs written to the file so far (0: every record in memory). */
size_t extsort_runs(const struct extsort *s);

#endif
