package permission

import (
	"net/netip"
	"strings"
	"testing"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
)

func allow(methods []switchboardv1alpha1.HTTPMethod, paths ...string) switchboardv1alpha1.PermissionRule {
	return switchboardv1alpha1.PermissionRule{Effect: switchboardv1alpha1.PermissionAllow, Methods: methods, Paths: paths}
}

func deny(methods []switchboardv1alpha1.HTTPMethod, paths ...string) switchboardv1alpha1.PermissionRule {
	return switchboardv1alpha1.PermissionRule{Effect: switchboardv1alpha1.PermissionDeny, Methods: methods, Paths: paths}
}

func methods(m ...switchboardv1alpha1.HTTPMethod) []switchboardv1alpha1.HTTPMethod { return m }

func mustCompile(t *testing.T, specs ...switchboardv1alpha1.PermissionRule) *Rules {
	t.Helper()
	rs, err := Compile(specs)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return rs
}

var office = netip.MustParseAddr("203.0.113.7")

// TestDecide: the first rule that matches decides, by method, path template, audience, source
// and condition; none matching refuses; what cannot be known fails closed.
func TestDecide(t *testing.T) {
	readOnly := []switchboardv1alpha1.PermissionRule{
		deny(methods("DELETE"), "/v1/connections/{id}"),
		allow(methods("GET", "HEAD"), "/v1/**"),
	}
	withAudience := switchboardv1alpha1.PermissionRule{Effect: switchboardv1alpha1.PermissionAllow, Audiences: []switchboardv1alpha1.Audience{"billing"}}
	fromOffice := switchboardv1alpha1.PermissionRule{Effect: switchboardv1alpha1.PermissionAllow, SourceRanges: []switchboardv1alpha1.CIDR{"203.0.113.0/24"}}
	denyOutside := switchboardv1alpha1.PermissionRule{Effect: switchboardv1alpha1.PermissionDeny, SourceRanges: []switchboardv1alpha1.CIDR{"198.51.100.0/24"}}
	conn := switchboardv1alpha1.PermissionRule{Effect: switchboardv1alpha1.PermissionAllow, Paths: []string{"/v1/connections/{id}"}, Condition: `request.params.id.startsWith("conn_")`}
	denyIfErr := switchboardv1alpha1.PermissionRule{Effect: switchboardv1alpha1.PermissionDeny, Condition: `request.params.missing == "x"`}
	allowIfErr := switchboardv1alpha1.PermissionRule{Effect: switchboardv1alpha1.PermissionAllow, Condition: `request.params.missing == "x"`}
	anything := switchboardv1alpha1.PermissionRule{Effect: switchboardv1alpha1.PermissionAllow}
	tests := []struct {
		name    string
		rules   []switchboardv1alpha1.PermissionRule
		req     Request
		allowed bool
		rule    int
	}{
		{"GET under /v1/**", readOnly, Request{Method: "GET", Path: "/v1/connections"}, true, 1},
		{"HEAD of /v1 itself", readOnly, Request{Method: "HEAD", Path: "/v1"}, true, 1},
		{"a query is not the path", readOnly, Request{Method: "GET", Path: "/v1/connections?limit=2"}, true, 1},
		{"POST: no rule", readOnly, Request{Method: "POST", Path: "/v1/connections"}, false, -1},
		{"GET outside /v1", readOnly, Request{Method: "GET", Path: "/v2/connections"}, false, -1},
		{"/v1x is not under /v1", readOnly, Request{Method: "GET", Path: "/v1x"}, false, -1},
		{"DELETE of one: the deny first", readOnly, Request{Method: "DELETE", Path: "/v1/connections/c1"}, false, 0},
		{"DELETE of the list: {id} needs a segment", readOnly, Request{Method: "DELETE", Path: "/v1/connections/"}, false, -1},
		{"{id} is one segment", []switchboardv1alpha1.PermissionRule{allow(nil, "/v1/connections/{id}")}, Request{Method: "GET", Path: "/v1/connections/a/b"}, false, -1},
		{"order: the allow first wins", []switchboardv1alpha1.PermissionRule{allow(nil), deny(nil)}, Request{Method: "GET", Path: "/x"}, true, 0},
		{"order: the deny first wins", []switchboardv1alpha1.PermissionRule{deny(nil), allow(nil)}, Request{Method: "GET", Path: "/x"}, false, 0},
		{"root only", []switchboardv1alpha1.PermissionRule{allow(nil, "/")}, Request{Method: "GET", Path: "/"}, true, 0},
		{"root is not all", []switchboardv1alpha1.PermissionRule{allow(nil, "/")}, Request{Method: "GET", Path: "/a"}, false, -1},
		{"a dot segment fails closed for allow", readOnly[1:], Request{Method: "GET", Path: "/v1/../admin"}, false, -1},
		{"a dot segment fails closed for deny", readOnly, Request{Method: "DELETE", Path: "/v1/x/../connections/c1"}, false, 0},
		{"an encoded slash fails closed", readOnly[1:], Request{Method: "GET", Path: "/v1/a%2Fb"}, false, -1},
		{"an encoded letter is matched decoded", readOnly, Request{Method: "DELETE", Path: "/v1/conn%65ctions/c1"}, false, 0},
		{"an encoded capture", []switchboardv1alpha1.PermissionRule{{Effect: switchboardv1alpha1.PermissionAllow, Paths: []string{"/v1/connections/{id}"}, Condition: `request.params.id == "a b"`}},
			Request{Method: "GET", Path: "/v1/connections/a%20b"}, true, 0},
		{"a bad encoding fails closed", readOnly, Request{Method: "DELETE", Path: "/v1/connections/%zz"}, false, 0},
		{"an unknown path fails closed", readOnly, Request{Method: "DELETE"}, false, 0},
		{"an unknown method fails closed", readOnly, Request{Path: "/v1/connections/c1"}, false, 0},
		{"audience named", []switchboardv1alpha1.PermissionRule{withAudience}, Request{Method: "GET", Path: "/", Audience: "billing"}, true, 0},
		{"audience not named", []switchboardv1alpha1.PermissionRule{withAudience}, Request{Method: "GET", Path: "/", Audience: "connections"}, false, -1},
		{"source inside", []switchboardv1alpha1.PermissionRule{fromOffice}, Request{Method: "GET", Path: "/", Source: office, SourceKnown: true}, true, 0},
		{"mapped source inside", []switchboardv1alpha1.PermissionRule{fromOffice}, Request{Method: "GET", Path: "/", Source: netip.MustParseAddr("::ffff:203.0.113.7"), SourceKnown: true}, true, 0},
		{"source outside", []switchboardv1alpha1.PermissionRule{fromOffice}, Request{Method: "GET", Path: "/", Source: netip.MustParseAddr("192.0.2.1"), SourceKnown: true}, false, -1},
		{"source unknown: allow does not match", []switchboardv1alpha1.PermissionRule{fromOffice}, Request{Method: "GET", Path: "/"}, false, -1},
		{"source unknown: deny matches", []switchboardv1alpha1.PermissionRule{denyOutside, anything}, Request{Method: "GET", Path: "/"}, false, 0},
		{"source known outside the deny", []switchboardv1alpha1.PermissionRule{denyOutside, anything}, Request{Method: "GET", Path: "/", Source: office, SourceKnown: true}, true, 1},
		{"condition true", []switchboardv1alpha1.PermissionRule{conn}, Request{Method: "GET", Path: "/v1/connections/conn_1"}, true, 0},
		{"condition false", []switchboardv1alpha1.PermissionRule{conn}, Request{Method: "GET", Path: "/v1/connections/other"}, false, -1},
		{"condition errs: deny matches", []switchboardv1alpha1.PermissionRule{denyIfErr, anything}, Request{Method: "GET", Path: "/"}, false, 0},
		{"condition errs: allow does not", []switchboardv1alpha1.PermissionRule{allowIfErr}, Request{Method: "GET", Path: "/"}, false, -1},
		{"condition reads the source", []switchboardv1alpha1.PermissionRule{{Effect: switchboardv1alpha1.PermissionAllow, Condition: `request.source == "203.0.113.7" && request.method == "GET" && request.audience == "" && request.path == "/a"`}},
			Request{Method: "GET", Path: "/a?q", Source: office, SourceKnown: true}, true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := mustCompile(t, tt.rules...).Decide(tt.req)
			if d.Allowed != tt.allowed || d.Rule != tt.rule {
				t.Fatalf("Decide(%+v) = %+v, want allowed %v by rule %d", tt.req, d, tt.allowed, tt.rule)
			}
		})
	}
}

// TestNoRulesAllowNothing: an empty Rules (a key whose permissions did not compile) allows
// nothing, and no permissions compile to no Rules.
func TestNoRulesAllowNothing(t *testing.T) {
	if d := (&Rules{}).Decide(Request{Method: "GET", Path: "/"}); d.Allowed || d.Rule != -1 {
		t.Fatalf("empty Rules: %+v", d)
	}
	if rs, err := Compile(nil); rs != nil || err != nil {
		t.Fatalf("Compile(nil) = %v, %v", rs, err)
	}
}

// TestCompileRefuses: what does not compile is refused, naming the rule's index and why.
func TestCompileRefuses(t *testing.T) {
	long := `request.path.matches("a") && ` + strings.Repeat(`request.params.exists(k, request.params.exists(j, request.path.matches(k + j))) && `, 3) + "true"
	tests := []struct {
		name string
		rule switchboardv1alpha1.PermissionRule
		want string
	}{
		{"a template without /", allow(nil, "v1"), `permissions[1]: path "v1": a path template starts with "/"`},
		{"** not last", allow(nil, "/v1/**/x"), "permissions[1]: path"},
		{"an empty segment", allow(nil, "/v1//x"), "segment 2"},
		{"a capture twice", allow(nil, "/{id}/{id}"), "captured twice"},
		{"a bad capture name", allow(nil, "/{1d}"), "a capture's name"},
		{"a wildcard in a segment", allow(nil, "/v1*"), "only allowed as"},
		{"an unknown method", allow(methods("TRACE")), `method "TRACE"`},
		{"an unknown effect", switchboardv1alpha1.PermissionRule{Effect: "Maybe"}, `effect "Maybe"`},
		{"a bad CIDR", switchboardv1alpha1.PermissionRule{Effect: switchboardv1alpha1.PermissionAllow, SourceRanges: []switchboardv1alpha1.CIDR{"nope"}}, "not a CIDR"},
		{"CEL that does not parse", switchboardv1alpha1.PermissionRule{Effect: switchboardv1alpha1.PermissionAllow, Condition: "request.method =="}, "permissions[1]: condition:"},
		{"an undeclared variable", switchboardv1alpha1.PermissionRule{Effect: switchboardv1alpha1.PermissionAllow, Condition: `request.user == "x"`}, "undeclared reference"},
		{"not a bool", switchboardv1alpha1.PermissionRule{Effect: switchboardv1alpha1.PermissionAllow, Condition: `request.method`}, "not a bool"},
		{"over the cost bound", switchboardv1alpha1.PermissionRule{Effect: switchboardv1alpha1.PermissionAllow, Condition: long}, "could cost"},
		{"17 segments", allow(nil, "/a"+strings.Repeat("/b", 16)), "17 segments: at most 16"},
		{"5 paths", allow(nil, "/a", "/b", "/c", "/d", "/e"), "at most 4 paths, not 5"},
	}
	nine := make([]switchboardv1alpha1.PermissionRule, 9)
	for i := range nine {
		nine[i] = switchboardv1alpha1.PermissionRule{Effect: switchboardv1alpha1.PermissionAllow, Condition: "true"}
	}
	if _, err := Compile(nine); err == nil || !strings.Contains(err.Error(), "at most 8 permissions rules may have a condition, not 9") {
		t.Errorf("Compile of 9 conditions: %v", err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Compile([]switchboardv1alpha1.PermissionRule{allow(nil), tt.rule})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Compile: %v, want an error with %q", err, tt.want)
			}
		})
	}
}

// TestText: each rule written as one short line, and the refusals naming it.
func TestText(t *testing.T) {
	rs := mustCompile(t,
		allow(methods("GET", "HEAD"), "/v1/**"),
		deny(methods("DELETE"), "/v1/connections/{id}"),
		switchboardv1alpha1.PermissionRule{Effect: switchboardv1alpha1.PermissionAllow, Audiences: []switchboardv1alpha1.Audience{"billing", "connections"}, SourceRanges: []switchboardv1alpha1.CIDR{"10.0.0.0/8"},
			Condition: "request.method ==\n  \"GET\" && " + strings.Repeat("true && ", 10) + "true"},
	)
	want := []string{
		"allow GET,HEAD /v1/**",
		"deny DELETE /v1/connections/{id}",
		`allow * * for billing,connections from 10.0.0.0/8 if request.method == "GET" && true && true && true && true && true…`,
	}
	for i, w := range want {
		if got := rs.rules[i].text; got != w {
			t.Errorf("rule %d: %q, want %q", i, got, w)
		}
	}
	d := rs.Decide(Request{Method: "DELETE", Path: "/v1/connections/c1"})
	if got, w := d.Refusal("DELETE", "/v1/connections/c1"), "refused by permissions rule 1 (deny DELETE /v1/connections/{id})"; got != w || d.Text != want[1] {
		t.Errorf("refusal %q (text %q), want %q", got, d.Text, w)
	}
	d = rs.Decide(Request{Method: "POST", Path: "/v1/connections", Audience: "other"})
	if got, w := d.Refusal("POST", "/v1/connections?x=1"), "no permissions rule allows POST /v1/connections"; got != w {
		t.Errorf("refusal %q, want %q", got, w)
	}
	if got, w := mustCompile(t, allow(methods("GET", "HEAD"), "/v1/**")).Decide(Request{}).Refusal("", ""), "no permissions rule allows (an unknown method) (an unknown path)"; got != w {
		t.Errorf("refusal %q, want %q", got, w)
	}
}

// TestCostLimitAtRuntime: an evaluation past the cost limit errs, so fails closed.
func TestCostLimitAtRuntime(t *testing.T) {
	// Within the estimate's assumed sizes, but a path longer than them costs more.
	rs := mustCompile(t, switchboardv1alpha1.PermissionRule{Effect: switchboardv1alpha1.PermissionAllow, Condition: `request.path.matches("^(/[a-z]+)+$")`})
	if d := rs.Decide(Request{Method: "GET", Path: "/" + strings.Repeat("a/", 200) + "a"}); !d.Allowed {
		t.Fatalf("a short path: %+v", d)
	}
	if d := rs.Decide(Request{Method: "GET", Path: "/" + strings.Repeat("a/", 100_000) + "a"}); d.Allowed {
		t.Fatalf("a path past the cost limit allowed: %+v", d)
	}
}

// TestDecideDoesNotAllocate: rules without conditions decide without allocating, as the
// server's decision promises.
func TestDecideDoesNotAllocate(t *testing.T) {
	rs := mustCompile(t,
		deny(methods("DELETE"), "/v1/connections/{id}"),
		switchboardv1alpha1.PermissionRule{Effect: switchboardv1alpha1.PermissionDeny, SourceRanges: []switchboardv1alpha1.CIDR{"198.51.100.0/24"}, Audiences: []switchboardv1alpha1.Audience{"billing"}},
		allow(methods("GET", "HEAD"), "/v2/{a}/{b}", "/v1/**"),
	)
	req := Request{Method: "GET", Path: "/v1/connections/c1?x=1", Audience: "connections", Source: office, SourceKnown: true}
	if n := testing.AllocsPerRun(100, func() {
		if !rs.Decide(req).Allowed {
			t.Fatal("refused")
		}
	}); n != 0 {
		t.Fatalf("%v allocations per Decide", n)
	}
}
