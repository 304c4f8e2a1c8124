//! Facts from a serve command line: `VLLM_TRACE_FUNCTION=1 vllm serve MODEL --max-num-seqs 4`.
//!
//! Which flags mean what is adapter data (`command_line` in `rules/signals/<engine>.yaml`); this
//! module only splits words the way a shell would and walks them: `--flag value`, `--flag=value`,
//! boolean switches with `--no-` twins, and environment assignments before the command.

use crate::signal::adapter::{AdapterSpec, Adapters};

/// Facts read from a command line, as text to be typed by the catalog.
#[derive(Debug, Clone, PartialEq)]
pub struct CommandLineFacts {
    /// The engine whose command matched.
    pub engine: String,
    /// (fact, value as text), in command-line order; later ones win.
    pub facts: Vec<(String, String)>,
}

/// A command line that does not read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CommandLineError {
    /// A quote opened and never closed.
    #[error("unterminated {0} quote in command line")]
    Unterminated(&'static str),
    /// A `\` with nothing after it.
    #[error("command line ends with a lone `\\`")]
    LoneBackslash,
    /// A flag that takes a value, last on the line.
    #[error("flag `{0}` needs a value")]
    NoValue(String),
    /// No command llm-doctor knows; `known` lists those it does.
    #[error("no serving command found in `{text}` (known: {known})")]
    NoCommand {
        /// The command line, trimmed.
        text: String,
        /// The known commands, quoted and joined.
        known: String,
    },
}

/// Splits a command line into words like a POSIX shell: single and double quotes, backslash
/// escapes, line continuations, and comments (`#` starting a word runs to the end of its line,
/// as in a pasted script or Dockerfile).
pub fn split_words(s: &str) -> Result<Vec<String>, CommandLineError> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('\n') => {}
                Some(n) => {
                    cur.push(n);
                    in_word = true;
                }
                None => return Err(CommandLineError::LoneBackslash),
            },
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(n) => cur.push(n),
                        None => return Err(CommandLineError::Unterminated("single")),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(n @ ('"' | '\\' | '$' | '`')) => cur.push(n),
                            Some('\n') => {}
                            Some(n) => {
                                cur.push('\\');
                                cur.push(n);
                            }
                            None => return Err(CommandLineError::Unterminated("double")),
                        },
                        Some(n) => cur.push(n),
                        None => return Err(CommandLineError::Unterminated("double")),
                    }
                }
            }
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            '#' if !in_word => {
                for n in chars.by_ref() {
                    if n == '\n' {
                        break;
                    }
                }
            }
            c => {
                cur.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    Ok(words)
}

fn is_env_assignment(w: &str) -> Option<(&str, &str)> {
    let (k, v) = w.split_once('=')?;
    let mut cs = k.chars();
    let first = cs.next()?;
    ((first.is_ascii_alphabetic() || first == '_')
        && cs.all(|c| c.is_ascii_alphanumeric() || c == '_'))
    .then_some((k, v))
}

/// Finds the engine whose command appears in `words`; returns it and the index after the command.
fn find_engine<'a>(words: &[String], adapters: &'a Adapters) -> Option<(&'a AdapterSpec, usize)> {
    for a in adapters.engines() {
        let Some(cl) = &a.command_line else { continue };
        for cmd in &cl.commands {
            let parts: Vec<&str> = cmd.split_whitespace().collect();
            for i in 0..words.len() {
                let fits = parts.iter().enumerate().all(|(j, p)| {
                    words.get(i + j).is_some_and(|w| {
                        // The first word may be a path (`/usr/bin/vllm`), a module may follow `-m`.
                        w == p || (j == 0 && w.ends_with(&format!("/{p}")))
                    })
                });
                if fits {
                    return Some((a, i + parts.len()));
                }
            }
        }
    }
    None
}

/// Reads facts from a Triton model configuration (`config.pbtxt`, protobuf text format): the
/// numeric fields and `parameters` string values the adapter's `model_config` names. Nested
/// blocks (`dynamic_batching { max_queue_delay_microseconds: 100 }`) are found wherever they are.
fn parse_model_config(text: &str, adapter: &AdapterSpec) -> Option<CommandLineFacts> {
    let spec = adapter.model_config.as_ref()?;
    let mut facts = Vec::new();
    for (field, target) in &spec.fields {
        let pattern = format!(
            r"(?m)^\s*{}\s*:\s*([0-9][0-9.eE+-]*)",
            regex_lite::escape(field)
        );
        let re = regex_lite::Regex::new(&pattern).expect("field names are plain identifiers");
        if let Some(v) = re.captures(text).and_then(|c| c[1].parse::<f64>().ok()) {
            // Rounded so 200000 µs reads as 0.2 s, not 0.19999999999999998.
            let value = (v * target.scale * 1e9).round() / 1e9;
            facts.push((target.fact.clone(), value.to_string()));
        }
    }
    let param = regex_lite::Regex::new(
        r#"key\s*:\s*"([^"]+)"\s*,?\s*value\s*:?\s*\{\s*string_value\s*:\s*"([^"]*)""#,
    )
    .expect("a fixed pattern");
    for c in param.captures_iter(text) {
        if let Some(fact) = spec.parameters.get(&c[1]) {
            // Unfilled template placeholders (`${batch_scheduler_policy}`) say nothing.
            if !c[2].starts_with("${") && !c[2].is_empty() {
                facts.push((fact.clone(), c[2].to_ascii_lowercase()));
            }
        }
    }
    Some(CommandLineFacts {
        engine: adapter.engine_name().to_string(),
        facts,
    })
}

/// Whether `text` looks like a Triton model configuration rather than a command line.
fn looks_like_model_config(text: &str) -> bool {
    text.contains("max_batch_size") || text.contains("backend:") || text.contains("platform:")
}

/// Reads facts from a serve command line, or from a Triton model configuration. Unknown flags
/// are skipped; an unrecognised command is an error naming the commands llm-doctor knows.
// Long on purpose: one pass over the command's words (environment settings, the command, its
// model, flags with values, switches and their `--no-` twins) with one cursor.
pub fn parse(
    text: &str,
    adapters: &Adapters,
    catalog: &llm_doctor_engine::Catalog,
) -> Result<CommandLineFacts, CommandLineError> {
    if looks_like_model_config(text) {
        if let Some(f) = adapters.engines().find_map(|a| parse_model_config(text, a)) {
            return Ok(f);
        }
    }
    let words = split_words(text)?;
    let Some((adapter, after)) = find_engine(&words, adapters) else {
        let known: Vec<String> = adapters
            .engines()
            .filter_map(|a| a.command_line.as_ref())
            .flat_map(|c| c.commands.iter().map(|x| format!("`{x}`")))
            .collect();
        return Err(CommandLineError::NoCommand {
            text: text.trim().to_string(),
            known: known.join(", "),
        });
    };
    let cl = adapter
        .command_line
        .as_ref()
        .expect("find_engine only returns adapters with a command line");
    let mut facts = Vec::new();

    for w in &words {
        match is_env_assignment(w) {
            Some((k, v)) => {
                if let Some(f) = cl.env.get(k) {
                    facts.push((f.clone(), v.to_string()));
                }
            }
            None if w == "env" => {}
            None => break,
        }
    }

    let is_bool = |fact: &str| {
        catalog
            .fact(fact)
            .is_some_and(|i| catalog.facts()[i].ty == llm_doctor_engine::catalog::FactType::Bool)
    };
    let mut i = after;
    let mut model: Option<String> = None;
    while i < words.len() {
        let w = &words[i];
        i += 1;
        if !w.starts_with('-') {
            if model.is_none() && i - 1 == after {
                model = Some(w.clone());
            }
            continue;
        }
        let (flag, inline) = match w.split_once('=') {
            Some((f, v)) => (f, Some(v.to_string())),
            None => (w.as_str(), None),
        };
        if cl.model_flags.iter().any(|m| m == flag) {
            model = inline.or_else(|| {
                i += 1;
                words.get(i - 1).cloned()
            });
            continue;
        }
        if let Some(f) = cl.inverted.get(flag) {
            facts.push((f.clone(), "false".into()));
            continue;
        }
        if let Some(f) = cl.presence.get(flag) {
            facts.push((f.clone(), "true".into()));
            if inline.is_none() && words.get(i).is_some_and(|n| !n.starts_with('-')) {
                i += 1;
            }
            continue;
        }
        let (fact, negated) = match cl.flags.get(flag) {
            Some(f) => (Some(f), false),
            None => match flag.strip_prefix("--no-") {
                Some(rest) => (cl.flags.get(&format!("--{rest}")), true),
                None => (None, false),
            },
        };
        let Some(fact) = fact else {
            // Unknown flag: skip its value if it has one.
            if inline.is_none() && words.get(i).is_some_and(|n| !n.starts_with('-')) {
                i += 1;
            }
            continue;
        };
        if is_bool(fact) {
            let value = match inline {
                Some(v) => v,
                None => match words.get(i).map(|n| n.to_ascii_lowercase()) {
                    Some(n) if n == "true" || n == "false" => {
                        i += 1;
                        n
                    }
                    _ => "true".into(),
                },
            };
            let value = if negated {
                if value == "true" {
                    "false".into()
                } else {
                    "true".into()
                }
            } else {
                value
            };
            facts.push((fact.clone(), value));
        } else {
            let value = match inline {
                Some(v) => v,
                None => {
                    i += 1;
                    words
                        .get(i - 1)
                        .cloned()
                        .ok_or_else(|| CommandLineError::NoValue(flag.to_string()))?
                }
            };
            facts.push((fact.clone(), value));
        }
    }
    if let Some(m) = model {
        facts.insert(0, ("model".into(), m));
    }
    Ok(CommandLineFacts {
        engine: adapter.engine_name().to_string(),
        facts,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_like_a_shell() {
        assert_eq!(
            split_words("A=1 vllm serve 'my model' --x=\"a b\" \\\n --y c\\ d").unwrap(),
            vec!["A=1", "vllm", "serve", "my model", "--x=a b", "--y", "c d"]
        );
        assert!(split_words("vllm 'oops").is_err());
        assert!(split_words("vllm \"oops").is_err());
        assert!(split_words("vllm oops\\").is_err());
        assert_eq!(split_words("  ").unwrap(), Vec::<String>::new());
        // A comment ends at its line, quotes in it included; `#` inside a word is the word's.
        assert_eq!(
            split_words("vllm serve m \\\n  --x 1 # the model's cap\n--y a#b").unwrap(),
            vec!["vllm", "serve", "m", "--x", "1", "--y", "a#b"]
        );
    }

    #[test]
    fn env_assignments() {
        assert_eq!(
            is_env_assignment("VLLM_TRACE_FUNCTION=1"),
            Some(("VLLM_TRACE_FUNCTION", "1"))
        );
        assert_eq!(is_env_assignment("--x=1"), None);
        assert_eq!(is_env_assignment("1A=1"), None);
    }
}
