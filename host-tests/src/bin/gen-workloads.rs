//! `gen-workloads OUT_DIR`: writes every benchmark workload of
//! [`oma_host_tests::workloads`] as `OUT_DIR/NAME.json` (about 18 MB in all), for benchmarks that
//! read files, such as OMA on Node in `bench/oma-node/`.
//!
//! ```sh
//! cargo run -p oma-host-tests --bin gen-workloads -- target/workloads
//! ```

use std::path::PathBuf;
use std::process::ExitCode;

use oma_host_tests::workloads::{generate, WORKLOADS};

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1);
    let (Some(out), None) = (args.next(), args.next()) else {
        eprintln!("usage: gen-workloads OUT_DIR");
        return ExitCode::from(2);
    };
    let out = PathBuf::from(out);
    if let Err(err) = std::fs::create_dir_all(&out) {
        eprintln!("gen-workloads: cannot create {}: {err}", out.display());
        return ExitCode::FAILURE;
    }
    for name in WORKLOADS {
        let text = generate(name).expect("every listed workload is generated");
        let path = out.join(format!("{name}.json"));
        if let Err(err) = std::fs::write(&path, &text) {
            eprintln!("gen-workloads: cannot write {}: {err}", path.display());
            return ExitCode::FAILURE;
        }
        println!("{}\t{} bytes", path.display(), text.len());
    }
    ExitCode::SUCCESS
}
