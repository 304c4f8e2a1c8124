//! Reading expressions from YAML, as one-key maps (`{rate: {metric: x}}`, `{div: [a, b]}`).
//!
//! Each expression map is read by its own visitor rather than converted from a whole YAML
//! value afterwards, so that an error is reported at the line and column of the innermost
//! expression that is wrong, not at the start of the file's `signals:` block.

use std::fmt;

use serde::de::{self, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::Deserialize;

use super::spec::{Expr, SeriesSelector};

const FORMS: &str = "gauge, rate, increase, changes, resets, bit_share, share_below, quantile, \
                     quantile_floor, hist_mean, sum, max, min, avg, count, div, sub, add, scale, \
                     const, percent_to_ratio, first, zero_when_absent, scaling, queued_share, stall, \
                     dispersion, served";

impl<'de> Deserialize<'de> for Expr {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Expr, D::Error> {
        d.deserialize_map(ExprVisitor)
    }
}

struct ExprVisitor;

impl<'de> Visitor<'de> for ExprVisitor {
    type Value = Expr;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "an expression: a map with one key ({FORMS})")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Expr, A::Error> {
        let Some(key) = map.next_key::<String>()? else {
            return Err(de::Error::custom(format!(
                "an expression is a map with one key ({FORMS}), got an empty map"
            )));
        };
        let expr = read_form(&key, &mut map)?;
        if let Some(extra) = map.next_key::<String>()? {
            map.next_value::<IgnoredAny>()?;
            let hint = if SELECTOR_FIELDS.contains(&extra.as_str()) {
                format!(" (`{extra}` belongs to a selector: indented under `{key}`?)")
            } else {
                String::new()
            };
            return Err(de::Error::custom(format!(
                "an expression is a map with one key: `{key}` and `{extra}` are two{hint}"
            )));
        }
        // Checked once the map is known to hold one key, so that a parameter indented one
        // level too shallow is reported as that, not as missing.
        if let Some(selector) = expr.selector() {
            leaf_parameters(&key, selector).map_err(de::Error::custom)?;
        }
        Ok(expr)
    }
}

/// A selector's own keys, for the hint when one stands beside an expression's key.
const SELECTOR_FIELDS: &[&str] = &["metric", "where", "where_not", "q", "mask", "below", "pick"];

/// The expression `key` names, its argument read from `map`'s value.
fn read_form<'de, A: MapAccess<'de>>(key: &str, map: &mut A) -> Result<Expr, A::Error> {
    let custom = |why: String| de::Error::custom(why);
    let mut leaf = || -> Result<SeriesSelector, A::Error> { map.next_value() };
    Ok(match key {
        "gauge" => Expr::Gauge(leaf()?),
        "rate" => Expr::Rate(leaf()?),
        "increase" => Expr::Increase(leaf()?),
        "changes" => Expr::Changes(leaf()?),
        "resets" => Expr::Resets(leaf()?),
        "bit_share" => Expr::BitShare(leaf()?),
        "share_below" => Expr::ShareBelow(leaf()?),
        "quantile" => Expr::Quantile(leaf()?),
        "quantile_floor" => Expr::QuantileFloor(leaf()?),
        "hist_mean" => Expr::HistMean(leaf()?),
        "sum" => Expr::Sum(map.next_value()?),
        "max" => Expr::Max(map.next_value()?),
        "min" => Expr::Min(map.next_value()?),
        "avg" => Expr::Avg(map.next_value()?),
        "count" => Expr::Count(map.next_value()?),
        "percent_to_ratio" => Expr::PercentToRatio(map.next_value()?),
        "div" | "sub" | "zero_when_absent" => {
            let terms: Vec<Expr> = map.next_value()?;
            let n = terms.len();
            let Ok([a, b]) = <[Expr; 2]>::try_from(terms) else {
                return Err(custom(format!(
                    "{key} takes a list of two expressions, got {n}"
                )));
            };
            let (a, b) = (Box::new(a), Box::new(b));
            match key {
                "div" => Expr::Div(a, b),
                "sub" => Expr::Sub(a, b),
                _ => Expr::ZeroWhenAbsent(a, b),
            }
        }
        "scale" => {
            let (e, k): (Expr, f64) = map.next_value()?;
            Expr::Scale(Box::new(e), k)
        }
        "const" => Expr::Const(map.next_value()?),
        "add" | "first" => {
            let terms: Vec<Expr> = map.next_value()?;
            if terms.is_empty() {
                return Err(custom(format!(
                    "{key} takes a non-empty list of expressions"
                )));
            }
            if key == "add" {
                Expr::Add(terms)
            } else {
                Expr::First(terms)
            }
        }
        "scaling" => Expr::Scaling(map.next_value()?),
        "queued_share" => Expr::QueuedShare(map.next_value()?),
        "dispersion" => Expr::Dispersion(map.next_value()?),
        "served" => Expr::Served(map.next_value()?),
        "stall" => Expr::Stall(map.next_value()?),
        other => {
            map.next_value::<IgnoredAny>()?;
            return Err(custom(format!(
                "unknown expression `{other}` (one of {FORMS})"
            )));
        }
    })
}

/// Whether the selector of leaf `key` carries the parameter that leaf needs (`q` of a quantile
/// in [0, 1], a non-zero `mask` of a bit share, a finite `below` above 0 for a share below: no
/// growth is under 0) and none that another leaf reads: a misplaced parameter would be silently
/// ignored.
fn leaf_parameters(key: &str, s: &SeriesSelector) -> Result<(), String> {
    let needs = match key {
        "quantile" | "quantile_floor" => "q",
        "bit_share" => "mask",
        "share_below" => "below",
        _ => "",
    };
    let present = [
        ("q", s.q.is_some()),
        ("mask", s.mask.is_some()),
        ("below", s.below.is_some()),
    ];
    for (name, is_set) in present {
        if name == needs && !is_set {
            return Err(format!("{key} needs `{name}`"));
        }
        if name != needs && is_set {
            return Err(format!("{key} takes no `{name}`"));
        }
    }
    match (s.q, s.mask, s.below) {
        (Some(q), _, _) if !(0.0..=1.0).contains(&q) => {
            Err(format!("{key}: `q` is a quantile in [0, 1], got {q}"))
        }
        (_, Some(0), _) => Err(format!("{key}: `mask` 0 selects no bit")),
        (_, _, Some(b)) if !(b.is_finite() && b > 0.0) => Err(format!(
            "{key}: `below` is a growth per second above 0, got {b}"
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error_of(yaml: &str) -> String {
        serde_yaml::from_str::<Expr>(yaml).unwrap_err().to_string()
    }

    #[test]
    fn a_leaf_needs_its_parameter_and_takes_no_other() {
        for (yaml, says) in [
            ("share_below: {metric: idle}", "share_below needs `below`"),
            ("bit_share: {metric: r}", "bit_share needs `mask`"),
            ("quantile: {metric: h}", "quantile needs `q`"),
            ("quantile_floor: {metric: h}", "quantile_floor needs `q`"),
            ("rate: {metric: c, below: 0.05}", "rate takes no `below`"),
            (
                "share_below: {metric: c, below: 1, q: 0.5}",
                "share_below takes no `q`",
            ),
            ("gauge: {metric: g, mask: 4}", "gauge takes no `mask`"),
            (
                "quantile: {metric: h, q: 99}",
                "`q` is a quantile in [0, 1], got 99",
            ),
            ("bit_share: {metric: r, mask: 0}", "`mask` 0 selects no bit"),
            ("share_below: {metric: c, below: -1}", "above 0, got -1"),
            ("share_below: {metric: c, below: 0}", "above 0, got 0"),
            ("share_below: {metric: c, below: .nan}", "above 0, got NaN"),
        ] {
            let err = error_of(yaml);
            assert!(err.contains(says), "{yaml}: {err}");
        }
        for yaml in [
            "share_below: {metric: idle, below: 0.05}",
            "bit_share: {metric: r, mask: 132}",
            "quantile_floor: {metric: h, q: 1}",
        ] {
            assert!(serde_yaml::from_str::<Expr>(yaml).is_ok(), "{yaml}");
        }
    }

    /// The error points at the expression that is wrong, however deep, not at the document.
    #[test]
    fn an_error_has_the_line_and_column_of_the_wrong_expression() {
        let yaml =
            "div:\n  - {sum: {rate: {metric: a}}}\n  - sum:\n      share_below: {metric: b}\n";
        let err = error_of(yaml);
        assert!(err.contains("share_below needs `below`"), "{err}");
        assert!(err.contains("line 4 column 7"), "{err}");
        assert!(err.contains("div[1].sum"), "{err}");
    }

    #[test]
    fn malformed_forms_say_what_they_take() {
        for (yaml, says) in [
            ("{}", "got an empty map"),
            ("[1, 2]", "an expression: a map with one key"),
            (
                "{gauge: {metric: a}, rate: {metric: b}}",
                "`gauge` and `rate` are two",
            ),
            ("nope: 1", "unknown expression `nope`"),
            (
                "div: [{const: 1}]",
                "takes a list of two expressions, got 1",
            ),
            ("add: []", "add takes a non-empty list"),
            ("scale: [{const: 1}]", "invalid length 1"),
            ("const: x", "invalid type"),
            (
                "scaling: {work: {gauge: {metric: w}}, size: 1}",
                "unknown field `size`",
            ),
            (
                "queued_share: {queue: {gauge: {metric: q}}}",
                "missing field `running`",
            ),
            ("dispersion: [1, 2]", "invalid type: sequence"),
            (
                "sum: {div: [{const: 1}, {const: 2}, {const: 3}]}",
                "div takes a list of two expressions, got 3",
            ),
            (
                "gauge: {metric: g, where: {mode: idle, mode: iowait}}",
                "`mode` is written twice",
            ),
            (
                "max:\n  share_below:\n    metric: x\n  below: 0.05\n",
                "`below` belongs to a selector: indented under `share_below`?",
            ),
        ] {
            let err = error_of(yaml);
            assert!(err.contains(says), "{yaml}: {err}");
        }
    }

    /// A signal defined twice in one file would silently keep only the second.
    #[test]
    fn a_signal_written_twice_is_an_error() {
        let text = "name: a\nkind: engine\ndescription: d\ndetect: [x]\nsignals:\n  \
                    queue_depth: {gauge: {metric: a}}\n  queue_depth: {gauge: {metric: b}}\n";
        let err = serde_yaml::from_str::<super::super::AdapterSpec>(text)
            .unwrap_err()
            .to_string();
        assert!(err.contains("`queue_depth` is written twice"), "{err}");
    }

    #[test]
    fn nested_forms_parse_to_their_expression() {
        let text = "first: [{gauge: {metric: a}}, {scale: [{rate: {metric: b}}, 2]}]";
        let selector = |name: &str| {
            serde_yaml::from_str::<SeriesSelector>(&format!("metric: {name}")).unwrap()
        };
        let expected = Expr::First(vec![
            Expr::Gauge(selector("a")),
            Expr::Scale(Box::new(Expr::Rate(selector("b"))), 2.0),
        ]);
        assert_eq!(serde_yaml::from_str::<Expr>(text).unwrap(), expected);
    }
}
