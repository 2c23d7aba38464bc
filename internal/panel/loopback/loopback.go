// Package loopback gives a local web page a host of its own. Browsers scope cookies by host,
// not by port, and SameSite counts every port of one host as one site: a page served on
// 127.0.0.1 or localhost shares its cookies with every other local web app the person visits.
// A name under .localhost, which browsers resolve to the loopback address themselves (RFC 6761),
// is a host that no other app shares, as long as nobody else knows the name.
package loopback

import (
	"crypto/rand"
	"encoding/base32"
	"net"
	"net/netip"
	"strings"
)

// privatePrefix begins every private host name.
const privatePrefix = "sb-"

// PrivateHost returns a new host name of 80 random bits under .localhost, such as
// "sb-3jx7q2c4ltdw5k9a.localhost".
func PrivateHost() string {
	var b [10]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return privatePrefix + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:])) + ".localhost"
}

// Shared reports whether hostport, a Host header or a listen address, names a host that every
// local web app shares: a loopback address (127.0.0.0/8, ::1), "localhost", or an unspecified
// address (0.0.0.0, ::) that a browser reaches as one of them. Names under .localhost are not
// shared: each is a host of its own.
func Shared(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") || strings.EqualFold(host, "localhost.") {
		return true
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	addr = addr.WithZone("").Unmap()
	return addr.IsLoopback() || addr.IsUnspecified()
}

// PrivateURL returns http://<PrivateHost>:port/ for a panel listening on a shared loopback
// address, and "" when address (host:port) is not one: then the address is the panel's own.
func PrivateURL(address string) string {
	if !Shared(address) {
		return ""
	}
	_, port, err := net.SplitHostPort(address)
	if err != nil || port == "" {
		return ""
	}
	return "http://" + net.JoinHostPort(PrivateHost(), port) + "/"
}
