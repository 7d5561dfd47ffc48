//! The rivals: an OS advisory lock (`flock` through the `fd-lock` crate) and a
//! create-exclusive lockfile with mtime-based stale takeover.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use crate::Iters;
use crate::R;
use crate::rows::{Row, paired, timed};

/// **The bench's own implementation of the common lockfile design** (what most
/// lockfile libraries do): `lock` creates the lock file exclusively (`O_EXCL`) and
/// writes the holder's id; if it exists and its mtime is older than `stale`, the
/// lock is presumed abandoned, removed and created again; `unlock` removes the
/// file. Nothing is flushed. It has no token, so nothing can tell a resumed holder
/// that it was written around.
pub struct MtimeLockfile {
    pub path: PathBuf,
    pub stale: Duration,
    pub id: String,
}

impl MtimeLockfile {
    /// One attempt: true if the lock is now ours.
    pub fn try_lock(&self) -> io::Result<bool> {
        for _ in 0..2 {
            match OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&self.path)
            {
                Ok(mut file) => {
                    file.write_all(self.id.as_bytes())?;
                    return Ok(true);
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    let age = fs::metadata(&self.path)
                        .and_then(|m| m.modified())
                        .map(|m| SystemTime::now().duration_since(m).unwrap_or_default());
                    match age {
                        Ok(age) if age > self.stale => match fs::remove_file(&self.path) {
                            Ok(()) => continue,
                            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                            Err(e) => return Err(e),
                        },
                        Ok(_) => return Ok(false),
                        Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                        Err(e) => return Err(e),
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Ok(false)
    }

    /// Releases: removes the lock file, whoever's it is now.
    pub fn unlock(&self) -> io::Result<()> {
        fs::remove_file(&self.path)
    }
}

/// Opens (creating) the file `fd-lock` locks.
pub fn flock_file(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
}

/// flock lock + unlock, and the lockfile's lock + unlock.
pub fn rival_rows(dir: &Path, it: &Iters) -> R<Vec<Row>> {
    let group = "rivals, same directory".to_string();
    let mut rows = Vec::new();
    fs::create_dir_all(dir)?;

    let mut lock = fd_lock::RwLock::new(flock_file(&dir.join("flock.lock"))?);
    let mut op = || {
        timed(|| {
            let guard = lock.write()?;
            drop(guard);
            Ok(())
        })
        .map(|(_, t)| t)
    };
    let (summary, _) = paired(it.fs, it.warmup, &mut op, None)?;
    rows.push(Row {
        group: group.clone(),
        name: "OS advisory lock (`flock` via fd-lock): lock + unlock, file kept open".into(),
        summary,
        floor: None,
        floor_one: None,
        floor_swept: None,
        back_to_back: None,
        weather: None,
        target: None,
    });

    let path = dir.join("flock-open.lock");
    let mut op = || {
        timed(|| {
            let mut lock = fd_lock::RwLock::new(flock_file(&path)?);
            drop(lock.write()?);
            Ok(())
        })
        .map(|(_, t)| t)
    };
    let (summary, _) = paired(it.fs, it.warmup, &mut op, None)?;
    rows.push(Row {
        group: group.clone(),
        name: "OS advisory lock (`flock` via fd-lock): open + lock + unlock + close".into(),
        summary,
        floor: None,
        floor_one: None,
        floor_swept: None,
        back_to_back: None,
        weather: None,
        target: None,
    });

    let lockfile = MtimeLockfile {
        path: dir.join("mtime.lock"),
        stale: Duration::from_secs(10),
        id: format!("bench-{}", std::process::id()),
    };
    let mut op = || {
        timed(|| {
            if !lockfile.try_lock()? {
                return Err("the lockfile rival was refused on a free lock".into());
            }
            Ok(lockfile.unlock()?)
        })
        .map(|(_, t)| t)
    };
    let (summary, _) = paired(it.fs, it.warmup, &mut op, None)?;
    rows.push(Row {
        group,
        name: "lockfile with mtime stale takeover (bench's implementation): lock + unlock".into(),
        summary,
        floor: None,
        floor_one: None,
        floor_swept: None,
        back_to_back: None,
        weather: None,
        target: None,
    });
    Ok(rows)
}
