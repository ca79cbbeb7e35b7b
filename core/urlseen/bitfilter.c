/* bitfilter.c - a growing, file-backed Bloom filter of plain bits.
 *
 * Why this shape. A Bloom filter cannot be enlarged in place: a set bit does
 * not say which key set it. The two known ways out are (1) a scalable Bloom
 * filter (Almeida et al.): when full, freeze it and add a larger one with a
 * tighter rate, so that the rates sum to the target; and (2) a split that
 * re-inserts the keys of a full leaf into children, which seed 004 (the
 * dynamic splittable Bloom filter) describes and which needs the keys. (1)
 * keeps no keys, but a lookup of a new key must test every frozen filter
 * (7 of them after growing 100-fold with doubling), the tightening costs
 * bits per key at every level, and the newest filter is half empty on
 * average: about 1.5-1.9x the bits of a filter sized in advance. (2) needs
 * the keys, but then a lookup touches one leaf and the rate and memory stay
 * where they should. URLs come as 16-byte hashes, so keeping each key costs
 * 8 bytes of disk per URL (a folded 64-bit key, see below), written once
 * and read back only when its leaf is rebuilt; memory holds the bits alone.
 * We take (2).
 *
 * Leaves and routing. Key x (64 bits; a hash already) routes itself: the
 * directory has 2^D entries and x goes to the leaf in entry x >> (64 - D).
 * A leaf at depth d owns the 2^(D-d) consecutive entries that share its
 * d-bit prefix (extendible hashing); a split gives its two halves to two
 * children at depth d + 1, which bit 63 - d of x tells apart. Within its
 * leaf, a key sets k / lines_per_key distinct bits in each of its one or
 * two 512-bit lines, all derived from x and the filter's seed; bitpos.h
 * gives the exact layout (it is part of the file format) and computes it.
 *
 * The rate and the model. A leaf with m lines and c keys has load
 * lambda = c / m keys per line; its false-positive rate f(lambda) is the
 * exact one for this layout (Poisson load per line, distinct offsets,
 * independent lines: bitfilter_model_fpr). A new key is routed to a leaf at
 * depth d with probability 2^-d, so the filter's rate is
 *   F = sum over leaves of 2^-d * f(c / m),
 * computed from exact counts after every batch of adds (a table of f makes
 * that a look-up per leaf). While F exceeds the target (times
 * RATE_MARGIN), the leaf with the highest rate is rebuilt: 1.3 times as
 * many lines, or, if that passes the largest leaf size, two children with
 * half each. Tests run against the filter as it was before the batch that
 * they belong to (the caller tests a whole batch, then adds its new keys),
 * so every test meets a rate of at most the target.
 *
 * Memory. Each leaf's load cycles between lambda_max / GROWTH and a bit
 * above lambda_max; because the worst leaf is always the one rebuilt, the
 * leaves stay spread over that cycle, and the bits stay near those of a
 * filter sized in advance whatever the growth so far. With GROWTH 1.25 that
 * was 1.09x to 1.13x of an optimal classic Bloom filter for the same keys
 * and rate (1e-4, two lines per key; 1.113x at 1e8 in bench-filter), of
 * which 3% is the blocked layout, 1% RATE_MARGIN and the rest the growth;
 * with 1.3, 1.133x at 1e8 (peak RSS of `pagededup urlseen` 1.163x), and
 * 1.4 reaches 1.21x. The factor trades memory for rebuilding: about 4.5
 * re-insertions per key at 1.25, 3.0 at 1.4; 1.3 took the 1e8 bench
 * insert from 43.2 to 41.6 CPU seconds (the two builds run side by side),
 * within the 1.2x memory goal.
 * Two lines per key cost 3% more bits than a classic filter at 1e-4, one
 * line 14% (the uneven load of 512-bit blocks): hence two by default;
 * their two cache misses overlap in the batch pipeline.
 *
 * Time. A new key costs a test (two lines), a record (the same two lines
 * and 8 bytes of log) and, amortised, the re-insertions into rebuilt
 * leaves; a repeat costs the test. Past the caches all of these are memory
 * accesses, so leaves of 2 MiB and more are mapped with huge pages (below),
 * lookups are pipelined PREFETCH keys deep, and rebuilds
 * REBUILD_PREFETCH deep. A rebuild is the exception: the lines it writes
 * stay cached, and the arithmetic of a key's bits was two thirds of its
 * time per key, hence bitpos.h's wide way (1e8 bench insert: 46.8 to 38.1
 * CPU seconds, the filter file identical byte for byte). Recording a batch
 * writes each leaf's new keys to its log with one pwrite per chunk, then
 * sets the bits. The leaves stay
 * shared file mappings: writeback of the dirty leaves every 30 s makes the
 * next store to each cleaned page fault to mark it dirty again, but that
 * (do_page_mkwrite) was 1.1% of the CPU time at 1e8, and ext4 maps the
 * leaves with huge pages (FilePmdMapped), so keeping them in anonymous
 * memory between checkpoints would not pay for what it costs the other
 * processes sharing the file.
 *
 * File layout (little-endian):
 *   0        header (struct bf_header), 4096 bytes
 *   4096     two directory buffers of 2^16 uint32 leaf ids; the header's
 *            dirstate selects the active one and the depth D
 *   528384   leaf table: 16384 entries of 64 bytes (struct bf_leaf)
 *   1576960  free-extent table: 4096 entries of 16 bytes
 *   2 MiB    data: leaf bits regions and key-log chunks, in 4 KiB units
 * A key log is a list of 16 KiB chunks: the offset of the next chunk
 * (0: none), then 2047 keys. Keys are appended at slot count % 2047 of the
 * last chunk, with pwrite.
 *
 * Changes and crashes. Lookups never see a half-made change: a rebuilt leaf
 * is built complete in new space, under a new leaf-table entry, in a copy
 * of the directory; a single 8-byte store of dirstate publishes it, and only
 * then is the old space freed. Appends write the keys before the count, and
 * a new chunk is linked before the (packed, single-store) tail word that
 * counts it; a leaf's bits are set only after its keys are in its log.
 * Free extents shrink from their end and are published by their length,
 * so a process killed between any two stores leaves at worst some space
 * unreachable (never the same space owned twice).
 *
 * The parts: this file (opening, the directory and mappings, locking,
 * check and add), bitfilter_space.c (space in the file, key logs),
 * bitfilter_grow.c (the model, rebuilds and splits), bitfilter_verify.c
 * (statistics, the structure check); bitfilter_int.h is what they share,
 * bitpos.h where a key's bits lie.
 */
#include "bitfilter_int.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* The file's first bytes. */
static const char magic[8] = { 'P', 'D', 'U', 'R', 'L', 'B', 'F', '1' };

/* ---- a key's leaf and lines ---- */

static inline void probe_key(const struct bitfilter *f, uint64_t x, struct probe *p, int write)
{
	uint32_t id = f->dir[f->depth ? x >> (64 - f->depth) : 0];
	const struct leafmap *m = &f->lm[id];
	uint64_t l0, l1;
	bitpos_lines(&f->pos, x, m->nlines, &l0, &l1);
	p->x = x;
	p->leaf = id;
	p->l0 = m->bits + l0 * BITFILTER_LINE_BYTES;
	p->l1 = m->bits + l1 * BITFILTER_LINE_BYTES;
	prefetch(p->l0, write);
	if (f->lpk == 2)
		prefetch(p->l1, write);
}

/* ---- parameters ---- */

void bitfilter_params_default(struct bitfilter_params *p)
{
	p->fpr = DEFAULT_FPR;
	p->expected = DEFAULT_EXPECTED;
	p->lines_per_key = 2;
	p->max_leaf_lines = DEFAULT_MAX_LEAF_LINES;
	p->seed = DEFAULT_SEED;
}


/* ---- mappings ---- */

void bf_unmap_leaf(struct leafmap *m)
{
	if (m->bits)
		munmap(m->bits, m->maplen);
	memset(m, 0, sizeof *m);
}

static int map_region(struct bitfilter *f, uint64_t off, size_t len, void **out)
{
	int prot = f->readonly ? PROT_READ : PROT_READ | PROT_WRITE;
	void *p = mmap(NULL, len, prot, MAP_SHARED, f->fd, (off_t)off);
	if (p == MAP_FAILED)
		return -errno;
	*out = p;
	return 0;
}

/* A leaf's bits: from HUGE_BYTES on, at an address that is a multiple of
 * it (reserve a larger range, map into it, give back the rest), with a
 * request for huge pages; a refusal only costs speed. */
int bf_map_bits(struct bitfilter *f, uint64_t off, size_t len, void **out)
{
	if (len < HUGE_BYTES || off % HUGE_BYTES)
		return map_region(f, off, len, out);
	uint8_t *r = mmap(NULL, len + HUGE_BYTES, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (r == MAP_FAILED)
		return -errno;
	uint8_t *a = (uint8_t *)(((uintptr_t)r + HUGE_BYTES - 1) & ~(uintptr_t)(HUGE_BYTES - 1));
	int prot = f->readonly ? PROT_READ : PROT_READ | PROT_WRITE;
	void *p = mmap(a, len, prot, MAP_SHARED | MAP_FIXED, f->fd, (off_t)off);
	if (p == MAP_FAILED) {
		int rc = -errno;
		munmap(r, len + HUGE_BYTES);
		return rc;
	}
	if (a > r)
		munmap(r, (size_t)(a - r));
	if (a + len < r + len + HUGE_BYTES)
		munmap(a + len, (size_t)(r + len + HUGE_BYTES - (a + len)));
	(void)madvise(p, len, MADV_HUGEPAGE);
	*out = p;
	return 0;
}

bool bf_region_ok(const struct bitfilter *f, uint64_t off, uint64_t len)
{
	return off >= DATA_START && off % UNIT == 0 && len > 0 && off + len >= off &&
	       off + len <= f->hdr->frontier;
}

bool bf_leaf_ok(const struct bitfilter *f, const struct bf_leaf *e)
{
	if (e->nlines < 2 || e->nlines > MAX_LEAF_LINES)
		return false;
	if (!bf_region_ok(f, e->bits_off, e->nlines * BITFILTER_LINE_BYTES))
		return false;
	uint64_t chunks = tail_chunks(e->tail);
	if (e->count > chunks * CHUNK_KEYS)
		return false;
	if (chunks && (!bf_region_ok(f, e->chunk_first, CHUNK_BYTES) ||
		       !bf_region_ok(f, tail_off(e->tail), CHUNK_BYTES)))
		return false;
	return true;
}

/* Map leaf id's bits as the table now describes them. */
int bf_map_leaf(struct bitfilter *f, uint32_t id)
{
	const struct bf_leaf *e = &f->leaves[id];
	struct leafmap *m = &f->lm[id];
	if (m->bits && m->off == e->bits_off && m->nlines == e->nlines)
		return 0;
	if (!bf_leaf_ok(f, e))
		return -EUCLEAN;
	bf_unmap_leaf(m);
	void *p = NULL;
	int rc = bf_map_bits(f, e->bits_off, bits_len(e->nlines), &p);
	if (rc)
		return rc;
	m->bits = p;
	m->maplen = bits_len(e->nlines);
	m->off = e->bits_off;
	m->nlines = e->nlines;
	return 0;
}

/* ---- the directory ---- */

static inline uint32_t *dir_buf(const struct bitfilter *f, unsigned which)
{
	return (uint32_t *)(void *)(f->meta + DIR_OFF + (size_t)which * DIR_BYTES);
}

static void read_dirstate(struct bitfilter *f)
{
	uint64_t s = __atomic_load_n(&f->hdr->dirstate, __ATOMIC_ACQUIRE);
	f->depth = (unsigned)(s & 0xFF);
	f->dir = dir_buf(f, (unsigned)(s >> 8) & 1);
}

/* Publish the inactive directory (already written) with depth d. */
void bf_commit_dir(struct bitfilter *f, unsigned d)
{
	struct bf_header *h = f->hdr;
	unsigned active = (unsigned)(h->dirstate >> 8) & 1;
	__atomic_store_n(&h->dirstate, (uint64_t)(active ^ 1) << 8 | d, __ATOMIC_RELEASE);
	h->generation++;
	f->gen = h->generation;
	read_dirstate(f);
}

uint32_t *bf_inactive_dir(const struct bitfilter *f)
{
	return dir_buf(f, ((unsigned)(f->hdr->dirstate >> 8) & 1) ^ 1);
}

/* Walk the leaves in directory order: fn(ctx, id, first entry, depth). The
 * structure is checked as it goes: -EUCLEAN if an entry names no leaf or a
 * leaf's run of entries is misplaced. */
int bf_walk(struct bitfilter *f, leaf_fn fn, void *ctx)
{
	uint32_t n = UINT32_C(1) << f->depth;
	for (uint32_t j = 0; j < n;) {
		uint32_t id = f->dir[j];
		if (id >= BITFILTER_MAX_LEAVES)
			return -EUCLEAN;
		uint32_t d = f->leaves[id].depth;
		if (d > f->depth)
			return -EUCLEAN;
		uint32_t run = UINT32_C(1) << (f->depth - d);
		if (j & (run - 1))
			return -EUCLEAN;
		for (uint32_t i = 1; i < run; i++)
			if (f->dir[j + i] != id)
				return -EUCLEAN;
		int rc = fn(f, ctx, id, j);
		if (rc)
			return rc;
		j += run;
	}
	return 0;
}

int bf_mark_ref(struct bitfilter *f, void *ctx, uint32_t id, uint32_t j)
{
	(void)ctx;
	(void)j;
	if (f->ref[id])
		return -EUCLEAN; /* one leaf in two places */
	f->ref[id] = 1;
	return 0;
}

static int mark_and_map(struct bitfilter *f, void *ctx, uint32_t id, uint32_t j)
{
	int rc = bf_mark_ref(f, ctx, id, j);
	return rc ? rc : bf_map_leaf(f, id);
}

/* After another process changed the layout: map what the directory now
 * references, unmap the rest. */
static int revalidate(struct bitfilter *f)
{
	struct stat st;
	if (fstat(f->fd, &st) != 0)
		return -errno;
	if (f->hdr->frontier < DATA_START || f->hdr->frontier > (uint64_t)st.st_size ||
	    f->depth > BITFILTER_MAX_DEPTH)
		return -EUCLEAN;
	memset(f->ref, 0, BITFILTER_MAX_LEAVES);
	int rc = bf_walk(f, mark_and_map, NULL);
	if (rc)
		return rc;
	for (uint32_t id = 0; id < BITFILTER_MAX_LEAVES; id++) {
		struct leafmap *m = &f->lm[id];
		if (!f->ref[id] && m->bits)
			bf_unmap_leaf(m);
	}
	f->gen = f->hdr->generation;
	return 0;
}

/* Unused leaf-table entries: those the directory does not reference. */
int bf_free_entries(struct bitfilter *f, uint32_t *ids, unsigned want)
{
	memset(f->ref, 0, BITFILTER_MAX_LEAVES);
	int rc = bf_walk(f, bf_mark_ref, NULL);
	if (rc)
		return rc;
	unsigned got = 0;
	for (uint32_t id = 0; id < BITFILTER_MAX_LEAVES && got < want; id++)
		if (!f->ref[id])
			ids[got++] = id;
	return got == want ? 0 : -ENOSPC;
}

/* ---- life cycle ---- */

static int setup(struct bitfilter *f)
{
	struct bf_header *h = f->hdr;
	f->k = h->k;
	f->lpk = h->lines_per_key;
	f->max_leaf_lines = h->max_leaf_lines;
	bitpos_init(&f->pos, h->seed, h->k, h->lines_per_key);
	f->fpr = h->fpr;
	f->target = h->fpr * RATE_MARGIN;
	f->lam_cap = bf_load_for(f->k, f->lpk, f->target);
	f->gen = UINT64_MAX;
	if (!(f->lam_cap > 0))
		return -EINVAL;
	f->lm = calloc(BITFILTER_MAX_LEAVES, sizeof *f->lm);
	f->ref = calloc(BITFILTER_MAX_LEAVES, 1);
	f->chunkbuf = malloc(CHUNK_BYTES);
	f->lcount = calloc(BITFILTER_MAX_LEAVES, sizeof *f->lcount);
	f->touched = malloc(BITFILTER_MAX_LEAVES * sizeof *f->touched);
	if (!f->lm || !f->ref || !f->chunkbuf || !f->lcount || !f->touched)
		return -ENOMEM;
	return bf_ftab_init(f);
}

static bool header_ok(const struct bf_header *h)
{
	return !memcmp(h->magic, magic, sizeof magic) && h->version == VERSION &&
	       bf_k_valid(h->k, h->lines_per_key) && h->fpr > 0 && h->fpr < 0.5 &&
	       h->max_leaf_lines >= LEAF_LINE_UNIT;
}

static struct bitfilter *alloc_filter(int fd, bool readonly)
{
	struct bitfilter *f = calloc(1, sizeof *f);
	if (!f)
		return NULL;
	f->fd = fd;
	f->readonly = readonly;
	f->meta = MAP_FAILED;
	return f;
}

static void free_filter(struct bitfilter *f)
{
	if (!f)
		return;
	if (f->lm)
		for (uint32_t id = 0; id < BITFILTER_MAX_LEAVES; id++)
			bf_unmap_leaf(&f->lm[id]);
	if (f->meta != MAP_FAILED)
		munmap(f->meta, DATA_START);
	if (f->fd >= 0)
		close(f->fd);
	free(f->lm);
	free(f->ref);
	free(f->chunkbuf);
	free(f->lcount);
	free(f->touched);
	free(f->stage);
	free(f->ftab);
	free(f->set);
	free(f->probes);
	free(f);
}

static int map_meta(struct bitfilter *f)
{
	void *p = NULL;
	int rc = map_region(f, 0, DATA_START, &p);
	if (rc)
		return rc;
	f->meta = p;
	f->hdr = p;
	f->leaves = (struct bf_leaf *)(void *)(f->meta + LEAF_OFF);
	f->freel = (struct bf_extent *)(void *)(f->meta + FREE_OFF);
	return 0;
}

static int open_tmpfile(void)
{
	const char *dir = getenv("TMPDIR");
	if (!dir || !*dir)
		dir = "/tmp";
	int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL))
		return fd >= 0 ? fd : -errno;
	char path[4096];
	snprintf(path, sizeof path, "%s/urlseen.XXXXXX", dir);
	fd = mkostemp(path, O_CLOEXEC);
	if (fd < 0)
		return -errno;
	unlink(path);
	return fd;
}

/* Write a new, empty filter into fd (an empty file). */
static int init_file(struct bitfilter *f, const struct bitfilter_params *p, uint32_t k,
		     double lam)
{
	int rc;
	if (ftruncate(f->fd, (off_t)DATA_START) != 0)
		return -errno;
	if ((rc = bf_reserve(f, 0, DATA_START)) != 0)
		return rc;
	if ((rc = map_meta(f)) != 0)
		return rc;
	struct bf_header *h = f->hdr;
	memcpy(h->magic, magic, sizeof magic);
	h->version = VERSION;
	h->k = k;
	h->lines_per_key = p->lines_per_key;
	h->max_leaf_lines = p->max_leaf_lines;
	h->fpr = p->fpr;
	h->seed = p->seed;
	h->frontier = DATA_START;
	h->expected = p->expected;

	/* first leaves: a power of two of them, see INIT_LEAVES */
	double total = ceil((double)(p->expected ? p->expected : 1) / lam);
	unsigned d = 0;
	while ((UINT32_C(2) << d) <= INIT_LEAVES &&
	       total / (double)(UINT64_C(2) << d) >= INIT_LEAF_MIN_LINES)
		d++;
	while (d < BITFILTER_MAX_DEPTH && (UINT32_C(2) << d) <= BITFILTER_MAX_LEAVES / 2 &&
	       total / (double)(UINT64_C(1) << d) > p->max_leaf_lines / 2.0)
		d++;
	uint64_t nlines = round_lines(total / (double)(UINT64_C(1) << d));
	uint32_t *dir = dir_buf(f, 0);
	for (uint32_t i = 0; i < (UINT32_C(1) << d); i++) {
		struct bf_leaf *e = &f->leaves[i];
		if ((rc = bf_region_alloc(f, bits_len(nlines), bits_align(nlines), true, &e->bits_off)) != 0)
			return rc;
		e->nlines = nlines;
		e->depth = d;
		e->prefix = i;
		dir[i] = i;
	}
	h->dirstate = d;
	h->generation = 1;
	return 0;
}

int bitfilter_create(const char *path, const struct bitfilter_params *p, struct bitfilter **out)
{
	struct bitfilter_params q;
	uint32_t k;
	double lam;
	char tmp[4096];
	int fd, rc;

	if (!p || !out)
		return -EINVAL;
	q = *p;
	if (!q.lines_per_key)
		q.lines_per_key = 2;
	if (!q.max_leaf_lines)
		q.max_leaf_lines = DEFAULT_MAX_LEAF_LINES;
	if (!q.seed)
		q.seed = DEFAULT_SEED;
	if (!q.expected)
		q.expected = 1;
	q.max_leaf_lines = (uint32_t)round_lines(q.max_leaf_lines);
	if ((rc = bitfilter_best_k(q.fpr * RATE_MARGIN, q.lines_per_key, &k, &lam)) != 0)
		return rc;
	if (!(q.fpr < 0.5) || q.expected > (UINT64_C(1) << 50))
		return -EINVAL;

	if (path) {
		if ((size_t)snprintf(tmp, sizeof tmp, "%s.XXXXXX", path) >= sizeof tmp)
			return -ENAMETOOLONG;
		fd = mkostemp(tmp, O_CLOEXEC);
		if (fd < 0)
			return -errno;
	} else {
		fd = open_tmpfile();
		if (fd < 0)
			return fd;
	}
	struct bitfilter *f = alloc_filter(fd, false);
	if (!f) {
		close(fd);
		if (path)
			unlink(tmp);
		return -ENOMEM;
	}
	rc = init_file(f, &q, k, lam);
	if (rc == 0)
		rc = setup(f);
	if (rc == 0 && path) {
		/* appear whole or not at all; link() never replaces */
		if (link(tmp, path) != 0)
			rc = -errno;
		unlink(tmp);
		path = NULL;
	}
	if (rc) {
		if (path)
			unlink(tmp);
		free_filter(f);
		return rc;
	}
	*out = f;
	return 0;
}

int bitfilter_open(const char *path, bool readonly, struct bitfilter **out)
{
	struct bf_header h;
	struct stat st;
	int rc;

	if (!path || !out)
		return -EINVAL;
	int fd = open(path, (readonly ? O_RDONLY : O_RDWR) | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) != 0) {
		rc = -errno;
		close(fd);
		return rc;
	}
	if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size < DATA_START) {
		close(fd);
		return -EINVAL;
	}
	if ((rc = bf_pread_all(fd, &h, sizeof h, 0)) != 0 || !header_ok(&h)) {
		close(fd);
		return rc && rc != -EUCLEAN ? rc : -EINVAL;
	}
	struct bitfilter *f = alloc_filter(fd, readonly);
	if (!f) {
		close(fd);
		return -ENOMEM;
	}
	if ((rc = map_meta(f)) != 0 || (rc = setup(f)) != 0) {
		free_filter(f);
		return rc;
	}
	*out = f;
	return 0;
}

void bitfilter_close(struct bitfilter *f)
{
	free_filter(f);
}

int bitfilter_sync(struct bitfilter *f)
{
	return fsync(f->fd) == 0 ? 0 : -errno;
}

/* ---- locking ---- */

int bitfilter_lock(struct bitfilter *f, bool exclusive)
{
	if (exclusive && f->readonly)
		return -EROFS;
	if (f->lock)
		return -EBUSY;
	int op = exclusive ? LOCK_EX : LOCK_SH;
	while (flock(f->fd, op) != 0)
		if (errno != EINTR)
			return -errno;
	f->lock = op;
	read_dirstate(f);
	if (f->hdr->generation != f->gen) {
		int rc = revalidate(f);
		if (rc) {
			bitfilter_unlock(f);
			return rc;
		}
	}
	return 0;
}

void bitfilter_unlock(struct bitfilter *f)
{
	if (!f->lock)
		return;
	f->lock = 0;
	f->probes_n = 0; /* another process may change the layout now */
	(void)flock(f->fd, LOCK_UN);
}

/* ---- check and add ---- */

/* The keys found new so far in one check call: open addressing, slots
 * valid when their stamp is the call's. */
static int set_prepare(struct bitfilter *f, size_t n)
{
	size_t cap = 64;
	while (cap < 2 * n)
		cap *= 2;
	if (cap > f->set_cap) {
		free(f->set);
		f->set = calloc(cap, sizeof *f->set);
		f->set_cap = f->set ? cap : 0;
		if (!f->set)
			return -ENOMEM;
	}
	f->stamp++;
	return 0;
}

static inline size_t set_slot(const struct bitfilter *f, uint64_t x)
{
	return (size_t)(x ^ (x >> 29)) & (f->set_cap - 1);
}

/* Insert x; false if it was there already. */
static bool set_insert(struct bitfilter *f, uint64_t x)
{
	size_t mask = f->set_cap - 1, i = set_slot(f, x);
	while (f->set[i].stamp == f->stamp) {
		if (f->set[i].key == x)
			return false;
		i = (i + 1) & mask;
	}
	f->set[i].stamp = f->stamp;
	f->set[i].key = x;
	return true;
}

/* Room to keep n probes for bitfilter_record; false without memory. */
static bool probes_reserve(struct bitfilter *f, size_t n)
{
	if (n > f->probes_cap) {
		struct probe *v = realloc(f->probes, n * sizeof *v);
		if (!v)
			return false;
		f->probes = v;
		f->probes_cap = n;
	}
	return true;
}

size_t bitfilter_check(struct bitfilter *f, const uint8_t *keys, size_t n, bool *seen)
{
	struct probe ring[PREFETCH];
	size_t fresh = 0;
	bool dedup = set_prepare(f, n) == 0;
	bool keep = probes_reserve(f, n);

	f->probes_n = 0;
	for (size_t i = 0; i < n + PREFETCH; i++) {
		if (i >= PREFETCH) {
			size_t j = i - PREFETCH;
			struct probe *p = keep ? &f->probes[j] : &ring[j % PREFETCH];
			bool s = bitpos_test(&f->pos, p->x, p->l0, p->l1);
			/* without memory for the set, a repeat within the call
			 * counts as new: shown twice, never lost */
			if (!s && dedup)
				s = !set_insert(f, p->x);
			seen[j] = s;
			fresh += !s;
		}
		if (i < n) {
			struct probe *p = keep ? &f->probes[i] : &ring[i % PREFETCH];
			probe_key(f, bitpos_fold(keys + 16 * i), p, 0);
			if (dedup)
				prefetch(&f->set[set_slot(f, p->x)], 1);
		}
	}
	if (keep) {
		f->probes_n = n;
		f->probes_gen = f->gen;
	}
	return fresh;
}

/* Room to stage n keys for recording; false without memory. */
static bool stage_reserve(struct bitfilter *f, size_t n)
{
	if (n > f->stage_cap) {
		uint64_t *v = realloc(f->stage, n * sizeof *v);
		if (!v)
			return false;
		f->stage = v;
		f->stage_cap = n;
	}
	return true;
}

/* Group the keys of p[0..n) that are to be recorded (seen[i] false; seen
 * NULL: all) by leaf into f->stage, each leaf's keys together, in the
 * order of f->touched; f->lcount[id] is left at the end of leaf id's run.
 * Returns the number of leaves. */
static size_t stage_by_leaf(struct bitfilter *f, const struct probe *p, size_t n, const bool *seen)
{
	size_t nt = 0, at = 0;
	for (size_t i = 0; i < n; i++)
		if (!(seen && seen[i]) && f->lcount[p[i].leaf]++ == 0)
			f->touched[nt++] = p[i].leaf;
	for (size_t t = 0; t < nt; t++) {
		uint32_t *c = &f->lcount[f->touched[t]];
		size_t cnt = *c;
		*c = (uint32_t)at;
		at += cnt;
	}
	for (size_t i = 0; i < n; i++)
		if (!(seen && seen[i]))
			f->stage[f->lcount[p[i].leaf]++] = p[i].x;
	return nt;
}

/* Record the keys of p[0..n) that seen does not mark (NULL: all): first
 * every leaf's new keys go to its log (one write per leaf and chunk), then
 * the bits are set, so that a key in the bits is always in the log. When a
 * log cannot be written, the keys of the leaves written before it are
 * recorded and the error returned. */
static int record_probes(struct bitfilter *f, const struct probe *p, size_t n, const bool *seen)
{
	if (!stage_reserve(f, n))
		return -ENOMEM;
	size_t nt = stage_by_leaf(f, p, n, seen), logged = 0;
	int rc = 0;
	for (; logged < nt && rc == 0; logged++) {
		uint32_t id = f->touched[logged];
		uint32_t start = logged ? f->lcount[f->touched[logged - 1]] : 0;
		rc = bf_log_keys(f, id, f->stage + start, f->lcount[id] - start);
	}
	if (rc)
		logged--; /* the leaf that failed */
	/* lcount now marks the leaves whose keys are all logged */
	for (size_t t = 0; t < nt; t++)
		f->lcount[f->touched[t]] = t < logged;
	for (size_t i = 0; i < n; i++) {
		/* the lines were fetched by the check; the TLB may have let
		 * them go, so ask again a little ahead */
		size_t j = i + PREFETCH;
		if (j < n && !(seen && seen[j])) {
			prefetch(p[j].l0, 1);
			prefetch(p[j].l1, 1);
		}
		if (!(seen && seen[i]) && f->lcount[p[i].leaf])
			bitpos_set(&f->pos, p[i].x, p[i].l0, p[i].l1);
	}
	for (size_t t = 0; t < nt; t++)
		f->lcount[f->touched[t]] = 0;
	return rc;
}

/* Keys are added this many at a time (the probes and the staging of one
 * slice stay in the caches). */
#define ADD_SLICE 4096

int bitfilter_add(struct bitfilter *f, const uint8_t *keys, size_t n)
{
	int rc = 0;

	if (f->readonly)
		return -EROFS;
	if (f->lock != LOCK_EX)
		return -EPERM;
	if (!probes_reserve(f, n < ADD_SLICE ? n : ADD_SLICE))
		return -ENOMEM;
	for (size_t s = 0; s < n && rc == 0; s += ADD_SLICE) {
		size_t m = n - s < ADD_SLICE ? n - s : ADD_SLICE;
		for (size_t i = 0; i < m; i++)
			probe_key(f, bitpos_fold(keys + 16 * (s + i)), &f->probes[i], 1);
		rc = record_probes(f, f->probes, m, NULL);
	}
	f->probes_n = 0;
	int rc2 = bf_keep_rate(f);
	return rc ? rc : rc2;
}

int bitfilter_record(struct bitfilter *f, const uint8_t *keys, size_t n, const bool *seen)
{
	if (f->readonly)
		return -EROFS;
	if (f->lock != LOCK_EX)
		return -EPERM;
	bool cached = f->probes_n == n && f->probes_gen == f->gen;
	for (size_t i = 0; cached && i < n; i++)
		cached = f->probes[i].x == bitpos_fold(keys + 16 * i);
	if (!cached) {
		/* not right after the check of these keys: the long way */
		size_t m = 0;
		for (size_t i = 0; i < n; i++)
			m += !seen[i];
		uint8_t *add = malloc(m ? m * 16 : 1);
		if (!add)
			return -ENOMEM;
		for (size_t i = 0, j = 0; i < n; i++)
			if (!seen[i])
				memcpy(add + 16 * j++, keys + 16 * i, 16);
		int rc = bitfilter_add(f, add, m);
		free(add);
		return rc;
	}
	int rc = record_probes(f, f->probes, n, seen);
	f->probes_n = 0;
	int rc2 = bf_keep_rate(f);
	return rc ? rc : rc2;
}

int bitfilter_check_and_add(struct bitfilter *f, const uint8_t *keys, size_t n, bool *seen,
			    size_t *nnew)
{
	int rc = bitfilter_lock(f, true);
	if (rc)
		return rc;
	size_t fresh = bitfilter_check(f, keys, n, seen);
	if (nnew)
		*nnew = fresh;
	rc = bitfilter_record(f, keys, n, seen);
	bitfilter_unlock(f);
	return rc;
}

