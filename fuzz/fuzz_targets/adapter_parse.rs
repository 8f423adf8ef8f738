//! A provider selector byte, then a response body: `parse` and `error_detail` never panic, and
//! the body fed to the adapter's stream decoder never panics either.
#![no_main]

use libfuzzer_sys::fuzz_target;
use oma_component_fuzz::adapter;
use oma_core::adapter::ResponseContext;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, body)) = data.split_first() else {
        return;
    };
    let adapter = adapter(selector);
    let context = ResponseContext {
        model: "m".into(),
        message_count: 0,
    };
    let _ = adapter.parse(&context, body);
    let _ = adapter.error_detail(&[("x-amzn-errortype".into(), "X:y".into())], body);
    let mut decoder = adapter.stream_decoder(&context);
    if decoder.feed(body).is_ok() {
        let _ = decoder.finish();
    }
});
