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
//! - **A shared budget.** Stores may also share a [`MemoryBudget`]: the linear memory of all of
//!   them together. A `memory.grow` that would pass it traps with [`LimitExceeded::Budget`];
//!   a store gives its memory back to the budget when it is dropped. `oma-host serve` gives
//!   every request's store the server's budget, so that no number of large requests at once
//!   can take the process past it.

use std::fmt;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
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
    /// The guest asked for `growth` more bytes of linear memory while the stores sharing its
    /// [`MemoryBudget`] held `in_use` bytes together: past the budget's `limit`. Another time,
    /// with fewer requests running, the same call may fit.
    Budget {
        /// The budget, in bytes.
        limit: usize,
        /// What the stores sharing it held when the growth was refused.
        in_use: usize,
        /// The growth refused.
        growth: usize,
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
            LimitExceeded::Budget {
                limit,
                in_use,
                growth,
            } => write!(
                f,
                "the guest asked for {growth} more bytes of linear memory while all instances \
                 held {in_use} bytes together, past their shared budget of {limit} bytes"
            ),
        }
    }
}

impl std::error::Error for LimitExceeded {}

/// Linear memory that several stores share: the most they may hold together. Cloning gives
/// another handle on the same budget.
#[derive(Clone, Debug)]
pub struct MemoryBudget {
    inner: Arc<BudgetInner>,
}

#[derive(Debug)]
struct BudgetInner {
    limit: usize,
    used: AtomicUsize,
}

impl MemoryBudget {
    /// A budget of `limit` bytes, none of it in use.
    pub fn new(limit: usize) -> Self {
        MemoryBudget {
            inner: Arc::new(BudgetInner {
                limit,
                used: AtomicUsize::new(0),
            }),
        }
    }

    /// The budget, in bytes.
    pub fn limit(&self) -> usize {
        self.inner.limit
    }

    /// What the stores sharing it hold now, in bytes.
    pub fn in_use(&self) -> usize {
        self.inner.used.load(Ordering::Relaxed)
    }

    /// What is left of it, in bytes.
    pub fn available(&self) -> usize {
        self.limit().saturating_sub(self.in_use())
    }

    /// Takes `bytes` from the budget, or says how much was in use when they did not fit.
    fn take(&self, bytes: usize) -> Result<(), usize> {
        let limit = self.inner.limit;
        self.inner
            .used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(bytes).filter(|total| *total <= limit)
            })
            .map(drop)
    }

    /// Gives `bytes` back.
    fn give_back(&self, bytes: usize) {
        let _ = self
            .inner
            .used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                Some(used.saturating_sub(bytes))
            });
    }
}

/// Ticks far enough away to never come (about 350 years of 10 ms ticks).
const NEVER: u64 = 1 << 40;

/// The time the epoch threads last saw, in nanoseconds since [`origin`]: every epoch thread
/// stores it just before it advances its engine's epoch, so it is never more than a tick behind.
static EPOCH_CLOCK: AtomicU64 = AtomicU64::new(0);

/// The instant the call clocks count from.
fn origin() -> Instant {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    *ORIGIN.get_or_init(Instant::now)
}

/// Brings the epoch clock up to now: the epoch thread calls it before every tick.
pub(crate) fn advance_epoch_clock() {
    let now = u64::try_from(origin().elapsed().as_nanos()).unwrap_or(u64::MAX);
    EPOCH_CLOCK.fetch_max(now, Ordering::Relaxed);
}

/// Where a store's call clock reads the time.
#[derive(Clone, Copy, Debug)]
enum Clock {
    /// `Instant::now()`: exact, a clock read per host-call transition.
    Precise,
    /// An epoch clock ([`EPOCH_CLOCK`] in the harness): one atomic load per transition, exact
    /// to a tick. A guest crosses into the host and back hundreds of times in one run (each
    /// string the host lowers is a `cabi_realloc` call), and with the precise clock those
    /// reads were 3% of a run; the deadline is only checked once per tick anyway.
    Epoch(&'static AtomicU64),
}

impl Clock {
    fn now(self) -> Duration {
        match self {
            Clock::Precise => origin().elapsed(),
            Clock::Epoch(nanos) => Duration::from_nanos(nanos.load(Ordering::Relaxed)),
        }
    }
}

/// The per-store bookkeeping: the call clock and the memory limiter. Lives in
/// [`HostState`](crate::HostState).
pub(crate) struct StoreGuard {
    limits: Limits,
    tick: Duration,
    clock: Clock,
    /// When the call started, on `clock`.
    started: Duration,
    in_host: Duration,
    /// When the guest entered the host import it is in, on `clock`.
    entered_host: Option<Duration>,
    /// For each wasm frame entered from the host: whether it interrupted a host import (the
    /// host calling `cabi_realloc` to return a value, say).
    wasm_frames: Vec<bool>,
    store_limits: StoreLimits,
    memory_total: usize,
    pending_growth: usize,
    /// The budget this store shares with others, and how much of it the store holds.
    budget: Option<MemoryBudget>,
    from_budget: usize,
}

impl Drop for StoreGuard {
    fn drop(&mut self) {
        if let Some(budget) = &self.budget {
            budget.give_back(self.from_budget);
        }
    }
}

impl StoreGuard {
    pub(crate) fn new(limits: Limits) -> Self {
        let mut guard = StoreGuard {
            limits,
            tick: Duration::from_millis(10),
            clock: Clock::Precise,
            started: Duration::ZERO,
            in_host: Duration::ZERO,
            entered_host: None,
            wasm_frames: Vec::new(),
            store_limits: StoreLimits::default(),
            memory_total: 0,
            pending_growth: 0,
            budget: None,
            from_budget: 0,
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

    /// Makes the store's memory count against `budget` from now on (before the store has any,
    /// so that all of it counts).
    pub(crate) fn share_budget(&mut self, budget: MemoryBudget) {
        if let Some(old) = self.budget.take() {
            old.give_back(self.from_budget);
        }
        self.from_budget = 0;
        self.budget = Some(budget);
    }

    pub(crate) fn set_tick(&mut self, tick: Duration) {
        self.tick = tick.max(Duration::from_micros(100));
    }

    /// Reads time from the epoch clock instead of `Instant::now()`: for stores of an engine
    /// whose epoch thread runs (every harness engine's).
    pub(crate) fn use_epoch_clock(&mut self) {
        self.clock = Clock::Epoch(&EPOCH_CLOCK);
    }

    /// Starts the clock of a call; returns the epoch deadline to set, in ticks.
    pub(crate) fn start_call(&mut self) -> u64 {
        self.started = self.clock.now();
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
            self.entered_host = Some(self.clock.now());
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
            self.entered_host = Some(self.clock.now());
        }
    }

    fn leave_host(&mut self) {
        if let Some(entered) = self.entered_host.take() {
            self.in_host += self.clock.now().saturating_sub(entered);
        }
    }

    /// The epoch deadline came: the ticks until the next check, or the error that ends the
    /// call.
    pub(crate) fn deadline_reached(&mut self) -> Result<u64, LimitExceeded> {
        let Some(limit) = self.limits.deadline else {
            return Ok(NEVER);
        };
        let now = self.clock.now();
        let in_host = self.in_host
            + self
                .entered_host
                .map_or(Duration::ZERO, |at| now.saturating_sub(at));
        let in_guest = now.saturating_sub(self.started).saturating_sub(in_host);
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
        if let Some(budget) = &self.budget {
            if let Err(in_use) = budget.take(growth) {
                return Err(wasmtime::Error::new(LimitExceeded::Budget {
                    limit: budget.limit(),
                    in_use,
                    growth,
                }));
            }
        }
        let allowed = self
            .store_limits
            .memory_growing(current, desired, maximum)?;
        if allowed {
            self.memory_total = requested;
            self.pending_growth = growth;
            if self.budget.is_some() {
                self.from_budget = self.from_budget.saturating_add(growth);
            }
        } else if let Some(budget) = &self.budget {
            budget.give_back(growth);
        }
        Ok(allowed)
    }

    fn memory_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        self.memory_total = self.memory_total.saturating_sub(self.pending_growth);
        if let Some(budget) = &self.budget {
            budget.give_back(self.pending_growth);
            self.from_budget = self.from_budget.saturating_sub(self.pending_growth);
        }
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
    fn the_epoch_clock_counts_guest_time_in_ticks() {
        static CLOCK: AtomicU64 = AtomicU64::new(0);
        let advance = |ms: u64| CLOCK.fetch_add(ms * 1_000_000, Ordering::Relaxed);
        let mut guard = StoreGuard::new(Limits {
            deadline: Some(Duration::from_millis(50)),
            memory: None,
        });
        guard.set_tick(Duration::from_millis(10));
        guard.clock = Clock::Epoch(&CLOCK);
        guard.start_call();
        guard.wasm_call(true);
        advance(30);
        guard.host_call(true);
        advance(1000);
        guard.host_call(false);
        // 30 ms in the guest, 1 s in the host: 20 ms left, two ticks.
        assert_eq!(guard.deadline_reached(), Ok(2));
        advance(20);
        assert_eq!(
            guard.deadline_reached(),
            Err(LimitExceeded::Deadline {
                limit: Duration::from_millis(50)
            })
        );
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

    #[test]
    fn stores_that_share_a_budget_hold_it_together_and_give_it_back() {
        let budget = MemoryBudget::new(100);
        let mut a = StoreGuard::new(Limits::unlimited());
        let mut b = StoreGuard::new(Limits::unlimited());
        a.share_budget(budget.clone());
        b.share_budget(budget.clone());
        assert!(a.memory_growing(0, 60, None).unwrap());
        assert_eq!(budget.in_use(), 60);
        let error = b.memory_growing(0, 50, None).unwrap_err();
        assert_eq!(
            error.downcast_ref::<LimitExceeded>(),
            Some(&LimitExceeded::Budget {
                limit: 100,
                in_use: 60,
                growth: 50
            })
        );
        assert_eq!(budget.in_use(), 60, "a refused growth takes nothing");
        assert!(b.memory_growing(0, 40, None).unwrap());
        assert_eq!(budget.available(), 0);
        // A growth that failed later is given back.
        b.memory_grow_failed(wasmtime::Error::msg("mmap failed"))
            .unwrap_or(());
        assert_eq!(budget.in_use(), 60);
        drop(a);
        assert_eq!(budget.in_use(), 0, "a dropped store gives its memory back");
        assert!(b.memory_growing(0, 100, None).unwrap());
        drop(b);
        assert_eq!(budget.in_use(), 0);
        assert_eq!(StoreGuard::new(Limits::unlimited()).start_call(), NEVER);
    }
}
