//! The dashboard's files (`dashboard/dist`) are embedded in this crate when it compiles:
//! they must have been built first, by `scripts/build-dashboard` (`npm ci && npm run build`
//! in `dashboard/`). This script only checks that they are there, and makes the crate
//! compile again when they change.

use std::path::Path;

fn main() {
    let manifest = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".into());
    let dist = Path::new(&manifest).join("../dashboard/dist");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed={}", dist.display());
    if !dist.join("index.html").is_file() {
        eprintln!(
            "error: the dashboard is not built: {} has no index.html.\n\
             Run scripts/build-dashboard (from the repository root) first: it runs \
             `npm ci && npm run build` in dashboard/ and writes dashboard/dist, which the web \
             crate embeds.",
            dist.display()
        );
        std::process::exit(1);
    }
}
