// Package config reads, checks and prints the configuration files of switchboard's components
// (api/config/v1alpha1): strict decoding, where an unknown field is an error naming it, and one
// validation function per component, whose errors name the field's path.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"os"
	"reflect"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
)

// Object is a configuration of api/config/v1alpha1: one of *ServerConfiguration,
// *OperatorConfiguration and *PanelConfiguration.
type Object interface {
	*configv1alpha1.ServerConfiguration | *configv1alpha1.OperatorConfiguration | *configv1alpha1.PanelConfiguration
}

// New is an empty configuration of T's kind.
func New[T Object]() T { return reflect.New(reflect.TypeFor[T]().Elem()).Interface().(T) }

// Default fills the unset fields of c with their defaults (api/config/v1alpha1's SetDefaults_*).
func Default[T Object](c T) {
	switch c := any(c).(type) {
	case *configv1alpha1.ServerConfiguration:
		configv1alpha1.SetDefaults_ServerConfiguration(c)
	case *configv1alpha1.OperatorConfiguration:
		configv1alpha1.SetDefaults_OperatorConfiguration(c)
	case *configv1alpha1.PanelConfiguration:
		configv1alpha1.SetDefaults_PanelConfiguration(c)
	}
}

// Validate says what is wrong with a defaulted c, each error naming its field's path.
func Validate[T Object](c T) field.ErrorList {
	switch c := any(c).(type) {
	case *configv1alpha1.ServerConfiguration:
		return ValidateServerConfiguration(c)
	case *configv1alpha1.OperatorConfiguration:
		return ValidateOperatorConfiguration(c)
	case *configv1alpha1.PanelConfiguration:
		return ValidatePanelConfiguration(c)
	}
	return nil
}

// Complete defaults c and validates it: what every component's Run does with the configuration
// it is given, so that one from switchboard dev or a test is held to the command's rules.
func Complete[T Object](c T) error {
	Default(c)
	if errs := Validate(c); len(errs) > 0 {
		return fmt.Errorf("the %s: %w", Kind(c), errs.ToAggregate())
	}
	return nil
}

// LoadFile reads the configuration file at path into into, strictly (Decode). Errors name the
// file.
func LoadFile[T Object](path string, into T) error {
	data, err := os.ReadFile(path) //nolint:gosec // G304: the file --config names, on purpose
	if err != nil {
		return fmt.Errorf("reading the configuration: %w", err)
	}
	if err := Decode(data, into); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// Decode reads a YAML (or JSON) configuration into into. It refuses what a typo would make
// silently ignored: an apiVersion or kind other than into's, an unknown field (named with its
// path, e.g. "authz.grpc.lisen") and a field given twice.
func Decode[T Object](data []byte, into T) error {
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return fmt.Errorf("not YAML: %w", err)
	}
	if bytes.Equal(bytes.TrimSpace(js), []byte("null")) {
		return errors.New("the configuration is empty: it needs at least apiVersion and kind")
	}
	var tm metav1.TypeMeta
	if err := kjson.UnmarshalCaseSensitivePreserveInts(js, &tm); err != nil {
		return fmt.Errorf("not a configuration: %w", err)
	}
	kind := Kind(into)
	if tm.APIVersion != configv1alpha1.SchemeGroupVersion.String() || tm.Kind != kind {
		return fmt.Errorf("apiVersion %q, kind %q: want apiVersion %q, kind %q", tm.APIVersion, tm.Kind,
			configv1alpha1.SchemeGroupVersion.String(), kind)
	}
	strict, err := kjson.UnmarshalStrict(js, into)
	if err != nil {
		return fmt.Errorf("decoding the %s: %w", kind, err)
	}
	if len(strict) > 0 {
		return fmt.Errorf("decoding the %s: %w", kind, errors.Join(strict...))
	}
	return nil
}

// Kind is the kind of the configuration o is, as its file names it.
func Kind[T Object](o T) string {
	switch any(o).(type) {
	case *configv1alpha1.ServerConfiguration:
		return configv1alpha1.ServerConfigurationKind
	case *configv1alpha1.OperatorConfiguration:
		return configv1alpha1.OperatorConfigurationKind
	default:
		return configv1alpha1.PanelConfigurationKind
	}
}

// Marshal writes a configuration as YAML, for --print-config. A configuration holds no
// secret (it names the files that do), but a password written into the Redis URL against
// the docs' advice is masked all the same.
func Marshal[T Object](o T) ([]byte, error) {
	if s, ok := any(o).(*configv1alpha1.ServerConfiguration); ok && s.RateLimitRedis.URL != "" {
		c := *s
		c.RateLimitRedis.URL = redactURL(c.RateLimitRedis.URL)
		return yaml.Marshal(&c)
	}
	return yaml.Marshal(o)
}

func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		// Not a URL: it may still hold a password, and validation refuses it anyway.
		return "(not a URL)"
	}
	return u.Redacted()
}

// ParsePrefix reads a trusted proxy: a CIDR, or a single address as the CIDR of itself.
func ParsePrefix(s string) (netip.Prefix, error) {
	s = strings.TrimSpace(s)
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return p, fmt.Errorf("%q is not a CIDR: %w", s, err)
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is not an address or CIDR: %w", s, err)
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// ParsePrefixes reads trusted proxies (ParsePrefix); validation has accepted them.
func ParsePrefixes(ss []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range ss {
		p, err := ParsePrefix(s)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}
