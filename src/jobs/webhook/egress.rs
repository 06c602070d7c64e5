//! The egress policy of webhook calls: which addresses a call may connect to. Every address
//! is checked where the connection is made: a literal address in the URL (in whatever
//! spelling, since the URL parser normalises `2130706433`, `0x7f.1` and `0177.0.0.1` to
//! `127.0.0.1`), each address a host name resolves to (at every call, so a name that changes
//! its answer is checked again), and every redirect hop. Addresses that are not public
//! (loopback, private, link-local with the cloud metadata service, shared, documentation,
//! benchmarking, multicast, broadcast and the other special ranges) are refused unless
//! `webhooks.allow_nets` names them; `webhooks.deny_nets` refuses more, and wins over both.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, LazyLock};

use ipnet::IpNet;
use url::{Host, Url};

/// The ranges that are not public: refused unless `webhooks.allow_nets` names them.
/// IANA's special-purpose registries for IPv4 and IPv6, less the globally reachable ones.
const NOT_PUBLIC: &[&str] = &[
    "0.0.0.0/8",       // "this network", unspecified
    "10.0.0.0/8",      // private
    "100.64.0.0/10",   // shared address space (carrier-grade NAT)
    "127.0.0.0/8",     // loopback
    "169.254.0.0/16",  // link-local, the cloud metadata service (169.254.169.254)
    "172.16.0.0/12",   // private
    "192.0.0.0/24",    // IETF protocol assignments
    "192.0.2.0/24",    // documentation
    "192.88.99.0/24",  // 6to4 relay anycast
    "192.168.0.0/16",  // private
    "198.18.0.0/15",   // benchmarking
    "198.51.100.0/24", // documentation
    "203.0.113.0/24",  // documentation
    "224.0.0.0/4",     // multicast
    "240.0.0.0/4",     // reserved, and the broadcast address
    "::/128",          // unspecified
    "::1/128",         // loopback
    "64:ff9b:1::/48",  // local-use IPv4/IPv6 translation
    "100::/64",        // discard-only
    "2001::/23",       // IETF protocol assignments (Teredo, benchmarking 2001:2::/48, ORCHID)
    "2001:db8::/32",   // documentation
    "3fff::/20",       // documentation
    "5f00::/16",       // segment routing
    "fc00::/7",        // unique local (the metadata service's fd00:ec2::254)
    "fe80::/10",       // link-local
    "fec0::/10",       // site-local (deprecated)
    "ff00::/8",        // multicast
];

static NOT_PUBLIC_NETS: LazyLock<Vec<IpNet>> = LazyLock::new(|| {
    NOT_PUBLIC
        .iter()
        .map(|n| n.parse().expect("a built-in range"))
        .collect()
});

/// A call the policy refused: where it was going and the address refused. Its text is the
/// only thing that tells a refusal from a closed port.
#[derive(Debug, Clone, thiserror::Error)]
#[error(
    "the egress policy refused the address of {host} (not a public address; webhooks.allow_nets can allow it)"
)]
pub struct Refused {
    /// The host as the URL names it.
    pub host: String,
    /// The address refused.
    pub ip: IpAddr,
}

/// Which addresses a webhook call may connect to.
#[derive(Debug, Clone, Default)]
pub struct Egress {
    allow: Vec<IpNet>,
    deny: Vec<IpNet>,
    /// Host names whose addresses are not checked: the operator's egress proxy.
    trusted: Vec<String>,
}

impl Egress {
    /// A policy with these allowed and denied ranges (deny wins).
    pub fn new(allow: Vec<IpNet>, deny: Vec<IpNet>) -> Self {
        Egress {
            allow,
            deny,
            trusted: Vec::new(),
        }
    }

    /// Trusts `host` (the egress proxy the operator set): its addresses are not checked.
    pub fn trust(&mut self, host: &str) {
        self.trusted.push(host.to_ascii_lowercase());
    }

    /// Whether a connection to `ip` is allowed.
    pub fn allows(&self, ip: IpAddr) -> bool {
        let forms = forms(ip);
        let any_in = |nets: &[IpNet]| {
            forms
                .iter()
                .flatten()
                .any(|f| nets.iter().any(|n| n.contains(f)))
        };
        if any_in(&self.deny) {
            return false;
        }
        if any_in(&self.allow) {
            return true;
        }
        !any_in(&NOT_PUBLIC_NETS)
    }

    /// Checks a URL's literal address, if it names one (a host name is checked once
    /// resolved, by [`PolicyResolver`]).
    pub fn check_url(&self, url: &Url) -> Result<(), Refused> {
        let ip = match url.host() {
            Some(Host::Ipv4(ip)) => IpAddr::V4(ip),
            Some(Host::Ipv6(ip)) => IpAddr::V6(ip),
            _ => return Ok(()),
        };
        if self.allows(ip) {
            Ok(())
        } else {
            Err(Refused {
                host: url.host_str().unwrap_or_default().to_string(),
                ip,
            })
        }
    }

    fn trusts(&self, host: &str) -> bool {
        self.trusted.iter().any(|t| t.eq_ignore_ascii_case(host))
    }
}

/// An address and the IPv4 address embedded in it, if any (IPv4-mapped, IPv4-translated,
/// IPv4-compatible, NAT64 and 6to4 forms): a policy on the IPv4 address holds for every
/// spelling of it.
fn forms(ip: IpAddr) -> [Option<IpAddr>; 2] {
    let embedded = match ip {
        IpAddr::V4(_) => None,
        IpAddr::V6(v6) => embedded_v4(v6).map(IpAddr::V4),
    };
    [Some(ip), embedded]
}

fn embedded_v4(v6: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = v6.segments();
    let o = v6.octets();
    let last = Ipv4Addr::new(o[12], o[13], o[14], o[15]);
    // IPv4-translated (RFC 2765, ::ffff:0:a.b.c.d), local-use NAT64 (RFC 8215), NAT64
    // (64:ff9b::/96), and IPv4-compatible (deprecated: ::a.b.c.d, but not :: or ::1): the
    // IPv4 address in the last 32 bits.
    let last_32 = s[..6] == [0, 0, 0, 0, 0xffff, 0]
        || s[..3] == [0x64, 0xff9b, 1]
        || s[..6] == [0x64, 0xff9b, 0, 0, 0, 0]
        || (s[..6] == [0; 6] && u32::from(last) > 1);
    if let Some(v4) = v6.to_ipv4_mapped() {
        Some(v4)
    } else if last_32 {
        Some(last)
    } else if s[0] == 0x2002 {
        Some(Ipv4Addr::new(o[2], o[3], o[4], o[5])) // 6to4
    } else {
        None
    }
}

/// Resolves host names for the webhook client and keeps only the addresses the policy
/// allows; a name with none left fails with [`Refused`].
pub struct PolicyResolver {
    egress: Arc<Egress>,
}

impl PolicyResolver {
    /// A resolver that keeps what `egress` allows.
    pub fn new(egress: Arc<Egress>) -> Self {
        PolicyResolver { egress }
    }
}

impl reqwest::dns::Resolve for PolicyResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let egress = self.egress.clone();
        let host = name.as_str().to_string();
        Box::pin(async move {
            let found: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            if egress.trusts(&host) {
                return Ok(Box::new(found.into_iter()) as reqwest::dns::Addrs);
            }
            let (allowed, refused): (Vec<SocketAddr>, Vec<SocketAddr>) =
                found.into_iter().partition(|a| egress.allows(a.ip()));
            match (allowed.is_empty(), refused.first()) {
                (true, Some(first)) => Err(Box::new(Refused {
                    host,
                    ip: first.ip(),
                })
                    as Box<dyn std::error::Error + Send + Sync>),
                _ => Ok(Box::new(allowed.into_iter()) as reqwest::dns::Addrs),
            }
        })
    }
}

/// The policy's refusal in an error's chain of sources, if that is what failed.
pub fn refusal<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a Refused> {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(r) = err.downcast_ref::<Refused>() {
            return Some(r);
        }
        cur = err.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(policy: &Egress, url: &str) -> bool {
        let url = Url::parse(url).unwrap();
        policy.check_url(&url).is_err()
    }

    /// Every spelling of a non-public address is refused by default; the URL parser
    /// normalises the IPv4 forms, and the embedded IPv4 of an IPv6 form is checked too.
    #[test]
    fn every_spelling_of_a_non_public_address_is_refused_by_default() {
        let p = Egress::default();
        for url in [
            "http://127.0.0.1/",
            "http://127.1/",
            "http://2130706433/",
            "http://0x7f000001/",
            "http://0x7f.0.0.1/",
            "http://0177.0.0.1/",
            "http://017700000001/",
            "http://[::1]/",
            "http://[::]/",
            "http://0.0.0.0/",
            "http://0/",
            "http://[::ffff:127.0.0.1]/",
            "http://[::ffff:7f00:1]/",
            "http://[::ffff:0:7f00:1]/",
            "http://[::ffff:0:a9fe:a9fe]/",
            "http://[64:ff9b:1::a9fe:a9fe]/",
            "http://[0:0:0:0:0:ffff:169.254.169.254]/",
            "http://[::127.0.0.1]/",
            "http://[64:ff9b::a9fe:a9fe]/",
            "http://[2002:a9fe:a9fe::1]/",
            "http://169.254.169.254/latest/meta-data/",
            "http://[fd00:ec2::254]/",
            "http://[fe80::1]/",
            "http://10.1.2.3/",
            "http://172.16.0.1/",
            "http://172.31.255.255/",
            "http://192.168.1.1/",
            "http://100.64.0.1/",
            "http://198.18.0.1/",
            "http://192.0.2.1/",
            "http://198.51.100.1/",
            "http://203.0.113.1/",
            "http://224.0.0.1/",
            "http://255.255.255.255/",
            "http://[ff02::1]/",
            "http://[2001:db8::1]/",
            "http://[fc00::1]/",
        ] {
            assert!(refused(&p, url), "{url} must be refused by default");
        }
        for url in [
            "http://93.184.215.14/",
            "http://1.1.1.1/",
            "http://172.32.0.1/",
            "http://[2606:4700::1111]/",
            "http://[::ffff:1.1.1.1]/",
            "https://example.com/",
        ] {
            assert!(!refused(&p, url), "{url} is public");
        }
    }

    #[test]
    fn allow_nets_allow_every_spelling_and_deny_nets_win() {
        let p = Egress::new(
            vec!["127.0.0.0/8".parse().unwrap(), "::1/128".parse().unwrap()],
            vec![
                "127.0.0.2/32".parse().unwrap(),
                "1.1.1.0/24".parse().unwrap(),
            ],
        );
        for url in [
            "http://127.0.0.1/",
            "http://2130706433/",
            "http://127.1/",
            "http://[::1]/",
            "http://[::ffff:127.0.0.1]/",
        ] {
            assert!(!refused(&p, url), "{url} is allowed");
        }
        assert!(refused(&p, "http://127.0.0.2/"), "deny wins over allow");
        assert!(
            refused(&p, "http://[::ffff:127.0.0.2]/"),
            "in every spelling"
        );
        assert!(
            refused(&p, "http://[::ffff:0:7f00:2]/"),
            "the IPv4-translated spelling too"
        );
        assert!(
            refused(&p, "http://[::ffff:0:101:101]/"),
            "a denied public address, IPv4-translated"
        );
        assert!(
            refused(&p, "http://1.1.1.1/"),
            "deny refuses a public address"
        );
        assert!(
            refused(&p, "http://10.0.0.1/"),
            "what is not allowed stays refused"
        );
    }
}
