package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	switchboardv1alpha1 "github.com/switchboard-dev/switchboard/api/v1alpha1"
	"github.com/switchboard-dev/switchboard/internal/version"
)

// versionOptions are the flags of `kubectl switchboard version`.
type versionOptions struct {
	*Options
	client bool
	output string
}

// versions is `kubectl switchboard version -o json|yaml`: kubectl's field names, and no
// serverVersion when the installed one cannot be read.
type versions struct {
	ClientVersion version.Info  `json:"clientVersion"`
	ServerVersion *version.Info `json:"serverVersion,omitempty"`
}

func newVersionCommand(o *Options) *cobra.Command {
	opts := &versionOptions{Options: o}
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the plugin's version and the installed switchboard's",
		Long: "Print the plugin's version (Client Version) and the version of the switchboard installed in the\n" +
			"cluster (Server Version), which its operator publishes in the ConfigMap " + version.ConfigMap + " of\n" +
			"namespace " + switchboardv1alpha1.DefaultSystemNamespace + " (-n for another), readable by everyone signed in. Warns on\n" +
			"stderr when their minor versions are more than one apart, and says why when the installed\n" +
			"version cannot be read; either way the plugin's version is printed and the exit code is 0.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return opts.run(cmd.Context()) },
	}
	f := cmd.Flags()
	f.BoolVar(&opts.client, "client", false, "print the plugin's version only, without contacting the cluster")
	f.StringVarP(&opts.output, "output", "o", "", "output format: json or yaml (kubectl version's fields)")
	return cmd
}

func (o *versionOptions) run(ctx context.Context) error {
	if err := checkOutput(o.output, "a table", outputJSON, outputYAML); err != nil {
		return err
	}
	v := versions{ClientVersion: clientVersion()}
	var readErr error
	if !o.client {
		var server version.Info
		if server, readErr = o.installed(ctx); readErr == nil {
			v.ServerVersion = &server
		}
	}
	switch o.output {
	case outputJSON, outputYAML:
		b, err := yaml.Marshal(v)
		if o.output == outputJSON {
			b, err = json.MarshalIndent(v, "", "  ")
			b = append(b, '\n')
		}
		if err != nil {
			return fmt.Errorf("writing the versions: %w", err)
		}
		if _, err := o.Out.Write(b); err != nil {
			return err
		}
	default:
		fmt.Fprintf(o.Out, "Client Version: %s\n", v.ClientVersion.Version)
		if v.ServerVersion != nil {
			fmt.Fprintf(o.Out, "Server Version: %s\n", v.ServerVersion.Version)
		}
	}
	switch {
	case readErr != nil:
		fmt.Fprintf(o.ErrOut, "warning: the installed version cannot be read: %s\n", oneLine(readErr.Error()))
	case v.ServerVersion != nil:
		if skew := version.Skew(v.ClientVersion.Version, v.ServerVersion.Version); skew.Exceeds {
			fmt.Fprintf(o.ErrOut, "WARNING: %s\n", skew.Message)
		} else if !skew.Known {
			fmt.Fprintf(o.ErrOut, "%s\n", skew.Message)
		}
	}
	return nil
}

// clientVersion is the plugin's own build; tests stand in another.
var clientVersion = version.Get

// errNoVersion is a version ConfigMap the operator has not written yet.
var errNoVersion = errors.New("it carries no version yet: the operator has not started since switchboard was installed")

// installed reads the version the operator published in the system namespace (the default
// one unless -n says otherwise, as for the panel), with the user's own identity.
func (o *versionOptions) installed(ctx context.Context) (version.Info, error) {
	c, _, err := o.connect()
	if err != nil {
		return version.Info{}, err
	}
	ns := o.systemNamespace()
	var cm corev1.ConfigMap
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: version.ConfigMap}, &cm); err != nil {
		if apierrors.IsNotFound(err) {
			return version.Info{}, fmt.Errorf("no ConfigMap %s in namespace %q: switchboard is not installed there, or its operator has not started yet (pass -n for another namespace)", version.ConfigMap, ns)
		}
		return version.Info{}, explain(err, action{verb: "get", resource: "configmaps", kind: "ConfigMap", namespace: ns, name: version.ConfigMap})
	}
	info, ok := version.FromData(cm.Data)
	if !ok {
		return version.Info{}, fmt.Errorf("ConfigMap %s/%s: %w", ns, version.ConfigMap, errNoVersion)
	}
	return info, nil
}
