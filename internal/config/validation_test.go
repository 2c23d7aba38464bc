package config

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
)

func dur(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }

// Each mistake is named by its field's path; the defaults and the disabled spellings (an empty
// address, a 0 bound) are valid.
func TestValidateServerConfiguration(t *testing.T) {
	tests := []struct {
		name   string
		modify func(*configv1alpha1.ServerConfiguration)
		want   string // the error's field path and words; "" for valid
	}{
		{name: "defaults", modify: func(*configv1alpha1.ServerConfiguration) {}},
		{name: "every bound off", modify: func(c *configv1alpha1.ServerConfiguration) {
			c.MaxConnections, c.MaxConnectionsPerClient, c.MaxInFlightBytesPerNamespace = ptr.To[int32](0), ptr.To[int32](0), ptr.To[int64](0)
			c.Authz.HTTP.MaxConnections, c.AuthFailureLimit.Rate, c.ShutdownDelay = ptr.To[int32](0), ptr.To(0.0), dur(0)
			c.MetricsBindAddress, c.HealthProbeBindAddress = ptr.To(""), ptr.To("")
		}},
		{name: "no listen address", modify: func(c *configv1alpha1.ServerConfiguration) { c.Listen = ptr.To("") }, want: "listen: Required value"},
		{name: "a bad key prefix", modify: func(c *configv1alpha1.ServerConfiguration) { c.KeyPrefix = "SB" }, want: `keyPrefix: Invalid value: "SB"`},
		{name: "a bad audience", modify: func(c *configv1alpha1.ServerConfiguration) { c.Audience = "-x" }, want: "audience: Invalid value"},
		{name: "a bad proxy", modify: func(c *configv1alpha1.ServerConfiguration) { c.TrustedProxies = []string{"10.0.0.0/8", "proxy"} },
			want: `trustedProxies[1]: Invalid value: "proxy"`},
		{name: "a negative bound", modify: func(c *configv1alpha1.ServerConfiguration) { c.MaxConnections = ptr.To[int32](-1) },
			want: "maxConnections: Invalid value: -1: must be at least 0"},
		{name: "no failure burst", modify: func(c *configv1alpha1.ServerConfiguration) { c.AuthFailureLimit.Burst = ptr.To[int32](0) },
			want: "authFailureLimit.burst: Invalid value: 0"},
		{name: "not a Redis URL", modify: func(c *configv1alpha1.ServerConfiguration) { c.RateLimitRedis.URL = "http://u:secret@redis" },
			want: "rateLimitRedis.url: Invalid value: \"(not shown)\""},
		{name: "a Redis password file without a URL", modify: func(c *configv1alpha1.ServerConfiguration) { c.RateLimitRedis.PasswordFile = "/p" },
			want: "rateLimitRedis.passwordFile"},
		{name: "credits counted in memory, shared by 3 replicas", modify: func(c *configv1alpha1.ServerConfiguration) {
			c.RateLimitCredits.OnRedisFailure, c.RateLimitCredits.Replicas = configv1alpha1.CreditsOnRedisFailureCountInMemory, ptr.To[int32](3)
		}},
		{name: "a misspelt credits failure mode", modify: func(c *configv1alpha1.ServerConfiguration) { c.RateLimitCredits.OnRedisFailure = "countInMemory" },
			want: `rateLimitCredits.onRedisFailure: Unsupported value: "countInMemory": supported values: "Refuse", "CountInMemory"`},
		{name: "no replica shares the credits", modify: func(c *configv1alpha1.ServerConfiguration) { c.RateLimitCredits.Replicas = ptr.To[int32](0) },
			want: "rateLimitCredits.replicas: Invalid value: 0: must be from 1 to 1000"},
		{name: "Envoy's client-certificate header", modify: func(c *configv1alpha1.ServerConfiguration) { c.Binding.ClientCertHeader = "X-Forwarded-Client-Cert" }},
		{name: "a client-certificate header that is no header name", modify: func(c *configv1alpha1.ServerConfiguration) { c.Binding.ClientCertHeader = "X-Client Cert:" },
			want: `binding.clientCertHeader: Invalid value: "X-Client Cert:"`},
		{name: "no Redis timeout", modify: func(c *configv1alpha1.ServerConfiguration) { c.RateLimitRedis.Timeout = dur(0) }, want: "rateLimitRedis.timeout"},
		{name: "a negative shutdown delay", modify: func(c *configv1alpha1.ServerConfiguration) { c.ShutdownDelay = dur(-time.Second) }, want: "shutdownDelay"},
		{name: "no drain", modify: func(c *configv1alpha1.ServerConfiguration) { c.ShutdownTimeout = dur(0) }, want: "shutdownTimeout"},
		{name: "no last-used writes", modify: func(c *configv1alpha1.ServerConfiguration) { c.LastUsed.WritesPerSecond = ptr.To(0.0) }, want: "lastUsed.writesPerSecond"},
		{name: "a certificate without its key", modify: func(c *configv1alpha1.ServerConfiguration) { c.Authz.GRPC.TLSCertFile = "/c" },
			want: "authz.grpc.tlsKeyFile: Required value"},
		{name: "a client CA without TLS", modify: func(c *configv1alpha1.ServerConfiguration) { c.Authz.GRPC.ClientCAFile = "/ca" },
			want: "authz.grpc.tlsCertFile: Required value"},
		{name: "a tiny gRPC message", modify: func(c *configv1alpha1.ServerConfiguration) { c.Authz.GRPC.MaxMessageBytes = ptr.To[int32](100) },
			want: "authz.grpc.maxMessageBytes: Invalid value: 100"},
		{name: "leak reports, both ways", modify: func(c *configv1alpha1.ServerConfiguration) {
			c.LeakReports.Listen, c.LeakReports.Partner.Enabled = ":8090", true
			c.LeakReports.OrganizationAlerts.WebhookSecretFile, c.LeakReports.OrganizationAlerts.APITokenFile = "/s", "/t"
			c.LeakReports.OrganizationAlerts.Organization = "acme-corp"
		}},
		{name: "an organization's webhook without the organization", modify: func(c *configv1alpha1.ServerConfiguration) {
			c.LeakReports.OrganizationAlerts.WebhookSecretFile, c.LeakReports.OrganizationAlerts.APITokenFile = "/s", "/t"
		}, want: "leakReports.organizationAlerts.organization: Required value"},
		{name: "an organization without its webhook", modify: func(c *configv1alpha1.ServerConfiguration) {
			c.LeakReports.OrganizationAlerts.Organization = "acme"
		}, want: `leakReports.organizationAlerts.organization: Invalid value: "acme": needs webhookSecretFile`},
		{name: "an organization that is a path", modify: func(c *configv1alpha1.ServerConfiguration) {
			c.LeakReports.OrganizationAlerts.WebhookSecretFile, c.LeakReports.OrganizationAlerts.APITokenFile = "/s", "/t"
			c.LeakReports.OrganizationAlerts.Organization = "../repos"
		}, want: `leakReports.organizationAlerts.organization: Invalid value: "../repos"`},
		{name: "a catch-up every few seconds", modify: func(c *configv1alpha1.ServerConfiguration) {
			c.LeakReports.OrganizationAlerts.CatchUp.Period = dur(5 * time.Second)
		}, want: `leakReports.organizationAlerts.catchUp.period: Invalid value: "5s": must be at least 1m0s`},
		{name: "a catch-up without requests", modify: func(c *configv1alpha1.ServerConfiguration) {
			c.LeakReports.OrganizationAlerts.CatchUp.MaxRequests = ptr.To[int32](0)
		}, want: "leakReports.organizationAlerts.catchUp.maxRequests: Invalid value: 0"},
		{name: "no unverified requests at all", modify: func(c *configv1alpha1.ServerConfiguration) {
			c.LeakReports.UnverifiedLimit.Rate = ptr.To(0.0)
		}, want: "leakReports.unverifiedLimit.rate"},
		{name: "no client remembered", modify: func(c *configv1alpha1.ServerConfiguration) {
			c.LeakReports.UnverifiedLimit.Clients = ptr.To[int32](0)
		}, want: "leakReports.unverifiedLimit.clients: Invalid value: 0"},
		{name: "no replay remembered", modify: func(c *configv1alpha1.ServerConfiguration) { c.LeakReports.Replays.Entries = ptr.To[int32](0) },
			want: "leakReports.replays.entries: Invalid value: 0"},
		{name: "replays remembered for no time", modify: func(c *configv1alpha1.ServerConfiguration) { c.LeakReports.Replays.TTL = dur(0) },
			want: "leakReports.replays.ttl"},
		{name: "a leak reports listener serving nothing", modify: func(c *configv1alpha1.ServerConfiguration) { c.LeakReports.Listen = ":8090" },
			want: "leakReports.listen: Required value"},
		{name: "a webhook secret without a token", modify: func(c *configv1alpha1.ServerConfiguration) {
			c.LeakReports.OrganizationAlerts.WebhookSecretFile = "/s"
		}, want: "leakReports.organizationAlerts.apiTokenFile: Required value"},
		{name: "a token without a webhook secret", modify: func(c *configv1alpha1.ServerConfiguration) {
			c.LeakReports.OrganizationAlerts.APITokenFile = "/t"
		}, want: "leakReports.organizationAlerts.webhookSecretFile: Required value"},
		{name: "a relative keys URL", modify: func(c *configv1alpha1.ServerConfiguration) { c.LeakReports.Partner.PublicKeysURL = "/keys" },
			want: `leakReports.partner.publicKeysURL: Invalid value: "/keys"`},
		{name: "an API base with a query", modify: func(c *configv1alpha1.ServerConfiguration) {
			c.LeakReports.OrganizationAlerts.APIBaseURL = "https://ghe.example/api/v3?x=1"
		}, want: "leakReports.organizationAlerts.apiBaseURL: Invalid value"},
		{name: "no leak report batch", modify: func(c *configv1alpha1.ServerConfiguration) { c.LeakReports.MaxBatch = ptr.To[int32](0) },
			want: "leakReports.maxBatch: Invalid value: 0"},
		{name: "no leak report rate", modify: func(c *configv1alpha1.ServerConfiguration) { c.LeakReports.Rate = ptr.To(0.0) },
			want: "leakReports.rate"},
		{name: "a panel without sessions", modify: func(c *configv1alpha1.ServerConfiguration) {
			c.Panel = &configv1alpha1.ServerPanel{Listen: ":8083", PanelSettings: configv1alpha1.PanelSettings{MaxSessions: ptr.To[int32](0)}}
		}, want: "panel.maxSessions: Invalid value: 0"},
		{name: "a panel's half single sign-on", modify: func(c *configv1alpha1.ServerConfiguration) {
			c.Panel = &configv1alpha1.ServerPanel{Listen: ":8083", PanelSettings: configv1alpha1.PanelSettings{OIDC: &configv1alpha1.OIDC{ClientID: "panel"}}}
		}, want: "panel.oidc.issuerURL: Required value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &configv1alpha1.ServerConfiguration{}
			tt.modify(c)
			configv1alpha1.SetDefaults_ServerConfiguration(c)
			check(t, ValidateServerConfiguration(c).ToAggregate(), tt.want)
		})
	}
}

func TestValidateOperatorConfiguration(t *testing.T) {
	tests := []struct {
		name   string
		modify func(*configv1alpha1.OperatorConfiguration)
		want   string
	}{
		{name: "defaults", modify: func(*configv1alpha1.OperatorConfiguration) {}},
		{name: "never unused, no renewal floor, no key series", modify: func(c *configv1alpha1.OperatorConfiguration) {
			c.UnusedAfter, c.MinRenewalInterval = dur(0), dur(0)
			c.MinRenewalIntervalPercentage, c.KeyMetricsLimit = ptr.To[int32](0), ptr.To[int32](0)
		}},
		{name: "a bad key prefix", modify: func(c *configv1alpha1.OperatorConfiguration) { c.KeyPrefix = "1x" }, want: "keyPrefix: Invalid value"},
		{name: "no reveal TTL", modify: func(c *configv1alpha1.OperatorConfiguration) { c.RevealTTL = dur(0) }, want: "revealTTL"},
		{name: "a negative unused period", modify: func(c *configv1alpha1.OperatorConfiguration) { c.UnusedAfter = dur(-time.Hour) }, want: "unusedAfter"},
		{name: "LeakReports kept until their key is gone", modify: func(c *configv1alpha1.OperatorConfiguration) { c.LeakReportRetention = dur(0) }},
		{name: "a negative leak report retention", modify: func(c *configv1alpha1.OperatorConfiguration) { c.LeakReportRetention = dur(-time.Hour) },
			want: "leakReportRetention"},
		{name: "a percentage past 99", modify: func(c *configv1alpha1.OperatorConfiguration) { c.MinRenewalIntervalPercentage = ptr.To[int32](100) },
			want: "minRenewalIntervalPercentage: Invalid value: 100: must be at most 99"},
		{name: "no key workers", modify: func(c *configv1alpha1.OperatorConfiguration) { c.KeyWorkers = ptr.To[int32](0) }, want: "keyWorkers"},
		{name: "no QPS", modify: func(c *configv1alpha1.OperatorConfiguration) { c.KubeAPIQPS = ptr.To[float32](0) }, want: "kubeAPIQPS"},
		{name: "a webhook without names", modify: func(c *configv1alpha1.OperatorConfiguration) { c.Webhook.BindAddress = ":9443" },
			want: "webhook.names: Required value"},
		{name: "webhooks to loopback over plain HTTP", modify: func(c *configv1alpha1.OperatorConfiguration) {
			c.Webhooks.AllowedNetworks, c.Webhooks.DeniedNetworks, c.Webhooks.AllowHTTP = []string{"127.0.0.0/8", "::1/128"}, []string{}, true
		}},
		{name: "a denied network that is an address", modify: func(c *configv1alpha1.OperatorConfiguration) { c.Webhooks.DeniedNetworks = []string{"10.96.0.1"} },
			want: "webhooks.deniedNetworks[0]: Invalid value: \"10.96.0.1\": must be a CIDR"},
		{name: "an allowed network that is a name", modify: func(c *configv1alpha1.OperatorConfiguration) { c.Webhooks.AllowedNetworks = []string{"receiver.local"} },
			want: "webhooks.allowedNetworks[0]"},
		{name: "no webhook concurrency", modify: func(c *configv1alpha1.OperatorConfiguration) { c.Webhooks.Concurrency = ptr.To[int32](0) },
			want: "webhooks.concurrency"},
		{name: "a namespace's concurrency past the whole", modify: func(c *configv1alpha1.OperatorConfiguration) {
			c.Webhooks.Concurrency, c.Webhooks.PerNamespaceConcurrency = ptr.To[int32](4), ptr.To[int32](5)
		}, want: "webhooks.perNamespaceConcurrency: Invalid value: 5: must be at most concurrency (4)"},
		{name: "no attempt timeout", modify: func(c *configv1alpha1.OperatorConfiguration) { c.Webhooks.AttemptTimeout = dur(0) },
			want: "webhooks.attemptTimeout"},
		{name: "a signing namespace of its own", modify: func(c *configv1alpha1.OperatorConfiguration) {
			c.SystemNamespace, c.Webhooks.SigningNamespace = "ops", "ops-signing"
		}},
		{name: "the signing copies in the system namespace", modify: func(c *configv1alpha1.OperatorConfiguration) {
			c.SystemNamespace, c.Webhooks.SigningNamespace = "ops", "ops"
		}, want: `webhooks.signingNamespace: Invalid value: "ops": must differ from systemNamespace`},
		{name: "a signing namespace that is no name", modify: func(c *configv1alpha1.OperatorConfiguration) { c.Webhooks.SigningNamespace = "Signing_Copies" },
			want: `webhooks.signingNamespace: Invalid value: "Signing_Copies": must be a namespace's name`},
		{name: "a system namespace too long for the default signing namespace", modify: func(c *configv1alpha1.OperatorConfiguration) {
			c.SystemNamespace = strings.Repeat("s", 50)
		}, want: "webhooks.signingNamespace: Invalid value"},
		{name: "a reveal endpoint without names", modify: func(c *configv1alpha1.OperatorConfiguration) { c.Reveal.BindAddress = ":9445" },
			want: "reveal.names: Required value"},
		{name: "a webhook on no port", modify: func(c *configv1alpha1.OperatorConfiguration) {
			c.Webhook.BindAddress, c.Webhook.Names = "127.0.0.1", []string{"127.0.0.1"}
		}, want: `webhook.bindAddress: Invalid value: "127.0.0.1": must be HOST:PORT or :PORT`},
		{name: "a webhook on port 0", modify: func(c *configv1alpha1.OperatorConfiguration) {
			c.Webhook.BindAddress, c.Webhook.Names = ":0", []string{"127.0.0.1"}
		}, want: "webhook.bindAddress"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &configv1alpha1.OperatorConfiguration{}
			tt.modify(c)
			configv1alpha1.SetDefaults_OperatorConfiguration(c)
			check(t, ValidateOperatorConfiguration(c).ToAggregate(), tt.want)
		})
	}
}

func TestValidatePanelConfiguration(t *testing.T) {
	sso := func() *configv1alpha1.OIDC {
		return &configv1alpha1.OIDC{IssuerURL: "https://idp", ClientID: "panel", ClientSecretFile: "/s", RedirectURL: "https://p/oidc/callback"}
	}
	tests := []struct {
		name   string
		modify func(*configv1alpha1.PanelConfiguration)
		want   string
	}{
		{name: "defaults", modify: func(*configv1alpha1.PanelConfiguration) {}},
		{name: "single sign-on", modify: func(c *configv1alpha1.PanelConfiguration) { c.OIDC = sso() }},
		{name: "no listen address", modify: func(c *configv1alpha1.PanelConfiguration) { c.Listen = ptr.To("") }, want: "listen: Required value"},
		{name: "a bad proxy", modify: func(c *configv1alpha1.PanelConfiguration) { c.TrustedProxies = []string{"x"} }, want: "trustedProxies[0]"},
		{name: "no sign-in rate", modify: func(c *configv1alpha1.PanelConfiguration) { c.LoginRate = ptr.To(0.0) }, want: "loginRate: Invalid value: 0"},
		{name: "no sessions per user", modify: func(c *configv1alpha1.PanelConfiguration) { c.MaxSessionsPerUser = ptr.To[int32](0) }, want: "maxSessionsPerUser"},
		{name: "single sign-on without a client secret", modify: func(c *configv1alpha1.PanelConfiguration) { c.OIDC = sso(); c.OIDC.ClientSecretFile = "" },
			want: "oidc.clientSecretFile: Required value"},
		{name: "an unknown mode", modify: func(c *configv1alpha1.PanelConfiguration) { c.OIDC = sso(); c.OIDC.Mode = "proxy" },
			want: `oidc.mode: Unsupported value: "proxy"`},
		{name: "no client id", modify: func(c *configv1alpha1.PanelConfiguration) { c.OIDC = sso(); c.OIDC.ClientID = "" },
			want: "oidc.clientID: Required value"},
		{name: "a plain-http issuer", modify: func(c *configv1alpha1.PanelConfiguration) { c.OIDC = sso(); c.OIDC.IssuerURL = "http://idp" },
			want: `oidc.issuerURL: Invalid value: "http://idp": must be an https URL`},
		{name: "a redirect elsewhere", modify: func(c *configv1alpha1.PanelConfiguration) { c.OIDC = sso(); c.OIDC.RedirectURL = "https://p/callback" },
			want: "oidc.redirectURL: Invalid value: \"https://p/callback\": must be the panel's absolute http(s) URL ending in /oidc/callback"},
		{name: "a relative redirect", modify: func(c *configv1alpha1.PanelConfiguration) { c.OIDC = sso(); c.OIDC.RedirectURL = "/oidc/callback" },
			want: "oidc.redirectURL: Invalid value"},
		{name: "no username claim", modify: func(c *configv1alpha1.PanelConfiguration) { c.OIDC = sso(); c.OIDC.UsernameClaim = ptr.To("") },
			want: "oidc.usernameClaim: Required value"},
		{name: "impersonate mode with the reveal endpoint", modify: func(c *configv1alpha1.PanelConfiguration) {
			c.OIDC = sso()
			c.OIDC.Mode, c.OIDC.RevealURL, c.OIDC.RevealCAConfigMap = "impersonate", "https://switchboard-reveal.sb.svc:9445", "sb/switchboard-reveal-ca"
		}},
		{name: "impersonate mode without the reveal endpoint", modify: func(c *configv1alpha1.PanelConfiguration) { c.OIDC = sso(); c.OIDC.Mode = "impersonate" },
			want: "oidc.revealURL: Invalid value"},
		{name: "a reveal endpoint over plain http", modify: func(c *configv1alpha1.PanelConfiguration) {
			c.OIDC = sso()
			c.OIDC.Mode, c.OIDC.RevealURL, c.OIDC.RevealCAConfigMap = "impersonate", "http://switchboard-reveal.sb.svc:9445", "sb/switchboard-reveal-ca"
		}, want: "must be https://HOST:PORT"},
		{name: "a reveal endpoint with a path", modify: func(c *configv1alpha1.PanelConfiguration) {
			c.OIDC = sso()
			c.OIDC.Mode, c.OIDC.RevealURL, c.OIDC.RevealCAConfigMap = "impersonate", "https://switchboard-reveal.sb.svc:9445/reveal", "sb/switchboard-reveal-ca"
		}, want: "must be https://HOST:PORT"},
		{name: "a reveal ConfigMap without its namespace", modify: func(c *configv1alpha1.PanelConfiguration) {
			c.OIDC = sso()
			c.OIDC.Mode, c.OIDC.RevealURL, c.OIDC.RevealCAConfigMap = "impersonate", "https://switchboard-reveal.sb.svc:9445", "switchboard-reveal-ca"
		}, want: `oidc.revealCAConfigMap: Invalid value: "switchboard-reveal-ca": impersonate mode needs the ConfigMap of the reveal endpoint's certificates as NAMESPACE/NAME`},
		{name: "a reveal endpoint in token mode", modify: func(c *configv1alpha1.PanelConfiguration) {
			c.OIDC = sso()
			c.OIDC.RevealURL = "https://switchboard-reveal.sb.svc:9445"
		}, want: "oidc.revealURL: Invalid value: \"https://switchboard-reveal.sb.svc:9445\": is for impersonate mode only"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &configv1alpha1.PanelConfiguration{}
			tt.modify(c)
			configv1alpha1.SetDefaults_PanelConfiguration(c)
			check(t, ValidatePanelConfiguration(c).ToAggregate(), tt.want)
		})
	}
}

func check(t *testing.T, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Fatalf("refused: %v", err)
	case want != "" && err == nil:
		t.Fatalf("accepted; want an error saying %q", want)
	case want != "" && !strings.Contains(err.Error(), want):
		t.Fatalf("error %q does not say %q", err, want)
	}
}
