package frontdoor

import (
	"fmt"
	"strings"
	"time"
)

// Door is one kind of listener the product serves, with the limits it keeps by default: the
// table of docs/security.md, kept equal to Doors by a test. Every listener a switchboard
// process opens is one of them (the fault suite finds each open port and attacks it).
type Door struct {
	// Name names the listener, as the fault suite and the docs do.
	Name string
	// Flags are the flags that open it, by command.
	Flags string
	// Reach says who is meant to reach it.
	Reach string
	// HTTP or GRPC are its limits.
	HTTP *HTTPLimits
	GRPC *GRPCLimits
	// Note says what else bounds it (a body refused, TLS, authentication).
	Note string
	// Attack is the test that attacks it at an attacker's scale.
	Attack string
}

// The HTTP doors' default limits. Flags may change the connection bounds. On every door but the
// admission webhook's one client address holds at most a sixteenth of what anyone may take (an
// eighth on the doors a handful of callers use), so that eight addresses together leave at
// least half of it; the proxies and gateways the platform names (--trusted-proxies) have a
// share of their own.
var (
	// APILimits are /v1's: at about 150 KiB each at worst, 1024 connections fit the chart's
	// 256 MiB beside the server's own needs. Its handlers read no body.
	APILimits = doorLimits(DefaultHTTPLimits, 1024, 48, 256, 0)
	// ForwardAuthLimits are forward-auth's: its answers are a few hundred bytes, so a
	// connection costs its buffers and goroutine, some 80 KiB at most. It reads no body.
	ForwardAuthLimits = doorLimits(DefaultHTTPLimits, 256, 12, 64, 0)
	// PanelLimits are the panel's, reached by people through an ingress; its largest body is a
	// form (panel's maxFormBytes).
	PanelLimits = doorLimits(DefaultHTTPLimits, 256, 12, 64, 64<<10)
	// ProbeLimits are the health probes', reached by the kubelet once every few seconds, a new
	// connection each time: a client holds at most 4, so that the kubelet's next probe finds
	// room whoever else connects.
	ProbeLimits = doorLimits(HTTPLimits{Headers: 5 * time.Second, Body: time.Second, Active: 10 * time.Second, Idle: 30 * time.Second}, 64, 4, 0, 0)
	// MetricsLimits are the metrics listener's, scraped by Prometheus; it reads no body.
	MetricsLimits = doorLimits(DefaultHTTPLimits, 128, 8, 0, 0)
	// RevealLimits are the reveal endpoint's, called by the panel with a few hundred bytes of
	// JSON (reveal's maxRequestBytes).
	RevealLimits = doorLimits(DefaultHTTPLimits, 128, 8, 0, 16<<10)
	// WebhookLimits are the admission webhook's. Its one caller, the API server, carries every
	// tenant's admissions from one address, a connection per admission in progress (HTTP/1.1),
	// so that address may hold them all: a bound per client would refuse one tenant's write for
	// another's flood. What else connects gives way: a connection waiting on its client (headers,
	// body) of the client holding the most goes for a newcomer of one holding fewer, and an
	// answer is bounded by the checks' turns per namespace (keyadmission). An AdmissionReview of
	// an APIKey is a few KiB; 1 MiB leaves room for an object and its old self at the API
	// server's own bound on annotations.
	WebhookLimits = doorLimits(DefaultHTTPLimits, 128, 128, 0, 1<<20)
	// LeakReportLimits are the leak reports listener's, reached by GitHub through an ingress: a
	// few requests a minute, each answered within the 10 s bound of a call to GitHub's API. Its
	// body bound is the receiver's (leakReports.maxBodyBytes, whose default this is), set where
	// it is served.
	LeakReportLimits = doorLimits(DefaultHTTPLimits, 128, 8, 32, 256<<10)
)

func doorLimits(l HTTPLimits, all, perClient, proxies int, maxBody int64) HTTPLimits {
	l.MaxConnections, l.MaxConnectionsPerClient, l.ProxyConnections, l.MaxBody = all, perClient, proxies, maxBody
	return l
}

// Doors are every listener of the product.
var Doors = []Door{
	{Name: "api", Flags: "server --listen", Reach: "API clients, through the ingress (--trusted-proxies)", HTTP: &APILimits,
		Note: "a request with a body: 413 BODY_NOT_ALLOWED, connection closed", Attack: "TestAPIWithstandsHeldBodies"},
	{Name: "forward-auth", Flags: "server --authz-http-listen", Reach: "gateways (forward-auth, auth_request)", HTTP: &ForwardAuthLimits,
		Attack: "TestForwardAuthBoundsHeldConnections, TestGatewaysAnsweredUnderAttack"},
	{Name: "ext-authz", Flags: "server --authz-grpc-listen", Reach: "Envoy (ext_authz)", GRPC: &DefaultGRPCLimits,
		Note: "only Authorization/Check and Health/Check", Attack: "TestExtAuthzWithstandsAnonymousFloods, TestGatewaysAnsweredUnderAttack"},
	{Name: "panel", Flags: "panel --listen, server panel.listen", Reach: "people, through the ingress", HTTP: &PanelLimits,
		Note: "sign-in limited per client", Attack: "TestEveryListenerIsBounded"},
	{Name: "probes", Flags: "server, operator, panel --health-probe-bind-address", Reach: "the kubelet", HTTP: &ProbeLimits,
		Attack: "TestEveryListenerIsBounded, TestProbesAnsweredUnderAttack"},
	{Name: "metrics", Flags: "server, operator --metrics-bind-address", Reach: "Prometheus", HTTP: &MetricsLimits,
		Note: "HTTPS; a TokenReview and SubjectAccessReview per scrape", Attack: "TestEveryListenerIsBounded"},
	{Name: "webhook", Flags: "operator --webhook-bind-address", Reach: "the API server", HTTP: &WebhookLimits,
		Note: "HTTPS", Attack: "TestEveryListenerIsBounded, TestWebhookAnsweredUnderAttack"},
	{Name: "reveal", Flags: "operator --reveal-bind-address", Reach: "the panel", HTTP: &RevealLimits,
		Note: "HTTPS; the caller's token reviewed", Attack: "TestEveryListenerIsBounded"},
	{Name: "leak-reports", Flags: "server leakReports.listen", Reach: "GitHub's secret scanning, through the ingress", HTTP: &LeakReportLimits,
		Note: "the body bound is leakReports.maxBodyBytes; signature headers checked before the body is read, a signature verified before any shared budget is spent", Attack: "TestLeakReceiverHearsGitHubUnderFlood"},
}

// DoorNamed is the door named name, if any.
func DoorNamed(name string) (Door, bool) {
	for _, d := range Doors {
		if d.Name == name {
			return d, true
		}
	}
	return Door{}, false
}

// TableHeader is the head of the docs' table of doors.
const TableHeader = "| Listener | Opened by | Reached by | Connections: all, per client, proxies' own | Time bounds | Body | Other bounds | Attacked by |\n" +
	"|---|---|---|---|---|---|---|---|"

// Row is d's row in the docs' table.
func (d Door) Row() string {
	var conns, times, body, other string
	switch {
	case d.HTTP != nil:
		l := d.HTTP
		conns = fmt.Sprintf("%d, %d, %d", l.MaxConnections, l.MaxConnectionsPerClient, l.ProxyConnections)
		times = fmt.Sprintf("headers %v, body %v, answer %v, idle %v", l.Headers, l.Body, l.Active, l.Idle)
		body = "refused (413), unread"
		if l.MaxBody > 0 {
			body = fmt.Sprintf("read by the door, up to %d KiB", l.MaxBody>>10)
		}
		other = fmt.Sprintf("headers %d KiB", MaxHeaderBlock>>10)
	case d.GRPC != nil:
		l := d.GRPC
		conns = fmt.Sprintf("%d, %d, %d", l.MaxConnections, l.MaxConnectionsPerClient, l.ProxyConnections)
		times = fmt.Sprintf("handshake %v, first message %v, call %v, idle %v, age %v", l.Handshake, l.FirstMessage, l.CallTimeout,
			l.MaxConnectionIdle, l.MaxConnectionAge)
		body = fmt.Sprintf("message %d KiB", l.MaxMessage>>10)
		other = fmt.Sprintf("calls: %d, %d per client, %d the gateways' own, %d per connection; decoding %d MiB",
			l.MaxStreams, l.MaxStreamsPerClient, l.GatewayStreams, l.MaxStreamsPerConn, l.DecodeBudget>>20)
	}
	if d.Note != "" {
		other += "; " + d.Note
	}
	cells := []string{d.Name, "`" + d.Flags + "`", d.Reach, conns, times, body, other, "`" + d.Attack + "`"}
	return "| " + strings.Join(cells, " | ") + " |"
}

// Table is the docs' table of every door.
func Table() string {
	rows := []string{TableHeader}
	for _, d := range Doors {
		rows = append(rows, d.Row())
	}
	return strings.Join(rows, "\n")
}
