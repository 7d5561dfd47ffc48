//! The floor: what the filesystem itself charges for the operations the protocol is
//! built from, measured on the same directory in the same run.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::R;

/// The size of one record on disk (a fencepost v1 record is about 250 bytes).
pub const RECORD_BYTES: usize = 256;

/// A scratch directory plus the state the floor operations need.
pub struct FloorKit {
    create_dir: PathBuf,
    list_dir: PathBuf,
    status_dir: PathBuf,
    next: u64,
    bytes: Vec<u8>,
}

/// The generation number in a record-like name `g00000012.json`.
fn parse_name(name: &str) -> Option<u64> {
    name.strip_prefix('g')?.strip_suffix(".json")?.parse().ok()
}

/// Lists `dir`, picks the highest-numbered record-like name, reads it.
fn list_and_read_newest(dir: &Path) -> R<usize> {
    let mut newest = None;
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        if let Some(g) = entry.file_name().to_str().and_then(parse_name) {
            newest = newest.max(Some(g));
        }
    }
    let g = newest.ok_or("floor directory without records")?;
    Ok(fs::read(dir.join(format!("g{g:08}.json")))?.len())
}

impl FloorKit {
    /// Prepares the scratch directories under `root`: one for creates, one holding
    /// two small records, and `status_keys` key directories of two records each.
    pub fn new(root: &Path, status_keys: usize) -> R<FloorKit> {
        let kit = FloorKit {
            create_dir: root.join("create"),
            list_dir: root.join("list"),
            status_dir: root.join("status"),
            next: 1,
            bytes: vec![b'x'; RECORD_BYTES],
        };
        fs::create_dir_all(&kit.create_dir)?;
        fs::create_dir_all(&kit.list_dir)?;
        for g in 1..=2 {
            fs::write(kit.list_dir.join(format!("g{g:08}.json")), &kit.bytes)?;
        }
        for k in 0..status_keys {
            let dir = kit.status_dir.join(format!("k{k:05}"));
            fs::create_dir_all(&dir)?;
            for g in 1..=2 {
                fs::write(dir.join(format!("g{g:08}.json")), &kit.bytes)?;
            }
        }
        Ok(kit)
    }

    /// One exclusive create of a new name plus a write of one record, and with
    /// `flush` a flush of the file and then of the directory. The file from two
    /// creates ago is removed first, untimed, so the directory stays as small as a
    /// swept claim series.
    pub fn create(&mut self, flush: bool) -> R<Duration> {
        let n = self.next;
        self.next += 1;
        if n > 2 {
            let _ = fs::remove_file(self.create_dir.join(format!("g{:08}.json", n - 2)));
        }
        let path = self.create_dir.join(format!("g{n:08}.json"));
        let start = Instant::now();
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)?;
        file.write_all(&self.bytes)?;
        if flush {
            file.sync_all()?;
            File::open(&self.create_dir)?.sync_all()?;
        }
        drop(file);
        Ok(start.elapsed())
    }

    /// The single-fsync floor: one exclusive create of a new name, a write of one
    /// record and ONE flush, of the file. On a journaling filesystem that is one
    /// journal commit carrying both the data and the name; it is the least a durable
    /// claim could cost, though POSIX alone does not promise the name survives it
    /// (that takes the directory flush of [`create`](FloorKit::create)).
    pub fn create_one_flush(&mut self) -> R<Duration> {
        let n = self.next;
        self.next += 1;
        if n > 2 {
            let _ = fs::remove_file(self.create_dir.join(format!("g{:08}.json", n - 2)));
        }
        let path = self.create_dir.join(format!("g{n:08}.json"));
        let start = Instant::now();
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)?;
        file.write_all(&self.bytes)?;
        file.sync_all()?;
        drop(file);
        Ok(start.elapsed())
    }

    /// A flushed create: the single-fsync one when `one_flush`, else file + directory.
    pub fn create_flushed(&mut self, one_flush: bool) -> R<Duration> {
        if one_flush {
            self.create_one_flush()
        } else {
            self.create(true)
        }
    }

    /// One directory listing plus a read of the newest of two small files.
    pub fn list_read(&mut self) -> R<Duration> {
        let start = Instant::now();
        std::hint::black_box(list_and_read_newest(&self.list_dir)?);
        Ok(start.elapsed())
    }

    /// A listing of the status directory, then listing + read in each key directory:
    /// the shape of `status` over that many keys.
    pub fn status(&mut self) -> R<Duration> {
        let start = Instant::now();
        for entry in fs::read_dir(&self.status_dir)? {
            std::hint::black_box(list_and_read_newest(&entry?.path())?);
        }
        Ok(start.elapsed())
    }
}
