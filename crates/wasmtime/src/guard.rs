//! The address guard: which IP addresses the guest's outbound HTTP may connect to, checked on
//! the addresses a host name actually resolved to, right before the connection is opened to
//! exactly that address (no second resolution, so DNS rebinding cannot slip past it).
//!
//! [`classify`](crate::address::classify) (in `address.rs`, which the connection pool uses too)
//! puts an address into an [`AddressClass`]; [`AddressPolicy`] says which
//! classes may be reached; [`GuardedOutbound`] is the `WasiHttpHooks` that resolves (through an
//! injectable [`Resolve`]), checks every address, and sends only when all of them pass.

use std::collections::HashMap;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hyper::client::conn::http1::SendRequest;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use wasmtime_wasi_http::{Error, RequestOptions, WasiBody, WasiHttpHooks};

pub use crate::address::{classify, AddressClass};

type IoFuture = Box<dyn Future<Output = wasmtime_wasi_http::Result<()>> + Send>;
type ResponseFuture = Box<
    dyn Future<Output = wasmtime_wasi_http::Result<(http::Response<WasiBody>, IoFuture)>> + Send,
>;

/// Which [`AddressClass`]es outbound connections may reach; [`AddressClass::Public`] always may.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AddressPolicy {
    /// Allow [`AddressClass::Loopback`].
    pub loopback: bool,
    /// Allow [`AddressClass::Private`].
    pub private: bool,
    /// Allow [`AddressClass::LinkLocal`] (metadata addresses stay denied).
    pub link_local: bool,
    /// Allow [`AddressClass::SharedAddressSpace`].
    pub shared_address_space: bool,
    /// Allow [`AddressClass::Unspecified`].
    pub unspecified: bool,
    /// Allow [`AddressClass::Reserved`].
    pub reserved: bool,
    /// Allow [`AddressClass::Metadata`]: cloud credentials are one request away, so only for
    /// hosts that have none.
    pub metadata: bool,
}

impl AddressPolicy {
    /// Public addresses only: the default for embedders, whose guests' requests are steered by
    /// input that may not be theirs.
    pub const PUBLIC_ONLY: AddressPolicy = AddressPolicy {
        loopback: false,
        private: false,
        link_local: false,
        shared_address_space: false,
        unspecified: false,
        reserved: false,
        metadata: false,
    };

    /// Public, loopback and private addresses: for a person running `oma-host` against a URL
    /// they typed (local model servers listen on loopback or the LAN). Never link-local,
    /// metadata or unspecified.
    pub const LOCAL_SERVERS: AddressPolicy = AddressPolicy {
        loopback: true,
        private: true,
        ..AddressPolicy::PUBLIC_ONLY
    };

    /// Whether `ip` may be connected to.
    pub fn permits(&self, ip: IpAddr) -> bool {
        self.permits_class(classify(ip))
    }

    /// Whether addresses of `class` may be connected to.
    pub fn permits_class(&self, class: AddressClass) -> bool {
        match class {
            AddressClass::Public => true,
            AddressClass::Loopback => self.loopback,
            AddressClass::Private => self.private,
            AddressClass::LinkLocal => self.link_local,
            AddressClass::SharedAddressSpace => self.shared_address_space,
            AddressClass::Unspecified => self.unspecified,
            AddressClass::Reserved => self.reserved,
            AddressClass::Metadata => self.metadata,
        }
    }
}

impl Default for AddressPolicy {
    /// [`AddressPolicy::PUBLIC_ONLY`].
    fn default() -> Self {
        AddressPolicy::PUBLIC_ONLY
    }
}

/// A future of the addresses a host name resolves to.
pub type ResolveFuture = Pin<Box<dyn Future<Output = std::io::Result<Vec<IpAddr>>> + Send>>;

/// Name resolution for [`GuardedOutbound`]: the system's by default ([`SystemResolver`]), a
/// table in tests ([`StaticResolver`]).
pub trait Resolve: Send + Sync {
    /// The addresses `host` (a DNS name, never an IP literal) resolves to.
    fn resolve(&self, host: &str) -> ResolveFuture;
}

/// The system resolver (`getaddrinfo`, through tokio).
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemResolver;

impl Resolve for SystemResolver {
    fn resolve(&self, host: &str) -> ResolveFuture {
        let host = host.to_owned();
        Box::pin(async move {
            let addresses = tokio::net::lookup_host((host.as_str(), 0)).await?;
            Ok(addresses.map(|address| address.ip()).collect())
        })
    }
}

/// A fixed table of names to addresses; other names fail to resolve. Clones share the table of
/// lookups made.
#[derive(Clone, Debug, Default)]
pub struct StaticResolver {
    table: HashMap<String, Vec<IpAddr>>,
    lookups: Arc<Mutex<Vec<String>>>,
}

impl StaticResolver {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// `host` (case-insensitive) resolves to `addresses`.
    pub fn with(mut self, host: &str, addresses: impl IntoIterator<Item = IpAddr>) -> Self {
        self.table
            .insert(host.to_ascii_lowercase(), addresses.into_iter().collect());
        self
    }

    /// The names looked up so far, in order.
    pub fn lookups(&self) -> Vec<String> {
        self.lookups
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

impl Resolve for StaticResolver {
    fn resolve(&self, host: &str) -> ResolveFuture {
        let host = host.to_ascii_lowercase();
        self.lookups
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(host.clone());
        let found = self.table.get(&host).cloned();
        Box::pin(async move {
            found.ok_or_else(|| {
                std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    format!("no address for {host}"),
                )
            })
        })
    }
}

/// A request the guard refused, before any socket was opened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// The host of the request's URL.
    pub host: String,
    /// Each address it resolved to that the policy does not allow, with its class.
    pub addresses: Vec<(IpAddr, AddressClass)>,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "refused to connect to {}:", self.host)?;
        for (ip, class) in &self.addresses {
            write!(f, " {ip} ({class:?})")?;
        }
        Ok(())
    }
}

/// Sends requests for real (HTTP/1.1, TLS with the webpki roots for `https`), to addresses the
/// [`AddressPolicy`] allows: the host name is resolved once, every address it resolved to is
/// checked, and the connection goes to one of exactly those addresses. A request whose host
/// resolves to any address the policy does not allow fails with `HTTP-request-denied` (the
/// component's `EgressDenied`, never retried) before any socket opens, and is recorded as a
/// [`Refusal`]. Clones share the records.
///
/// Connections are kept alive: one whose response was read to its end serves the next request
/// to the same scheme, host and port (whose addresses are checked again first, so a refusal
/// never rides on an open connection). Clones share the idle connections; so do guards made
/// with [`GuardedOutbound::sharing_connections`].
///
/// `GuardedOutbound::default()` allows public addresses only and uses the system resolver.
#[derive(Clone)]
pub struct GuardedOutbound {
    policy: AddressPolicy,
    resolver: Arc<dyn Resolve>,
    refusals: Arc<Mutex<Vec<Refusal>>>,
    connections: Arc<AtomicUsize>,
    idle: Arc<crate::pool::Pool>,
}

impl std::fmt::Debug for GuardedOutbound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GuardedOutbound")
            .field("policy", &self.policy)
            .field("refusals", &self.refusals().len())
            .field("connections", &self.connections())
            .finish_non_exhaustive()
    }
}

impl Default for GuardedOutbound {
    fn default() -> Self {
        GuardedOutbound::new(AddressPolicy::PUBLIC_ONLY)
    }
}

impl GuardedOutbound {
    /// A guard with `policy` and the system resolver.
    pub fn new(policy: AddressPolicy) -> Self {
        GuardedOutbound {
            policy,
            resolver: Arc::new(SystemResolver),
            refusals: Arc::default(),
            connections: Arc::default(),
            idle: Arc::default(),
        }
    }

    /// The same guard, reusing `other`'s idle connections (and giving its own back to the same
    /// place), with refusals and connection counts of its own: one guard per request can then
    /// keep the provider's connections across requests.
    pub fn sharing_connections(mut self, other: &GuardedOutbound) -> Self {
        self.idle = Arc::clone(&other.idle);
        self
    }

    /// The same guard resolving names with `resolver`.
    pub fn with_resolver(mut self, resolver: impl Resolve + 'static) -> Self {
        self.resolver = Arc::new(resolver);
        self
    }

    /// The policy it enforces.
    pub fn policy(&self) -> AddressPolicy {
        self.policy
    }

    /// The requests refused so far.
    pub fn refusals(&self) -> Vec<Refusal> {
        self.refusals
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// How many TCP connections it has opened (or tried to) so far.
    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }

    /// The addresses `uri`'s host resolves to, if the policy allows every one of them;
    /// otherwise the refusal (recorded) or the resolution failure.
    pub async fn check(&self, uri: &http::Uri) -> Result<Vec<IpAddr>, Error> {
        let host = uri.host().ok_or(Error::HttpRequestUriInvalid)?;
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        let addresses = match bare.parse::<IpAddr>() {
            Ok(ip) => vec![ip],
            Err(_) => self
                .resolver
                .resolve(bare)
                .await
                .map_err(|e| Error::DnsError {
                    rcode: Some(e.to_string()),
                    info_code: None,
                })?,
        };
        if addresses.is_empty() {
            return Err(Error::DestinationNotFound);
        }
        let refused: Vec<(IpAddr, AddressClass)> = addresses
            .iter()
            .map(|&ip| (ip, classify(ip)))
            .filter(|&(_, class)| !self.policy.permits_class(class))
            .collect();
        if refused.is_empty() {
            return Ok(addresses);
        }
        self.refusals
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Refusal {
                host: bare.to_owned(),
                addresses: refused,
            });
        Err(Error::HttpRequestDenied)
    }
}

impl WasiHttpHooks for GuardedOutbound {
    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        _fut: IoFuture,
    ) -> ResponseFuture {
        let guard = self.clone();
        Box::new(async move {
            let addresses = guard.check(request.uri()).await?;
            let response = send_to(&guard, &addresses, request, options).await?;
            // The connection's I/O runs in a task of its own.
            let io: IoFuture = Box::new(async { Ok(()) });
            Ok((response, io))
        })
    }
}

trait Stream: AsyncRead + AsyncWrite + Send + Unpin {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin> Stream for T {}

/// Sends `request` over an idle connection to its scheme, host and port, or a new connection
/// to the first of `addresses` that accepts one.
async fn send_to(
    guard: &GuardedOutbound,
    addresses: &[IpAddr],
    request: http::Request<WasiBody>,
    options: Option<RequestOptions>,
) -> Result<http::Response<WasiBody>, Error> {
    let uri = request.uri();
    let tls = uri.scheme() == Some(&http::uri::Scheme::HTTPS);
    let port = uri.port_u16().unwrap_or(if tls { 443 } else { 80 });
    let host = uri.host().ok_or(Error::HttpRequestUriInvalid)?;
    let host = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned();
    // The policy is part of the key: a connection opened under one policy never serves a guard
    // with another.
    let scheme = if tls { "https" } else { "http" };
    let key = format!("{scheme}://{host}:{port} {:?}", guard.policy);
    let timeouts = crate::pool::Timeouts::of(options);
    crate::pool::send_pooled(Arc::clone(&guard.idle), key, request, timeouts, || {
        connect(
            &guard.connections,
            addresses,
            port,
            tls.then_some(host),
            timeouts.connect,
        )
    })
    .await
}

/// A new connection (TLS with the webpki roots when `tls_name` is given) to the first of
/// `addresses` that accepts one, its I/O driven by a task of its own.
async fn connect(
    connections: &AtomicUsize,
    addresses: &[IpAddr],
    port: u16,
    tls_name: Option<String>,
    connect_timeout: Duration,
) -> Result<SendRequest<WasiBody>, Error> {
    let mut last = Error::DestinationUnavailable;
    let mut stream = None;
    for &ip in addresses {
        connections.fetch_add(1, Ordering::SeqCst);
        let address = SocketAddr::new(ip, port);
        match tokio::time::timeout(connect_timeout, TcpStream::connect(address)).await {
            Ok(Ok(connected)) => {
                stream = Some(connected);
                break;
            }
            Ok(Err(e)) => last = Error::Connect(e),
            Err(_) => last = Error::ConnectionTimeout,
        }
    }
    let stream = stream.ok_or(last)?;
    let _ = stream.set_nodelay(true);
    let stream: Box<dyn Stream> = if let Some(host) = tls_name {
        let roots = rustls::RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.into(),
        };
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(|_| Error::TlsProtocolError)?
        .with_root_certificates(roots)
        .with_no_client_auth();
        let name = rustls::pki_types::ServerName::try_from(host)
            .map_err(|_| Error::HttpRequestUriInvalid)?;
        let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
        let stream = tokio::time::timeout(connect_timeout, connector.connect(name, stream))
            .await
            .map_err(|_| Error::ConnectionTimeout)?
            .map_err(Error::Tls)?;
        Box::new(stream)
    } else {
        Box::new(stream)
    };
    crate::pool::handshake(stream, connect_timeout).await
}

/// Sends requests for real, through the default [`GuardedOutbound`]: to public addresses
/// only, checked after DNS resolution (loopback, private, link-local, shared, unspecified and
/// cloud-metadata addresses are `HTTP-request-denied`, before any socket opens). The
/// component's own egress policy applies first. An embedder that must reach more installs a
/// [`GuardedOutbound`] with another [`AddressPolicy`], as `oma-host run`
/// does.
#[derive(Clone, Copy, Debug, Default)]
pub struct AllowOutbound;

impl WasiHttpHooks for AllowOutbound {
    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        fut: IoFuture,
    ) -> ResponseFuture {
        GuardedOutbound::default().send_request(request, options, fut)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn the_policies_allow_what_they_say() {
        let everything = [
            "8.8.8.8",
            "127.0.0.1",
            "::ffff:127.0.0.1",
            "10.0.0.1",
            "fd12::1",
            "169.254.1.1",
            "fe80::1",
            "100.64.0.1",
            "0.0.0.0",
            "::",
            "169.254.169.254",
            "::ffff:169.254.169.254",
            "fd00:ec2::254",
            "224.0.0.1",
        ];
        let allowed = |policy: AddressPolicy| -> Vec<&str> {
            everything
                .iter()
                .copied()
                .filter(|a| policy.permits(ip(a)))
                .collect()
        };
        assert_eq!(allowed(AddressPolicy::default()), ["8.8.8.8"]);
        assert_eq!(
            allowed(AddressPolicy::LOCAL_SERVERS),
            [
                "8.8.8.8",
                "127.0.0.1",
                "::ffff:127.0.0.1",
                "10.0.0.1",
                "fd12::1"
            ]
        );
        // Link-local allowed still leaves the metadata addresses out.
        let link_local = AddressPolicy {
            link_local: true,
            private: true,
            ..AddressPolicy::default()
        };
        for metadata in ["169.254.169.254", "::ffff:169.254.169.254", "fd00:ec2::254"] {
            assert!(!link_local.permits(ip(metadata)), "{metadata}");
        }
        assert!(link_local.permits(ip("169.254.1.1")));
    }
}
