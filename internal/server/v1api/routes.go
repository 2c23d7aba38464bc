package v1api

import (
	"net/http"
	"strings"
)

// The routes of the API port, declared once: the path a route answers, the label its requests
// are counted under (bounded: never the raw path), the methods it allows (others get 405 with
// Allow), and whether /v1's authentication comes first. Metrics pre-bind a series per route
// (metrics.go) and api.serve dispatches on it (api.go); a new route is an entry here, a case
// there.

// route numbers the routes, to index the table and the pre-bound series.
type route uint8

const (
	routeIDConnections route = iota
	routeIDV1Other
	routeIDOpenAPI
	routeIDOther
	numRoutes
)

// routeSpec is one route.
type routeSpec struct {
	// path is the exact path the route answers; "" for the catch-alls.
	path string
	// label is the value of the route dimension of the metrics.
	label string
	// allow is the Allow header of the methods the route answers ("" for the catch-alls, which
	// answer 404 to every method).
	allow string
	// v1 says the route is under /v1: authenticated before anything else.
	v1 bool
}

// Paths of the routes, and the catch-alls' labels.
const (
	routeConnections = "/v1/connections"
	routeV1Other     = "/v1/*"
	routeOpenAPI     = "/openapi.yaml"
	routeOther       = "other"
)

var routes = [numRoutes]routeSpec{
	routeIDConnections: {path: routeConnections, label: routeConnections, allow: "GET, HEAD", v1: true},
	routeIDV1Other:     {label: routeV1Other, v1: true},
	routeIDOpenAPI:     {path: routeOpenAPI, label: routeOpenAPI, allow: "GET, HEAD"},
	routeIDOther:       {label: routeOther},
}

// routeOf is the route of a path.
func routeOf(path string) route {
	switch {
	case path == routeConnections:
		return routeIDConnections
	case path == routeOpenAPI:
		return routeIDOpenAPI
	case strings.HasPrefix(path, "/v1"):
		return routeIDV1Other
	}
	return routeIDOther
}

// allows says whether the route answers method: the routes with a path answer GET and HEAD.
func (s *routeSpec) allows(method string) bool {
	return s.allow != "" && (method == http.MethodGet || method == http.MethodHead)
}
