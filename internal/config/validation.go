package config

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/apikey"
)

// The bounds of authz.grpc.maxMessageBytes: one largest request decoded may take 40 MiB of the
// listener's 64 MiB decode budget (internal/frontdoor).
const (
	minGRPCMessage = 4 << 10
	maxGRPCMessage = 512 << 10
)

// maxCreditReplicas bounds rateLimitCredits.replicas: beyond it a share is a thousandth of the
// credits, and no deployment of the server runs that many replicas.
const maxCreditReplicas = 1000

// minCatchUpPeriod is the least time between two listings of an organization's alerts: a
// listing may take its budget of requests, and the token's limit is per hour.
const minCatchUpPeriod = time.Minute

// ValidateServerConfiguration says what is wrong with a defaulted ServerConfiguration, each
// error naming its field's path; empty when nothing is.
func ValidateServerConfiguration(c *configv1alpha1.ServerConfiguration) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, requiredAddress(c.Listen, field.NewPath("listen"))...)
	errs = append(errs, keyPrefix(c.KeyPrefix, field.NewPath("keyPrefix"))...)
	if !switchboardv1alpha1.ValidAudience(c.Audience) {
		errs = append(errs, field.Invalid(field.NewPath("audience"), c.Audience,
			"must be a DNS label: lower-case letters, digits and '-', starting and ending with a letter or digit, at most 63"))
	}
	errs = append(errs, trustedProxies(c.TrustedProxies, field.NewPath("trustedProxies"))...)
	errs = append(errs, trustedProxies(c.Authz.GRPC.Gateways, field.NewPath("authz", "grpc", "gateways"))...)
	errs = append(errs, atLeast(c.MaxInFlightBytesPerNamespace, 0, field.NewPath("maxInFlightBytesPerNamespace"))...)
	errs = append(errs, atLeast(c.MaxConnections, 0, field.NewPath("maxConnections"))...)
	errs = append(errs, atLeast(c.MaxConnectionsPerClient, 0, field.NewPath("maxConnectionsPerClient"))...)

	afl := field.NewPath("authFailureLimit")
	errs = append(errs, atLeast(c.AuthFailureLimit.Rate, 0, afl.Child("rate"))...)
	errs = append(errs, atLeast(c.AuthFailureLimit.Burst, 1, afl.Child("burst"))...)
	errs = append(errs, atLeast(c.AuthFailureLimit.Clients, 1, afl.Child("clients"))...)

	redis := field.NewPath("rateLimitRedis")
	if u := c.RateLimitRedis.URL; u != "" {
		if p, err := url.Parse(u); err != nil || (p.Scheme != "redis" && p.Scheme != "rediss") || p.Host == "" {
			// The value is not echoed: it may hold a password.
			errs = append(errs, field.Invalid(redis.Child("url"), "(not shown)", "must be a redis:// or rediss:// URL"))
		}
	} else if c.RateLimitRedis.PasswordFile != "" {
		errs = append(errs, field.Invalid(redis.Child("passwordFile"), c.RateLimitRedis.PasswordFile, "needs rateLimitRedis.url"))
	}
	errs = append(errs, positiveDuration(c.RateLimitRedis.Timeout, redis.Child("timeout"))...)
	credits := field.NewPath("rateLimitCredits")
	if m := c.RateLimitCredits.OnRedisFailure; m != configv1alpha1.CreditsOnRedisFailureRefuse && m != configv1alpha1.CreditsOnRedisFailureCountInMemory {
		errs = append(errs, field.NotSupported(credits.Child("onRedisFailure"), m,
			[]string{configv1alpha1.CreditsOnRedisFailureRefuse, configv1alpha1.CreditsOnRedisFailureCountInMemory}))
	}
	if r := c.RateLimitCredits.Replicas; r != nil && (*r < 1 || *r > maxCreditReplicas) {
		errs = append(errs, field.Invalid(credits.Child("replicas"), *r, fmt.Sprintf("must be from 1 to %d", maxCreditReplicas)))
	}

	errs = append(errs, positiveDuration(c.LastUsed.Interval, field.NewPath("lastUsed", "interval"))...)
	errs = append(errs, greaterThanZero(c.LastUsed.WritesPerSecond, field.NewPath("lastUsed", "writesPerSecond"))...)
	errs = append(errs, validateShutdown(&c.Shutdown)...)
	errs = append(errs, validateBinding(&c.Binding, field.NewPath("binding"))...)

	grpc := field.NewPath("authz", "grpc")
	g := c.Authz.GRPC
	if (g.TLSCertFile == "") != (g.TLSKeyFile == "") {
		errs = append(errs, field.Required(grpc.Child(map[bool]string{true: "tlsCertFile", false: "tlsKeyFile"}[g.TLSCertFile == ""]),
			"tlsCertFile and tlsKeyFile go together"))
	}
	if g.ClientCAFile != "" && g.TLSCertFile == "" {
		errs = append(errs, field.Required(grpc.Child("tlsCertFile"), "clientCAFile needs TLS: set tlsCertFile and tlsKeyFile"))
	}
	if m := g.MaxMessageBytes; m != nil && (*m < minGRPCMessage || *m > maxGRPCMessage) {
		errs = append(errs, field.Invalid(grpc.Child("maxMessageBytes"), *m, fmt.Sprintf("must be from %d to %d", minGRPCMessage, maxGRPCMessage)))
	}
	http := field.NewPath("authz", "http")
	errs = append(errs, atLeast(c.Authz.HTTP.MaxConnections, 0, http.Child("maxConnections"))...)
	errs = append(errs, atLeast(c.Authz.HTTP.MaxConnectionsPerClient, 0, http.Child("maxConnectionsPerClient"))...)

	errs = append(errs, validateLeakReports(&c.LeakReports, field.NewPath("leakReports"))...)

	if c.Panel != nil {
		errs = append(errs, validatePanelSettings(&c.Panel.PanelSettings, field.NewPath("panel"))...)
	}
	return errs
}

// trustDomain is a SPIFFE trust domain's name (the SPIFFE ID standard, section 2.1).
var trustDomain = regexp.MustCompile(`^[a-z0-9._-]{1,255}$`)

// headerName is an HTTP field name (RFC 9110 section 5.1, a token), of a length a proxy sets.
var headerName = regexp.MustCompile("^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,128}$")

// validateBinding checks the settings of the workloads' proofs: an audience a token can carry,
// a trust domain a SPIFFE ID can name, a header name.
func validateBinding(b *configv1alpha1.WorkloadBinding, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if a := b.TokenAudience; a == "" || len(a) > 253 || strings.ContainsAny(a, " \t\r\n,") {
		errs = append(errs, field.Invalid(path.Child("tokenAudience"), a, "must be one audience: 1 to 253 characters, no spaces or commas"))
	}
	if !trustDomain.MatchString(b.TrustDomain) {
		errs = append(errs, field.Invalid(path.Child("trustDomain"), b.TrustDomain, "must be a SPIFFE trust domain: lower-case letters, digits, '.', '_' and '-'"))
	}
	if h := b.ClientCertHeader; h != "" && !headerName.MatchString(h) {
		errs = append(errs, field.Invalid(path.Child("clientCertHeader"), h, "must be empty (none is read) or a header name, such as X-Forwarded-Client-Cert: 1 to 128 letters, digits and !#$%&'*+-.^_`|~"))
	}
	return errs
}

// validateLeakReports checks the leak reports listener's settings: bounds that bound, absolute
// URLs, and, when it listens, a way of GitHub's to serve, each with its secrets' files.
func validateLeakReports(lr *configv1alpha1.LeakReports, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, atLeast(lr.MaxBodyBytes, 1024, path.Child("maxBodyBytes"))...)
	errs = append(errs, atLeast(lr.MaxBatch, 1, path.Child("maxBatch"))...)
	errs = append(errs, greaterThanZero(lr.Rate, path.Child("rate"))...)
	errs = append(errs, atLeast(lr.Burst, 1, path.Child("burst"))...)
	unverified := path.Child("unverifiedLimit")
	errs = append(errs, greaterThanZero(lr.UnverifiedLimit.Rate, unverified.Child("rate"))...)
	errs = append(errs, atLeast(lr.UnverifiedLimit.Burst, 1, unverified.Child("burst"))...)
	errs = append(errs, atLeast(lr.UnverifiedLimit.Clients, 1, unverified.Child("clients"))...)
	errs = append(errs, atLeast(lr.Replays.Entries, 1, path.Child("replays", "entries"))...)
	errs = append(errs, positiveDuration(lr.Replays.TTL, path.Child("replays", "ttl"))...)
	partner, alerts := path.Child("partner"), path.Child("organizationAlerts")
	errs = append(errs, httpURL(lr.Partner.PublicKeysURL, partner.Child("publicKeysURL"))...)
	errs = append(errs, httpURL(lr.OrganizationAlerts.APIBaseURL, alerts.Child("apiBaseURL"))...)
	a := lr.OrganizationAlerts
	if a.WebhookSecretFile != "" && a.APITokenFile == "" {
		errs = append(errs, field.Required(alerts.Child("apiTokenFile"),
			"webhookSecretFile needs a token allowed to read the organization's secret scanning alerts, by file"))
	}
	switch {
	case a.WebhookSecretFile != "" && a.Organization == "":
		errs = append(errs, field.Required(alerts.Child("organization"),
			"webhookSecretFile needs the organization's login, whose open alerts are listed for the deliveries GitHub does not make again"))
	case a.Organization != "" && a.WebhookSecretFile == "":
		errs = append(errs, field.Invalid(alerts.Child("organization"), a.Organization, "needs webhookSecretFile and apiTokenFile"))
	case a.Organization != "" && !ValidOrganization(a.Organization):
		errs = append(errs, field.Invalid(alerts.Child("organization"), a.Organization, "must be a GitHub organization's login"))
	}
	catchUp := alerts.Child("catchUp")
	if p := a.CatchUp.Period; p != nil && p.Duration < minCatchUpPeriod {
		errs = append(errs, field.Invalid(catchUp.Child("period"), p.Duration.String(), "must be at least "+minCatchUpPeriod.String()))
	}
	errs = append(errs, atLeast(a.CatchUp.MaxRequests, 1, catchUp.Child("maxRequests"))...)
	if a.APITokenFile != "" && a.WebhookSecretFile == "" {
		errs = append(errs, field.Required(alerts.Child("webhookSecretFile"), "apiTokenFile is used only with the webhook's secret, by file"))
	}
	if lr.Listen != "" && !lr.Partner.Enabled && a.WebhookSecretFile == "" {
		errs = append(errs, field.Required(path.Child("listen"),
			"a leak reports listener needs partner.enabled or organizationAlerts.webhookSecretFile"))
	}
	return errs
}

// httpURL checks that u is an absolute http(s) URL without a query.
func httpURL(u string, path *field.Path) field.ErrorList {
	p, err := url.Parse(u)
	if err != nil || (p.Scheme != "https" && p.Scheme != "http") || p.Host == "" || p.RawQuery != "" {
		return field.ErrorList{field.Invalid(path, u, "must be an absolute http(s) URL without a query")}
	}
	return nil
}

// ValidateOperatorConfiguration says what is wrong with a defaulted OperatorConfiguration,
// each error naming its field's path; empty when nothing is.
func ValidateOperatorConfiguration(c *configv1alpha1.OperatorConfiguration) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, keyPrefix(c.KeyPrefix, field.NewPath("keyPrefix"))...)
	errs = append(errs, positiveDuration(c.RevealTTL, field.NewPath("revealTTL"))...)
	errs = append(errs, positiveDuration(c.ExpiryWarning, field.NewPath("expiryWarning"))...)
	errs = append(errs, nonNegativeDuration(c.UnusedAfter, field.NewPath("unusedAfter"))...)
	errs = append(errs, nonNegativeDuration(c.MinRenewalInterval, field.NewPath("minRenewalInterval"))...)
	errs = append(errs, nonNegativeDuration(c.LeakReportRetention, field.NewPath("leakReportRetention"))...)
	pct := field.NewPath("minRenewalIntervalPercentage")
	errs = append(errs, atLeast(c.MinRenewalIntervalPercentage, 0, pct)...)
	if p := c.MinRenewalIntervalPercentage; p != nil && *p > 99 {
		errs = append(errs, field.Invalid(pct, *p, "must be at most 99 (percent of a key's lifetime)"))
	}
	errs = append(errs, atLeast(c.KeyMetricsLimit, 0, field.NewPath("keyMetricsLimit"))...)
	errs = append(errs, atLeast(c.KeyWorkers, 1, field.NewPath("keyWorkers"))...)
	errs = append(errs, greaterThanZero(c.KubeAPIQPS, field.NewPath("kubeAPIQPS"))...)
	errs = append(errs, atLeast(c.KubeAPIBurst, 1, field.NewPath("kubeAPIBurst"))...)
	if c.Reveal.BindAddress != "" && len(c.Reveal.Names) == 0 {
		errs = append(errs, field.Required(field.NewPath("reveal", "names"),
			"the reveal endpoint's certificate needs the names it is reached by (its Service's DNS names)"))
	}
	if c.Webhook.BindAddress != "" && len(c.Webhook.Names) == 0 {
		errs = append(errs, field.Required(field.NewPath("webhook", "names"),
			"the webhook's certificate needs the names the API server calls it by (its Service's DNS names)"))
	}
	if a := c.Webhook.BindAddress; a != "" {
		if _, port, err := net.SplitHostPort(a); err != nil || !validPort(port) {
			errs = append(errs, field.Invalid(field.NewPath("webhook", "bindAddress"), a, "must be HOST:PORT or :PORT"))
		}
	}
	errs = append(errs, validateWebhooks(&c.Webhooks, field.NewPath("webhooks"))...)
	errs = append(errs, signingNamespace(c.Webhooks.SigningNamespace, c.SystemNamespace, field.NewPath("webhooks", "signingNamespace"))...)
	return errs
}

// signingNamespace checks the namespace of the signing secrets' copies: a namespace's name, and
// not the system namespace, whose every Secret the sender could read otherwise.
func signingNamespace(ns, system string, path *field.Path) field.ErrorList {
	if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
		return field.ErrorList{field.Invalid(path, ns, "must be a namespace's name: "+strings.Join(msgs, "; "))}
	}
	if ns == system {
		return field.ErrorList{field.Invalid(path, ns,
			"must differ from systemNamespace: the webhook sender may read every Secret of this namespace, so the copies live where nothing else does")}
	}
	return nil
}

// validateWebhooks checks the webhook sender's settings under path.
func validateWebhooks(w *configv1alpha1.WebhooksConfiguration, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, networks(w.DeniedNetworks, path.Child("deniedNetworks"))...)
	errs = append(errs, networks(w.AllowedNetworks, path.Child("allowedNetworks"))...)
	errs = append(errs, atLeast(w.Concurrency, 1, path.Child("concurrency"))...)
	errs = append(errs, atLeast(w.PerNamespaceConcurrency, 1, path.Child("perNamespaceConcurrency"))...)
	if w.Concurrency != nil && w.PerNamespaceConcurrency != nil && *w.PerNamespaceConcurrency > *w.Concurrency {
		errs = append(errs, field.Invalid(path.Child("perNamespaceConcurrency"), *w.PerNamespaceConcurrency,
			fmt.Sprintf("must be at most concurrency (%d): one namespace cannot hold more slots than there are", *w.Concurrency)))
	}
	errs = append(errs, positiveDuration(w.AttemptTimeout, path.Child("attemptTimeout"))...)
	return errs
}

// networks checks that each of ss is a CIDR (an address alone is refused: which network is
// meant would be a guess).
func networks(ss []string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, s := range ss {
		if _, err := netip.ParsePrefix(s); err != nil {
			errs = append(errs, field.Invalid(path.Index(i), s, "must be a CIDR, such as 10.96.0.0/12 or fd00::/8"))
		}
	}
	return errs
}

// ValidatePanelConfiguration says what is wrong with a defaulted PanelConfiguration, each
// error naming its field's path; empty when nothing is.
func ValidatePanelConfiguration(c *configv1alpha1.PanelConfiguration) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, requiredAddress(c.Listen, field.NewPath("listen"))...)
	errs = append(errs, validateShutdown(&c.Shutdown)...)
	errs = append(errs, trustedProxies(c.TrustedProxies, field.NewPath("trustedProxies"))...)
	errs = append(errs, validatePanelSettings(&c.PanelSettings, nil)...)
	return errs
}

// validateShutdown checks how a listener stops: its delay may be none, its drain may not.
func validateShutdown(s *configv1alpha1.Shutdown) field.ErrorList {
	return append(nonNegativeDuration(s.ShutdownDelay, field.NewPath("shutdownDelay")),
		positiveDuration(s.ShutdownTimeout, field.NewPath("shutdownTimeout"))...)
}

// ValidatePanelSettings says what is wrong with defaulted panel settings on their own, each
// error naming its field's path: the panel checks the settings it is given with it.
func ValidatePanelSettings(s *configv1alpha1.PanelSettings) field.ErrorList {
	return validatePanelSettings(s, nil)
}

// validatePanelSettings checks the panel's settings under path (nil at the top).
func validatePanelSettings(s *configv1alpha1.PanelSettings, path *field.Path) field.ErrorList {
	child := func(name string) *field.Path {
		if path == nil {
			return field.NewPath(name)
		}
		return path.Child(name)
	}
	var errs field.ErrorList
	errs = append(errs, atLeast(s.MaxSessions, 1, child("maxSessions"))...)
	errs = append(errs, atLeast(s.MaxSessionsPerUser, 1, child("maxSessionsPerUser"))...)
	errs = append(errs, greaterThanZero(s.LoginRate, child("loginRate"))...)
	errs = append(errs, atLeast(s.LoginBurst, 1, child("loginBurst"))...)
	if o := s.OIDC; o != nil {
		p := child("oidc")
		for name, v := range map[string]string{"issuerURL": o.IssuerURL, "clientID": o.ClientID,
			"clientSecretFile": o.ClientSecretFile, "redirectURL": o.RedirectURL} {
			if v == "" {
				errs = append(errs, field.Required(p.Child(name), "single sign-on needs it"))
			}
		}
		errs = append(errs, validateOIDC(o, p)...)
	}
	// Sorted, so that the same mistakes always read the same.
	return sortErrors(errs)
}

// validateOIDC checks single sign-on's URLs and its reveal endpoint, which impersonate mode
// needs and token mode refuses (there the person's own token claims their keys).
func validateOIDC(o *configv1alpha1.OIDC, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if u, err := url.Parse(o.IssuerURL); o.IssuerURL != "" && (err != nil || u.Scheme != "https" || u.Host == "" || u.RawQuery != "" || u.Fragment != "") {
		errs = append(errs, field.Invalid(path.Child("issuerURL"), o.IssuerURL, "must be an https URL without query or fragment"))
	}
	if u, err := url.Parse(o.RedirectURL); o.RedirectURL != "" && (err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" ||
		u.Path != configv1alpha1.OIDCCallbackPath || u.RawQuery != "") {
		errs = append(errs, field.Invalid(path.Child("redirectURL"), o.RedirectURL, "must be the panel's absolute http(s) URL ending in "+configv1alpha1.OIDCCallbackPath))
	}
	for name, claim := range map[string]*string{"usernameClaim": o.UsernameClaim, "groupsClaim": o.GroupsClaim} {
		if claim != nil && *claim == "" {
			errs = append(errs, field.Required(path.Child(name), "the ID token's claim to map"))
		}
	}
	switch o.Mode {
	case configv1alpha1.OIDCModeToken:
		for name, v := range map[string]string{"revealURL": o.RevealURL, "revealCAConfigMap": o.RevealCAConfigMap} {
			if v != "" {
				errs = append(errs, field.Invalid(path.Child(name), v, "is for impersonate mode only: in token mode the person's own token claims their keys"))
			}
		}
	case configv1alpha1.OIDCModeImpersonate:
		if u, err := url.Parse(o.RevealURL); err != nil || u.Scheme != "https" || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
			errs = append(errs, field.Invalid(path.Child("revealURL"), o.RevealURL,
				"impersonate mode claims keys through the operator's reveal endpoint: must be https://HOST:PORT"))
		}
		ns, name, ok := strings.Cut(o.RevealCAConfigMap, "/")
		if !ok || len(validation.IsDNS1123Label(ns)) > 0 || len(validation.IsDNS1123Subdomain(name)) > 0 {
			errs = append(errs, field.Invalid(path.Child("revealCAConfigMap"), o.RevealCAConfigMap,
				"impersonate mode needs the ConfigMap of the reveal endpoint's certificates as NAMESPACE/NAME"))
		}
	default:
		errs = append(errs, field.NotSupported(path.Child("mode"), o.Mode, []string{configv1alpha1.OIDCModeToken, configv1alpha1.OIDCModeImpersonate}))
	}
	return errs
}

// validPort says whether p is a port a listener can take: 1 to 65535.
func validPort(p string) bool {
	n, err := strconv.Atoi(p)
	return err == nil && n > 0 && n <= 65535
}

func requiredAddress(p *string, path *field.Path) field.ErrorList {
	if p != nil && *p == "" {
		return field.ErrorList{field.Required(path, "an address to listen on")}
	}
	return nil
}

func keyPrefix(prefix string, path *field.Path) field.ErrorList {
	if err := apikey.ValidatePrefix(prefix); err != nil {
		return field.ErrorList{field.Invalid(path, prefix, err.Error())}
	}
	return nil
}

func trustedProxies(ss []string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, s := range ss {
		if _, err := ParsePrefix(s); err != nil {
			errs = append(errs, field.Invalid(path.Index(i), s, "must be a CIDR or an address"))
		}
	}
	return errs
}

func atLeast[T int32 | int64 | float64](p *T, least T, path *field.Path) field.ErrorList {
	if p != nil && *p < least {
		return field.ErrorList{field.Invalid(path, *p, fmt.Sprintf("must be at least %v", least))}
	}
	return nil
}

func greaterThanZero[T float32 | float64](p *T, path *field.Path) field.ErrorList {
	if p != nil && *p <= 0 {
		return field.ErrorList{field.Invalid(path, *p, "must be more than 0")}
	}
	return nil
}

func positiveDuration(d *metav1.Duration, path *field.Path) field.ErrorList {
	if d != nil && d.Duration <= 0 {
		return field.ErrorList{field.Invalid(path, d.Duration.String(), "must be more than 0")}
	}
	return nil
}

func nonNegativeDuration(d *metav1.Duration, path *field.Path) field.ErrorList {
	if d != nil && d.Duration < 0 {
		return field.ErrorList{field.Invalid(path, d.Duration.String(), "must be 0 (none) or more")}
	}
	return nil
}

func sortErrors(errs field.ErrorList) field.ErrorList {
	slices.SortStableFunc(errs, func(a, b *field.Error) int { return strings.Compare(a.Field, b.Field) })
	return errs
}

// organizationName is what a GitHub organization's login may look like: safe in an API path as
// it is.
var organizationName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$`)

// ValidOrganization says whether name can be a GitHub organization's login: the configuration's
// rule for leakReports.organizationAlerts.organization, which the leak receiver's GitHub client
// holds the paths it builds and reads to as well.
func ValidOrganization(name string) bool { return organizationName.MatchString(name) }
