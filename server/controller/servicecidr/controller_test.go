package servicecidr

import (
	"context"
	"slices"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"skiff/server/controller/controllertest"
)

func start(t *testing.T) *controllertest.Env {
	t.Helper()
	env := controllertest.Start(t, controllertest.Options{Timeout: time.Minute})
	controllertest.Run(t, env.Ctx, func(ctx context.Context) error {
		return Run(ctx, Config{Client: env.Client, Informers: env.Informers, Logger: controllertest.Logger(t, 0), Grace: 50 * time.Millisecond})
	})
	return env
}

func createCIDR(t *testing.T, env *controllertest.Env, name string, cidrs ...string) {
	t.Helper()
	_, err := env.Client.NetworkingV1().ServiceCIDRs().Create(env.Ctx, &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: networkingv1.ServiceCIDRSpec{CIDRs: cidrs}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

func createIP(t *testing.T, env *controllertest.Env, ip string) {
	t.Helper()
	_, err := env.Client.NetworkingV1().IPAddresses().Create(env.Ctx, &networkingv1.IPAddress{
		ObjectMeta: metav1.ObjectMeta{Name: ip, Labels: map[string]string{networkingv1.LabelManagedBy: managedBy}},
		Spec:       networkingv1.IPAddressSpec{ParentRef: &networkingv1.ParentReference{Resource: "services", Namespace: "default", Name: "web"}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

func readyIs(env *controllertest.Env, name string, status metav1.ConditionStatus, reason string) func(context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		c, err := env.Client.NetworkingV1().ServiceCIDRs().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		cond := meta.FindStatusCondition(c.Status.Conditions, networkingv1.ServiceCIDRConditionReady)
		return cond != nil && cond.Status == status && (reason == "" || cond.Reason == reason), nil
	}
}

func gone(env *controllertest.Env, name string) func(context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		_, err := env.Client.NetworkingV1().ServiceCIDRs().Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}
}

func TestServiceCIDR_Created_GetsFinalizerAndReady(t *testing.T) {
	env := start(t)
	createCIDR(t, env, "extra", "203.0.113.0/24")
	controllertest.Eventually(t, env.Ctx, 10*time.Second, readyIs(env, "extra", metav1.ConditionTrue, ""), "Ready=True")
	c, err := env.Client.NetworkingV1().ServiceCIDRs().Get(env.Ctx, "extra", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(c.Finalizers, Finalizer) {
		t.Errorf("finalizers = %v", c.Finalizers)
	}
}

func TestServiceCIDR_DeletedWithAddressInUse_WaitsUntilFree(t *testing.T) {
	env := start(t)
	createCIDR(t, env, "extra", "203.0.113.0/24")
	controllertest.Eventually(t, env.Ctx, 10*time.Second, readyIs(env, "extra", metav1.ConditionTrue, ""), "Ready=True")
	createIP(t, env, "203.0.113.10")
	if err := env.Client.NetworkingV1().ServiceCIDRs().Delete(env.Ctx, "extra", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, env.Ctx, 10*time.Second, readyIs(env, "extra", metav1.ConditionFalse, ReasonTerminating), "Ready=False while the address is in use")
	if err := env.Client.NetworkingV1().IPAddresses().Delete(env.Ctx, "203.0.113.10", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, env.Ctx, 10*time.Second, gone(env, "extra"), "the ServiceCIDR to go once its address is free")
}

func TestServiceCIDR_DeletedInsideAnother_GoesDespiteAddresses(t *testing.T) {
	env := start(t)
	createCIDR(t, env, "outer", "203.0.113.0/24")
	createCIDR(t, env, "inner", "203.0.113.0/28")
	controllertest.Eventually(t, env.Ctx, 10*time.Second, readyIs(env, "inner", metav1.ConditionTrue, ""), "Ready=True")
	createIP(t, env, "203.0.113.5")
	if err := env.Client.NetworkingV1().ServiceCIDRs().Delete(env.Ctx, "inner", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, env.Ctx, 10*time.Second, gone(env, "inner"), "the inner ServiceCIDR to go: outer still holds the address")
}
