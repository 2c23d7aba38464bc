package permission

import (
	"errors"
	"fmt"
	"strings"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
)

// template is a parsed path template: segments matched one by one, then any rest when it ends
// in /**.
type template struct {
	segments []segment
	rest     bool
	// captures is how many segments are {name}s.
	captures int
}

// segment is a literal, or a capture named param that matches any one non-empty segment.
type segment struct {
	literal, param string
}

// parseTemplate parses a path template: "/", or "/"-separated segments each a literal or a
// {name}, of which the last may be ** (any rest).
func parseTemplate(p string) (template, error) {
	var t template
	switch {
	case len(p) > switchboardv1alpha1.MaxPermissionPathLength:
		return t, fmt.Errorf("longer than %d characters", switchboardv1alpha1.MaxPermissionPathLength)
	case p == "" || p[0] != '/':
		return t, errors.New(`a path template starts with "/"`)
	case p == "/":
		return t, nil
	}
	parts := strings.Split(p[1:], "/")
	if len(parts) > switchboardv1alpha1.MaxPermissionPathSegments {
		return t, fmt.Errorf("%d segments: at most %d", len(parts), switchboardv1alpha1.MaxPermissionPathSegments)
	}
	t.segments = make([]segment, 0, len(parts))
	names := map[string]bool{}
	for i, s := range parts {
		switch {
		case s == "**" && i == len(parts)-1:
			t.rest = true
		case s == "" || s == "." || s == "..":
			return t, fmt.Errorf("segment %d is %q: a segment is a name, {name} or a final **", i+1, s)
		case s[0] == '{' && s[len(s)-1] == '}':
			name := s[1 : len(s)-1]
			if !validName(name) {
				return t, fmt.Errorf("%s: a capture's name is a letter or '_' then letters, digits or '_'", s)
			}
			if names[name] {
				return t, fmt.Errorf("%s is captured twice", s)
			}
			names[name] = true
			t.segments = append(t.segments, segment{param: name})
			t.captures++
		case strings.ContainsAny(s, "{}*?#%"):
			return t, fmt.Errorf("segment %q: '{', '}', '*', '?', '#' and '%%' are only allowed as {name} or a final /**", s)
		default:
			t.segments = append(t.segments, segment{literal: s})
		}
	}
	return t, nil
}

// validName says whether s is a capture's name.
func validName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '_' && (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// match says whether path (clean) matches t, writing its captures into params when not nil.
func (t *template) match(path string, params map[string]string) bool {
	rest := path
	for _, s := range t.segments {
		if rest == "" || rest[0] != '/' {
			return false
		}
		rest = rest[1:]
		seg := rest
		if j := strings.IndexByte(rest, '/'); j >= 0 {
			seg = rest[:j]
		}
		switch {
		case s.param == "":
			if seg != s.literal {
				return false
			}
		case seg == "":
			return false
		case params != nil:
			params[s.param] = seg
		}
		rest = rest[len(seg):]
	}
	switch {
	case t.rest:
		return rest == "" || rest[0] == '/'
	case len(t.segments) == 0:
		return rest == "/"
	}
	return rest == ""
}
