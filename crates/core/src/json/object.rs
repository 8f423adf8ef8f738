//! Reading a JSON object field by field, by hand instead of through `serde`'s derived
//! deserialisers.
//!
//! A derived `Deserialize` is generic code instantiated once per type (a field visitor, a map
//! visitor, a sequence visitor JSON objects never use, one seed per field type): those of the
//! agent configuration, the gateway's requests and three providers' responses weighed 77 KB of
//! the portable guest. Everything this crate reads (configurations, gateway requests, provider
//! responses) is parsed once into a [`Value`] instead, by the one `Value` deserialiser the
//! message reader needs anyway, and taken apart here with a handful of non-generic getters.
//!
//! The getters take fields out by move (a string is never copied) and treat a `null` like a
//! missing field, as `serde` does for `Option`. A field of the wrong type is an error that names
//! the field by its path (`call.maxRetries`), which `serde`'s messages do not. A strict object
//! ([`Object::strict`]) is one whose shape allows no other fields: it remembers the keys asked
//! for, and [`Object::finish`] refuses any other, listing those. A lenient one ([`Object::new`],
//! for provider responses) remembers nothing and allocates nothing beyond its path.

use std::fmt;

use serde_json::{Map, Value};

use crate::json::type_word;

/// Why a JSON value does not have the expected shape: a message naming the field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShapeError(String);

impl fmt::Display for ShapeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ShapeError {}

/// One JSON object being taken apart.
#[derive(Debug)]
pub struct Object {
    map: Map<String, Value>,
    /// Where the object sits (`""` at the top, `call`, `candidates[0]`), for messages.
    path: String,
    /// For a strict object, the keys asked for so far, listed when an unknown one is refused.
    asked: Option<Vec<&'static str>>,
}

impl Object {
    /// The lenient object at the top of a document (other fields are ignored); an error unless
    /// `value` is an object.
    pub fn new(value: Value) -> Result<Self, ShapeError> {
        Self::at(value, String::new())
    }

    /// The strict object at the top of a document: [`finish`](Self::finish) refuses the fields
    /// not asked for. Its objects are strict too.
    pub fn strict(value: Value) -> Result<Self, ShapeError> {
        let mut object = Self::new(value)?;
        object.asked = Some(Vec::new());
        Ok(object)
    }

    /// The lenient object at `path`, for messages about its fields.
    pub fn at(value: Value, path: String) -> Result<Self, ShapeError> {
        match value {
            Value::Object(map) => Ok(Object {
                map,
                path,
                asked: None,
            }),
            other => Err(ShapeError(if path.is_empty() {
                format!("expected an object, got {}", describe(&other))
            } else {
                format!("`{path}` must be an object, got {}", describe(&other))
            })),
        }
    }

    /// The path of one of this object's fields.
    pub fn path_of(&self, key: &str) -> String {
        if self.path.is_empty() {
            key.to_owned()
        } else {
            format!("{}.{key}", self.path)
        }
    }

    /// An error about one of this object's fields: "`path.key` {what}".
    pub fn invalid(&self, key: &str, what: &str) -> ShapeError {
        ShapeError(format!("`{}` {what}", self.path_of(key)))
    }

    fn wrong(&self, key: &str, expected: &str, got: &Value) -> ShapeError {
        ShapeError(format!(
            "`{}` must be {expected}, got {}",
            self.path_of(key),
            describe(got)
        ))
    }

    /// An object field of this one, as strict as this one.
    fn child(&self, value: Value, path: String) -> Result<Object, ShapeError> {
        let mut child = Object::at(value, path)?;
        if self.asked.is_some() {
            child.asked = Some(Vec::new());
        }
        Ok(child)
    }

    /// The field's value as it is, `null` included; the key counts as asked for.
    fn raw(&mut self, key: &'static str) -> Option<Value> {
        if let Some(asked) = &mut self.asked {
            asked.push(key);
        }
        self.map.remove(key)
    }

    /// The error for a field that is required and missing: "missing field `path.key`".
    pub fn missing(&self, key: &str) -> ShapeError {
        ShapeError(format!("missing field `{}`", self.path_of(key)))
    }

    /// The field's value, or `None` when it is missing or `null`.
    pub fn take(&mut self, key: &'static str) -> Option<Value> {
        self.raw(key).filter(|value| !value.is_null())
    }

    /// The field's value; an error when it is missing or `null`.
    pub fn required(&mut self, key: &'static str) -> Result<Value, ShapeError> {
        self.take(key).ok_or_else(|| self.missing(key))
    }

    /// The field's value, `null` included (for a field whose `null` means something to the
    /// reader); an error when it is missing.
    pub fn required_or_null(&mut self, key: &'static str) -> Result<Value, ShapeError> {
        self.raw(key).ok_or_else(|| self.missing(key))
    }

    /// A string field.
    pub fn string(&mut self, key: &'static str) -> Result<Option<String>, ShapeError> {
        match self.take(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(other) => Err(self.wrong(key, "a string", &other)),
        }
    }

    /// A string field that must be there.
    pub fn required_string(&mut self, key: &'static str) -> Result<String, ShapeError> {
        match self.required(key)? {
            Value::String(s) => Ok(s),
            other => Err(self.wrong(key, "a string", &other)),
        }
    }

    /// A string field that may be `null`, told apart from a missing one: `None` when missing,
    /// `Some(None)` when `null`.
    pub fn nullable_string(
        &mut self,
        key: &'static str,
    ) -> Result<Option<Option<String>>, ShapeError> {
        match self.raw(key) {
            None => Ok(None),
            Some(Value::Null) => Ok(Some(None)),
            Some(Value::String(s)) => Ok(Some(Some(s))),
            Some(other) => Err(self.wrong(key, "a string or null", &other)),
        }
    }

    /// A boolean field.
    pub fn bool(&mut self, key: &'static str) -> Result<Option<bool>, ShapeError> {
        match self.take(key) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(b)),
            Some(other) => Err(self.wrong(key, "a boolean", &other)),
        }
    }

    /// A number field, any JSON number.
    pub fn f64(&mut self, key: &'static str) -> Result<Option<f64>, ShapeError> {
        match self.take(key) {
            None => Ok(None),
            Some(value) => value
                .as_f64()
                .map(Some)
                .ok_or_else(|| self.wrong(key, "a number", &value)),
        }
    }

    /// An integer field (a JSON number without a fraction or exponent) in `i64`'s range.
    pub fn i64(&mut self, key: &'static str) -> Result<Option<i64>, ShapeError> {
        match self.take(key) {
            None => Ok(None),
            Some(value) => value
                .as_i64()
                .map(Some)
                .ok_or_else(|| self.wrong(key, "an integer", &value)),
        }
    }

    /// A non-negative integer field in `u64`'s range.
    pub fn u64(&mut self, key: &'static str) -> Result<Option<u64>, ShapeError> {
        match self.take(key) {
            None => Ok(None),
            Some(value) => value
                .as_u64()
                .map(Some)
                .ok_or_else(|| self.wrong(key, "a non-negative integer", &value)),
        }
    }

    /// A non-negative integer field in `u32`'s range.
    pub fn u32(&mut self, key: &'static str) -> Result<Option<u32>, ShapeError> {
        match self.take(key) {
            None => Ok(None),
            Some(value) => value
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .map(Some)
                .ok_or_else(|| self.wrong(key, "a non-negative integer below 4294967296", &value)),
        }
    }

    /// An object field, to be read the same way.
    pub fn object(&mut self, key: &'static str) -> Result<Option<Object>, ShapeError> {
        match self.take(key) {
            None => Ok(None),
            Some(value) => self.child(value, self.path_of(key)).map(Some),
        }
    }

    /// An array field.
    pub fn array(&mut self, key: &'static str) -> Result<Option<Vec<Value>>, ShapeError> {
        match self.take(key) {
            None => Ok(None),
            Some(Value::Array(items)) => Ok(Some(items)),
            Some(other) => Err(self.wrong(key, "an array", &other)),
        }
    }

    /// An array field of objects (missing or `null`: none), each to be read the same way.
    pub fn objects(&mut self, key: &'static str) -> Result<Vec<Object>, ShapeError> {
        let Some(items) = self.array(key)? else {
            return Ok(Vec::new());
        };
        let path = self.path_of(key);
        items
            .into_iter()
            .enumerate()
            .map(|(i, item)| self.child(item, format!("{path}[{i}]")))
            .collect()
    }

    /// The fields not taken out yet.
    pub fn into_map(self) -> Map<String, Value> {
        self.map
    }

    /// Refuses a field that was not asked for: for shapes that allow no others. Call it after
    /// every field has been read; on a lenient object it lists no expected keys.
    pub fn finish(self) -> Result<(), ShapeError> {
        let Some(key) = self.map.keys().next() else {
            return Ok(());
        };
        let mut expected = String::new();
        for (i, known) in self.asked.iter().flatten().enumerate() {
            if i > 0 {
                expected.push_str(", ");
            }
            expected.push('`');
            expected.push_str(known);
            expected.push('`');
        }
        let path = self.path_of(key);
        Err(ShapeError(if expected.is_empty() {
            format!("unknown field `{path}`")
        } else {
            format!("unknown field `{path}`, expected one of {expected}")
        }))
    }
}

/// A value as a message shows it: a number or boolean itself, anything else by its type.
fn describe(value: &Value) -> String {
    match value {
        Value::Number(n) => format!("number {n}"),
        Value::Bool(b) => format!("boolean {b}"),
        other => type_word(Some(other)).to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn object(value: Value) -> Object {
        Object::strict(value).expect("an object")
    }

    #[test]
    fn fields_come_out_typed_and_null_is_missing() {
        let mut o = object(json!({
            "s": "x", "b": true, "f": 1.5, "i": -3, "u": 7, "n": null, "m": null,
            "o": {"k": 1}, "a": [1], "objs": [{"k": 2}]
        }));
        assert_eq!(o.string("s").unwrap().as_deref(), Some("x"));
        assert_eq!(o.bool("b").unwrap(), Some(true));
        assert_eq!(o.f64("f").unwrap(), Some(1.5));
        assert_eq!(o.i64("i").unwrap(), Some(-3));
        assert_eq!(o.u32("u").unwrap(), Some(7));
        assert_eq!(o.string("n").unwrap(), None);
        assert!(o.required_or_null("n").is_err(), "taken already");
        assert_eq!(o.required_or_null("m").unwrap(), Value::Null);
        assert_eq!(o.u64("absent").unwrap(), None);
        let mut inner = o.object("o").unwrap().expect("present");
        assert_eq!(inner.u64("k").unwrap(), Some(1));
        inner.finish().expect("all read");
        assert_eq!(o.array("a").unwrap(), Some(vec![json!(1)]));
        let mut objs = o.objects("objs").unwrap();
        assert_eq!(objs[0].u64("k").unwrap(), Some(2));
        o.finish().expect("all read");
    }

    #[test]
    fn integers_are_checked_against_their_range() {
        let mut o = object(json!({"a": 4294967296u64, "b": -1, "c": 2.0, "d": 4294967295u64}));
        let error = o.u32("a").unwrap_err().to_string();
        assert_eq!(
            error,
            "`a` must be a non-negative integer below 4294967296, got number 4294967296"
        );
        assert_eq!(
            o.u64("b").unwrap_err().to_string(),
            "`b` must be a non-negative integer, got number -1"
        );
        assert_eq!(
            o.i64("c").unwrap_err().to_string(),
            "`c` must be an integer, got number 2.0"
        );
        assert_eq!(o.u32("d").unwrap(), Some(u32::MAX));
    }

    #[test]
    fn errors_name_the_field_by_its_path() {
        let mut o = object(json!({"call": {"egress": 3, "x": 1}, "list": [{}, 5]}));
        let mut call = o.object("call").unwrap().unwrap();
        assert_eq!(
            call.string("egress").unwrap_err().to_string(),
            "`call.egress` must be a string, got number 3"
        );
        assert_eq!(
            call.finish().unwrap_err().to_string(),
            "unknown field `call.x`, expected one of `egress`"
        );
        assert_eq!(
            o.objects("list").unwrap_err().to_string(),
            "`list[1]` must be an object, got number 5"
        );
        assert_eq!(
            o.required_string("model").unwrap_err().to_string(),
            "missing field `model`"
        );
        assert_eq!(
            o.bool("missing").unwrap(),
            None,
            "a missing optional field is not an error"
        );
        assert_eq!(
            Object::new(json!([1])).unwrap_err().to_string(),
            "expected an object, got array"
        );
        let mut lenient = Object::new(json!({"a": 1, "b": {"c": 2}})).unwrap();
        let mut b = lenient.object("b").unwrap().unwrap();
        assert_eq!(b.u64("c").unwrap(), Some(2));
        assert_eq!(
            lenient.finish().unwrap_err().to_string(),
            "unknown field `a`",
            "a lenient object lists nothing it was asked for"
        );
        let mut o = object(json!({"flag": "yes", "n": "1", "a": null, "b": "x", "c": 1}));
        assert_eq!(o.nullable_string("a").unwrap(), Some(None));
        assert_eq!(o.nullable_string("b").unwrap(), Some(Some("x".into())));
        assert_eq!(o.nullable_string("none").unwrap(), None);
        assert_eq!(
            o.nullable_string("c").unwrap_err().to_string(),
            "`c` must be a string or null, got number 1"
        );
        assert_eq!(
            o.bool("flag").unwrap_err().to_string(),
            "`flag` must be a boolean, got string"
        );
        assert_eq!(
            o.f64("n").unwrap_err().to_string(),
            "`n` must be a number, got string"
        );
    }

    #[test]
    fn finish_lists_the_fields_asked_for() {
        let mut o = object(json!({"model": "m", "colour": 1}));
        o.required_string("model").unwrap();
        o.string("name").unwrap();
        assert_eq!(
            o.finish().unwrap_err().to_string(),
            "unknown field `colour`, expected one of `model`, `name`"
        );
    }
}
