/* staging.c - a file's staged bytes: in memory up to a budget, else in a
 * staging file (live_int.h).
 *
 * Most pages are tens of kilobytes and half of a crawl is duplicates: held
 * in memory until the seal, a duplicate never touches the disk and a new
 * page is written once. A file past STAGE_MEM_FILE_MAX, a sparse write far
 * out, or a full budget moves the bytes to a staging file (staging_spill). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/fdio.h"
#include "live_int.h"
#include "store/store.h"

#define STAGE_MEM_FILE_MAX (1u << 20)

bool staging_held(const struct live *li)
{
	return li->in_mem || li->staging_fd >= 0;
}

bool staging_charge(struct store *st, size_t n)
{
	uint64_t budget = (uint64_t)(st->opts.stage_mem_mb ? st->opts.stage_mem_mb : 32) << 20;
	if (__atomic_add_fetch(&st->mem_staged, n, __ATOMIC_RELAXED) <= budget)
		return true;
	__atomic_sub_fetch(&st->mem_staged, n, __ATOMIC_RELAXED);
	return false;
}

void staging_uncharge(struct store *st, size_t n)
{
	__atomic_sub_fetch(&st->mem_staged, n, __ATOMIC_RELAXED);
}

void staging_drop_mem(struct store *st, struct live *li)
{
	staging_uncharge(st, li->mem_cap);
	free(li->mem);
	li->mem = NULL;
	li->mem_cap = 0;
	li->in_mem = false;
}

/* Room for `need` bytes in memory; -EFBIG/-ENOMEM: use a file instead. */
int staging_reserve(struct store *st, struct live *li, uint64_t need)
{
	if (need <= li->mem_cap)
		return 0;
	if (need > STAGE_MEM_FILE_MAX)
		return -EFBIG;
	size_t cap = li->mem_cap ? li->mem_cap : 4096;
	while (cap < need)
		cap *= 2;
	if (cap > STAGE_MEM_FILE_MAX)
		cap = STAGE_MEM_FILE_MAX;
	if (!staging_charge(st, cap - li->mem_cap))
		return -ENOMEM;
	char *p = realloc(li->mem, cap);
	if (!p) {
		__atomic_sub_fetch(&st->mem_staged, cap - li->mem_cap, __ATOMIC_RELAXED);
		return -ENOMEM;
	}
	li->mem = p;
	li->mem_cap = cap;
	return 0;
}

int staging_file_open(struct store *st, struct live *li)
{
	snprintf(li->staging, sizeof li->staging, "staging/%llu.%llu", (unsigned long long)li->ino,
		 (unsigned long long)__atomic_add_fetch(&st->staging_seq, 1, __ATOMIC_RELAXED));
	int fd = openat(st->dirfd, li->staging, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	li->staging_fd = fd;
	return 0;
}

void staging_file_close(struct store *st, struct live *li)
{
	close(li->staging_fd);
	unlinkat(st->dirfd, li->staging, 0);
	li->staging_fd = -1;
}

/* Move the staged bytes from memory to a staging file. */
int staging_spill(struct store *st, struct live *li)
{
	int rc = staging_file_open(st, li);
	if (rc)
		return rc;
	if ((rc = fd_pwrite_all(li->staging_fd, li->mem, (size_t)li->size, 0))) {
		staging_file_close(st, li);
		return rc;
	}
	staging_drop_mem(st, li);
	return 0;
}

int staging_write(struct store *st, struct live *li, const void *buf, size_t n, uint64_t off)
{
	if (li->in_mem) {
		if (off + n <= STAGE_MEM_FILE_MAX && staging_reserve(st, li, off + n) == 0) {
			if (off > li->size)
				memset(li->mem + li->size, 0, (size_t)(off - li->size));
			memcpy(li->mem + off, buf, n);
			return 0;
		}
		int rc = staging_spill(st, li);
		if (rc)
			return rc;
	}
	return fd_pwrite_all(li->staging_fd, buf, n, off);
}

int staging_truncate(struct store *st, struct live *li, uint64_t size)
{
	if (li->in_mem) {
		if (size <= li->size || (size <= STAGE_MEM_FILE_MAX && staging_reserve(st, li, size) == 0)) {
			if (size > li->size)
				memset(li->mem + li->size, 0, (size_t)(size - li->size));
			return 0;
		}
		int rc = staging_spill(st, li);
		if (rc)
			return rc;
	}
	return ftruncate(li->staging_fd, (off_t)size) ? -errno : 0;
}

