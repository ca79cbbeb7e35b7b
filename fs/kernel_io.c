/* kernel_io.c - the daemon's reads and writes of /dev/fuse, to ask the
 * kernel for what libfuse 3.14 cannot: FUSE_HANDLE_KILLPRIV_V2.
 *
 * Without it the kernel asks the daemon for "security.capability" before
 * every write(2) (a GETXATTR round trip: file_remove_privs cannot cache the
 * answer, since the superblock lacks SB_NOSEC), which is a third of the
 * round trips of a `tar x` that writes 10 KiB records. With it the kernel
 * sets SB_NOSEC and leaves the killing of setuid/setgid to the daemon, and
 * says in each request when the caller lacks CAP_FSETID: the KILL_SUIDGID
 * bit of a WRITE, an OPEN/CREATE with O_TRUNC, or a SETATTR of the size.
 * libfuse 3.14 drops those bits before the operation sees them, so the
 * read hook below notes the bit of the request this thread is about to
 * process (each worker thread reads a request and processes it before it
 * reads the next), and the reply hook adds the flag to the INIT reply when
 * the kernel offered it.
 *
 * The same two hooks hand requests over to FUSE over io_uring (uring_io.c):
 * the INIT reply also asks for it when the kernel offers it, the ring
 * threads start once the kernel has taken that reply, and a reply written
 * by a thread serving a ring request goes into its ring entry instead of
 * down /dev/fuse.
 */
#define FUSE_USE_VERSION 314

#include "kernel_io.h"

#include <errno.h>
#include <limits.h>
#include <linux/fuse.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "uring_io.h"

static _Thread_local bool kill_suidgid;

static struct fuse_session *session;

/* Set by the INIT request, read by its reply: one INIT per session. */
static uint64_t init_unique;
static bool kernel_offers_killpriv_v2, kernel_offers_uring;

bool kernel_io_kill_suidgid(void)
{
	return kill_suidgid;
}

static bool killpriv_v2_offered(void)
{
	return __atomic_load_n(&kernel_offers_killpriv_v2, __ATOMIC_ACQUIRE);
}

/* The argument of a request (after its header) when it has at least n bytes. */
static const void *request_arg(const void *buf, ssize_t len, size_t n)
{
	if (len < (ssize_t)(sizeof(struct fuse_in_header) + n))
		return NULL;
	return (const char *)buf + sizeof(struct fuse_in_header);
}

/* Whether the u32 at offset `off` of an argument of `size` bytes has `bit`. */
static bool arg_flag(const void *buf, ssize_t len, size_t size, size_t off, uint32_t bit)
{
	const char *a = request_arg(buf, len, size);
	uint32_t v;
	if (!a)
		return false;
	memcpy(&v, a + off, sizeof v);
	return v & bit;
}

static void note_init(const void *buf, ssize_t len, uint64_t unique)
{
	const void *a = request_arg(buf, len, sizeof(struct fuse_init_in));
	struct fuse_init_in in;
	if (!a)
		return;
	memcpy(&in, a, sizeof in);
	init_unique = unique;
	if (in.major == 7 && in.minor >= 33 && (in.flags & FUSE_HANDLE_KILLPRIV_V2))
		__atomic_store_n(&kernel_offers_killpriv_v2, true, __ATOMIC_RELEASE);
	if (in.major == 7 && in.minor >= 42 && (in.flags & FUSE_INIT_EXT) && (in.flags2 & URING_IO_INIT_FLAGS2_BIT))
		__atomic_store_n(&kernel_offers_uring, true, __ATOMIC_RELEASE);
}

#define ARG_FLAG(type, field, bit) arg_flag(buf, len, sizeof(struct type), offsetof(struct type, field), bit)

void kernel_io_note_request(const void *buf, ssize_t len)
{
	struct fuse_in_header h;
	kill_suidgid = false;
	if (len < (ssize_t)sizeof h)
		return;
	memcpy(&h, buf, sizeof h);
	switch (h.opcode) {
	case FUSE_INIT:
		note_init(buf, len, h.unique);
		break;
	case FUSE_WRITE:
		kill_suidgid = ARG_FLAG(fuse_write_in, write_flags, FUSE_WRITE_KILL_SUIDGID);
		break;
	case FUSE_OPEN:
		kill_suidgid = ARG_FLAG(fuse_open_in, open_flags, FUSE_OPEN_KILL_SUIDGID);
		break;
	case FUSE_CREATE:
		kill_suidgid = ARG_FLAG(fuse_create_in, open_flags, FUSE_OPEN_KILL_SUIDGID);
		break;
	case FUSE_SETATTR:
		kill_suidgid = ARG_FLAG(fuse_setattr_in, valid, FATTR_KILL_SUIDGID);
		break;
	default:
		break;
	}
}

static ssize_t io_read(int fd, void *buf, size_t len, void *userdata)
{
	(void)userdata;
	ssize_t n = read(fd, buf, len);
	if (n > 0)
		kernel_io_note_request(buf, n);
	return n;
}

/* The INIT reply: libfuse built it from the capabilities it knows; add
 * KILLPRIV_V2 and io_uring when the kernel offered them. Returns the
 * largest request body the kernel may then send when io_uring was asked
 * for, 0 otherwise. */
static size_t amend_init_reply(struct iovec *iov, int count)
{
	struct fuse_out_header h;
	if (count < 2 || iov[0].iov_len < sizeof h || iov[1].iov_len < offsetof(struct fuse_init_out, flags2) + 4)
		return 0;
	memcpy(&h, iov[0].iov_base, sizeof h);
	if (h.unique != init_unique || h.error != 0)
		return 0;
	struct fuse_init_out *out = iov[1].iov_base;
	init_unique = 0;
	if (killpriv_v2_offered()) {
		out->flags |= FUSE_HANDLE_KILLPRIV_V2;
		out->flags &= ~(uint32_t)FUSE_HANDLE_KILLPRIV;
	}
	if (!__atomic_load_n(&kernel_offers_uring, __ATOMIC_ACQUIRE) || !uring_io_wanted())
		return 0;
	out->flags |= FUSE_INIT_EXT;
	out->flags2 |= URING_IO_INIT_FLAGS2_BIT;
	/* The kernel's ring payload: max(8 KiB, max_write, max_pages pages). */
	size_t pages = (out->flags & FUSE_MAX_PAGES) ? out->max_pages : 32;
	size_t payload = pages * (size_t)sysconf(_SC_PAGESIZE);
	if (payload < out->max_write)
		payload = out->max_write;
	return payload < 8192 ? 8192 : payload;
}

static ssize_t io_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	(void)userdata;
	ssize_t n;
	if (uring_io_take_reply(iov, count, &n))
		return n;
	size_t ring_payload = init_unique && count >= 2 ? amend_init_reply(iov, count) : 0;
	n = writev(fd, iov, count);
	if (n > 0 && ring_payload)
		uring_io_start(session, fuse_session_fd(session), ring_payload);
	return n;
}

int kernel_io_install(struct fuse_session *se)
{
	static const struct fuse_custom_io io = { .read = io_read, .writev = io_writev };
	session = se;
	return fuse_session_custom_io(se, &io, fuse_session_fd(se)) ? -EIO : 0;
}

int kernel_io_serve(struct fuse_session *se, const struct fuse_cmdline_opts *cl)
{
	if (cl->singlethread)
		return fuse_session_loop(se);
	struct fuse_loop_config *lc = fuse_loop_cfg_create();
	if (!lc)
		return -ENOMEM;
	/* A /dev/fuse descriptor per worker thread: measured 33 us per round
	 * trip against 40 us with one shared descriptor. */
	fuse_loop_cfg_set_clone_fd(lc, 1);
	if (cl->max_threads > 0 && cl->max_threads <= 100000)
		fuse_loop_cfg_set_max_threads(lc, cl->max_threads);
	if (cl->max_idle_threads != UINT_MAX)
		fuse_loop_cfg_set_idle_threads(lc, cl->max_idle_threads);
	int ret = fuse_session_loop_mt(se, lc);
	fuse_loop_cfg_destroy(lc);
	return ret;
}
