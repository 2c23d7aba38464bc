package secretscanning

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/switchboard-dev/switchboard/internal/apikey"
)

// fakeOrgAPI plays GitHub's list of an organization's secret scanning alerts under /api/v3:
// alerts numbered total down to 1 (newest first), a page of per_page, the next page linked by
// the organization's number as GitHub does.
type fakeOrgAPI struct {
	t      *testing.T
	total  int
	secret func(n int) string
	// next, when set, replaces the next page's link.
	next string
	// answer, when set, replaces every page.
	answer string
	status int
	calls  *atomic.Int32
}

func (f *fakeOrgAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.calls.Add(1)
	if r.Header.Get("Authorization") != "Bearer ghs_test_token" {
		http.Error(w, `{"message":"Bad credentials"}`, http.StatusUnauthorized)
		return
	}
	if r.URL.Path != "/api/v3/orgs/octo/secret-scanning/alerts" && r.URL.Path != "/api/v3/organizations/9919/secret-scanning/alerts" {
		http.NotFound(w, r)
		return
	}
	q := r.URL.Query()
	if q.Get("state") != "open" || q.Get("per_page") != "100" || q.Get("hide_secret") != "false" {
		f.t.Errorf("alerts listed with %s, want state=open, per_page=100, hide_secret=false", r.URL.RawQuery)
	}
	if f.status != 0 {
		http.Error(w, `{"message":"Server Error"}`, f.status)
		return
	}
	if f.answer != "" {
		_, _ = w.Write([]byte(f.answer))
		return
	}
	page, _ := strconv.Atoi(q.Get("page"))
	page = max(page, 1)
	var alerts []map[string]any
	for n := f.total - (page-1)*100; n > 0 && n > f.total-page*100; n-- {
		alerts = append(alerts, map[string]any{
			"number": n, "state": "open", "secret_type": "switchboard_api_key", "secret": f.secret(n),
			"html_url":   fmt.Sprintf("https://ghe.example/octo/app/security/secret-scanning/%d", n),
			"repository": map[string]any{"full_name": "octo/app", "html_url": "https://ghe.example/octo/app", "id": 1},
		})
	}
	if page*100 < f.total {
		next := fmt.Sprintf("http://%s/api/v3/organizations/9919/secret-scanning/alerts?state=open&per_page=100&hide_secret=false&page=%d", r.Host, page+1)
		if f.next != "" {
			next = f.next
			if strings.HasPrefix(next, "/") {
				next = "http://" + r.Host + next
			}
		}
		w.Header().Add("Link", fmt.Sprintf(`<%s>; rel="next", <http://%s/api/v3/organizations/9919/secret-scanning/alerts?page=9>; rel="last"`, next, r.Host))
	}
	_ = json.NewEncoder(w).Encode(alerts)
}

func TestListOpen(t *testing.T) {
	ours, foreign, _ := testTokens(t)
	secrets := func(n int) string {
		switch {
		case n == 7:
			return ours
		case n%50 == 0:
			return "" // an alert GitHub shows without its secret
		}
		return foreign
	}
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { elsewhere.Add(1) }))
	defer other.Close()
	tests := []struct {
		name     string
		api      fakeOrgAPI
		maxCalls int
		org      string
		want     error
		result   ListResult
	}{
		{name: "three pages within the budget", api: fakeOrgAPI{total: 250}, maxCalls: 5, result: ListResult{Calls: 3, Alerts: 245, Skipped: 5}},
		{name: "the budget ends the listing", api: fakeOrgAPI{total: 250}, maxCalls: 2, result: ListResult{Calls: 2, Alerts: 196, Skipped: 4, More: true}},
		{name: "exactly the budget", api: fakeOrgAPI{total: 200}, maxCalls: 2, result: ListResult{Calls: 2, Alerts: 196, Skipped: 4}},
		{name: "no alerts", api: fakeOrgAPI{}, maxCalls: 2, result: ListResult{Calls: 1}},
		{name: "a next page on another host", api: fakeOrgAPI{total: 250, next: other.URL + "/api/v3/orgs/octo/secret-scanning/alerts?page=2"}, maxCalls: 5,
			want: ErrBadGateway, result: ListResult{Calls: 1, Alerts: 98, Skipped: 2}},
		{name: "a next page elsewhere on the host", api: fakeOrgAPI{total: 250, next: "/api/v3/user/repos"}, maxCalls: 5,
			want: ErrBadGateway, result: ListResult{Calls: 1, Alerts: 98, Skipped: 2}},
		{name: "GitHub fails", api: fakeOrgAPI{total: 250, status: http.StatusInternalServerError}, maxCalls: 5, want: ErrUnavailable, result: ListResult{Calls: 1}},
		{name: "not JSON", api: fakeOrgAPI{answer: "<html>"}, maxCalls: 5, want: ErrBadGateway, result: ListResult{Calls: 1}},
		{name: "an object, not a list", api: fakeOrgAPI{answer: `{"message":"x"}`}, maxCalls: 5, want: ErrBadGateway, result: ListResult{Calls: 1}},
		{name: "an organization that is a path", api: fakeOrgAPI{total: 1}, maxCalls: 5, org: "../repos", want: errors.New("not a GitHub login")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.api.t, tt.api.secret, tt.api.calls = t, secrets, &atomic.Int32{}
			srv := httptest.NewServer(&tt.api)
			defer srv.Close()
			c, err := NewAlertClient(AlertClientOptions{APIBase: srv.URL + "/api/v3", Token: "ghs_test_token", Client: srv.Client(), Prefix: "sb"})
			if err != nil {
				t.Fatal(err)
			}
			if tt.org == "" {
				tt.org = "octo"
			}
			var got []OrgAlert
			res, err := c.ListOpen(context.Background(), tt.org, tt.maxCalls, func(a OrgAlert) { got = append(got, a) })
			switch {
			case tt.want == nil && err != nil, tt.want != nil && err == nil:
				t.Fatalf("ListOpen() = %+v, %v; want error %v", res, err, tt.want)
			case tt.want != nil && !errors.Is(err, tt.want) && !strings.Contains(err.Error(), tt.want.Error()):
				t.Fatalf("ListOpen() error = %v, want %v", err, tt.want)
			}
			if err != nil && (strings.Contains(err.Error(), "ghs_test_token") || strings.Contains(err.Error(), ours)) {
				t.Errorf("the error holds a secret: %v", err)
			}
			if res != tt.result || len(got) != res.Alerts || int(tt.api.calls.Load()) != res.Calls {
				t.Errorf("ListOpen() = %+v with %d alerts, the API asked %d times; want %+v", res, len(got), tt.api.calls.Load(), tt.result)
			}
			for i, a := range got {
				if i > 0 && a.Ref.Number >= got[i-1].Ref.Number {
					t.Errorf("alert %d came after alert %d: not newest first", a.Ref.Number, got[i-1].Ref.Number)
				}
				want := foreign
				if a.Ref.Number == 7 {
					want = ours
				}
				if a.Hash != apikey.Sum(want) || a.Candidate() != (want == ours) || a.Ref.Repository != "octo/app" || a.Ref.RepositoryURL != "https://ghe.example/octo/app" ||
					a.URL != fmt.Sprintf("https://ghe.example/octo/app/security/secret-scanning/%d", a.Ref.Number) {
					t.Errorf("alert %d = %+v", a.Ref.Number, a)
				}
				if strings.Contains(fmt.Sprintf("%+v", a), want) {
					t.Error("a listed alert holds its token's plaintext")
				}
			}
		})
	}
	if n := elsewhere.Load(); n != 0 {
		t.Errorf("a next page on another host was asked %d times", n)
	}
}

func TestNextLink(t *testing.T) {
	tests := []struct {
		name string
		link []string
		want string
	}{
		{"GitHub's", []string{`<https://api.github.com/organizations/9919/secret-scanning/alerts?page=2>; rel="next", <https://api.github.com/organizations/9919/secret-scanning/alerts?page=5>; rel="last"`},
			"https://api.github.com/organizations/9919/secret-scanning/alerts?page=2"},
		{"next after last", []string{`<https://h/x?page=5>; rel="last", <https://h/x?page=2>; rel="next"`}, "https://h/x?page=2"},
		{"unquoted", []string{`<https://h/x?page=2>; rel=next`}, "https://h/x?page=2"},
		{"two relations", []string{`<https://h/x?page=2>; rel="next last"`}, "https://h/x?page=2"},
		{"two headers", []string{`<https://h/x?page=1>; rel="prev"`, `<https://h/x?page=3>; rel="next"`}, "https://h/x?page=3"},
		{"the last page", []string{`<https://h/x?page=1>; rel="first", <https://h/x?page=4>; rel="prev"`}, ""},
		{"no brackets", []string{`https://h/x?page=2; rel="next"`}, ""},
		{"none", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{"Link": tt.link}
			if got := nextLink(h); got != tt.want {
				t.Errorf("nextLink(%q) = %q, want %q", tt.link, got, tt.want)
			}
		})
	}
}
