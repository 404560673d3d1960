//! The address rules (W1): which IP addresses the guarded client may connect to.
//!
//! Every check names the rule that refused, so a refusal tells the model (and the user) exactly
//! why `http://[::ffff:169.254.169.254]/` was not fetched.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Why an address is forbidden.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Forbidden {
    /// 0.0.0.0/8, `::`: "this network".
    ThisNetwork,
    /// 127.0.0.0/8, `::1`.
    Loopback,
    /// 10/8, 172.16/12, 192.168/16.
    Private,
    /// 169.254.0.0/16: link-local, where cloud metadata services live.
    LinkLocalV4,
    /// 100.64.0.0/10: carrier-grade NAT.
    SharedAddressSpace,
    /// 198.18.0.0/15: benchmarking.
    Benchmarking,
    /// 240.0.0.0/4 and 255.255.255.255.
    Reserved,
    /// 224.0.0.0/4, ff00::/8.
    Multicast,
    /// 192.0.2/24, 198.51.100/24, 203.0.113/24, 2001:db8::/32.
    Documentation,
    /// 192.0.0.0/24: IETF protocol assignments.
    ProtocolAssignments,
    /// fc00::/7.
    UniqueLocal,
    /// fe80::/10.
    LinkLocalV6,
}

impl Forbidden {
    /// The rule's wording, with its ranges.
    pub fn rule(self) -> &'static str {
        match self {
            Self::ThisNetwork => "\"this network\" (0.0.0.0/8, ::)",
            Self::Loopback => "loopback (127.0.0.0/8, ::1), allowed only when the URL you gave names it itself",
            Self::Private => "private network (10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16)",
            Self::LinkLocalV4 => "link-local, home of cloud metadata services (169.254.0.0/16)",
            Self::SharedAddressSpace => "carrier-grade NAT (100.64.0.0/10)",
            Self::Benchmarking => "benchmarking (198.18.0.0/15)",
            Self::Reserved => "reserved (240.0.0.0/4)",
            Self::Multicast => "multicast (224.0.0.0/4, ff00::/8)",
            Self::Documentation => "documentation (192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24, 2001:db8::/32)",
            Self::ProtocolAssignments => "IETF protocol assignments (192.0.0.0/24)",
            Self::UniqueLocal => "unique local (fc00::/7)",
            Self::LinkLocalV6 => "link-local (fe80::/10)",
        }
    }
}

/// An address the rules refused: which address, reached how, under which rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The address as given or resolved.
    pub addr: IpAddr,
    /// The IPv4 address embedded in `addr` (IPv4-mapped, NAT64, 6to4…) that the rule applies to.
    pub embedded: Option<Ipv4Addr>,
    /// The rule.
    pub rule: Forbidden,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.embedded {
            Some(v4) => write!(f, "{} (which embeds {v4}) is {}", self.addr, self.rule.rule()),
            None => write!(f, "{} is {}", self.addr, self.rule.rule()),
        }
    }
}

/// Checks `addr`; loopback passes only with `allow_loopback`.
pub fn check_ip(addr: IpAddr, allow_loopback: bool) -> Result<(), Refusal> {
    let (v4, embedded) = match addr {
        IpAddr::V4(v4) => (Some(v4), None),
        IpAddr::V6(v6) => match embedded_v4(v6) {
            Some(v4) => (Some(v4), Some(v4)),
            None => (None, None),
        },
    };
    let rule = match (v4, addr) {
        (Some(v4), _) => v4_rule(v4),
        (None, IpAddr::V6(v6)) => v6_rule(v6),
        (None, IpAddr::V4(_)) => None,
    };
    match rule {
        None => Ok(()),
        Some(Forbidden::Loopback) if allow_loopback => Ok(()),
        Some(rule) => Err(Refusal { addr, embedded, rule }),
    }
}

/// Whether `addr` is loopback, IPv4 embedded in IPv6 included.
pub fn is_loopback(addr: IpAddr) -> bool {
    match addr {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => v6.is_loopback() || embedded_v4(v6).is_some_and(|v4| v4.is_loopback()),
    }
}

/// The IPv4 address carried by an IPv4-mapped (::ffff:0:0/96), IPv4-compatible (::/96, but not
/// `::` or `::1`), NAT64 (64:ff9b::/96) or 6to4 (2002::/16) address.
fn embedded_v4(v6: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = v6.segments();
    let o = v6.octets();
    let low = Ipv4Addr::new(o[12], o[13], o[14], o[15]);
    if s[..5] == [0, 0, 0, 0, 0] && s[5] == 0xffff {
        return Some(low);
    }
    if s[..6] == [0; 6] && !(s[6] == 0 && s[7] <= 1) {
        return Some(low);
    }
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return Some(low);
    }
    if s[0] == 0x2002 {
        return Some(Ipv4Addr::new(o[2], o[3], o[4], o[5]));
    }
    None
}

fn v4_rule(a: Ipv4Addr) -> Option<Forbidden> {
    let [b0, b1, b2, _] = a.octets();
    Some(match (b0, b1, b2) {
        (0, _, _) => Forbidden::ThisNetwork,
        (127, _, _) => Forbidden::Loopback,
        (10, _, _) => Forbidden::Private,
        (172, 16..=31, _) => Forbidden::Private,
        (192, 168, _) => Forbidden::Private,
        (169, 254, _) => Forbidden::LinkLocalV4,
        (100, 64..=127, _) => Forbidden::SharedAddressSpace,
        (198, 18..=19, _) => Forbidden::Benchmarking,
        (192, 0, 0) => Forbidden::ProtocolAssignments,
        (192, 0, 2) | (198, 51, 100) | (203, 0, 113) => Forbidden::Documentation,
        (224..=239, _, _) => Forbidden::Multicast,
        (240..=255, _, _) => Forbidden::Reserved,
        _ => return None,
    })
}

fn v6_rule(a: Ipv6Addr) -> Option<Forbidden> {
    let s = a.segments();
    if a.is_unspecified() {
        return Some(Forbidden::ThisNetwork);
    }
    if a.is_loopback() {
        return Some(Forbidden::Loopback);
    }
    Some(match s[0] {
        x if x & 0xfe00 == 0xfc00 => Forbidden::UniqueLocal,
        x if x & 0xffc0 == 0xfe80 => Forbidden::LinkLocalV6,
        x if x & 0xff00 == 0xff00 => Forbidden::Multicast,
        0x2001 if s[1] == 0x0db8 => Forbidden::Documentation,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(s: &str) -> Forbidden {
        check_ip(s.parse().unwrap(), false).unwrap_err().rule
    }

    #[test]
    fn w1_every_forbidden_range_is_refused_by_name() {
        for (a, rule) in [
            ("169.254.169.254", Forbidden::LinkLocalV4),
            ("10.1.2.3", Forbidden::Private),
            ("172.31.255.255", Forbidden::Private),
            ("192.168.0.1", Forbidden::Private),
            ("127.0.0.1", Forbidden::Loopback),
            ("0.0.0.0", Forbidden::ThisNetwork),
            ("100.100.100.200", Forbidden::SharedAddressSpace),
            ("198.19.0.1", Forbidden::Benchmarking),
            ("250.1.1.1", Forbidden::Reserved),
            ("255.255.255.255", Forbidden::Reserved),
            ("224.0.0.1", Forbidden::Multicast),
            ("203.0.113.9", Forbidden::Documentation),
            ("::1", Forbidden::Loopback),
            ("::", Forbidden::ThisNetwork),
            ("fd00::1", Forbidden::UniqueLocal),
            ("fe80::1", Forbidden::LinkLocalV6),
            ("ff02::1", Forbidden::Multicast),
            ("2001:db8::1", Forbidden::Documentation),
            ("::ffff:127.0.0.1", Forbidden::Loopback),
            ("::ffff:169.254.169.254", Forbidden::LinkLocalV4),
            ("::10.0.0.1", Forbidden::Private),
            ("64:ff9b::a9fe:a9fe", Forbidden::LinkLocalV4),
            ("2002:7f00:1::", Forbidden::Loopback),
            ("2002:c0a8:101::1", Forbidden::Private),
        ] {
            assert_eq!(refused(a), rule, "{a}");
        }
    }

    #[test]
    fn w1_public_addresses_pass_and_loopback_only_when_allowed() {
        for a in ["93.184.215.14", "1.1.1.1", "2606:4700::1111", "172.32.0.1", "100.128.0.1", "::ffff:8.8.8.8"] {
            assert!(check_ip(a.parse().unwrap(), false).is_ok(), "{a}");
        }
        for a in ["127.0.0.1", "127.3.4.5", "::1", "::ffff:127.0.0.1"] {
            assert!(check_ip(a.parse().unwrap(), true).is_ok(), "{a}");
            assert!(is_loopback(a.parse().unwrap()), "{a}");
        }
        // Loopback permission does not open anything else.
        assert!(check_ip("10.0.0.1".parse().unwrap(), true).is_err());
    }

    #[test]
    fn w1_a_refusal_names_the_address_and_the_rule() {
        let r = check_ip("::ffff:169.254.169.254".parse().unwrap(), false).unwrap_err();
        let msg = r.to_string();
        assert!(msg.contains("::ffff:169.254.169.254") && msg.contains("embeds 169.254.169.254"), "{msg}");
        assert!(msg.contains("cloud metadata"), "{msg}");
    }
}
