// Command kubectl-switchboard is the kubectl plugin for switchboard: `kubectl switchboard …`
// creates, lists, rotates and revokes API keys with the user's own Kubernetes identity.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/switchboard-dev/switchboard/internal/plugin"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	streams := genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
	code := plugin.Main(ctx, streams, nil, os.Args[1:])
	stop()
	os.Exit(code)
}
