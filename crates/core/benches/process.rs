//! What reading only the parts of a trace record that the sensitive-data rule reads saves over
//! reading the whole record into a `serde_json::Value` and writing it back.
//!
//! On the ten records of one run (`fixtures/observability/records.json`), natively, with OMA's
//! default options:
//!
//! - `full`: the record parsed into a [`Value`], [`SensitiveData::process`], the value written
//!   back: every record before;
//! - `text`: [`process_record_json`], the codec's `process-trace-record` (the options read,
//!   then only the record's type, name, attributes and a span end's status and error; every
//!   other member copied as its text).
//!
//! `cargo bench -p oma-core --bench process` (criterion options after `--`). Results:
//! docs/performance.md, "Sensitive-data processing through the codec".

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use oma_core::agent::observability::capture::{process_record_json, SensitiveData};
use oma_core::json::from_str;
use serde_json::Value;

fn process(c: &mut Criterion) {
    let records: Value =
        serde_json::from_str(include_str!("../../../fixtures/observability/records.json"))
            .expect("the records");
    let texts: Vec<String> = records["records"]
        .as_object()
        .expect("records")
        .values()
        .map(Value::to_string)
        .collect();
    let full = |text: &str| {
        let processor = SensitiveData::from_value(from_str("{}").expect("JSON")).expect("options");
        processor
            .process(from_str(text).expect("JSON"))
            .map(|record| record.to_string())
    };
    for text in &texts {
        let read = process_record_json("{}", Some(text)).expect("a record");
        assert_eq!(read, full(text), "{text}");
    }
    let mut group = c.benchmark_group("process");
    group.bench_function("full", |b| {
        b.iter(|| {
            for text in &texts {
                black_box(full(black_box(text)));
            }
        })
    });
    group.bench_function("text", |b| {
        b.iter(|| {
            for text in &texts {
                black_box(process_record_json("{}", Some(black_box(text))).expect("a record"));
            }
        })
    });
    group.finish();
}

criterion_group!(benches, process);
criterion_main!(benches);
