// Package xfcc reads Envoy's X-Forwarded-Client-Cert header (XFCC), in which a proxy that
// terminated mutual TLS tells what it authenticated of the client's certificate.
//
// The format, as Envoy documents it (configuration/http/http_conn_man/headers): elements
// separated by ",", each added by one proxy, the last by the proxy nearest the reader; an
// element is key=value pairs separated by ";" (keys By, Hash, Cert, Chain, Subject, URI, DNS,
// case-insensitive; URI and DNS once per SAN, "URI=" when there is none); a value that holds
// ",", ";" or "=" is double-quoted, and a double quote inside it is written \". Envoy itself
// writes URI SANs unquoted, so an unquoted value may hold "=" (only the first "=" of a pair
// separates its key).
//
// The header is worth only what the proxy that set it is: a reader must believe it only from a
// proxy it trusts, which replaced whatever a client sent (Envoy's SANITIZE_SET).
package xfcc

import (
	"errors"
	"strings"
)

// Bounds of what is parsed: a header of several certificates' hashes and SANs fits well
// within them; a full PEM (Cert=, Chain=) may not, and then nothing is read from the header.
const (
	// MaxLength bounds the header's bytes.
	MaxLength = 16 << 10
	// MaxElements bounds its elements (the proxies it passed through).
	MaxElements = 8
	// MaxPairs bounds the pairs of one element.
	MaxPairs = 32
	// MaxSPIFFEIDLength bounds a SPIFFE ID read as a principal: the longest a binding may name.
	MaxSPIFFEIDLength = 256
)

// The errors of Parse and SPIFFEID.
var (
	ErrTooLong         = errors.New("xfcc: the header is longer than its bound")
	ErrTooManyElements = errors.New("xfcc: the header has more elements than its bound")
	ErrTooManyPairs    = errors.New("xfcc: an element has more pairs than its bound")
	ErrMalformed       = errors.New("xfcc: the header is not key=value pairs separated by ';' and ','")
	ErrNoSPIFFEID      = errors.New("xfcc: the nearest proxy's element has not exactly one URI SAN, a SPIFFE ID")
)

// Pair is one key=value of an element, its value unquoted.
type Pair struct{ Key, Value string }

// Element is what one proxy added: its pairs in order.
type Element []Pair

// Values are the values of key (case-insensitive) in e, in order.
func (e Element) Values(key string) []string {
	var out []string
	for _, p := range e {
		if strings.EqualFold(p.Key, key) {
			out = append(out, p.Value)
		}
	}
	return out
}

// Parse reads the header's value v into its elements, first to last (the last is the nearest
// proxy's), or says why it cannot. Spaces and tabs around an element are skipped, as a
// proxy that joins repeated fields adds them; an empty element is malformed.
func Parse(v string) ([]Element, error) {
	if len(v) > MaxLength {
		return nil, ErrTooLong
	}
	var out []Element
	p := parser{s: v}
	for {
		if len(out) == MaxElements {
			return nil, ErrTooManyElements
		}
		p.skipSpace()
		e, err := p.element()
		if err != nil {
			return nil, err
		}
		out = append(out, e)
		p.skipSpace()
		if p.i == len(p.s) {
			return out, nil
		}
		p.i++ // the ',' that element stopped at
	}
}

// SPIFFEID is the SPIFFE ID of the client the nearest proxy authenticated: the single URI SAN
// of v's last element, when it is a SPIFFE ID (spiffe://, at most MaxSPIFFEIDLength bytes of
// the characters a SPIFFE ID may hold). A certificate with no URI SAN, several, or another
// kind proves no SPIFFE ID (an X.509-SVID has exactly one).
func SPIFFEID(v string) (string, error) {
	elements, err := Parse(v)
	if err != nil {
		return "", err
	}
	uris := elements[len(elements)-1].Values("URI")
	if len(uris) != 1 || !validSPIFFEID(uris[0]) {
		return "", ErrNoSPIFFEID
	}
	return uris[0], nil
}

// validSPIFFEID says id is spiffe://, a trust domain and a path of the characters the SPIFFE ID
// standard allows (as APIKey spec.binding.spiffeIDs are), within MaxSPIFFEIDLength.
func validSPIFFEID(id string) bool {
	rest, ok := strings.CutPrefix(id, "spiffe://")
	if !ok || rest == "" || len(id) > MaxSPIFFEIDLength {
		return false
	}
	domain, path, _ := strings.Cut(rest, "/")
	if domain == "" {
		return false
	}
	for i := range len(domain) {
		if !domainChar(domain[i]) {
			return false
		}
	}
	for i := range len(path) {
		if !pathChar(path[i]) {
			return false
		}
	}
	return true
}

// domainChar says c may appear in a SPIFFE trust domain.
func domainChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
}

// keyChar says c may appear in an XFCC key.
func keyChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}

// pathChar says c may appear in a SPIFFE ID's path (segments separated by '/').
func pathChar(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	return strings.IndexByte("/._~%!$&'()*+,;=:@-", c) >= 0
}

type parser struct {
	s string
	i int
}

func (p *parser) skipSpace() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

// element reads pairs up to the ',' that ends the element (left unread) or the end.
func (p *parser) element() (Element, error) {
	var e Element
	for {
		if len(e) == MaxPairs {
			return nil, ErrTooManyPairs
		}
		key, err := p.key()
		if err != nil {
			return nil, err
		}
		value, err := p.value()
		if err != nil {
			return nil, err
		}
		e = append(e, Pair{Key: key, Value: value})
		end := p.i
		p.skipSpace()
		switch {
		case p.i == len(p.s):
			return e, nil
		case p.s[p.i] == ',':
			p.i = end // the spaces before ',' are Parse's to skip
			return e, nil
		case p.s[p.i] == ';':
			p.i++
			p.skipSpace()
		default:
			return nil, ErrMalformed
		}
	}
}

// key reads a key and its '=': letters, digits, '-' and '_'.
func (p *parser) key() (string, error) {
	start := p.i
	for p.i < len(p.s) {
		c := p.s[p.i]
		if c == '=' {
			break
		}
		if !keyChar(c) {
			return "", ErrMalformed
		}
		p.i++
	}
	if p.i == start || p.i == len(p.s) {
		return "", ErrMalformed
	}
	key := p.s[start:p.i]
	p.i++ // '='
	return key, nil
}

// value reads a value: quoted (\" is a quote; the closing quote must end it) or up to the next
// ';' or ',' (no quote inside; trailing spaces are dropped).
func (p *parser) value() (string, error) {
	if p.i < len(p.s) && p.s[p.i] == '"' {
		return p.quoted()
	}
	start := p.i
	for p.i < len(p.s) {
		c := p.s[p.i]
		if c == ';' || c == ',' {
			break
		}
		if c == '"' || c < ' ' && c != '\t' || c == 0x7f {
			return "", ErrMalformed
		}
		p.i++
	}
	return strings.TrimRight(p.s[start:p.i], " \t"), nil
}

// quoted reads a quoted value from its opening quote.
func (p *parser) quoted() (string, error) {
	p.i++ // '"'
	var b strings.Builder
	start := p.i
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case c == '"':
			b.WriteString(p.s[start:p.i])
			p.i++
			return b.String(), nil
		case c == '\\' && p.i+1 < len(p.s) && p.s[p.i+1] == '"':
			b.WriteString(p.s[start:p.i])
			b.WriteByte('"')
			p.i += 2
			start = p.i
		case c < ' ' && c != '\t' || c == 0x7f:
			return "", ErrMalformed
		default:
			p.i++
		}
	}
	return "", ErrMalformed // no closing quote
}
