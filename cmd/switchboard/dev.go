//go:build !nodev

package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	configv1alpha1 "github.com/switchboard-dev/switchboard/api/config/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/local/devenv"
	"github.com/switchboard-dev/switchboard/internal/logging"
)

func newDevCommand() *cobra.Command {
	opts := devenv.Options{
		StateDir:    devenv.DefaultStateDir,
		Listen:      devenv.DefaultListen,
		PanelListen: devenv.DefaultPanelListen,
		Assets:      devenv.DefaultAssets(),
		// The components' own defaults, as their configurations have them.
		SystemNamespace: configv1alpha1.DefaultSystemNamespace,
		KeyPrefix:       configv1alpha1.DefaultKeyPrefix,
	}
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run the whole system on a local control plane (etcd + kube-apiserver) with a demo namespace",
		Long: `dev starts etcd and kube-apiserver from --assets (built by ` + "`make envtest`" + `), installs the
CRDs, runs the operator, the /v1 API server, the panel and the webhook sender in this process
(which, as in a cluster, sends to no loopback or private address), seeds namespace
"demo" with two Connections and an APIKey, prints the demo key once with a curl line, and
prints "ready". Data survives restarts unless --fresh. Ctrl-C stops everything.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			logging.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.ConsoleEncoder()))
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			opts.Out = cmd.OutOrStdout()
			return devenv.Run(ctx, opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.StateDir, "state-dir", opts.StateDir, "directory for etcd data, certificates, logs and the admin kubeconfig (made 0700: only you may enter it)")
	f.StringVar(&opts.Listen, "listen", opts.Listen, "address of the /v1 API")
	f.StringVar(&opts.PanelListen, "panel-listen", opts.PanelListen, `address of the panel ("0" for none)`)
	f.BoolVar(&opts.Fresh, "fresh", false, "delete the state dir first and start from nothing")
	f.StringVar(&opts.Assets, "assets", opts.Assets, "directory with the etcd and kube-apiserver binaries")
	f.StringVar(&opts.SystemNamespace, "system-namespace", opts.SystemNamespace, "namespace of the hash Secrets")
	f.StringVar(&opts.KeyPrefix, "key-prefix", opts.KeyPrefix, "prefix of generated keys")
	f.BoolVar(&opts.SSO, "sso", false, "also run a local OpenID Provider (bin/oidc-op, `make oidc-op`) that the panel signs in with; prints the user and password")
	f.StringVar(&opts.OIDCProvider, "sso-provider", "", "the OpenID Provider binary for --sso (default: the newest bin/oidc-op-*)")
	return cmd
}
