package loopback

import (
	"net/url"
	"regexp"
	"testing"
)

func TestShared(t *testing.T) {
	tests := []struct {
		host string
		want bool
	}{
		{"127.0.0.1:8083", true},
		{"127.0.0.1", true},
		{"127.1.2.3:80", true},
		{"[::1]:8083", true},
		{"::1", true},
		{"[::ffff:127.0.0.1]:80", true},
		{"localhost:8083", true},
		{"LOCALHOST", true},
		{"localhost.:80", true},
		{"0.0.0.0:8083", true},
		{"[::]:8083", true},
		{"sb-3jx7q2c4ltdw5k9a.localhost:8083", false},
		{"panel.example.com", false},
		{"10.0.0.7:8083", false},
		{"[2001:db8::1]:443", false},
		{"", false},
	}
	for _, tt := range tests {
		t.Run(tt.host, func(t *testing.T) {
			if got := Shared(tt.host); got != tt.want {
				t.Fatalf("Shared(%q) = %t, want %t", tt.host, got, tt.want)
			}
		})
	}
}

var private = regexp.MustCompile(`^sb-[a-z2-7]{16}\.localhost$`)

func TestPrivateHost(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		h := PrivateHost()
		if !private.MatchString(h) || Shared(h) || seen[h] {
			t.Fatalf("PrivateHost() = %q (seen before: %t)", h, seen[h])
		}
		seen[h] = true
	}
}

func TestPrivateURL(t *testing.T) {
	tests := []struct {
		address string
		private bool
	}{
		{"127.0.0.1:8083", true},
		{"[::1]:9000", true},
		{"localhost:1", true},
		{"0.0.0.0:8083", true},
		{"10.0.0.7:8083", false},
		{"panel.example.com:443", false},
		{"127.0.0.1", false}, // no port to keep
	}
	for _, tt := range tests {
		t.Run(tt.address, func(t *testing.T) {
			got := PrivateURL(tt.address)
			if !tt.private {
				if got != "" {
					t.Fatalf("PrivateURL(%q) = %q, want none", tt.address, got)
				}
				return
			}
			u, err := url.Parse(got)
			if err != nil || u.Scheme != "http" || !private.MatchString(u.Hostname()) || u.Path != "/" {
				t.Fatalf("PrivateURL(%q) = %q", tt.address, got)
			}
			if _, want, _ := cutPort(tt.address); u.Port() != want {
				t.Fatalf("PrivateURL(%q) = %q: port %s, want %s", tt.address, got, u.Port(), want)
			}
		})
	}
}

func cutPort(address string) (string, string, bool) {
	u, err := url.Parse("http://" + address)
	if err != nil {
		return "", "", false
	}
	return u.Hostname(), u.Port(), true
}
