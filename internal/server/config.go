package server

import (
	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/config"
	"github.com/switchboard-dev/switchboard/internal/server/leakreceiver"
)

// OptionsFromConfig turns a defaulted, validated ServerConfiguration into Options: the one
// translation from the configuration's spelling of "disabled" (an empty address, a 0 bound) to
// the Options' ("0", negative). The panel (c.Panel), the Redis password, the leak reports' secrets and what only a
// process has (listeners, clock) are left to the caller.
func OptionsFromConfig(c *configv1alpha1.ServerConfiguration) (Options, error) {
	proxies, err := config.ParsePrefixes(c.TrustedProxies)
	if err != nil {
		return Options{}, err
	}
	gateways, err := config.ParsePrefixes(c.Authz.GRPC.Gateways)
	if err != nil {
		return Options{}, err
	}
	return Options{
		LeakReportsListen:                c.LeakReports.Listen,
		LeakReports:                      leakReports(&c.LeakReports),
		Listen:                           *c.Listen,
		MetricsBindAddress:               address(*c.MetricsBindAddress),
		MetricsSecure:                    *c.MetricsSecure,
		Pprof:                            c.Pprof,
		HealthProbeBindAddress:           address(*c.HealthProbeBindAddress),
		SystemNamespace:                  c.SystemNamespace,
		KeyPrefix:                        c.KeyPrefix,
		TrustedProxies:                   proxies,
		PeersAreProxies:                  c.PeersAreProxies,
		FailureRate:                      orNone(*c.AuthFailureLimit.Rate),
		FailureBurst:                     int(*c.AuthFailureLimit.Burst),
		RateLimitClients:                 int(*c.AuthFailureLimit.Clients),
		RateLimitRedis:                   c.RateLimitRedis.URL,
		RateLimitRedisTimeout:            c.RateLimitRedis.Timeout.Duration,
		MaxInFlightBytesPerNamespace:     orNone(*c.MaxInFlightBytesPerNamespace),
		MaxConnections:                   int(orNone(*c.MaxConnections)),
		MaxConnectionsPerClient:          int(orNone(*c.MaxConnectionsPerClient)),
		AuthzHTTPMaxConnections:          int(orNone(*c.Authz.HTTP.MaxConnections)),
		AuthzHTTPMaxConnectionsPerClient: int(orNone(*c.Authz.HTTP.MaxConnectionsPerClient)),
		LastUsedInterval:                 c.LastUsed.Interval.Duration,
		LastUsedWriteRate:                *c.LastUsed.WritesPerSecond,
		ShutdownDelay:                    orNone(c.ShutdownDelay.Duration),
		ShutdownTimeout:                  c.ShutdownTimeout.Duration,
		Audience:                         c.Audience,
		AuthzGRPCListen:                  c.Authz.GRPC.Listen,
		AuthzGRPCTLSCertFile:             c.Authz.GRPC.TLSCertFile,
		AuthzGRPCTLSKeyFile:              c.Authz.GRPC.TLSKeyFile,
		AuthzGRPCClientCAFile:            c.Authz.GRPC.ClientCAFile,
		AuthzGRPCGateways:                gateways,
		AuthzGRPCMaxMessageBytes:         int(*c.Authz.GRPC.MaxMessageBytes),
		AuthzStripAuthorization:          c.Authz.GRPC.StripAuthorization,
		AuthzHTTPListen:                  c.Authz.HTTP.Listen,
	}, nil
}

// leakReports is the leak reports receiver's configuration when it listens (the zero value
// otherwise): its settings but the secrets, which the caller reads from their files.
func leakReports(lr *configv1alpha1.LeakReports) leakreceiver.Config {
	if lr.Listen == "" {
		return leakreceiver.Config{}
	}
	a := &lr.OrganizationAlerts
	return leakreceiver.Config{
		Partner: lr.Partner.Enabled, PublicKeysURL: lr.Partner.PublicKeysURL, APIBaseURL: a.APIBaseURL,
		MaxBody: *lr.MaxBodyBytes, MaxBatch: int(*lr.MaxBatch), Rate: *lr.Rate, Burst: int(*lr.Burst),
		ClientRate: *lr.UnverifiedLimit.Rate, ClientBurst: int(*lr.UnverifiedLimit.Burst), Clients: int(*lr.UnverifiedLimit.Clients),
		Replays: int(*lr.Replays.Entries), ReplayTTL: lr.Replays.TTL.Duration,
		CatchUp: leakreceiver.CatchUp{
			Organization: a.Organization, Period: a.CatchUp.Period.Duration, MaxCalls: int(*a.CatchUp.MaxRequests),
		},
	}
}

// address is an Options address: the configuration's "" (none) is "0".
func address(a string) string {
	if a == "" {
		return "0"
	}
	return a
}

// orNone is an Options bound: the configuration's 0 (none) is -1, as Options' zero means the
// default.
func orNone[T ~int32 | ~int64 | ~float64](v T) T {
	if v == 0 {
		return -1
	}
	return v
}
