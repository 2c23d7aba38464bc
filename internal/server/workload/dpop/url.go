package dpop

import (
	"errors"
	"net"
	"net/url"
	"strings"
)

// NormalizeURL returns the form of an http(s) URL that htu is compared in (RFC 9449 §4.3, by
// RFC 3986 §6.2.2 and §6.2.3): the query and the fragment dropped, the scheme and the host in
// lower case, the scheme's default port dropped, an empty path made "/", percent-encodings of
// unreserved characters decoded and the others' hex in upper case, and dot segments removed. A
// URL that is not absolute http or https, or carries user information, is an error.
func NormalizeURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", err
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" {
		return "", errors.New("not an http or https URL")
	}
	if u.User != nil || u.Opaque != "" {
		return "", errors.New("URL carries user information or is opaque")
	}
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if host == "" {
		return "", errors.New("URL has no host")
	}
	if scheme == "http" && port == "80" || scheme == "https" && port == "443" {
		port = ""
	}
	if strings.Contains(host, ":") { // an IPv6 literal, bracketed again
		host = "[" + host + "]"
	}
	if port != "" {
		host = net.JoinHostPort(strings.Trim(host, "[]"), port)
	}
	path := removeDotSegments(normalizePercents(u.EscapedPath()))
	if path == "" {
		path = "/"
	}
	return scheme + "://" + host + path, nil
}

// normalizePercents decodes the percent-encodings of unreserved characters (RFC 3986 §2.3) and
// writes the others' hex digits in upper case.
func normalizePercents(p string) string {
	if !strings.Contains(p, "%") {
		return p
	}
	var b strings.Builder
	b.Grow(len(p))
	for i := 0; i < len(p); i++ {
		if p[i] == '%' && i+2 < len(p) && isHex(p[i+1]) && isHex(p[i+2]) {
			c := unhex(p[i+1])<<4 | unhex(p[i+2])
			if isUnreserved(c) {
				b.WriteByte(c)
			} else {
				b.WriteByte('%')
				b.WriteString(strings.ToUpper(p[i+1 : i+3]))
			}
			i += 2
			continue
		}
		b.WriteByte(p[i])
	}
	return b.String()
}

// removeDotSegments is RFC 3986 §5.2.4's algorithm, on a path already escaped.
func removeDotSegments(in string) string {
	if !strings.Contains(in, ".") {
		return in
	}
	var out []string
	segments := strings.Split(in, "/")
	for i, s := range segments {
		last := i == len(segments)-1
		switch s {
		case ".":
			if last {
				out = append(out, "")
			}
		case "..":
			if len(out) > 1 {
				out = out[:len(out)-1]
			}
			if last {
				out = append(out, "")
			}
		default:
			out = append(out, s)
		}
	}
	return strings.Join(out, "/")
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	default:
		return c - 'a' + 10
	}
}

func isUnreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}
