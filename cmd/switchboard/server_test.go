package main

import (
	"net/netip"
	"testing"
)

func TestParsePrefix(t *testing.T) {
	tests := []struct {
		in      string
		want    string
		wantErr bool
	}{
		{"10.0.0.0/8", "10.0.0.0/8", false},
		{" 10.1.2.3/8 ", "10.0.0.0/8", false},
		{"192.0.2.1", "192.0.2.1/32", false},
		{"2001:db8::/32", "2001:db8::/32", false},
		{"::1", "::1/128", false},
		{"10.0.0.0/33", "", true},
		{"proxy.local", "", true},
		{"", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parsePrefix(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("parsePrefix(%q) error = %v, want error %v", tt.in, err, tt.wantErr)
			}
			if !tt.wantErr && got != netip.MustParsePrefix(tt.want) {
				t.Errorf("parsePrefix(%q) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}

func TestServerCommandDefaults(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "ops")
	cmd := newServerCommand()
	for flag, want := range map[string]string{
		"listen": ":8080", "system-namespace": "ops", "key-prefix": "sb", "panel-listen": "",
		"metrics-bind-address": ":8081", "health-probe-bind-address": ":8082", "auth-failure-burst": "20",
		"auth-failure-rate": "1", "rate-limit-clients": "65536", "last-used-interval": "1m0s",
		"shutdown-delay": "5s", "shutdown-timeout": "30s", "rate-limit-redis": "", "rate-limit-redis-timeout": "50ms",
	} {
		f := cmd.Flags().Lookup(flag)
		if f == nil {
			t.Errorf("--%s is missing", flag)
			continue
		}
		if f.DefValue != want {
			t.Errorf("--%s defaults to %q, want %q", flag, f.DefValue, want)
		}
	}
	if cmd.Flags().Lookup("zap-log-level") == nil {
		t.Error("the zap flags are missing")
	}
	t.Setenv("POD_NAMESPACE", "")
	if got := newServerCommand().Flags().Lookup("system-namespace").DefValue; got != "switchboard-system" {
		t.Errorf("without POD_NAMESPACE the system namespace defaults to %q", got)
	}
}

// TestServerCommandRefusesBadTrustedProxies: a bad CIDR stops the command before anything runs.
func TestServerCommandRefusesBadTrustedProxies(t *testing.T) {
	cmd := newServerCommand()
	cmd.SetArgs([]string{"--trusted-proxies", "not-a-cidr"})
	if err := cmd.Execute(); err == nil {
		t.Fatal("a bad --trusted-proxies value was accepted")
	}
}

func TestPanelFlags(t *testing.T) {
	server, panelCmd := newServerCommand(), newPanelCommand()
	for flag, want := range map[string]string{
		"panel-secure-cookies": "false", "panel-max-sessions": "1000", "panel-max-sessions-per-user": "10",
		"panel-login-rate": "0.2", "panel-login-burst": "10",
	} {
		for cmd, name := range map[string]string{"server": flag, "panel": flag[len("panel-"):]} {
			c := server
			if cmd == "panel" {
				c = panelCmd
			}
			f := c.Flags().Lookup(name)
			if f == nil {
				t.Errorf("switchboard %s has no --%s", cmd, name)
				continue
			}
			if f.DefValue != want {
				t.Errorf("switchboard %s --%s defaults to %q, want %q", cmd, name, f.DefValue, want)
			}
		}
	}
	if err := panelCmd.ParseFlags([]string{"--listen=:9000", "--secure-cookies", "--max-sessions=5"}); err != nil {
		t.Fatal(err)
	}
	for flag, want := range map[string]string{"listen": ":9000", "secure-cookies": "true", "max-sessions": "5", "health-probe-bind-address": ":8082"} {
		if got := panelCmd.Flags().Lookup(flag).Value.String(); got != want {
			t.Errorf("switchboard panel --%s = %q, want %q", flag, got, want)
		}
	}
}
