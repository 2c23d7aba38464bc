package reveal

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"
	"sigs.k8s.io/controller-runtime/pkg/client"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/keyclient"
	"github.com/switchboard-dev/switchboard/internal/scheme"
)

// Client calls the endpoint with its own ServiceAccount token, trusting the certificates of the
// CA bundle ConfigMap (read with the same identity).
type Client struct {
	url    string
	bundle client.ObjectKey
	reader client.Reader
	auth   func(http.RoundTripper) (http.RoundTripper, error)
	dial   func(ctx context.Context, network, address string) (net.Conn, error)

	mu    sync.Mutex
	http  *http.Client
	known []byte // the bundle the current http client trusts
}

// NewClient returns a Client that calls url (https://…/reveal's base, no path) as cfg's
// identity, which must be a bearer token (a ServiceAccount's, refreshed from its file). It
// dials with cfg.Dial when set (tests reach a cluster's network namespace so).
func NewClient(cfg *rest.Config, url string, bundle client.ObjectKey) (*Client, error) {
	if cfg.BearerToken == "" && cfg.BearerTokenFile == "" {
		return nil, errNoToken
	}
	reader, err := client.New(cfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		return nil, err
	}
	token, tokenFile := cfg.BearerToken, cfg.BearerTokenFile
	return &Client{
		url: url, bundle: bundle, reader: reader, dial: cfg.Dial,
		auth: func(rt http.RoundTripper) (http.RoundTripper, error) {
			return transport.NewBearerAuthWithRefreshRoundTripper(token, tokenFile, rt)
		},
	}, nil
}

// For returns the keyclient.Claimer of one person.
func (c *Client) For(user string, groups []string) keyclient.Claimer {
	return &personClaimer{c: c, user: user, groups: groups}
}

type personClaimer struct {
	c      *Client
	user   string
	groups []string
}

func (p *personClaimer) Claim(ctx context.Context, apiKey *switchboardv1alpha1.APIKey) (keyclient.Revealed, error) {
	return p.c.Claim(ctx, &Request{
		Namespace: apiKey.Namespace, Name: apiKey.Name, UID: apiKey.UID, SecretName: apiKey.Status.RevealSecretName,
		User: p.user, Groups: p.groups,
	})
}

// Claim asks the endpoint to claim req's Secret. Its errors are keyclient's: ErrAlreadyClaimed,
// a *ForbiddenError naming what the person lacks, ErrNotARevealSecret, or an error saying
// why the endpoint could not be asked.
func (c *Client) Claim(ctx context.Context, req *Request) (keyclient.Revealed, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return keyclient.Revealed{}, err
	}
	resp, err := c.post(ctx, body, false)
	var unknown *tls.CertificateVerificationError
	if errors.As(err, &unknown) {
		// A replica with a certificate newer than the bundle read last: read it again.
		resp, err = c.post(ctx, body, true)
	}
	if err != nil {
		return keyclient.Revealed{}, fmt.Errorf("asking the operator to claim the key: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return keyclient.Revealed{}, fmt.Errorf("reading the operator's answer: %w", err)
	}
	if resp.StatusCode == http.StatusOK {
		var out Response
		if err := json.Unmarshal(data, &out); err != nil || out.Key == "" {
			return keyclient.Revealed{}, fmt.Errorf("the operator's answer is not a key (%d)", resp.StatusCode)
		}
		return keyclient.Revealed{Key: out.Key, Hint: out.Hint, Generation: out.Generation}, nil
	}
	var p struct {
		Error Problem `json:"error"`
	}
	if err := json.Unmarshal(data, &p); err != nil || p.Error.Code == "" {
		// The filter's own refusals are plain text: the panel's identity was refused.
		return keyclient.Revealed{}, fmt.Errorf("the operator's reveal endpoint refused the panel (%d %s): its ServiceAccount needs the chart's grant to post %s",
			resp.StatusCode, bytes.TrimSpace(data), Path)
	}
	switch p.Error.Code {
	case CodeAlreadyClaimed:
		return keyclient.Revealed{}, keyclient.ErrAlreadyClaimed
	case CodeNotARevealSecret:
		return keyclient.Revealed{}, fmt.Errorf("%w %s (%s)", keyclient.ErrNotARevealSecret, req.Name, p.Error.Message)
	case CodeForbidden:
		var missing []keyclient.Permission
		for _, perm := range keyclient.ClaimPermissions() {
			for _, verb := range p.Error.Missing {
				if perm.Verb == verb {
					missing = append(missing, perm)
				}
			}
		}
		if len(missing) == 0 {
			missing = keyclient.ClaimPermissions()
		}
		return keyclient.Revealed{}, &keyclient.ForbiddenError{User: req.User, Namespace: req.Namespace, Missing: missing}
	}
	return keyclient.Revealed{}, fmt.Errorf("the operator could not claim the key: %s", p.Error.Message)
}

// post sends body, with the bundle read again first when reload (or never read yet).
func (c *Client) post(ctx context.Context, body []byte, reload bool) (*http.Response, error) {
	hc, err := c.httpClient(ctx, reload)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url+Path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	return hc.Do(req)
}

// httpClient returns the client trusting the bundle, reading the bundle when asked or when it
// never was; a bundle unchanged keeps the client (and its connections).
func (c *Client) httpClient(ctx context.Context, reload bool) (*http.Client, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.http != nil && !reload {
		return c.http, nil
	}
	var cm corev1.ConfigMap
	if err := c.reader.Get(ctx, c.bundle, &cm); err != nil {
		return nil, fmt.Errorf("reading the reveal endpoint's certificates (ConfigMap %s): %w", c.bundle, err)
	}
	pem := []byte(cm.Data[BundleKey])
	if c.http != nil && bytes.Equal(pem, c.known) {
		return c.http, nil
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("ConfigMap %s holds no certificate under %s: is the operator's reveal endpoint running?", c.bundle, BundleKey)
	}
	rt, err := c.auth(&http.Transport{
		TLSClientConfig:     &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: pool},
		TLSHandshakeTimeout: 10 * time.Second,
		MaxIdleConnsPerHost: 4,
		DialContext:         c.dial,
	})
	if err != nil {
		return nil, err
	}
	if c.http != nil {
		c.http.CloseIdleConnections()
	}
	c.http = &http.Client{Timeout: 20 * time.Second, Transport: rt}
	c.known = pem
	return c.http, nil
}
