//! The layout's one rule, kept true by a test: imports run one way. No two files or folders of
//! `src/` or `engine/src/` that sit side by side may name each other, directly or round a loop
//! (see ARCHITECTURE.md). The test reads each file's `crate::`, `super::` and `self::` paths
//! (and, in a file with child modules, paths through those children), follows `pub use`
//! re-exports to where an item is defined, and looks for a cycle among the children of every
//! folder, the folder's own `mod.rs` (or `lib.rs`) counting as one of them. A `pub use` in a
//! `mod.rs` is the folder's face, not a use, so it draws no arrow; nor does test code
//! (`#[cfg(test)]` modules), which may call a folder through its front door.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type ModPath = Vec<String>;

#[test]
fn no_import_cycle_in_src() {
    assert_acyclic("src");
}

#[test]
fn no_import_cycle_in_engine() {
    assert_acyclic("engine/src");
}

/// The top-level modules of `src/`, top first: a module names only those in lower layers (the
/// data runs down: inputs are gathered, prepared, judged, rendered; entry points sit on top).
const SRC_LAYERS: &[&[&str]] = &[
    &["cli", "fuzzing"],
    &["serve", "score", "export"],
    &["verdict"],
    &["report"],
    &["postmortem"],
    &["traffic"],
    &["source", "pipeline"],
    &["prepared"],
    &["target", "rules", "parallel", "http", "log"],
    &["signal"],
    &["time"],
];

#[test]
fn imports_in_src_run_down_the_layers() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let found = upward(&graphs(&root), SRC_LAYERS);
    assert!(
        found.is_empty(),
        "imports against the data's direction (see ARCHITECTURE.md, `SRC_LAYERS`):\n  {}",
        found.join("\n  ")
    );
}

#[test]
fn an_upward_import_and_a_serde_path_are_found() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("lib.rs"), "pub mod low;\npub mod high;\n").unwrap();
    std::fs::write(dir.path().join("high.rs"), "pub struct H;\n").unwrap();
    // A serde attribute names a function by a path in a string: an arrow all the same.
    std::fs::write(
        dir.path().join("low.rs"),
        "#[derive(serde::Deserialize)]\npub struct L {\n    #[serde(\n        deserialize_with = \"crate::high::read\"\n    )]\n    x: u8,\n}\n",
    )
    .unwrap();
    let layers: &[&[&str]] = &[&["high"], &["low"]];
    assert_eq!(upward(&graphs(dir.path()), layers), ["low -> high"]);
    std::fs::write(dir.path().join("low.rs"), "pub struct L;\n").unwrap();
    assert!(upward(&graphs(dir.path()), layers).is_empty());
}

/// Arrows among the crate root's modules that point to the same layer or a higher one, as
/// `from -> to`; a module no layer names is reported too, so a new one gets its place.
fn upward(graphs: &Graphs, layers: &[&[&str]]) -> Vec<String> {
    let layer = |m: &str| layers.iter().position(|l| l.contains(&m));
    let mut found = Vec::new();
    for (from, tos) in graphs.get(&Vec::new()).into_iter().flatten() {
        let from = from.join("::");
        for to in tos {
            let to = to.join("::");
            match (layer(&from), layer(&to)) {
                (Some(a), Some(b)) if a < b => {}
                (Some(_), Some(_)) => found.push(format!("{from} -> {to}")),
                (None, _) => found.push(format!("{from} is in no layer")),
                (_, None) => found.push(format!("{to} is in no layer")),
            }
        }
    }
    found.dedup();
    found
}

/// The paths serde attributes name in strings (`deserialize_with = "super::x::f"`): `crate`,
/// `super` or `self` paths only, made absolute from `module`.
fn serde_paths(module: &ModPath, text: &str) -> Vec<ModPath> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("#[serde(") {
        rest = &rest[at + 8..];
        let end = rest.find(")]").unwrap_or(rest.len());
        let attr = &rest[..end];
        for key in ["with", "deserialize_with", "serialize_with", "default"] {
            let mut a = attr;
            while let Some(k) = a.find(key) {
                a = &a[k + key.len()..];
                let v = a.trim_start();
                let Some(v) = v.strip_prefix('=') else {
                    continue;
                };
                let Some(v) = v.trim_start().strip_prefix('"') else {
                    continue;
                };
                let Some(close) = v.find('"') else { break };
                let path: ModPath = v[..close].split("::").map(str::to_string).collect();
                if matches!(path[0].as_str(), "crate" | "super" | "self") {
                    out.push(absolute(module, &path));
                }
            }
        }
        rest = &rest[end..];
    }
    out
}

/// A public type's name says which one: no two public types of `src/` share a name, so no
/// module sees two `Selector`s or two `Plan`s side by side.
#[test]
fn public_type_names_in_src_are_unique() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    collect_files(&root, &root, &mut files);
    let mut seen: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (module, text) in &files {
        let t = tokens(&strip(text));
        for i in 0..t.len() {
            let public = t[i] == "pub" || (t[i] == ")" && i > 3 && t[i - 3] == "pub");
            let kind = t.get(i + 1).map(String::as_str);
            if public && matches!(kind, Some("struct" | "enum" | "type" | "trait")) {
                if let Some(name) = t.get(i + 2) {
                    seen.entry(name.clone())
                        .or_default()
                        .push(module.join("::"));
                }
            }
        }
    }
    let twice: Vec<String> = seen
        .into_iter()
        .filter(|(_, m)| m.len() > 1)
        .map(|(n, m)| format!("{n} in {}", m.join(", ")))
        .collect();
    assert!(
        twice.is_empty(),
        "public types named alike:\n  {}",
        twice.join("\n  ")
    );
}

#[test]
fn a_cycle_is_found_and_printed() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("lib.rs"), "pub mod a;\npub mod b;\n").unwrap();
    std::fs::write(dir.path().join("a.rs"), "use crate::b::B;\npub struct A;\n").unwrap();
    std::fs::write(
        dir.path().join("b.rs"),
        "// crate::a in a comment is not a use\npub struct B;\nfn f() -> crate::a::A { crate::a::A }\n",
    )
    .unwrap();
    assert_eq!(cycles(dir.path()), ["in crate root: [a -> b -> a]"]);
    // Comments, strings and test code draw no arrow.
    std::fs::write(
        dir.path().join("b.rs"),
        "pub struct B; // crate::a::A\nconst S: &str = \"crate::a::A\";\n#[cfg(test)]\nmod tests {\n    use crate::a::A;\n}\n",
    )
    .unwrap();
    assert!(cycles(dir.path()).is_empty());
}

fn assert_acyclic(root: &str) {
    let found = cycles(&Path::new(env!("CARGO_MANIFEST_DIR")).join(root));
    assert!(
        found.is_empty(),
        "import cycles in {root}/ (imports must run one way; see ARCHITECTURE.md):\n  {}",
        found.join("\n  ")
    );
}

/// One file's module and the paths it names.
struct File {
    module: ModPath,
    /// (absolute path named, whether it is a `pub use` of a `mod.rs`-like file).
    paths: Vec<(ModPath, bool)>,
}

/// Arrows between siblings, per folder (the folder's own file is named by its module): which
/// child of a folder names which other child.
type Graphs = BTreeMap<ModPath, BTreeMap<ModPath, BTreeSet<ModPath>>>;

/// Every cycle among siblings under `root` (a crate's `src/`), as `in <folder>: [a -> b -> a]`.
fn cycles(root: &Path) -> Vec<String> {
    let graphs = graphs(root);
    let mut found = BTreeSet::new();
    for (folder, graph) in &graphs {
        let name = |m: &ModPath| {
            if m.len() == folder.len() {
                "mod".to_string()
            } else {
                m[folder.len()].clone()
            }
        };
        for cycle in find_cycles(graph) {
            let names: Vec<String> = cycle.iter().map(name).collect();
            let place = if folder.is_empty() {
                "crate root".to_string()
            } else {
                folder.join("::")
            };
            found.insert(format!("in {place}: [{}]", names.join(" -> ")));
        }
    }
    found.into_iter().collect()
}

/// The arrows among the children of every folder under `root`.
fn graphs(root: &Path) -> Graphs {
    let mut sources = Vec::new();
    collect_files(root, root, &mut sources);
    let modules: BTreeSet<ModPath> = sources.iter().map(|(m, _)| m.clone()).collect();
    // Tests may call a folder's front door; only the code that builds draws arrows.
    let tests: Vec<ModPath> = sources
        .iter()
        .flat_map(|(m, text)| test_children(m, &strip(text)))
        .collect();
    let files: Vec<File> = sources
        .iter()
        .filter(|(m, _)| !tests.iter().any(|t| m.starts_with(t)))
        .map(|(module, text)| File {
            module: module.clone(),
            paths: named_paths(module, &modules, &strip(text))
                .into_iter()
                .chain(serde_paths(module, text).into_iter().map(|p| (p, false)))
                .collect(),
        })
        .collect();
    let mut reexports = BTreeMap::new();
    for f in &files {
        for (p, is_pub) in &f.paths {
            if *is_pub {
                if let Some(name) = p.last() {
                    reexports.insert((f.module.clone(), name.clone()), p.clone());
                }
            }
        }
    }
    let mut graphs = Graphs::new();
    for f in &files {
        for (p, is_pub) in &f.paths {
            if *is_pub {
                continue;
            }
            let to = resolve(p, &modules, &reexports, 0);
            let common = f.module.iter().zip(&to).take_while(|(a, b)| a == b).count();
            let folder: ModPath = f.module[..common].to_vec();
            let node = |m: &ModPath| m[..m.len().min(common + 1)].to_vec();
            let (a, b) = (node(&f.module), node(&to));
            if a != b {
                graphs
                    .entry(folder)
                    .or_default()
                    .entry(a)
                    .or_default()
                    .insert(b);
            }
        }
    }
    graphs
}

/// The files under `dir` with their module paths; `main.rs` is its own crate and left out.
fn collect_files(root: &Path, dir: &Path, out: &mut Vec<(ModPath, String)>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            collect_files(root, &path, out);
            continue;
        }
        if path.extension().is_none_or(|e| e != "rs") || (dir == root && path.ends_with("main.rs"))
        {
            continue;
        }
        let rel = path.strip_prefix(root).unwrap().with_extension("");
        let mut module: ModPath = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        if matches!(module.last().map(String::as_str), Some("mod" | "lib")) {
            module.pop();
        }
        out.push((module, std::fs::read_to_string(&path).unwrap()));
    }
}

/// Where a named path leads: the deepest module in it, through `pub use` re-exports.
fn resolve(
    path: &ModPath,
    modules: &BTreeSet<ModPath>,
    reexports: &BTreeMap<(ModPath, String), ModPath>,
    depth: usize,
) -> ModPath {
    let len = (0..=path.len())
        .rev()
        .find(|&n| modules.contains(&path[..n]))
        .unwrap_or(0);
    let module = path[..len].to_vec();
    match path.get(len) {
        Some(item) if depth < 8 => match reexports.get(&(module.clone(), item.clone())) {
            Some(target) if target != path => resolve(target, modules, reexports, depth + 1),
            _ => module,
        },
        _ => module,
    }
}

/// The source with comments and the insides of string and char literals blanked.
fn strip(src: &str) -> String {
    let b: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(b.len());
    let mut i = 0;
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < b.len() && b[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == '/' && b.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if b[i] == '*' && b.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
        } else if c == 'r'
            && (i == 0 || !ident(b[i - 1]) || b[i - 1] == 'b')
            && matches!(next, Some('"' | '#'))
        {
            let hashes = b[i + 1..].iter().take_while(|&&h| h == '#').count();
            if b.get(i + 1 + hashes) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            i += hashes + 2;
            while i < b.len() {
                if b[i] == '"'
                    && b[i + 1..]
                        .iter()
                        .take(hashes)
                        .filter(|&&h| h == '#')
                        .count()
                        == hashes
                {
                    i += 1 + hashes;
                    break;
                }
                i += 1;
            }
            out.push_str("\"\"");
        } else if c == '"' {
            i += 1;
            while i < b.len() && b[i] != '"' {
                i += if b[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else if c == '\'' && (next == Some('\\') || b.get(i + 2) == Some(&'\'')) {
            i += 1;
            while i < b.len() && b[i] != '\'' {
                i += if b[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("' '");
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

fn tokens(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_alphabetic() || c == '_' {
            let mut word = c.to_string();
            while let Some(&n) = chars.peek().filter(|n| n.is_alphanumeric() || **n == '_') {
                word.push(n);
                chars.next();
            }
            out.push(word);
        } else if c == ':' && chars.peek() == Some(&':') {
            chars.next();
            out.push("::".to_string());
        } else if !c.is_whitespace() {
            out.push(c.to_string());
        }
    }
    out
}

/// A path tree after `use` or in code: `a::b`, `a::{b, c::d}`, `a::*`, `a as b`.
fn tree(t: &[String], i: &mut usize) -> Vec<ModPath> {
    match t.get(*i).map(String::as_str) {
        Some("{") => {
            *i += 1;
            let mut all = Vec::new();
            while *i < t.len() && t[*i] != "}" {
                if t[*i] == "," {
                    *i += 1;
                    continue;
                }
                let before = *i;
                all.extend(tree(t, i));
                if *i == before {
                    *i += 1;
                }
            }
            *i += 1;
            all
        }
        Some("*") => {
            *i += 1;
            vec![Vec::new()]
        }
        Some(w) if w.starts_with(|c: char| c.is_alphabetic() || c == '_') => {
            let seg = w.to_string();
            *i += 1;
            if t.get(*i).map(String::as_str) == Some("::") {
                *i += 1;
                return tree(t, i)
                    .into_iter()
                    .map(|rest| std::iter::once(seg.clone()).chain(rest).collect())
                    .collect();
            }
            if t.get(*i).map(String::as_str) == Some("as") {
                *i += 2;
            }
            vec![vec![seg]]
        }
        _ => Vec::new(),
    }
}

/// Whether the item at `t[i]` carries `#[cfg(test)]` (or a `cfg` that names `test`).
fn under_cfg_test(t: &[String], i: usize) -> bool {
    let mut end = i;
    while end > 0 && t[end - 1] == "]" {
        let Some(open) = t[..end].iter().rposition(|w| w == "#") else {
            return false;
        };
        let attr = &t[open..end];
        if attr.get(2).is_some_and(|w| w == "cfg") && attr.iter().any(|w| w == "test") {
            return true;
        }
        end = open;
    }
    false
}

/// The modules declared `#[cfg(test)] mod name;` in a file: test code, drawn no arrows.
fn test_children(module: &ModPath, text: &str) -> Vec<ModPath> {
    let t = tokens(text);
    (0..t.len())
        .filter(|&i| t[i] == "mod" && t.get(i + 2).is_some_and(|w| w == ";"))
        .filter(|&i| under_cfg_test(&t, i))
        .map(|i| module.iter().cloned().chain([t[i + 1].clone()]).collect())
        .collect()
}

/// The absolute paths that the file of `module` names, each marked when it is a `pub use`.
fn named_paths(module: &ModPath, modules: &BTreeSet<ModPath>, text: &str) -> Vec<(ModPath, bool)> {
    let t = tokens(text);
    let child = |name: &str| {
        let mut m = module.clone();
        m.push(name.to_string());
        modules.contains(&m)
    };
    let mut out = Vec::new();
    // Inline modules (`mod tests { .. }`) and the brace depth each opened at.
    let mut inline: Vec<(String, usize, bool)> = Vec::new();
    let mut depth = 0;
    let mut i = 0;
    while i < t.len() {
        let w = t[i].as_str();
        match w {
            "{" => depth += 1,
            "}" => {
                depth -= 1;
                if inline.last().is_some_and(|(_, d, _)| *d == depth) {
                    inline.pop();
                }
            }
            "mod" if t.get(i + 2).map(String::as_str) == Some("{") => {
                inline.push((t[i + 1].clone(), depth, under_cfg_test(&t, i)));
            }
            _ => {}
        }
        let after_sep = i > 0 && t[i - 1] == "::";
        let is_use = w == "use";
        let starts_path = !after_sep
            && t.get(i + 1).map(String::as_str) == Some("::")
            && (matches!(w, "crate" | "super" | "self") || (inline.is_empty() && child(w)));
        if (!is_use && !starts_path) || inline.iter().any(|(_, _, test)| *test) {
            i += 1;
            continue;
        }
        let is_pub = is_use && i > 0 && (t[i - 1] == "pub" || t[i - 1] == ")");
        if is_use {
            i += 1;
        }
        let here: ModPath = module
            .iter()
            .cloned()
            .chain(inline.iter().map(|(n, _, _)| n.clone()))
            .collect();
        for p in tree(&t, &mut i) {
            let first = p.first().map(String::as_str);
            if !(matches!(first, Some("crate" | "super" | "self"))
                || (inline.is_empty() && first.is_some_and(child)))
            {
                continue;
            }
            out.push((absolute(&here, &p), is_pub));
        }
    }
    out
}

fn absolute(here: &ModPath, path: &ModPath) -> ModPath {
    let mut abs = here.clone();
    for (n, seg) in path.iter().enumerate() {
        match seg.as_str() {
            "crate" if n == 0 => abs.clear(),
            "super" => {
                abs.pop();
            }
            "self" => {}
            _ => abs.push(seg.clone()),
        }
    }
    abs
}

/// Each elementary cycle that a depth-first walk closes, from its smallest node.
fn find_cycles(graph: &BTreeMap<ModPath, BTreeSet<ModPath>>) -> BTreeSet<Vec<ModPath>> {
    fn walk(
        node: &ModPath,
        graph: &BTreeMap<ModPath, BTreeSet<ModPath>>,
        stack: &mut Vec<ModPath>,
        done: &mut BTreeSet<ModPath>,
        found: &mut BTreeSet<Vec<ModPath>>,
    ) {
        if let Some(at) = stack.iter().position(|n| n == node) {
            let mut cycle = stack[at..].to_vec();
            let min = (0..cycle.len()).min_by_key(|&k| &cycle[k]).unwrap();
            cycle.rotate_left(min);
            cycle.push(cycle[0].clone());
            found.insert(cycle);
            return;
        }
        if done.contains(node) {
            return;
        }
        stack.push(node.clone());
        for next in graph.get(node).into_iter().flatten() {
            walk(next, graph, stack, done, found);
        }
        stack.pop();
        done.insert(node.clone());
    }
    let mut found = BTreeSet::new();
    let mut done = BTreeSet::new();
    for node in graph.keys() {
        walk(node, graph, &mut Vec::new(), &mut done, &mut found);
    }
    found
}
