// Package authz answers gateways' authorization checks with keycheck's decision: Envoy's
// external authorization over gRPC (extauthz.go) and the forward-auth endpoints over HTTP
// (forwardauth.go). Each adapter only translates: the gateway's request into a
// keycheck.Request, and the Verdict into the status, header fields and body the gateway acts
// on. Serving them (listeners, TLS, gRPC health, connection bounds) is internal/server's.
package authz

import (
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-dev/switchboard/internal/metrics"
	"github.com/switchboard-dev/switchboard/internal/server/apicode"
	"github.com/switchboard-dev/switchboard/internal/server/boundmetric"
	"github.com/switchboard-dev/switchboard/internal/server/keycheck"
)

// The header fields of a check's answer: an allowed request's key identity, which the gateway
// copies upstream (replacing any a client sent), and a denial's code (and, for a key's
// permissions, the index and text of the rule that refused), so that a gateway that replaces
// the body (NGINX) can still say which.
const (
	HeaderKey                = "X-Switchboard-Key"
	HeaderKeyUID             = "X-Switchboard-Key-Uid"
	HeaderKeyHint            = "X-Switchboard-Key-Hint"
	HeaderCode               = "X-Switchboard-Code"
	HeaderPermissionRule     = "X-Switchboard-Permission-Rule"
	HeaderPermissionRuleText = "X-Switchboard-Permission-Rule-Text"
)

// asciiField is s as a header field's value: ASCII, as HTTP field values should be (a gateway
// or an upstream may read them as Latin-1), the ellipsis (of a hint, of a rule's text) spelled
// "...", any other character outside printable ASCII '?'.
func asciiField(s string) string {
	return strings.Map(func(r rune) rune {
		if r < ' ' || r > '~' {
			return '?'
		}
		return r
	}, strings.ReplaceAll(s, "…", "..."))
}

// The authorization endpoints' metrics. Never a per-key label: a series per key would let
// tenants grow the scrape without bound.
var (
	authzChecks   = metrics.Registered.NewCounterVec(prometheus.CounterOpts{Name: "switchboard_authz_checks_total", Help: "Decisions of the authorization endpoints by protocol (grpc: Envoy ext_authz, http: forward-auth), result (allowed, denied) and error code."}, []string{"protocol", "result", "code"})
	authzDuration = metrics.Registered.NewHistogramVec(prometheus.HistogramOpts{Name: "switchboard_authz_check_duration_seconds", Help: "Time to decide a check of the authorization endpoints, by protocol.", Buckets: []float64{0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.25}}, []string{"protocol"})
)

// protocol is an authorization endpoint's protocol, an index of its pre-bound series.
type protocol int

const (
	protocolGRPC protocol = iota
	protocolHTTP
	numProtocols
)

var protocolLabels = [numProtocols]string{"grpc", "http"}

// checkCodes are the codes a check can end with ("" is allowed), whose series are pre-bound.
var checkCodes = [...]string{"", apicode.APIKeyMissing, apicode.APIKeyInvalid, apicode.RateLimited, apicode.KeyRateLimited,
	apicode.SourceNotAllowed, apicode.AudienceNotAllowed, apicode.NotReady}

var (
	checkSeries    [numProtocols][len(checkCodes)]boundmetric.Counter
	checkDurations [numProtocols]boundmetric.Observer
)

func init() {
	for p := range numProtocols {
		checkDurations[p].Vec, checkDurations[p].Label = authzDuration, protocolLabels[p]
		for i, c := range checkCodes {
			result := "denied"
			if c == "" {
				result = "allowed"
			}
			checkSeries[p][i].Vec = authzChecks
			checkSeries[p][i].Labels = []string{protocolLabels[p], result, c}
		}
	}
}

// countCheck counts one decision of an authorization endpoint and its duration.
func countCheck(p protocol, v *keycheck.Verdict, d time.Duration) {
	checkDurations[p].Observe(d.Seconds())
	for i, c := range checkCodes {
		if c == v.Code {
			checkSeries[p][i].Inc()
			return
		}
	}
	authzChecks.WithLabelValues(protocolLabels[p], "denied", v.Code).Inc()
}
