//! The README's usage block and the commands' `--help` name the same flags: a flag the README
//! shows exists, and a flag a command takes is documented in the README.

use std::collections::BTreeMap;

use crate::support::{outcome, root, run};

/// The `## Using it` block: command (first words) -> the flags its lines show.
fn usage_flags() -> BTreeMap<String, Vec<String>> {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let start = readme.find("## Using it").expect("a Using it section");
    let block = &readme[start..];
    let block = &block[block.find("```bash").unwrap() + 7..];
    let block = &block[..block.find("```").unwrap()];
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut current = String::new();
    for line in block.lines() {
        let code = line.split("  #").next().unwrap_or("");
        if let Some(rest) = code.trim_start().strip_prefix("llm-doctor ") {
            let words: Vec<&str> = rest.split_whitespace().collect();
            current = match words.first() {
                Some(&"rules") => format!("rules {}", words.get(1).unwrap_or(&"")),
                Some(w) => w.to_string(),
                None => continue,
            };
        }
        for flag in code
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
            .filter(|w| w.starts_with("--") && w.len() > 2)
        {
            out.entry(current.clone())
                .or_default()
                .push(flag.to_string());
        }
    }
    out
}

fn help(command: &str) -> String {
    let mut args: Vec<&str> = command.split(' ').collect();
    args.push("--help");
    let (code, out, err) = outcome(&run(&args));
    assert_eq!(code, 0, "{command} --help: {err}");
    out
}

#[test]
fn every_flag_the_readme_shows_exists() {
    let usage = usage_flags();
    assert!(usage.len() >= 8, "{usage:?}");
    for (command, flags) in usage {
        let text = help(&command);
        for f in flags {
            assert!(
                text.contains(&format!("{f} "))
                    || text.contains(&format!("{f}\n"))
                    || text.contains(&format!("{f}=")),
                "README shows `llm-doctor {command} {f}`, which its --help does not know"
            );
        }
    }
}

#[test]
fn every_flag_of_the_main_commands_is_in_the_readme() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let mut missing = Vec::new();
    for command in ["diagnose", "postmortem", "diff", "record", "serve", "eval"] {
        let text = help(command);
        for flag in text
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
            .filter(|w| w.starts_with("--") && w.len() > 2)
        {
            if flag == "--help" || flag == "--version" {
                continue;
            }
            if !readme.contains(flag) {
                missing.push(format!("{command} {flag}"));
            }
        }
    }
    missing.dedup();
    assert!(
        missing.is_empty(),
        "not documented in the README: {missing:?}"
    );
}

#[test]
fn completions_cover_every_subcommand_and_load_in_bash() {
    let (code, script, err) = outcome(&run(&["completions", "bash"]));
    assert_eq!(code, 0, "{err}");
    for sub in [
        "diagnose",
        "postmortem",
        "diff",
        "record",
        "serve",
        "rules",
        "eval",
        "signals",
    ] {
        assert!(script.contains(sub), "{sub} missing");
    }
    // The script is valid bash: sourcing it defines the completion function.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("llm-doctor.bash");
    std::fs::write(&path, &script).unwrap();
    let out = std::process::Command::new("bash")
        .arg("-c")
        .arg(format!(
            "source {} && complete -p llm-doctor",
            path.display()
        ))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (code, _, err) = outcome(&run(&["completions", "tcsh"]));
    assert_eq!(code, 2, "{err}");
}

/// Every repository path the documents and scripts name (in backticks) exists: a newcomer
/// following them never meets a file that is not in the repository. Generated paths under
/// `target/` are left out; code paths may be given relative to `src/` or `engine/src/`.
#[test]
fn the_documents_name_only_files_that_exist() {
    let root = root();
    let mut docs: Vec<std::path::PathBuf> = [
        "README.md",
        "ARCHITECTURE.md",
        "BENCHMARKS.md",
        "ACCURACY.md",
        "corpus/README.md",
        "tests/data/postmortem/README.md",
    ]
    .iter()
    .map(|d| root.join(d))
    .collect();
    docs.extend(
        std::fs::read_dir(root.join("scripts"))
            .unwrap()
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "sh")),
    );
    let exts = [
        "md", "yaml", "yml", "py", "sh", "rs", "json", "om", "gz", "png",
    ];
    let mut missing = Vec::new();
    for doc in docs {
        let text = std::fs::read_to_string(&doc).unwrap();
        for quoted in text.split('`').skip(1).step_by(2) {
            let path_like = quoted.contains('/')
                && !quoted.starts_with('/')
                && !quoted.starts_with("target/")
                && quoted
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "_./-".contains(c))
                && exts.iter().any(|e| quoted.ends_with(&format!(".{e}")));
            if !path_like {
                continue;
            }
            let here = doc.parent().unwrap();
            let found = [
                root.clone(),
                here.to_path_buf(),
                root.join("src"),
                root.join("engine/src"),
            ]
            .iter()
            .any(|base| base.join(quoted).exists());
            if !found {
                missing.push(format!("{}: `{quoted}`", doc.display()));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "named but not in the repository: {missing:#?}"
    );
}
