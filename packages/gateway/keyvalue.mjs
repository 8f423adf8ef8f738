// wasi:keyvalue (store and atomics, 0.2.0-draft) for the gateway under `jco serve`: pass it with
// `--jco-map 'wasi:keyvalue/*=file:///ABSOLUTE/PATH/keyvalue.mjs#*'` (jco writes the
// transpiled component to a directory of its own, so the path must be absolute).
//
// `jco serve` links no store that replicas could share, so every bucket is refused
// (`no-such-store`): the gateway then counts its per-token limits (OMA_GATEWAY_KEYS) in its own
// memory, which under `jco serve` is one instance for every request of the process, and
// `/healthz` says `"limits": "per-instance"`. Setting OMA_GATEWAY_LIMITS_BUCKET here makes every
// limited request a 503, as on any host without that bucket (docs/deploy.md).

const noSuchStore = { tag: "no-such-store" };

/** A bucket; none is ever opened here. */
class Bucket {
  get() {
    throw noSuchStore;
  }
  set() {
    throw noSuchStore;
  }
  delete() {
    throw noSuchStore;
  }
  exists() {
    throw noSuchStore;
  }
  listKeys() {
    throw noSuchStore;
  }
}

export const store = {
  Bucket,
  open(_identifier) {
    throw noSuchStore;
  },
};

export const atomics = {
  increment(_bucket, _key, _delta) {
    throw noSuchStore;
  },
};
