//! Drives the `oma-component` guest through wasmtime, as a Rust host embeds it.
//!
//! One test binary (so the component is loaded once): OMA's guard and media rules with their
//! exact messages (`fixtures/`, the same tables the native unit tests can read), round trips of
//! every kind of block, each artifact's imports and exports against its world in `wit/`
//! (`contract`), `validate-messages` on WIT values, a 16 MiB workload, the harness itself,
//! provider calls through wasi-http against the loopback simulator (`provider`), the gateway
//! served over HTTP in process (`serve`), the recorded-response corpus replayed to every world
//! (`corpus`, `fixtures/corpus/`), the codec's text rules over their shared tables
//! (`text_rules`), and the embedding's trace sinks over the packages' sink tables
//! (`observability_sinks`), its record processors over the processor table through both
//! worlds' codecs (`observability_processors`), its trace store over the store table
//! (`observability_store`), its evaluation framework over the packages' eval tables
//! (`eval_framework`), and its evaluation stores over the store tables (`eval_store`,
//! `eval_file_store`).

mod adapter;
mod agent;
mod bench_tools;
mod common;
mod contract;
mod corpus;
mod driver;
mod eval_agents;
mod eval_file_store;
mod eval_framework;
mod eval_rules;
mod eval_store;
mod guard;
mod hardening;
mod harness;
mod large;
mod media;
mod observability_file_store;
mod observability_processors;
mod observability_sinks;
mod observability_store;
mod parity;
mod provider;
mod roundtrip;
mod routes;
mod secrets;
mod serve;
mod text_rules;
mod wit_validate;
mod worlds;
