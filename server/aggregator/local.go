package aggregator

import (
	"context"
	"errors"
	"fmt"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"

	"skiff/server/registry"
)

// Local APIServices: one per group-version this server serves, as
// upstream's autoregister and crdRegistrationController keep them, so
// `kubectl get apiservices` lists them and their priorities order
// discovery. Each carries upstream's automanaged label; APIServices
// without it are users' and never touched.
const (
	automanagedLabel = "kube-aggregator.kubernetes.io/automanaged"
	// automanagedOnStart marks built-in group-versions, automanagedTrue
	// those of CustomResourceDefinitions (upstream's values).
	automanagedOnStart = "onstart"
	automanagedTrue    = "true"
)

// desiredLocal is the local APIService of every group-version in rows,
// by name.
func desiredLocal(rows []*registry.Resource) map[string]*apiregistrationv1.APIService {
	out := map[string]*apiregistrationv1.APIService{}
	for _, r := range rows {
		gv := schema.GroupVersion{Group: r.Group, Version: r.Version}
		if gv.Group == registrationGroup {
			continue // upstream makes none for the aggregator's own group
		}
		name := gv.Version + "." + gv.Group
		if _, ok := out[name]; ok {
			continue
		}
		p, managed := localPriority(gv), automanagedOnStart
		if r.Custom {
			p, managed = customPriority, automanagedTrue
		}
		out[name] = &apiregistrationv1.APIService{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{automanagedLabel: managed}},
			Spec: apiregistrationv1.APIServiceSpec{Group: gv.Group, Version: gv.Version,
				GroupPriorityMinimum: p.group, VersionPriority: p.version},
		}
	}
	return out
}

// localChange is one write that brings the APIServices in line.
type localChange struct {
	create, update *apiregistrationv1.APIService
	delete         *apiregistrationv1.APIService
}

// planLocal compares what exists with what should: missing ones are
// created, automanaged ones whose spec or label drifted are updated, and
// automanaged ones for group-versions no longer served are deleted.
func planLocal(existing []*apiregistrationv1.APIService, desired map[string]*apiregistrationv1.APIService) []localChange {
	var out []localChange
	seen := map[string]bool{}
	for _, cur := range existing {
		seen[cur.Name] = true
		want, ok := desired[cur.Name]
		_, managed := cur.Labels[automanagedLabel]
		switch {
		case !managed:
			// A user's APIService of the same name (an extension server
			// taking a group-version over) wins, as upstream.
		case !ok:
			out = append(out, localChange{delete: cur})
		case !apiequality.Semantic.DeepEqual(cur.Spec, want.Spec) || cur.Labels[automanagedLabel] != want.Labels[automanagedLabel]:
			next := cur.DeepCopy()
			next.Spec = want.Spec
			next.Labels[automanagedLabel] = want.Labels[automanagedLabel]
			out = append(out, localChange{update: next})
		}
	}
	for name, want := range desired {
		if !seen[name] {
			out = append(out, localChange{create: want})
		}
	}
	return out
}

// syncLocal applies the plan; it goes on past failures and returns them
// all, so one conflict does not hold the others back.
func (a *Aggregator) syncLocal(ctx context.Context, _ string) error {
	var existing []*apiregistrationv1.APIService
	for _, obj := range a.apiServiceInformer.GetStore().List() {
		existing = append(existing, obj.(*apiregistrationv1.APIService))
	}
	var errs []error
	for _, ch := range planLocal(existing, desiredLocal(a.cfg.Registry.All())) {
		var err error
		switch {
		case ch.create != nil:
			_, err = a.apiServices.create(ctx, ch.create)
			if apierrors.IsAlreadyExists(err) {
				err = nil // the informer has not seen it yet
			}
		case ch.update != nil:
			_, err = a.apiServices.update(ctx, ch.update)
		case ch.delete != nil:
			err = a.apiServices.delete(ctx, ch.delete.Name, string(ch.delete.UID))
			if apierrors.IsNotFound(err) {
				err = nil
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("local APIServices: %w", err))
		}
	}
	return errors.Join(errs...)
}
