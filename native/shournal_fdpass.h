/* Descriptor passing (SCM_RIGHTS) on the AF_UNIX sockets of the relay
 * protocol: the one place for the control-message layout, used by the
 * setuid helper and its holder, the preload library and the forwarder.
 * Header-only (static inline), so the preload library exports nothing of
 * it.  libc only; the control buffer is bounded by
 * SHOURNAL_MAX_FDS_PER_MSG (~1 KiB on the stack). */
#ifndef SHOURNAL_FDPASS_H
#define SHOURNAL_FDPASS_H

#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "shournal_protocol.h"

union shournal_fdpass_cmsg {
    char buf[CMSG_SPACE(sizeof(int) * SHOURNAL_MAX_FDS_PER_MSG)];
    struct cmsghdr align;
};

/* One sendmsg of the whole message (`iov`) with `nfds` descriptors attached
 * (no control message if 0); MSG_NOSIGNAL is added to `flags`.  Returns as
 * sendmsg, errno as its (EINVAL: more than SHOURNAL_MAX_FDS_PER_MSG fds);
 * EINTR is the caller's to retry. */
static inline ssize_t shournal_send_fds(int sock, const struct iovec *iov, size_t iovlen,
                                        const int *fds, size_t nfds, int flags)
{
    union shournal_fdpass_cmsg u;
    struct msghdr mh;

    if (nfds > SHOURNAL_MAX_FDS_PER_MSG) {
        errno = EINVAL;
        return -1;
    }
    memset(&mh, 0, sizeof mh);
    mh.msg_iov = (struct iovec *)iov;
    mh.msg_iovlen = iovlen;
    if (nfds) {
        struct cmsghdr *c;
        memset(&u, 0, sizeof u);
        mh.msg_control = u.buf;
        mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
        c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
        memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
    }
    return sendmsg(sock, &mh, flags | MSG_NOSIGNAL);
}

/* One recvmsg of up to `len` bytes into `buf`, retried on EINTR, with room
 * for `nfds` descriptors (more are closed by the kernel: MSG_CTRUNC).  The
 * descriptors of an SCM_RIGHTS message of exactly `nfds` land in `fds`;
 * otherwise `fds` keeps what the caller put there (e.g. -1s).  Returns as
 * recvmsg, errno as its (EINVAL: more than SHOURNAL_MAX_FDS_PER_MSG fds). */
static inline ssize_t shournal_recv_fds(int sock, void *buf, size_t len, int *fds, size_t nfds,
                                        int flags)
{
    union shournal_fdpass_cmsg u;
    struct iovec iov = {buf, len};
    struct msghdr mh;
    struct cmsghdr *c;
    ssize_t n;

    if (nfds == 0 || nfds > SHOURNAL_MAX_FDS_PER_MSG) {
        errno = EINVAL;
        return -1;
    }
    memset(&mh, 0, sizeof mh);
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = u.buf;
    mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
    do
        n = recvmsg(sock, &mh, flags);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return n;
    for (c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
            c->cmsg_len == CMSG_LEN(sizeof(int) * nfds))
            memcpy(fds, CMSG_DATA(c), sizeof(int) * nfds);
    return n;
}

#endif
