//! Windows: no directory flush (opening a directory as a file fails, and NTFS
//! journals names), reparse-point-aware opens, Win32 error classification.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::windows::fs::OpenOptionsExt;
use std::path::Path;

/// Windows: the staging file is flushed before it is linked, as it always was here
/// (`FlushFileBuffers` on a handle still open while `CreateHardLinkW` names the file
/// is not something this crate has tested on Windows yet).
pub(crate) const FLUSH_AFTER_LINK: bool = false;

/// `FILE_FLAG_OPEN_REPARSE_POINT`: open a symbolic link itself, never its target.
const FILE_FLAG_OPEN_REPARSE_POINT: u32 = 0x0020_0000;
/// `ERROR_INVALID_FUNCTION`: what FAT volumes answer to `CreateHardLinkW`.
const ERROR_INVALID_FUNCTION: i32 = 1;
/// `ERROR_NOT_SUPPORTED`.
const ERROR_NOT_SUPPORTED: i32 = 50;
/// `ERROR_CALL_NOT_IMPLEMENTED`.
const ERROR_CALL_NOT_IMPLEMENTED: i32 = 120;

/// A no-op: directory entries cannot be flushed through a file handle on Windows.
pub(crate) fn sync_dir(_path: &Path) -> io::Result<()> {
    Ok(())
}

/// Opens record `path` for reading without following a reparse point (the link
/// itself is opened, then refused because it is not a regular file).
pub(crate) fn open_record(path: &Path) -> io::Result<File> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(FILE_FLAG_OPEN_REPARSE_POINT)
        .open(path)?;
    super::require_regular_file(path, file)
}

/// True when `hard_link` failed because the volume has no hard links (FAT, some
/// network shares).
pub(crate) fn links_unsupported(error: &io::Error) -> bool {
    error.kind() == io::ErrorKind::Unsupported
        || matches!(
            error.raw_os_error(),
            Some(ERROR_INVALID_FUNCTION | ERROR_NOT_SUPPORTED | ERROR_CALL_NOT_IMPLEMENTED)
        )
}

/// The number of names `path` has (`GetFileInformationByHandle`'s
/// `nNumberOfLinks`; the standard library has no stable accessor), opened for its
/// attributes only, sharing everything, without following a reparse point. `None`
/// when it cannot be read: an `AlreadyExists` from a hard link is then taken at its
/// word.
pub(crate) fn link_count(path: &Path) -> Option<u64> {
    use std::os::windows::io::AsRawHandle;
    use windows_sys::Win32::Storage::FileSystem::{
        BY_HANDLE_FILE_INFORMATION, FILE_READ_ATTRIBUTES, FILE_SHARE_DELETE, FILE_SHARE_READ,
        FILE_SHARE_WRITE, GetFileInformationByHandle,
    };
    let file = OpenOptions::new()
        .access_mode(FILE_READ_ATTRIBUTES)
        .share_mode(FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE)
        .custom_flags(FILE_FLAG_OPEN_REPARSE_POINT)
        .open(path)
        .ok()?;
    // SAFETY: an all-zero BY_HANDLE_FILE_INFORMATION (plain integers) is valid.
    let mut info: BY_HANDLE_FILE_INFORMATION = unsafe { std::mem::zeroed() };
    // SAFETY: a valid open handle and a correctly sized, writable structure.
    let ok = unsafe { GetFileInformationByHandle(file.as_raw_handle(), &mut info) };
    (ok != 0).then_some(u64::from(info.nNumberOfLinks))
}

/// Reads record `path` (`None` when absent, empty bytes when not a regular file).
pub(crate) fn read_record(path: &Path) -> io::Result<Option<Vec<u8>>> {
    super::read_record_portable(path)
}

/// Lists directory `dir` after refusing a link or a file in its place.
pub(crate) fn list_names(dir: &Path, each: &mut dyn FnMut(&str)) -> io::Result<()> {
    super::list_names_portable(dir, each)
}

/// No nameless files on this platform: creates stage a named file.
pub(crate) fn anonymous_file(_dir: &Path) -> io::Result<Option<super::Nameless>> {
    Ok(None)
}

/// Never called here ([`anonymous_file`] returns `None`).
pub(crate) fn link_anonymous(_nameless: &super::Nameless, _name: &str) -> io::Result<bool> {
    Err(io::Error::from(io::ErrorKind::Unsupported))
}

/// Never called here ([`anonymous_file`] returns `None`).
pub(crate) fn sync_dir_of(_nameless: &super::Nameless) -> io::Result<()> {
    Ok(())
}
