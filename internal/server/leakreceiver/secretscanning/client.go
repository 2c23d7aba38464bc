package secretscanning

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard-dev/switchboard/internal/apikey"
)

// Defaults of AlertClientOptions.
const (
	// DefaultAPIBase is GitHub's REST API; a GitHub Enterprise Server's is https://HOST/api/v3.
	DefaultAPIBase = "https://api.github.com"
	// DefaultAPITimeout bounds a fetch of an alert, both its requests.
	DefaultAPITimeout = 10 * time.Second
	// DefaultMaxAPIBody bounds each answer of the API (an alert is about 3 KiB).
	DefaultMaxAPIBody = 256 << 10
	// APIVersion is the REST API version the client speaks (X-GitHub-Api-Version).
	APIVersion = "2022-11-28"
)

// AlertClientOptions configure an AlertClient.
type AlertClientOptions struct {
	// APIBase is the REST API's root URL (default DefaultAPIBase).
	APIBase string
	// Token authenticates the client (required): a fine-grained token or GitHub App token
	// with the "Secret scanning alerts" read permission on the organization's repositories.
	Token string
	// Client does the requests (default: a plain http.Client; Timeout bounds them).
	Client *http.Client
	// Timeout bounds one Fetch (default DefaultAPITimeout).
	Timeout time.Duration
	// MaxBody bounds each answer in bytes (default DefaultMaxAPIBody).
	MaxBody int64
	// Prefix begins this installation's keys (default apikey.DefaultPrefix).
	Prefix string
}

// AlertClient fetches a secret scanning alert's token and location from GitHub's REST API.
// https://docs.github.com/en/rest/secret-scanning/secret-scanning#get-a-secret-scanning-alert
type AlertClient struct {
	opts AlertClientOptions
	base *url.URL
}

// NewAlertClient is a client of the REST API at o.APIBase.
func NewAlertClient(o AlertClientOptions) (*AlertClient, error) {
	if o.APIBase == "" {
		o.APIBase = DefaultAPIBase
	}
	base, err := url.Parse(strings.TrimSuffix(o.APIBase, "/"))
	if err != nil || (base.Scheme != "https" && base.Scheme != "http") || base.Host == "" || base.RawQuery != "" {
		return nil, fmt.Errorf("GitHub API base %q must be an absolute http(s) URL without a query, such as %s or https://HOST/api/v3", o.APIBase, DefaultAPIBase)
	}
	if o.Token == "" {
		return nil, errors.New("GitHub API: no token (the alert's secret is only shown to a token allowed to read secret scanning alerts)")
	}
	if o.Prefix == "" {
		o.Prefix = apikey.DefaultPrefix
	}
	if err := apikey.ValidatePrefix(o.Prefix); err != nil {
		return nil, err
	}
	if o.Timeout < 0 || o.MaxBody < 0 {
		return nil, errors.New("GitHub API: timeout and body bound may not be negative")
	}
	if o.Client == nil {
		o.Client = &http.Client{}
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultAPITimeout
	}
	if o.MaxBody == 0 {
		o.MaxBody = DefaultMaxAPIBody
	}
	return &AlertClient{opts: o, base: base}, nil
}

// Alert is a fetched alert: its token's report, and the alert's own state.
type Alert struct {
	Report
	// State is the alert's state, "open" or "resolved".
	State string
	// Resolution is why a resolved alert was resolved (false_positive, revoked, …).
	Resolution string
	// HTMLURL is the alert's page on GitHub.
	HTMLURL string
}

// alertBody is what switchboard reads of GitHub's alert.
type alertBody struct {
	Number     int64  `json:"number"`
	State      string `json:"state"`
	Resolution string `json:"resolution"`
	SecretType string `json:"secret_type"`
	Secret     string `json:"secret"`
	HTMLURL    string `json:"html_url"`
}

// location is one element of an alert's locations.
// https://docs.github.com/en/rest/secret-scanning/secret-scanning#list-locations-for-a-secret-scanning-alert
type location struct {
	Type    string         `json:"type"`
	Details map[string]any `json:"details"`
}

// Fetch gets ref's alert and classifies its token as a partner program report is; the URL is
// its first location's (a commit's file and line on the repository's page, an issue's or a
// discussion's URL), or the alert's page when the locations cannot be had. The token does not
// outlive the call. Its error wraps ErrUnavailable when GitHub could not be asked or refused
// (a token without the permission gets 403 or 404), ErrBadGateway when it answered something
// else than an alert with its secret. It makes at most two requests.
func (c *AlertClient) Fetch(ctx context.Context, ref AlertRef) (Alert, error) {
	if !validRepository(ref.Repository) || ref.Number <= 0 {
		return Alert{}, fmt.Errorf("%w: alert %q is not owner/name#number", ErrMalformed, ref.ID())
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	// validRepository leaves nothing to escape.
	path := "/repos/" + ref.Repository + "/secret-scanning/alerts/" + strconv.FormatInt(ref.Number, 10)

	var a alertBody
	if err := c.get(ctx, path, nil, &a); err != nil {
		return Alert{}, err
	}
	if a.Secret == "" {
		return Alert{}, fmt.Errorf("%w: alert %s has no secret (is the token allowed to read secret scanning alerts?)", ErrBadGateway, ref.ID())
	}
	alert := Alert{State: a.State, Resolution: a.Resolution, HTMLURL: a.HTMLURL}
	where, source := a.HTMLURL, ""
	var locs []location
	if err := c.get(ctx, path+"/locations", url.Values{"per_page": {"1"}}, &locs); err == nil && len(locs) > 0 {
		if u := locs[0].url(ref.RepositoryURL); u != "" {
			where = u
		}
		source = locs[0].Type
	}
	alert.Report = classify(a.Secret, c.opts.Prefix, a.SecretType, where, source)
	return alert, nil
}

// url is a link to l: a commit's file and line on the repository's page when repoURL is
// known, else the one URL GitHub gives for the location's kind.
func (l location) url(repoURL string) string {
	str := func(k string) string { s, _ := l.Details[k].(string); return s }
	if l.Type == "commit" && repoURL != "" && str("commit_sha") != "" && str("path") != "" {
		u := strings.TrimSuffix(repoURL, "/") + "/blob/" + url.PathEscape(str("commit_sha")) + "/" + strings.TrimPrefix(str("path"), "/")
		if line, ok := l.Details["start_line"].(float64); ok && line > 0 {
			u += "#L" + strconv.Itoa(int(line))
		}
		return u
	}
	keys := make([]string, 0, len(l.Details))
	for k := range l.Details {
		if strings.HasSuffix(k, "_url") && str(k) != "" {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	if len(keys) == 0 {
		return ""
	}
	return str(keys[0])
}

// get GETs path under the API base into v, with GitHub's headers.
func (c *AlertClient) get(ctx context.Context, path string, query url.Values, v any) error {
	u := *c.base
	u.Path += path
	u.RawPath = ""
	u.RawQuery = query.Encode()
	_, err := c.getURL(ctx, &u, c.opts.MaxBody, v)
	return err
}

// getURL GETs u into v, with GitHub's headers and the token, reading at most limit bytes, and
// returns the answer's header. u must be under the API base: the token goes nowhere else. An
// answer that is not JSON of v's shape is ErrBadGateway.
func (c *AlertClient) getURL(ctx context.Context, u *url.URL, limit int64, v any) (http.Header, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", u.Redacted(), err)
	}
	req.Header.Set("Accept", "application/vnd.github+json")
	req.Header.Set("X-GitHub-Api-Version", APIVersion)
	req.Header.Set("Authorization", "Bearer "+c.opts.Token)
	body, header, err := getWithHeader(c.opts.Client, req, limit)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(body, v); err != nil {
		return nil, fmt.Errorf("%w: GET %s: not GitHub's format: %s", ErrBadGateway, u.Redacted(), jsonError(err))
	}
	return header, nil
}
