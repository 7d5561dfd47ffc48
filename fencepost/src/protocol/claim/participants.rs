//! The participant index of a resource (`shares-…`, docs/design-05-subtrees-and-shared.md
//! §4.2): one entry per shared tenure, each naming that tenure's own series.

use crate::protocol::Store;
use crate::protocol::claim::subtree::IndexEntry;
use crate::{Key, Result};

/// One entry of a participant index and the series it names.
pub(crate) struct Participant {
    /// The entry's generation in the index.
    pub(crate) generation: u64,
    pub(crate) entry: IndexEntry,
    /// The shared tenure's own series.
    pub(crate) key: Key,
    /// The index's newest entry, which is never swept (docs/protocol.md I2).
    pub(crate) newest_entry: bool,
}

impl Store {
    /// Visits the entries of participant index `index` in generation order, until
    /// `visit` returns `Some` (that value). Entries that do not decode or name no
    /// series (cut off by a crash) are skipped; each is read when its turn comes, so
    /// a visit that stops early reads no further.
    pub(crate) fn find_participant<T>(
        &self,
        index: &Key,
        mut visit: impl FnMut(Participant) -> Result<Option<T>>,
    ) -> Result<Option<T>> {
        let mut generations = self.backend.generations(index)?;
        generations.sort_unstable();
        let newest = generations.last().copied();
        for generation in generations {
            let Some(bytes) = self.backend.read(index, generation)? else {
                continue;
            };
            let Ok(entry) = serde_json::from_slice::<IndexEntry>(&bytes) else {
                continue;
            };
            let Some(key) = Key::parse(&entry.points_to) else {
                continue;
            };
            let participant = Participant {
                generation,
                entry,
                key,
                newest_entry: Some(generation) == newest,
            };
            if let Some(found) = visit(participant)? {
                return Ok(Some(found));
            }
        }
        Ok(None)
    }
}
