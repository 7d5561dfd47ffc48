//! POSIX: directory fsync, `O_NOFOLLOW` opens, errno classification; on Linux also
//! `O_TMPFILE` records and `getdents64` listings (fewer system calls per operation,
//! docs/design-07-performance.md).

use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

/// POSIX: the record's file is flushed after it is linked into place, so one journal
/// commit carries its data and its name (then the directory flush POSIX asks for,
/// which finds the name already committed on a journaling filesystem). Readers never
/// see the difference: the bytes are written before the link either way.
pub(crate) const FLUSH_AFTER_LINK: bool = true;

/// Records are about 250 bytes; one read into a buffer this size takes a whole one.
const RECORD_BUFFER: usize = 4096;

/// Reads record `path`: `O_NOFOLLOW | O_NONBLOCK` open, `fstat` of the handle, one
/// read into a fixed buffer (records are immutable once published, so the size the
/// handle reports is the record's), close. `None` when absent; empty bytes (a torn
/// record) when the name is a symbolic link, directory, FIFO, socket or device —
/// never followed, never blocking. Any other failure (permission) is an error, never
/// guessed to be torn: it may be another user's live claim.
pub(crate) fn read_record(path: &Path) -> io::Result<Option<Vec<u8>>> {
    let opened = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path);
    let mut file = match opened {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        // ELOOP (Linux, macOS), EMLINK (FreeBSD), EFTYPE (NetBSD) for a link, ENXIO
        // for a socket: only the error path pays for the `lstat` that says which.
        Err(e) => {
            return match std::fs::symlink_metadata(path) {
                Ok(meta) if !meta.file_type().is_file() => Ok(Some(Vec::new())),
                Err(gone) if gone.kind() == io::ErrorKind::NotFound => Ok(None),
                _ => Err(e),
            };
        }
    };
    let metadata = file.metadata()?;
    if !metadata.is_file() {
        return Ok(Some(Vec::new()));
    }
    let size = usize::try_from(metadata.len()).unwrap_or(usize::MAX);
    let mut buffer = [0u8; RECORD_BUFFER];
    let mut filled = 0;
    while filled < size {
        if filled == buffer.len() {
            // Larger than most records: read the rest the slow way, up to the most
            // a record can be (a larger file is foreign and reads as empty).
            let mut bytes = buffer.to_vec();
            (&mut file)
                .take(super::RECORD_MAX_BYTES + 1 - bytes.len() as u64)
                .read_to_end(&mut bytes)?;
            if bytes.len() as u64 > super::RECORD_MAX_BYTES {
                bytes.clear();
            }
            return Ok(Some(bytes));
        }
        match file.read(&mut buffer[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(Some(buffer[..filled].to_vec()))
}

/// Lists directory `dir`, calling `each` with every UTF-8 entry name except `.` and
/// `..`. The directory is opened with `O_DIRECTORY | O_NOFOLLOW`, so a symbolic
/// link or a file in its place is refused by the kernel in the same call that opens
/// it (no check-then-open window), then read with `getdents64` into a fixed buffer.
#[cfg(any(target_os = "linux", target_os = "android"))]
pub(crate) fn list_names(dir: &Path, each: &mut dyn FnMut(&str)) -> io::Result<()> {
    use std::os::fd::AsRawFd;

    let opened = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW)
        .open(dir);
    let dir_file = match opened {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(e),
        // ENOTDIR for a link or a file: say which (or, if it was just fixed, the error).
        Err(e) => {
            super::check_real_dir(dir)?;
            return Err(e);
        }
    };
    let mut buffer = [0u8; 4096];
    loop {
        // SAFETY: the buffer is valid and writable for its length; the descriptor
        // is open for the whole call (owned by `dir_file`).
        let n = unsafe {
            libc::syscall(
                libc::SYS_getdents64,
                dir_file.as_raw_fd(),
                buffer.as_mut_ptr(),
                buffer.len(),
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        let n = n as usize;
        if n == 0 {
            return Ok(());
        }
        // struct linux_dirent64 { u64 d_ino; i64 d_off; u16 d_reclen; u8 d_type;
        // char d_name[]; }: the name starts at byte 19, NUL-terminated.
        let mut at = 0;
        while at < n {
            let reclen = usize::from(u16::from_ne_bytes([buffer[at + 16], buffer[at + 17]]));
            if reclen < 20 || at + reclen > n {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "the kernel returned a malformed directory entry",
                ));
            }
            let name = &buffer[at + 19..at + reclen];
            let name = &name[..name.iter().position(|&b| b == 0).unwrap_or(name.len())];
            if let Ok(name) = std::str::from_utf8(name)
                && name != "."
                && name != ".."
            {
                each(name);
            }
            at += reclen;
        }
    }
}

/// Lists directory `dir` (after an `lstat` refusing a link or a file in its place).
#[cfg(not(any(target_os = "linux", target_os = "android")))]
pub(crate) fn list_names(dir: &Path, each: &mut dyn FnMut(&str)) -> io::Result<()> {
    super::list_names_portable(dir, each)
}

/// A new file with no name in directory `dir`, open for writing (`O_TMPFILE`), with
/// `dir` itself open beside it ([`Nameless`]), or `None` when the filesystem or
/// kernel has none (or `/proc/self/fd`, the link's fallback, is missing). A crash
/// before it is linked leaves nothing behind.
///
/// # Errors
///
/// `dir` missing: `NotFound` (the caller makes it again); a symbolic link or a file
/// in its place: [`super::check_real_dir`]'s error, refused by the kernel in the
/// same call that opens it.
#[cfg(any(target_os = "linux", target_os = "android"))]
pub(crate) fn anonymous_file(dir: &Path) -> io::Result<Option<super::Nameless>> {
    use std::os::fd::{AsRawFd, FromRawFd};

    static PROC_FD: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    if !*PROC_FD.get_or_init(|| Path::new("/proc/self/fd").is_dir()) {
        return Ok(None);
    }
    let dir_file = match open_dir_itself(dir) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(e),
        Err(e) => {
            super::check_real_dir(dir)?;
            return Err(e);
        }
    };
    // SAFETY: a descriptor open for the call and a NUL-terminated name; the result
    // is a new descriptor this function owns from here on.
    let fd = unsafe {
        libc::openat(
            dir_file.as_raw_fd(),
            c".".as_ptr(),
            libc::O_WRONLY | libc::O_TMPFILE | libc::O_CLOEXEC,
            0o666 as libc::c_uint,
        )
    };
    if fd < 0 {
        let e = io::Error::last_os_error();
        // EOPNOTSUPP: this filesystem has no O_TMPFILE; EISDIR / EINVAL: a kernel
        // older than 3.11 that does not know the flag.
        return match e.raw_os_error() {
            Some(code)
                if code == libc::EOPNOTSUPP
                    || code == libc::ENOTSUP
                    || code == libc::EISDIR
                    || code == libc::EINVAL =>
            {
                Ok(None)
            }
            _ => Err(e),
        };
    }
    // SAFETY: `fd` was just opened and nothing else owns it.
    let file = unsafe { File::from_raw_fd(fd) };
    Ok(Some(super::Nameless {
        file,
        dir: dir_file,
    }))
}

/// Set once `linkat` of a handle itself (`AT_EMPTY_PATH`) was refused and the
/// `/proc/self/fd` path worked: [`link_anonymous`] goes that way from then on.
#[cfg(any(target_os = "linux", target_os = "android"))]
static BY_PROC_PATH: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Gives the nameless file the name `name` in its directory, exclusively: `linkat`
/// of the handle itself (`AT_EMPTY_PATH`, which Linux allows since 6.10 for a file
/// the caller opened), else of `/proc/self/fd/N` with `AT_SYMLINK_FOLLOW` (older
/// kernels refuse the first without `CAP_DAC_READ_SEARCH`; remembered once seen).
/// Either fails with `EEXIST` when the name exists. True when the file now has the
/// name. An `EEXIST` with the file already linked once is a retried request that
/// landed (as for [`link_count`] after a staged link), so it is ours.
#[cfg(any(target_os = "linux", target_os = "android"))]
pub(crate) fn link_anonymous(nameless: &super::Nameless, name: &str) -> io::Result<bool> {
    use std::ffi::CString;
    use std::os::fd::AsRawFd;
    use std::sync::atomic::Ordering;

    let (file, dir) = (nameless.file.as_raw_fd(), nameless.dir.as_raw_fd());
    let target = CString::new(name)?;
    let outcome = |linked: libc::c_int| {
        if linked == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    };
    let by_proc_path = || -> io::Result<()> {
        let source = CString::new(format!("/proc/self/fd/{file}"))?;
        // SAFETY: NUL-terminated strings and descriptors alive for the call.
        outcome(unsafe {
            libc::linkat(
                libc::AT_FDCWD,
                source.as_ptr(),
                dir,
                target.as_ptr(),
                libc::AT_SYMLINK_FOLLOW,
            )
        })
    };
    let linked = if BY_PROC_PATH.load(Ordering::Relaxed) {
        by_proc_path()
    } else {
        // SAFETY: as above; the empty path names `file` itself.
        match outcome(unsafe {
            libc::linkat(
                file,
                c"".as_ptr(),
                dir,
                target.as_ptr(),
                libc::AT_EMPTY_PATH,
            )
        }) {
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::ENOENT | libc::EPERM | libc::EINVAL)
                ) =>
            {
                let again = by_proc_path();
                if again.is_ok()
                    || again
                        .as_ref()
                        .is_err_and(|e| e.kind() == io::ErrorKind::AlreadyExists)
                {
                    BY_PROC_PATH.store(true, Ordering::Relaxed);
                }
                again
            }
            other => other,
        }
    };
    match linked {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            Ok(nameless.file.metadata()?.nlink() >= 1)
        }
        Err(e) => Err(e),
    }
}

/// An inotify watch on one key directory: names created in it (a claim, a renewal,
/// a tombstone: every record is one `link`) or the directory going away wake the
/// waiter (docs/design-07-performance.md, "Waiting").
///
/// Closing an inotify descriptor waits for the kernel's notification marks to be
/// torn down (an SRCU grace period: milliseconds on an idle machine), so the fs
/// backend keeps idle watches for reuse instead of closing one per wait; `live`
/// says whether this one still watches its directory.
#[cfg(any(target_os = "linux", target_os = "android"))]
pub(crate) struct DirWatch {
    fd: std::os::fd::OwnedFd,
    live: bool,
}

/// Watches `dir` for new names; `None` when inotify is unavailable (the protocol
/// then polls) or `dir` is not a real directory.
#[cfg(any(target_os = "linux", target_os = "android"))]
pub(crate) fn watch_dir(dir: &Path) -> Option<DirWatch> {
    use std::ffi::CString;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::os::unix::ffi::OsStrExt;

    let path = CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: no pointers; the result is checked before use.
    let raw = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
    if raw < 0 {
        return None;
    }
    // SAFETY: `raw` is a descriptor this call just opened and nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let mask = libc::IN_CREATE
        | libc::IN_MOVED_TO
        | libc::IN_DELETE_SELF
        | libc::IN_ONLYDIR
        | libc::IN_DONT_FOLLOW;
    // SAFETY: a valid descriptor and a NUL-terminated path alive for the call.
    let added = unsafe { libc::inotify_add_watch(fd.as_raw_fd(), path.as_ptr(), mask) };
    (added >= 0).then_some(DirWatch { fd, live: true })
}

#[cfg(any(target_os = "linux", target_os = "android"))]
impl DirWatch {
    /// Waits up to `timeout` for an event; true when one came (all pending events
    /// are consumed), false on timeout or interruption.
    pub(crate) fn wait(&mut self, timeout: std::time::Duration) -> bool {
        if !poll_readable(&self.fd, timeout) {
            return false;
        }
        self.drain();
        true
    }

    /// Consumes every pending event without blocking; true when there was one. An
    /// event saying the watch is gone (its directory removed or unmounted) or that
    /// events were dropped (queue overflow) makes the watch not [`live`](Self::live).
    pub(crate) fn drain(&mut self) -> bool {
        let (any, dead) = drain_events(&self.fd);
        if dead {
            self.live = false;
        }
        any
    }

    /// False once the watch no longer watches its directory (or may have missed
    /// events): it is then closed instead of kept for reuse.
    pub(crate) fn live(&self) -> bool {
        self.live
    }
}

/// Waits up to `timeout` for `fd` to be readable; false on timeout or interruption.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn poll_readable(fd: &std::os::fd::OwnedFd, timeout: std::time::Duration) -> bool {
    use std::os::fd::AsRawFd;

    let mut poll = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
    // SAFETY: one valid pollfd for the call.
    unsafe { libc::poll(&mut poll, 1, ms) > 0 }
}

/// Consumes every pending event of inotify descriptor `fd` without blocking:
/// (there was one, one said a watch is gone or events were dropped).
#[cfg(any(target_os = "linux", target_os = "android"))]
fn drain_events(fd: &std::os::fd::OwnedFd) -> (bool, bool) {
    use std::os::fd::AsRawFd;

    // struct inotify_event { i32 wd; u32 mask; u32 cookie; u32 len; name[len] }
    const HEADER: usize = 16;
    let gone = libc::IN_IGNORED | libc::IN_DELETE_SELF | libc::IN_Q_OVERFLOW | libc::IN_UNMOUNT;
    let mut events = [0u8; 4096];
    let (mut any, mut dead) = (false, false);
    loop {
        // SAFETY: the buffer is valid and writable for its length; non-blocking fd.
        let n = unsafe { libc::read(fd.as_raw_fd(), events.as_mut_ptr().cast(), events.len()) };
        if n <= 0 {
            return (any, dead);
        }
        any = true;
        let n = n as usize;
        let mut at = 0;
        while at + HEADER <= n {
            let word = |i: usize| {
                u32::from_ne_bytes([
                    events[at + i],
                    events[at + i + 1],
                    events[at + i + 2],
                    events[at + i + 3],
                ])
            };
            dead |= word(4) & gone != 0;
            at += HEADER + word(12) as usize;
        }
    }
}

/// An inotify instance with no watch, kept for the next ticket watch: closing one
/// costs the kernel milliseconds (see [`DirWatch`]), removing a watch does not.
#[cfg(any(target_os = "linux", target_os = "android"))]
pub(crate) struct Inotify(std::os::fd::OwnedFd);

/// A queued waiter's watch on its own ticket: rung by a release that names it (a
/// touch of the ticket: `IN_ATTRIB`), and woken when the ticket goes (passed
/// over). Records created in the key directory, and rings of other tickets, do
/// not wake it (docs/design-07-performance.md, "Who is woken: rings"); nor would a
/// watch on the queue directory do, which hears every ticket's ring.
#[cfg(any(target_os = "linux", target_os = "android"))]
pub(crate) struct TicketWatch {
    fd: std::os::fd::OwnedFd,
    wd: i32,
}

/// Watches the ticket at `ticket`, on `blank` (an idle instance) or a new inotify
/// instance; `None` when inotify is unavailable or the ticket is gone (the waiter
/// then sleeps on the key directory's watch). A link is watched itself, never
/// followed.
#[cfg(any(target_os = "linux", target_os = "android"))]
pub(crate) fn watch_ticket(blank: Option<Inotify>, ticket: &Path) -> Option<TicketWatch> {
    use std::ffi::CString;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::os::unix::ffi::OsStrExt;

    let path = CString::new(ticket.as_os_str().as_bytes()).ok()?;
    let fd = match blank {
        Some(Inotify(fd)) => {
            // Events of its last use (the removed watch's IN_IGNORED) go first.
            drain_events(&fd);
            fd
        }
        None => {
            // SAFETY: no pointers; the result is checked before use.
            let raw = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
            if raw < 0 {
                return None;
            }
            // SAFETY: `raw` is a descriptor this call just opened and nothing else owns.
            unsafe { OwnedFd::from_raw_fd(raw) }
        }
    };
    let mask = libc::IN_ATTRIB | libc::IN_DELETE_SELF | libc::IN_DONT_FOLLOW;
    // SAFETY: a valid descriptor and a NUL-terminated path alive for the call.
    let wd = unsafe { libc::inotify_add_watch(fd.as_raw_fd(), path.as_ptr(), mask) };
    (wd >= 0).then_some(TicketWatch { fd, wd })
}

#[cfg(any(target_os = "linux", target_os = "android"))]
impl TicketWatch {
    /// Waits up to `timeout` for a ring; true when one came (or the ticket went).
    pub(crate) fn wait(&mut self, timeout: std::time::Duration) -> bool {
        if !poll_readable(&self.fd, timeout) {
            return false;
        }
        drain_events(&self.fd);
        true
    }

    /// Removes the watch and gives back the instance, for the next ticket.
    pub(crate) fn into_blank(self) -> Inotify {
        use std::os::fd::AsRawFd;

        // SAFETY: a valid descriptor; a watch already gone only fails EINVAL.
        unsafe { libc::inotify_rm_watch(self.fd.as_raw_fd(), self.wd) };
        Inotify(self.fd)
    }
}

/// Rings the waiter watching ticket `name` of queue directory `dir`: sets its
/// times to now, the link itself if it is one, relative to `dir` opened with
/// `O_NOFOLLOW` (a queue directory swapped for a link is refused, never followed,
/// whatever this handle checked before). Needs write access to the ticket or to
/// own it.
#[cfg(any(target_os = "linux", target_os = "android"))]
pub(crate) fn ring(dir: &Path, name: &str) -> io::Result<()> {
    use std::os::fd::AsRawFd;

    let dir = open_dir_itself(dir)?;
    let name = std::ffi::CString::new(name)?;
    // SAFETY: a descriptor open for the call and a NUL-terminated name alive for
    // it; a null `times` means now.
    let done = unsafe {
        libc::utimensat(
            dir.as_raw_fd(),
            name.as_ptr(),
            std::ptr::null(),
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    if done == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Opens directory `dir` itself: a symbolic link or anything but a directory in
/// its place is refused by the kernel in the same call (`O_DIRECTORY |
/// O_NOFOLLOW`), so what is done relative to it never lands outside it.
fn open_dir_itself(dir: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW)
        .open(dir)
}

/// Removes entry `name` of directory `dir`, relative to `dir` opened with
/// `O_NOFOLLOW` (a directory swapped for a link is refused in the same call, with
/// [`super::check_real_dir`]'s error; no check-then-use window). Missing, either of
/// them, is success. A name that is a link is removed itself; an empty directory
/// planted under the name is removed too.
pub(crate) fn remove_in(dir: &Path, name: &str) -> io::Result<()> {
    use std::os::fd::AsRawFd;

    let dir_file = match open_dir_itself(dir) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => {
            super::check_real_dir(dir)?;
            return Err(e);
        }
    };
    let name = std::ffi::CString::new(name)?;
    let unlink = |flags| {
        // SAFETY: a descriptor open for the call and a NUL-terminated name alive
        // for it.
        let done = unsafe { libc::unlinkat(dir_file.as_raw_fd(), name.as_ptr(), flags) };
        if done == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    };
    let removed = match unlink(0) {
        Err(e) if e.raw_os_error() == Some(libc::EISDIR) => unlink(libc::AT_REMOVEDIR),
        other => other,
    };
    match removed {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// No nameless files on this platform: creates stage a named file.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
pub(crate) fn anonymous_file(_dir: &Path) -> io::Result<Option<super::Nameless>> {
    Ok(None)
}

/// Never called here ([`anonymous_file`] returns `None`).
#[cfg(not(any(target_os = "linux", target_os = "android")))]
pub(crate) fn link_anonymous(_nameless: &super::Nameless, _name: &str) -> io::Result<bool> {
    Err(io::Error::from(io::ErrorKind::Unsupported))
}

/// Flushes the entries of directory `path` (names created or removed in it).
///
/// `EINVAL` and `ENOTSUP` are taken as "this filesystem cannot flush a directory"
/// and ignored, as databases do: there is nothing more a caller could do.
pub(crate) fn sync_dir(path: &Path) -> io::Result<()> {
    sync_dir_file(&File::open(path)?)
}

/// [`sync_dir`] of the directory a nameless file was made in, through the handle
/// already open (no second open of the directory).
pub(crate) fn sync_dir_of(nameless: &super::Nameless) -> io::Result<()> {
    sync_dir_file(&nameless.dir)
}

#[cfg(test)]
thread_local! {
    /// Tests: the directory flushes this thread made.
    pub(crate) static DIR_FLUSHES: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

fn sync_dir_file(dir: &File) -> io::Result<()> {
    #[cfg(test)]
    DIR_FLUSHES.with(|n| n.set(n.get() + 1));
    match dir.sync_all() {
        Ok(()) => Ok(()),
        Err(e) if matches!(e.raw_os_error(), Some(code) if code == libc::EINVAL || code == libc::ENOTSUP || code == libc::EOPNOTSUPP) => {
            Ok(())
        }
        Err(e) => Err(e),
    }
}

/// True when `hard_link` failed because the filesystem has no hard links: `EPERM`
/// (Linux vfat/exfat and some FUSE filesystems), `ENOTSUP`/`EOPNOTSUPP` (macOS msdos,
/// SMB mounts), `ENOSYS`.
///
/// `EPERM` is otherwise a permission refusal, but the link source is a staging file
/// this process just created and owns (so `protected_hardlinks` does not apply), and
/// a directory we may not write to fails the staging create first. A misreading is
/// harmless anyway: the fallback is itself an exclusive create, and fails on its own
/// if the directory really refuses us.
pub(crate) fn links_unsupported(error: &io::Error) -> bool {
    error.kind() == io::ErrorKind::Unsupported
        || matches!(error.raw_os_error(), Some(code)
            if code == libc::EPERM
                || code == libc::ENOTSUP
                || code == libc::EOPNOTSUPP
                || code == libc::ENOSYS)
}

/// The number of names (hard links) of the file at `path`, without following a
/// symbolic link.
pub(crate) fn link_count(path: &Path) -> Option<u64> {
    std::fs::symlink_metadata(path).ok().map(|m| m.nlink())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_errors_are_classified() {
        for code in [libc::EPERM, libc::ENOTSUP, libc::EOPNOTSUPP, libc::ENOSYS] {
            assert!(
                links_unsupported(&io::Error::from_raw_os_error(code)),
                "{code}"
            );
        }
        // Real failures stay failures (and EEXIST is handled before this is asked).
        for code in [
            libc::EACCES,
            libc::ENOSPC,
            libc::EROFS,
            libc::EIO,
            libc::ENOENT,
            libc::EEXIST,
        ] {
            assert!(
                !links_unsupported(&io::Error::from_raw_os_error(code)),
                "{code}"
            );
        }
    }

    /// Both ways of naming a nameless file (the handle itself, and its
    /// `/proc/self/fd` path) give it the name with its bytes, and both refuse a name
    /// that exists (`Ok(false)`, the existing record untouched); the directory
    /// flush goes through the handle made with it.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    #[test]
    fn both_link_procedures_are_exclusive() {
        use std::io::Write;
        use std::sync::atomic::Ordering;

        let tmp = tempfile::tempdir().unwrap();
        for by_proc_path in [false, true] {
            BY_PROC_PATH.store(by_proc_path, Ordering::Relaxed);
            let name = format!("g0000000{}.json", u8::from(by_proc_path) + 1);
            let mut first = anonymous_file(tmp.path()).unwrap().unwrap();
            first.file.write_all(b"first").unwrap();
            assert!(link_anonymous(&first, &name).unwrap(), "{by_proc_path}");
            sync_dir_of(&first).unwrap();
            let mut second = anonymous_file(tmp.path()).unwrap().unwrap();
            second.file.write_all(b"second").unwrap();
            assert!(!link_anonymous(&second, &name).unwrap(), "{by_proc_path}");
            assert_eq!(std::fs::read(tmp.path().join(&name)).unwrap(), b"first");
        }
        BY_PROC_PATH.store(false, Ordering::Relaxed);
        // A directory that is a link is refused, never followed.
        let real = tmp.path().join("real");
        std::fs::create_dir(&real).unwrap();
        std::os::unix::fs::symlink(&real, tmp.path().join("link")).unwrap();
        let error = anonymous_file(&tmp.path().join("link")).err().unwrap();
        assert!(error.to_string().contains("symbolic link"), "{error}");
    }
}
