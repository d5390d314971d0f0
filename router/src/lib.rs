//! The `lnet-router` daemon: reads an `lnetctl export` configuration (plus the
//! `lnet-router:` section), refuses what this build cannot do, and runs a node with one
//! socklnd NI per tcp NI, its peers and routes (forwarding when `routing` is enabled) until
//! SIGINT or SIGTERM.
//!
//! * [`plan`]: the file to what is started, every refusal naming its key and line;
//! * [`locate`]: the line of a key path in the YAML text;
//! * [`numa`]: the NUMA distances and nodes of this machine, from sysfs;
//! * [`link`]: the links of the NIs' interfaces, watched so that a link down is advertised;
//! * [`startup`]: the configuration file, the store (`--data-dir`), or both;
//! * [`run`]: the daemon itself;
//! * [`cpts`]: its CPT threads, and how Linux schedules them;
//! * [`api`]: its REST API, with the store's tokens and event log;
//! * [`tcp_ni`], [`o2ib_ni`]: starting a socklnd or o2iblnd NI, at start and at run time;
//! * [`net_control`]: NIs added and deleted on the running daemon (`net add|del`);
//! * [`cli`]: the lnetctl-style subcommands, talking to a daemon over that API;
//! * [`demo`]: a routed topology (two end nodes, two routers) in one process.

pub mod api;
pub mod cli;
pub mod cpts;
pub mod demo;
pub mod describe;
pub mod link;
pub mod locate;
pub mod net_control;
pub mod numa;
pub mod o2ib_ni;
pub mod plan;
pub mod run;
pub mod startup;
pub mod tcp_ni;
