//! "Did you mean" suggestions for misspelled names, shared by the condition language and the
//! playbook loader.

/// Levenshtein distance between two strings, counted in chars.
pub fn levenshtein(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, ca) in a.chars().enumerate() {
        cur[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let substitute = prev[j] + usize::from(ca != cb);
            cur[j + 1] = substitute.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

/// The best suggestion for a misspelled `name`: the closest candidate within
/// edit distance 2, else the shortest candidate that starts with, contains or
/// is contained in the name (for names of at least 3 chars). Ties go to the
/// alphabetically first candidate, so messages are deterministic.
pub fn did_you_mean<'a>(name: &str, candidates: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    let mut close: Option<(usize, &str)> = None;
    let mut related: Option<(usize, &str)> = None;
    let name_chars = name.chars().count();
    for candidate in candidates {
        if candidate == name {
            continue;
        }
        // The distance is at least the difference in length: a name far longer than every
        // candidate (a megabyte pasted into a condition) costs nothing here.
        if name_chars.abs_diff(candidate.chars().count()) <= 2 {
            let d = levenshtein(name, candidate);
            if d <= 2 && close.is_none_or(|best| (d, candidate) < best) {
                close = Some((d, candidate));
            }
        }
        let contains = name.chars().count() >= 3
            && (candidate.contains(name)
                || (candidate.chars().count() >= 3 && name.contains(candidate)));
        if contains && related.is_none_or(|best| (candidate.len(), candidate) < best) {
            related = Some((candidate.len(), candidate));
        }
    }
    close.or(related).map(|(_, c)| c)
}

/// [`did_you_mean`] as the tail of an error message: `` (did you mean `x`?)``, or empty when
/// no candidate is close.
pub fn hint<'a>(name: &str, candidates: impl Iterator<Item = &'a str>) -> String {
    did_you_mean(name, candidates)
        .map(|s| format!(" (did you mean `{s}`?)"))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hint_is_the_suggestion_as_a_message_tail_or_nothing() {
        let names = ["queue_depth", "kv_cache_usage_ratio"];
        assert_eq!(
            hint("queue_dept", names.iter().copied()),
            " (did you mean `queue_depth`?)"
        );
        assert_eq!(hint("zz", names.iter().copied()), "");
    }

    #[test]
    fn a_huge_name_gets_no_close_match_but_still_a_containing_one() {
        let names = ["queue_depth", "kv_cache_usage_ratio"];
        let huge = "x".repeat(1 << 20);
        assert_eq!(did_you_mean(&huge, names.iter().copied()), None);
        let containing = format!("queue_depth{huge}");
        assert_eq!(
            did_you_mean(&containing, names.iter().copied()),
            Some("queue_depth")
        );
    }

    #[test]
    fn distances() {
        assert_eq!(levenshtein("kitten", "sitting"), 3);
        assert_eq!(levenshtein("", "abc"), 3);
        assert_eq!(levenshtein("queue_dept", "queue_depth"), 1);
    }

    #[test]
    fn suggestions() {
        let names = ["queue_depth", "kv_cache_usage_ratio", "running_requests"];
        assert_eq!(
            did_you_mean("queue_dept", names.iter().copied()),
            Some("queue_depth")
        );
        assert_eq!(
            did_you_mean("kv_cache_usage", names.iter().copied()),
            Some("kv_cache_usage_ratio")
        );
        assert_eq!(did_you_mean("zzz", names.iter().copied()), None);
    }
}
