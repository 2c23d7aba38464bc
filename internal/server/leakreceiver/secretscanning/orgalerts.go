package secretscanning

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/switchboard-dev/switchboard/internal/config"
)

// Listing an organization's open alerts: GitHub does not deliver an organization's webhook
// again on its own, so a delivery lost (the receiver down, an answer that failed) is found
// here instead.
// https://docs.github.com/en/rest/secret-scanning/secret-scanning#list-secret-scanning-alerts-for-an-organization

const (
	// ListPageSize is the alerts asked for in one request: GitHub's most.
	ListPageSize = 100
	// DefaultMaxListBody bounds one page: 100 alerts, each with its repository object (some
	// 6 KiB of URLs), stay well under 4 MiB.
	DefaultMaxListBody = 4 << 20
)

// OrgAlert is one open alert of an organization, with its token's report.
type OrgAlert struct {
	// Ref names the alert.
	Ref AlertRef
	// Report is its token's, classified as a partner program report is; its URL is the
	// alert's page (a location would cost a request per alert).
	Report
}

// ListResult says what a listing did.
type ListResult struct {
	// Calls is how many requests it made.
	Calls int
	// Alerts is how many alerts it handed over; Skipped how many it could not (no secret, no
	// repository's name, no number).
	Alerts, Skipped int
	// More says that pages were left unread when the budget of requests ran out.
	More bool
}

// orgAlertBody is what switchboard reads of an alert of the organization's list.
type orgAlertBody struct {
	alertBody
	Repository *struct {
		FullName string `json:"full_name"`
		HTMLURL  string `json:"html_url"`
	} `json:"repository"`
}

// ListOpen asks GitHub for org's open secret scanning alerts, newest first, ListPageSize a
// page, with their secrets, and calls each with every alert it can read, until the last page
// or maxCalls requests (the next pages are left, and ListResult.More says so). Each token
// does not outlive the page it came in. On an error it stops and says why: ErrUnavailable
// when GitHub could not be asked or refused (a token without the organization's permission
// gets 403 or 404), ErrBadGateway when a page could not be read. The next page is followed
// only to the API's own host and path, so the token goes nowhere else.
func (c *AlertClient) ListOpen(ctx context.Context, org string, maxCalls int, each func(OrgAlert)) (ListResult, error) {
	var res ListResult
	if !config.ValidOrganization(org) {
		return res, fmt.Errorf("organization %q is not a GitHub login", org)
	}
	if maxCalls < 1 {
		return res, errors.New("listing alerts: the budget of requests must be at least 1")
	}
	first := *c.base
	first.Path += "/orgs/" + org + "/secret-scanning/alerts"
	first.RawPath = ""
	first.RawQuery = url.Values{
		"state": {"open"}, "per_page": {fmt.Sprint(ListPageSize)}, "sort": {"created"}, "direction": {"desc"}, "hide_secret": {"false"},
	}.Encode()
	next := &first
	for next != nil {
		if res.Calls == maxCalls {
			res.More = true
			return res, nil
		}
		res.Calls++
		var page []orgAlertBody
		header, err := c.getPage(ctx, next, &page)
		if err != nil {
			return res, err
		}
		for i := range page {
			a := &page[i]
			if a.Secret == "" || a.Number <= 0 || a.Repository == nil || !validRepository(a.Repository.FullName) {
				res.Skipped++
				continue
			}
			res.Alerts++
			each(OrgAlert{
				Ref:    AlertRef{Repository: a.Repository.FullName, RepositoryURL: a.Repository.HTMLURL, Number: a.Number},
				Report: classify(a.Secret, c.opts.Prefix, a.SecretType, a.HTMLURL, ""),
			})
		}
		if next, err = c.nextPage(header, &first); err != nil {
			return res, err
		}
	}
	return res, nil
}

// getPage GETs one page of alerts within the client's timeout.
func (c *AlertClient) getPage(ctx context.Context, u *url.URL, v any) (http.Header, error) {
	ctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	return c.getURL(ctx, u, DefaultMaxListBody, v)
}

// nextPage is the Link header's rel="next" URL, nil on the last page. GitHub may name the
// organization by its number there (/organizations/{id}/secret-scanning/alerts); a next page
// elsewhere than the API's scheme, host and an organization's alerts under its path is
// ErrBadGateway: the token is sent to no other place.
func (c *AlertClient) nextPage(h http.Header, first *url.URL) (*url.URL, error) {
	raw := nextLink(h)
	if raw == "" {
		return nil, nil
	}
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != first.Scheme || u.Host != first.Host || u.User != nil || !c.alertsPath(u.EscapedPath()) {
		return nil, fmt.Errorf("%w: the next page of alerts is not an organization's alerts under %s", ErrBadGateway, c.base.Redacted())
	}
	return u, nil
}

// alertsPath says whether p is an organization's alerts under the API base, by login or by
// number: {base}/orgs/{login}/secret-scanning/alerts or {base}/organizations/{id}/….
func (c *AlertClient) alertsPath(p string) bool {
	rest, ok := strings.CutPrefix(p, c.base.EscapedPath()+"/")
	if !ok {
		return false
	}
	kind, rest, _ := strings.Cut(rest, "/")
	org, rest, _ := strings.Cut(rest, "/")
	return (kind == "orgs" || kind == "organizations") && config.ValidOrganization(org) && rest == "secret-scanning/alerts"
}

// nextLink finds the rel="next" target of Link headers: <URL>; rel="next", ….
// https://docs.github.com/en/rest/using-the-rest-api/using-pagination-in-the-rest-api
func nextLink(h http.Header) string {
	for _, v := range h.Values("Link") {
		for link := range strings.SplitSeq(v, ",") {
			target, params, _ := strings.Cut(strings.TrimSpace(link), ";")
			if !strings.HasPrefix(target, "<") || !strings.HasSuffix(target, ">") {
				continue
			}
			for p := range strings.SplitSeq(params, ";") {
				name, value, _ := strings.Cut(strings.TrimSpace(p), "=")
				if strings.EqualFold(name, "rel") && contains(strings.Fields(strings.Trim(value, `"`)), "next") {
					return target[1 : len(target)-1]
				}
			}
		}
	}
	return ""
}

func contains(values []string, v string) bool {
	for _, x := range values {
		if strings.EqualFold(x, v) {
			return true
		}
	}
	return false
}
