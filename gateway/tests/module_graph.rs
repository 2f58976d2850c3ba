//! The gateway's modules form a DAG: no module reaches itself through `crate::` paths.
//!
//! A module is a file under `gateway/src/` or a directory there (`filters/`, `stores/`: all
//! its files are one module). Every `crate::<module>` in a file is an edge from its module,
//! wherever it stands (a `use`, a path in code, a doc link), so a re-export cannot hide a
//! cycle and the graph is the one `grep -o 'crate::[a-z_]*'` shows. Names under `crate::`
//! that are not modules of the crate (the re-exports of `lib.rs`: `table`, `retry`, …) are
//! not edges. The crate roots (`lib.rs`, `main.rs`) are not modules.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Graph = BTreeMap<String, BTreeSet<String>>;

/// The module a file under `src/` belongs to: its stem, or its top directory.
fn module_of(rel: &Path) -> Option<String> {
    let mut parts = rel.components().map(|c| c.as_os_str().to_string_lossy());
    let first = parts.next()?;
    if parts.next().is_some() {
        return Some(first.into_owned());
    }
    let stem = first.strip_suffix(".rs")?;
    (stem != "lib" && stem != "main").then(|| stem.to_string())
}

/// The identifiers that follow `crate::` in `text`.
fn crate_refs(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = text;
    while let Some(i) = rest.find("crate::") {
        let before = rest[..i].chars().next_back();
        rest = &rest[i + "crate::".len()..];
        // `mycrate::x` is not `crate::x`.
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let name: String = rest
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_')
            .collect();
        if !name.is_empty() {
            out.insert(name);
        }
    }
    out
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("read src dir") {
        let p = e.expect("dir entry").path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The graph of `files` ((path under src, text)): module → modules it names.
fn graph(files: &[(PathBuf, String)]) -> Graph {
    let modules: BTreeSet<String> = files.iter().filter_map(|(p, _)| module_of(p)).collect();
    let mut g: Graph = modules
        .iter()
        .map(|m| (m.clone(), BTreeSet::new()))
        .collect();
    for (p, text) in files {
        let Some(from) = module_of(p) else { continue };
        for to in crate_refs(text) {
            if to != from && modules.contains(&to) {
                g.get_mut(&from).expect("known module").insert(to);
            }
        }
    }
    g
}

/// A cycle of `g` (its modules in order, the first repeated at the end), if there is one.
fn find_cycle(g: &Graph) -> Option<Vec<String>> {
    fn visit(
        g: &Graph,
        m: &str,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|p| p == m) {
            let mut cycle = path[i..].to_vec();
            cycle.push(m.to_string());
            return Some(cycle);
        }
        if done.contains(m) {
            return None;
        }
        path.push(m.to_string());
        for next in &g[m] {
            if let Some(c) = visit(g, next, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(m.to_string());
        None
    }
    let mut done = BTreeSet::new();
    g.keys()
        .find_map(|m| visit(g, m, &mut Vec::new(), &mut done))
}

#[test]
fn finds_edges_and_cycles() {
    let files = |list: &[(&str, &str)]| -> Vec<(PathBuf, String)> {
        list.iter()
            .map(|(p, t)| (PathBuf::from(p), t.to_string()))
            .collect()
    };
    // Directory modules, re-exports, self-references and lookalike paths.
    let g = graph(&files(&[
        ("lib.rs", "pub mod a; pub use crate::b::X;"),
        (
            "a.rs",
            "use crate::b::X; // see [`crate::filters::x`]\nuse crate::table::T;",
        ),
        (
            "b.rs",
            "use crate::b::Y; use mycrate::a::Z; use crate::Config;",
        ),
        ("filters/mod.rs", "use crate::filters::testing;"),
        ("filters/x.rs", "use crate::b;"),
    ]));
    let edges: Vec<(&str, Vec<&str>)> = g
        .iter()
        .map(|(k, v)| (k.as_str(), v.iter().map(String::as_str).collect()))
        .collect();
    assert_eq!(
        edges,
        vec![
            ("a", vec!["b", "filters"]),
            ("b", vec![]),
            ("filters", vec!["b"])
        ]
    );
    assert_eq!(find_cycle(&g), None);
    let g = graph(&files(&[
        ("a.rs", "crate::b::f()"),
        ("b.rs", "crate::c::f()"),
        ("c.rs", "/// [`crate::a`]"),
        ("d.rs", "crate::a::f()"),
    ]));
    assert_eq!(
        find_cycle(&g),
        Some(vec!["a".into(), "b".into(), "c".into(), "a".into()])
    );
}

#[test]
fn the_gateway_modules_form_a_dag() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut paths = Vec::new();
    rust_files(&src, &mut paths);
    let files: Vec<(PathBuf, String)> = paths
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).expect("read source");
            (p.strip_prefix(&src).expect("under src").to_path_buf(), text)
        })
        .collect();
    let g = graph(&files);
    assert!(g.len() > 10, "modules found: {:?}", g.keys());
    if let Some(cycle) = find_cycle(&g) {
        let edges: Vec<String> = g
            .iter()
            .map(|(m, to)| {
                format!(
                    "  {m} -> {}",
                    to.iter().cloned().collect::<Vec<_>>().join(" ")
                )
            })
            .collect();
        panic!(
            "import cycle among the gateway's modules: {}\nthe graph:\n{}",
            cycle.join(" -> "),
            edges.join("\n")
        );
    }
}
