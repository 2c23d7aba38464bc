package frontdoor

import (
	"fmt"
	"net/netip"
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

// The HTTP doors' default limits. Flags may change the connection bounds.
var (
	// APILimits are /v1's: at about 150 KiB each at worst, 1024 connections fit the chart's
	// 256 MiB beside the server's own needs, and one address holds at most a quarter.
	APILimits = withConns(DefaultHTTPLimits, 1024, 256)
	// ForwardAuthLimits are forward-auth's: its answers are a few hundred bytes, so a
	// connection costs its buffers and goroutine, some 80 KiB at most.
	ForwardAuthLimits = withConns(DefaultHTTPLimits, 256, 64)
	// PanelLimits are the panel's, reached by people through an ingress.
	PanelLimits = withConns(DefaultHTTPLimits, 256, 32)
	// ProbeLimits are the health probes', reached by the kubelet once every few seconds.
	ProbeLimits = withConns(HTTPLimits{Headers: 5 * time.Second, Active: 10 * time.Second, Idle: 30 * time.Second}, 32, 8)
	// ServiceLimits are those of the listeners a few known callers use over TLS: the panel
	// (reveals), Prometheus (metrics).
	ServiceLimits = withConns(DefaultHTTPLimits, 128, 32)
	// WebhookLimits are the admission webhook's: its one caller, the API server, opens a
	// connection per admission in progress (HTTP/1.1), so its address may hold them all; a
	// client that fills them gives way to the API server's next one (it holds the most).
	WebhookLimits = withConns(DefaultHTTPLimits, 128, 128)
	// LeakReportLimits are the leak reports listener's, reached by GitHub through an ingress: a
	// few requests a minute, each answered within the 10 s bound of a call to GitHub's API.
	LeakReportLimits = withConns(DefaultHTTPLimits, 128, 32)
)

func withConns(l HTTPLimits, all, perClient int) HTTPLimits {
	l.MaxConnections, l.MaxConnectionsPerClient = all, perClient
	return l
}

// Doors are every listener of the product.
var Doors = []Door{
	{Name: "api", Flags: "server --listen", Reach: "API clients, through the ingress (--trusted-proxies)", HTTP: &APILimits,
		Note: "a request with a body: 413 BODY_NOT_ALLOWED, connection closed", Attack: "TestAPIWithstandsHeldBodies"},
	{Name: "forward-auth", Flags: "server --authz-http-listen", Reach: "gateways (forward-auth, auth_request)", HTTP: &ForwardAuthLimits,
		Attack: "TestForwardAuthBoundsHeldConnections"},
	{Name: "ext-authz", Flags: "server --authz-grpc-listen", Reach: "Envoy (ext_authz)", GRPC: &DefaultGRPCLimits,
		Note: "only Authorization/Check and Health/Check", Attack: "TestExtAuthzWithstandsAnonymousFloods"},
	{Name: "panel", Flags: "panel --listen, server panel.listen", Reach: "people, through the ingress", HTTP: &PanelLimits,
		Note: "sign-in limited per client", Attack: "TestEveryListenerIsBounded"},
	{Name: "probes", Flags: "server, operator, panel --health-probe-bind-address", Reach: "the kubelet", HTTP: &ProbeLimits,
		Attack: "TestEveryListenerIsBounded"},
	{Name: "metrics", Flags: "server, operator --metrics-bind-address", Reach: "Prometheus", HTTP: &ServiceLimits,
		Note: "HTTPS; a TokenReview and SubjectAccessReview per scrape", Attack: "TestEveryListenerIsBounded"},
	{Name: "webhook", Flags: "operator --webhook-bind-address", Reach: "the API server", HTTP: &WebhookLimits,
		Note: "HTTPS", Attack: "TestEveryListenerIsBounded"},
	{Name: "reveal", Flags: "operator --reveal-bind-address", Reach: "the panel", HTTP: &ServiceLimits,
		Note: "HTTPS; the caller's token reviewed", Attack: "TestEveryListenerIsBounded"},
	{Name: "leak-reports", Flags: "server leakReports.listen", Reach: "GitHub's secret scanning, through the ingress", HTTP: &LeakReportLimits,
		Note: "requests rate-limited before their body (429); body leakReports.maxBodyBytes; a signature verified before any API server call", Attack: "TestEveryListenerIsBounded"},
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
const TableHeader = "| Listener | Opened by | Reached by | Connections (per client) | Time bounds | Other bounds | Attacked by |\n" +
	"|---|---|---|---|---|---|---|"

// Row is d's row in the docs' table.
func (d Door) Row() string {
	var conns, times, other string
	switch {
	case d.HTTP != nil:
		l := d.HTTP
		conns = fmt.Sprintf("%d (%d)", l.MaxConnections, l.MaxConnectionsPerClient)
		times = fmt.Sprintf("headers %v, answer %v, idle %v", l.Headers, l.Active, l.Idle)
		other = fmt.Sprintf("headers %d KiB", MaxHeaderBlock>>10)
	case d.GRPC != nil:
		l := d.GRPC
		conns = fmt.Sprintf("%d (%d)", l.MaxConnections, l.MaxConnectionsPerClient)
		times = fmt.Sprintf("handshake %v, call %v, idle %v, age %v", l.Handshake, l.CallTimeout, l.MaxConnectionIdle, l.MaxConnectionAge)
		other = fmt.Sprintf("message %d KiB, calls %d (%d per client, %d per connection), decoding %d MiB", l.MaxMessage>>10,
			l.MaxStreams, l.MaxStreamsPerClient, l.MaxStreamsPerConn, l.DecodeBudget>>20)
	}
	if d.Note != "" {
		other += "; " + d.Note
	}
	cells := []string{d.Name, "`" + d.Flags + "`", d.Reach, conns, times, other, "`" + d.Attack + "`"}
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

// Behind is l with proxies as its Proxies: the peers that carry many clients' connections.
func (l HTTPLimits) Behind(proxies []netip.Prefix) HTTPLimits {
	l.Proxies = proxies
	return l
}
