package webhookdelivery

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
)

// clusterPolicy denies a cluster's Service and pod CIDRs.
var clusterPolicy = Policy{Denied: []netip.Prefix{
	netip.MustParsePrefix("10.96.0.0/12"),
	netip.MustParsePrefix("10.244.0.0/16"),
	netip.MustParsePrefix("fd00:10:96::/112"),
}}

// allowAll is a platform that allows every network: only the metadata endpoints are refused.
var allowAll = Policy{Allowed: []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")}}

// TestPolicyCheck is the table of addresses Check refuses and lets through, with and without
// the platform's allowance.
func TestPolicyCheck(t *testing.T) {
	allowLoopback := clusterPolicy
	allowLoopback.Allowed = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	allowService := clusterPolicy
	allowService.Allowed = []netip.Prefix{netip.MustParsePrefix("10.96.0.10/32")}
	allowMapped := Policy{Allowed: []netip.Prefix{netip.MustParsePrefix("::ffff:127.0.0.0/104")}}
	denyMapped := Policy{Denied: []netip.Prefix{netip.MustParsePrefix("::ffff:10.96.0.0/108")}}

	for _, tc := range []struct {
		addr   string
		policy Policy
		want   string // "" when allowed, else in the error
	}{
		{"127.0.0.1", clusterPolicy, "loopback"},
		{"127.0.0.2", clusterPolicy, "loopback"},
		{"127.255.255.254", clusterPolicy, "loopback"},
		{"::1", clusterPolicy, "loopback"},
		{"::ffff:127.0.0.1", clusterPolicy, "loopback"},
		{"::ffff:7f00:2", clusterPolicy, "loopback"},
		{"169.254.169.254", clusterPolicy, "cloud metadata endpoint"},
		{"::ffff:169.254.169.254", clusterPolicy, "cloud metadata endpoint"},
		{"169.254.0.1", clusterPolicy, "link-local"},
		{"fe80::1", clusterPolicy, "link-local"},
		{"fe80::1%eth0", clusterPolicy, "link-local"},
		{"0.0.0.0", clusterPolicy, "this network"},
		{"0.1.2.3", clusterPolicy, "this network"},
		{"::", clusterPolicy, "unspecified"},
		{"224.0.0.1", clusterPolicy, "multicast"},
		{"239.255.255.250", clusterPolicy, "multicast"},
		{"ff02::1", clusterPolicy, "multicast"},
		{"255.255.255.255", clusterPolicy, "broadcast"},
		{"10.96.0.1", clusterPolicy, "denied network 10.96.0.0/12"},
		{"10.111.22.33", clusterPolicy, "denied network 10.96.0.0/12"},
		{"::ffff:10.96.0.1", clusterPolicy, "denied network 10.96.0.0/12"},
		{"10.244.3.7", clusterPolicy, "denied network 10.244.0.0/16"},
		{"fd00:10:96::a", clusterPolicy, "denied network fd00:10:96::/112"},
		{"10.96.0.1", denyMapped, "denied network ::ffff:10.96.0.0/108"},
		{"93.184.215.14", clusterPolicy, ""},
		{"2606:2800:21f:cb07:6820:80da:af6b:8b2c", clusterPolicy, ""},
		{"10.95.255.255", clusterPolicy, ""},
		{"10.112.0.0", clusterPolicy, ""},
		{"192.168.1.10", clusterPolicy, ""},
		// What the platform allows.
		{"127.0.0.1", allowLoopback, ""},
		{"::1", allowLoopback, ""},
		{"::ffff:127.0.0.1", allowLoopback, ""},
		{"127.0.0.1", allowMapped, ""},
		{"169.254.169.254", allowLoopback, "cloud metadata endpoint"},
		{"169.254.0.1", Policy{Allowed: []netip.Prefix{netip.MustParsePrefix("169.254.0.0/16")}}, ""},
		{"10.96.0.10", allowService, ""},
		{"10.96.0.11", allowService, "denied network"},
		{"fe80::1%eth0", Policy{Allowed: []netip.Prefix{netip.MustParsePrefix("fe80::/64")}}, ""},
	} {
		t.Run(tc.addr, func(t *testing.T) {
			err := tc.policy.Check(netip.MustParseAddr(tc.addr))
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && err == nil:
				t.Errorf("allowed, want refused (%s)", tc.want)
			case tc.want != "" && (!errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("error %q, want ErrRefused saying %q", err, tc.want)
			}
		})
	}
	if err := clusterPolicy.Check(netip.Addr{}); err == nil {
		t.Error("the zero address is allowed")
	}
}

// TestParseEndpoint is the table of endpoint URLs a subscription may and may not give.
func TestParseEndpoint(t *testing.T) {
	tenDenied := Policy{Denied: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}
	plain := clusterPolicy
	plain.AllowHTTP = true
	for _, tc := range []struct {
		raw    string
		policy Policy
		want   string // "" when accepted, else in the error
	}{
		{"https://hooks.example.com/switchboard", clusterPolicy, ""},
		{"https://hooks.example.com:8443/in?token=abc", clusterPolicy, ""},
		{"https://93.184.215.14/in", clusterPolicy, ""},
		{"http://hooks.example.com/in", clusterPolicy, "only https:// unless the platform allows plain HTTP"},
		{"http://hooks.example.com/in", plain, ""},
		{"ftp://hooks.example.com/in", plain, `scheme "ftp"`},
		{"hooks.example.com/in", clusterPolicy, `scheme ""`},
		{"/in", clusterPolicy, `scheme ""`},
		{"https:///in", clusterPolicy, "no host"},
		{"https://user:pw@hooks.example.com/in", clusterPolicy, "user or password"},
		{"https://hooks.example.com/in#x", clusterPolicy, "fragment"},
		{"https://hooks.example.com/in\x7f", clusterPolicy, "not a URL"},
		{"https://127.0.0.2/in", clusterPolicy, "loopback"},
		{"https://[::1]:8443/in", clusterPolicy, "loopback"},
		{"https://[::ffff:127.0.0.1]/in", clusterPolicy, "loopback"},
		{"https://169.254.169.254/latest/meta-data/", clusterPolicy, "cloud metadata endpoint"},
		{"https://[64:ff9b::a00:5]/", tenDenied, "NAT64 of 10.0.0.5) is in the denied network 10.0.0.0/8"},
		{"https://[64:ff9b::5db8:d70e]/", tenDenied, ""},
		{"https://[fd00:ec2::254]/latest/meta-data/", allowAll, "AWS's IPv6 instance metadata endpoint"},
		{"https://100.100.100.200/latest/meta-data/", allowAll, "Alibaba Cloud's metadata endpoint"},
		{"https://10.96.0.1/", clusterPolicy, "denied network"},
		// A name is checked when the sender connects (TestSendRefuses), not here.
		{"https://localhost/in", clusterPolicy, ""},
	} {
		t.Run(tc.raw, func(t *testing.T) {
			u, err := tc.policy.ParseEndpoint(tc.raw)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && err == nil:
				t.Errorf("accepted as %s, want refused (%s)", u, tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Errorf("error %q does not say %q", err, tc.want)
			}
			if err != nil && strings.Contains(tc.raw, "pw@") && strings.Contains(err.Error(), "pw") {
				t.Errorf("error %q quotes the password", err)
			}
		})
	}
}

// TestPolicyCheckTranslation is the table of the IPv6 addresses that carry an IPv4 address a
// translator or tunnel reaches (NAT64 well-known and local-use, 6to4, IPv4-compatible,
// IPv4-translated), and of Teredo: each judged as the IPv4 address it carries, refused with
// what refuses that address, and let through when that address is public.
func TestPolicyCheckTranslation(t *testing.T) {
	tenDenied := Policy{Denied: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}
	allowOne := Policy{
		Denied:  []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")},
		Allowed: []netip.Prefix{netip.MustParsePrefix("10.0.0.5/32")},
	}
	allowNAT64 := Policy{
		Denied:  []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")},
		Allowed: []netip.Prefix{netip.MustParsePrefix("64:ff9b::/96")},
	}
	for _, tc := range []struct {
		addr   string
		policy Policy
		want   string // "" when allowed, else in the error
	}{
		// NAT64, the well-known prefix 64:ff9b::/96: the IPv4 address in the last 32 bits.
		{"64:ff9b::a00:5", tenDenied, "64:ff9b::a00:5 (NAT64 of 10.0.0.5) is in the denied network 10.0.0.0/8"},
		{"64:ff9b::10.0.0.5", clusterPolicy, ""}, // 10.0.0.5 is in none of clusterPolicy's networks
		{"64:ff9b::10.96.0.1", clusterPolicy, "NAT64 of 10.96.0.1) is in the denied network 10.96.0.0/12"},
		{"64:ff9b::127.0.0.1", clusterPolicy, "NAT64 of 127.0.0.1) is loopback"},
		{"64:ff9b::169.254.0.1", clusterPolicy, "NAT64 of 169.254.0.1) is link-local"},
		{"64:ff9b::169.254.169.254", clusterPolicy, "NAT64 of 169.254.169.254) is the cloud metadata endpoint"},
		{"64:ff9b::100.100.100.200", allowAll, "Alibaba Cloud's metadata endpoint"},
		{"64:ff9b::0.0.0.0", clusterPolicy, "this network"},
		{"64:ff9b::224.0.0.1", clusterPolicy, "multicast"},
		{"64:ff9b::5db8:d70e", tenDenied, ""}, // 93.184.215.14
		{"64:ff9b::8.8.8.8", clusterPolicy, ""},
		// What the platform allows: the IPv4 address it reaches.
		{"64:ff9b::a00:5", allowOne, ""},
		{"64:ff9b::a00:6", allowOne, "NAT64 of 10.0.0.6) is in the denied network 10.0.0.0/8"},
		// Allowing the NAT64 prefix itself does not allow what it translates to.
		{"64:ff9b::a00:5", allowNAT64, "NAT64 of 10.0.0.5) is in the denied network 10.0.0.0/8"},
		{"64:ff9b::8.8.8.8", allowNAT64, ""},
		// NAT64, the local-use prefix 64:ff9b:1::/48 (TestPolicyCheckLocalUseNAT64 places the
		// IPv4 address at each prefix length).
		{"64:ff9b:1::10.0.0.5", tenDenied, "64:ff9b:1::a00:5 (NAT64 /96 of 10.0.0.5) is in the denied network 10.0.0.0/8"},
		{"64:ff9b:1::127.0.0.1", clusterPolicy, "(NAT64 /96 of 127.0.0.1) is loopback"},
		{"64:ff9b:1::8.8.8.8", tenDenied, ""},
		{"64:ff9b:1::", tenDenied, ""}, // every reading 0.0.0.0: nothing a translator reaches
		// 6to4, 2002::/16: the IPv4 address in bits 16 to 47.
		{"2002:a00:5::1", tenDenied, "2002:a00:5::1 (6to4 of 10.0.0.5) is in the denied network 10.0.0.0/8"},
		{"2002:7f00:1::", clusterPolicy, "(6to4 of 127.0.0.1) is loopback"},
		{"2002:a9fe:a9fe::1", allowAll, "(6to4 of 169.254.169.254) is the cloud metadata endpoint"},
		{"2002:5db8:d70e::1", tenDenied, ""},
		{"2002:a00:5::1", allowOne, ""},
		// IPv4-compatible, ::/96 but :: and ::1: the IPv4 address in the last 32 bits.
		{"::10.0.0.5", tenDenied, "::a00:5 (IPv4-compatible of 10.0.0.5) is in the denied network 10.0.0.0/8"},
		{"::127.0.0.1", clusterPolicy, "(IPv4-compatible of 127.0.0.1) is loopback"},
		{"::169.254.169.254", allowAll, "(IPv4-compatible of 169.254.169.254) is the cloud metadata endpoint"},
		{"::2", clusterPolicy, "(IPv4-compatible of 0.0.0.2) is this network"},
		{"::8.8.8.8", tenDenied, ""},
		{"::", clusterPolicy, "is unspecified"},
		{"::1", clusterPolicy, "::1 is loopback"},
		// IPv4-translated (SIIT), ::ffff:0:0:0/96.
		{"::ffff:0:a00:5", tenDenied, "(IPv4-translated of 10.0.0.5) is in the denied network 10.0.0.0/8"},
		{"::ffff:0:7f00:1", clusterPolicy, "(IPv4-translated of 127.0.0.1) is loopback"},
		{"::ffff:0:808:808", tenDenied, ""},
		// IPv4-mapped: the address itself is the IPv4 one.
		{"::ffff:10.0.0.5", tenDenied, "::ffff:10.0.0.5 is in the denied network 10.0.0.0/8"},
		// Teredo, 2001::/32: refused outright, its addresses hidden; allowed only by name.
		{"2001:0:4136:e378:8000:63bf:3fff:fdd2", clusterPolicy, "is Teredo"},
		{"2001::1", Policy{}, "is Teredo"},
		{"2001:0:4136:e378:8000:63bf:3fff:fdd2", Policy{Allowed: []netip.Prefix{netip.MustParsePrefix("2001::/32")}}, ""},
		// Neighbours of the prefixes are ordinary addresses.
		{"64:ff9b:2::a00:5", tenDenied, ""},
		{"2001:db8::a00:5", tenDenied, ""},
		{"2001:4860:4860::8888", tenDenied, ""},
		{"2003:a00:5::1", tenDenied, ""},
	} {
		t.Run(tc.addr, func(t *testing.T) {
			err := tc.policy.Check(netip.MustParseAddr(tc.addr))
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && err == nil:
				t.Errorf("allowed, want refused (%s)", tc.want)
			case tc.want != "" && (!errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("error %q, want ErrRefused saying %q", err, tc.want)
			}
		})
	}
}

// rfc6052 places v4 in the NAT64 prefix p as RFC 6052's section 2.2 does: from bit p.Bits()
// on, skipping bits 64 to 71 (the "u" octet, zero).
func rfc6052(p netip.Prefix, v4 netip.Addr) netip.Addr {
	b := p.Addr().As16()
	in := v4.As4()
	bit := p.Bits()
	for i := range 32 {
		if bit == 64 {
			bit = 72
		}
		if in[i/8]&(0x80>>(i%8)) != 0 {
			b[bit/8] |= 0x80 >> (bit % 8)
		}
		bit++
	}
	return netip.AddrFrom16(b)
}

// TestPolicyCheckLocalUseNAT64: an address of the local-use NAT64 prefix 64:ff9b:1::/48 is
// judged by the IPv4 address it carries whichever prefix length (48, 56, 64, 96) the network
// uses, the one RFC 6052 places it at.
func TestPolicyCheckLocalUseNAT64(t *testing.T) {
	tenDenied := Policy{Denied: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}
	for _, bits := range []int{48, 56, 64, 96} {
		p := netip.PrefixFrom(netip.MustParseAddr("64:ff9b:1::"), bits)
		for _, tc := range []struct {
			v4     string
			policy Policy
			want   string // "" when allowed, else in the error
		}{
			{"10.0.0.5", tenDenied, fmt.Sprintf("(NAT64 /%d of 10.0.0.5) is in the denied network 10.0.0.0/8", bits)},
			{"10.255.1.2", tenDenied, fmt.Sprintf("(NAT64 /%d of 10.255.1.2) is in the denied network 10.0.0.0/8", bits)},
			{"127.0.0.1", clusterPolicy, "is loopback"},
			{"169.254.169.254", allowAll, "is the cloud metadata endpoint"},
			{"100.100.100.200", allowAll, "Alibaba Cloud's metadata endpoint"},
			{"8.8.8.8", tenDenied, ""},
			{"93.184.215.14", tenDenied, ""},
			{"1.2.3.4", clusterPolicy, ""},
		} {
			addr := rfc6052(p, netip.MustParseAddr(tc.v4))
			t.Run(fmt.Sprintf("/%d %s %s", bits, tc.v4, addr), func(t *testing.T) {
				if !nat64Local.Contains(addr) {
					t.Fatalf("%s is not in %s", addr, nat64Local)
				}
				err := tc.policy.Check(addr)
				switch {
				case tc.want == "" && err != nil:
					t.Errorf("refused: %v", err)
				case tc.want != "" && err == nil:
					t.Errorf("allowed, want refused (%s)", tc.want)
				case tc.want != "" && (!errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), tc.want)):
					t.Errorf("error %q, want ErrRefused saying %q", err, tc.want)
				}
			})
		}
	}
}

// TestMetadataEndpointsAreAlwaysRefused: each metadata endpoint is refused by a policy that
// allows every network and denies none, as itself and in each form that reaches it (IPv4-mapped,
// NAT64, 6to4, IPv4-compatible).
func TestMetadataEndpointsAreAlwaysRefused(t *testing.T) {
	allowEach := Policy{}
	for _, m := range metadataEndpoints {
		allowEach.Allowed = append(allowEach.Allowed, m.prefix)
	}
	for _, m := range metadataEndpoints {
		a := m.prefix.Addr()
		forms := []netip.Addr{a}
		if a.Is4() {
			b := a.As4()
			forms = append(forms,
				netip.AddrFrom16([16]byte{10: 0xff, 11: 0xff, 12: b[0], 13: b[1], 14: b[2], 15: b[3]}),
				netip.AddrFrom16([16]byte{0: 0x00, 1: 0x64, 2: 0xff, 3: 0x9b, 12: b[0], 13: b[1], 14: b[2], 15: b[3]}),
				netip.AddrFrom16([16]byte{0: 0x20, 1: 0x02, 2: b[0], 3: b[1], 4: b[2], 5: b[3], 15: 1}),
				netip.AddrFrom16([16]byte{12: b[0], 13: b[1], 14: b[2], 15: b[3]}),
			)
		}
		for _, f := range forms {
			for name, p := range map[string]Policy{"allowing everything": allowAll, "allowing the endpoint": allowEach} {
				err := p.Check(f)
				if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), m.what) {
					t.Errorf("%s (%s), %s: %v, want refused as %s", f, a, name, err, m.what)
				}
			}
		}
	}
}

// TestWebhooksDocNamesThePolicy: docs/webhooks.md names every metadata endpoint refused and
// every translation prefix judged, so that the list and the page cannot drift.
func TestWebhooksDocNamesThePolicy(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "webhooks.md"))
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, m := range metadataEndpoints {
		want = append(want, "`"+m.prefix.Addr().String()+"`")
	}
	for _, n := range []netip.Prefix{nat64, nat64Local, sixToFour, ipv4Compatible, ipv4Translated} {
		want = append(want, "`"+n.String()+"`")
	}
	for _, d := range alwaysDenied {
		if d.what == "Teredo" {
			want = append(want, "`"+d.prefix.String()+"`")
		}
	}
	for _, w := range want {
		if !strings.Contains(string(doc), w) {
			t.Errorf("docs/webhooks.md does not name %s", w)
		}
	}
}

// The webhooks section's networks become the sender's policy: absent, the defaults; [] none
// beyond the always refused; addresses masked to their network.
func TestPolicyOf(t *testing.T) {
	for _, tt := range []struct {
		name         string
		denied       []string
		allowed      []string
		wantDenied   string
		wantAllowed  string
		wantNonNil   bool
		wantErrorFor string
	}{
		{name: "defaulted", wantDenied: "[10.0.0.0/8 172.16.0.0/12 192.168.0.0/16 100.64.0.0/10 fc00::/7]", wantAllowed: "[]", wantNonNil: true},
		{name: "none denied", denied: []string{}, wantDenied: "[]", wantAllowed: "[]", wantNonNil: true},
		{name: "masked", denied: []string{"10.96.0.1/12"}, allowed: []string{"fd00::1/8"}, wantDenied: "[10.96.0.0/12]", wantAllowed: "[fd00::/8]", wantNonNil: true},
		{name: "not a CIDR", denied: []string{"10.96.0.1"}, wantErrorFor: `"10.96.0.1"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := &configv1alpha1.WebhooksConfiguration{DeniedNetworks: tt.denied, AllowedNetworks: tt.allowed}
			if tt.name == "defaulted" {
				configv1alpha1.SetDefaults_WebhooksConfiguration(w)
			}
			p, err := PolicyOf(w)
			if tt.wantErrorFor != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErrorFor) {
					t.Fatalf("error %v, want one naming %s", err, tt.wantErrorFor)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprint(p.Denied); got != tt.wantDenied || fmt.Sprint(p.Allowed) != tt.wantAllowed || (p.Denied != nil) != tt.wantNonNil {
				t.Errorf("denied %v (nil %t), allowed %v; want %s, %s", p.Denied, p.Denied == nil, p.Allowed, tt.wantDenied, tt.wantAllowed)
			}
		})
	}
}
