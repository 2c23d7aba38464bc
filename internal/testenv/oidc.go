package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/switchboard-dev/switchboard/internal/local/oidcop"
)

// OIDCUser is a person of the tests' OpenID Provider (internal/local/oidcop).
type OIDCUser = oidcop.User

// OIDCProviderOptions shape StartOIDCProvider.
type OIDCProviderOptions = oidcop.Options

// OIDCProvider is the tests' running OpenID Provider.
type OIDCProvider = oidcop.Provider

// StartOIDCProvider starts bin/oidc-op (OIDCProviderBinary) with opts.
func StartOIDCProvider(opts OIDCProviderOptions) (*OIDCProvider, error) {
	bin, err := OIDCProviderBinary()
	if err != nil {
		return nil, err
	}
	opts.Binary = bin
	return oidcop.Start(opts)
}

// OIDCProviderBinary is bin/oidc-op-<version>, the version being the zitadel/oidc release
// hack/tools/oidc-op/go.mod requires, as the Makefile names it.
func OIDCProviderBinary() (string, error) {
	gomod := filepath.Join(RepoRoot(), "hack", "tools", "oidc-op", "go.mod")
	b, err := os.ReadFile(gomod) //nolint:gosec // a file of this repository
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "require "))
		if len(f) >= 2 && f[0] == "github.com/zitadel/oidc/v3" {
			bin := filepath.Join(RepoRoot(), "bin", "oidc-op-"+f[1])
			if _, err := os.Stat(bin); err != nil { //nolint:gosec // bin/ of this repository
				return "", fmt.Errorf("the tests' OpenID Provider %s is missing: run `make oidc-op`: %w", bin, err)
			}
			return bin, nil
		}
	}
	return "", fmt.Errorf("%s requires no github.com/zitadel/oidc/v3", gomod)
}
