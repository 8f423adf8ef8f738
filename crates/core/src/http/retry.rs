//! When and how long to wait before trying a failed provider call again (`docs/errors.md#retry-schedule`).
//!
//! Pure: the random draw and the provider's `retry-after` come in as arguments, so the schedule
//! is tested by value. Terminal errors are never retried: `InvalidMessageError`,
//! `UnsupportedContentBlockError`, `UnsupportedToolResultContentError`, egress denials, and 4xx
//! answers other than 408, 409 and 429 (see [`Error::retryable`]).

use crate::error::Error;

/// The cap on any one delay, in milliseconds.
pub const MAX_DELAY_MS: u64 = 30_000;

/// The cap on attempts per call, whatever the policy says: with the 30 s cap on delays, a call
/// gives up within an hour at most (and its deadline usually ends it much sooner).
pub const MAX_ATTEMPTS: u32 = 100;

/// How a failed call is retried. The default makes one attempt, as OMA's retry is off by default.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included; at least 1.
    pub max_attempts: u32,
    /// The nominal delay after the first failure, in milliseconds.
    pub base_delay_ms: u64,
    /// The factor between successive nominal delays; at least 1.
    pub backoff: f64,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 1,
            base_delay_ms: 1000,
            backoff: 2.0,
        }
    }
}

impl RetryPolicy {
    /// The policy OMA derives from `maxRetries`, `retryDelayMs` and `retryBackoff`:
    /// `maxRetries + 1` attempts (at most `u32::MAX`: any larger count saturates, it never
    /// overflows), negative delays as 0, backoff at least 1.
    pub fn from_oma(max_retries: i64, retry_delay_ms: Option<f64>, backoff: Option<f64>) -> Self {
        RetryPolicy {
            max_attempts: u32::try_from(max_retries.max(0))
                .unwrap_or(u32::MAX)
                .saturating_add(1),
            base_delay_ms: retry_delay_ms.unwrap_or(1000.0).max(0.0) as u64,
            backoff: backoff.unwrap_or(2.0).max(1.0),
        }
    }

    /// The nominal delay after failed attempt `attempt` (1-based):
    /// `min(base · backoff^(attempt-1), 30 s)`.
    pub fn nominal_delay_ms(&self, attempt: u32) -> u64 {
        let exponent = attempt.saturating_sub(1).min(1024) as i32;
        let delay = self.base_delay_ms as f64 * self.backoff.max(1.0).powi(exponent);
        if delay.is_finite() {
            (delay as u64).min(MAX_DELAY_MS)
        } else {
            MAX_DELAY_MS
        }
    }

    /// Whether attempt `attempt` (1-based) is the last the policy allows.
    pub fn is_last(&self, attempt: u32) -> bool {
        attempt >= self.max_attempts.clamp(1, MAX_ATTEMPTS)
    }

    /// What to do after failed attempt `attempt` (1-based) ended in `error`: `None` to stop (a
    /// terminal error, or no attempts left), or the delay in milliseconds. The delay uses equal
    /// jitter, `round(nominal/2 + rng·nominal/2)` with `rng` in `[0, 1]`; a provider's
    /// `retry-after` raises it (never above the cap).
    pub fn next_delay_ms(
        &self,
        attempt: u32,
        error: &Error,
        rng: f64,
        retry_after_ms: Option<u64>,
    ) -> Option<u64> {
        if !error.retryable() || self.is_last(attempt) {
            return None;
        }
        let nominal = self.nominal_delay_ms(attempt) as f64;
        let jittered = (nominal / 2.0 + rng.clamp(0.0, 1.0) * nominal / 2.0).round() as u64;
        Some(match retry_after_ms {
            Some(after) => jittered.max(after.min(MAX_DELAY_MS)),
            None => jittered,
        })
    }
}

/// Reads a `retry-after` header given in seconds, in milliseconds: digits, optionally a `.` and
/// more digits (HTTP's `delay-seconds` is whole, some providers send fractions), surrounding
/// whitespace ignored, digits past the millisecond dropped, huge values saturated. Anything else
/// (the HTTP-date form, a sign, an exponent) is not honoured. Read by hand: a general float
/// parser would bring 15 KB of tables and code into the guest for this one header.
pub fn parse_retry_after(value: &str) -> Option<u64> {
    let (whole, fraction) = match value.trim().split_once('.') {
        Some((whole, fraction)) => (whole, fraction),
        None => (value.trim(), ""),
    };
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if (whole.is_empty() && fraction.is_empty()) || !digits(whole) || !digits(fraction) {
        return None;
    }
    let seconds = whole.bytes().fold(0u64, |n, b| {
        n.saturating_mul(10).saturating_add(u64::from(b - b'0'))
    });
    let millis = fraction
        .bytes()
        .chain(std::iter::repeat(b'0'))
        .take(3)
        .fold(0u64, |n, b| n * 10 + u64::from(b - b'0'));
    Some(seconds.saturating_mul(1000).saturating_add(millis))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn provider(status: Option<u16>) -> Error {
        Error::Provider {
            provider: "openai".into(),
            status,
            message: "x".into(),
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
        assert_eq!(policy.next_delay_ms(1, &err, 1.0, None), Some(100));
        assert_eq!(policy.next_delay_ms(2, &err, 1.0, None), Some(200));
        assert_eq!(policy.next_delay_ms(3, &err, 1.0, None), Some(400));
        assert_eq!(policy.next_delay_ms(1, &err, 0.0, None), Some(50));
        assert_eq!(policy.next_delay_ms(1, &err, 0.5, None), Some(75));
        assert_eq!(
            policy.next_delay_ms(4, &err, 0.5, None),
            None,
            "attempts used up"
        );
    }

    #[test]
    fn terminal_errors_are_never_retried() {
        let policy = RetryPolicy::from_oma(5, Some(10.0), None);
        for error in [
            Error::invalid("x"),
            Error::UnsupportedContentBlock {
                provider: "Anthropic Messages".into(),
                block_type: "video".into(),
            },
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
                policy.next_delay_ms(1, &error, 0.5, None),
                None,
                "{error:?}"
            );
        }
        for error in [provider(None), provider(Some(429)), provider(Some(500))] {
            assert!(
                policy.next_delay_ms(1, &error, 0.5, None).is_some(),
                "{error:?}"
            );
        }
    }

    #[test]
    fn retry_after_raises_the_delay_up_to_the_cap() {
        let policy = RetryPolicy::from_oma(2, Some(100.0), None);
        let err = provider(Some(429));
        assert_eq!(policy.next_delay_ms(1, &err, 0.0, Some(2000)), Some(2000));
        assert_eq!(
            policy.next_delay_ms(1, &err, 0.0, Some(99_000)),
            Some(30_000)
        );
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
                policy.next_delay_ms(MAX_ATTEMPTS - 1, &err, 1.0, None),
                Some(MAX_DELAY_MS)
            );
            assert_eq!(policy.next_delay_ms(MAX_ATTEMPTS, &err, 1.0, None), None);
            assert_eq!(policy.next_delay_ms(u32::MAX, &err, 1.0, None), None);
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
    fn defaults_make_one_attempt() {
        let policy = RetryPolicy::default();
        assert_eq!(
            policy.next_delay_ms(1, &provider(Some(503)), 0.5, None),
            None
        );
        assert_eq!(
            RetryPolicy::from_oma(-3, Some(-5.0), Some(0.5)).max_attempts,
            1
        );
    }
}
