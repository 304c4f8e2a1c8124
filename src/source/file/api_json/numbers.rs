//! The numbers of an API answer as servers spell them: timestamps in seconds, sample values as
//! Go's `strconv.FormatFloat` writes them; shared by the serde read and the scanned one so
//! that both read a number alike.

/// Float seconds to milliseconds through the float's shortest decimal form (the digits the
/// server wrote, for any timestamp with at most 17 significant digits), truncating below a
/// millisecond like Prometheus.
pub(super) fn seconds_to_ms(secs: f64) -> Option<i64> {
    if !secs.is_finite() {
        return None;
    }
    // Whole seconds (every range-query step on a whole-second grid) are exact as they are;
    // formatting each of millions of them was a tenth of a day's postmortem from Prometheus.
    if secs.fract() == 0.0 && secs.abs() < 9.2e15 {
        return Some(secs as i64 * 1000);
    }
    // `{}` on f64 prints the shortest round-tripping decimal, never an exponent.
    crate::time::seconds_to_ms(&format!("{secs}"))
}

/// Go's `strconv.ParseFloat` spellings as Prometheus writes them: decimals, exponents, `NaN`,
/// `+Inf`, `-Inf` (case-insensitive, `Inf`/`Infinity` with optional sign).
pub(super) fn parse_value(s: &str) -> Option<f64> {
    // Counts and bucket counts, most of an answer: up to 15 digits is an integer below 2^53,
    // exactly the float Rust's parser would give, read without it.
    if !s.is_empty() && s.len() <= 15 && s.bytes().all(|b| b.is_ascii_digit()) {
        return Some(s.bytes().fold(0u64, |n, b| n * 10 + u64::from(b - b'0')) as f64);
    }
    let t = s.trim();
    let unsigned = t.trim_start_matches(['+', '-']);
    if unsigned.is_empty() || t.len() - unsigned.len() > 1 {
        return None;
    }
    // Rust's parser accepts the same words as Go's ("nan", "inf", "infinity", any case).
    t.parse::<f64>().ok()
}
