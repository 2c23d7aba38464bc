package permission

import (
	"strings"
	"testing"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
)

// TestCostsOf: the first cost whose route matches sets a request's cost, 1 when none does, and
// the largest when the route cannot be told.
func TestCostsOf(t *testing.T) {
	costs, err := CompileCosts([]switchboardv1alpha1.CreditCost{
		{Credits: 0, Methods: methods("GET"), Paths: []string{"/v1/health"}},
		{Credits: 10, Methods: methods("POST"), Paths: []string{"/v1/connections"}},
		{Credits: 5, Paths: []string{"/v1/connections/{id}"}, Audiences: []switchboardv1alpha1.Audience{"billing"}},
		{Credits: 2, Paths: []string{"/v1/**"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		req  Request
		want int64
	}{
		{"a free route", Request{Method: "GET", Path: "/v1/health"}, 0},
		{"the method decides", Request{Method: "POST", Path: "/v1/connections"}, 10},
		{"another method falls through", Request{Method: "GET", Path: "/v1/connections"}, 2},
		{"a template and an audience", Request{Method: "GET", Path: "/v1/connections/conn_1", Audience: "billing"}, 5},
		{"another audience falls through", Request{Method: "GET", Path: "/v1/connections/conn_1", Audience: "search"}, 2},
		{"the query is not the path", Request{Method: "POST", Path: "/v1/connections?cheap=1"}, 10},
		{"matched percent-decoded", Request{Method: "POST", Path: "/v1/conn%65ctions"}, 10},
		{"no cost matches", Request{Method: "GET", Path: "/v2/other"}, 1},
		{"an unclean path costs the most", Request{Method: "GET", Path: "/v1/health/../connections"}, 10},
		{"an unsent method costs the most", Request{Path: "/v1/health"}, 10},
	} {
		if got := costs.Of(tc.req); got != tc.want {
			t.Errorf("%s: %s %s costs %d, want %d", tc.name, tc.req.Method, tc.req.Path, got, tc.want)
		}
	}
	var none *Costs
	if got := none.Of(Request{Method: "GET", Path: "/v1/connections"}); got != 1 {
		t.Errorf("without costs a request costs %d, want 1", got)
	}
}

// TestCompileCostsRefuses: what the CRD would refuse is refused here too, naming the cost.
func TestCompileCostsRefuses(t *testing.T) {
	for _, tc := range []struct {
		name    string
		costs   []switchboardv1alpha1.CreditCost
		want    string
		dearest int64
	}{
		{"too many", make([]switchboardv1alpha1.CreditCost, switchboardv1alpha1.MaxCreditCosts+1), "at most 16 costs", 1},
		{"negative", []switchboardv1alpha1.CreditCost{{Credits: -1}}, "costs[0]: credits must be from 0", 1},
		{"too dear", []switchboardv1alpha1.CreditCost{{Credits: 1}, {Credits: switchboardv1alpha1.CreditsMaxCost + 1}}, "costs[1]: credits must be from 0", switchboardv1alpha1.CreditsMaxCost},
		{"a bad template", []switchboardv1alpha1.CreditCost{{Credits: 7, Paths: []string{"/v1/{"}}}, `costs[0]: path "/v1/{"`, 7},
		{"an unknown method", []switchboardv1alpha1.CreditCost{{Credits: 1, Methods: methods("TRACE")}}, `costs[0]: method "TRACE"`, 1},
	} {
		got, err := CompileCosts(tc.costs)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", tc.name, err, tc.want)
		}
		if cost := got.Of(Request{Method: "GET", Path: "/v2/unmatched"}); cost != tc.dearest {
			t.Errorf("%s: costs that do not compile charge %d, want %d (the largest, at least 1)", tc.name, cost, tc.dearest)
		}
	}
}

// TestCostsOfDoesNotAllocate: a cost is read on every request of a key with costs.
func TestCostsOfDoesNotAllocate(t *testing.T) {
	costs, err := CompileCosts([]switchboardv1alpha1.CreditCost{{Credits: 3, Paths: []string{"/v1/connections/{id}"}}})
	if err != nil {
		t.Fatal(err)
	}
	req := Request{Method: "GET", Path: "/v1/connections/conn_1"}
	if n := testing.AllocsPerRun(100, func() { _ = costs.Of(req) }); n != 0 {
		t.Errorf("Of allocates %.0f times a call, want 0", n)
	}
}
