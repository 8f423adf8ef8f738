//! The online evaluator's windows (`docs/evaluation.md#the-evaluators-windows`): the sampling
//! comparison, the queue bound, the per-minute rate budget, the hourly cost budget and the
//! throttle of diagnostics (one per kind a minute), as OMA's `OnlineEvaluator` keeps them.
//!
//! Pure steps over a window state the host holds and hands back: the host brings the clock
//! (`now`, milliseconds), its random draw, its queue's length and its estimator's amounts; each
//! step answers with its outcome, the diagnostic to emit (if the throttle lets one through) and
//! the next state. The state is the core's own JSON (`reservations`, `costs`, `diagnostics`):
//! a host starts from `{}` and never reads it.

use serde_json::{json, Map, Value};

use super::super::{given, number, object, range_error, refuse_unknown, type_error};
use crate::error::Error;

/// How long a reservation of the rate budget holds (ms).
const RATE_WINDOW_MS: f64 = 60_000.0;
/// How long a judge's cost counts against the cost budget (ms).
const COST_WINDOW_MS: f64 = 3_600_000.0;
/// The least time between two diagnostics of one kind (ms).
const DIAGNOSTIC_INTERVAL_MS: f64 = 60_000.0;

/// One scored run's share of the rate budget, held from when it was queued.
struct Reservation {
    entry_id: u64,
    at: f64,
    count: u64,
}

/// One scored run's judges' cost, counted from when it was recorded.
struct Cost {
    at: f64,
    amount: f64,
}

/// One kind of diagnostic: how many were held back since the last one emitted, and when that was.
struct Throttle {
    code: String,
    held: u64,
    at: f64,
}

/// The evaluator's windows.
#[derive(Default)]
struct Window {
    reservations: Vec<Reservation>,
    costs: Vec<Cost>,
    diagnostics: Vec<Throttle>,
}

/// OMA's budget (`OnlineEvaluationConfig.budget`) as far as it is in force: the cost budget
/// only when the host can estimate costs.
struct Budget {
    per_minute: Option<u64>,
    cost_per_hour: Option<f64>,
}

/// The evaluator's events that make a diagnostic: OMA's code, severity and fixed message.
const EVENTS: &[(&str, &str, &str, &str)] = &[
    (
        "after_shutdown",
        "enqueue_after_shutdown",
        "warning",
        "Online evaluation rejected after shutdown began.",
    ),
    (
        "no_identity",
        "scorer_failed",
        "error",
        "Online evaluation skipped a run without runtime identity.",
    ),
    (
        "sampling_failed",
        "scorer_failed",
        "error",
        "Online sampling rule failed; the run was not sampled.",
    ),
    (
        "queue_full",
        "queue_full",
        "warning",
        "Online evaluation sample dropped because the bounded queue is full.",
    ),
    (
        "cost_exhausted",
        "budget_exhausted",
        "warning",
        "Online evaluation cost budget is exhausted.",
    ),
    (
        "rate_exhausted",
        "budget_exhausted",
        "warning",
        "Online evaluation rate budget is exhausted.",
    ),
    (
        "cost_inactive",
        "budget_exhausted",
        "warning",
        "Cost budget is inactive because no estimateCost function was configured.",
    ),
    (
        "cost_unestimated",
        "budget_exhausted",
        "warning",
        "Online evaluation cost could not be estimated; the cost budget remains best-effort.",
    ),
    (
        "worker_failed",
        "scorer_failed",
        "error",
        "Online evaluation worker failed unexpectedly.",
    ),
    (
        "scorer_failed",
        "scorer_failed",
        "error",
        "Online evaluation scorer failed; a scorer_error record was produced.",
    ),
    (
        "store_failed",
        "store_append_failed",
        "error",
        "Online evaluation records were discarded because EvalStore append failed.",
    ),
    (
        "flush_timeout",
        "flush_timeout",
        "warning",
        "Online evaluation flush timed out before queued samples settled.",
    ),
];

/// A number field of `map`, or a `TypeError` naming `what`.
fn float(map: &Map<String, Value>, key: &str, what: &str) -> Result<f64, Error> {
    given(map, key)
        .and_then(Value::as_f64)
        .ok_or_else(|| type_error(format!("{what}.{key} must be a number")))
}

/// A count field of `map`, or a `TypeError` naming `what`.
fn whole(map: &Map<String, Value>, key: &str, what: &str) -> Result<u64, Error> {
    given(map, key)
        .and_then(Value::as_u64)
        .ok_or_else(|| type_error(format!("{what}.{key} must be a count")))
}

/// The items of the list `key` of `map` (none when absent).
fn items<'a>(map: &'a Map<String, Value>, key: &str) -> Result<&'a [Value], Error> {
    match given(map, key) {
        None => Ok(&[]),
        Some(Value::Array(items)) => Ok(items),
        Some(_) => Err(type_error(format!("window.{key} must be a list"))),
    }
}

impl Window {
    /// The state a previous step gave (absent: a fresh evaluator's).
    fn read(value: Option<&Value>) -> Result<Self, Error> {
        let Some(value) = value else {
            return Ok(Self::default());
        };
        let map = object(value, "window")?;
        refuse_unknown(map, &["reservations", "costs", "diagnostics"], "window")?;
        let mut window = Self::default();
        for item in items(map, "reservations")? {
            let item = object(item, "a reservation")?;
            window.reservations.push(Reservation {
                entry_id: whole(item, "entryId", "reservation")?,
                at: float(item, "at", "reservation")?,
                count: whole(item, "count", "reservation")?,
            });
        }
        for item in items(map, "costs")? {
            let item = object(item, "a cost")?;
            window.costs.push(Cost {
                at: float(item, "at", "cost")?,
                amount: float(item, "amount", "cost")?,
            });
        }
        if let Some(diagnostics) = given(map, "diagnostics") {
            for (code, item) in object(diagnostics, "window.diagnostics")? {
                let item = object(item, "a diagnostic's throttle")?;
                window.diagnostics.push(Throttle {
                    code: code.clone(),
                    held: whole(item, "held", "diagnostic")?,
                    at: float(item, "at", "diagnostic")?,
                });
            }
        }
        Ok(window)
    }

    /// The state as JSON, for the host to hand back to the next step.
    fn write(&self) -> Value {
        let reservations = self
            .reservations
            .iter()
            .map(|r| json!({"entryId": r.entry_id, "at": number(r.at), "count": r.count}))
            .collect::<Vec<_>>();
        let costs = self
            .costs
            .iter()
            .map(|c| json!({"at": number(c.at), "amount": number(c.amount)}))
            .collect::<Vec<_>>();
        let diagnostics = self
            .diagnostics
            .iter()
            .map(|t| (t.code.clone(), json!({"held": t.held, "at": number(t.at)})))
            .collect::<Map<_, _>>();
        json!({"reservations": reservations, "costs": costs, "diagnostics": diagnostics})
    }

    /// Forgets the reservations older than a minute and the costs older than an hour, oldest
    /// first, as OMA does (stopping at the first one still in its window).
    fn prune(&mut self, now: f64) {
        let old = self
            .reservations
            .iter()
            .take_while(|r| r.at <= now - RATE_WINDOW_MS)
            .count();
        self.reservations.drain(..old);
        let old = self
            .costs
            .iter()
            .take_while(|c| c.at <= now - COST_WINDOW_MS)
            .count();
        self.costs.drain(..old);
    }

    /// Whether the hour's costs have reached the cost budget (never, without one in force).
    fn cost_exhausted(&self, budget: &Budget) -> bool {
        budget
            .cost_per_hour
            .is_some_and(|max| self.costs.iter().map(|c| c.amount).sum::<f64>() >= max)
    }

    /// Reserves `count` evaluations of the minute's rate budget for `entry_id`; false when they
    /// would pass it. Nothing is reserved without a rate budget.
    fn reserve(&mut self, budget: &Budget, entry_id: u64, count: u64, now: f64) -> bool {
        let Some(max) = budget.per_minute else {
            return true;
        };
        let used: u64 = self.reservations.iter().map(|r| r.count).sum();
        if used.saturating_add(count) > max {
            return false;
        }
        self.reservations.push(Reservation {
            entry_id,
            at: now,
            count,
        });
        true
    }

    /// OMA's diagnostic for `event` if the throttle lets one of its kind through at `now`: the
    /// first of a kind, then one a minute, counting the ones held back in between.
    fn report(
        &mut self,
        event: &str,
        scorer: Option<&str>,
        now: f64,
    ) -> Result<Option<Value>, Error> {
        let &(_, code, severity, message) = EVENTS
            .iter()
            .find(|(name, ..)| *name == event)
            .ok_or_else(|| {
                type_error(format!(
                    "the online evaluation event \"{event}\" is not one of: {}",
                    EVENTS.iter().map(|e| e.0).collect::<Vec<_>>().join(", ")
                ))
            })?;
        let index = match self.diagnostics.iter().position(|t| t.code == code) {
            Some(index) => index,
            None => {
                self.diagnostics.push(Throttle {
                    code: code.to_owned(),
                    held: 0,
                    at: f64::NEG_INFINITY,
                });
                self.diagnostics.len() - 1
            }
        };
        let throttle = &mut self.diagnostics[index];
        throttle.held += 1;
        if now - throttle.at < DIAGNOSTIC_INTERVAL_MS {
            return Ok(None);
        }
        let count = throttle.held;
        throttle.held = 0;
        throttle.at = now;
        let mut diagnostic = Map::new();
        diagnostic.insert("code".into(), Value::from(code));
        diagnostic.insert("severity".into(), Value::from(severity));
        diagnostic.insert("count".into(), Value::from(count));
        if let Some(scorer) = scorer {
            diagnostic.insert("scorerName".into(), Value::from(scorer));
        }
        diagnostic.insert("message".into(), Value::from(message));
        Ok(Some(Value::Object(diagnostic)))
    }
}

/// The budget in force from the request's `budget` (`{maxEvaluationsPerMinute?,
/// maxCostPerHour?}`).
fn budget(request: &Map<String, Value>) -> Result<Budget, Error> {
    let Some(value) = given(request, "budget") else {
        return Ok(Budget {
            per_minute: None,
            cost_per_hour: None,
        });
    };
    let map = object(value, "OnlineEvaluationConfig.budget")?;
    refuse_unknown(
        map,
        &["maxEvaluationsPerMinute", "maxCostPerHour"],
        "OnlineEvaluationConfig.budget",
    )?;
    let per_minute = match given(map, "maxEvaluationsPerMinute") {
        None => None,
        Some(value) => Some(value.as_u64().filter(|n| *n >= 1).ok_or_else(|| {
            range_error("budget.maxEvaluationsPerMinute must be a positive integer.")
        })?),
    };
    let cost_per_hour = match given(map, "maxCostPerHour") {
        None => None,
        Some(value) => Some(
            value
                .as_f64()
                .filter(|x| x.is_finite() && *x > 0.0)
                .ok_or_else(|| {
                    range_error("budget.maxCostPerHour must be a positive finite number.")
                })?,
        ),
    };
    Ok(Budget {
        per_minute,
        cost_per_hour,
    })
}

/// A step's request: its object, checked for the keys it takes, its clock and its window.
fn open<'a>(
    request: &'a Value,
    what: &str,
    keys: &[&str],
) -> Result<(&'a Map<String, Value>, f64, Window), Error> {
    let map = object(request, what)?;
    refuse_unknown(map, keys, what)?;
    let now = given(map, "now")
        .and_then(Value::as_f64)
        .ok_or_else(|| type_error(format!("{what} needs \"now\", a time in milliseconds")))?;
    let window = Window::read(given(map, "window"))?;
    Ok((map, now, window))
}

/// A step's answer: its outcome, the diagnostic to emit (if any) and the next window.
fn answer(outcome: &str, diagnostic: Option<Value>, window: &Window) -> Value {
    let mut out = Map::new();
    out.insert("outcome".into(), Value::from(outcome));
    if let Some(diagnostic) = diagnostic {
        out.insert("diagnostic".into(), diagnostic);
    }
    out.insert("window".into(), window.write());
    Value::Object(out)
}

/// Whether a settled run is sampled: a share in [0, 1] against the host's draw in [0, 1)
/// (`random < sample`), or the answer of the user's sampling function (`true` or `false`).
fn sampled(request: &Map<String, Value>) -> Result<bool, Error> {
    match given(request, "sample") {
        Some(Value::Bool(answer)) => Ok(*answer),
        Some(Value::Number(share)) => {
            let share = share.as_f64().unwrap_or(f64::NAN);
            if !(0.0..=1.0).contains(&share) {
                return Err(range_error(
                    "OnlineEvaluationConfig.sample must be a number in [0, 1] or a function.",
                ));
            }
            let draw = given(request, "random")
                .and_then(Value::as_f64)
                .ok_or_else(|| type_error("a sampled share needs \"random\", the host's draw"))?;
            Ok(draw < share)
        }
        _ => Err(range_error(
            "OnlineEvaluationConfig.sample must be a number in [0, 1] or a function.",
        )),
    }
}

/// A settled run offered to the evaluator: sampled or not, then (in OMA's order) dropped by a
/// full queue, by the spent cost budget, by the rate budget its scorers would pass, or queued
/// with its scorers' evaluations reserved.
///
/// In: `{now, window?, budget?, entryId, evaluations, queueLength, maxQueueLength, sample,
/// random?}`. Out: `{outcome: "skipped" | "queue_full" | "cost_exhausted" | "rate_exhausted" |
/// "queued", diagnostic?, window}`.
pub fn admit(request: &Value) -> Result<Value, Error> {
    let what = "the online evaluation admission";
    let (map, now, mut window) = open(
        request,
        what,
        &[
            "now",
            "window",
            "budget",
            "entryId",
            "evaluations",
            "queueLength",
            "maxQueueLength",
            "sample",
            "random",
        ],
    )?;
    let budget = budget(map)?;
    let entry_id = whole(map, "entryId", "admission")?;
    let evaluations = whole(map, "evaluations", "admission")?;
    let queue_length = whole(map, "queueLength", "admission")?;
    let max_queue_length = whole(map, "maxQueueLength", "admission")?;
    if !sampled(map)? {
        return Ok(answer("skipped", None, &window));
    }
    let dropped = if queue_length >= max_queue_length {
        Some("queue_full")
    } else {
        window.prune(now);
        if window.cost_exhausted(&budget) {
            Some("cost_exhausted")
        } else if !window.reserve(&budget, entry_id, evaluations, now) {
            Some("rate_exhausted")
        } else {
            None
        }
    };
    match dropped {
        Some(outcome) => {
            let diagnostic = window.report(outcome, None, now)?;
            Ok(answer(outcome, diagnostic, &window))
        }
        None => Ok(answer("queued", None, &window)),
    }
}

/// A queued run a worker takes up: scored, or dropped (its reservation given back) when the cost
/// budget was spent while it waited.
///
/// In: `{now, window?, budget?, entryId}`. Out: `{outcome: "score" | "cost_exhausted",
/// diagnostic?, window}`.
pub fn start(request: &Value) -> Result<Value, Error> {
    let what = "the online evaluation start";
    let (map, now, mut window) = open(request, what, &["now", "window", "budget", "entryId"])?;
    let budget = budget(map)?;
    let entry_id = whole(map, "entryId", "start")?;
    window.prune(now);
    if !window.cost_exhausted(&budget) {
        return Ok(answer("score", None, &window));
    }
    if let Some(index) = window
        .reservations
        .iter()
        .position(|r| r.entry_id == entry_id)
    {
        window.reservations.remove(index);
    }
    let diagnostic = window.report("cost_exhausted", None, now)?;
    Ok(answer("cost_exhausted", diagnostic, &window))
}

/// What a scorer's judges cost, by the host's estimator, counted against the hour: `recorded`
/// (a positive total joins the window), or `invalid` when an amount is not a finite number of
/// at least 0 (`null` stands for what JSON cannot hold and for an estimate that failed): then
/// nothing is counted and the cost budget stays best effort.
///
/// In: `{now, window?, amounts}`. Out: `{outcome: "recorded" | "invalid", diagnostic?, window}`.
pub fn cost(request: &Value) -> Result<Value, Error> {
    let what = "the online evaluation cost";
    let (map, now, mut window) = open(request, what, &["now", "window", "amounts"])?;
    let amounts = match given(map, "amounts") {
        Some(Value::Array(amounts)) => amounts,
        _ => return Err(type_error(format!("{what} needs \"amounts\", a list"))),
    };
    let mut total = 0.0;
    for amount in amounts {
        match amount.as_f64() {
            Some(x) if x.is_finite() && x >= 0.0 => total += x,
            _ => {
                let diagnostic = window.report("cost_unestimated", None, now)?;
                return Ok(answer("invalid", diagnostic, &window));
            }
        }
    }
    if total > 0.0 {
        window.costs.push(Cost {
            at: now,
            amount: total,
        });
    }
    Ok(answer("recorded", None, &window))
}

/// An event of the evaluator's own (a scorer that failed, a store that failed, a flush that
/// timed out, ...) through the diagnostics throttle.
///
/// In: `{now, window?, event, scorerName?}`. Out: `{outcome: "reported", diagnostic?, window}`.
pub fn report(request: &Value) -> Result<Value, Error> {
    let what = "the online evaluation report";
    let (map, now, mut window) = open(request, what, &["now", "window", "event", "scorerName"])?;
    let event = given(map, "event")
        .and_then(Value::as_str)
        .ok_or_else(|| type_error(format!("{what} needs \"event\", a string")))?;
    let scorer = match given(map, "scorerName") {
        None => None,
        Some(Value::String(name)) => Some(name.as_str()),
        Some(_) => return Err(type_error("scorerName must be a string")),
    };
    let diagnostic = window.report(event, scorer, now)?;
    Ok(answer("reported", diagnostic, &window))
}
