#!/usr/bin/env python3
"""Builds oma_portable.wasm with cargo and copies it into src/oma_component/.

Needs Rust through rustup (the repository's rust-toolchain.toml names the toolchain and the
wasm32-unknown-unknown target; `rustup target add wasm32-unknown-unknown` where rustup does not
add it itself).

    python build_component.py [--profile wasm-release|release]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
TARGET = os.path.join(HERE, "src", "oma_component", "oma_portable.wasm")


def build(profile: str = "wasm-release") -> str:
    if not os.path.exists(os.path.join(REPO, "Cargo.toml")):
        raise SystemExit(f"not inside the oma-component repository ({REPO}); cannot build the component")
    if shutil.which("cargo") is None:
        raise SystemExit(
            "oma_portable.wasm is not built and cargo is not on PATH: building the component from "
            "source needs Rust through rustup (https://rustup.rs); or install the wheel, which carries it"
        )
    out = subprocess.run(
        ["cargo", "run", "-q", "-p", "oma-guest-build", "--", "--profile", profile],
        cwd=REPO, check=True, stdout=subprocess.PIPE, text=True,
    ).stdout
    paths = [line.strip() for line in out.splitlines() if line.strip().endswith("oma_portable.wasm")]
    if not paths:
        raise SystemExit(f"oma-guest-build printed no oma_portable.wasm path:\n{out}")
    tmp = TARGET + ".tmp"
    shutil.copyfile(paths[-1], tmp)
    os.replace(tmp, TARGET)
    return TARGET


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default=os.environ.get("OMA_WASM_PROFILE", "wasm-release"))
    args = parser.parse_args()
    path = build(args.profile)
    print(path, os.path.getsize(path), "bytes", file=sys.stderr)


if __name__ == "__main__":
    main()
