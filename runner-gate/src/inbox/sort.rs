//! Sorting a batch of documents: judged in parallel, named, reported, made durable
//! together, then each moved with its companions.

use super::filer::{MAX_TRIES, Plan};
use super::names::shown;
use super::scan::{Document, Gate, rejected};
use super::{Entry, HeldDir};
use crate::moves::{is_exists, write_replace_unsynced as write_unsynced};
use crate::{Judgement, Verdict};
use std::collections::HashSet;

impl Gate<'_> {
    /// Sorts a batch: judges every document (in parallel), picks every destination
    /// name, writes every reason report, makes them durable with one `syncfs`, then
    /// moves each document with its companions.
    pub(super) fn sort_batch(&self, batch: &[Document]) -> Vec<Entry> {
        let judged = self.judge_all(batch);
        // Names first (reserved within the batch), then reports, then one flush.
        let mut prepared = self.prepare(batch, &judged);
        self.flush(&mut prepared, &judged);
        batch
            .iter()
            .zip(&judged)
            .enumerate()
            .map(|(i, (document, judged))| self.move_one(document, judged, &prepared, i))
            .collect()
    }

    /// Judges every document of the batch, on as many threads as there are cores; a
    /// thread that panics rejects its share as `internal.panic`.
    fn judge_all(&self, batch: &[Document]) -> Vec<(Judgement, Option<String>)> {
        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(batch.len().max(1));
        let per = batch.len().div_ceil(threads).max(1);
        std::thread::scope(|scope| {
            let handles: Vec<_> = batch
                .chunks(per)
                .map(|chunk| {
                    let handle = scope.spawn(move || {
                        chunk
                            .iter()
                            .map(|(name, _)| self.judge_one(name))
                            .collect::<Vec<_>>()
                    });
                    (chunk.len(), handle)
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|(len, h)| {
                    h.join().unwrap_or_else(|_| {
                        let failed = rejected(
                            "internal.panic",
                            "the validator panicked on this document's batch",
                        );
                        vec![(failed, None); len]
                    })
                })
                .collect()
        })
    }

    /// Picks each document's destination name (reserved within the batch) and writes
    /// its reason report and its intent, unsynced.
    fn prepare(&self, batch: &[Document], judged: &[(Judgement, Option<String>)]) -> Prepared {
        // Names reserved in each destination (accepted, quarantine) by this batch.
        let mut reserved: [HashSet<String>; 2] = Default::default();
        let mut p = Prepared {
            plans: Vec::with_capacity(batch.len()),
            errors: vec![None; batch.len()],
            dirty: [false; 2],
            intents: vec![false; batch.len()],
        };
        for (i, ((name, companions), (judgement, text))) in batch.iter().zip(judged).enumerate() {
            let to = Self::dest_index(judgement);
            let dest = &self.dests()[to].dir;
            let reserved = &mut reserved[to];
            let plan = (1..=MAX_TRIES)
                .find_map(|n| self.filer().candidate(name, companions, dest, n, reserved));
            let Some(plan) = plan else {
                p.errors[i] = Some(format!(
                    "no free name for {} after {MAX_TRIES} tries",
                    shown(name)
                ));
                p.plans.push(None);
                continue;
            };
            reserved
                .extend(std::iter::once(plan.doc.clone()).chain(plan.companions.iter().cloned()));
            if judgement.verdict == Verdict::Reject {
                if let Err(e) = self.filer().write_reports(
                    dest,
                    &plan.doc,
                    name,
                    judgement,
                    text.as_deref(),
                    false,
                ) {
                    p.errors[i] = Some(format!("cannot write the reason report: {e}"));
                    p.plans.push(None);
                    continue;
                }
                p.dirty[to] = true;
            }
            if !companions.is_empty() {
                let written = self
                    .filer()
                    .intent(name, companions, &plan)
                    .and_then(|(intent_name, bytes)| write_unsynced(dest, &intent_name, &bytes));
                if let Err(e) = written {
                    p.errors[i] = Some(format!("cannot record the intent: {e}"));
                    p.plans.push(None);
                    continue;
                }
                p.intents[i] = true;
                p.dirty[to] = true;
            }
            p.plans.push(Some(plan));
        }
        p
    }

    /// Makes every report and intent of the batch durable before any of its moves; a
    /// destination that cannot be flushed keeps its documents in the inbox.
    fn flush(&self, p: &mut Prepared, judged: &[(Judgement, Option<String>)]) {
        for (to, dest) in self.dests().into_iter().enumerate() {
            if !p.dirty[to] {
                continue;
            }
            if let Err(e) = runner_sandbox::durable::syncfs(&dest.dir) {
                for (i, (j, _)) in judged.iter().enumerate() {
                    if Self::dest_index(j) == to && p.errors[i].is_none() {
                        p.errors[i] = Some(format!("cannot flush {}: {e}", dest.path.display()));
                        p.plans[i] = None;
                    }
                }
            }
        }
    }

    /// Moves the `i`th document of the batch with its companions as planned, and says
    /// where it went (or why it stayed).
    fn move_one(
        &self,
        (name, companions): &Document,
        (judgement, text): &(Judgement, Option<String>),
        p: &Prepared,
        i: usize,
    ) -> Entry {
        let to = Self::dest_index(judgement);
        let dest = &self.dests()[to].dir;
        let label = ["accepted", "quarantine"][to];
        let mut entry = Entry {
            source: shown(name),
            kind: judgement.kind_name(),
            verdict: Some(judgement.verdict),
            dest: None,
            companions: Vec::new(),
            codes: judgement.reasons.iter().map(|r| r.code.clone()).collect(),
            skipped: None,
            error: p.errors[i].clone(),
        };
        if let Some(plan) = &p.plans[i] {
            let moved = match self
                .filer()
                .move_all(name, companions, dest, plan, p.intents[i])
            {
                Ok(()) => Ok((plan.doc.clone(), plan.companions.clone())),
                // Someone else took the name since it was picked: the slow path
                // picks another, writes the report again, and moves.
                Err(e) if is_exists(&e) => {
                    self.filer()
                        .place(name, companions, dest, judgement, text.as_deref())
                }
                Err(e) => Err(e),
            };
            match moved {
                Ok((doc, moved)) => {
                    entry.dest = Some(format!("{label}/{doc}"));
                    entry.companions = moved.into_iter().map(|c| format!("{label}/{c}")).collect();
                }
                Err(e) => entry.error = Some(format!("left in the inbox: {e}")),
            }
        } else if let Some(e) = &entry.error {
            entry.error = Some(format!("left in the inbox: {e}"));
        }
        entry
    }

    /// The destinations, accepted then quarantine.
    fn dests(&self) -> [&HeldDir; 2] {
        [&self.accepted, &self.quarantine]
    }

    /// Where a judgement sends its document, as an index into [`Gate::dests`].
    fn dest_index(judgement: &Judgement) -> usize {
        match judgement.verdict {
            Verdict::Accept => 0,
            Verdict::Reject => 1,
        }
    }
}

/// What [`Gate::prepare`] settled for each document of a batch, by index.
struct Prepared {
    /// The names each document and its companions take, `None` when one of its steps
    /// failed (then `errors` says which).
    plans: Vec<Option<Plan>>,
    errors: Vec<Option<String>>,
    /// Destinations written to (reports, intents), to flush before any move.
    dirty: [bool; 2],
    /// An intent was recorded (the document has companions).
    intents: Vec<bool>,
}
