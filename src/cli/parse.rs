//! clap value parsers: a flag's text becomes a typed value while the command line is read, so a
//! bad flag is refused (exit 2) before any work starts, and clap's message names the flag and
//! quotes its text (`invalid value '5 minutes' for '--window <WINDOW>': …`); ours adds why.

use std::time::Duration;

/// `KEY=VALUE` (`--fact`), both sides trimmed; the key must not be empty.
pub fn key_value(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.trim().to_string())),
        _ => Err(format!("expects KEY=VALUE, got `{s}`")),
    }
}

/// `NAME=NUMBER` (`--signal`, `--slo`): the value a finite number.
pub fn key_number(s: &str) -> Result<(String, f64), String> {
    let (k, v) = key_value(s)?;
    let n = v
        .parse::<f64>()
        .ok()
        .filter(|x| x.is_finite())
        .ok_or_else(|| format!("{k}: `{v}` is not a number"))?;
    Ok((k, n))
}

/// A Prometheus duration (`30s`, `5m`, `1h30m`) longer than zero.
pub fn positive_duration(s: &str) -> Result<Duration, String> {
    let ms = crate::time::parse_duration(s)?;
    if ms <= 0 {
        return Err(format!("must be longer than zero, got `{s}`"));
    }
    Ok(Duration::from_millis(ms as u64))
}

/// A Prometheus duration longer than zero, kept as written (it goes into generated rules, where
/// `rate(x[0])` would be refused by Prometheus).
pub fn positive_duration_text(s: &str) -> Result<String, String> {
    positive_duration(s).map(|_| s.trim().to_string())
}

/// A Prometheus duration, zero allowed, kept as written.
pub fn duration_text(s: &str) -> Result<String, String> {
    duration(s).map(|_| s.trim().to_string())
}

/// A Prometheus duration, zero allowed (`--nvml-interval 0` reads back to back).
pub fn duration(s: &str) -> Result<Duration, String> {
    let ms = crate::time::parse_duration(s)?;
    if ms < 0 {
        return Err(format!("must not be negative, got `{s}`"));
    }
    Ok(Duration::from_millis(ms as u64))
}

/// A time, RFC 3339 or Unix seconds, as Unix milliseconds.
pub fn time(s: &str) -> Result<i64, String> {
    crate::time::parse_time(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_value_trims_and_needs_a_key() {
        assert_eq!(key_value(" a = b "), Ok(("a".into(), "b".into())));
        assert_eq!(key_value("a="), Ok(("a".into(), String::new())));
        assert!(key_value("=b").unwrap_err().contains("KEY=VALUE"));
        assert!(key_value("ab").unwrap_err().contains("`ab`"));
    }

    #[test]
    fn key_number_needs_a_finite_number() {
        assert_eq!(key_number("x=2.5"), Ok(("x".into(), 2.5)));
        assert_eq!(key_number("x=inf").unwrap_err(), "x: `inf` is not a number");
        assert_eq!(key_number("x=two").unwrap_err(), "x: `two` is not a number");
    }

    #[test]
    fn durations_refuse_what_they_must() {
        assert_eq!(positive_duration("1m"), Ok(Duration::from_secs(60)));
        assert!(positive_duration("0s")
            .unwrap_err()
            .contains("longer than zero"));
        assert_eq!(duration("0s"), Ok(Duration::ZERO));
        assert!(duration("soon").is_err());
    }
}
