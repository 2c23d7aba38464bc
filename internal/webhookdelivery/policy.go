package webhookdelivery

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"syscall"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
)

// ErrRefused is what a delivery's error wraps when Policy refused the endpoint's address or
// URL: retrying helps only if the name comes to resolve elsewhere or the platform allows it.
var ErrRefused = errors.New("refused by the webhook network policy")

// Policy says which endpoints the sender may call. Its zero value refuses plain HTTP and every
// address that reaches the sender's own host or what only the cluster should reach: loopback,
// link-local, unspecified ("this network"), multicast and broadcast, Teredo, and their
// IPv4-mapped IPv6 forms. The cloud platforms' metadata and credential endpoints
// (metadataEndpoints) are refused whatever Denied and Allowed say. An IPv6 address that carries
// an IPv4 address the network may translate it to (NAT64, 6to4, IPv4-compatible,
// IPv4-translated) is judged twice, as itself and as that IPv4 address: refused when either is.
type Policy struct {
	// Denied are further networks refused: the cluster's Service and pod CIDRs, the nodes'
	// network, whatever else a tenant's endpoint must not reach.
	Denied []netip.Prefix
	// Allowed are networks called even so (an in-cluster receiver, a test's loopback server): an
	// address in one of them is not refused for itself, unless it is a metadata endpoint; a
	// translation address is still judged as the IPv4 address it carries.
	Allowed []netip.Prefix
	// AllowHTTP lets endpoints be plain http:// URLs, whose payloads anyone on the path reads.
	AllowHTTP bool
}

// PolicyOf is the webhook network policy a validated webhooks section of the configuration
// (internal/config) sets: the sender's, and the one the operator checks KeyWebhooks' URLs
// against.
func PolicyOf(w *configv1alpha1.WebhooksConfiguration) (Policy, error) {
	p := Policy{AllowHTTP: w.AllowHTTP}
	if w.DeniedNetworks != nil {
		p.Denied = []netip.Prefix{} // [] denies none: not the defaults
	}
	for _, n := range []struct {
		from []string
		to   *[]netip.Prefix
	}{{w.DeniedNetworks, &p.Denied}, {w.AllowedNetworks, &p.Allowed}} {
		for _, s := range n.from {
			prefix, err := netip.ParsePrefix(s)
			if err != nil {
				return Policy{}, fmt.Errorf("webhook network %q is not a CIDR", s)
			}
			*n.to = append(*n.to, prefix.Masked())
		}
	}
	return p, nil
}

// namedPrefix is a network the policy refuses, and what it is, to say why.
type namedPrefix struct {
	prefix netip.Prefix
	what   string
}

// metadataEndpoints are the addresses refused whatever Denied and Allowed say: the cloud
// platforms' instance metadata and credential endpoints, which hand whoever asks from a node or
// a pod that node's or that pod's cloud credentials, and where no receiver ever lives. This is
// the one list of them (docs/webhooks.md names each).
var metadataEndpoints = []namedPrefix{
	{netip.MustParsePrefix("169.254.169.254/32"), "the cloud metadata endpoint (AWS, Google Cloud, Azure, Oracle Cloud, OpenStack, DigitalOcean)"},
	{netip.MustParsePrefix("fd00:ec2::254/128"), "AWS's IPv6 instance metadata endpoint"},
	{netip.MustParsePrefix("169.254.170.2/32"), "AWS ECS's task metadata and credentials endpoint"},
	{netip.MustParsePrefix("169.254.170.23/32"), "the EKS Pod Identity Agent"},
	{netip.MustParsePrefix("fd00:ec2::23/128"), "the EKS Pod Identity Agent"},
	{netip.MustParsePrefix("fd20:ce::254/128"), "Google Cloud's IPv6 metadata endpoint"},
	{netip.MustParsePrefix("168.63.129.16/32"), "Azure's WireServer"},
	{netip.MustParsePrefix("100.100.100.200/32"), "Alibaba Cloud's metadata endpoint"},
	{netip.MustParsePrefix("169.254.0.23/32"), "Tencent Cloud's metadata endpoint"},
}

// alwaysDenied are the networks refused whatever Denied says, unless Allowed names them.
var alwaysDenied = []namedPrefix{
	{netip.MustParsePrefix("0.0.0.0/8"), "this network"},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
	{netip.MustParsePrefix("255.255.255.255/32"), "broadcast"},
	{netip.MustParsePrefix("::/128"), "unspecified"},
	{netip.MustParsePrefix("::1/128"), "loopback"},
	{netip.MustParsePrefix("fe80::/10"), "link-local"},
	{netip.MustParsePrefix("ff00::/8"), "multicast"},
	// Teredo (RFC 4380) hides its client's IPv4 address (inverted) and port in the address and
	// reaches it through a relay: no receiver is served there, and it is refused outright
	// rather than judged by addresses a relay, not this network, would reach.
	{netip.MustParsePrefix("2001::/32"), "Teredo"},
}

// Check says why the sender may not connect to addr, or nil when it may. An IPv4-mapped IPv6
// address (::ffff:127.0.0.1) is judged as the IPv4 address it reaches, and so are the
// networks of Denied and Allowed; a translation address (embeddedIPv4) is judged as itself and
// as each IPv4 address it carries.
func (p Policy) Check(addr netip.Addr) error {
	if !addr.IsValid() {
		return fmt.Errorf("%w: no address", ErrRefused)
	}
	a := addr.Unmap().WithZone("")
	if err := p.judge(addr.String(), a); err != nil {
		return err
	}
	for _, e := range embeddedIPv4(a) {
		if err := p.judge(fmt.Sprintf("%s (%s of %s)", addr, e.via, e.addr), e.addr); err != nil {
			return err
		}
	}
	return nil
}

// judge says why a, named as subject, is refused: a metadata endpoint whatever Allowed says,
// else nothing Allowed names, else always denied or Denied.
func (p Policy) judge(subject string, a netip.Addr) error {
	for _, m := range metadataEndpoints {
		if m.prefix.Contains(a) {
			return fmt.Errorf("%w: %s is %s, never called", ErrRefused, subject, m.what)
		}
	}
	for _, n := range p.Allowed {
		if unmapPrefix(n).Contains(a) {
			return nil
		}
	}
	for _, d := range alwaysDenied {
		if d.prefix.Contains(a) {
			return fmt.Errorf("%w: %s is %s", ErrRefused, subject, d.what)
		}
	}
	for _, n := range p.Denied {
		if unmapPrefix(n).Contains(a) {
			return fmt.Errorf("%w: %s is in the denied network %s", ErrRefused, subject, n)
		}
	}
	return nil
}

// embedded is an IPv4 address an IPv6 one carries, and the mechanism that would reach it.
type embedded struct {
	addr netip.Addr
	via  string
}

// The translation prefixes whose addresses carry an IPv4 address.
var (
	// nat64 is NAT64's well-known prefix (RFC 6052): the IPv4 address in the last 32 bits.
	nat64 = netip.MustParsePrefix("64:ff9b::/96")
	// nat64Local is NAT64's local-use prefix (RFC 8215), of which a network uses a /48 to /96.
	nat64Local = netip.MustParsePrefix("64:ff9b:1::/48")
	// sixToFour is 6to4 (RFC 3056): the IPv4 address in bits 16 to 47.
	sixToFour = netip.MustParsePrefix("2002::/16")
	// ipv4Compatible are the deprecated IPv4-compatible addresses (RFC 4291), which a host with
	// an automatic tunnel sends to the IPv4 address in the last 32 bits.
	ipv4Compatible = netip.MustParsePrefix("::/96")
	// ipv4Translated are SIIT's IPv4-translated addresses (RFC 2765): ::ffff:0:a.b.c.d.
	ipv4Translated = netip.MustParsePrefix("::ffff:0:0:0/96")
)

// embeddedIPv4 returns the IPv4 addresses a (unmapped, without zone) carries for a translator
// or tunnel to reach. A local-use NAT64 address is read at each place RFC 6052 puts the IPv4
// address for the prefix lengths the /48 allows (48, 56, 64 and 96), since which one the
// network uses is not known here; a reading in 0.0.0.0/8, where the other lengths' zero padding
// lands and no translator sends, is left out, and the address is refused when any other
// reading is.
func embeddedIPv4(a netip.Addr) []embedded {
	if !a.Is6() {
		return nil
	}
	b := a.As16()
	v4 := func(w, x, y, z byte) netip.Addr { return netip.AddrFrom4([4]byte{w, x, y, z}) }
	switch {
	case nat64.Contains(a):
		return []embedded{{v4(b[12], b[13], b[14], b[15]), "NAT64"}}
	case nat64Local.Contains(a):
		var readings []embedded
		for _, r := range []embedded{
			{v4(b[6], b[7], b[9], b[10]), "NAT64 /48"},
			{v4(b[7], b[9], b[10], b[11]), "NAT64 /56"},
			{v4(b[9], b[10], b[11], b[12]), "NAT64 /64"},
			{v4(b[12], b[13], b[14], b[15]), "NAT64 /96"},
		} {
			if r.addr.As4()[0] != 0 {
				readings = append(readings, r)
			}
		}
		return readings
	case sixToFour.Contains(a):
		return []embedded{{v4(b[2], b[3], b[4], b[5]), "6to4"}}
	case ipv4Compatible.Contains(a) && a != netip.IPv6Unspecified() && a != netip.IPv6Loopback():
		return []embedded{{v4(b[12], b[13], b[14], b[15]), "IPv4-compatible"}}
	case ipv4Translated.Contains(a):
		return []embedded{{v4(b[12], b[13], b[14], b[15]), "IPv4-translated"}}
	}
	return nil
}

// unmapPrefix returns n as the IPv4 network it reaches when it is an IPv4-mapped IPv6 one
// (::ffff:10.96.0.0/108 is 10.96.0.0/12), else n.
func unmapPrefix(n netip.Prefix) netip.Prefix {
	a := n.Addr()
	if !a.Is4In6() || n.Bits() < 96 {
		return n
	}
	return netip.PrefixFrom(a.Unmap(), n.Bits()-96)
}

// ParseEndpoint checks an endpoint's URL as a subscription gives it: absolute, https (or
// http when AllowHTTP), a host, no user:password (a credential in a URL ends up in logs and
// statuses; the signature authenticates the sender, the URL path may carry a receiver's token)
// and no fragment. An address in the URL is checked too, so that a literal 127.0.0.1 is refused
// before anything is sent; names are checked when the sender connects.
func (p Policy) ParseEndpoint(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, errors.New("endpoint is not a URL")
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && p.AllowHTTP:
	case u.Scheme == "http":
		return nil, fmt.Errorf("%w: endpoint is http://; only https:// unless the platform allows plain HTTP", ErrRefused)
	default:
		return nil, fmt.Errorf("endpoint's scheme %q: https:// only", u.Scheme)
	}
	if u.Hostname() == "" {
		return nil, errors.New("endpoint has no host")
	}
	if u.User != nil {
		return nil, errors.New("endpoint has a user or password; put a receiver's token in its path or query")
	}
	if u.Fragment != "" || u.RawFragment != "" {
		return nil, errors.New("endpoint has a #fragment, which is never sent")
	}
	if addr, err := netip.ParseAddr(u.Hostname()); err == nil {
		if err := p.Check(addr); err != nil {
			return nil, err
		}
	}
	return u, nil
}

// control is the dialer's Control hook: it runs once the socket's remote address is known,
// after DNS resolution and before the connection is made, for every address tried, so that a
// name resolving to a refused address (at once or after a first check, by DNS rebinding) is
// refused as the address itself would be.
func (p Policy) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: remote address %q", ErrRefused, address)
	}
	return p.Check(ap.Addr())
}
