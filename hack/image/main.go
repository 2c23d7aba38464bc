// Command image builds switchboard's OCI image (or the test cluster's pause image) without a
// container engine, into an OCI layout tarball that `ctr images import` loads: `make image`
// runs it on the binary the Dockerfile's build line produces.
//
//	go run ./hack/image -binary bin/image/switchboard -name localhost/switchboard:v1 -version v1 -revision $(git rev-parse HEAD) -out bin/image/switchboard.tar
//	go run ./hack/image -pause -binary bin/image/pause -name localhost/pause:3.10 -out bin/image/pause.tar
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/switchboard-dev/switchboard/internal/local/image"
)

func main() {
	pause := flag.Bool("pause", false, "build the pause (pod sandbox) image instead of switchboard's")
	consumer := flag.Bool("consumer", false, "build the test cluster's client image (hack/consumer) instead of switchboard's")
	binary := flag.String("binary", "", "the static binary to put in the image")
	ref := flag.String("name", "", "the image's name, e.g. localhost/switchboard:v1")
	version := flag.String("version", "dev", "switchboard's version, for the org.opencontainers.image.version label")
	revision := flag.String("revision", "unknown", "the git commit built, for the org.opencontainers.image.revision label")
	caCerts := flag.String("ca-certs", "/etc/ssl/certs/ca-certificates.crt", "CA bundle to include, as distroless does (empty: none)")
	out := flag.String("out", "", "the OCI layout tarball to write")
	flag.Parse()
	if *binary == "" || *ref == "" || *out == "" {
		fmt.Fprintln(os.Stderr, "image: -binary, -name and -out are required")
		os.Exit(2)
	}
	spec := image.Switchboard(*binary, *ref, *version, *revision, *caCerts)
	switch {
	case *pause:
		spec = image.Pause(*binary, *ref)
	case *consumer:
		spec = image.Consumer(*binary, *ref)
	}
	img, err := image.Build(spec)
	if err == nil {
		err = image.WriteTarball(img, *ref, *out)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
	fmt.Printf("image: wrote %s (%s)\n", *out, *ref)
}
