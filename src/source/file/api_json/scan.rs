//! The series of an API answer's `result` read straight from its bytes, without serde.
//!
//! A raw range answer is nearly all `[1796083207,"0.5"]` pairs; read through serde each pair
//! was a tuple struct, a visitor and a `Vec` element before it became a sample, and a recording
//! of a fleet spent as much CPU reading the store's JSON as the store spent writing it. This
//! reads the one shape servers write (`{"metric":{...},"values":[[t,"v"],...]}`, or `"value"`
//! for a vector row) into a [`Series`] directly.
//!
//! It reads nothing it is unsure of: an escape in a string, a key other than `metric`,
//! `values` and `value` (a native histogram, a future server's addition), a repeated key or
//! label, a series without a name, a timestamp out of range, text that is not JSON. It then
//! answers None and the caller reads that series with serde, which gives the same series or
//! says what is wrong, and where.

use crate::signal::series::{Labels, Sample, Samples, Series};

/// The series whose object starts at byte `at` of `text` (after blanks), and the byte after
/// its closing `}`; None when the object is anything but the plain shape (see the module).
pub(super) fn series_at(
    text: &str,
    at: usize,
    scratch: &mut Vec<Sample>,
) -> Option<(Series, usize)> {
    let mut c = Cursor { text, at };
    c.eat(b'{')?;
    let (mut metric, mut values, mut value) = (None, None, None);
    loop {
        let key = c.string()?;
        c.eat(b':')?;
        match key {
            "metric" if metric.is_none() => metric = Some(c.labels()?),
            "values" if values.is_none() => values = Some(c.points(scratch)?),
            "value" if value.is_none() => value = Some(c.point()?),
            _ => return None,
        }
        match c.next_byte()? {
            b',' => continue,
            b'}' => break,
            _ => return None,
        }
    }
    let mut pairs = metric.unwrap_or_default();
    let name_at = pairs.iter().position(|(k, _)| k == "__name__")?;
    let name = pairs.swap_remove(name_at).1;
    if name.is_empty() {
        return None;
    }
    // Prometheus treats an empty label value as the label being absent.
    pairs.retain(|(_, v)| !v.is_empty());
    let labels = Labels::new(pairs);
    let mut samples = values.unwrap_or_default();
    if let Some(one) = value {
        samples.push(one);
    }
    let series = Series {
        name,
        labels,
        samples,
    };
    Some((series, c.at))
}

/// A position in the answer's text; every method skips blanks before what it reads.
struct Cursor<'a> {
    text: &'a str,
    at: usize,
}

impl<'a> Cursor<'a> {
    fn skip_blanks(&mut self) {
        let b = self.text.as_bytes();
        while matches!(b.get(self.at), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.skip_blanks();
        self.text.as_bytes().get(self.at).copied()
    }

    fn next_byte(&mut self) -> Option<u8> {
        let c = self.peek()?;
        self.at += 1;
        Some(c)
    }

    fn eat(&mut self, want: u8) -> Option<()> {
        (self.next_byte()? == want).then_some(())
    }

    /// A string without escapes or control characters, borrowed.
    fn string(&mut self) -> Option<&'a str> {
        self.eat(b'"')?;
        let start = self.at;
        let rest = &self.text.as_bytes()[start..];
        let len = rest
            .iter()
            .position(|&c| c == b'"' || c == b'\\' || c < 0x20)?;
        if rest[len] != b'"' {
            return None;
        }
        self.at = start + len + 1;
        // Both ends are ASCII bytes, so char boundaries.
        Some(&self.text[start..start + len])
    }

    /// `{"name":"value",...}`: the pairs sorted by name, None if a name repeats.
    fn labels(&mut self) -> Option<Vec<(String, String)>> {
        self.eat(b'{')?;
        let mut pairs = Vec::new();
        if self.peek()? == b'}' {
            self.at += 1;
            return Some(pairs);
        }
        loop {
            let name = self.string()?;
            self.eat(b':')?;
            let value = self.string()?;
            pairs.push((name.to_string(), value.to_string()));
            match self.next_byte()? {
                b',' => continue,
                b'}' => break,
                _ => return None,
            }
        }
        // Servers write labels sorted; a repeated name is left to serde (its map keeps the last).
        if !pairs.is_sorted_by(|a, b| a.0 < b.0) {
            pairs.sort_by(|a, b| a.0.cmp(&b.0));
            if pairs.windows(2).any(|w| w[0].0 == w[1].0) {
                return None;
            }
        }
        Some(pairs)
    }

    /// `[[t,"v"],...]`, gathered in `scratch` first so that the samples are stored knowing
    /// how many they are.
    fn points(&mut self, scratch: &mut Vec<Sample>) -> Option<Samples> {
        self.eat(b'[')?;
        scratch.clear();
        if self.peek()? != b']' {
            loop {
                scratch.push(self.point()?);
                match self.next_byte()? {
                    b',' => continue,
                    b']' => break,
                    _ => return None,
                }
            }
        } else {
            self.at += 1;
        }
        Some(Samples::from_slice(scratch))
    }

    /// `[t,"v"]`: seconds (a JSON number) and the value (a string, or a number).
    fn point(&mut self) -> Option<Sample> {
        self.eat(b'[')?;
        self.skip_blanks();
        let t_ms = match self.whole(b',') {
            Some(secs) => secs * 1000,
            None => {
                let t_ms = seconds_to_ms(self.number()?)?;
                self.eat(b',')?;
                t_ms
            }
        };
        let value = if self.peek()? == b'"' {
            let quote = self.at;
            self.at += 1;
            match self.whole(b'"') {
                Some(n) => n as f64,
                None => {
                    self.at = quote;
                    super::numbers::parse_value(self.string()?)?
                }
            }
        } else {
            self.number()?.parse().ok()?
        };
        self.eat(b']')?;
        Some(Sample {
            t_ms: Some(t_ms),
            value,
        })
    }

    /// Most of an answer's bytes are whole seconds and whole counts: 1 to 15 digits (an
    /// integer below 2^53, so exact as a float), the first not 0 unless alone, then `end` right
    /// after. Read in one pass, `end` consumed; anything else leaves the cursor where it was,
    /// for the general reads, which give the same number or refuse the same text.
    fn whole(&mut self, end: u8) -> Option<i64> {
        let b = &self.text.as_bytes()[self.at..];
        let mut n = 0i64;
        let mut len = 0;
        while let Some(&c) = b.get(len) {
            if !c.is_ascii_digit() {
                break;
            }
            n = n * 10 + i64::from(c - b'0');
            len += 1;
            if len > 15 {
                return None;
            }
        }
        if len == 0 || (len > 1 && b[0] == b'0') || b.get(len) != Some(&end) {
            return None;
        }
        self.at += len + 1;
        Some(n)
    }

    /// A JSON number's text: `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`.
    fn number(&mut self) -> Option<&'a str> {
        self.skip_blanks();
        let b = self.text.as_bytes();
        let start = self.at;
        let mut i = start;
        let digits = |i: &mut usize| {
            let from = *i;
            while b.get(*i).is_some_and(u8::is_ascii_digit) {
                *i += 1;
            }
            *i > from
        };
        if b.get(i) == Some(&b'-') {
            i += 1;
        }
        if b.get(i) == Some(&b'0') {
            i += 1;
        } else if !digits(&mut i) {
            return None;
        }
        if b.get(i) == Some(&b'.') {
            i += 1;
            if !digits(&mut i) {
                return None;
            }
        }
        if matches!(b.get(i), Some(b'e' | b'E')) {
            i += 1;
            if matches!(b.get(i), Some(b'+' | b'-')) {
                i += 1;
            }
            if !digits(&mut i) {
                return None;
            }
        }
        self.at = i;
        Some(&self.text[start..i])
    }
}

/// A timestamp's text in milliseconds, as serde's path reads it: whole seconds exactly, any
/// other number through its float (see [`super::numbers::seconds_to_ms`]).
fn seconds_to_ms(text: &str) -> Option<i64> {
    let b = text.as_bytes();
    if (1..=15).contains(&b.len()) && b.iter().all(u8::is_ascii_digit) {
        let secs = b.iter().fold(0i64, |n, &c| n * 10 + i64::from(c - b'0'));
        return Some(secs * 1000);
    }
    super::numbers::seconds_to_ms(text.parse().ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 256, failure_persistence: None, ..Default::default() })]
        /// The one-pass read of a whole number takes exactly what the general reads would
        /// read as one, and leaves everything else to them.
        #[test]
        fn whole_numbers_are_read_as_digits_are(text in "[0-9]{0,17}[^0-9]{0,3}[0-9]{0,3}") {
            let digits = text.bytes().take_while(u8::is_ascii_digit).count();
            let with_end = format!("{text},");
            let mut c = Cursor { text: &with_end, at: 0 };
            let plain = (1..=15).contains(&digits)
                && (digits == 1 || !text.starts_with('0'))
                && with_end.as_bytes()[digits] == b',';
            let read = c.whole(b',');
            proptest::prop_assert_eq!(read, plain.then(|| text[..digits].parse::<i64>().unwrap()));
            proptest::prop_assert_eq!(c.at, if plain { digits + 1 } else { 0 });
        }
    }
}
