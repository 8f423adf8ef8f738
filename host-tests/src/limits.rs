//! What one guest may take from its host: time per exported call and linear memory per store.
//!
//! - **Time.** The engine is compiled with epoch interruption and a background thread advances
//!   its epoch every [`HarnessOptions::epoch_tick`](crate::HarnessOptions::epoch_tick). Each
//!   exported call starts a clock; when the epoch deadline comes, the store's callback measures
//!   the time the call has spent *in the guest* (the time the host spent answering its imports,
//!   such as waiting for a provider, running a hook or a tool, does not count: those have their
//!   own timeouts) and ends the call with [`LimitExceeded::Deadline`] once it is over
//!   [`Limits::deadline`]. The host thread goes on; the instance is dead (like any trap), other
//!   instances are untouched.
//! - **Memory.** A [`wasmtime::ResourceLimiter`] built on [`StoreLimits`] caps the linear memory
//!   of all the store's instances together at [`Limits::memory`]; a `memory.grow` past it traps
//!   with [`LimitExceeded::Memory`] instead of returning -1 (which a Rust guest turns into an
//!   abort with no explanation).

use std::fmt;
use std::time::{Duration, Instant};

use wasmtime::{ResourceLimiter, StoreLimits, StoreLimitsBuilder};

/// The limits of one guest's store. `Limits::default()` is what embedders get unless they say
/// otherwise: [`Limits::DEFAULT_DEADLINE`] per call and [`Limits::DEFAULT_MEMORY`] per store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The most guest time one exported call may take (instantiation counts as a call);
    /// `None`: no deadline. Checked once per epoch tick, so a call may overrun by up to a tick.
    pub deadline: Option<Duration>,
    /// The most linear memory, in bytes, the store's instances may hold together; `None`: only
    /// the pool's per-memory maximum ([`HarnessOptions::max_memory`](crate::HarnessOptions)).
    pub memory: Option<usize>,
}

impl Limits {
    /// 30 s of guest time per call: a 16 MiB conversation is validated in milliseconds, so
    /// only a guest that is stuck comes near it.
    pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(30);
    /// 512 MiB of linear memory per store: a 16 MiB workload (a copy in, the parsed value, the
    /// copy out) needs well under a quarter of it.
    pub const DEFAULT_MEMORY: usize = 512 << 20;

    /// No deadline and no memory cap beyond the pool's.
    pub const fn unlimited() -> Self {
        Limits {
            deadline: None,
            memory: None,
        }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            deadline: Some(Self::DEFAULT_DEADLINE),
            memory: Some(Self::DEFAULT_MEMORY),
        }
    }
}

/// The error a call ends with when its guest went past a [`Limits`] bound. It is the source of
/// the call's `anyhow::Error`; find it with [`LimitExceeded::of`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LimitExceeded {
    /// The call spent longer than `limit` in the guest (epoch interruption).
    Deadline {
        /// The deadline of the call.
        limit: Duration,
    },
    /// The guest asked for `requested` bytes of linear memory in total, past `limit`.
    Memory {
        /// The memory cap of the store.
        limit: usize,
        /// The total the refused `memory.grow` would have reached.
        requested: usize,
    },
}

impl LimitExceeded {
    /// The `LimitExceeded` somewhere in `error`'s chain, if a limit is what ended the call.
    pub fn of(error: &anyhow::Error) -> Option<&LimitExceeded> {
        error
            .chain()
            .find_map(|cause| cause.downcast_ref::<LimitExceeded>())
    }
}

impl fmt::Display for LimitExceeded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LimitExceeded::Deadline { limit } => write!(
                f,
                "the guest call was interrupted after {limit:?} of guest time, its deadline"
            ),
            LimitExceeded::Memory { limit, requested } => write!(
                f,
                "the guest asked for {requested} bytes of linear memory, past its limit of \
                 {limit} bytes"
            ),
        }
    }
}

impl std::error::Error for LimitExceeded {}

/// Ticks far enough away to never come (about 350 years of 10 ms ticks).
const NEVER: u64 = 1 << 40;

/// The per-store bookkeeping: the call clock and the memory limiter. Lives in
/// [`HostState`](crate::HostState).
pub(crate) struct StoreGuard {
    limits: Limits,
    tick: Duration,
    started: Instant,
    in_host: Duration,
    entered_host: Option<Instant>,
    /// For each wasm frame entered from the host: whether it interrupted a host import (the
    /// host calling `cabi_realloc` to return a value, say).
    wasm_frames: Vec<bool>,
    store_limits: StoreLimits,
    memory_total: usize,
    pending_growth: usize,
}

impl StoreGuard {
    pub(crate) fn new(limits: Limits) -> Self {
        let mut guard = StoreGuard {
            limits,
            tick: Duration::from_millis(10),
            started: Instant::now(),
            in_host: Duration::ZERO,
            entered_host: None,
            wasm_frames: Vec::new(),
            store_limits: StoreLimits::default(),
            memory_total: 0,
            pending_growth: 0,
        };
        guard.set_limits(limits);
        guard
    }

    /// The limits this store runs under.
    pub(crate) fn limits(&self) -> Limits {
        self.limits
    }

    /// New limits from the next call on; the memory already held still counts.
    pub(crate) fn set_limits(&mut self, limits: Limits) {
        let mut builder = StoreLimitsBuilder::new();
        if let Some(memory) = limits.memory {
            builder = builder.memory_size(memory);
        }
        self.store_limits = builder.build();
        self.limits = limits;
    }

    pub(crate) fn set_tick(&mut self, tick: Duration) {
        self.tick = tick.max(Duration::from_micros(100));
    }

    /// Starts the clock of a call; returns the epoch deadline to set, in ticks.
    pub(crate) fn start_call(&mut self) -> u64 {
        self.started = Instant::now();
        self.in_host = Duration::ZERO;
        self.entered_host = None;
        self.wasm_frames.clear();
        match self.limits.deadline {
            Some(deadline) => self.ticks(deadline),
            None => NEVER,
        }
    }

    /// The guest entered (`true`) or left (`false`) a host import.
    pub(crate) fn host_call(&mut self, entering: bool) {
        if entering {
            self.entered_host = Some(Instant::now());
        } else {
            self.leave_host();
        }
    }

    /// The host called into wasm (`true`) or wasm returned to the host (`false`): the export
    /// itself, or wasm the host runs in the middle of an import (which is guest time again).
    pub(crate) fn wasm_call(&mut self, entering: bool) {
        if entering {
            let in_import = self.entered_host.is_some();
            self.leave_host();
            self.wasm_frames.push(in_import);
        } else if self.wasm_frames.pop() == Some(true) {
            self.entered_host = Some(Instant::now());
        }
    }

    fn leave_host(&mut self) {
        if let Some(entered) = self.entered_host.take() {
            self.in_host += entered.elapsed();
        }
    }

    /// The epoch deadline came: the ticks until the next check, or the error that ends the
    /// call.
    pub(crate) fn deadline_reached(&mut self) -> Result<u64, LimitExceeded> {
        let Some(limit) = self.limits.deadline else {
            return Ok(NEVER);
        };
        let in_host = self.in_host + self.entered_host.map_or(Duration::ZERO, |at| at.elapsed());
        let in_guest = self.started.elapsed().saturating_sub(in_host);
        match limit.checked_sub(in_guest).filter(|left| !left.is_zero()) {
            Some(left) => Ok(self.ticks(left)),
            None => Err(LimitExceeded::Deadline { limit }),
        }
    }

    /// `duration` in whole ticks, at least one.
    fn ticks(&self, duration: Duration) -> u64 {
        let ticks = duration.as_nanos().div_ceil(self.tick.as_nanos().max(1));
        u64::try_from(ticks).unwrap_or(NEVER).clamp(1, NEVER)
    }
}

impl ResourceLimiter for StoreGuard {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let growth = desired.saturating_sub(current);
        let requested = self.memory_total.saturating_add(growth);
        if let Some(limit) = self.limits.memory {
            if requested > limit {
                return Err(wasmtime::Error::new(LimitExceeded::Memory {
                    limit,
                    requested,
                }));
            }
        }
        let allowed = self
            .store_limits
            .memory_growing(current, desired, maximum)?;
        if allowed {
            self.memory_total = requested;
            self.pending_growth = growth;
        }
        Ok(allowed)
    }

    fn memory_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        self.memory_total = self.memory_total.saturating_sub(self.pending_growth);
        self.pending_growth = 0;
        self.store_limits.memory_grow_failed(error)
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        self.store_limits.table_growing(current, desired, maximum)
    }

    fn instances(&self) -> usize {
        self.store_limits.instances()
    }

    fn tables(&self) -> usize {
        self.store_limits.tables()
    }

    fn memories(&self) -> usize {
        self.store_limits.memories()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_deadline_counts_guest_time_only() {
        let mut guard = StoreGuard::new(Limits {
            deadline: Some(Duration::from_millis(50)),
            memory: None,
        });
        guard.set_tick(Duration::from_millis(10));
        assert_eq!(guard.start_call(), 5);
        // Time in a host import does not count, nor does the wasm it calls back into.
        guard.wasm_call(true);
        guard.host_call(true);
        std::thread::sleep(Duration::from_millis(40));
        guard.wasm_call(true);
        assert!(guard.deadline_reached().is_ok());
        guard.wasm_call(false);
        std::thread::sleep(Duration::from_millis(40));
        guard.host_call(false);
        assert!(guard.deadline_reached().is_ok());
        std::thread::sleep(Duration::from_millis(60));
        assert_eq!(
            guard.deadline_reached(),
            Err(LimitExceeded::Deadline {
                limit: Duration::from_millis(50)
            })
        );
        // A new call starts a new clock.
        guard.start_call();
        assert!(guard.deadline_reached().is_ok());
    }

    #[test]
    fn memory_is_capped_per_store_not_per_memory() {
        let mut guard = StoreGuard::new(Limits {
            deadline: None,
            memory: Some(100),
        });
        assert!(guard.memory_growing(0, 60, None).unwrap());
        // A second memory of 60 would pass a per-memory cap of 100; the store's total does not.
        let error = guard.memory_growing(0, 60, None).unwrap_err();
        assert_eq!(
            error.downcast_ref::<LimitExceeded>(),
            Some(&LimitExceeded::Memory {
                limit: 100,
                requested: 120
            })
        );
        assert!(guard.memory_growing(60, 100, None).unwrap());
        assert_eq!(Limits::unlimited().deadline, None);
        assert_eq!(StoreGuard::new(Limits::unlimited()).start_call(), NEVER);
    }
}
