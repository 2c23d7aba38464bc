package webhookdelivery

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"syscall"
)

// ErrRefused is what a delivery's error wraps when Policy refused the endpoint's address or
// URL: retrying helps only if the name comes to resolve elsewhere or the platform allows it.
var ErrRefused = errors.New("refused by the webhook network policy")

// Policy says which endpoints the sender may call. Its zero value refuses plain HTTP and every
// address that reaches the sender's own host or what only the cluster should reach: loopback,
// link-local (the cloud metadata address 169.254.169.254 among them), unspecified ("this
// network"), multicast and broadcast, and their IPv4-mapped IPv6 forms.
type Policy struct {
	// Denied are further networks refused: the cluster's Service and pod CIDRs, the nodes'
	// network, whatever else a tenant's endpoint must not reach.
	Denied []netip.Prefix
	// Allowed are networks called even so (an in-cluster receiver, a test's loopback server):
	// an address in one of them is never refused.
	Allowed []netip.Prefix
	// AllowHTTP lets endpoints be plain http:// URLs, whose payloads anyone on the path reads.
	AllowHTTP bool
}

// alwaysDenied are the networks refused whatever Denied says, unless Allowed names them.
var alwaysDenied = []struct {
	prefix netip.Prefix
	what   string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "this network"},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
	{netip.MustParsePrefix("255.255.255.255/32"), "broadcast"},
	{netip.MustParsePrefix("::/128"), "unspecified"},
	{netip.MustParsePrefix("::1/128"), "loopback"},
	{netip.MustParsePrefix("fe80::/10"), "link-local"},
	{netip.MustParsePrefix("ff00::/8"), "multicast"},
}

// Check says why the sender may not connect to addr, or nil when it may. An IPv4-mapped IPv6
// address (::ffff:127.0.0.1) is judged as the IPv4 address it reaches, and so are the
// networks of Denied and Allowed.
func (p Policy) Check(addr netip.Addr) error {
	if !addr.IsValid() {
		return fmt.Errorf("%w: no address", ErrRefused)
	}
	a := addr.Unmap().WithZone("")
	for _, n := range p.Allowed {
		if unmapPrefix(n).Contains(a) {
			return nil
		}
	}
	for _, d := range alwaysDenied {
		if d.prefix.Contains(a) {
			return fmt.Errorf("%w: %s is %s", ErrRefused, addr, d.what)
		}
	}
	for _, n := range p.Denied {
		if unmapPrefix(n).Contains(a) {
			return fmt.Errorf("%w: %s is in the denied network %s", ErrRefused, addr, n)
		}
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
