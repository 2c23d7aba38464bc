// Package version carries the build's version, set by the Makefile's -ldflags.
package version

// Version is the release or git description of this build.
var Version = "dev"
