//! The address guard: which IP addresses the guest's outbound HTTP may connect to, checked on
//! the addresses a host name actually resolved to, right before the connection is opened to
//! exactly that address (no second resolution, so DNS rebinding cannot slip past it).
//!
//! [`classify`] puts an address into an [`AddressClass`] (IPv4-mapped, IPv4-compatible and
//! NAT64 IPv6 forms are classified as the IPv4 address they carry); [`AddressPolicy`] says which
//! classes may be reached; [`GuardedOutbound`] is the `WasiHttpHooks` that resolves (through an
//! injectable [`Resolve`]), checks every address, and sends only when all of them pass.

use std::collections::HashMap;
use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hyper::client::conn::http1::SendRequest;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use wasmtime_wasi_http::{Error, RequestOptions, WasiBody, WasiHttpHooks};

type IoFuture = Box<dyn Future<Output = wasmtime_wasi_http::Result<()>> + Send>;
type ResponseFuture = Box<
    dyn Future<Output = wasmtime_wasi_http::Result<(http::Response<WasiBody>, IoFuture)>> + Send,
>;

/// What kind of destination an IP address is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AddressClass {
    /// Anything not below: an address on the public internet.
    Public,
    /// `127.0.0.0/8`, `::1`.
    Loopback,
    /// `10.0.0.0/8`, `172.16.0.0/12`, `192.168.0.0/16`, `fc00::/7` (unique local),
    /// `fec0::/10` (the deprecated site-local).
    Private,
    /// `169.254.0.0/16`, `fe80::/10`.
    LinkLocal,
    /// `100.64.0.0/10`, the carrier-grade NAT shared address space.
    SharedAddressSpace,
    /// `0.0.0.0/8` ("this network", which reaches the host itself on Linux), `::`.
    Unspecified,
    /// Cloud instance-metadata and link services: `169.254.169.254` (AWS, GCP, Azure, ...),
    /// `169.254.170.2` and `169.254.170.23` (ECS task metadata, EKS pod identity),
    /// `100.100.100.200` (Alibaba Cloud),
    /// `192.0.0.192` (Oracle Cloud), `fd00:ec2::/32` (AWS's IPv6 link services, IMDS at
    /// `fd00:ec2::254`). Checked before the ranges these fall in.
    Metadata,
    /// Multicast, broadcast and reserved, benchmarking and documentation ranges: nothing a
    /// provider lives at.
    Reserved,
}

/// The metadata endpoints, IPv4.
const METADATA_V4: [Ipv4Addr; 5] = [
    Ipv4Addr::new(169, 254, 169, 254),
    Ipv4Addr::new(169, 254, 170, 2),
    Ipv4Addr::new(169, 254, 170, 23),
    Ipv4Addr::new(100, 100, 100, 200),
    Ipv4Addr::new(192, 0, 0, 192),
];

/// The class of `ip`.
pub fn classify(ip: IpAddr) -> AddressClass {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

fn classify_v4(ip: Ipv4Addr) -> AddressClass {
    let [a, b, c, _] = ip.octets();
    if METADATA_V4.contains(&ip) {
        AddressClass::Metadata
    } else if a == 0 {
        AddressClass::Unspecified
    } else if a == 127 {
        AddressClass::Loopback
    } else if a == 10 || (a == 172 && b & 0xf0 == 16) || (a == 192 && b == 168) {
        AddressClass::Private
    } else if a == 169 && b == 254 {
        AddressClass::LinkLocal
    } else if a == 100 && b & 0xc0 == 64 {
        AddressClass::SharedAddressSpace
    } else if a >= 224 // multicast, 240/4 reserved, broadcast
        || (a == 192 && b == 0 && c == 0) // IETF protocol assignments
        || (a == 192 && b == 0 && c == 2) // documentation
        || (a == 198 && b & 0xfe == 18) // benchmarking
        || (a == 198 && b == 51 && c == 100)
        || (a == 203 && b == 0 && c == 113)
    {
        AddressClass::Reserved
    } else {
        AddressClass::Public
    }
}

fn classify_v6(ip: Ipv6Addr) -> AddressClass {
    let segments = ip.segments();
    let embedded = || {
        let [.., a, b, c, d] = ip.octets();
        Ipv4Addr::new(a, b, c, d)
    };
    if ip.is_unspecified() {
        return AddressClass::Unspecified;
    }
    if ip.is_loopback() {
        return AddressClass::Loopback;
    }
    // IPv4-mapped (::ffff:a.b.c.d), IPv4-compatible (::a.b.c.d) and NAT64 (64:ff9b::/96 and the
    // local-use 64:ff9b:1::/48): the IPv4 address decides.
    let mapped = segments[..5] == [0; 5] && (segments[5] == 0xffff || segments[5] == 0);
    let nat64 = segments[..6] == [0x64, 0xff9b, 0, 0, 0, 0] || segments[..3] == [0x64, 0xff9b, 1];
    if mapped || nat64 {
        return classify_v4(embedded());
    }
    // 6to4 (2002::/16) carries an IPv4 address in its second and third segments.
    if segments[0] == 0x2002 {
        let [_, _, a, b, c, d, ..] = ip.octets();
        let class = classify_v4(Ipv4Addr::new(a, b, c, d));
        if class != AddressClass::Public {
            return class;
        }
    }
    if segments[0] == 0xfd00 && segments[1] == 0x0ec2 {
        AddressClass::Metadata
    } else if segments[0] & 0xfe00 == 0xfc00 || segments[0] & 0xffc0 == 0xfec0 {
        AddressClass::Private
    } else if segments[0] & 0xffc0 == 0xfe80 {
        AddressClass::LinkLocal
    } else if segments[0] & 0xff00 == 0xff00 || (segments[0] == 0x2001 && segments[1] == 0x0db8) {
        AddressClass::Reserved
    } else {
        AddressClass::Public
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn addresses_fall_into_their_classes() {
        use AddressClass::*;
        for (address, class) in [
            ("8.8.8.8", Public),
            ("1.1.1.1", Public),
            ("172.15.255.255", Public),
            ("172.32.0.1", Public),
            ("100.63.255.255", Public),
            ("100.128.0.1", Public),
            ("169.253.1.1", Public),
            ("2606:4700::1111", Public),
            ("127.0.0.1", Loopback),
            ("127.255.255.254", Loopback),
            ("::1", Loopback),
            ("10.0.0.1", Private),
            ("10.255.255.255", Private),
            ("172.16.0.1", Private),
            ("172.31.255.255", Private),
            ("192.168.1.1", Private),
            ("fc00::1", Private),
            ("fdff:ffff::1", Private),
            ("fec0::1", Private),
            ("169.254.0.1", LinkLocal),
            ("169.254.255.255", LinkLocal),
            ("fe80::1", LinkLocal),
            ("febf::1", LinkLocal),
            ("100.64.0.1", SharedAddressSpace),
            ("100.127.255.255", SharedAddressSpace),
            ("0.0.0.0", Unspecified),
            ("0.1.2.3", Unspecified),
            ("::", Unspecified),
            ("169.254.169.254", Metadata),
            ("169.254.170.2", Metadata),
            ("100.100.100.200", Metadata),
            ("192.0.0.192", Metadata),
            ("fd00:ec2::254", Metadata),
            ("fd00:ec2::23", Metadata),
            ("224.0.0.1", Reserved),
            ("255.255.255.255", Reserved),
            ("240.0.0.1", Reserved),
            ("ff02::1", Reserved),
            ("2001:db8::1", Reserved),
        ] {
            assert_eq!(classify(ip(address)), class, "{address}");
        }
    }

    /// Every IPv6 form that carries an IPv4 address is classified as that IPv4 address.
    #[test]
    fn mapped_forms_are_classified_as_the_ipv4_address_they_carry() {
        for v4 in [
            "127.0.0.1",
            "10.1.2.3",
            "172.20.0.1",
            "192.168.0.10",
            "169.254.169.254",
            "169.254.1.1",
            "100.64.1.1",
            "100.100.100.200",
            "0.0.0.0",
            "8.8.8.8",
        ] {
            let v4: Ipv4Addr = v4.parse().unwrap();
            let class = classify(IpAddr::V4(v4));
            let [a, b, c, d] = v4.octets();
            let forms = [
                IpAddr::V6(v4.to_ipv6_mapped()),
                ip(&format!("::ffff:{v4}")),
                ip(&format!("64:ff9b::{v4}")),
                ip(&format!("64:ff9b:1::{v4}")),
                ip(&format!("2002:{:02x}{:02x}:{:02x}{:02x}::1", a, b, c, d)),
            ];
            for form in forms {
                assert_eq!(classify(form), class, "{form} carries {v4}");
            }
            if !v4.is_unspecified() {
                assert_eq!(
                    classify(IpAddr::V6(v4.to_ipv6_compatible())),
                    class,
                    "::{v4}"
                );
            }
        }
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
