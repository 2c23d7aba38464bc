package secretscanning

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/switchboard-dev/switchboard/internal/apikey"
)

// Bounds of a partner program request, and the defaults of PartnerOptions.
const (
	// MaxPartnerEntryBytes is, generously, the most one match of a request takes: a token of
	// the registered pattern (some 60 bytes), its type and source (a few tens), the URL where it
	// was found (a blob, issue or gist URL: a few hundred) and the JSON around them.
	MaxPartnerEntryBytes = 1 << 10
	// DefaultMaxBatch bounds the matches of one request. GitHub sends what one push, issue or
	// gist revealed, a handful of matches; past the bound the request is refused whole.
	DefaultMaxBatch = 256
	// DefaultMaxPartnerBody bounds a request's body: DefaultMaxBatch matches of
	// MaxPartnerEntryBytes, 256 KiB.
	DefaultMaxPartnerBody = DefaultMaxBatch * MaxPartnerEntryBytes
)

// PartnerOptions configure a Partner.
type PartnerOptions struct {
	// Keys verifies the requests' signatures (required).
	Keys *KeySet
	// Prefix begins this installation's keys (default apikey.DefaultPrefix).
	Prefix string
	// MaxBody bounds a request's body in bytes (default MaxBatch matches of
	// MaxPartnerEntryBytes).
	MaxBody int64
	// MaxBatch bounds the matches of one request (default DefaultMaxBatch).
	MaxBatch int
}

// Partner reads secret scanning partner program requests.
type Partner struct {
	opts PartnerOptions
}

// NewPartner is a reader of partner program requests with o's keys, prefix and bounds.
func NewPartner(o PartnerOptions) (*Partner, error) {
	if o.Keys == nil {
		return nil, errors.New("secret scanning partner: no key set")
	}
	if o.Prefix == "" {
		o.Prefix = apikey.DefaultPrefix
	}
	if err := apikey.ValidatePrefix(o.Prefix); err != nil {
		return nil, err
	}
	if o.MaxBody < 0 || o.MaxBatch < 0 {
		return nil, errors.New("secret scanning partner: body and batch bounds may not be negative")
	}
	if o.MaxBatch == 0 {
		o.MaxBatch = DefaultMaxBatch
	}
	if o.MaxBody == 0 {
		o.MaxBody = int64(o.MaxBatch) * MaxPartnerEntryBytes
	}
	return &Partner{opts: o}, nil
}

// Read verifies r's signature over its raw body and returns its reports, in the request's
// order: Verify, then Parse. Error messages never contain a token.
func (p *Partner) Read(r *http.Request) ([]Report, error) {
	body, err := p.Verify(r)
	if err != nil {
		return nil, err
	}
	return p.Parse(body)
}

// Verify checks r's signature headers before it reads a byte of the body
// (CheckPartnerHeaders), then reads at most the body bound and verifies the signature over
// it. Past the bound the request is refused (ErrTooLarge); so it is when the signature does
// not verify (ErrUnauthenticated, or ErrUnavailable when GitHub's keys could not be fetched).
// What it returns is a body GitHub signed.
func (p *Partner) Verify(r *http.Request) ([]byte, error) {
	if err := CheckPartnerHeaders(r.Header); err != nil {
		return nil, err
	}
	body, err := readBody(r, p.opts.MaxBody)
	if err != nil {
		return nil, err
	}
	err = p.opts.Keys.Verify(r.Context(), r.Header.Get("Github-Public-Key-Identifier"), r.Header.Get("Github-Public-Key-Signature"), body)
	if err != nil {
		return nil, err
	}
	return body, nil
}

// Parse reads a verified body (Verify's): past the batch bound it is refused whole
// (ErrTooLarge) and no report is returned; so it is when it is not a JSON array of matches
// (ErrMalformed).
func (p *Partner) Parse(body []byte) ([]Report, error) {
	return parsePartner(body, p.opts.Prefix, p.opts.MaxBatch)
}

// partnerMatch is one element of a partner program request.
type partnerMatch struct {
	Token  string `json:"token"`
	Type   string `json:"type"`
	URL    string `json:"url"`
	Source string `json:"source"`
}

// parsePartner reads a partner program body: a JSON array of at most maxBatch matches, each
// with a token.
func parsePartner(body []byte, prefix string, maxBatch int) ([]Report, error) {
	if t := bytes.TrimLeft(body, " \t\r\n"); len(t) == 0 || t[0] != '[' {
		return nil, fmt.Errorf("%w: the body is not a JSON array", ErrMalformed)
	}
	var matches []partnerMatch
	if err := json.Unmarshal(body, &matches); err != nil {
		return nil, fmt.Errorf("%w: the body is not a JSON array of {token, type, url, source}: %s", ErrMalformed, jsonError(err))
	}
	if len(matches) > maxBatch {
		return nil, fmt.Errorf("%w: %d matches in one request, more than %d", ErrTooLarge, len(matches), maxBatch)
	}
	reports := make([]Report, 0, len(matches))
	for i, m := range matches {
		if m.Token == "" {
			return nil, fmt.Errorf("%w: match %d has no token", ErrMalformed, i)
		}
		reports = append(reports, classify(m.Token, prefix, m.Type, m.URL, m.Source))
	}
	return reports, nil
}

// jsonError describes a JSON error by its kind and offset only: encoding/json's syntax errors
// quote the offending character, which could be part of a token.
func jsonError(err error) string {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax):
		return fmt.Sprintf("syntax error at byte %d", syntax.Offset)
	case errors.As(err, &typ):
		return fmt.Sprintf("a %s where %s belongs, at byte %d", typ.Value, typ.Type, typ.Offset)
	default:
		return "invalid JSON"
	}
}

// readBody reads r's body, refusing one larger than limit bytes (ErrTooLarge) without reading
// past limit+1.
func readBody(r *http.Request, limit int64) ([]byte, error) {
	if r.ContentLength > limit {
		return nil, fmt.Errorf("%w: a body of %d bytes, more than %d", ErrTooLarge, r.ContentLength, limit)
	}
	if r.Body == nil {
		return nil, nil
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%w: reading the body: %w", ErrMalformed, err)
	}
	if int64(len(body)) > limit {
		return nil, fmt.Errorf("%w: a body of more than %d bytes", ErrTooLarge, limit)
	}
	return body, nil
}
