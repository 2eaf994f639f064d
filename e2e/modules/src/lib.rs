//! The module graph of one crate and its cycles (`just lint`; docs/architecture.md
//! "Modules").
//!
//! A module depends on another when it names something in it: a `use`, or a path anywhere in
//! its code: types, expressions, patterns, the tokens of a macro invocation or definition
//! (`format!("{}", crate::x::NAME)`), an attribute's arguments. A path counts whether it starts
//! at `crate`, `super` or `self`, or at a name the module imported (`use crate::write;` then
//! `write::shared::f()` names `write::shared`). Paths are resolved through re-exports
//! (`pub use child::Item` in a `mod.rs` leads to `child`). A module naming its own descendants is composition (a `mod.rs`
//! building on its parts), not a dependency, and is left out; everything else counts. Test code
//! (`#[cfg(test)]`) is left out: tests may reach anywhere.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use syn::visit::Visit;

/// A module's path inside its crate; the root is empty.
pub type ModPath = Vec<String>;

/// How a path was written: its segments (`crate`, `super`, `self` kept) and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Written {
    pub segments: Vec<String>,
    /// The file it was written in, for the report.
    pub file: PathBuf,
}

#[derive(Debug, Default)]
struct Module {
    children: BTreeSet<String>,
    /// Every name a `use` of the module binds and the path it stands for: how a path written
    /// from an imported name resolves, and how one through a re-export does. Visibility is not
    /// looked at: the crate compiles, so every name a path goes through is visible where it is
    /// written (`pub(crate) use`, or a private `use` named by a descendant).
    imports: BTreeMap<String, Vec<String>>,
    /// Every path the module writes.
    paths: Vec<Written>,
}

/// One crate's modules.
#[derive(Debug, Default)]
pub struct Crate {
    modules: BTreeMap<ModPath, Module>,
}

/// A dependency of one module on another, with the first path that makes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Edge {
    pub from: ModPath,
    pub to: ModPath,
    pub because: Written,
}

fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && a.parse_args::<syn::Meta>()
                .is_ok_and(|m| m.path().is_ident("test"))
    })
}

fn path_attr(attrs: &[syn::Attribute]) -> Option<String> {
    attrs.iter().find_map(|a| match &a.meta {
        syn::Meta::NameValue(nv) if nv.path.is_ident("path") => match &nv.value {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) => Some(s.value()),
            _ => None,
        },
        _ => None,
    })
}

/// Expands a `use` tree into full paths; `name` is what the last segment is bound to.
fn expand(tree: &syn::UseTree, prefix: &mut Vec<String>, out: &mut Vec<(Vec<String>, String)>) {
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            expand(&p.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) => {
            let name = n.ident.to_string();
            let mut full = prefix.clone();
            if name != "self" {
                full.push(name.clone());
            }
            let bound = if name == "self" {
                prefix.last().cloned().unwrap_or_default()
            } else {
                name
            };
            out.push((full, bound));
        }
        syn::UseTree::Rename(r) => {
            let mut full = prefix.clone();
            if r.ident != "self" {
                full.push(r.ident.to_string());
            }
            out.push((full, r.rename.to_string()));
        }
        syn::UseTree::Glob(_) => out.push((prefix.clone(), "*".into())),
        syn::UseTree::Group(g) => {
            for t in &g.items {
                expand(t, prefix, out);
            }
        }
    }
}

/// Collects the paths of one module's items (not of inline child modules, which are modules
/// of their own, nor of test code).
struct Paths<'a> {
    file: &'a Path,
    out: Vec<Written>,
    imports: BTreeMap<String, Vec<String>>,
}

impl Paths<'_> {
    fn written(&mut self, segments: Vec<String>) {
        self.out.push(Written {
            segments,
            file: self.file.to_owned(),
        });
    }
}

impl<'ast> Visit<'ast> for Paths<'_> {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        let attrs = match item {
            // A child module: its paths are its own.
            syn::Item::Mod(_) => return,
            syn::Item::Use(u) => &u.attrs,
            syn::Item::Fn(f) => &f.attrs,
            syn::Item::Impl(i) => &i.attrs,
            syn::Item::Struct(s) => &s.attrs,
            syn::Item::Enum(e) => &e.attrs,
            syn::Item::Const(c) => &c.attrs,
            syn::Item::Static(s) => &s.attrs,
            syn::Item::Trait(t) => &t.attrs,
            syn::Item::Type(t) => &t.attrs,
            _ => return syn::visit::visit_item(self, item),
        };
        if is_cfg_test(attrs) {
            return;
        }
        syn::visit::visit_item(self, item);
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        let mut all = vec![];
        expand(&u.tree, &mut vec![], &mut all);
        for (path, bound) in all {
            if bound != "*" && bound != "_" {
                self.imports.insert(bound, path.clone());
            }
            self.written(path);
        }
    }

    // A macro's arguments are tokens, not syntax (`matches!(x, crate::a::B)`,
    // `format!("{}", crate::a::NAME)`): the paths in them are found in the tokens.
    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        for segments in token_paths(m.tokens.clone()) {
            self.written(segments);
        }
        syn::visit::visit_macro(self, m);
    }

    // An attribute's arguments are tokens too (`#[serde(with = "crate::a::codec")]`): its
    // paths, and the string literals among them that are paths.
    fn visit_attribute(&mut self, a: &'ast syn::Attribute) {
        if let syn::Meta::List(list) = &a.meta {
            for segments in token_paths(list.tokens.clone()) {
                self.written(segments);
            }
            for segments in literal_paths(list.tokens.clone()) {
                self.written(segments);
            }
        }
        syn::visit::visit_attribute(self, a);
    }

    // Any path of two segments or more, or from `crate`/`super`/`self`; one segment alone
    // names what a `use` imported, and that `use` is counted already.
    fn visit_path(&mut self, p: &'ast syn::Path) {
        let segments: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
        if p.leading_colon.is_none()
            && (segments.len() > 1 || segments.first().is_some_and(|s| is_anchor(s)))
        {
            self.written(segments);
        }
        syn::visit::visit_path(self, p);
    }
}

fn is_anchor(segment: &str) -> bool {
    ["crate", "super", "self"].contains(&segment)
}

/// Every path of two segments or more written in `tokens` (`crate::a::b`, `super::a`,
/// `shared::f`), at any depth of brackets; which of them name a module of the crate is for
/// [`Crate::resolve`] to say. A path after a leading `::` is another crate's.
fn token_paths(tokens: proc_macro2::TokenStream) -> Vec<Vec<String>> {
    use proc_macro2::TokenTree;
    let trees: Vec<TokenTree> = tokens.into_iter().collect();
    let mut out = vec![];
    let mut i = 0;
    while i < trees.len() {
        match &trees[i] {
            TokenTree::Group(g) => {
                out.extend(token_paths(g.stream()));
                i += 1;
            }
            TokenTree::Punct(a)
                if a.as_char() == ':'
                    && matches!(trees.get(i + 1), Some(TokenTree::Punct(b)) if b.as_char() == ':') =>
            {
                // `::a::b`: skip the whole path.
                i += 2;
                while let Some(TokenTree::Ident(_)) = trees.get(i) {
                    match (trees.get(i + 1), trees.get(i + 2)) {
                        (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b)))
                            if a.as_char() == ':' && b.as_char() == ':' =>
                        {
                            i += 3
                        }
                        _ => {
                            i += 1;
                            break;
                        }
                    }
                }
            }
            TokenTree::Ident(id) => {
                let mut segments = vec![id.to_string()];
                let mut j = i + 1;
                // `::` is two `:` puncts; then the next segment.
                while let (
                    Some(TokenTree::Punct(a)),
                    Some(TokenTree::Punct(b)),
                    Some(TokenTree::Ident(next)),
                ) = (trees.get(j), trees.get(j + 1), trees.get(j + 2))
                {
                    if a.as_char() != ':' || b.as_char() != ':' {
                        break;
                    }
                    segments.push(next.to_string());
                    j += 3;
                }
                if segments.len() > 1 {
                    out.push(segments);
                }
                i = j;
            }
            _ => i += 1,
        }
    }
    out
}

/// Every string literal in `tokens` (at any depth) that is a path of two segments or more:
/// how serde's `with = "crate::a::codec"` and the like name a module.
fn literal_paths(tokens: proc_macro2::TokenStream) -> Vec<Vec<String>> {
    use proc_macro2::TokenTree;
    let mut out = vec![];
    for tree in tokens {
        match tree {
            TokenTree::Group(g) => out.extend(literal_paths(g.stream())),
            TokenTree::Literal(lit) => {
                let Ok(syn::Lit::Str(s)) = syn::parse_str::<syn::Lit>(&lit.to_string()) else {
                    continue;
                };
                let Ok(path) = syn::parse_str::<syn::Path>(&s.value()) else {
                    continue;
                };
                if path.leading_colon.is_none() && path.segments.len() > 1 {
                    out.push(path.segments.iter().map(|s| s.ident.to_string()).collect());
                }
            }
            _ => {}
        }
    }
    out
}

impl Crate {
    /// Reads the crate whose root file is `root` (`src/lib.rs` or `src/main.rs`).
    pub fn load(root: &Path) -> anyhow::Result<Self> {
        let mut krate = Crate::default();
        let dir = root
            .parent()
            .context("root file has a directory")?
            .to_owned();
        krate.load_file(vec![], root, &dir)?;
        Ok(krate)
    }

    /// Builds a crate from in-memory sources by module path (for tests).
    pub fn from_sources(sources: &[(&str, &str)]) -> anyhow::Result<Self> {
        let mut krate = Crate::default();
        for (module, text) in sources {
            let path: ModPath = module
                .split("::")
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect();
            let file = syn::parse_file(text)?;
            krate.add_items(path.clone(), &file.items, Path::new(module), None)?;
        }
        Ok(krate)
    }

    fn load_file(&mut self, module: ModPath, file: &Path, dir: &Path) -> anyhow::Result<()> {
        let text =
            std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
        let parsed =
            syn::parse_file(&text).with_context(|| format!("parsing {}", file.display()))?;
        self.add_items(module, &parsed.items, file, Some(dir))
    }

    /// Adds a module's items; `dir` is where its `mod x;` files live (`None`: in memory).
    fn add_items(
        &mut self,
        module: ModPath,
        items: &[syn::Item],
        file: &Path,
        dir: Option<&Path>,
    ) -> anyhow::Result<()> {
        let mut visitor = Paths {
            file,
            out: vec![],
            imports: BTreeMap::new(),
        };
        for item in items {
            visitor.visit_item(item);
        }
        let entry = self.modules.entry(module.clone()).or_default();
        entry.paths.extend(visitor.out);
        entry.imports.extend(visitor.imports);
        for item in items {
            let syn::Item::Mod(m) = item else { continue };
            if is_cfg_test(&m.attrs) {
                continue;
            }
            let name = m.ident.to_string();
            let mut child = module.clone();
            child.push(name.clone());
            self.modules
                .entry(module.clone())
                .or_default()
                .children
                .insert(name.clone());
            self.modules.entry(child.clone()).or_default();
            match (&m.content, dir) {
                (Some((_, inner)), _) => {
                    let sub = dir.map(|d| d.join(&name));
                    self.add_items(child, inner, file, sub.as_deref())?;
                }
                (None, Some(dir)) => {
                    let (path, sub) = match path_attr(&m.attrs) {
                        Some(p) => (dir.join(p), dir.join(&name)),
                        None => {
                            let flat = dir.join(format!("{name}.rs"));
                            if flat.exists() {
                                (flat, dir.join(&name))
                            } else {
                                (dir.join(&name).join("mod.rs"), dir.join(&name))
                            }
                        }
                    };
                    self.load_file(child, &path, &sub)?;
                }
                (None, None) => {}
            }
        }
        Ok(())
    }

    /// The module `written` (in `from`) names, through re-exports; `None` for another
    /// crate's path.
    pub fn resolve(&self, from: &ModPath, written: &[String]) -> Option<ModPath> {
        self.resolve_depth(from, written, 0)
    }

    fn resolve_depth(&self, from: &ModPath, written: &[String], depth: u8) -> Option<ModPath> {
        if depth > 16 {
            return None;
        }
        let mut cur: ModPath;
        let mut rest = written;
        match rest.first().map(String::as_str) {
            Some("crate") => {
                cur = vec![];
                rest = &rest[1..];
            }
            Some("self") => {
                cur = from.clone();
                rest = &rest[1..];
            }
            Some("super") => {
                cur = from.clone();
                while rest.first().map(String::as_str) == Some("super") {
                    cur.pop();
                    rest = &rest[1..];
                }
            }
            Some(first) if self.has_child(from, first) => cur = from.clone(),
            Some(first) if self.module(from).imports.contains_key(first) => {
                let via = self.module(from).imports[first].clone();
                if via.as_slice() == written {
                    return None;
                }
                let target = self.resolve_depth(from, &via, depth + 1)?;
                return self.walk(target, &rest[1..], depth);
            }
            _ => return None,
        }
        self.walk(cur, rest, depth)
    }

    fn walk(&self, mut cur: ModPath, rest: &[String], depth: u8) -> Option<ModPath> {
        for (i, seg) in rest.iter().enumerate() {
            if self.has_child(&cur, seg) {
                cur.push(seg.clone());
                continue;
            }
            if let Some(via) = self.module(&cur).imports.get(seg) {
                let via = via.clone();
                let target = self.resolve_depth(&cur, &via, depth + 1)?;
                return self.walk(target, &rest[i + 1..], depth + 1);
            }
            break;
        }
        Some(cur)
    }

    fn module(&self, path: &ModPath) -> &Module {
        static EMPTY: std::sync::LazyLock<Module> = std::sync::LazyLock::new(Module::default);
        self.modules.get(path).unwrap_or(&EMPTY)
    }

    fn has_child(&self, module: &ModPath, name: &str) -> bool {
        self.module(module).children.contains(name)
    }

    /// Every dependency between two modules (one edge per pair, with its first cause).
    pub fn edges(&self) -> Vec<Edge> {
        let mut out: BTreeMap<(ModPath, ModPath), Written> = BTreeMap::new();
        for (from, module) in &self.modules {
            for written in &module.paths {
                let Some(to) = self.resolve(from, &written.segments) else {
                    continue;
                };
                // Itself, or its own parts: composition, not a dependency.
                if to.starts_with(from) {
                    continue;
                }
                out.entry((from.clone(), to))
                    .or_insert_with(|| written.clone());
            }
        }
        out.into_iter()
            .map(|((from, to), because)| Edge { from, to, because })
            .collect()
    }

    /// The cycles: each strongly connected set of two or more modules, with the edges inside.
    pub fn cycles(&self) -> Vec<Vec<Edge>> {
        let edges = self.edges();
        let nodes: BTreeSet<ModPath> = self.modules.keys().cloned().collect();
        let mut next: BTreeMap<&ModPath, Vec<&ModPath>> = BTreeMap::new();
        for e in &edges {
            next.entry(&e.from).or_default().push(&e.to);
        }
        let components = tarjan(&nodes, &next);
        components
            .into_iter()
            .filter(|c| c.len() > 1)
            .map(|c| {
                edges
                    .iter()
                    .filter(|e| c.contains(&e.from) && c.contains(&e.to))
                    .cloned()
                    .collect()
            })
            .collect()
    }
}

/// Tarjan's strongly connected components.
fn tarjan<'a>(
    nodes: &'a BTreeSet<ModPath>,
    next: &BTreeMap<&'a ModPath, Vec<&'a ModPath>>,
) -> Vec<BTreeSet<ModPath>> {
    struct State<'a> {
        index: BTreeMap<&'a ModPath, usize>,
        low: BTreeMap<&'a ModPath, usize>,
        stack: Vec<&'a ModPath>,
        on_stack: BTreeSet<&'a ModPath>,
        out: Vec<BTreeSet<ModPath>>,
        counter: usize,
    }
    fn visit<'a>(
        v: &'a ModPath,
        next: &BTreeMap<&'a ModPath, Vec<&'a ModPath>>,
        s: &mut State<'a>,
    ) {
        s.index.insert(v, s.counter);
        s.low.insert(v, s.counter);
        s.counter += 1;
        s.stack.push(v);
        s.on_stack.insert(v);
        for &w in next.get(v).into_iter().flatten() {
            if !s.index.contains_key(w) {
                visit(w, next, s);
                let low = s.low[v].min(s.low[w]);
                s.low.insert(v, low);
            } else if s.on_stack.contains(w) {
                let low = s.low[v].min(s.index[w]);
                s.low.insert(v, low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = BTreeSet::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.insert(w.clone());
                if w == v {
                    break;
                }
            }
            s.out.push(component);
        }
    }
    let mut s = State {
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: vec![],
        on_stack: BTreeSet::new(),
        out: vec![],
        counter: 0,
    };
    for v in nodes {
        if !s.index.contains_key(v) {
            visit(v, next, &mut s);
        }
    }
    s.out
}

/// `crate::a::b` for a module path.
pub fn display(path: &ModPath) -> String {
    if path.is_empty() {
        "crate".into()
    } else {
        format!("crate::{}", path.join("::"))
    }
}

/// Fails with a report naming every cycle of the crate at `root`.
pub fn check(root: &Path) -> anyhow::Result<usize> {
    check_crate(&Crate::load(root)?, root)
}

/// Fails with a report naming every cycle of `krate` (read from `root`).
pub fn check_crate(krate: &Crate, root: &Path) -> anyhow::Result<usize> {
    let cycles = krate.cycles();
    if cycles.is_empty() {
        return Ok(krate.modules.len());
    }
    let mut report = format!("{}: {} module cycle(s)\n", root.display(), cycles.len());
    for cycle in cycles {
        report.push_str("  cycle:\n");
        for e in cycle {
            report.push_str(&format!(
                "    {} -> {} ({}: {})\n",
                display(&e.from),
                display(&e.to),
                e.because.file.display(),
                e.because.segments.join("::")
            ));
        }
    }
    bail!(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(s: &str) -> ModPath {
        s.split("::").map(str::to_owned).collect()
    }

    #[test]
    fn siblings_that_use_each_other_are_a_cycle_and_a_parent_using_its_parts_is_not() {
        let krate = Crate::from_sources(&[
            ("", "pub mod a; pub mod b; pub mod c;"),
            ("a", "use crate::b::Thing; pub struct A;"),
            ("b", "pub struct Thing; fn f() { let _ = crate::a::A; }"),
            (
                "c",
                "pub mod part; pub use part::P; pub struct C; fn g() { part::go(); }",
            ),
            ("c::part", "use super::C; pub struct P; pub fn go() {}"),
        ])
        .unwrap();
        let cycles = krate.cycles();
        assert_eq!(cycles.len(), 1, "{cycles:?}");
        let nodes: BTreeSet<ModPath> = cycles[0].iter().map(|e| e.from.clone()).collect();
        assert_eq!(nodes, BTreeSet::from([m("a"), m("b")]));
    }

    #[test]
    fn paths_resolve_through_reexports_to_the_module_that_defines_them() {
        let krate = Crate::from_sources(&[
            ("", "pub mod tree; pub mod user;"),
            (
                "tree",
                "pub mod parent; pub use parent::{Credentials, Parent};",
            ),
            ("tree::parent", "pub enum Parent {} pub enum Credentials {}"),
            ("user", "use crate::tree::Parent;"),
        ])
        .unwrap();
        assert_eq!(
            krate.resolve(&m("user"), &m("crate::tree::Parent")),
            Some(m("tree::parent"))
        );
        assert_eq!(
            krate.resolve(&m("tree::parent"), &m("super::super::user")),
            Some(m("user"))
        );
        assert_eq!(krate.resolve(&m("user"), &m("kube::Api")), None);
        assert!(krate.cycles().is_empty());
    }

    #[test]
    fn paths_inside_macro_arguments_count() {
        let krate = Crate::from_sources(&[
            ("", "mod a; mod b;"),
            ("a", "pub const N: &str = \"n\"; fn f() { let _ = crate::b::B; }"),
            (
                "b",
                "pub struct B; fn g(x: &str) -> bool { matches!(x, crate::a::N) || { tracing::info!(n = %crate::a::N); true } }",
            ),
        ])
        .unwrap();
        let cycles = krate.cycles();
        assert_eq!(cycles.len(), 1, "{cycles:?}");
    }

    /// The cycle the lint once missed: the driver uses `write::shared`, and `write::shared`
    /// named a constant of the pipeline only inside a `format!`.
    #[test]
    fn a_cycle_made_by_a_path_inside_a_macro_is_reported_with_that_path() {
        let krate = Crate::from_sources(&[
            ("", "pub mod pipeline; pub mod write;"),
            (
                "pipeline",
                "pub const PAUSE: &str = \"p\"; use crate::write::shared::PausedBy; fn f(_: PausedBy) {}",
            ),
            ("write", "pub mod shared;"),
            (
                "write::shared",
                "pub enum PausedBy {} pub fn message() -> String { format!(\"{}=true\", crate::pipeline::PAUSE) }",
            ),
        ])
        .unwrap();
        let cycles = krate.cycles();
        assert_eq!(cycles.len(), 1, "{cycles:?}");
        let back = cycles[0]
            .iter()
            .find(|e| e.from == m("write::shared"))
            .expect("the edge back from write::shared");
        assert_eq!(back.to, m("pipeline"));
        assert_eq!(back.because.segments, m("crate::pipeline::PAUSE"));
        // The check fails and names the path.
        let report = format!(
            "{:#}",
            check_crate(&krate, Path::new("fixture")).unwrap_err()
        );
        assert!(report.contains("crate::pipeline::PAUSE"), "{report}");
    }

    #[test]
    fn paths_from_an_imported_name_count_in_code_macros_and_attributes() {
        // `a` imports the module `write` and names `write::shared` only in an expression,
        // `b` only inside a macro, `c` only in an attribute's string.
        let krate = Crate::from_sources(&[
            ("", "pub mod a; pub mod b; pub mod c; pub mod write;"),
            ("write", "pub mod shared;"),
            (
                "write::shared",
                "pub fn go() {} fn back() { let _ = crate::a::A; let _ = crate::b::B; let _ = crate::c::C; }",
            ),
            ("a", "use crate::write; pub struct A; fn f() { write::shared::go(); }"),
            (
                "b",
                "use crate::write as w; pub struct B; fn f() { tracing::info!(x = ?w::shared::go()); }",
            ),
            (
                "c",
                "use crate::write; #[derive(serde::Serialize)] pub struct C { #[serde(serialize_with = \"write::shared::go\")] x: u8 }",
            ),
        ])
        .unwrap();
        let cycles = krate.cycles();
        assert_eq!(cycles.len(), 1, "{cycles:?}");
        let into: BTreeSet<ModPath> = cycles[0]
            .iter()
            .filter(|e| e.to == m("write::shared"))
            .map(|e| e.from.clone())
            .collect();
        assert_eq!(into, BTreeSet::from([m("a"), m("b"), m("c")]));
        // Another crate's paths, written with or without a leading `::`, name no module.
        let krate = Crate::from_sources(&[
            ("", "pub mod a;"),
            ("a", "fn f() { let _ = ::kube::Api::<u8>::all; tracing::info!(x = %::std::f64::consts::PI); }"),
        ])
        .unwrap();
        assert!(krate.edges().is_empty(), "{:?}", krate.edges());
    }

    #[test]
    fn test_code_is_left_out() {
        let krate = Crate::from_sources(&[
            ("", "pub mod a; pub mod b;"),
            ("a", "use crate::b::B; pub struct A;"),
            (
                "b",
                "pub struct B; #[cfg(test)] mod tests { use crate::a::A; } #[cfg(test)] fn t() { let _ = crate::a::A; }",
            ),
        ])
        .unwrap();
        assert!(krate.cycles().is_empty(), "{:?}", krate.cycles());
    }
}
