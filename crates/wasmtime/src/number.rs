//! Numbers written as JavaScript writes them (`String(number)`, and `JSON.stringify` for a
//! finite number): for OMA's messages that carry numbers (`0.30000000000000004`, `1e-7`,
//! `100`) and for the JSON text of the file stores, whose checksums depend on it.

/// `x` as JavaScript writes it (`NaN` and the infinities included).
pub(crate) fn js_number(x: f64) -> String {
    if x.is_nan() {
        return "NaN".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    if x == 0.0 {
        return "0".into();
    }
    // Rust's `{:e}` gives the shortest digits that read back as `x`, as JavaScript chooses them.
    let exp_form = format!("{:e}", x.abs());
    let (mantissa, exponent) = exp_form.split_once('e').unwrap_or((&exp_form, "0"));
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let k = digits.len() as i32;
    let n = exponent + 1;
    let body = if k <= n && n <= 21 {
        format!("{digits}{}", "0".repeat((n - k) as usize))
    } else if 0 < n && n <= 21 {
        format!("{}.{}", &digits[..n as usize], &digits[n as usize..])
    } else if -6 < n && n <= 0 {
        format!("0.{}{digits}", "0".repeat((-n) as usize))
    } else {
        let rest = if k > 1 {
            format!(".{}", &digits[1..])
        } else {
            String::new()
        };
        let sign = if n - 1 < 0 { '-' } else { '+' };
        format!("{}{rest}e{sign}{}", &digits[..1], (n - 1).abs())
    };
    if x < 0.0 {
        format!("-{body}")
    } else {
        body
    }
}

/// `x` as a JSON number that serializes as JavaScript's `JSON.stringify` writes it where
/// `serde_json` would not: a whole number (`1`, not `1.0`) within the range an integer holds
/// exactly (2^53: scores, rates and amounts are far below it); any other number as it is (a
/// number that is not finite is `null`, as in JSON).
pub(crate) fn js_json_number(x: f64) -> serde_json::Value {
    const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53
    if x.fract() == 0.0 && x.abs() <= EXACT {
        // `-0` is written `0`, as JavaScript writes it.
        return serde_json::Value::from(x as i64);
    }
    serde_json::Number::from_f64(x).map_or(serde_json::Value::Null, serde_json::Value::Number)
}

#[cfg(test)]
mod tests {
    use super::{js_json_number, js_number};

    #[test]
    fn whole_numbers_are_written_without_a_fraction() {
        for (x, text) in [
            (1.0, "1"),
            (0.0, "0"),
            (-0.0, "0"),
            (0.75, "0.75"),
            (0.23333333333333336, "0.23333333333333336"),
            (9_007_199_254_740_992.0, "9007199254740992"),
            (f64::NAN, "null"),
        ] {
            assert_eq!(js_json_number(x).to_string(), text, "{x}");
        }
    }

    #[test]
    fn writes_numbers_as_javascript_does() {
        for (x, text) in [
            (0.0, "0"),
            (-0.0, "0"),
            (1.0, "1"),
            (100.0, "100"),
            (0.1, "0.1"),
            (0.1 + 0.2, "0.30000000000000004"),
            (2.0 / 3.0, "0.6666666666666666"),
            (1e-7, "1e-7"),
            (1.5e-7, "1.5e-7"),
            (0.000001, "0.000001"),
            (1e21, "1e+21"),
            (1.25e22, "1.25e+22"),
            (123456789012345680000.0, "123456789012345680000"),
            (-0.25, "-0.25"),
            (-2.5, "-2.5"),
            (1.5e-6, "0.0000015"),
            (1e16, "10000000000000000"),
            (5.551115123125783e-17, "5.551115123125783e-17"),
            (f64::NAN, "NaN"),
            (f64::NEG_INFINITY, "-Infinity"),
        ] {
            assert_eq!(js_number(x), text, "{x}");
        }
    }
}
