//! `module-cycles <crate root file>...`: fails naming every cycle between the modules of each
//! crate (see the library's docs for what counts as a dependency).

fn main() -> anyhow::Result<()> {
    let roots: Vec<String> = std::env::args().skip(1).collect();
    anyhow::ensure!(!roots.is_empty(), "usage: module-cycles <src/lib.rs>...");
    let mut failed = vec![];
    for root in &roots {
        match terdut_modules::check(std::path::Path::new(root)) {
            Ok(modules) => println!("module-cycles: {root}: {modules} modules, no cycle"),
            Err(e) => failed.push(format!("{e:#}")),
        }
    }
    anyhow::ensure!(failed.is_empty(), "{}", failed.join("\n"));
    Ok(())
}
