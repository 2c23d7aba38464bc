// Command kubectl-switchboard is the kubectl plugin for switchboard: `kubectl switchboard …`
// creates, lists, rotates and revokes API keys with the user's own Kubernetes identity.
package main

import (
	"errors"
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "kubectl-switchboard:", errors.New("not implemented yet"))
	os.Exit(1)
}
