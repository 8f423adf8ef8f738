//! Address classification: what kind of destination an IP address is (public, loopback,
//! private, link-local, cloud metadata, ...). IPv4-mapped, IPv4-compatible, NAT64 and 6to4 IPv6
//! forms are classified as the IPv4 address they carry.
//!
//! Its own module because two parts decide by it: the address guard (`guard.rs`), which refuses
//! classes a policy does not allow before connecting, and the connection pool (`pool.rs`), which
//! keeps connections to loopback providers apart.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

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
}
