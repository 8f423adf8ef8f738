//! A provider selector byte, then a response body: `parse` and `error_detail` never panic, and
//! the body fed to the adapter's stream decoder never panics either.
#![no_main]

use libfuzzer_sys::fuzz_target;
use oma_component_fuzz::adapter;
use oma_core::adapter::ChatRequest;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, body)) = data.split_first() else {
        return;
    };
    let adapter = adapter(selector);
    let request = ChatRequest {
        model: "m".into(),
        ..ChatRequest::default()
    };
    let _ = adapter.parse(&request, body);
    let _ = adapter.error_detail(&[("x-amzn-errortype".into(), "X:y".into())], body);
    let mut decoder = adapter.stream_decoder(&request);
    if decoder.feed(body).is_ok() {
        let _ = decoder.finish();
    }
});
