//! `wasi:keyvalue` (`store` and `atomics`, 0.2.0-draft) for the gateway server: where the
//! gateway counts its per-token limits (`OMA_GATEWAY_KEYS`, `OMA_GATEWAY_LIMITS_BUCKET`), so
//! that every replica sees one count.
//!
//! A [`KeyValue`] is one of:
//!
//! - **none** (the default): every `open` fails with `no-such-store`;
//! - **memory**: one map for the whole process, shared by every request it serves (one replica);
//! - **Redis** (`redis://HOST:PORT[/DB]`): every process pointed at the same server shares the
//!   counts. `increment` is Redis's `INCRBY`, atomic across every client; a key `K` of bucket
//!   `B` is the Redis key `B:K` (so buckets are namespaces of one database).
//!
//! Values are bytes; `increment` reads and writes them as a decimal number, as wasmtime's own
//! in-memory implementation does. `list-keys` is answered from memory only (on Redis it would be
//! a scan of the whole database); the gateway never calls it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use wasmtime::component::{HasData, Linker, Resource, ResourceTable};

use crate::bindings::keyvalue::wasi::keyvalue::{atomics, store};
use crate::bindings::keyvalue::Bucket;

/// The store behind `wasi:keyvalue`, shared by every request of a server (cloned cheaply).
#[derive(Clone, Default)]
pub struct KeyValue {
    backend: Backend,
}

#[derive(Clone, Default)]
enum Backend {
    #[default]
    None,
    Memory(Arc<Mutex<HashMap<String, Vec<u8>>>>),
    Redis(Arc<Redis>),
}

struct Redis {
    client: redis::Client,
    /// One multiplexed connection for every request, made at the first use and again after
    /// it failed.
    connection: tokio::sync::Mutex<Option<redis::aio::MultiplexedConnection>>,
}

impl std::fmt::Debug for KeyValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // A Redis URL may hold a password: only the kind is shown.
        f.write_str(match self.backend {
            Backend::None => "KeyValue(none)",
            Backend::Memory(_) => "KeyValue(memory)",
            Backend::Redis(_) => "KeyValue(redis)",
        })
    }
}

impl KeyValue {
    /// No store: every `open` fails with `no-such-store`.
    pub fn none() -> KeyValue {
        KeyValue::default()
    }

    /// One map in this process's memory.
    pub fn memory() -> KeyValue {
        KeyValue {
            backend: Backend::Memory(Arc::default()),
        }
    }

    /// The Redis server at `url` (`redis://HOST:PORT[/DB]`, `rediss://` for TLS is not built
    /// in); nothing is connected until a bucket is used.
    pub fn redis(url: &str) -> anyhow::Result<KeyValue> {
        let client = redis::Client::open(url)
            .map_err(|e| anyhow::anyhow!("not a Redis URL ({}): {e}", e.category()))?;
        Ok(KeyValue {
            backend: Backend::Redis(Arc::new(Redis {
                client,
                connection: tokio::sync::Mutex::new(None),
            })),
        })
    }

    /// What `--keyvalue` names: `memory`, or a `redis://` URL.
    pub fn parse(spec: &str) -> anyhow::Result<KeyValue> {
        match spec {
            "memory" => Ok(KeyValue::memory()),
            url if url.starts_with("redis://") || url.starts_with("redis+unix://") => {
                KeyValue::redis(url)
            }
            _ => anyhow::bail!("--keyvalue takes `memory` or a redis:// URL"),
        }
    }

    /// Whether a store is linked at all.
    pub fn is_some(&self) -> bool {
        !matches!(self.backend, Backend::None)
    }
}

impl Redis {
    /// Runs `command` on the shared connection, connecting first if needed; a failure drops
    /// the connection so that the next command connects anew.
    async fn query<T: redis::FromRedisValue>(&self, command: &redis::Cmd) -> Result<T, String> {
        let mut slot = self.connection.lock().await;
        let mut connection = match slot.as_ref() {
            Some(connection) => connection.clone(),
            None => {
                let connection = tokio::time::timeout(
                    std::time::Duration::from_secs(2),
                    self.client.get_multiplexed_async_connection(),
                )
                .await
                .map_err(|_| "the Redis server did not answer within 2 s".to_owned())?
                .map_err(|e| format!("cannot reach the Redis server ({})", e.category()))?;
                *slot = Some(connection.clone());
                connection
            }
        };
        drop(slot);
        let answer = tokio::time::timeout(
            std::time::Duration::from_secs(2),
            command.query_async::<T>(&mut connection),
        )
        .await
        .map_err(|_| "the Redis server did not answer within 2 s".to_owned())
        .and_then(|answer| answer.map_err(|e| format!("Redis: {}", e.category())));
        if answer.is_err() {
            *self.connection.lock().await = None;
        }
        answer
    }
}

/// One store's view of `wasi:keyvalue`: the [`KeyValue`] its requests count in, and the
/// resource table its buckets live in.
pub struct KeyValueView<'a> {
    keyvalue: &'a KeyValue,
    table: &'a mut ResourceTable,
}

impl<'a> KeyValueView<'a> {
    /// The view of a store whose buckets go into `table` and whose keys into `keyvalue`.
    pub fn new(keyvalue: &'a KeyValue, table: &'a mut ResourceTable) -> Self {
        KeyValueView { keyvalue, table }
    }

    fn bucket_name(&mut self, bucket: &Resource<Bucket>) -> Result<String, store::Error> {
        self.table
            .get(bucket)
            .map(|bucket| bucket.name.clone())
            .map_err(other)
    }
}

/// Links `wasi:keyvalue/store` and `wasi:keyvalue/atomics` to the [`KeyValue`] each store's
/// `view` gives (the gateway server sets it per request from
/// [`ServeOptions::keyvalue`](crate::serve::ServeOptions::keyvalue)).
pub fn add_to_linker<T: Send + 'static>(
    linker: &mut Linker<T>,
    view: fn(&mut T) -> KeyValueView<'_>,
) -> anyhow::Result<()> {
    store::add_to_linker::<T, HasKeyValue>(linker, view)?;
    atomics::add_to_linker::<T, HasKeyValue>(linker, view)?;
    Ok(())
}

struct HasKeyValue;

impl HasData for HasKeyValue {
    type Data<'a> = KeyValueView<'a>;
}

fn other(error: impl std::fmt::Display) -> store::Error {
    store::Error::Other(error.to_string())
}

fn redis_key(bucket: &str, key: &str) -> String {
    format!("{bucket}:{key}")
}

impl store::Host for KeyValueView<'_> {
    async fn open(&mut self, identifier: String) -> Result<Resource<Bucket>, store::Error> {
        if !self.keyvalue.is_some() {
            return Err(store::Error::NoSuchStore);
        }
        self.table.push(Bucket { name: identifier }).map_err(other)
    }
}

impl store::HostBucket for KeyValueView<'_> {
    async fn get(
        &mut self,
        bucket: Resource<Bucket>,
        key: String,
    ) -> Result<Option<Vec<u8>>, store::Error> {
        let name = self.bucket_name(&bucket)?;
        match &self.keyvalue.backend {
            Backend::None => Err(store::Error::NoSuchStore),
            Backend::Memory(map) => Ok(lock(map).get(&redis_key(&name, &key)).cloned()),
            Backend::Redis(redis) => redis
                .query(redis::cmd("GET").arg(redis_key(&name, &key)))
                .await
                .map_err(store::Error::Other),
        }
    }

    async fn set(
        &mut self,
        bucket: Resource<Bucket>,
        key: String,
        value: Vec<u8>,
    ) -> Result<(), store::Error> {
        let name = self.bucket_name(&bucket)?;
        match &self.keyvalue.backend {
            Backend::None => Err(store::Error::NoSuchStore),
            Backend::Memory(map) => {
                lock(map).insert(redis_key(&name, &key), value);
                Ok(())
            }
            Backend::Redis(redis) => redis
                .query(redis::cmd("SET").arg(redis_key(&name, &key)).arg(value))
                .await
                .map_err(store::Error::Other),
        }
    }

    async fn delete(&mut self, bucket: Resource<Bucket>, key: String) -> Result<(), store::Error> {
        let name = self.bucket_name(&bucket)?;
        match &self.keyvalue.backend {
            Backend::None => Err(store::Error::NoSuchStore),
            Backend::Memory(map) => {
                lock(map).remove(&redis_key(&name, &key));
                Ok(())
            }
            Backend::Redis(redis) => redis
                .query::<i64>(redis::cmd("DEL").arg(redis_key(&name, &key)))
                .await
                .map(|_| ())
                .map_err(store::Error::Other),
        }
    }

    async fn exists(
        &mut self,
        bucket: Resource<Bucket>,
        key: String,
    ) -> Result<bool, store::Error> {
        let name = self.bucket_name(&bucket)?;
        match &self.keyvalue.backend {
            Backend::None => Err(store::Error::NoSuchStore),
            Backend::Memory(map) => Ok(lock(map).contains_key(&redis_key(&name, &key))),
            Backend::Redis(redis) => redis
                .query::<i64>(redis::cmd("EXISTS").arg(redis_key(&name, &key)))
                .await
                .map(|n| n > 0)
                .map_err(store::Error::Other),
        }
    }

    async fn list_keys(
        &mut self,
        bucket: Resource<Bucket>,
        _cursor: Option<u64>,
    ) -> Result<store::KeyResponse, store::Error> {
        let name = self.bucket_name(&bucket)?;
        match &self.keyvalue.backend {
            Backend::None => Err(store::Error::NoSuchStore),
            Backend::Memory(map) => {
                let prefix = format!("{name}:");
                let keys = lock(map)
                    .keys()
                    .filter_map(|key| key.strip_prefix(&prefix).map(str::to_owned))
                    .collect();
                Ok(store::KeyResponse { keys, cursor: None })
            }
            Backend::Redis(_) => Err(store::Error::Other(
                "list-keys is not offered on Redis (it would scan the whole database)".into(),
            )),
        }
    }

    async fn drop(&mut self, bucket: Resource<Bucket>) -> wasmtime::Result<()> {
        self.table.delete(bucket)?;
        Ok(())
    }
}

impl atomics::Host for KeyValueView<'_> {
    async fn increment(
        &mut self,
        bucket: Resource<Bucket>,
        key: String,
        delta: u64,
    ) -> Result<u64, store::Error> {
        let name = self.bucket_name(&bucket)?;
        match &self.keyvalue.backend {
            Backend::None => Err(store::Error::NoSuchStore),
            Backend::Memory(map) => {
                let mut map = lock(map);
                let value = map.entry(redis_key(&name, &key)).or_insert(b"0".to_vec());
                let count = std::str::from_utf8(value)
                    .ok()
                    .and_then(|text| text.parse::<u64>().ok())
                    .ok_or_else(|| other("the value is not a count"))?
                    .checked_add(delta)
                    .ok_or_else(|| other("the count would overflow"))?;
                *value = count.to_string().into_bytes();
                Ok(count)
            }
            Backend::Redis(redis) => {
                let delta = i64::try_from(delta).map_err(|_| other("the delta is too large"))?;
                let count: i64 = redis
                    .query(redis::cmd("INCRBY").arg(redis_key(&name, &key)).arg(delta))
                    .await
                    .map_err(store::Error::Other)?;
                u64::try_from(count).map_err(|_| other("the count is negative"))
            }
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
