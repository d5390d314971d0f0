//! What the daemon runs at start-up: the configuration file, the store, or both.
//!
//! * File only: the file, checked ([`crate::plan`]).
//! * Store only (`--data-dir` without `--config`): the configuration the store holds, as
//!   the admin left it (imported files and every change made since through the API).
//! * Both: the file is checked, then imported into the store, replacing its configured
//!   state, when its content differs from the last file imported there (the SHA-256 of that
//!   file is kept beside the store); otherwise the store's state is kept, so that a restart
//!   with the same file does not undo changes made through the API. The node then runs
//!   from the store. The file's `lnet-router:` section always applies, and is written to
//!   the store whenever it differs from the one kept there, so that a later start from
//!   the store alone listens and checks as this one does.
//!
//! A tokens file (`--tokens-file`, lines `NAME ROLE SECRET`, `#` comments) is imported
//! into the store's API tokens: a token of the same name is replaced.

use std::path::{Path, PathBuf};

use lnet::config::{self, Config};
use sha2::{Digest, Sha256};
use store::{Store, StoreError};

use crate::plan::{plan, Interfaces, Plan, PlanError};

/// The store's directory inside the data dir.
pub const STORE_DIR: &str = "store";
/// The digest of the last configuration file imported, inside the data dir.
pub const IMPORTED_DIGEST: &str = "imported-config.sha256";

/// Why the daemon cannot start from what it was given.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartupError {
    /// The configuration file is refused.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// The store cannot be opened or written.
    #[error("store {path}: {source}")]
    Store {
        /// The store's directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: StoreError,
    },
    /// A file next to the store cannot be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Neither a configuration file nor a data dir was given.
    #[error("nothing to run: give --config FILE, --data-dir DIR, or both")]
    Nothing,
    /// A line of the tokens file is wrong.
    #[error("{path}: {source}")]
    Tokens {
        /// The file.
        path: PathBuf,
        /// The line, from 1.
        line: usize,
        /// What is wrong.
        #[source]
        source: store::TokensFileError,
    },
    /// The store refused a token of the tokens file.
    #[error("{path}: line {line}: {source}")]
    TokenRefused {
        /// The file.
        path: PathBuf,
        /// The line, from 1.
        line: usize,
        /// Why.
        #[source]
        source: StoreError,
    },
}

/// What start-up decided.
#[derive(Debug)]
pub struct Startup {
    /// What the node runs.
    pub plan: Plan,
    /// The store, when a data dir was given.
    pub store: Option<Store>,
    /// Whether the file was imported into the store now.
    pub imported: bool,
}

fn store_err(path: &Path) -> impl FnOnce(StoreError) -> StartupError + '_ {
    move |source| StartupError::Store {
        path: path.to_owned(),
        source,
    }
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> StartupError + '_ {
    move |source| StartupError::Io {
        path: path.to_owned(),
        source,
    }
}

/// Decides what to run from the file at `config_path` and the store in `data_dir`.
pub fn startup(
    config_path: Option<&str>,
    data_dir: Option<&Path>,
    ifs: &dyn Interfaces,
) -> Result<Startup, StartupError> {
    let file = match config_path {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|source| PlanError::Read {
                path: path.to_owned(),
                source,
            })?;
            // Every check, with lines, on the file as written.
            let p = plan(path, &text, ifs)?;
            let parsed = config::parse(&text).map_err(|source| PlanError::Parse {
                path: path.to_owned(),
                source,
            })?;
            Some((p, parsed, text))
        }
        None => None,
    };
    let Some(dir) = data_dir else {
        let (p, _, _) = file.ok_or(StartupError::Nothing)?;
        return Ok(Startup {
            plan: p,
            store: None,
            imported: false,
        });
    };
    std::fs::create_dir_all(dir).map_err(io_err(dir))?;
    let store_path = dir.join(STORE_DIR);
    let store = Store::open(&store_path).map_err(store_err(&store_path))?;
    let digest_path = dir.join(IMPORTED_DIGEST);
    let mut imported = false;
    if let Some((_, parsed, text)) = &file {
        let digest = hex::encode(Sha256::digest(text.as_bytes()));
        let last = std::fs::read_to_string(&digest_path).unwrap_or_default();
        if last.trim() != digest {
            let to_store: &Config = parsed;
            store.import(to_store).map_err(store_err(&store_path))?;
            // Written after the import is durable: a crash in between imports the same
            // file again, which gives the same state.
            std::fs::write(&digest_path, format!("{digest}\n")).map_err(io_err(&digest_path))?;
            imported = true;
        } else if store.router_section().map_err(store_err(&store_path))? != parsed.router {
            // The same file as last time, into a store that does not hold its section
            // (one written before the store kept it).
            store
                .set_router_section(parsed.router.as_ref())
                .map_err(store_err(&store_path))?;
        }
    }
    let running = store.export().map_err(store_err(&store_path))?;
    let label = store_path.display().to_string();
    let p = plan(&label, &running.to_yaml(), ifs)?;
    Ok(Startup {
        plan: p,
        store: Some(store),
        imported,
    })
}

/// Imports the tokens of a tokens file into the store ([`store::parse_tokens_file`]):
/// the whole file is checked first, so a bad line imports nothing.
pub fn import_tokens(store: &Store, path: &Path) -> Result<usize, StartupError> {
    let text = std::fs::read_to_string(path).map_err(io_err(path))?;
    let lines = store::parse_tokens_file(&text).map_err(|e| StartupError::Tokens {
        path: path.to_owned(),
        line: e.line(),
        source: e,
    })?;
    for t in &lines {
        let _ = store.revoke_token(&t.name);
        store
            .create_token(&t.name, t.role, &t.secret)
            .map_err(|source| StartupError::TokenRefused {
                path: path.to_owned(),
                line: t.line,
                source,
            })?;
    }
    Ok(lines.len())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;
    use std::net::Ipv4Addr;

    struct NoIfs;

    impl Interfaces for NoIfs {
        fn ipv4(&self, _: &str) -> Option<Ipv4Addr> {
            None
        }
    }

    const FILE_A: &str =
        "net:\n    - net type: tcp\n      local NI(s):\n        - nid: 127.0.40.1@tcp\n\
                          route:\n    - net: tcp9\n      gateway: 127.0.40.2@tcp\n      hop: 1\n\
                          lnet-router:\n    acceptor_port: 7988\n";

    fn write(dir: &Path, name: &str, text: &str) -> String {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p.display().to_string()
    }

    #[test]
    fn a_file_given_at_start_imports_into_the_store_and_the_store_alone_runs_it_again() {
        let tmp = tempfile::tempdir().unwrap();
        let data = tmp.path().join("data");
        let file = write(tmp.path(), "a.yaml", FILE_A);
        let s = startup(Some(&file), Some(&data), &NoIfs).unwrap();
        assert!(s.imported);
        assert_eq!(s.plan.routes.len(), 1);
        assert_eq!(
            s.plan.nis[0].peer_port, 7988,
            "the file's lnet-router section applies"
        );
        drop(s);
        // Restart from the store alone: the same nets, routes and lnet-router section.
        let s = startup(None, Some(&data), &NoIfs).unwrap();
        assert!(!s.imported);
        assert_eq!(s.plan.routes.len(), 1);
        assert_eq!(s.plan.nis[0].nid, "127.0.40.1@tcp".parse().unwrap());
        assert_eq!(
            s.plan.nis[0].peer_port, 7988,
            "the stored lnet-router section applies"
        );
        // A change made since (through the API) survives a restart with the same file.
        let store = s.store.unwrap();
        store
            .delete_route("tcp9".parse().unwrap(), &"127.0.40.2@tcp".parse().unwrap())
            .unwrap();
        drop(store);
        let s = startup(Some(&file), Some(&data), &NoIfs).unwrap();
        assert!(!s.imported);
        assert!(s.plan.routes.is_empty());
        drop(s);
        // An edited file is imported again and replaces the configured state.
        let file = write(tmp.path(), "a.yaml", &FILE_A.replace("tcp9", "tcp8"));
        let s = startup(Some(&file), Some(&data), &NoIfs).unwrap();
        assert!(s.imported);
        assert_eq!(s.plan.routes[0].net, "tcp8".parse().unwrap());
    }

    const FILE_EVERY_SETTING: &str =
        "net:\n    - net type: tcp\n      local NI(s):\n        - nid: 127.0.40.1@tcp\n\
         lnet-router:\n    acceptor_address: 127.0.40.1\n    acceptor_port: 21988\n\
         \x20   alive_router_check_interval: 30\n    router_ping_timeout: 7\n\
         \x20   avoid_asym_router_failure: 0\n    check_routers_before_use: 1\n\
         \x20   net_check: passive\n    net_probe_interval_ms: 4000\n\
         \x20   net_down_after_ms: 9000\n";

    #[test]
    fn every_lnet_router_setting_comes_back_from_the_store_alone() {
        let tmp = tempfile::tempdir().unwrap();
        let data = tmp.path().join("data");
        let file = write(tmp.path(), "a.yaml", FILE_EVERY_SETTING);
        let from_file = startup(Some(&file), Some(&data), &NoIfs).unwrap();
        let section = from_file.store.as_ref().unwrap().router_section().unwrap();
        let parsed = config::parse(FILE_EVERY_SETTING).unwrap();
        assert_eq!(section, parsed.router);
        let file_plan = format!("{:?}", from_file.plan);
        drop(from_file);
        let alone = startup(None, Some(&data), &NoIfs).unwrap();
        assert_eq!(alone.plan.nis[0].peer_port, 21988);
        // The whole plan (acceptor, router checker, net check) is the file's.
        assert_eq!(format!("{:?}", alone.plan), file_plan);
    }

    #[test]
    fn a_store_without_the_section_takes_it_from_the_same_file_given_again() {
        let tmp = tempfile::tempdir().unwrap();
        let data = tmp.path().join("data");
        let file = write(tmp.path(), "a.yaml", FILE_A);
        drop(startup(Some(&file), Some(&data), &NoIfs).unwrap());
        // As a store written before the section was kept.
        let store = Store::open(data.join(STORE_DIR)).unwrap();
        store.set_router_section(None).unwrap();
        drop(store);
        let s = startup(Some(&file), Some(&data), &NoIfs).unwrap();
        assert!(!s.imported);
        assert_eq!(s.plan.nis[0].peer_port, 7988);
        drop(s);
        let s = startup(None, Some(&data), &NoIfs).unwrap();
        assert_eq!(s.plan.nis[0].peer_port, 7988);
    }

    #[test]
    fn a_bad_file_is_refused_before_the_store_is_touched() {
        let tmp = tempfile::tempdir().unwrap();
        let data = tmp.path().join("data");
        let file = write(
            tmp.path(),
            "bad.yaml",
            "net:\n    - net type: tcp\n      bogus: 1\n",
        );
        let e = startup(Some(&file), Some(&data), &NoIfs).unwrap_err();
        assert!(e.to_string().contains("bogus"), "{e}");
        assert!(!data.join(STORE_DIR).exists());
        assert!(matches!(
            startup(None, None, &NoIfs),
            Err(StartupError::Nothing)
        ));
    }

    #[test]
    fn tokens_files_are_imported_hashed_and_bad_lines_named() {
        let tmp = tempfile::tempdir().unwrap();
        let store = Store::open(tmp.path().join("s")).unwrap();
        let ok = write(
            tmp.path(),
            "tokens",
            "# name role secret\nops admin 0123456789abcdef0123\nview reader fedcba9876543210fedc\n",
        );
        assert_eq!(import_tokens(&store, Path::new(&ok)).unwrap(), 2);
        let who = store.verify_token("0123456789abcdef0123").unwrap().unwrap();
        assert_eq!(who.name, "ops");
        let bad = write(tmp.path(), "bad", "ops root 0123456789abcdef0123\n");
        let e = import_tokens(&store, Path::new(&bad))
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 1") && e.contains("root"), "{e}");
    }
}
