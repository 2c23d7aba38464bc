package webhookdelivery

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

// clusterPolicy denies a cluster's Service and pod CIDRs.
var clusterPolicy = Policy{Denied: []netip.Prefix{
	netip.MustParsePrefix("10.96.0.0/12"),
	netip.MustParsePrefix("10.244.0.0/16"),
	netip.MustParsePrefix("fd00:10:96::/112"),
}}

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
		{"169.254.169.254", clusterPolicy, "link-local"},
		{"::ffff:169.254.169.254", clusterPolicy, "link-local"},
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
		{"169.254.169.254", allowLoopback, "link-local"},
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
		{"https://169.254.169.254/latest/meta-data/", clusterPolicy, "link-local"},
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
