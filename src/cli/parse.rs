//! clap value parsers: a flag's text becomes a typed value while the command line is read, so a
//! bad flag is refused (exit 2) before any work starts, and clap's message names the flag and
//! quotes its text (`invalid value '5 minutes' for '--window <WINDOW>': …`); ours adds why.

use std::time::Duration;

use crate::time::TimeError;

/// Why a flag's text was refused; clap puts the flag and its text in front.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValueError {
    /// Not `KEY=VALUE`.
    #[error("expects KEY=VALUE, got `{0}`")]
    KeyValue(String),
    /// `NAME=x` where x is not a finite number.
    #[error("{key}: `{value}` is not a number")]
    NotANumber {
        /// The name.
        key: String,
        /// The value as given.
        value: String,
    },
    /// A duration of zero where one is needed.
    #[error("must be longer than zero, got `{0}`")]
    NotPositive(String),
    /// A negative duration.
    #[error("must not be negative, got `{0}`")]
    Negative(String),
    /// Not a duration or a time at all.
    #[error(transparent)]
    Time(#[from] TimeError),
}

/// `KEY=VALUE` (`--fact`), both sides trimmed; the key must not be empty.
pub fn key_value(s: &str) -> Result<(String, String), ValueError> {
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.trim().to_string())),
        _ => Err(ValueError::KeyValue(s.to_string())),
    }
}

/// `NAME=NUMBER` (`--signal`, `--slo`): the value a finite number.
pub fn key_number(s: &str) -> Result<(String, f64), ValueError> {
    let (k, v) = key_value(s)?;
    let n = v
        .parse::<f64>()
        .ok()
        .filter(|x| x.is_finite())
        .ok_or_else(|| ValueError::NotANumber {
            key: k.clone(),
            value: v.clone(),
        })?;
    Ok((k, n))
}

/// A Prometheus duration (`30s`, `5m`, `1h30m`) longer than zero.
pub fn positive_duration(s: &str) -> Result<Duration, ValueError> {
    let ms = crate::time::parse_duration(s)?;
    if ms <= 0 {
        return Err(ValueError::NotPositive(s.to_string()));
    }
    Ok(Duration::from_millis(ms as u64))
}

/// A Prometheus duration longer than zero, kept as written (it goes into generated rules, where
/// `rate(x[0])` would be refused by Prometheus).
pub fn positive_duration_text(s: &str) -> Result<String, ValueError> {
    positive_duration(s).map(|_| s.trim().to_string())
}

/// A Prometheus duration, zero allowed, kept as written.
pub fn duration_text(s: &str) -> Result<String, ValueError> {
    duration(s).map(|_| s.trim().to_string())
}

/// A Prometheus duration, zero allowed (`--nvml-interval 0` reads back to back).
pub fn duration(s: &str) -> Result<Duration, ValueError> {
    let ms = crate::time::parse_duration(s)?;
    if ms < 0 {
        return Err(ValueError::Negative(s.to_string()));
    }
    Ok(Duration::from_millis(ms as u64))
}

/// A time, RFC 3339 or Unix seconds, as Unix milliseconds.
pub fn time(s: &str) -> Result<i64, ValueError> {
    Ok(crate::time::parse_time(s)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_value_trims_and_needs_a_key() {
        assert_eq!(key_value(" a = b "), Ok(("a".into(), "b".into())));
        assert_eq!(key_value("a="), Ok(("a".into(), String::new())));
        assert!(key_value("=b")
            .unwrap_err()
            .to_string()
            .contains("KEY=VALUE"));
        assert!(key_value("ab").unwrap_err().to_string().contains("`ab`"));
    }

    #[test]
    fn key_number_needs_a_finite_number() {
        assert_eq!(key_number("x=2.5"), Ok(("x".into(), 2.5)));
        let refused = |s| key_number(s).unwrap_err().to_string();
        assert_eq!(refused("x=inf"), "x: `inf` is not a number");
        assert_eq!(refused("x=two"), "x: `two` is not a number");
    }

    #[test]
    fn durations_refuse_what_they_must() {
        assert_eq!(positive_duration("1m"), Ok(Duration::from_secs(60)));
        assert!(positive_duration("0s")
            .unwrap_err()
            .to_string()
            .contains("longer than zero"));
        assert_eq!(duration("0s"), Ok(Duration::ZERO));
        assert!(duration("soon").is_err());
    }
}
