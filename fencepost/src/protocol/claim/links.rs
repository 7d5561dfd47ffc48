//! A file claimed under another of its names by a tenure that does not hold the
//! file's file id (docs/design-02-resource-identity.md, "Other names of the file").
//!
//! A tenure takes the file id of the file its path names when it claims or renews.
//! Between a claim and the renewal that takes a new file in, the file id can be
//! missing from the tenure: the path named no file when it was claimed, or an
//! editor's save replaced the file since. A claim through another hard link of the
//! file found that file id free and got in, writing around a live tenure. So a
//! claim of a file with other names first looks for them: the live claims of this
//! store whose path names the same file now.

use crate::identity::Identity;
use crate::protocol::series::holder_of;
use crate::protocol::{AcquireOptions, Store};
use crate::{Holder, Resource, Result, SessionTag, record};

impl Store {
    /// The holder of a live exclusive claim of another name of the file `identity`
    /// names — a path key of this store whose newest record is a live claim, not of
    /// `own` session, whose path names the same file now — or, for an exclusive
    /// claimant, a live shared holder of such a name, with that name as
    /// [`Holder::in_the_way`]. `None` when the file has no other names (one `stat`,
    /// the common case), or none is claimed.
    ///
    /// A look before taking, like the look at covering claims: the exclusive creates
    /// still decide a race (a claim of the other name made after this look takes
    /// the file id, whose series this claim takes too). A holder whose process
    /// provably died (with `options.dead_holder_takeover`) is not in the way: its
    /// tenure is fenced by this claim taking the file id, as a claim of its own
    /// resource would take it over.
    ///
    /// # Errors
    ///
    /// [`crate::Error::Backend`] when the store's keys cannot be listed; a key whose
    /// series cannot be read is passed over (it cannot hold the file for us to find).
    ///
    /// Pinned by `fencepost/tests/identity.rs::a_link_made_after_a_claim_on_a_missing_file_is_refused`,
    /// `cli/tests/sessions.rs::a_claim_through_a_link_of_a_saved_file_is_refused_while_its_name_is_held`,
    /// and the checker's `link_claim_after_save` (planted `OTHER_NAMES_NOT_LOOKED_FOR`).
    pub(crate) fn held_under_another_name(
        &self,
        identity: &Identity,
        own: Option<&SessionTag>,
        options: &AcquireOptions,
    ) -> Result<Option<Holder>> {
        // A writer meets the readers of the file's other names too; a reader only
        // their writers (a breaker: a reader and a writer held one saved file under
        // two names).
        let readers = !options.shared;
        #[cfg(feature = "planted-bugs")]
        if crate::planted::on(&crate::planted::OTHER_NAMES_NOT_LOOKED_FOR) {
            return Ok(None);
        }
        let Some(file_id) = identity
            .file_id
            .as_ref()
            .filter(|_| identity.has_other_names())
        else {
            return Ok(None);
        };
        let same_file = |label: &str| {
            Resource::file(std::path::PathBuf::from(label))
                .identity()
                .is_ok_and(|other| other.file_id.as_ref() == Some(file_id))
        };
        for key in self.backend.keys()? {
            // A reader's own series (`share-…`), which names what it reads.
            let shared = key.is_share();
            if !(key.as_str().starts_with("file-") || (readers && shared)) || key == identity.key {
                continue;
            }
            let Ok(newest) = self.read_newest(&key) else {
                continue;
            };
            let Some(record) = newest.claim() else {
                continue;
            };
            if !record::is_live(&record.envelope(), self.clock.wall_ms())
                || (own.is_some() && record.session.as_ref() == own)
            {
                continue;
            }
            let dead = options.dead_holder_takeover
                && record
                    .process
                    .as_ref()
                    .is_some_and(|evidence| self.provably_dead(evidence));
            if dead {
                continue;
            }
            if same_file(&record.label) {
                let mut holder = holder_of(record);
                if shared {
                    holder.owner = format!("{} (shared)", holder.owner);
                }
                holder.in_the_way = Some(Box::new(Resource::File((&*record.label).into())));
                return Ok(Some(holder));
            }
        }
        Ok(None)
    }
}
