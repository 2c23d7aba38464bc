package operator

import (
	"context"
	"fmt"
	"maps"
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/go-logr/logr"

	"github.com/switchboard-dev/switchboard/internal/version"
)

// PublishVersion writes info into the version ConfigMap (version.ConfigMap) of namespace,
// creating it if need be (config/, switchboard dev) or filling the one the chart declares
// empty; it changes only the data, and nothing when it already says info. reader reads past
// any cache: the operator caches no ConfigMaps.
func PublishVersion(ctx context.Context, reader client.Reader, writer client.Writer, namespace string, info version.Info) error {
	want := info.Data()
	var cm corev1.ConfigMap
	err := reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: version.ConfigMap}, &cm)
	switch {
	case apierrors.IsNotFound(err):
		cm = corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: version.ConfigMap, Labels: map[string]string{
				"app.kubernetes.io/name": "switchboard", "app.kubernetes.io/component": "operator",
			}},
			Data: want,
		}
		err = writer.Create(ctx, &cm)
	case err == nil && !maps.Equal(cm.Data, want):
		cm.Data = want
		err = writer.Update(ctx, &cm)
	}
	if err != nil {
		return fmt.Errorf("publishing the operator's version in ConfigMap %s/%s: %w", namespace, version.ConfigMap, err)
	}
	return nil
}

// versionPublisher publishes the build's version once the replica leads (the one that acts is
// the one installed: after an upgrade, the new leader writes its own), retrying with back-off
// until it succeeds or the operator stops. A failure is logged, never fatal: the version is
// for people, and keys must not wait on it.
type versionPublisher struct {
	mgr       manager.Manager
	namespace string // the system namespace
	log       logr.Logger
}

// NeedLeaderElection says that only the leader publishes.
func (versionPublisher) NeedLeaderElection() bool { return true }

// Start publishes, retrying until it is done or ctx ends.
func (p versionPublisher) Start(ctx context.Context) error {
	log := p.log
	info := version.Get()
	backoff := wait.Backoff{Duration: time.Second, Factor: 2, Cap: time.Minute, Steps: math.MaxInt32}
	_ = wait.ExponentialBackoffWithContext(ctx, backoff, func(ctx context.Context) (bool, error) {
		err := PublishVersion(ctx, p.mgr.GetAPIReader(), p.mgr.GetClient(), p.namespace, info)
		if err != nil {
			log.Error(err, "retrying")
			return false, nil
		}
		log.Info("published", "version", info.Version, "configMap", p.namespace+"/"+version.ConfigMap)
		return true, nil
	})
	return nil
}
