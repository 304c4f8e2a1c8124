//! Times and durations as users and files write them: Prometheus durations (`5m`, `1h30m`),
//! RFC 3339 or Unix times, and their printed forms. Sources, the pipeline, reports and the CLI
//! all read or print them, so they live below all of those.

/// A duration or a time that does not read. Each message quotes the input and says what was
/// expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TimeError {
    /// Not a Prometheus duration.
    #[error("invalid duration `{0}`: expected a Prometheus duration such as `30s`, `5m`, `1h30m` or `250ms`")]
    Duration(String),
    /// Neither RFC 3339 nor Unix seconds.
    #[error("invalid time `{0}`: expected RFC 3339 (e.g. `2026-11-01T00:10:00Z`) or Unix seconds (e.g. `1761955800`)")]
    Time(String),
    /// Past what RFC 3339 can write; `hint` says when it looks like milliseconds.
    #[error("time `{input}` is beyond the year 9999{hint}")]
    BeyondYear9999 {
        /// The time as given.
        input: String,
        /// `: it looks like milliseconds; ...`, or empty.
        hint: String,
    },
}

const SECOND_MS: i64 = 1000;
const MINUTE_MS: i64 = 60 * SECOND_MS;
const HOUR_MS: i64 = 60 * MINUTE_MS;
const DAY_MS: i64 = 24 * HOUR_MS;

/// Parses a Prometheus duration (`30s`, `5m`, `1h30m`, `250ms`, `2d`, `1w`, `1y` = 365 days)
/// into milliseconds. Units must appear from largest to smallest, each at most once, as
/// Prometheus requires; `0` alone is accepted. The error quotes the input.
pub fn parse_duration(s: &str) -> Result<i64, TimeError> {
    const UNITS: [(&str, i64); 7] = [
        ("y", 365 * DAY_MS),
        ("w", 7 * DAY_MS),
        ("d", DAY_MS),
        ("h", HOUR_MS),
        ("m", MINUTE_MS),
        ("s", SECOND_MS),
        ("ms", 1),
    ];
    let err = || TimeError::Duration(s.to_string());
    if s == "0" {
        return Ok(0);
    }
    if s.is_empty() {
        return Err(err());
    }
    let b = s.as_bytes();
    let mut i = 0;
    let mut next_unit = 0;
    let mut total: i64 = 0;
    while i < b.len() {
        let num_start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == num_start {
            return Err(err());
        }
        let n: i64 = s[num_start..i].parse().map_err(|_| err())?;
        let unit_start = i;
        while i < b.len() && b[i].is_ascii_alphabetic() {
            i += 1;
        }
        let unit = &s[unit_start..i];
        let pos = UNITS[next_unit..]
            .iter()
            .position(|(u, _)| *u == unit)
            .ok_or_else(err)?
            + next_unit;
        next_unit = pos + 1;
        total = n
            .checked_mul(UNITS[pos].1)
            .and_then(|v| total.checked_add(v))
            .ok_or_else(err)?;
    }
    Ok(total)
}

/// Parses a point in time into Unix milliseconds: RFC 3339 (`2026-11-01T00:10:00Z`,
/// `2026-11-01T02:10:00.5+02:00`; `t` or a space may replace `T`) or Unix seconds
/// (`1761955800`, `1761955800.5`). Sub-millisecond digits are truncated. The error quotes the
/// input.
pub fn parse_time(s: &str) -> Result<i64, TimeError> {
    // RFC 3339 stops at the year 9999; a Unix time past it is a slip, most often milliseconds.
    const LAST_MS: i64 = 253_402_300_799_999;
    let t = s.trim();
    let ms = seconds_to_ms(t)
        .or_else(|| parse_rfc3339(t))
        .ok_or_else(|| TimeError::Time(s.to_string()))?;
    if ms.abs() > LAST_MS {
        let hint = if (ms / 1000).abs() <= LAST_MS {
            format!(
                ": it looks like milliseconds; Unix seconds are expected (`{}`)",
                ms / 1_000_000
            )
        } else {
            String::new()
        };
        return Err(TimeError::BeyondYear9999 {
            input: s.to_string(),
            hint,
        });
    }
    Ok(ms)
}

/// Decimal seconds (`1717000000`, `1717000000.123`, `-1.5`, `1.717e9`) to milliseconds,
/// truncating toward zero like Prometheus' `int64(ts * 1000)`. Plain decimals are converted
/// exactly (no float rounding surprises at millisecond precision); exponent forms go through
/// f64. Shared with the OpenMetrics parser, whose timestamps are seconds.
pub(crate) fn seconds_to_ms(s: &str) -> Option<i64> {
    let (neg, body) = match s.as_bytes().first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    if let Some(exact) = plain_decimal_ms(body.as_bytes()) {
        return exact.map(|ms| if neg { -ms } else { ms });
    }
    if !body.bytes().any(|c| c == b'e' || c == b'E')
        || body
            .bytes()
            .any(|c| c.is_ascii_alphabetic() && c != b'e' && c != b'E')
    {
        return None;
    }
    let v: f64 = s.parse().ok()?;
    let ms = (v * 1000.0).trunc();
    (ms.is_finite() && ms.abs() < 9.2e18).then_some(ms as i64)
}

/// `digits[.digits]` in milliseconds, in one pass (every sample line of a recording has a
/// timestamp): `None` when `b` is not of that form, `Some(None)` when it is but has no digit
/// or does not fit.
fn plain_decimal_ms(b: &[u8]) -> Option<Option<i64>> {
    // Whole seconds of at most 15 digits (every recording's timestamps): milliseconds that
    // cannot overflow, so no checked arithmetic.
    if (1..=15).contains(&b.len()) && b.iter().all(u8::is_ascii_digit) {
        let secs = b.iter().fold(0i64, |n, &c| n * 10 + i64::from(c - b'0'));
        return Some(Some(secs * 1000));
    }
    let mut ms: Option<i64> = Some(0);
    let mut digits = 0;
    let mut i = 0;
    while let Some(&c) = b.get(i).filter(|c| c.is_ascii_digit()) {
        ms = ms.and_then(|m| m.checked_mul(10)?.checked_add(i64::from(c - b'0')));
        digits += 1;
        i += 1;
    }
    ms = ms.and_then(|m| m.checked_mul(1000));
    if b.get(i) == Some(&b'.') {
        i += 1;
        let mut scale = 100;
        while let Some(&c) = b.get(i).filter(|c| c.is_ascii_digit()) {
            ms = ms.and_then(|m| m.checked_add(i64::from(c - b'0') * scale));
            scale /= 10;
            digits += 1;
            i += 1;
        }
    }
    (i == b.len()).then_some(ms.filter(|_| digits > 0))
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days_from_civil).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        _ => 28,
    }
}

fn parse_rfc3339(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    let num = |from: usize, len: usize| -> Option<i64> {
        let digits = b.get(from..from + len)?;
        let mut v = 0;
        for &c in digits {
            if !c.is_ascii_digit() {
                return None;
            }
            v = v * 10 + i64::from(c - b'0');
        }
        Some(v)
    };
    let sep = |at: usize, allowed: &[u8]| b.get(at).is_some_and(|c| allowed.contains(c));
    let year = num(0, 4)?;
    let month = num(5, 2)?;
    let day = num(8, 2)?;
    let hour = num(11, 2)?;
    let minute = num(14, 2)?;
    let second = num(17, 2)?;
    if !(sep(4, b"-") && sep(7, b"-") && sep(10, b"Tt ") && sep(13, b":") && sep(16, b":")) {
        return None;
    }
    if !(1..=12).contains(&month)
        || day < 1
        || day > days_in_month(year, month)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    let mut i = 19;
    let mut frac_ms = 0;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let start = i;
        while b.get(i).is_some_and(|c| c.is_ascii_digit()) {
            i += 1;
        }
        if i == start {
            return None;
        }
        for (k, scale) in [100, 10, 1].into_iter().enumerate() {
            if start + k < i {
                frac_ms += i64::from(b[start + k] - b'0') * scale;
            }
        }
    }
    let offset_s = match b.get(i)? {
        b'Z' | b'z' => {
            i += 1;
            0
        }
        sign @ (b'+' | b'-') => {
            let oh = num(i + 1, 2)?;
            let om = num(i + 4, 2)?;
            if !sep(i + 3, b":") || oh > 23 || om > 59 {
                return None;
            }
            i += 6;
            let off = oh * 3600 + om * 60;
            if *sign == b'-' {
                -off
            } else {
                off
            }
        }
        _ => return None,
    };
    if i != b.len() {
        return None;
    }
    let secs =
        days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second - offset_s;
    Some(secs * 1000 + frac_ms)
}

/// Formats Unix milliseconds as RFC 3339 UTC.
pub fn format_time(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Civil from days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Formats a duration in milliseconds the Prometheus way (`5m`, `1h30m`, `45s`).
pub fn format_duration(ms: i64) -> String {
    if ms % 1000 != 0 {
        return format!("{ms}ms");
    }
    let mut s = ms / 1000;
    let mut out = String::new();
    for (unit, len) in [("d", 86_400), ("h", 3600), ("m", 60), ("s", 1)] {
        if s >= len {
            out.push_str(&format!("{}{unit}", s / len));
            s %= len;
        }
    }
    if out.is_empty() {
        out.push_str("0s");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_and_durations() {
        assert_eq!(format_time(0), "1970-01-01T00:00:00Z");
        assert_eq!(format_time(1_796_083_200_000), "2026-12-01T00:00:00Z");
        assert_eq!(format_time(951_782_400_000), "2000-02-29T00:00:00Z");
        assert_eq!(format_duration(300_000), "5m");
        assert_eq!(format_duration(5_400_000), "1h30m");
        assert_eq!(format_duration(1500), "1500ms");
    }

    #[test]
    fn durations() {
        let ok = [
            ("30s", 30_000),
            ("5m", 300_000),
            ("1h", 3_600_000),
            ("1h30m", 5_400_000),
            ("250ms", 250),
            ("1m30s250ms", 90_250),
            ("2d", 172_800_000),
            ("1w", 604_800_000),
            ("1y", 31_536_000_000),
            ("0", 0),
            ("0s", 0),
        ];
        for (input, want) in ok {
            assert_eq!(parse_duration(input), Ok(want), "{input}");
        }
        for bad in [
            "",
            "5",
            "5x",
            "1m1h",
            "1h1h",
            "-5m",
            "1.5h",
            "m",
            "5m ",
            "99999999999y",
        ] {
            let e = parse_duration(bad).unwrap_err().to_string();
            assert!(e.contains(&format!("`{bad}`")), "{e}");
        }
        assert_eq!(
            parse_duration("5x").unwrap_err().to_string(),
            "invalid duration `5x`: expected a Prometheus duration such as `30s`, `5m`, `1h30m` or `250ms`"
        );
    }

    #[test]
    fn times() {
        // `date -u -d 2026-11-01T00:10:00Z +%s` = 1793491800.
        assert_eq!(parse_time("2026-11-01T00:10:00Z"), Ok(1_793_491_800_000));
        assert_eq!(
            parse_time("2026-11-01T02:10:00.250+02:00"),
            Ok(1_793_491_800_250)
        );
        assert_eq!(
            parse_time("2026-10-31T23:40:00.1239-00:30"),
            Ok(1_793_491_800_123)
        );
        assert_eq!(parse_time("1970-01-01T00:00:00Z"), Ok(0));
        assert_eq!(parse_time("1969-12-31T23:59:59Z"), Ok(-1000));
        assert_eq!(parse_time("2000-02-29t12:34:56z"), Ok(951_827_696_000));
        assert_eq!(parse_time("2024-02-29 00:00:00Z"), Ok(1_709_164_800_000));
        assert_eq!(parse_time("1761955800"), Ok(1_761_955_800_000));
        assert_eq!(parse_time("1761955800.5"), Ok(1_761_955_800_500));
        // Milliseconds by mistake, and times no calendar holds, are refused with the reason.
        let e = parse_time("1796083807000").unwrap_err().to_string();
        assert!(
            e.contains("milliseconds") && e.contains("`1796083807`"),
            "{e}"
        );
        let e = parse_time(&(i64::MAX / 1000).to_string())
            .unwrap_err()
            .to_string();
        assert!(e.contains("beyond the year 9999"), "{e}");
        assert_eq!(parse_time("253402300799"), Ok(253_402_300_799_000));
        assert_eq!(parse_time("1.7619558e9"), Ok(1_761_955_800_000));
        for bad in [
            "2026-13-01T00:00:00Z",
            "2025-02-29T00:00:00Z",
            "2026-11-01T24:00:00Z",
            "2026-11-01T00:00:00",
            "2026-11-01T00:00:00+0200",
            "2026-11-01T00:00:00.Z",
            "2026-11-01",
            "yesterday",
            "",
            "1e",
            "inf",
        ] {
            let e = parse_time(bad).unwrap_err().to_string();
            assert!(e.starts_with(&format!("invalid time `{bad}`")), "{e}");
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(1000))]

        #[test]
        fn time_parsers_never_panic(s in "[-+0-9.:eETZtz ]{0,30}") {
            let _ = parse_time(&s);
            let _ = parse_duration(&s);
        }
    }

    /// The one-pass form against the two-pass one it replaced.
    fn seconds_to_ms_before(s: &str) -> Option<i64> {
        let (neg, body) = match s.as_bytes().first()? {
            b'-' => (true, &s[1..]),
            b'+' => (false, &s[1..]),
            _ => (false, s),
        };
        let (int, frac) = body.split_once('.').unwrap_or((body, ""));
        let all_digits = |x: &str| x.bytes().all(|c| c.is_ascii_digit());
        if all_digits(int) && all_digits(frac) {
            if int.is_empty() && frac.is_empty() {
                return None;
            }
            let mut ms: i64 = 0;
            for c in int.bytes() {
                ms = ms.checked_mul(10)?.checked_add(i64::from(c - b'0'))?;
            }
            ms = ms.checked_mul(1000)?;
            let f = frac.as_bytes();
            for (k, scale) in [100, 10, 1].into_iter().enumerate() {
                if let Some(&c) = f.get(k) {
                    ms = ms.checked_add(i64::from(c - b'0') * scale)?;
                }
            }
            return Some(if neg { -ms } else { ms });
        }
        if !body.bytes().any(|c| c == b'e' || c == b'E')
            || body
                .bytes()
                .any(|c| c.is_ascii_alphabetic() && c != b'e' && c != b'E')
        {
            return None;
        }
        let v: f64 = s.parse().ok()?;
        let ms = (v * 1000.0).trunc();
        (ms.is_finite() && ms.abs() < 9.2e18).then_some(ms as i64)
    }

    #[test]
    fn seconds_to_ms_in_one_pass_reads_what_two_passes_read() {
        let cases = [
            "",
            "-",
            "+",
            ".",
            "-.",
            "0",
            "-0",
            "+7",
            "1717000000",
            "1717000000.1",
            "1717000000.12",
            "1717000000.123",
            "1717000000.1239",
            ".5",
            "5.",
            "-1.5",
            "1.5e3",
            "1e5",
            "1E-3",
            "-2.5e2",
            "1.2.3",
            "1..2",
            "NaN",
            "Inf",
            "-Inf",
            "1e400",
            "0x10",
            "12a",
            "1 2",
            "99999999999999999999",
            "99999999999999999999e-10",
            "9223372036854775",
            "9223372036854775.807",
            "9223372036854776",
            "-9223372036854775.808",
            "1.e3",
            ".e3",
            "e3",
            "1.5x",
            "٣",
            "1717000000.",
        ];
        for s in cases {
            assert_eq!(seconds_to_ms(s), seconds_to_ms_before(s), "{s:?}");
        }
        proptest::proptest!(|(s in "[-+]?[0-9]{0,21}(\\.[0-9]{0,6})?([eE][-+]?[0-9]{1,3})?[a.]?")| {
            proptest::prop_assert_eq!(seconds_to_ms(&s), seconds_to_ms_before(&s), "{:?}", s);
        });
    }

    #[test]
    fn seconds_to_ms_is_exact() {
        assert_eq!(seconds_to_ms("1717000000.123"), Some(1_717_000_000_123));
        assert_eq!(seconds_to_ms("1717000000.1239"), Some(1_717_000_000_123));
        assert_eq!(seconds_to_ms("-1.5"), Some(-1500));
        assert_eq!(seconds_to_ms(".5"), Some(500));
        assert_eq!(seconds_to_ms("5."), Some(5000));
        assert_eq!(seconds_to_ms("."), None);
        assert_eq!(seconds_to_ms("-"), None);
        assert_eq!(seconds_to_ms("NaN"), None);
        assert_eq!(seconds_to_ms("1e400"), None);
        assert_eq!(seconds_to_ms("99999999999999999999"), None);
    }
}
