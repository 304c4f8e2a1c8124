//! The shipped rules (catalog, playbooks, adapters), embedded at build time, and `--rules DIR`.
//!
//! A directory given with `--rules` adds files or replaces shipped ones: `DIR/catalog.yaml`
//! replaces the catalog, `DIR/*.yaml` are playbooks (a file named like a shipped playbook replaces
//! it; ids defined again override), and `DIR/signals/*.yaml` are adapters (replacing by name).

use std::path::Path;

use anyhow::{bail, Context, Result};
use llm_doctor_engine::playbook::Source;
use llm_doctor_engine::{Catalog, Playbook};

use crate::signal::adapter::Adapters;

/// A shipped rules file: its path (as shown in errors) and its text, embedded at build time.
macro_rules! embed {
    ($path:literal) => {
        ($path, include_str!(concat!("../", $path)))
    };
}

/// The catalog as shipped.
pub const CATALOG: (&str, &str) = embed!("rules/catalog.yaml");

/// Playbooks as shipped.
pub const PLAYBOOKS: &[(&str, &str)] = &[
    embed!("rules/playbooks/symptoms.yaml"),
    embed!("rules/playbooks/scheduling.yaml"),
    embed!("rules/playbooks/memory.yaml"),
    embed!("rules/playbooks/throughput.yaml"),
    embed!("rules/playbooks/gpu.yaml"),
    embed!("rules/playbooks/remediations.yaml"),
];

/// Adapters as shipped: engines, then GPU, host and container exporters.
pub const ADAPTERS: &[(&str, &str)] = &[
    embed!("rules/signals/vllm.yaml"),
    embed!("rules/signals/sglang.yaml"),
    embed!("rules/signals/tgi.yaml"),
    embed!("rules/signals/triton.yaml"),
    embed!("rules/signals/trtllm_serve.yaml"),
    embed!("rules/signals/llamacpp.yaml"),
    embed!("rules/signals/dcgm.yaml"),
    embed!("rules/signals/node.yaml"),
    embed!("rules/signals/cadvisor.yaml"),
];

/// Everything loaded and validated.
#[derive(Debug)]
pub struct Rules {
    /// Signals and facts.
    pub catalog: Catalog,
    /// The diagnosis graph.
    pub playbook: Playbook,
    /// Engine and exporter adapters.
    pub adapters: Adapters,
}

/// Rule files as (name, text), before parsing.
#[derive(Debug, Clone)]
pub struct RuleFiles {
    /// Catalog file.
    pub catalog: (String, String),
    /// Playbook files.
    pub playbooks: Vec<(String, String)>,
    /// Adapter files.
    pub adapters: Vec<(String, String)>,
}

impl RuleFiles {
    /// The shipped files.
    pub fn shipped() -> RuleFiles {
        let own = |(n, t): &(&str, &str)| (n.to_string(), t.to_string());
        RuleFiles {
            catalog: own(&CATALOG),
            playbooks: PLAYBOOKS.iter().map(own).collect(),
            adapters: ADAPTERS.iter().map(own).collect(),
        }
    }

    /// The shipped files with a directory's files added or replacing them.
    pub fn with_dir(dir: &Path) -> Result<RuleFiles> {
        let mut files = RuleFiles::shipped();
        if !dir.is_dir() {
            bail!(
                "rules directory `{}` does not exist or is not a directory",
                dir.display()
            );
        }
        let catalog = dir.join("catalog.yaml");
        if catalog.is_file() {
            files.catalog = read(&catalog)?;
        }
        for path in yaml_files(dir)? {
            if path.file_name().is_some_and(|n| n == "catalog.yaml") {
                continue;
            }
            let (name, text) = read(&path)?;
            replace_by_file_name(&mut files.playbooks, name, text);
        }
        let signals = dir.join("signals");
        if signals.is_dir() {
            for path in yaml_files(&signals)? {
                let (name, text) = read(&path)?;
                replace_by_file_name(&mut files.adapters, name, text);
            }
        }
        Ok(files)
    }

    /// Parses and validates everything, reporting all problems at once.
    pub fn load(&self) -> Result<Rules> {
        let catalog = Catalog::from_yaml(&self.catalog.1, &self.catalog.0)?;
        let sources: Vec<Source<'_>> = self
            .playbooks
            .iter()
            .map(|(name, text)| Source { name, text })
            .collect();
        let playbook = llm_doctor_engine::load(&sources, &catalog);
        let adapters = Adapters::load(&self.adapters, &catalog);
        match (playbook, adapters) {
            (Ok(playbook), Ok(adapters)) => Ok(Rules {
                catalog,
                playbook,
                adapters,
            }),
            (p, a) => {
                let mut msg = Vec::new();
                if let Err(e) = p {
                    msg.push(e.to_string());
                }
                if let Err(e) = a {
                    msg.extend(e);
                }
                bail!("{}", msg.join("\n"))
            }
        }
    }
}

fn replace_by_file_name(list: &mut Vec<(String, String)>, name: String, text: String) {
    let file = |p: &str| Path::new(p).file_name().map(|f| f.to_owned());
    match list.iter().position(|(n, _)| file(n) == file(&name)) {
        Some(i) => list[i] = (name, text),
        None => list.push((name, text)),
    }
}

fn yaml_files(dir: &Path) -> Result<Vec<std::path::PathBuf>> {
    let mut out: Vec<_> = std::fs::read_dir(dir)
        .with_context(|| format!("reading rules directory `{}`", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
        .collect();
    out.sort();
    Ok(out)
}

fn read(path: &Path) -> Result<(String, String)> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading `{}`", path.display()))?;
    Ok((path.display().to_string(), text))
}

/// Loads the shipped rules, with a directory's additions when given.
pub fn load_rules(dir: Option<&Path>) -> Result<Rules> {
    match dir {
        Some(d) => RuleFiles::with_dir(d)?.load(),
        None => RuleFiles::shipped().load(),
    }
}
