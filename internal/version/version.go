// Package version holds the build's version, set by the linker
// (see the Makefile's LDFLAGS). It imports nothing.
package version

// Version is the release version of this build.
var Version = "0.1.0-dev"
