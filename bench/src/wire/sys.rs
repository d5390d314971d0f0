//! The few system calls `lnet-bench wire` needs beyond std: poll(2) over a handful of
//! sockets, splice(2) through a pipe for the relay, sched_setaffinity(2) to pin a child
//! process, and the clock tick of /proc's CPU times. Each is a thin safe wrapper.

#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// What [`poll`] should wait for on one descriptor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interest {
    /// The descriptor.
    pub fd: RawFd,
    /// Wake when it can be written.
    pub write: bool,
}

/// What [`poll`] saw on one descriptor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Ready {
    /// Readable (or closed, or in error: the next read says which).
    pub read: bool,
    /// Writable.
    pub write: bool,
}

/// Waits at most `timeout_ms` for any of `fds` to be readable (always asked) or writable
/// (when asked); returns one [`Ready`] per descriptor, in order.
pub fn poll(fds: &[Interest], timeout_ms: i32) -> io::Result<Vec<Ready>> {
    let mut pfds: Vec<libc::pollfd> = fds
        .iter()
        .map(|i| libc::pollfd {
            fd: i.fd,
            events: libc::POLLIN | if i.write { libc::POLLOUT } else { 0 },
            revents: 0,
        })
        .collect();
    let n = pfds.len() as libc::nfds_t;
    // SAFETY: `pfds` is a valid array of `n` pollfd structures for the whole call.
    let rc = unsafe { libc::poll(pfds.as_mut_ptr(), n, timeout_ms) };
    if rc < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(vec![Ready::default(); fds.len()]);
        }
        return Err(e);
    }
    Ok(pfds
        .iter()
        .map(|p| Ready {
            read: p.revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0,
            write: p.revents & (libc::POLLOUT | libc::POLLERR) != 0,
        })
        .collect())
}

/// A pipe: (read end, write end).
pub fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2 writes.
    let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: pipe2 succeeded, so both descriptors are open and owned by nobody else.
    let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    Ok((r, w))
}

/// Grows a pipe's buffer to `bytes` (F_SETPIPE_SZ); returns the size granted.
pub fn set_pipe_size(pipe: &impl AsRawFd, bytes: usize) -> io::Result<usize> {
    let want = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    // SAFETY: fcntl on an open descriptor with an integer argument.
    let rc = unsafe { libc::fcntl(pipe.as_raw_fd(), libc::F_SETPIPE_SZ, want) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(usize::try_from(rc).unwrap_or(0))
}

/// Moves up to `len` bytes from `from` to `to` without copying them through user space
/// (one of the two must be a pipe); 0 means end of file.
pub fn splice(from: &impl AsRawFd, to: &impl AsRawFd, len: usize) -> io::Result<usize> {
    // SAFETY: both descriptors are open for the call; null offsets mean "current position".
    let rc = unsafe {
        libc::splice(
            from.as_raw_fd(),
            std::ptr::null_mut(),
            to.as_raw_fd(),
            std::ptr::null_mut(),
            len,
            libc::SPLICE_F_MOVE,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(usize::try_from(rc).unwrap_or(0))
}

/// Pins process `pid` (every thread created after this, and its main thread) to the
/// CPUs in `cpus`.
pub fn set_affinity(pid: u32, cpus: &[usize]) -> io::Result<()> {
    // SAFETY: an all-zero cpu_set_t is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus {
        // SAFETY: CPU_SET writes one bit inside `set`; c is below CPU_SETSIZE (checked).
        if c < libc::CPU_SETSIZE as usize {
            unsafe { libc::CPU_SET(c, &mut set) };
        }
    }
    let pid =
        libc::pid_t::try_from(pid).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: `set` is a valid cpu_set_t of the size passed.
    let rc = unsafe { libc::sched_setaffinity(pid, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Clock ticks per second of the CPU times in /proc/PID/stat.
pub fn clock_ticks() -> u64 {
    // SAFETY: sysconf has no memory effects.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    u64::try_from(t).ok().filter(|t| *t > 0).unwrap_or(100)
}

/// Raises this process's soft limit of open files to its hard limit (children inherit
/// it); returns the soft limit now in force.
pub fn raise_fd_limit() -> io::Result<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit structure, which `lim` is.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    if lim.rlim_cur < lim.rlim_max {
        let want = libc::rlimit {
            rlim_cur: lim.rlim_max,
            rlim_max: lim.rlim_max,
        };
        // SAFETY: setrlimit reads one rlimit structure, which `want` is.
        let rc = unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &want) };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        lim = want;
    }
    Ok(lim.rlim_cur)
}
