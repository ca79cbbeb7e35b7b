/* pack.c - the pack files of a store: appends, the read descriptors,
 * removal and retirement, punching (the reads themselves and the scan are
 * in pack_read.c). The format is in pack.h.
 *
 * One main pack takes appends at a time (the last main pack), and one
 * nursery pack takes the nursery's (pack.h); a new pack of either gets
 * the next id. Appends are
 * serialised by the set's mutex and written with pwrite at an offset the
 * set keeps, so a failed write (a full disk) is cut back with ftruncate and
 * the next append starts where the last good record ended. A record left
 * half-written by a crash lies past every offset a commit names: it is
 * dead bytes, and a scan skips it (its header check fails). Reads use
 * pread on descriptors kept open per pack, so they run in parallel with
 * appends and with each other.
 */
#include "pack.h"
#include "pack_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/falloc.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "base/byteorder.h"
#include "base/fdio.h"

static const char pack_magic[8] = { 'P', 'D', 'P', 'A', 'C', 'K', '\r', '\n' };

/* A pack's read descriptor, shared by the readers of that pack. A reader
 * holds it (refs) from its first pread to its last, so that pack_remove
 * never closes a descriptor under a read in progress (the number could
 * otherwise be reused by another open file): a removed pack's descriptor
 * is closed by its last reader. */
struct pack_fd {
	int fd;       /* -1: not open */
	unsigned refs;
	bool removed; /* unlinked: no new reader, closed at refs 0 */
};

/* A stream of appends: the pack taking them and where the next goes. The
 * main packs and the nursery (pack.h) each have one. */
struct pack_writer {
	uint32_t cur;       /* pack taking appends, 0: none */
	int fd;             /* its descriptor, -1: none open */
	uint64_t end;       /* where the next record goes (before alignment) */
	int unsynced_fd;    /* a pack closed for appends but not synced yet, -1 */
	bool dirty;         /* appends since the last sync */
};

struct pack_set {
	int dirfd;         /* STORE/packs */
	bool readonly;
	uint64_t max_bytes;
	pthread_mutex_t mu; /* the writer state and the descriptor table */
	struct pack_writer w[PACK_STREAMS];
	uint32_t last;      /* the highest pack id present or made */
	struct pack_fd *fds; /* read descriptors by id */
	size_t nfds;
	uint32_t *retired;  /* packs a compaction is removing (pack_retire) */
	size_t nretired, capretired;
	uint32_t *nursery;  /* the nursery packs present, ascending */
	size_t nnursery, capnursery;
	uint64_t nursery_bytes; /* their length in all */
	struct pack_cold cold;  /* the mark new main packs get (pack_set_cold) */
};

void pack_name(uint32_t id, char out[PACK_NAME_MAX])
{
	snprintf(out, PACK_NAME_MAX, "pack-%08u", id);
}

static bool parse_name(const char *s, uint32_t *id)
{
	if (strncmp(s, "pack-", 5) || strlen(s) != 13)
		return false;
	uint64_t v = 0;
	for (const char *p = s + 5; *p; p++) {
		if (*p < '0' || *p > '9')
			return false;
		v = v * 10 + (uint64_t)(*p - '0');
	}
	if (v == 0 || v > UINT32_MAX)
		return false;
	*id = (uint32_t)v;
	return true;
}

int pack_list(struct pack_set *ps, uint32_t **ids, size_t *n)
{
	*ids = NULL;
	*n = 0;
	int fd = openat(ps->dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return -errno;
	}
	size_t cap = 0;
	int rc = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		uint32_t id;
		if (!parse_name(e->d_name, &id))
			continue;
		if (*n == cap) {
			cap = cap ? 2 * cap : 16;
			uint32_t *v = realloc(*ids, cap * sizeof *v);
			if (!v) {
				rc = -ENOMEM;
				break;
			}
			*ids = v;
		}
		(*ids)[(*n)++] = id;
	}
	closedir(d);
	if (rc) {
		free(*ids);
		*ids = NULL;
		*n = 0;
		return rc;
	}
	/* insertion sort: a store has few packs */
	for (size_t i = 1; i < *n; i++)
		for (size_t j = i; j > 0 && (*ids)[j - 1] > (*ids)[j]; j--) {
			uint32_t t = (*ids)[j];
			(*ids)[j] = (*ids)[j - 1];
			(*ids)[j - 1] = t;
		}
	return 0;
}

static void cold_put(uint8_t h[PACK_HDR_BYTES], const struct pack_cold *c)
{
	h[32] = c->level;
	h[33] = c->level && c->deltas ? PACK_COLD_DELTAS : 0;
	h[34] = c->level ? c->window : 0;
	put_le32(h + 36, c->level ? c->dict : 0);
}

static void cold_get(const uint8_t h[PACK_HDR_BYTES], struct pack_cold *c)
{
	*c = (struct pack_cold){
		.level = h[32], .deltas = (h[33] & PACK_COLD_DELTAS) != 0, .window = h[34], .dict = get_le32(h + 36)
	};
}

/* Check the header of pack id; *flags (may be NULL) gets its flags,
 * *version (may be NULL) its version, *cold (may be NULL) its cold mark. */
static int check_pack_hdr_all(int fd, uint32_t id, uint32_t *flags, uint32_t *version, struct pack_cold *cold,
			      uint64_t *created)
{
	uint8_t h[PACK_HDR_BYTES];
	ssize_t n = fd_pread_full(fd, h, sizeof h, 0);
	if (n < 0)
		return (int)n;
	if (n != PACK_HDR_BYTES || memcmp(h, pack_magic, 8) || get_le64(h + 56) != XXH3_64bits(h, 56))
		return -EIO;
	if (get_le32(h + 8) > PACK_VERSION)
		return -EPROTO;
	if (flags)
		*flags = get_le32(h + 20);
	if (version)
		*version = get_le32(h + 8);
	if (cold)
		cold_get(h, cold);
	if (created)
		*created = get_le64(h + 24);
	return get_le32(h + 16) == id && get_le32(h + 12) == PACK_HDR_BYTES ? 0 : -EIO;
}

static int check_pack_hdr_flags(int fd, uint32_t id, uint32_t *flags, uint32_t *version)
{
	return check_pack_hdr_all(fd, id, flags, version, NULL, NULL);
}

static int check_pack_hdr(int fd, uint32_t id)
{
	return check_pack_hdr_flags(fd, id, NULL, NULL);
}

int pack_fd_hold(struct pack_set *ps, uint32_t id)
{
	pthread_mutex_lock(&ps->mu);
	int rc;
	if (id < ps->nfds && ps->fds[id].removed) {
		rc = -EIO; /* a record names a pack removed since */
		goto out;
	}
	if (id < ps->nfds && ps->fds[id].fd >= 0) {
		ps->fds[id].refs++;
		rc = ps->fds[id].fd;
		goto out;
	}
	if (id >= ps->nfds) {
		size_t n = ps->nfds ? ps->nfds : 16;
		while (n <= id)
			n *= 2;
		struct pack_fd *v = realloc(ps->fds, n * sizeof *v);
		if (!v) {
			rc = -ENOMEM;
			goto out;
		}
		for (size_t i = ps->nfds; i < n; i++)
			v[i] = (struct pack_fd){ .fd = -1 };
		ps->fds = v;
		ps->nfds = n;
	}
	char name[PACK_NAME_MAX];
	pack_name(id, name);
	int fd = openat(ps->dirfd, name, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		rc = errno == ENOENT ? -EIO : -errno; /* a record names a missing pack */
		goto out;
	}
	if ((rc = check_pack_hdr(fd, id))) {
		close(fd);
		goto out;
	}
	ps->fds[id].refs = 1;
	rc = ps->fds[id].fd = fd;
out:
	pthread_mutex_unlock(&ps->mu);
	return rc;
}

void pack_fd_drop(struct pack_set *ps, uint32_t id)
{
	pthread_mutex_lock(&ps->mu);
	struct pack_fd *p = &ps->fds[id];
	if (--p->refs == 0 && p->removed && p->fd >= 0) {
		close(p->fd);
		p->fd = -1;
	}
	pthread_mutex_unlock(&ps->mu);
}

/* ---- the nursery's packs (mutex held) ---------------------------------- */

static bool nursery_has(const struct pack_set *ps, uint32_t id, size_t *at)
{
	size_t lo = 0, hi = ps->nnursery;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (ps->nursery[mid] < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (at)
		*at = lo;
	return lo < ps->nnursery && ps->nursery[lo] == id;
}

static int nursery_add(struct pack_set *ps, uint32_t id, uint64_t bytes)
{
	size_t at;
	if (nursery_has(ps, id, &at))
		return 0;
	if (ps->nnursery == ps->capnursery) {
		size_t cap = ps->capnursery ? 2 * ps->capnursery : 8;
		uint32_t *v = realloc(ps->nursery, cap * sizeof *v);
		if (!v)
			return -ENOMEM;
		ps->nursery = v;
		ps->capnursery = cap;
	}
	memmove(ps->nursery + at + 1, ps->nursery + at, (ps->nnursery - at) * sizeof *ps->nursery);
	ps->nursery[at] = id;
	ps->nnursery++;
	ps->nursery_bytes += bytes;
	return 0;
}

static void nursery_drop(struct pack_set *ps, uint32_t id, uint64_t bytes)
{
	size_t at;
	if (!nursery_has(ps, id, &at))
		return;
	memmove(ps->nursery + at, ps->nursery + at + 1, (ps->nnursery - at - 1) * sizeof *ps->nursery);
	ps->nnursery--;
	ps->nursery_bytes = ps->nursery_bytes > bytes ? ps->nursery_bytes - bytes : 0;
}

/* Which packs are the nursery's (their header's flag), and the pack the
 * main appends continue in (the last main pack, if intact and not full). */
static int survey(struct pack_set *ps)
{
	uint32_t *ids;
	size_t n;
	int rc = pack_list(ps, &ids, &n);
	if (rc)
		return rc;
	uint32_t last_main = 0;
	for (size_t i = 0; i < n && !rc; i++) {
		char name[PACK_NAME_MAX];
		pack_name(ids[i], name);
		int fd = openat(ps->dirfd, name, O_RDONLY | O_CLOEXEC);
		uint32_t flags = 0;
		struct stat sb;
		if (fd >= 0 && check_pack_hdr_flags(fd, ids[i], &flags, NULL) == 0 && (flags & PACK_FLAG_NURSERY) &&
		    fstat(fd, &sb) == 0)
			rc = nursery_add(ps, ids[i], (uint64_t)sb.st_size);
		else
			last_main = ids[i]; /* a damaged header counts as a main pack: fsck names it */
		if (fd >= 0)
			close(fd);
	}
	ps->last = n ? ids[n - 1] : 0;
	free(ids);
	if (rc || ps->readonly || !last_main)
		return rc;
	/* Appends continue in the last main pack if it is intact and of this
	 * version (a version 1 pack holds layout 1 records only: pack.h). */
	char name[PACK_NAME_MAX];
	pack_name(last_main, name);
	int wfd = openat(ps->dirfd, name, O_RDWR | O_CLOEXEC);
	struct stat sb;
	uint32_t version = 0;
	struct pack_cold cold;
	/* ... and carries no cold mark (it holds a cold pass's records only) */
	if (wfd >= 0 && check_pack_hdr_all(wfd, last_main, NULL, &version, &cold, NULL) == 0 && version == PACK_VERSION &&
	    cold.level == 0 && fstat(wfd, &sb) == 0 && (uint64_t)sb.st_size < ps->max_bytes) {
		ps->w[PACK_MAIN].cur = last_main;
		ps->w[PACK_MAIN].fd = wfd;
		ps->w[PACK_MAIN].end = (uint64_t)sb.st_size;
	} else if (wfd >= 0) {
		close(wfd);
	}
	return 0;
}

int pack_set_open(int dirfd, bool readonly, uint64_t max_bytes, struct pack_set **out)
{
	if (!readonly && mkdirat(dirfd, PACK_DIR, 0700) && errno != EEXIST)
		return -errno;
	int fd = openat(dirfd, PACK_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 && !(readonly && errno == ENOENT))
		return -errno;
	struct pack_set *ps = calloc(1, sizeof *ps);
	if (!ps) {
		if (fd >= 0)
			close(fd);
		return -ENOMEM;
	}
	ps->dirfd = fd;
	ps->readonly = readonly;
	ps->max_bytes = max_bytes ? max_bytes : PACK_DEFAULT_MAX_BYTES;
	for (int i = 0; i < PACK_STREAMS; i++)
		ps->w[i].fd = ps->w[i].unsynced_fd = -1;
	pthread_mutex_init(&ps->mu, NULL);
	int rc = fd >= 0 ? survey(ps) : 0;
	if (rc) {
		pack_set_close(ps);
		return rc;
	}
	*out = ps;
	return 0;
}

void pack_set_close(struct pack_set *ps)
{
	if (!ps)
		return;
	for (int i = 0; i < PACK_STREAMS; i++) {
		if (ps->w[i].fd >= 0)
			close(ps->w[i].fd);
		if (ps->w[i].unsynced_fd >= 0)
			close(ps->w[i].unsynced_fd);
	}
	for (size_t i = 0; i < ps->nfds; i++)
		if (ps->fds[i].fd >= 0)
			close(ps->fds[i].fd);
	free(ps->fds);
	free(ps->retired);
	free(ps->nursery);
	if (ps->dirfd >= 0)
		close(ps->dirfd);
	pthread_mutex_destroy(&ps->mu);
	free(ps);
}

static uint32_t current_of(struct pack_set *ps, int stream)
{
	pthread_mutex_lock(&ps->mu);
	uint32_t id = ps->w[stream].fd >= 0 ? ps->w[stream].cur : 0;
	pthread_mutex_unlock(&ps->mu);
	return id;
}

uint32_t pack_current(struct pack_set *ps)
{
	return current_of(ps, PACK_MAIN);
}

uint32_t pack_nursery_current(struct pack_set *ps)
{
	return current_of(ps, PACK_NURSERY);
}

bool pack_is_nursery(struct pack_set *ps, uint32_t id)
{
	pthread_mutex_lock(&ps->mu);
	bool r = nursery_has(ps, id, NULL);
	pthread_mutex_unlock(&ps->mu);
	return r;
}

uint64_t pack_nursery_bytes(struct pack_set *ps)
{
	pthread_mutex_lock(&ps->mu);
	uint64_t b = ps->nursery_bytes;
	pthread_mutex_unlock(&ps->mu);
	return b;
}

int pack_nursery_list(struct pack_set *ps, uint32_t **ids, size_t *n)
{
	pthread_mutex_lock(&ps->mu);
	*n = ps->nnursery;
	*ids = malloc((*n ? *n : 1) * sizeof **ids);
	if (*ids && *n)
		memcpy(*ids, ps->nursery, *n * sizeof **ids);
	pthread_mutex_unlock(&ps->mu);
	return *ids ? 0 : -ENOMEM;
}

/* Stop appends to stream w's pack (mutex held): its descriptor is kept
 * for the next pack_sync if it has unsynced appends. */
static void end_pack(struct pack_writer *w)
{
	if (w->fd < 0)
		return;
	if (w->dirty && w->unsynced_fd < 0) {
		w->unsynced_fd = w->fd; /* synced at the next pack_sync */
	} else {
		if (w->dirty)
			fdatasync(w->fd);
		close(w->fd);
	}
	w->fd = -1;
	w->dirty = false;
}

/* Start pack last+1 for stream (mutex held). */
static int start_pack(struct pack_set *ps, int stream, bool sync)
{
	uint32_t id = ps->last + 1;
	char name[PACK_NAME_MAX];
	pack_name(id, name);
	int fd = openat(ps->dirfd, name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	uint8_t h[PACK_HDR_BYTES] = { 0 };
	memcpy(h, pack_magic, 8);
	put_le32(h + 8, PACK_VERSION);
	put_le32(h + 12, PACK_HDR_BYTES);
	put_le32(h + 16, id);
	put_le32(h + 20, stream == PACK_NURSERY ? PACK_FLAG_NURSERY : 0);
	put_le64(h + 24, (uint64_t)time(NULL));
	if (stream == PACK_MAIN)
		cold_put(h, &ps->cold);
	put_le64(h + 56, XXH3_64bits(h, 56));
	int rc = fd_pwrite_all(fd, h, sizeof h, 0);
	if (!rc && sync && (fdatasync(fd) || fsync(ps->dirfd)))
		rc = -errno;
	if (!rc && stream == PACK_NURSERY)
		rc = nursery_add(ps, id, PACK_HDR_BYTES);
	if (rc) {
		close(fd);
		unlinkat(ps->dirfd, name, 0);
		return rc;
	}
	struct pack_writer *w = &ps->w[stream];
	end_pack(w);
	ps->last = id;
	w->cur = id;
	w->fd = fd;
	w->end = PACK_HDR_BYTES;
	return 0;
}

static int append_to(struct pack_set *ps, int stream, const struct pack_rec *r, bool sync, struct pack_loc *loc)
{
	if (ps->readonly)
		return -EROFS;
	pthread_mutex_lock(&ps->mu);
	struct pack_writer *w = &ps->w[stream];
	uint64_t max = stream == PACK_NURSERY ? PACK_NURSERY_PACK_BYTES : ps->max_bytes;
	if (stream == PACK_NURSERY && ps->max_bytes < max)
		max = ps->max_bytes;
	int rc = 0;
	uint64_t off = (w->end + PACK_ALIGN - 1) & ~(uint64_t)(PACK_ALIGN - 1);
	if (w->fd < 0 || (off + r->len > max && w->end > PACK_HDR_BYTES)) {
		if ((rc = start_pack(ps, stream, sync)))
			goto out;
		off = PACK_HDR_BYTES;
	}
	static const uint8_t zeros[PACK_ALIGN];
	uint64_t was = w->end;
	if (off > was)
		rc = fd_pwrite_all(w->fd, zeros, (size_t)(off - was), was);
	if (!rc)
		rc = fd_pwrite_all(w->fd, r->buf, r->len, off);
	if (rc) {
		/* nothing names these bytes: cut them off (a full disk) */
		if (ftruncate(w->fd, (off_t)was))
			w->end = off + r->len; /* could not cut: step over them */
		goto out;
	}
	if (stream == PACK_NURSERY)
		ps->nursery_bytes += off + r->len - w->end;
	w->end = off + r->len;
	w->dirty = true;
	*loc = (struct pack_loc){ w->cur, off, r->len };
	int fd = sync ? dup(w->fd) : -1;
	pthread_mutex_unlock(&ps->mu);
	if (sync) {
		/* the sync outside the mutex: other appends go on meanwhile */
		rc = fd < 0 ? -errno : fdatasync(fd) ? -errno : 0;
		if (fd >= 0)
			close(fd);
	}
	return rc;
out:
	pthread_mutex_unlock(&ps->mu);
	return rc;
}

int pack_append(struct pack_set *ps, const struct pack_rec *r, bool sync, struct pack_loc *loc)
{
	return append_to(ps, PACK_MAIN, r, sync, loc);
}

int pack_append_nursery(struct pack_set *ps, const struct pack_rec *r, bool sync, struct pack_loc *loc)
{
	return append_to(ps, PACK_NURSERY, r, sync, loc);
}

static int sync_streams(struct pack_set *ps, int first, int end)
{
	if (ps->readonly)
		return 0;
	pthread_mutex_lock(&ps->mu);
	int rc = 0;
	bool dir = false;
	for (int i = first; i < end && !rc; i++) {
		struct pack_writer *w = &ps->w[i];
		if (w->unsynced_fd >= 0) {
			if (fdatasync(w->unsynced_fd))
				rc = -errno;
			close(w->unsynced_fd);
			w->unsynced_fd = -1;
			dir = true;
		}
		if (!rc && w->dirty && w->fd >= 0) {
			if (fdatasync(w->fd))
				rc = -errno;
			else
				w->dirty = false;
			dir = true;
		}
	}
	if (!rc && dir && fsync(ps->dirfd))
		rc = -errno;
	pthread_mutex_unlock(&ps->mu);
	return rc;
}

int pack_sync(struct pack_set *ps)
{
	return sync_streams(ps, 0, PACK_STREAMS);
}

int pack_sync_main(struct pack_set *ps)
{
	return sync_streams(ps, PACK_MAIN, PACK_MAIN + 1);
}

int64_t pack_file_bytes(struct pack_set *ps, uint32_t id)
{
	char name[PACK_NAME_MAX];
	pack_name(id, name);
	struct stat sb;
	if (ps->dirfd < 0)
		return -ENOENT;
	return fstatat(ps->dirfd, name, &sb, 0) ? -errno : (int64_t)sb.st_size;
}

int pack_space(struct pack_set *ps, uint32_t id, struct pack_space *out)
{
	char name[PACK_NAME_MAX];
	pack_name(id, name);
	struct stat sb;
	if (ps->dirfd < 0)
		return -ENOENT;
	if (fstatat(ps->dirfd, name, &sb, 0))
		return -errno;
	out->length = (uint64_t)sb.st_size;
	out->allocated = (uint64_t)sb.st_blocks * 512;
	return 0;
}

int pack_remove(struct pack_set *ps, uint32_t id)
{
	if (ps->readonly)
		return -EROFS;
	char name[PACK_NAME_MAX];
	pack_name(id, name);
	pthread_mutex_lock(&ps->mu);
	bool busy = false;
	for (int i = 0; i < PACK_STREAMS; i++)
		busy |= ps->w[i].cur == id && ps->w[i].fd >= 0;
	struct stat sb;
	uint64_t bytes = fstatat(ps->dirfd, name, &sb, 0) == 0 ? (uint64_t)sb.st_size : 0;
	int rc = busy ? -EBUSY : unlinkat(ps->dirfd, name, 0) ? -errno : 0;
	if (!rc)
		nursery_drop(ps, id, bytes);
	if (!rc && id < ps->nfds) {
		struct pack_fd *p = &ps->fds[id];
		p->removed = true;
		if (p->fd >= 0 && p->refs == 0) {
			close(p->fd);
			p->fd = -1;
		}
	}
	if (!rc)
		rc = fsync(ps->dirfd) ? -errno : 0;
	pthread_mutex_unlock(&ps->mu);
	return rc;
}

int pack_rollover(struct pack_set *ps, uint32_t id, bool sync)
{
	if (ps->readonly)
		return -EROFS;
	pthread_mutex_lock(&ps->mu);
	int rc = 0;
	if (ps->w[PACK_MAIN].fd >= 0 && ps->w[PACK_MAIN].cur == id)
		rc = start_pack(ps, PACK_MAIN, sync);
	else if (ps->w[PACK_NURSERY].fd >= 0 && ps->w[PACK_NURSERY].cur == id)
		end_pack(&ps->w[PACK_NURSERY]); /* the next nursery append starts a pack */
	pthread_mutex_unlock(&ps->mu);
	return rc;
}

void pack_set_cold(struct pack_set *ps, const struct pack_cold *mark)
{
	pthread_mutex_lock(&ps->mu);
	ps->cold = mark ? *mark : (struct pack_cold){ 0 };
	end_pack(&ps->w[PACK_MAIN]); /* what follows goes to a pack of its own */
	pthread_mutex_unlock(&ps->mu);
}

int pack_cold_of(struct pack_set *ps, uint32_t id, struct pack_cold *out, uint64_t *created)
{
	char name[PACK_NAME_MAX];
	pack_name(id, name);
	int fd = openat(ps->dirfd, name, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int rc = check_pack_hdr_all(fd, id, NULL, NULL, out, created);
	close(fd);
	return rc;
}

static bool retired_locked(struct pack_set *ps, uint32_t id, size_t *at)
{
	for (size_t i = 0; i < ps->nretired; i++)
		if (ps->retired[i] == id) {
			if (at)
				*at = i;
			return true;
		}
	return false;
}

int pack_retire(struct pack_set *ps, uint32_t id, bool on)
{
	pthread_mutex_lock(&ps->mu);
	size_t at;
	int rc = 0;
	bool was = retired_locked(ps, id, &at);
	if (on && !was) {
		if (ps->nretired == ps->capretired) {
			size_t cap = ps->capretired ? 2 * ps->capretired : 8;
			uint32_t *v = realloc(ps->retired, cap * sizeof *v);
			if (!v)
				rc = -ENOMEM;
			else
				ps->retired = v, ps->capretired = cap;
		}
		if (!rc)
			ps->retired[ps->nretired++] = id;
	} else if (!on && was) {
		ps->retired[at] = ps->retired[--ps->nretired];
	}
	pthread_mutex_unlock(&ps->mu);
	return rc;
}

bool pack_retired(struct pack_set *ps, uint32_t id)
{
	pthread_mutex_lock(&ps->mu);
	bool r = retired_locked(ps, id, NULL);
	pthread_mutex_unlock(&ps->mu);
	return r;
}

int pack_punch(struct pack_set *ps, const struct pack_loc *loc)
{
	if (ps->readonly)
		return -EROFS;
	char name[PACK_NAME_MAX];
	pack_name(loc->pack, name);
	int fd = openat(ps->dirfd, name, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int rc = fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)loc->off, (off_t)loc->len) ? -errno : 0;
	close(fd);
	return rc;
}
