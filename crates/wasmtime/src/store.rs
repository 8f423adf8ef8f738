//! A guest's store under its limits: made with the memory limiter, the call clock and the
//! epoch-deadline callback installed, and its clock restarted before each exported call.

use wasmtime::{CallHook, Engine, Store, UpdateDeadline};

use crate::state::HostState;

/// A store of `engine` (made with epoch interruption) holding `state`, guarded as
/// [`guard_store`] says.
pub(crate) fn guarded_store(engine: &Engine, state: HostState) -> Store<HostState> {
    let mut store = Store::new(engine, state);
    guard_store(&mut store);
    store
}

/// Installs the store's memory limiter, the host-time accounting of its call clock and its
/// epoch-deadline callback, and starts the clock (instantiation is the first call). For stores
/// of an engine made with epoch interruption.
pub(crate) fn guard_store(store: &mut Store<HostState>) {
    store.data_mut().guard_mut().use_epoch_clock();
    store.limiter(|state| state.guard_mut());
    store.call_hook(|mut context, hook| {
        match hook {
            CallHook::CallingHost => context.data_mut().guard_mut().host_call(true),
            CallHook::ReturningFromHost => context.data_mut().guard_mut().host_call(false),
            CallHook::CallingWasm => context.data_mut().guard_mut().wasm_call(true),
            CallHook::ReturningFromWasm => context.data_mut().guard_mut().wasm_call(false),
        }
        Ok(())
    });
    store.epoch_deadline_callback(|mut context| {
        match context.data_mut().guard_mut().deadline_reached() {
            Ok(ticks) => Ok(UpdateDeadline::Continue(ticks)),
            Err(exceeded) => Err(wasmtime::Error::new(exceeded)),
        }
    });
    start_call(store);
}

/// Restarts the store's call clock and sets its epoch deadline: before every exported call of
/// a store made by [`Compiled::store`](crate::Compiled::store), so that each call gets its own
/// deadline.
pub fn start_call(store: &mut Store<HostState>) {
    let ticks = store.data_mut().guard_mut().start_call();
    store.set_epoch_deadline(ticks);
}
