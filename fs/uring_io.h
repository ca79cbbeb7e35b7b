/* uring_io.h - serving FUSE requests over io_uring, on the CPU that made
 * them (uring_io.c). */
#ifndef PD_URING_IO_H
#define PD_URING_IO_H

#include <fuse_lowlevel.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/uio.h>

/* FUSE_OVER_IO_URING (protocol 7.42, bit 41 of the INIT flags), kept in
 * the INIT messages' flags2 word. */
#define URING_IO_INIT_FLAGS2_BIT (1u << 9)

/* Choices made at start-up, before the session's loop runs. */
void uring_io_configure(bool wanted, unsigned threads_per_cpu);
bool uring_io_wanted(void);

/* After the kernel accepted an INIT reply that asked for io_uring: start
 * the ring threads (one group per CPU queue). payload_size is the largest
 * request or reply body the kernel may send (max_write, max_pages). Errors
 * leave the session on /dev/fuse alone, which keeps serving everything. */
void uring_io_start(struct fuse_session *se, int fuse_fd, size_t payload_size);

/* Called from the /dev/fuse write hook: when this thread is serving a ring
 * request and iov is its reply, store the reply in the ring entry and say
 * so (with the bytes "written"); otherwise (notifications, replies to
 * /dev/fuse requests) return false. */
bool uring_io_take_reply(const struct iovec *iov, int count, ssize_t *written);

/* After the session ended and was unmounted: wake and join the ring
 * threads, free their rings. */
void uring_io_stop(void);

#endif
