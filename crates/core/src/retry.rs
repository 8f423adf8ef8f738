//! When and how long to wait before trying a failed provider call again
//! (`docs/errors.md#retry-schedule`, `docs/errors.md#default-retry-policy`).
//!
//! Pure: the random draw, the provider's requested wait and the clock come in as arguments, so
//! every schedule is tested by value. Each provider has one default policy, the one its SDK
//! applies when OMA creates its client ([`RetryPolicy::stainless`] for Anthropic and the
//! OpenAI-compatible providers, [`RetryPolicy::aws_standard`] for Bedrock,
//! [`RetryPolicy::none`] for Gemini and the AI SDK bridge); a call whose options set
//! `maxRetries`, `retryDelayMs` or `retryBackoff` uses OMA's task-retry schedule
//! ([`RetryPolicy::from_oma`]) instead. Terminal errors are never retried:
//! `InvalidMessageError`, `UnsupportedContentBlockError`, `UnsupportedToolResultContentError`,
//! egress denials, and 4xx answers other than 408, 409 and 429 (see [`Error::retryable`]).

use crate::error::Error;

/// The cap on any one delay of OMA's schedule, in milliseconds.
pub const MAX_DELAY_MS: u64 = 30_000;

/// The cap on attempts per call, whatever the policy says: with the 30 s cap on delays, a call
/// gives up within an hour at most (and its deadline usually ends it much sooner).
pub const MAX_ATTEMPTS: u32 = 100;

/// How a nominal delay is spread, so that many clients failing at once do not retry at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Jitter {
    /// OMA's equal jitter: `round(nominal/2 + r·nominal/2)`, between half and all of it.
    Equal,
    /// The Anthropic and OpenAI SDKs': `nominal·(1 - r/4)`, between 75% and all of it.
    UpToAQuarterLess,
    /// The AWS SDK's full jitter: `floor(r·nominal)`, between none and all of it.
    Full,
}

/// Which failures a policy tries again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RetryOn {
    /// The retryable ones ([`Error::retryable`]): no status (a connection failure), a timeout,
    /// 408, 409, 429 and 5xx. OMA's rule, and the Anthropic and OpenAI SDKs' alike.
    Retryable,
    /// The AWS SDK's standard mode: throttling (429, or a throttling error code) and transient
    /// failures (a connection failure, a timeout, 500, 502, 503, 504, a timeout error code).
    /// Throttling waits from [`RetryPolicy::throttling_base_delay_ms`].
    AwsStandard,
}

/// How a failed call is retried. The default makes one attempt.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included; at least 1.
    pub max_attempts: u32,
    /// The nominal delay after the first failure, in milliseconds.
    pub base_delay_ms: u64,
    /// The factor between successive nominal delays; at least 1.
    pub backoff: f64,
    /// The cap on a nominal delay, in milliseconds.
    pub max_delay_ms: u64,
    /// How the nominal delay is spread.
    pub jitter: Jitter,
    /// Which failures are tried again.
    pub retry_on: RetryOn,
    /// The base delay after a throttling failure under [`RetryOn::AwsStandard`], in ms.
    pub throttling_base_delay_ms: u64,
    /// Whether an `x-should-retry: true` or `false` header decides instead of the status (the
    /// Anthropic and OpenAI SDKs obey it).
    pub obeys_should_retry: bool,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 1,
            base_delay_ms: 1000,
            backoff: 2.0,
            max_delay_ms: MAX_DELAY_MS,
            jitter: Jitter::Equal,
            retry_on: RetryOn::Retryable,
            throttling_base_delay_ms: 1000,
            obeys_should_retry: false,
        }
    }
}

/// A wait the provider asked for before the next attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequestedWait {
    /// This many milliseconds from the answer (`retry-after-ms`, `retry-after` in seconds,
    /// Gemini's `retryDelay`).
    After(u64),
    /// Until this time, in milliseconds since the Unix epoch (`retry-after` as an HTTP date).
    Until(u64),
}

impl RequestedWait {
    /// The wait in milliseconds from `now_ms`; a date in the past is no wait.
    pub fn from_now(self, now_ms: u64) -> u64 {
        match self {
            RequestedWait::After(ms) => ms,
            RequestedWait::Until(at) => at.saturating_sub(now_ms),
        }
    }
}

/// What a failed attempt brought besides its error: the wait the provider asked for and its
/// `x-should-retry` verdict.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RetryHints {
    /// The provider's requested wait, if it asked for one.
    pub wait: Option<RequestedWait>,
    /// `x-should-retry: true` (`Some(true)`) or `false` (`Some(false)`).
    pub should_retry: Option<bool>,
}

/// The AWS SDK's throttling error codes (its standard retry mode retries these).
const AWS_THROTTLING_CODES: &[&str] = &[
    "BandwidthLimitExceeded",
    "EC2ThrottledException",
    "LimitExceededException",
    "PriorRequestNotComplete",
    "ProvisionedThroughputExceededException",
    "RequestLimitExceeded",
    "RequestThrottled",
    "RequestThrottledException",
    "SlowDown",
    "ThrottledException",
    "Throttling",
    "ThrottlingException",
    "TooManyRequestsException",
    "TransactionInProgressException",
];

/// The AWS SDK's transient error codes.
const AWS_TRANSIENT_CODES: &[&str] = &["TimeoutError", "RequestTimeout", "RequestTimeoutException"];

impl RetryPolicy {
    /// One attempt, no retry: what Google's `@google/genai` client does without `retryOptions`,
    /// and what OMA's AI SDK adapter asks for (`maxRetries: 0`).
    pub fn none() -> Self {
        RetryPolicy::default()
    }

    /// The Anthropic and OpenAI TypeScript SDKs' default: 2 retries (3 attempts) of connection
    /// failures, timeouts, 408, 409, 429 and 5xx, after 0.5 s and 1 s (doubling, at most 8 s),
    /// each shortened by up to a quarter at random; `x-should-retry` obeyed.
    pub fn stainless() -> Self {
        RetryPolicy {
            max_attempts: 3,
            base_delay_ms: 500,
            backoff: 2.0,
            max_delay_ms: 8_000,
            jitter: Jitter::UpToAQuarterLess,
            retry_on: RetryOn::Retryable,
            throttling_base_delay_ms: 500,
            obeys_should_retry: true,
        }
    }

    /// The AWS SDK's standard mode: 3 attempts; throttling and transient failures retried after
    /// a random share of `min(base·2^(n-1), 20 s)`, base 100 ms (500 ms after throttling).
    pub fn aws_standard() -> Self {
        RetryPolicy {
            max_attempts: 3,
            base_delay_ms: 100,
            backoff: 2.0,
            max_delay_ms: 20_000,
            jitter: Jitter::Full,
            retry_on: RetryOn::AwsStandard,
            throttling_base_delay_ms: 500,
            obeys_should_retry: false,
        }
    }

    /// The policy OMA derives from `maxRetries`, `retryDelayMs` and `retryBackoff`:
    /// `maxRetries + 1` attempts (at most `u32::MAX`: any larger count saturates, it never
    /// overflows), negative delays as 0, backoff at least 1, delays capped at 30 s, equal
    /// jitter.
    pub fn from_oma(max_retries: i64, retry_delay_ms: Option<f64>, backoff: Option<f64>) -> Self {
        RetryPolicy {
            max_attempts: u32::try_from(max_retries.max(0))
                .unwrap_or(u32::MAX)
                .saturating_add(1),
            base_delay_ms: retry_delay_ms.unwrap_or(1000.0).max(0.0) as u64,
            backoff: backoff.unwrap_or(2.0).max(1.0),
            ..RetryPolicy::default()
        }
    }

    /// The nominal delay after failed attempt `attempt` (1-based):
    /// `min(base · backoff^(attempt-1), cap)`.
    pub fn nominal_delay_ms(&self, attempt: u32) -> u64 {
        nominal(self.base_delay_ms, self.backoff, self.max_delay_ms, attempt)
    }

    /// Whether attempt `attempt` (1-based) is the last the policy allows.
    pub fn is_last(&self, attempt: u32) -> bool {
        attempt >= self.max_attempts.clamp(1, MAX_ATTEMPTS)
    }

    /// Whether the policy tries `error` again (attempts left aside).
    pub fn retries(&self, error: &Error, should_retry: Option<bool>) -> bool {
        if let (true, Some(verdict), Error::Provider { .. }) =
            (self.obeys_should_retry, should_retry, error)
        {
            return verdict;
        }
        match self.retry_on {
            RetryOn::Retryable => error.retryable(),
            RetryOn::AwsStandard => aws_throttling(error) || aws_transient(error),
        }
    }

    /// What to do after failed attempt `attempt` (1-based) ended in `error`: `None` to stop (an
    /// error the policy does not retry, or no attempts left), or the delay in milliseconds.
    ///
    /// The delay is the provider's requested wait when it asked for one (`hints.wait`, counted
    /// from `now_ms`), whatever its length: the call's deadline is what bounds it (see
    /// `Call::poll`). Otherwise it is the nominal delay spread by the policy's jitter, with
    /// `rng` in `[0, 1]`.
    pub fn next_delay_ms(
        &self,
        attempt: u32,
        error: &Error,
        rng: f64,
        hints: RetryHints,
        now_ms: u64,
    ) -> Option<u64> {
        if self.is_last(attempt) || !self.retries(error, hints.should_retry) {
            return None;
        }
        if let Some(wait) = hints.wait {
            return Some(wait.from_now(now_ms));
        }
        let base = if self.retry_on == RetryOn::AwsStandard && aws_throttling(error) {
            self.throttling_base_delay_ms
        } else {
            self.base_delay_ms
        };
        let nominal = nominal(base, self.backoff, self.max_delay_ms, attempt) as f64;
        let rng = rng.clamp(0.0, 1.0);
        Some(match self.jitter {
            Jitter::Equal => (nominal / 2.0 + rng * nominal / 2.0).round() as u64,
            Jitter::UpToAQuarterLess => (nominal * (1.0 - rng / 4.0)) as u64,
            Jitter::Full => (rng * nominal).floor() as u64,
        })
    }
}

fn nominal(base_delay_ms: u64, backoff: f64, cap: u64, attempt: u32) -> u64 {
    let exponent = attempt.saturating_sub(1).min(1024) as i32;
    let delay = base_delay_ms as f64 * backoff.max(1.0).powi(exponent);
    if delay.is_finite() {
        (delay as u64).min(cap)
    } else {
        cap
    }
}

/// A throttling failure as the AWS SDK sees it: 429, or a throttling error code.
fn aws_throttling(error: &Error) -> bool {
    match error {
        Error::Provider { status, code, .. } => {
            *status == Some(429)
                || code
                    .as_deref()
                    .is_some_and(|c| AWS_THROTTLING_CODES.contains(&c))
        }
        _ => false,
    }
}

/// A transient failure as the AWS SDK sees it: a timeout, a connection failure (no status),
/// 500, 502, 503 or 504, or a timeout error code.
fn aws_transient(error: &Error) -> bool {
    match error {
        Error::Timeout { .. } => true,
        Error::Provider { status, code, .. } => {
            matches!(status, None | Some(500 | 502 | 503 | 504))
                || code
                    .as_deref()
                    .is_some_and(|c| AWS_TRANSIENT_CODES.contains(&c))
        }
        _ => false,
    }
}

/// The wait an error answer's headers ask for: `retry-after-ms` (milliseconds, as the OpenAI
/// and Anthropic SDKs read it) first, else `retry-after` as seconds or as an HTTP date.
/// `headers` have lowercase names. A value that reads as neither is ignored.
pub fn requested_wait(headers: &[(String, String)]) -> Option<RequestedWait> {
    let header = |name: &str| {
        headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    };
    if let Some(ms) = header("retry-after-ms").and_then(parse_decimal_thousandths) {
        // Milliseconds with a fraction: the fraction's thousandths dropped.
        return Some(RequestedWait::After(ms / 1000));
    }
    let value = header("retry-after")?;
    parse_retry_after(value)
        .map(RequestedWait::After)
        .or_else(|| parse_http_date(value).map(RequestedWait::Until))
}

/// Reads a `retry-after` header given in seconds, in milliseconds: digits, optionally a `.` and
/// more digits (HTTP's `delay-seconds` is whole, some providers send fractions), surrounding
/// whitespace ignored, digits past the millisecond dropped, huge values saturated. Anything else
/// (the HTTP-date form, see [`parse_http_date`]; a sign, an exponent) is not read here. Read by
/// hand: a general float parser would bring 15 KB of tables and code into the guest for this.
pub fn parse_retry_after(value: &str) -> Option<u64> {
    parse_decimal_thousandths(value)
}

/// A non-negative decimal number (`12`, `0.5`, `.25`) times 1000, fraction digits past the
/// third dropped, huge values saturated.
fn parse_decimal_thousandths(value: &str) -> Option<u64> {
    let (whole, fraction) = match value.trim().split_once('.') {
        Some((whole, fraction)) => (whole, fraction),
        None => (value.trim(), ""),
    };
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if (whole.is_empty() && fraction.is_empty()) || !digits(whole) || !digits(fraction) {
        return None;
    }
    let units = whole.bytes().fold(0u64, |n, b| {
        n.saturating_mul(10).saturating_add(u64::from(b - b'0'))
    });
    let thousandths = fraction
        .bytes()
        .chain(std::iter::repeat(b'0'))
        .take(3)
        .fold(0u64, |n, b| n * 10 + u64::from(b - b'0'));
    Some(units.saturating_mul(1000).saturating_add(thousandths))
}

/// A protobuf `Duration` in its JSON form (`"34.4s"`, `"1s"`, `"0.250s"`), as Gemini's
/// `RetryInfo.retryDelay` carries it, in milliseconds.
pub fn parse_duration_seconds(value: &str) -> Option<u64> {
    parse_decimal_thousandths(value.trim().strip_suffix('s')?)
}

/// An HTTP date in the preferred IMF-fixdate form (`Sun, 06 Nov 1994 08:49:37 GMT`), in
/// milliseconds since the Unix epoch. The obsolete RFC 850 and asctime forms are not read.
pub fn parse_http_date(value: &str) -> Option<u64> {
    let mut parts = value.trim().split(' ');
    let (_weekday, day, month, year, time, zone) = (
        parts.next()?.strip_suffix(',')?,
        parts.next()?,
        parts.next()?,
        parts.next()?,
        parts.next()?,
        parts.next()?,
    );
    if parts.next().is_some() || zone != "GMT" || day.len() != 2 || year.len() != 4 {
        return None;
    }
    let number = |s: &str| -> Option<u64> {
        (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())).then(|| s.parse().ok())?
    };
    let day = number(day)?;
    let year = number(year)?;
    let month = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ]
    .iter()
    .position(|m| *m == month)? as u64
        + 1;
    let mut clock = time.split(':');
    let (hour, minute, second) = (
        number(clock.next().filter(|s| s.len() == 2)?)?,
        number(clock.next().filter(|s| s.len() == 2)?)?,
        number(clock.next().filter(|s| s.len() == 2)?)?,
    );
    if clock.next().is_some() || year < 1970 || hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let leap = |y: u64| (y.is_multiple_of(4) && !y.is_multiple_of(100)) || y.is_multiple_of(400);
    let month_days = [
        31,
        if leap(year) { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    if day == 0 || day > month_days[(month - 1) as usize] {
        return None;
    }
    let days_before_year: u64 = (1970..year).map(|y| if leap(y) { 366 } else { 365 }).sum();
    let days_before_month: u64 = month_days[..(month - 1) as usize].iter().sum();
    let days = days_before_year + days_before_month + day - 1;
    let seconds = days * 86_400 + hour * 3600 + minute * 60 + second;
    seconds.checked_mul(1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NO_HINTS: RetryHints = RetryHints {
        wait: None,
        should_retry: None,
    };

    fn provider(status: Option<u16>) -> Error {
        Error::Provider {
            provider: "openai".into(),
            status,
            message: "x".into(),
            code: None,
            error_type: None,
        }
    }

    #[test]
    fn nominal_schedule_follows_oma() {
        let policy = RetryPolicy::from_oma(10, None, None);
        let delays: Vec<u64> = (1..=7).map(|n| policy.nominal_delay_ms(n)).collect();
        assert_eq!(delays, [1000, 2000, 4000, 8000, 16000, 30000, 30000]);
    }

    #[test]
    fn equal_jitter() {
        let policy = RetryPolicy::from_oma(3, Some(100.0), Some(2.0));
        let err = provider(Some(503));
        assert_eq!(policy.next_delay_ms(1, &err, 1.0, NO_HINTS, 0), Some(100));
        assert_eq!(policy.next_delay_ms(2, &err, 1.0, NO_HINTS, 0), Some(200));
        assert_eq!(policy.next_delay_ms(3, &err, 1.0, NO_HINTS, 0), Some(400));
        assert_eq!(policy.next_delay_ms(1, &err, 0.0, NO_HINTS, 0), Some(50));
        assert_eq!(policy.next_delay_ms(1, &err, 0.5, NO_HINTS, 0), Some(75));
        assert_eq!(
            policy.next_delay_ms(4, &err, 0.5, NO_HINTS, 0),
            None,
            "attempts used up"
        );
    }

    #[test]
    fn terminal_errors_are_never_retried() {
        let policy = RetryPolicy::from_oma(5, Some(10.0), None);
        for error in [
            Error::invalid("x"),
            Error::unsupported_block("Anthropic Messages", "video"),
            Error::UnsupportedToolResultContent {
                provider: "p".into(),
                content_type: "file-url".into(),
                detail: None,
            },
            Error::EgressDenied {
                message: "x".into(),
            },
            provider(Some(400)),
            provider(Some(401)),
        ] {
            assert_eq!(
                policy.next_delay_ms(1, &error, 0.5, NO_HINTS, 0),
                None,
                "{error:?}"
            );
        }
        for error in [provider(None), provider(Some(429)), provider(Some(500))] {
            assert!(
                policy.next_delay_ms(1, &error, 0.5, NO_HINTS, 0).is_some(),
                "{error:?}"
            );
        }
    }

    /// A wait the provider asks for replaces the computed delay, however long: only the call's
    /// deadline bounds it (`Call::poll`). A date in the past is no wait.
    #[test]
    fn the_requested_wait_replaces_the_delay() {
        let policy = RetryPolicy::from_oma(2, Some(100.0), None);
        let err = provider(Some(429));
        let after = |ms| RetryHints {
            wait: Some(RequestedWait::After(ms)),
            should_retry: None,
        };
        assert_eq!(
            policy.next_delay_ms(1, &err, 0.0, after(2000), 0),
            Some(2000)
        );
        assert_eq!(
            policy.next_delay_ms(1, &err, 0.0, after(99_000), 0),
            Some(99_000)
        );
        assert_eq!(policy.next_delay_ms(1, &err, 1.0, after(10), 0), Some(10));
        let until = RetryHints {
            wait: Some(RequestedWait::Until(5_000)),
            should_retry: None,
        };
        assert_eq!(
            policy.next_delay_ms(1, &err, 0.0, until, 1_000),
            Some(4_000)
        );
        assert_eq!(policy.next_delay_ms(1, &err, 0.0, until, 9_000), Some(0));
        // Still never for a terminal error, nor past the last attempt.
        assert_eq!(
            policy.next_delay_ms(1, &provider(Some(400)), 0.0, after(5), 0),
            None
        );
        assert_eq!(policy.next_delay_ms(3, &err, 0.0, after(5), 0), None);
    }

    #[test]
    fn retry_after_values_are_read() {
        assert_eq!(parse_retry_after(" 2 "), Some(2000));
        assert_eq!(parse_retry_after("0.5"), Some(500));
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), None);
        assert_eq!(parse_retry_after("-1"), None);
        for (text, ms) in [
            ("0", Some(0)),
            ("7", Some(7000)),
            ("1.5", Some(1500)),
            ("1.", Some(1000)),
            (".25", Some(250)),
            ("0.0019", Some(1)),
            ("2.1234567", Some(2123)),
            ("99999999999999999999", Some(u64::MAX)),
            ("\t3\r\n", Some(3000)),
            ("", None),
            (".", None),
            ("+1", None),
            ("1e3", None),
            ("1.2.3", None),
            ("inf", None),
            ("NaN", None),
            ("1 2", None),
            ("٣", None),
        ] {
            assert_eq!(parse_retry_after(text), ms, "{text:?}");
        }
        let headers = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs
                .iter()
                .map(|(n, v)| (n.to_string(), v.to_string()))
                .collect()
        };
        assert_eq!(
            requested_wait(&headers(&[("retry-after", "3")])),
            Some(RequestedWait::After(3000))
        );
        // retry-after-ms wins over retry-after, as in the SDKs.
        assert_eq!(
            requested_wait(&headers(&[
                ("retry-after", "3"),
                ("retry-after-ms", "1500.7")
            ])),
            Some(RequestedWait::After(1500))
        );
        assert_eq!(
            requested_wait(&headers(&[("retry-after-ms", "x"), ("retry-after", "1")])),
            Some(RequestedWait::After(1000))
        );
        assert_eq!(
            requested_wait(&headers(&[(
                "retry-after",
                "Wed, 21 Oct 2015 07:28:00 GMT"
            )])),
            Some(RequestedWait::Until(1_445_412_480_000))
        );
        assert_eq!(requested_wait(&headers(&[("retry-after", "soon")])), None);
        assert_eq!(requested_wait(&[]), None);
    }

    #[test]
    fn http_dates_are_read() {
        for (text, ms) in [
            ("Thu, 01 Jan 1970 00:00:00 GMT", Some(0)),
            ("Sun, 06 Nov 1994 08:49:37 GMT", Some(784_111_777_000)),
            ("Tue, 29 Feb 2000 23:59:59 GMT", Some(951_868_799_000)),
            ("Fri, 01 Mar 2024 12:00:00 GMT", Some(1_709_294_400_000)),
            ("Sun, 06 Nov 1994 08:49:37 UTC", None),
            ("Sunday, 06-Nov-94 08:49:37 GMT", None),
            ("Sun Nov  6 08:49:37 1994", None),
            ("Mon, 29 Feb 2023 00:00:00 GMT", None),
            ("Mon, 32 Jan 2023 00:00:00 GMT", None),
            ("Mon, 01 Foo 2023 00:00:00 GMT", None),
            ("Mon, 01 Jan 2023 24:00:00 GMT", None),
            ("Mon, 01 Jan 2023 1:00:00 GMT", None),
            ("Mon, 01 Jan 1969 00:00:00 GMT", None),
            ("", None),
        ] {
            assert_eq!(parse_http_date(text), ms, "{text:?}");
        }
        assert_eq!(parse_duration_seconds("34.4s"), Some(34_400));
        assert_eq!(parse_duration_seconds("1s"), Some(1000));
        assert_eq!(parse_duration_seconds("0.250000001s"), Some(250));
        assert_eq!(parse_duration_seconds("34.4"), None);
        assert_eq!(parse_duration_seconds("-1s"), None);
    }

    /// The Anthropic and OpenAI SDKs' default: 3 attempts, 0.5 s then 1 s (up to a quarter
    /// less), 8 s cap; x-should-retry decides for a provider answer.
    #[test]
    fn the_stainless_default_follows_the_sdks() {
        let policy = RetryPolicy::stainless();
        let err = provider(Some(500));
        assert_eq!(policy.next_delay_ms(1, &err, 0.0, NO_HINTS, 0), Some(500));
        assert_eq!(policy.next_delay_ms(1, &err, 1.0, NO_HINTS, 0), Some(375));
        assert_eq!(policy.next_delay_ms(2, &err, 0.0, NO_HINTS, 0), Some(1000));
        assert_eq!(
            policy.next_delay_ms(3, &err, 0.0, NO_HINTS, 0),
            None,
            "3 attempts"
        );
        let long = RetryPolicy {
            max_attempts: 10,
            ..policy
        };
        assert_eq!(long.nominal_delay_ms(5), 8000);
        assert_eq!(long.nominal_delay_ms(9), 8000);
        for status in [None, Some(408), Some(409), Some(429), Some(502), Some(529)] {
            assert!(policy.retries(&provider(status), None), "{status:?}");
        }
        for status in [Some(400), Some(401), Some(404), Some(422)] {
            assert!(!policy.retries(&provider(status), None), "{status:?}");
        }
        assert!(policy.retries(&provider(Some(400)), Some(true)));
        assert!(!policy.retries(&provider(Some(503)), Some(false)));
        // The header never makes an input error retryable.
        assert!(!policy.retries(&Error::invalid("x"), Some(true)));
        // OMA's schedule does not read the header.
        assert!(!RetryPolicy::from_oma(2, None, None).retries(&provider(Some(400)), Some(true)));
    }

    /// The AWS SDK's standard mode: full jitter, 100 ms base (500 ms when throttled), 20 s
    /// cap, throttling and transient failures only.
    #[test]
    fn the_aws_default_follows_the_sdk() {
        let policy = RetryPolicy::aws_standard();
        let coded = |status, code: &str| Error::Provider {
            provider: "bedrock".into(),
            status,
            message: "x".into(),
            code: Some(code.into()),
            error_type: None,
        };
        let server = provider(Some(500));
        assert_eq!(
            policy.next_delay_ms(1, &server, 1.0, NO_HINTS, 0),
            Some(100)
        );
        assert_eq!(
            policy.next_delay_ms(2, &server, 1.0, NO_HINTS, 0),
            Some(200)
        );
        assert_eq!(policy.next_delay_ms(1, &server, 0.0, NO_HINTS, 0), Some(0));
        assert_eq!(policy.next_delay_ms(1, &server, 0.5, NO_HINTS, 0), Some(50));
        assert_eq!(policy.next_delay_ms(3, &server, 1.0, NO_HINTS, 0), None);
        let throttled = coded(Some(400), "ThrottlingException");
        assert_eq!(
            policy.next_delay_ms(1, &throttled, 1.0, NO_HINTS, 0),
            Some(500)
        );
        assert_eq!(
            policy.next_delay_ms(2, &provider(Some(429)), 1.0, NO_HINTS, 0),
            Some(1000)
        );
        for error in [
            provider(None),
            provider(Some(502)),
            provider(Some(503)),
            provider(Some(504)),
            coded(Some(400), "RequestTimeoutException"),
            Error::Timeout {
                provider: "bedrock".into(),
                timeout_ms: 1,
            },
        ] {
            assert!(policy.retries(&error, None), "{error:?}");
        }
        for error in [
            provider(Some(408)),
            provider(Some(409)),
            provider(Some(501)),
            coded(Some(400), "ValidationException"),
            Error::invalid("x"),
        ] {
            assert!(!policy.retries(&error, None), "{error:?}");
        }
        assert!(
            !policy.retries(&provider(Some(400)), Some(true)),
            "no x-should-retry"
        );
    }

    /// `u32::MAX` retries used to overflow `maxRetries + 1` (a panic in debug builds, a wrap to
    /// zero attempts in release builds); every huge count now saturates at `u32::MAX` attempts.
    #[test]
    fn huge_retry_counts_saturate() {
        for max_retries in [
            i64::from(u32::MAX),
            i64::from(u32::MAX) - 1,
            i64::from(u32::MAX) + 1,
            i64::MAX,
        ] {
            let policy = RetryPolicy::from_oma(max_retries, None, None);
            assert_eq!(policy.max_attempts, u32::MAX, "{max_retries}");
            let err = provider(Some(503));
            // Whatever the policy says, a call makes at most MAX_ATTEMPTS attempts.
            assert_eq!(
                policy.next_delay_ms(MAX_ATTEMPTS - 1, &err, 1.0, NO_HINTS, 0),
                Some(MAX_DELAY_MS)
            );
            assert_eq!(
                policy.next_delay_ms(MAX_ATTEMPTS, &err, 1.0, NO_HINTS, 0),
                None
            );
            assert_eq!(policy.next_delay_ms(u32::MAX, &err, 1.0, NO_HINTS, 0), None);
        }
        assert_eq!(
            RetryPolicy::from_oma(i64::from(u32::MAX) - 2, None, None).max_attempts,
            u32::MAX - 1
        );
        assert_eq!(RetryPolicy::from_oma(i64::MIN, None, None).max_attempts, 1);
    }

    /// Odd delays and factors never panic and stay within the cap.
    #[test]
    fn odd_delays_and_factors_stay_in_range() {
        let odd = [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -1.0, 0.0, 1e308];
        for delay in odd {
            for backoff in odd {
                let policy = RetryPolicy::from_oma(i64::MAX, Some(delay), Some(backoff));
                assert!(policy.backoff >= 1.0, "{delay} {backoff}");
                for attempt in [0, 1, 2, 64, 1025, u32::MAX] {
                    assert!(policy.nominal_delay_ms(attempt) <= MAX_DELAY_MS);
                }
            }
        }
    }

    #[test]
    fn none_and_the_default_make_one_attempt() {
        assert_eq!(RetryPolicy::none(), RetryPolicy::default());
        let policy = RetryPolicy::default();
        assert_eq!(
            policy.next_delay_ms(1, &provider(Some(503)), 0.5, NO_HINTS, 0),
            None
        );
        assert_eq!(
            RetryPolicy::from_oma(-3, Some(-5.0), Some(0.5)).max_attempts,
            1
        );
    }
}
