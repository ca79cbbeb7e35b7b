/* mounts.c - stores in the kernel's mount table, and the wait for a
 * closing daemon. See mounts.h. */
#include "mounts.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#define MOUNTINFO "/proc/self/mountinfo"

/* mountinfo escapes space, tab, newline and backslash as \ooo. */
static void unescape(char *s)
{
	char *o = s;
	for (char *p = s; *p; p++) {
		if (p[0] == '\\' && p[1] >= '0' && p[1] <= '3' && p[2] >= '0' && p[2] <= '7' && p[3] >= '0' &&
		    p[3] <= '7') {
			*o++ = (char)((p[1] - '0') << 6 | (p[2] - '0') << 3 | (p[3] - '0'));
			p += 3;
		} else {
			*o++ = *p;
		}
	}
	*o = 0;
}

/* One line of mountinfo: "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [TAGS...]
 * - FSTYPE SOURCE SUPEROPTS". Points mnt and source into line (unescaped)
 * when the type is ours. */
static bool ours(char *line, char **mnt, char **source)
{
	char *save = NULL, *f[5];
	char *tok = strtok_r(line, " \n", &save);
	for (int i = 0; i < 5 && tok; i++, tok = strtok_r(NULL, " \n", &save))
		f[i] = tok;
	if (!tok)
		return false;
	while (tok && strcmp(tok, "-"))
		tok = strtok_r(NULL, " \n", &save);
	char *type = tok ? strtok_r(NULL, " \n", &save) : NULL;
	char *src = type ? strtok_r(NULL, " \n", &save) : NULL;
	if (!src || strcmp(type, MOUNTS_FSTYPE))
		return false;
	*mnt = f[4];
	*source = src;
	unescape(*mnt);
	unescape(*source);
	return true;
}

/* path made absolute: realpath, or (for a path realpath cannot resolve,
 * such as a mount whose daemon died) the path itself when absolute. */
static int absolute(const char *path, char out[PATH_MAX])
{
	if (realpath(path, out))
		return 0;
	int e = errno;
	if (path[0] == '/' && strlen(path) < PATH_MAX) {
		snprintf(out, PATH_MAX, "%s", path);
		size_t n = strlen(out);
		while (n > 1 && out[n - 1] == '/')
			out[--n] = 0;
		return 0;
	}
	return -e;
}

/* Is p equal to dir or below it? The length of dir when so, else 0. */
static size_t under(const char *p, const char *dir)
{
	size_t n = strlen(dir);
	if (n == 1 && dir[0] == '/')
		return 1;
	if (strncmp(p, dir, n) || (p[n] && p[n] != '/'))
		return 0;
	return n;
}

static void copy(char *dst, size_t size, const char *src)
{
	if (dst && size)
		snprintf(dst, size, "%s", src);
}

int mounts_find_path(const char *path, char *store, size_t store_size, char *mnt, size_t mnt_size,
		     char *inner, size_t inner_size)
{
	char abs[PATH_MAX];
	int rc = absolute(path, abs);
	if (rc)
		return rc;
	FILE *f = fopen(MOUNTINFO, "re");
	if (!f)
		return -errno;
	char *line = NULL, *m, *s;
	size_t cap = 0, best = 0;
	rc = -ENOENT;
	while (getline(&line, &cap, f) > 0) {
		if (!ours(line, &m, &s))
			continue;
		size_t n = under(abs, m);
		if (n && n >= best) { /* the innermost mount wins */
			best = n;
			copy(store, store_size, s);
			copy(mnt, mnt_size, m);
			copy(inner, inner_size, abs[n] ? abs + n : "/");
			rc = 0;
		}
	}
	free(line);
	fclose(f);
	return rc;
}

int mounts_find_store(const char *dir, char *mnt, size_t mnt_size)
{
	char abs[PATH_MAX];
	int rc = absolute(dir, abs);
	if (rc)
		return rc;
	FILE *f = fopen(MOUNTINFO, "re");
	if (!f)
		return -errno;
	char *line = NULL, *m, *s;
	size_t cap = 0;
	rc = -ENOENT;
	while (rc && getline(&line, &cap, f) > 0) {
		if (ours(line, &m, &s) && !strcmp(s, abs)) {
			copy(mnt, mnt_size, m);
			rc = 0;
		}
	}
	free(line);
	fclose(f);
	return rc;
}

static void holder_pid(int fd, char pid[32])
{
	ssize_t n = pread(fd, pid, 31, 0);
	pid[n > 0 ? n : 0] = 0;
	pid[strcspn(pid, "\n")] = 0;
	if (!*pid)
		snprintf(pid, 32, "?");
}

int mounts_wait_closing(const char *dir, unsigned timeout_s, void (*say)(void *ctx, const char *pid), void *ctx,
			char *mnt, size_t mnt_size)
{
	char path[PATH_MAX];
	if (snprintf(path, sizeof path, "%s/lock", dir) >= (int)sizeof path)
		return -ENAMETOOLONG;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	struct timespec t0, now, tick = { 0, 100 * 1000 * 1000 };
	clock_gettime(CLOCK_MONOTONIC, &t0);
	bool said = false;
	int rc;
	for (;;) {
		if (!flock(fd, LOCK_EX | LOCK_NB)) {
			rc = 0;
			break;
		}
		if (errno != EWOULDBLOCK) {
			rc = -errno;
			break;
		}
		if (!mounts_find_store(dir, mnt, mnt_size)) {
			rc = -EBUSY;
			break;
		}
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (timeout_s && now.tv_sec - t0.tv_sec >= (time_t)timeout_s) {
			rc = -ETIMEDOUT;
			break;
		}
		if (!said && say) {
			char pid[32];
			holder_pid(fd, pid);
			say(ctx, pid);
		}
		said = true;
		nanosleep(&tick, NULL);
	}
	close(fd); /* releases the lock if we took it */
	return rc;
}

bool mounts_paths_nest(const char *a, const char *b)
{
	char x[PATH_MAX], y[PATH_MAX];
	if (absolute(a, x) || absolute(b, y))
		return false;
	return under(x, y) || under(y, x);
}
