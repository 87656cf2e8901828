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
        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(batch.len().max(1));
        let per = batch.len().div_ceil(threads).max(1);
        let judged: Vec<(Judgement, Option<String>)> = std::thread::scope(|scope| {
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
        });

        // Names first (reserved within the batch), then reports, then one flush.
        // Names reserved in each destination (accepted, quarantine) by this batch.
        let mut reserved: [HashSet<String>; 2] = Default::default();
        let mut plans: Vec<Option<Plan>> = Vec::with_capacity(batch.len());
        let mut errors: Vec<Option<String>> = vec![None; batch.len()];
        // Destinations written to (reports, intents), to flush before any move.
        let mut dirty = [false; 2];
        let mut intents: Vec<bool> = vec![false; batch.len()];
        for (i, ((name, companions), (judgement, text))) in batch.iter().zip(&judged).enumerate() {
            let to = Self::dest_index(judgement);
            let dest = &self.dests()[to].dir;
            let reserved = &mut reserved[to];
            let plan = (1..=MAX_TRIES)
                .find_map(|n| self.filer().candidate(name, companions, dest, n, reserved));
            let Some(plan) = plan else {
                errors[i] = Some(format!(
                    "no free name for {} after {MAX_TRIES} tries",
                    shown(name)
                ));
                plans.push(None);
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
                    errors[i] = Some(format!("cannot write the reason report: {e}"));
                    plans.push(None);
                    continue;
                }
                dirty[to] = true;
            }
            if !companions.is_empty() {
                let written = self
                    .filer()
                    .intent(name, companions, &plan)
                    .and_then(|(intent_name, bytes)| write_unsynced(dest, &intent_name, &bytes));
                if let Err(e) = written {
                    errors[i] = Some(format!("cannot record the intent: {e}"));
                    plans.push(None);
                    continue;
                }
                intents[i] = true;
                dirty[to] = true;
            }
            plans.push(Some(plan));
        }
        // Every report and intent of the batch durable before any of its moves.
        for (to, dest) in self.dests().into_iter().enumerate() {
            if !dirty[to] {
                continue;
            }
            if let Err(e) = runner_sandbox::durable::syncfs(&dest.dir) {
                for (i, (_, (j, _))) in batch.iter().zip(&judged).enumerate() {
                    if Self::dest_index(j) == to && errors[i].is_none() {
                        errors[i] = Some(format!("cannot flush {}: {e}", dest.path.display()));
                        plans[i] = None;
                    }
                }
            }
        }

        let mut entries = Vec::with_capacity(batch.len());
        for (i, ((name, companions), (judgement, text))) in batch.iter().zip(&judged).enumerate() {
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
                error: errors[i].clone(),
            };
            if let Some(plan) = &plans[i] {
                let moved = match self
                    .filer()
                    .move_all(name, companions, dest, plan, intents[i])
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
                        entry.companions =
                            moved.into_iter().map(|c| format!("{label}/{c}")).collect();
                    }
                    Err(e) => entry.error = Some(format!("left in the inbox: {e}")),
                }
            } else if let Some(e) = &entry.error {
                entry.error = Some(format!("left in the inbox: {e}"));
            }
            entries.push(entry);
        }
        entries
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
