// Package version carries the build's version, set by the Makefile's -ldflags, what it says
// about itself (Info), how far apart two builds may be (Skew), and the Kubernetes release
// switchboard's local control plane is built from.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"

	utilversion "k8s.io/apimachinery/pkg/util/version"
)

// Version is the release or git description of this build (`git describe --tags`), set with
// -ldflags -X; "dev" when nothing set it.
var Version = "dev"

// Commit is the git commit this build is from, set with -ldflags -X; empty when nothing set
// it, and then Get reads it from the Go toolchain's VCS stamp when there is one.
var Commit = ""

// Kubernetes is the release of the control plane that `make envtest` builds into
// bin/k8s/<release>, which envtest and `switchboard dev` run. hack/kube-version is the pin the
// Makefile and scripts read; a test keeps this constant equal to it.
const Kubernetes = "1.36.3"

// ConfigMap names the ConfigMap, in the system namespace, where the operator publishes the Info
// of the build it runs (its data keys are Info's JSON names), so that `kubectl switchboard
// version` can tell every authenticated user which release is installed. The chart and config/
// let system:authenticated get this one ConfigMap and nothing else there.
const ConfigMap = "switchboard-version"

// Data keys of ConfigMap: Info's fields, named as in its JSON (and kubectl's version.Info).
const (
	KeyVersion   = "gitVersion"
	KeyCommit    = "gitCommit"
	KeyGoVersion = "goVersion"
	KeyPlatform  = "platform"
)

// Info is what a build says about itself: `switchboard version -o json`, the operator's
// ConfigMap, and each side of `kubectl switchboard version -o json`. Its JSON names are
// kubectl's.
type Info struct {
	// Version is the release or git description (Version).
	Version string `json:"gitVersion"`
	// Commit is the git commit, or "unknown".
	Commit string `json:"gitCommit"`
	// GoVersion is the Go release that compiled it.
	GoVersion string `json:"goVersion"`
	// Platform is GOOS/GOARCH.
	Platform string `json:"platform"`
}

// Get returns this build's Info.
func Get() Info {
	return Info{Version: Version, Commit: commit(), GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
}

// commit is Commit, else the VCS revision the go command stamped (not in a -buildvcs=false or
// Docker build without .git), else "unknown".
func commit() string {
	if Commit != "" {
		return Commit
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && s.Value != "" {
				return s.Value
			}
		}
	}
	return "unknown"
}

// Data is i as ConfigMap's data.
func (i Info) Data() map[string]string {
	return map[string]string{KeyVersion: i.Version, KeyCommit: i.Commit, KeyGoVersion: i.GoVersion, KeyPlatform: i.Platform}
}

// FromData reads ConfigMap's data back; false when it carries no version.
func FromData(data map[string]string) (Info, bool) {
	i := Info{Version: data[KeyVersion], Commit: data[KeyCommit], GoVersion: data[KeyGoVersion], Platform: data[KeyPlatform]}
	return i, i.Version != ""
}

// MaxMinorSkew is how many minor versions the plugin and the installed release may be apart, as
// kubectl allows with its API server.
const MaxMinorSkew = 1

// SkewResult is how two versions compare (Skew).
type SkewResult struct {
	// Known is false when either is not a semantic version ("dev", a bare commit): nothing is
	// known of their distance.
	Known bool
	// Exceeds is true when they are more than MaxMinorSkew minor versions apart, or of different
	// major versions.
	Exceeds bool
	// Message says which, for people: the warning when Exceeds, why it is not Known, or "".
	Message string
}

// Skew compares the plugin's (client) and the installed (server) versions: semantic versions
// ("v0.3.1", "v0.3.1-4-gabcdef0-dirty" from git describe) whose minors differ by more than
// MaxMinorSkew, or whose majors differ, exceed the supported skew.
func Skew(client, server string) SkewResult {
	c, cerr := utilversion.ParseSemantic(client)
	s, serr := utilversion.ParseSemantic(server)
	switch {
	case cerr != nil:
		return SkewResult{Message: fmt.Sprintf("unknown skew: the client version %q is not a semantic version", client)}
	case serr != nil:
		return SkewResult{Message: fmt.Sprintf("unknown skew: the server version %q is not a semantic version", server)}
	}
	d := int(c.Minor()) - int(s.Minor())
	if c.Major() == s.Major() && d >= -MaxMinorSkew && d <= MaxMinorSkew {
		return SkewResult{Known: true}
	}
	return SkewResult{Known: true, Exceeds: true, Message: fmt.Sprintf(
		"version difference between client (%d.%d) and server (%d.%d) exceeds the supported minor version skew of +/-%d",
		c.Major(), c.Minor(), s.Major(), s.Minor(), MaxMinorSkew)}
}
