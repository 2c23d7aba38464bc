// Package servingcert gives the operator's HTTPS endpoints (the reveal endpoint the panel
// calls, the admission webhook the API server calls) a serving certificate with no private key
// at rest and no certificate manager to install: each replica signs its own in memory, and
// publishes the certificate, before serving with it, where its callers take their trust from:
// a CA bundle ConfigMap (the panel), a ValidatingWebhookConfiguration's caBundle (the API
// server). A bundle holds every replica's certificates until they expire, so replicas never
// overwrite one another's; the keeper publishes again every minute, so a bundle reset by a
// GitOps sync or a `helm upgrade` is restored.
package servingcert

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/switchboard-dev/switchboard/internal/keyclient/reveal"
)

// republish is how often the keeper checks that its certificate is still published.
const republish = time.Minute

// Target is a place a certificate is published in, merged into the bundle there.
type Target interface {
	Publish(ctx context.Context, cert *x509.Certificate, now time.Time) error
	String() string
}

// Keeper keeps one replica's serving certificate: a manager Runnable on every replica.
type Keeper struct {
	names   []string
	targets []Target
	clock   clock.PassiveClock
	log     logr.Logger

	cert  atomic.Pointer[tls.Certificate]
	leaf  atomic.Pointer[x509.Certificate]
	ready chan struct{}
}

// NewKeeper returns a Keeper of a certificate for names (DNS names or IP addresses), published
// to targets.
func NewKeeper(names []string, targets []Target, c clock.PassiveClock, log logr.Logger) *Keeper {
	if c == nil {
		c = clock.RealClock{}
	}
	return &Keeper{names: names, targets: targets, clock: c, log: log, ready: make(chan struct{})}
}

// NeedLeaderElection is false: every replica serves.
func (*Keeper) NeedLeaderElection() bool { return false }

// Ready is closed once the first certificate is published everywhere.
func (k *Keeper) Ready() <-chan struct{} { return k.ready }

// GetCertificate is tls.Config's: the current certificate, once Ready.
func (k *Keeper) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if c := k.cert.Load(); c != nil {
		return c, nil
	}
	return nil, errors.New("the serving certificate is not published yet")
}

// Start issues and publishes the first certificate, then publishes again every minute and
// renews every CertRenewal, until ctx is done.
func (k *Keeper) Start(ctx context.Context) error {
	// Until the first certificate is published nothing is served (and readiness fails): a
	// target created after the operator (a webhook configuration applied later) is waited for.
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 30*time.Second) {
		err := k.renew(ctx)
		if err == nil {
			break
		}
		k.log.Error(err, "publishing the first serving certificate; trying again", "in", wait)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
	close(k.ready)
	renewAt := k.clock.Now().Add(CertRenewal)
	tick := time.NewTicker(republish)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		var err error
		if !k.clock.Now().Before(renewAt) {
			if err = k.renew(ctx); err == nil {
				renewAt = k.clock.Now().Add(CertRenewal)
			}
		} else {
			err = k.publish(ctx, k.leaf.Load())
		}
		if err != nil {
			// The certificate in use stays valid for CertLifetime-CertRenewal more.
			k.log.Error(err, "keeping the serving certificate published; trying again in a minute")
		}
	}
}

// renew signs a new certificate and publishes it before serving with it.
func (k *Keeper) renew(ctx context.Context) error {
	pair, cert, err := selfSigned(k.names, k.clock.Now())
	if err != nil {
		return err
	}
	if err := k.publish(ctx, cert); err != nil {
		return err
	}
	k.leaf.Store(cert)
	k.cert.Store(&pair)
	k.log.Info("serving with a new certificate", "names", k.names, "notAfter", cert.NotAfter, "publishedIn", k.targets)
	return nil
}

func (k *Keeper) publish(ctx context.Context, cert *x509.Certificate) error {
	var errs []error
	for _, t := range k.targets {
		if err := t.Publish(ctx, cert, k.clock.Now()); err != nil {
			errs = append(errs, fmt.Errorf("publishing the serving certificate in %s: %w", t, err))
		}
	}
	return errors.Join(errs...)
}

// ConfigMapBundle publishes in a ConfigMap, under the key the reveal protocol's callers read
// (reveal.BundleKey). It creates the ConfigMap when it does not exist at the first publication
// (switchboard dev, tests; the chart declares it), never later: a replica still running while
// `helm uninstall` deletes it must not bring it back.
func ConfigMapBundle(c client.Client, key client.ObjectKey) Target {
	return &configMapBundle{c: c, key: key}
}

type configMapBundle struct {
	c         client.Client
	key       client.ObjectKey
	published atomic.Bool
}

func (b *configMapBundle) String() string { return "ConfigMap " + b.key.String() }

func (b *configMapBundle) Publish(ctx context.Context, cert *x509.Certificate, now time.Time) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var cm corev1.ConfigMap
		err := b.c.Get(ctx, b.key, &cm)
		if apierrors.IsNotFound(err) && b.published.Load() {
			return nil // deleted on purpose (uninstalled): not brought back
		}
		if apierrors.IsNotFound(err) {
			cm = corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Namespace: b.key.Namespace, Name: b.key.Name, Labels: map[string]string{
					"app.kubernetes.io/name": "switchboard", "app.kubernetes.io/component": "operator",
				}},
				Data: map[string]string{reveal.BundleKey: string(mergeBundle(nil, cert, now))},
			}
			err = b.c.Create(ctx, &cm)
			if apierrors.IsAlreadyExists(err) {
				return apierrors.NewConflict(corev1.Resource("configmaps"), b.key.Name, err)
			}
			b.published.Store(err == nil)
			return err
		}
		if err != nil {
			return err
		}
		merged := string(mergeBundle([]byte(cm.Data[reveal.BundleKey]), cert, now))
		if cm.Data[reveal.BundleKey] == merged {
			b.published.Store(true)
			return nil
		}
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data[reveal.BundleKey] = merged
		err = b.c.Update(ctx, &cm)
		if err == nil {
			b.published.Store(true)
		}
		return err
	})
}

// WebhookCABundle publishes in the caBundle of every webhook of a
// ValidatingWebhookConfiguration, which must exist (the chart or config/ creates it).
func WebhookCABundle(c client.Client, name string) Target { return &webhookBundle{c: c, name: name} }

type webhookBundle struct {
	c    client.Client
	name string
}

func (b *webhookBundle) String() string { return "ValidatingWebhookConfiguration " + b.name }

func (b *webhookBundle) Publish(ctx context.Context, cert *x509.Certificate, now time.Time) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var vwc admissionregistrationv1.ValidatingWebhookConfiguration
		if err := b.c.Get(ctx, client.ObjectKey{Name: b.name}, &vwc); err != nil {
			return err
		}
		changed := false
		for i := range vwc.Webhooks {
			cc := &vwc.Webhooks[i].ClientConfig
			if merged := mergeBundle(cc.CABundle, cert, now); string(merged) != string(cc.CABundle) {
				cc.CABundle, changed = merged, true
			}
		}
		if !changed {
			return nil
		}
		return b.c.Update(ctx, &vwc)
	})
}
