//! The agent runtime (see `docs/agent.md`): `run`, `stream`, `prompt` and history, `beforeRun`
//! merging, external backends, tool loops, budgets, `run-agent` progress and evaluation, and
//! failures as results; every case against both worlds.
//!
//! The provider is the in-process `CaptureOutbound` hook answering Anthropic (or OpenAI) JSON
//! from a script, so every request the component sent can be read back; the host imports are a
//! `ScriptedHost`, whose log shows everything the component handed over. In the `component`
//! world the guest reaches them through wasi:http and its `host` imports; in the `portable`
//! world the harness steps a `driver` session and performs each step with the same two.

/// The `component` world: the guest does its own I/O.
mod component {
    use crate::worlds::World;
    const WORLD: World = World::Component;
    mod cases {
        include!("agent_cases.rs");
    }
    mod context_cases {
        include!("context_cases.rs");
    }
    mod structured_cases {
        include!("structured_cases.rs");
    }
    mod observability_cases {
        include!("observability_cases.rs");
    }
    mod observability_runs {
        include!("observability_runs.rs");
    }
}

/// The `portable` world: the harness drives a session.
mod driver {
    use crate::worlds::World;
    const WORLD: World = World::Driver;
    mod cases {
        include!("agent_cases.rs");
    }
    mod context_cases {
        include!("context_cases.rs");
    }
    mod structured_cases {
        include!("structured_cases.rs");
    }
    mod observability_cases {
        include!("observability_cases.rs");
    }
    mod observability_runs {
        include!("observability_runs.rs");
    }
}
