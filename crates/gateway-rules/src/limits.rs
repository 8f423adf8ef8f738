//! Per-token limits (`OMA_GATEWAY_KEYS`, `docs/gateway.md#limits`): each token a client may
//! present, with the requests and the tokens it may use per minute, counted in a store every
//! replica shares when the host links one, else in this instance's memory.
//!
//! - **The format.** `OMA_GATEWAY_KEYS` is a JSON object whose names are the tokens and whose
//!   values hold `rpm` (requests per minute) and `tpm` (tokens per minute), each a positive whole
//!   number or absent (no such limit): `{"team-a-key": {"rpm": 60, "tpm": 100000}}`. Each token
//!   is accepted as a client's key on every route, as `OMA_GATEWAY_TOKEN` is (which stays
//!   unlimited).
//! - **The windows.** Fixed one-minute windows of the wall clock: a request is counted in the
//!   minute it arrives; the tokens of an answer in the minute it ends. Past `rpm` requests, or
//!   once `tpm` tokens are used, a request gets `429` in its route's error shape with
//!   `retry-after` (the seconds left in the minute).
//! - **Tokens are counted after the answer**: the usage the provider reported (input and
//!   output). A request is admitted while the minute's count is under `tpm`, so requests in
//!   flight together can go past it by what they use: the token limit is approximate, the
//!   request limit exact (one atomic increment per request).
//! - **Where the counts live.** A [`Counter`]: with `OMA_GATEWAY_LIMITS_BUCKET` set, the
//!   host's `wasi:keyvalue` bucket of that name (its `atomics.increment`), shared by every
//!   replica that opens it; without it, this instance's memory ([`MemoryCounter`]), which holds
//!   for one instance only (a host that makes an instance per request keeps nothing between
//!   requests). `/healthz` says which ([`Scope`]).
//! - **One rule for every store.** A request's counting is planned first ([`plan`]: the store
//!   operations, in order), then performed, then decided from the counts the store gave back
//!   ([`decide`]). [`admit`] performs the plan on a [`Counter`]; a host that keeps the counts
//!   itself performs it as one batch (the Worker gateway: a Durable Object per key, through the
//!   `routes` world) and the rules decide the same way. The usage after the answer is an add
//!   too ([`usage`]).
//!
//! The store never sees a token: counts are kept under a digest of it.

use std::collections::HashMap;

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::{anthropic, openai, Reply, Route, Settings};

/// The variable that holds the keys and their limits.
pub const KEYS_VARIABLE: &str = "OMA_GATEWAY_KEYS";
/// The variable that names the `wasi:keyvalue` bucket the replicas share.
pub const BUCKET_VARIABLE: &str = "OMA_GATEWAY_LIMITS_BUCKET";

/// The length of a window, in milliseconds: a minute.
pub const WINDOW_MS: u64 = 60_000;

/// What one token may use per minute.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KeyLimits {
    /// Requests per minute; `None`: no limit.
    pub rpm: Option<u64>,
    /// Tokens (input and output, as the provider reports them) per minute; `None`: no limit.
    pub tpm: Option<u64>,
}

/// The tokens of `OMA_GATEWAY_KEYS` and their limits.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Keys {
    entries: Vec<(String, KeyLimits)>,
}

impl std::fmt::Debug for Keys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The tokens are secrets: only their limits are shown.
        f.debug_list()
            .entries(self.entries.iter().map(|(_, limits)| limits))
            .finish()
    }
}

impl Keys {
    /// `OMA_GATEWAY_KEYS`' value, or `None` when it is not an object of tokens whose values
    /// hold only `rpm` and `tpm`, each a positive whole number.
    pub fn parse(text: &str) -> Option<Keys> {
        let value: Value = oma_core::json::parse_value(text).ok()?;
        let entries = value
            .as_object()?
            .iter()
            .map(|(token, limits)| {
                let limits = limits.as_object()?;
                if token.trim().is_empty()
                    || token.trim() != token
                    || limits.keys().any(|name| name != "rpm" && name != "tpm")
                {
                    return None;
                }
                let limit = |name: &str| match limits.get(name) {
                    None | Some(Value::Null) => Some(None),
                    Some(value) => value.as_u64().filter(|n| *n > 0).map(Some),
                };
                Some((
                    token.clone(),
                    KeyLimits {
                        rpm: limit("rpm")?,
                        tpm: limit("tpm")?,
                    },
                ))
            })
            .collect::<Option<Vec<_>>>()?;
        Some(Keys { entries })
    }

    /// Whether no key is configured (then nothing is limited).
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The tokens: secrets, never shown.
    pub fn tokens(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|(token, _)| token.as_str())
    }

    /// The limits of `given` (a client's key), compared with every token in constant time.
    pub fn find(&self, given: &str) -> Option<(&str, KeyLimits)> {
        let mut found = None;
        for (token, limits) in &self.entries {
            if crate::env::constant_time_eq(given.as_bytes(), token.as_bytes()) {
                found = Some((token.as_str(), *limits));
            }
        }
        found
    }
}

/// Where limits are counted, as `/healthz` says it (`"limits"`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// No `OMA_GATEWAY_KEYS`: nothing is limited.
    Off,
    /// In this instance's memory.
    PerInstance,
    /// In the host's `wasi:keyvalue` bucket that every replica shares.
    Shared,
}

impl Scope {
    /// `"off"`, `"per-instance"` or `"shared"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Off => "off",
            Scope::PerInstance => "per-instance",
            Scope::Shared => "shared",
        }
    }
}

/// `GET /healthz` with where limits are counted, when keys are configured: `{"status": "ok",
/// "limits": "per-instance" | "shared"}`; without keys, `{"status": "ok"}` as ever.
pub fn health(scope: Scope) -> Reply {
    match scope {
        Scope::Off => crate::health(),
        scope => Reply::json(200, &json!({ "status": "ok", "limits": scope.as_str() })),
    }
}

/// A store of counts: `wasi:keyvalue`'s atomics on a shared bucket, or memory.
pub trait Counter {
    /// Adds `delta` to the count under `key` (an absent key counts 0) and returns the new
    /// count, atomically for everyone who shares the store; `0` reads it.
    fn increment(&mut self, key: &str, delta: u64) -> Result<u64, String>;
    /// Forgets `key`; a failure changes nothing (the key is only kept longer).
    fn delete(&mut self, key: &str);
}

/// Counts in memory: one instance's.
#[derive(Debug, Default)]
pub struct MemoryCounter {
    counts: HashMap<String, u64>,
}

impl Counter for MemoryCounter {
    fn increment(&mut self, key: &str, delta: u64) -> Result<u64, String> {
        let count = self.counts.entry(key.to_owned()).or_insert(0);
        *count = count.saturating_add(delta);
        Ok(*count)
    }

    fn delete(&mut self, key: &str) {
        self.counts.remove(key);
    }
}

/// A request let through, and where its tokens are counted after its answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Admitted {
    /// The store's name for the key (a digest of the token).
    id: String,
    /// Its limits.
    limits: KeyLimits,
}

impl Admitted {
    /// The store's name for the key (a digest of the token, never the token).
    pub fn id(&self) -> &str {
        &self.id
    }
}

/// Why a request is refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Past a limit: `429` with `retry-after`.
    Limited {
        /// `"requests"` or `"tokens"`.
        what: &'static str,
        /// The limit per minute.
        limit: u64,
        /// Seconds until the window ends.
        retry_after: u64,
    },
    /// The store failed: `503` (a limit that cannot be counted is not skipped).
    Store(String),
}

/// The store's name for `token`'s counts: the first 16 bytes of its SHA-256, in hex.
fn key_id(token: &str) -> String {
    Sha256::digest(token.as_bytes())[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn counter_key(id: &str, window: u64, what: &str) -> String {
    format!("oma-gateway/limits/{id}/{window}/{what}")
}

/// Seconds until the window of `now_ms` ends (at least 1).
fn seconds_left(now_ms: u64) -> u64 {
    (WINDOW_MS - now_ms % WINDOW_MS).div_ceil(1000).max(1)
}

/// The store operations that count one request, planned before the store is touched, so that
/// every host applies the one rule: [`admit`] performs them on a [`Counter`], a host that keeps
/// the counts itself (the Worker gateway's Durable Object) performs them as one batch and hands
/// the counts to [`decide`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// The request as admitted, if [`decide`] admits it.
    admitted: Admitted,
    /// What to add to which count, in order (`0` reads it): the minute's tokens `+0` when the
    /// key has a token limit, then the minute's requests `+1`. Empty for a key without limits.
    pub adds: Vec<(String, u64)>,
    /// The counts of the minute before, to delete after the adds when the requests' new count
    /// (the last add's) is 1: the first request of a minute forgets the one before, so a key
    /// keeps two minutes of counts at most.
    pub forget: Vec<String>,
    /// Seconds until the window ends: a refusal's `retry-after`.
    retry_after: u64,
}

impl Plan {
    /// The store's name for the key whose counts these are (a digest of the token, never the
    /// token): every key of [`Plan::adds`] and [`Plan::forget`] is this key's.
    pub fn id(&self) -> &str {
        &self.admitted.id
    }

    /// Whether the adds' new `counts` say to delete [`Plan::forget`]: the last one is 1.
    pub fn forgets(&self, counts: &[u64]) -> bool {
        !self.forget.is_empty() && counts.last() == Some(&1)
    }
}

/// The operations that count a request of `token` (a key of `keys`; `None` or another token:
/// not limited, `None` here) at `now_ms`. A key without limits gets a plan with nothing to add.
pub fn plan(keys: &Keys, token: Option<&str>, now_ms: u64) -> Option<Plan> {
    let (token, limits) = token.and_then(|token| keys.find(token))?;
    let admitted = Admitted {
        id: key_id(token),
        limits,
    };
    let window = now_ms / WINDOW_MS;
    let mut adds = Vec::new();
    let mut forget = Vec::new();
    if limits != KeyLimits::default() {
        if limits.tpm.is_some() {
            adds.push((counter_key(&admitted.id, window, "tokens"), 0));
        }
        adds.push((counter_key(&admitted.id, window, "requests"), 1));
        if window > 0 {
            forget.push(counter_key(&admitted.id, window - 1, "requests"));
            forget.push(counter_key(&admitted.id, window - 1, "tokens"));
        }
    }
    Some(Plan {
        admitted,
        adds,
        forget,
        retry_after: seconds_left(now_ms),
    })
}

/// The verdict on a planned request, given the new `counts` of its adds (in their order):
/// refused when the minute's tokens already reach `tpm`, or when it is past the minute's
/// `rpm`th request; a store that gave no count for every add is a [`Refusal::Store`]. A refused
/// request is counted all the same (a client that keeps sending stays refused).
pub fn decide(plan: Plan, counts: &[u64]) -> Result<Admitted, Refusal> {
    if counts.len() != plan.adds.len() {
        return Err(Refusal::Store(format!(
            "the store gave {} counts for {} operations",
            counts.len(),
            plan.adds.len()
        )));
    }
    let limits = plan.admitted.limits;
    let mut counts = counts.iter().copied();
    if let Some(tpm) = limits.tpm {
        if counts.next().is_some_and(|used| used >= tpm) {
            return Err(Refusal::Limited {
                what: "tokens",
                limit: tpm,
                retry_after: plan.retry_after,
            });
        }
    }
    if let (Some(rpm), Some(requests)) = (limits.rpm, counts.next()) {
        if requests > rpm {
            return Err(Refusal::Limited {
                what: "requests",
                limit: rpm,
                retry_after: plan.retry_after,
            });
        }
    }
    Ok(plan.admitted)
}

/// Performs `plan`'s operations on `counter`, in order: its adds (stopping at the first that
/// fails), then its deletes when [`Plan::forgets`] says so; the adds' new counts.
pub fn execute(plan: &Plan, counter: &mut dyn Counter) -> Result<Vec<u64>, String> {
    let counts = plan
        .adds
        .iter()
        .map(|(key, delta)| counter.increment(key, *delta))
        .collect::<Result<Vec<u64>, String>>()?;
    if plan.forgets(&counts) {
        for key in &plan.forget {
            counter.delete(key);
        }
    }
    Ok(counts)
}

/// Counts a request of `token` (a key of `keys`, or `None`/another token: not limited) at
/// `now_ms` on `counter`: [`plan`], [`execute`], [`decide`].
pub fn admit(
    keys: &Keys,
    token: Option<&str>,
    now_ms: u64,
    counter: &mut dyn Counter,
) -> Result<Option<Admitted>, Refusal> {
    let Some(plan) = plan(keys, token, now_ms) else {
        return Ok(None);
    };
    let counts = execute(&plan, counter).map_err(Refusal::Store)?;
    decide(plan, &counts).map(Some)
}

/// What to add once an admitted request is answered: the `tokens` it used, in the window of
/// `now_ms` (its answer's), when its key has a token limit; nothing otherwise.
pub fn usage(admitted: &Admitted, tokens: u64, now_ms: u64) -> Vec<(String, u64)> {
    if admitted.limits.tpm.is_some() && tokens > 0 {
        vec![(
            counter_key(&admitted.id, now_ms / WINDOW_MS, "tokens"),
            tokens,
        )]
    } else {
        Vec::new()
    }
}

/// Counts the `tokens` an admitted request used ([`usage`]) on `counter`. A store failure here
/// is not the client's: the answer is sent.
pub fn record(admitted: &Admitted, tokens: u64, now_ms: u64, counter: &mut dyn Counter) {
    for (key, delta) in usage(admitted, tokens, now_ms) {
        let _ = counter.increment(&key, delta);
    }
}

/// The counts of an instance without a shared store, kept in its memory between the requests
/// it serves: `f` runs with them.
pub fn with_instance_counts<R>(f: impl FnOnce(&mut MemoryCounter) -> R) -> R {
    static COUNTS: std::sync::OnceLock<std::sync::Mutex<MemoryCounter>> =
        std::sync::OnceLock::new();
    let counts = COUNTS.get_or_init(Default::default);
    let mut counts = counts
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    f(&mut counts)
}

/// The shape of the refusals of a request to `route` with `token` when its limits are counted:
/// a route that calls a provider (`/v1/chat/completions`, `/v1/messages` and its
/// `count_tokens`, `/v1/run`) with a listed key that has a limit. `None`: nothing is counted,
/// and the store is not touched (`OMA_GATEWAY_TOKEN`, which has no limit, never depends on it).
pub fn counted(keys: &Keys, route: Route, token: Option<&str>) -> Option<Shape> {
    let shape = match route {
        Route::ChatCompletions => Shape::OpenAi,
        Route::Messages | Route::CountTokens => Shape::Anthropic,
        Route::Run => Shape::Gateway,
        _ => return None,
    };
    token
        .and_then(|token| keys.find(token))
        .is_some_and(|(_, limits)| limits != KeyLimits::default())
        .then_some(shape)
}

/// Where `settings` count limits, as `/healthz` says.
pub fn scope(settings: &Settings) -> Scope {
    match (settings.keys.is_empty(), &settings.limits_bucket) {
        (true, _) => Scope::Off,
        (false, None) => Scope::PerInstance,
        (false, Some(_)) => Scope::Shared,
    }
}

/// The shape a route's errors take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// The gateway's own (`/v1/run`).
    Gateway,
    /// OpenAI's (`/v1/chat/completions`).
    OpenAi,
    /// Anthropic's (`/v1/messages`).
    Anthropic,
}

/// The reply to a refused request, in `shape`: `429` with `retry-after`, or `503` when the
/// store failed (its error is not shown: it may name the store's address).
pub fn refusal_reply(refusal: &Refusal, shape: Shape) -> Reply {
    match refusal {
        Refusal::Limited {
            what,
            limit,
            retry_after,
        } => {
            let message = format!(
                "rate limit reached for this key: {limit} {what} per minute; try again in \
                 {retry_after} s"
            );
            let reply = match shape {
                Shape::Gateway => {
                    Reply::error(429, "RateLimitError", Some("RATE_LIMITED"), &message)
                }
                Shape::OpenAi => {
                    openai::error_reply(429, what, Some("rate_limit_exceeded"), &message)
                }
                Shape::Anthropic => anthropic::error_reply(429, "rate_limit_error", &message),
            };
            reply.with_header("retry-after", &retry_after.to_string())
        }
        Refusal::Store(_) => {
            let message = "the store of the gateway's limits is unavailable";
            let reply = match shape {
                Shape::Gateway => Reply::error(503, "Error", Some("LIMITS_UNAVAILABLE"), message),
                Shape::OpenAi => openai::error_reply(503, "api_error", None, message),
                Shape::Anthropic => anthropic::error_reply(503, "overloaded_error", message),
            };
            reply.with_header("retry-after", "1")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys() -> Keys {
        Keys::parse(r#"{"k-small": {"rpm": 2}, "k-tokens": {"tpm": 100}, "k-free": {}}"#)
            .expect("valid")
    }

    #[test]
    fn the_format_is_checked() {
        let keys = keys();
        assert_eq!(
            keys.find("k-small").map(|(_, l)| l),
            Some(KeyLimits {
                rpm: Some(2),
                tpm: None
            })
        );
        assert!(keys.find("k-smal").is_none());
        assert!(keys.find("").is_none());
        assert!(!format!("{keys:?}").contains("k-small"), "{keys:?}");
        for bad in [
            "[]",
            "{\"k\": 60}",
            "{\"k\": {\"rpm\": 0}}",
            "{\"k\": {\"rpm\": -1}}",
            "{\"k\": {\"rpm\": 1.5}}",
            "{\"k\": {\"rpm\": \"60\"}}",
            "{\"k\": {\"rps\": 1}}",
            "{\"\": {\"rpm\": 1}}",
            "{\" k\": {\"rpm\": 1}}",
            "not json",
        ] {
            assert!(Keys::parse(bad).is_none(), "{bad}");
        }
        assert!(Keys::parse("{}").expect("valid").is_empty());
    }

    #[test]
    fn requests_past_rpm_wait_for_the_next_minute() {
        let keys = keys();
        let mut counter = MemoryCounter::default();
        let t0 = 10 * WINDOW_MS + 45_500;
        for _ in 0..2 {
            assert!(admit(&keys, Some("k-small"), t0, &mut counter)
                .expect("admitted")
                .is_some());
        }
        let refused = admit(&keys, Some("k-small"), t0 + 1, &mut counter).expect_err("limited");
        assert_eq!(
            refused,
            Refusal::Limited {
                what: "requests",
                limit: 2,
                retry_after: 15
            }
        );
        // Other keys, unknown tokens and no token are not counted against it.
        assert!(admit(&keys, Some("k-free"), t0, &mut counter).is_ok());
        assert_eq!(admit(&keys, Some("other"), t0, &mut counter), Ok(None));
        assert_eq!(admit(&keys, None, t0, &mut counter), Ok(None));
        // The next minute starts afresh, and forgets the one before.
        assert!(admit(&keys, Some("k-small"), t0 + WINDOW_MS, &mut counter).is_ok());
        let old = counter_key(&key_id("k-small"), 10, "requests");
        assert!(!counter.counts.contains_key(&old), "{:?}", counter.counts);
        // The store holds digests, never a token.
        assert!(counter.counts.keys().all(|key| !key.contains("k-small")));
    }

    #[test]
    fn tokens_are_counted_after_the_answer() {
        let keys = keys();
        let mut counter = MemoryCounter::default();
        let t0 = 5 * WINDOW_MS;
        let first = admit(&keys, Some("k-tokens"), t0, &mut counter)
            .expect("admitted")
            .expect("limited key");
        // A second request in flight together is admitted too: the limit is approximate.
        let second = admit(&keys, Some("k-tokens"), t0, &mut counter)
            .expect("admitted")
            .expect("limited key");
        record(&first, 70, t0 + 10, &mut counter);
        record(&second, 70, t0 + 20, &mut counter);
        let refused = admit(&keys, Some("k-tokens"), t0 + 30, &mut counter).expect_err("limited");
        assert!(matches!(
            refused,
            Refusal::Limited {
                what: "tokens",
                limit: 100,
                ..
            }
        ));
        assert!(admit(&keys, Some("k-tokens"), t0 + WINDOW_MS, &mut counter).is_ok());
    }

    #[test]
    fn a_plan_is_the_same_counting_for_a_store_that_applies_it_whole() {
        let keys =
            Keys::parse(r#"{"k-both": {"rpm": 2, "tpm": 100}, "k-free": {}}"#).expect("valid");
        let t0 = 7 * WINDOW_MS + 1_000;
        let plan = plan(&keys, Some("k-both"), t0).expect("a key");
        // Read the tokens, count the request; forget the minute before on the first request.
        assert_eq!(
            plan.adds,
            vec![
                (counter_key(plan.id(), 7, "tokens"), 0),
                (counter_key(plan.id(), 7, "requests"), 1),
            ]
        );
        assert_eq!(
            plan.forget,
            vec![
                counter_key(plan.id(), 6, "requests"),
                counter_key(plan.id(), 6, "tokens"),
            ]
        );
        assert!(plan.forgets(&[0, 1]) && !plan.forgets(&[0, 2]));
        assert!(!plan.id().contains("k-both"));
        assert_eq!(plan.retry_after, 59);
        // The counts a store hands back decide, as on a counter.
        assert!(decide(plan.clone(), &[99, 2]).is_ok());
        assert!(matches!(
            decide(plan.clone(), &[100, 1]),
            Err(Refusal::Limited { what: "tokens", .. })
        ));
        assert!(matches!(
            decide(plan.clone(), &[0, 3]),
            Err(Refusal::Limited {
                what: "requests",
                limit: 2,
                retry_after: 59
            })
        ));
        // A store that answers for fewer operations than it was given is a failed store.
        assert!(matches!(decide(plan, &[0]), Err(Refusal::Store(_))));
        // A key without limits has nothing to count; no key, no plan.
        let free = super::plan(&keys, Some("k-free"), t0).expect("a key");
        assert!(free.adds.is_empty() && free.forget.is_empty());
        assert!(decide(free, &[]).is_ok());
        assert!(super::plan(&keys, Some("other"), t0).is_none());
        // Usage is one add, in the answer's minute, for a key with a token limit.
        let admitted = admit(&keys, Some("k-both"), t0, &mut MemoryCounter::default())
            .expect("admitted")
            .expect("a key");
        assert_eq!(
            usage(&admitted, 42, t0 + WINDOW_MS),
            vec![(counter_key(admitted.id(), 8, "tokens"), 42)]
        );
        assert!(usage(&admitted, 0, t0).is_empty());
    }

    struct Broken;

    impl Counter for Broken {
        fn increment(&mut self, _: &str, _: u64) -> Result<u64, String> {
            Err("connection refused".into())
        }
        fn delete(&mut self, _: &str) {}
    }

    #[test]
    fn refusals_take_the_route_shape() {
        let limited = Refusal::Limited {
            what: "requests",
            limit: 2,
            retry_after: 15,
        };
        let openai = refusal_reply(&limited, Shape::OpenAi);
        assert_eq!(openai.status, 429);
        assert!(openai.headers.contains(&("retry-after", "15".to_owned())));
        let body: Value = serde_json::from_str(&openai.body).expect("JSON");
        assert_eq!(body["error"]["code"], "rate_limit_exceeded");
        assert_eq!(body["error"]["type"], "requests");
        let anthropic = refusal_reply(&limited, Shape::Anthropic);
        let body: Value = serde_json::from_str(&anthropic.body).expect("JSON");
        assert_eq!(body["type"], "error");
        assert_eq!(body["error"]["type"], "rate_limit_error");
        let gateway = refusal_reply(&limited, Shape::Gateway);
        let body: Value = serde_json::from_str(&gateway.body).expect("JSON");
        assert_eq!(body["error"]["code"], "RATE_LIMITED");

        let failed = admit(&keys(), Some("k-small"), 0, &mut Broken).expect_err("store");
        let reply = refusal_reply(&failed, Shape::OpenAi);
        assert_eq!(reply.status, 503);
        assert!(!reply.body.contains("refused"), "{}", reply.body);
        // A key without limits is not counted, so the store cannot refuse it.
        assert!(admit(&keys(), Some("k-free"), 0, &mut Broken).is_ok());
    }
}
