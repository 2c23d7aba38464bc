// Command cluster starts and stops the one-node cluster of internal/local/cluster for people who
// want to try the chart by hand (`make cluster`, `make cluster-down`).
//
//	go run ./hack/cluster up -dir bin/cluster -image bin/image/switchboard.tar -pause bin/image/pause.tar
//	go run ./hack/cluster down -dir bin/cluster
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/switchboard-dev/switchboard/internal/local/cluster"
	"github.com/switchboard-dev/switchboard/internal/local/image"
	"github.com/switchboard-dev/switchboard/internal/version"
)

type images []string

func (i *images) String() string     { return strings.Join(*i, ",") }
func (i *images) Set(v string) error { *i = append(*i, v); return nil }

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) < 1 || (args[0] != "up" && args[0] != "down") {
		return errors.New("usage: cluster up|down -dir DIR [flags]")
	}
	fs := flag.NewFlagSet(args[0], flag.ExitOnError)
	dir := fs.String("dir", "bin/cluster", "the cluster's state: certificates, kubeconfigs, logs")
	name := fs.String("name", "switchboard", "the network namespace's name (ip netns exec NAME …)")
	assets := fs.String("assets", filepath.Join("bin", "k8s", version.Kubernetes), "the Kubernetes binaries (make cluster-bins)")
	pause := fs.String("pause", "bin/image/pause.tar", "the pause image's OCI archive (make pause-image)")
	helm := fs.String("helm", "bin/helm-v3.22.0", "helm, for the instructions printed")
	var imgs images
	fs.Var(&imgs, "image", "an OCI archive to import (repeatable; make image)")
	_ = fs.Parse(args[1:])

	if args[0] == "down" {
		if err := cluster.Down(*dir); err != nil {
			return err
		}
		fmt.Println("cluster: removed")
		return nil
	}
	sandbox, err := image.TarballName(*pause)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c, err := cluster.Start(ctx, cluster.Options{
		Name: *name, Dir: *dir, Assets: *assets, Images: append([]string{*pause}, imgs...),
		SandboxImage: sandbox, Detach: true, Progress: os.Stderr,
	})
	if err != nil {
		return err
	}
	// The first image is the one to install (make cluster passes switchboard's).
	repo, tag := "REPOSITORY", "TAG"
	if len(imgs) > 0 {
		name, err := image.TarballName(imgs[0])
		if err != nil {
			return err
		}
		repo, tag, _ = strings.Cut(name, ":")
	}
	abs := func(p string) string { a, _ := filepath.Abs(p); return a }
	fmt.Printf(`cluster: ready. It lives in the network namespace %[1]q; clients run there.
A shell with kubectl, %[2]s and the plugin:
  ip netns exec %[1]s env KUBECONFIG=%[3]s PATH=%[4]s:%[5]s:$PATH bash
then, for example:
  kubectl get nodes
  %[2]s install switchboard charts/switchboard -n switchboard-system --create-namespace \
    --set image.repository=%[6]s --set image.tag=%[7]s
Logs: %[8]s. Stop and remove it: make cluster-down (go run ./hack/cluster down -dir %[9]s)
`, c.Name(), filepath.Base(*helm), c.Kubeconfig(), abs(*assets), abs("bin"), repo, tag, filepath.Join(abs(*dir), "logs"), *dir)
	return nil
}
