package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"skiff/e2e/bench/loadkit"
)

// checker verifies that a setup is what is in force before it is timed,
// and that it stayed so while it was: a figure of a configuration that is
// not active would be a defect, not a measurement.
type checker struct {
	admin   kubernetes.Interface
	hook    *hookServer
	poll    time.Duration
	timeout time.Duration
	// quotaHard is the quota the timed creates run under.
	quotaHard int64
	probes    int
}

// observed is what one probe saw.
type observed struct {
	Labeled    bool `json:"labeled"`
	MutCalled  bool `json:"mutating_webhook_called"`
	ValCalled  bool `json:"validating_webhook_called"`
	BigRefused bool `json:"big_configmap_refused_by_policy"`
}

func expected(s setup) observed {
	return observed{Labeled: s.Mutating, MutCalled: s.Mutating, ValCalled: s.Validating, BigRefused: s.VAP}
}

func smallConfigMap(name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Data:       map[string]string{"k1": strings.Repeat("a", 100), "k2": strings.Repeat("b", 96)},
	}
}

func bigConfigMap(name string) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{}}
	for i := range bigKeys {
		cm.Data[fmt.Sprintf("k%03d", i)] = "v"
	}
	return cm
}

func isPolicyDenial(err error) bool {
	return err != nil && strings.Contains(err.Error(), "ValidatingAdmissionPolicy '"+policyName+"'")
}

// probe creates a small ConfigMap (is it labeled, which webhooks saw it)
// and one of bigKeys keys (does the policy refuse it) in ns.
func (c *checker) probe(ctx context.Context, ns string) (observed, error) {
	c.probes++
	var o observed
	m0, v0 := c.hook.Calls(mutatePath, ns), c.hook.Calls(validatePath, ns)
	cms := c.admin.CoreV1().ConfigMaps(ns)
	got, err := cms.Create(ctx, smallConfigMap(fmt.Sprintf("probe-%04d", c.probes)), metav1.CreateOptions{})
	if err != nil {
		return o, fmt.Errorf("probe create: %w", err)
	}
	o.Labeled = got.Labels[mutatedLabel] == mutatedValue
	o.MutCalled = c.hook.Calls(mutatePath, ns) > m0
	o.ValCalled = c.hook.Calls(validatePath, ns) > v0
	_, err = cms.Create(ctx, bigConfigMap(fmt.Sprintf("probe-big-%04d", c.probes)), metav1.CreateOptions{})
	switch {
	case err == nil:
	case isPolicyDenial(err):
		o.BigRefused = true
	default:
		return o, fmt.Errorf("probe create of %d keys: %w", bigKeys, err)
	}
	return o, nil
}

// inForce probes until what s sets up is in force and nothing else is
// (webhook configurations and policies take effect through the server's
// watch cache, a moment after their create or delete).
func (c *checker) inForce(ctx context.Context, s setup, ns string) (probes int, took time.Duration, err error) {
	want := expected(s)
	start, first := time.Now(), c.probes
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	for {
		got, err := c.probe(ctx, ns)
		if err == nil && got == want {
			return c.probes - first, time.Since(start), nil
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = fmt.Errorf("saw %+v, want %+v", got, want)
			}
			return c.probes - first, time.Since(start), fmt.Errorf("setup %s not in force after %d probes in %s: %w", s.Key, c.probes-first, time.Since(start).Round(time.Millisecond), err)
		case <-time.After(c.poll):
		}
	}
}

// until polls cond until it holds or the checker's timeout passes.
func (c *checker) until(ctx context.Context, what string, cond func(ctx context.Context) (bool, string, error)) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	for {
		ok, state, err := cond(ctx)
		if err == nil && ok {
			return nil
		}
		select {
		case <-ctx.Done():
			if err != nil {
				state = loadkit.Describe(err)
			}
			return fmt.Errorf("%s: not within %s (last: %s)", what, c.timeout, state)
		case <-time.After(c.poll):
		}
	}
}

func (c *checker) configMapCount(ctx context.Context, ns string) (int, error) {
	l, err := c.admin.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	return len(l.Items), nil
}

// quotaSettled waits for the quota's status to show hard and for its
// usage to equal the namespace's ConfigMaps.
func (c *checker) quotaSettled(ctx context.Context, ns string, hard int64) error {
	return c.until(ctx, "quota status", func(ctx context.Context) (bool, string, error) {
		q, err := c.admin.CoreV1().ResourceQuotas(ns).Get(ctx, quotaName, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		n, err := c.configMapCount(ctx, ns)
		if err != nil {
			return false, "", err
		}
		h, u := q.Status.Hard[quotaResource], q.Status.Used[quotaResource]
		state := fmt.Sprintf("hard=%s used=%s, %d ConfigMaps", h.String(), u.String(), n)
		return h.Value() == hard && u.Value() == int64(n), state, nil
	})
}

// armQuota puts a quota in ns and shows that admission charges it: with
// room for one more ConfigMap, one create passes and the next is refused
// as over quota. Then the quota is raised to quotaHard for the timed
// creates.
func (c *checker) armQuota(ctx context.Context, ns string) error {
	n, err := c.configMapCount(ctx, ns)
	if err != nil {
		return fmt.Errorf("list ConfigMaps: %w", err)
	}
	tight := int64(n + 1)
	quotas := c.admin.CoreV1().ResourceQuotas(ns)
	if _, err := quotas.Create(ctx, quotaObject(tight), metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create quota: %w", err)
	}
	if err := c.quotaSettled(ctx, ns, tight); err != nil {
		return err
	}
	cms := c.admin.CoreV1().ConfigMaps(ns)
	if _, err := cms.Create(ctx, smallConfigMap("quota-fits"), metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("a create within the quota: %w", err)
	}
	_, err = cms.Create(ctx, smallConfigMap("quota-over"), metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "exceeded quota: "+quotaName) {
		return fmt.Errorf("a create over %s=%d: want Forbidden, exceeded quota; got %v", quotaResource, tight, err)
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		q, err := quotas.Get(ctx, quotaName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		q.Spec.Hard[quotaResource] = *resource.NewQuantity(c.quotaHard, resource.DecimalSI)
		_, err = quotas.Update(ctx, q, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("raise quota: %w", err)
	}
	return c.quotaSettled(ctx, ns, c.quotaHard)
}

// noQuota checks that ns has no ResourceQuota.
func (c *checker) noQuota(ctx context.Context, ns string) error {
	l, err := c.admin.CoreV1().ResourceQuotas(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list quotas: %w", err)
	}
	if len(l.Items) > 0 {
		return fmt.Errorf("namespace %s has %d ResourceQuotas, want none", ns, len(l.Items))
	}
	return nil
}

// afterTimed checks that s stayed in force through the timed creates:
// each webhook answered once per create in ns (and the others not at
// all), every object created is labeled when the mutating webhook ran,
// the policy still refuses, and the quota charged every create.
func (c *checker) afterTimed(ctx context.Context, s setup, ns string, m *measurement, pr *loadkit.Problems) {
	attempts := int64(m.Create.Count)
	for _, w := range []struct {
		name string
		on   bool
		got  int64
	}{{"mutating", s.Mutating, m.MutatingCalls}, {"validating", s.Validating, m.ValidatingCalls}} {
		want := int64(0)
		if w.on {
			want = attempts
		}
		if w.got != want {
			pr.Add("%s round %d: the %s webhook answered %d reviews for %d creates, want %d", s.Key, m.Round, w.name, w.got, attempts, want)
		}
	}
	created := attempts - m.Create.Errors
	if s.Mutating {
		l, err := c.admin.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{LabelSelector: mutatedLabel + "=" + mutatedValue})
		labeled := 0
		if err == nil {
			for _, cm := range l.Items {
				if strings.HasPrefix(cm.Name, "obj-") {
					labeled++
				}
			}
		}
		if err != nil || int64(labeled) != created {
			pr.Add("%s round %d: %d timed ConfigMaps labeled by the mutating webhook of %d created (err %v)", s.Key, m.Round, labeled, created, err)
		}
	}
	if s.VAP {
		_, err := c.admin.CoreV1().ConfigMaps(ns).Create(ctx, bigConfigMap("after-big"), metav1.CreateOptions{})
		if !isPolicyDenial(err) {
			pr.Add("%s round %d: after the timed creates the policy did not refuse %d keys: %v", s.Key, m.Round, bigKeys, err)
		}
	}
	if s.Quota {
		if err := c.quotaSettled(ctx, ns, c.quotaHard); err != nil {
			pr.Add("%s round %d: after the timed creates: %v", s.Key, m.Round, err)
		}
	}
}
