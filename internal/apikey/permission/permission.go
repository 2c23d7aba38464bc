// Package permission decides what a key's permissions (an APIKey's spec.permissions) allow: its
// rules compiled once (path templates parsed, CEL conditions checked and bounded in cost), then
// each request matched against them in order, the first rule that matches deciding. The
// operator's admission webhook compiles them to refuse bad ones, the server to decide, so both
// agree on what a rule means.
package permission

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/clientaddr"
)

// Rules are a key's compiled permissions: its own rules, then its roles' (Join). Rules with no
// rule allow nothing (what a key whose permissions do not compile gets); a key without
// permissions has no Rules at all.
type Rules struct {
	rules []rule
	// then are the rules of the roles a key names, read after rules in order: shared with the
	// roles, never copied, so a key naming roles costs a few slice headers.
	then [][]rule
	// unusable says these are a role's refusal of everything (missing): joined, they replace
	// the key's rules rather than follow them.
	unusable bool
}

// Request is what a rule is matched against.
type Request struct {
	// Method is the request's method, Path its path (a query after '?' is ignored).
	Method, Path string
	// Audience is the route's audience.
	Audience string
	// Source is the client's address, when SourceKnown.
	Source      netip.Addr
	SourceKnown bool
}

// Decision is what the rules decide of a request.
type Decision struct {
	// Allowed says the request may pass.
	Allowed bool
	// Rule is the index of the rule that decided in its list (the key's permissions, or Role's
	// rules), -1 when none matched or a role is missing.
	Rule int
	// Role is the APIKeyRole the deciding rule belongs to; "" for the key's own permissions.
	Role string
	// Text is that rule written as one short line, such as `deny DELETE /v1/connections/{id}`.
	Text string
	// refusal is the rule's refusal message, written when it was compiled.
	refusal string
}

// rule is one compiled PermissionRule.
type rule struct {
	allow bool
	// index and role are where the rule was written: its index in the key's permissions
	// (role "") or in role's rules.
	index int
	role  string
	// methods is a bit per method of methodBits; 0 means any.
	methods   uint8
	paths     []template
	audiences []string
	sources   []netip.Prefix
	condition *condition
	text      string
	// refusal is the message of a request the rule refuses.
	refusal string
}

// methodBits are the methods a rule may name, in the order of their bits.
var methodBits = [...]string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}

// Compile compiles a key's own specs, or says which rule is wrong and why; nil when there are none.
func Compile(specs []switchboardv1alpha1.PermissionRule) (*Rules, error) {
	return compile(specs, "")
}

// CompileRole compiles the rules of the APIKeyRole named role, whose refusals name it. When
// they do not compile, it says why, and returns rules refusing everything, saying so: what a
// key naming the role gets.
func CompileRole(role string, specs []switchboardv1alpha1.PermissionRule) (*Rules, error) {
	rs, err := compile(specs, role)
	if err != nil {
		return missing(role, "has rules that do not compile"), err
	}
	return rs, nil
}

// WithRoles is own (a key's compiled permissions), then the rules of the roles it names, in
// their order, as role finds them compiled (CompileRole; false when the role does not exist).
// While one does not exist or does not compile, it is only a refusal of everything naming it. It compiles
// nothing, so a key is joined again cheaply when one of its roles changes.
func WithRoles(own *Rules, names []string, role func(name string) (*Rules, bool)) *Rules {
	out := &Rules{}
	if own != nil {
		out.rules = own.rules
	}
	for _, name := range names {
		rs, ok := role(name)
		if !ok {
			return missing(name, "does not exist")
		}
		if rs != nil && rs.unusable {
			return rs
		}
		if rs != nil {
			out.then = append(out.then, rs.rules)
		}
	}
	return out
}

// missing refuses everything, for the reason why the APIKeyRole role cannot be used.
func missing(role, why string) *Rules {
	msg := "permissions role " + role + " " + why
	return &Rules{rules: []rule{{index: -1, role: role, text: msg, refusal: msg}}, unusable: true}
}

// conditions is how many of specs have a condition: each is a compiled CEL program every
// replica holds, the costliest part of a rule.
func conditions(specs []switchboardv1alpha1.PermissionRule) int {
	n := 0
	for i := range specs {
		if specs[i].Condition != "" {
			n++
		}
	}
	return n
}

func compile(specs []switchboardv1alpha1.PermissionRule, role string) (*Rules, error) {
	list := "permissions"
	if role != "" {
		list = "rules"
	}
	if len(specs) == 0 {
		return nil, nil
	}
	if len(specs) > switchboardv1alpha1.MaxPermissionRules {
		return nil, fmt.Errorf("at most %d %s rules, not %d", switchboardv1alpha1.MaxPermissionRules, list, len(specs))
	}
	if n := conditions(specs); n > switchboardv1alpha1.MaxPermissionConditions {
		return nil, fmt.Errorf("at most %d %s rules may have a condition, not %d", switchboardv1alpha1.MaxPermissionConditions, list, n)
	}
	rs := &Rules{rules: make([]rule, len(specs))}
	var errs []error
	for i := range specs {
		r, err := compileRule(&specs[i])
		if err != nil {
			errs = append(errs, fmt.Errorf("%s[%d]: %w", list, i, err))
		}
		r.index, r.role = i, role
		r.refusal = "refused by permissions rule " + strconv.Itoa(i) + " (" + r.text + ")"
		if role != "" {
			r.refusal = "refused by rule " + strconv.Itoa(i) + " of role " + role + " (" + r.text + ")"
		}
		rs.rules[i] = r
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return rs, nil
}

func compileRule(s *switchboardv1alpha1.PermissionRule) (rule, error) {
	var r rule
	switch s.Effect {
	case switchboardv1alpha1.PermissionAllow:
		r.allow = true
	case switchboardv1alpha1.PermissionDeny:
	default:
		return r, fmt.Errorf("effect %q is neither Allow nor Deny", s.Effect)
	}
	for _, m := range s.Methods {
		i := methodIndex(string(m))
		if i < 0 {
			return r, fmt.Errorf("method %q is not one of %s", m, strings.Join(methodBits[:], ", "))
		}
		r.methods |= 1 << i
	}
	if len(s.Paths) > switchboardv1alpha1.MaxPermissionPaths {
		return r, fmt.Errorf("at most %d paths, not %d", switchboardv1alpha1.MaxPermissionPaths, len(s.Paths))
	}
	r.paths = make([]template, 0, len(s.Paths))
	for _, p := range s.Paths {
		t, err := parseTemplate(p)
		if err != nil {
			return r, fmt.Errorf("path %q: %w", p, err)
		}
		r.paths = append(r.paths, t)
	}
	for _, a := range s.Audiences {
		r.audiences = append(r.audiences, string(a))
	}
	for _, c := range s.SourceRanges {
		p, err := netip.ParsePrefix(string(c))
		if err != nil {
			return r, fmt.Errorf("sourceRanges: %q is not a CIDR", c)
		}
		r.sources = append(r.sources, clientaddr.Range(p))
	}
	if s.Condition != "" {
		c, err := compileCondition(s.Condition)
		if err != nil {
			return r, fmt.Errorf("condition: %w", err)
		}
		r.condition = c
	}
	r.text = text(s)
	return r, nil
}

// methodIndex is m's bit in a rule's methods, -1 when it has none.
func methodIndex(m string) int {
	for i, name := range methodBits {
		if name == m {
			return i
		}
	}
	return -1
}

// Decide decides req: the first rule that matches it, allowing or denying; refused when none
// does. Its path is matched percent-decoded. Without conditions or percent-encoding it does not
// allocate.
func (rs *Rules) Decide(req Request) Decision {
	path, unclean := matchedPath(req.Path)
	conditions := 0 // evaluated so far: at most MaxPermissionConditions a request
	if d, ok := decide(rs.rules, &req, path, unclean, &conditions); ok {
		return d
	}
	for _, rules := range rs.then {
		if d, ok := decide(rules, &req, path, unclean, &conditions); ok {
			return d
		}
	}
	return Decision{Rule: -1}
}

// decide is the decision of the first of rules that matches req, if one does.
func decide(rules []rule, req *Request, path string, unclean bool, conditions *int) (Decision, bool) {
	for i := range rules {
		r := &rules[i]
		if r.matches(req, path, unclean, conditions) {
			return Decision{Allowed: r.allow, Rule: r.index, Role: r.role, Text: r.text, refusal: r.refusal}, true
		}
	}
	return Decision{}, false
}

// matches says whether r matches req (whose path, without its query, is path). What cannot be
// told fails closed, counting as matched for a Deny rule and not for an Allow rule: a method or
// path the gateway did not send, a source that cannot be known, a path that is not clean (its
// segments could be read otherwise upstream), a condition that errs.
//
// A request evaluates at most MaxPermissionConditions conditions, however many rules its key's
// roles add: past them a rule's condition cannot be told either, so one request costs at most
// as much as the conditions of one list.
func (r *rule) matches(req *Request, path string, unclean bool, conditions *int) bool {
	if r.methods != 0 {
		if req.Method == "" {
			if r.allow {
				return false
			}
		} else if i := methodIndex(req.Method); i < 0 || r.methods&(1<<i) == 0 {
			return false
		}
	}
	if len(r.audiences) > 0 && !contains(r.audiences, req.Audience) {
		return false
	}
	if len(r.sources) > 0 {
		if !req.SourceKnown {
			if r.allow {
				return false
			}
		} else if !containsAddr(r.sources, req.Source) {
			return false
		}
	}
	matched := -1
	if len(r.paths) > 0 {
		if unclean {
			if r.allow {
				return false
			}
		} else {
			for i := range r.paths {
				if r.paths[i].match(path, nil) {
					matched = i
					break
				}
			}
			if matched < 0 {
				return false
			}
		}
	}
	if r.condition == nil {
		return true
	}
	if *conditions >= switchboardv1alpha1.MaxPermissionConditions {
		return !r.allow
	}
	*conditions++
	var params map[string]string
	if matched >= 0 && r.paths[matched].captures > 0 {
		params = make(map[string]string, r.paths[matched].captures)
		r.paths[matched].match(path, params)
	}
	ok, err := r.condition.eval(req, path, params)
	if err != nil {
		return !r.allow
	}
	return ok
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

func containsAddr(prefixes []netip.Prefix, a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range prefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// clean says whether path is known (not empty) and has no empty, "." or ".." segment and no
// encoded slash or dot, so that no server behind the gateway reads its segments otherwise than a
// template does. A final "/" is clean: only a final /** matches it.
func clean(path string) bool {
	if path == "" || path[0] != '/' {
		return false
	}
	for i := 0; i < len(path); {
		seg := path[i+1:]
		j := strings.IndexByte(seg, '/')
		if j >= 0 {
			seg = seg[:j]
		}
		if seg == "" && j >= 0 || seg == "." || seg == ".." || encodedSeparator(seg) {
			return false
		}
		i += 1 + len(seg)
	}
	return true
}

// encodedSeparator says whether seg has a percent-encoded '/', '\' or '.'.
func encodedSeparator(seg string) bool {
	for i := 0; i+2 < len(seg); i++ {
		if seg[i] != '%' {
			continue
		}
		switch strings.ToLower(seg[i+1 : i+3]) {
		case "2f", "5c", "2e":
			return true
		}
	}
	return false
}

// text writes s as one short line: its effect, methods and paths ("*" for any), then what else
// it names.
func text(s *switchboardv1alpha1.PermissionRule) string {
	line := strings.ToLower(string(s.Effect)) + " " + joined(s.Methods) + " " + joined(s.Paths)
	if len(s.Audiences) > 0 {
		line += " for " + joined(s.Audiences)
	}
	if len(s.SourceRanges) > 0 {
		line += " from " + joined(s.SourceRanges)
	}
	if s.Condition != "" {
		line += " if " + shortened(s.Condition, maxConditionText)
	}
	return shortened(line, maxRuleText)
}

// joined is list separated by commas, "*" when empty.
func joined[T ~string](list []T) string {
	if len(list) == 0 {
		return "*"
	}
	parts := make([]string, len(list))
	for i, e := range list {
		parts[i] = string(e)
	}
	return strings.Join(parts, ",")
}

// maxConditionText is how much of a condition a rule's text shows, and maxRuleText how much of
// a rule its text shows: it goes in messages and headers, and every replica holds it for every
// rule (twice, with the refusal written from it).
const (
	maxConditionText = 64
	maxRuleText      = 160
)

// shortened is s on one line, cut to n characters with an ellipsis.
func shortened(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// Where names the rule that decided, for the protocols that carry it beside the message: its
// index, followed by " of role R" for a rule of the APIKeyRole R, or "role R" for a missing one.
func (d Decision) Where() string {
	switch {
	case d.Role == "":
		return strconv.Itoa(d.Rule)
	case d.Rule < 0:
		return "role " + d.Role
	}
	return strconv.Itoa(d.Rule) + " of role " + d.Role
}

// Refusal is the message of a request d refused: the rule that refused it (written once, when
// compiled), or that none allowed method and path (which a gateway may not have told).
func (d Decision) Refusal(method, path string) string {
	if d.refusal != "" {
		return d.refusal
	}
	if i := strings.IndexAny(path, "?#"); i >= 0 {
		path = path[:i]
	}
	if method == "" {
		method = "(an unknown method)"
	}
	if path == "" {
		path = "(an unknown path)"
	}
	return "no permissions rule allows " + method + " " + path
}
