//! The run's virtual clocks and seeded entropy ([`Determinism`]) handed to a WASI
//! context through wasmtime-wasi's hooks: `wall_clock` and `monotonic_clock` read one
//! [`VirtualTime`], `secure_random` (WASI preview 1's `random_get`, hence `os.urandom`,
//! Python's `random` seeding, `uuid4`, `tempfile` names) and `insecure_random` draw from
//! ChaCha20 streams of the recorded seed. Parts left to the host stay the host's.
//!
//! A sleep moves the virtual clock: [`link_sleeps`] wraps WASI preview 1's `poll_oneoff`
//! (what `time.sleep`, `select`/`poll` and so asyncio's timers end in), which still waits
//! on real time, and when it ends on a clock subscription advances both virtual clocks by
//! what that subscription asked for.

use runner_core::determinism::Determinism;
use runner_sandbox::determinism::{STREAM_INSECURE, STREAM_SECURE, VirtualTime, seeded_stream};
use std::time::Duration;
use wasmtime::{Caller, Extern, Linker};
use wasmtime_wasi::p1::WasiP1Ctx;
use wasmtime_wasi::p1::wasi_snapshot_preview1::{self as p1, WasiSnapshotPreview1 as _};
use wasmtime_wasi::{HostMonotonicClock, HostWallClock, WasiCtxBuilder};

struct WallClock(VirtualTime);

impl HostWallClock for WallClock {
    fn resolution(&self) -> Duration {
        Duration::from_nanos(self.0.step_ns())
    }

    fn now(&self) -> Duration {
        Duration::from_nanos(self.0.wall_ns())
    }
}

struct MonotonicClock(VirtualTime);

impl HostMonotonicClock for MonotonicClock {
    fn resolution(&self) -> u64 {
        self.0.step_ns()
    }

    fn now(&self) -> u64 {
        self.0.monotonic_ns()
    }
}

/// Replaces the builder's clocks and random sources with the run's virtual ones, where
/// `determinism` asks for them; the virtual clock for [`link_sleeps`], if its sleeps
/// move it (not when replaying a `virtual-fixed-step/v1` lock).
pub fn apply(builder: &mut WasiCtxBuilder, determinism: &Determinism) -> Option<VirtualTime> {
    let time = determinism.clock.map(VirtualTime::new);
    if let Some(time) = &time {
        builder
            .wall_clock(WallClock(time.clone()))
            .monotonic_clock(MonotonicClock(time.clone()));
    }
    if let Some(seed) = determinism.seed_bytes() {
        let mut insecure = seeded_stream(&seed, STREAM_INSECURE);
        let insecure_seed = {
            use rand_core::Rng;
            u128::from(insecure.next_u64()) << 64 | u128::from(insecure.next_u64())
        };
        builder
            .secure_random(seeded_stream(&seed, STREAM_SECURE))
            .insecure_random(insecure)
            .insecure_random_seed(insecure_seed);
    }
    time.filter(|_| determinism.clock.is_some_and(|c| c.sleeps_advance))
}

const MODULE: &str = "wasi_snapshot_preview1";
/// `subscription` and `event` of WASI preview 1: sizes and the offsets read here.
const SUB_SIZE: usize = 48;
const SUB_TAG: usize = 8;
const SUB_CLOCK_ID: usize = 16;
const SUB_CLOCK_TIMEOUT: usize = 24;
const SUB_CLOCK_FLAGS: usize = 40;
const EVENT_SIZE: usize = 32;
const EVENT_TYPE: usize = 10;
const EVENTTYPE_CLOCK: u8 = 0;
const CLOCKID_REALTIME: u32 = 0;
const CLOCKID_MONOTONIC: u32 = 1;
const ABSTIME: u16 = 1;

/// Shadows `poll_oneoff` in `linker` (which already holds wasmtime-wasi's) with the same
/// call followed by the virtual clock's step: when the poll returned a clock event, both
/// clocks advance by the shortest of its clock subscriptions (a relative timeout as
/// asked, an absolute one up to its deadline), and exactly the clock subscriptions of
/// that length are reported as fired. The real wait is wasmtime-wasi's, unchanged (a
/// sleep past the wall-clock limit is still stopped by it); what the guest reads next
/// depends only on what it asked, so a replay reads the same.
pub fn link_sleeps<T: Send + 'static>(
    linker: &mut Linker<T>,
    wasi: fn(&mut T) -> &mut WasiP1Ctx,
    time: VirtualTime,
) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let linked = linker
        .func_wrap_async(
            MODULE,
            "poll_oneoff",
            move |mut caller: Caller<'_, T>,
                  (subs, events, count, nevents): (i32, i32, i32, i32)| {
                let time = time.clone();
                Box::new(async move {
                    let Some(Extern::Memory(memory)) = caller.get_export("memory") else {
                        wasmtime::bail!("missing required memory export");
                    };
                    let fuel = wasmtime::AsContextMut::as_context_mut(&mut caller).hostcall_fuel();
                    let errno = {
                        let (mem, state) = memory.data_and_store_mut(&mut caller);
                        let ctx = wasi(state);
                        ctx.set_hostcall_fuel(fuel);
                        let mut mem = wiggle::GuestMemory::Unshared(mem);
                        p1::poll_oneoff(ctx, &mut mem, subs, events, count, nevents).await?
                    };
                    if errno == 0 {
                        after_poll(
                            memory.data_mut(&mut caller),
                            &time,
                            [subs, events, count, nevents],
                        );
                    }
                    Ok(errno)
                })
            },
        )
        .map(|_| ());
    linker.allow_shadowing(false);
    linked
}

/// The guest memory at `at`, `len` bytes long (`None` out of bounds).
fn field(mem: &[u8], at: usize, len: usize) -> Option<&[u8]> {
    mem.get(at..at.checked_add(len)?)
}

fn le_u64(mem: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(field(mem, at, 8)?.try_into().ok()?))
}

fn le_u32(mem: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(field(mem, at, 4)?.try_into().ok()?))
}

fn le_u16(mem: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(field(mem, at, 2)?.try_into().ok()?))
}

/// How far the clock subscription at `at` moves the clocks when it fires (`None`: not a
/// clock subscription, or a clock this runner does not offer).
fn clock_subscription(mem: &[u8], at: usize, time: &VirtualTime) -> Option<u64> {
    if *field(mem, at + SUB_TAG, 1)?.first()? != EVENTTYPE_CLOCK {
        return None;
    }
    let id = le_u32(mem, at + SUB_CLOCK_ID)?;
    let timeout = le_u64(mem, at + SUB_CLOCK_TIMEOUT)?;
    let absolute = le_u16(mem, at + SUB_CLOCK_FLAGS)? & ABSTIME != 0;
    Some(match (id, absolute) {
        (_, false) => timeout,
        (CLOCKID_MONOTONIC, true) => time.until(timeout, false),
        (CLOCKID_REALTIME, true) => time.until(timeout, true),
        _ => return None,
    })
}

/// After a successful `poll_oneoff(subs, events, count, nevents)`: see [`link_sleeps`].
/// Memory the call just used; anything out of bounds leaves the clocks alone.
fn after_poll(mem: &mut [u8], time: &VirtualTime, [subs, events, count, nevents]: [i32; 4]) {
    let addr = |p: i32| usize::try_from(p.cast_unsigned()).ok();
    let (Some(subs), Some(events), Some(count), Some(nevents)) =
        (addr(subs), addr(events), addr(count), addr(nevents))
    else {
        return;
    };
    let Some(fired) = le_u32(mem, nevents).and_then(|n| usize::try_from(n).ok()) else {
        return;
    };
    let Some(list) = field(mem, events, fired.saturating_mul(EVENT_SIZE)) else {
        return;
    };
    let kept: Vec<[u8; EVENT_SIZE]> = list
        .chunks_exact(EVENT_SIZE)
        .filter(|e| e[EVENT_TYPE] != EVENTTYPE_CLOCK)
        .filter_map(|e| e.try_into().ok())
        .collect();
    if kept.len() == fired {
        return; // no clock fired
    }
    let clocks: Vec<(u64, u64)> = (0..count)
        .filter_map(|i| {
            let at = subs.checked_add(i.checked_mul(SUB_SIZE)?)?;
            Some((le_u64(mem, at)?, clock_subscription(mem, at, time)?))
        })
        .collect();
    let Some(step) = clocks.iter().map(|&(_, ns)| ns).min() else {
        return;
    };
    // The shortest clock fires, alone or with those of its length, whichever fired in
    // real time: on a loaded host a later one may have fired too, and a replay must not
    // see that.
    let mut out = kept;
    for &(userdata, ns) in &clocks {
        if ns == step {
            let mut event = [0u8; EVENT_SIZE];
            event[..8].copy_from_slice(&userdata.to_le_bytes());
            event[EVENT_TYPE] = EVENTTYPE_CLOCK;
            out.push(event);
        }
    }
    let Some(dest) = mem.get_mut(events..events.saturating_add(out.len() * EVENT_SIZE)) else {
        return;
    };
    for (slot, event) in dest.chunks_exact_mut(EVENT_SIZE).zip(&out) {
        slot.copy_from_slice(event);
    }
    let n = u32::try_from(out.len()).unwrap_or(u32::MAX).to_le_bytes();
    if let Some(slot) = mem.get_mut(nevents..nevents + 4) {
        slot.copy_from_slice(&n);
    }
    time.sleep_relative(step);
}
