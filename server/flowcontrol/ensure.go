package flowcontrol

import (
	"context"
	"fmt"
	"strconv"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	flowcontrolclient "k8s.io/client-go/kubernetes/typed/flowcontrol/v1"

	"skiff/server/flowcontrol/bootstrap"
)

// The bootstrap objects are kept as upstream's ensurer keeps them
// (pkg/registry/flowcontrol/ensurer):
//   - a missing one is created, mandatory or suggested;
//   - a mandatory one always gets its bootstrap spec back;
//   - a suggested one does when its apf.kubernetes.io/autoupdate-spec
//     annotation is true (or missing or unparsable while the object was
//     never changed: generation 1), and is left alone when it is false;
//   - the annotation is rewritten to say which of the two applies;
//   - an object annotated true that is no longer a bootstrap object is
//     deleted (one of an older release).

const fieldManager = "api-priority-and-fairness-config-producer-v1"

// configObject is a FlowSchema or a PriorityLevelConfiguration.
type configObject interface {
	comparable
	metav1.Object
	runtime.Object
}

// kindOps is what the ensurer does with one kind.
type kindOps[T configObject] struct {
	get    func(ctx context.Context, name string) (T, error)
	list   func(ctx context.Context) ([]T, error)
	create func(ctx context.Context, obj T) error
	update func(ctx context.Context, obj T) error
	delete func(ctx context.Context, name string) error
	// specEqual says whether have already has want's spec.
	specEqual func(want, have T) bool
	// withSpec is a copy of into with from's spec.
	withSpec func(into, from T) T
	copy     func(T) T
}

func flowSchemaOps(c flowcontrolclient.FlowSchemaInterface) kindOps[*flowcontrolv1.FlowSchema] {
	return kindOps[*flowcontrolv1.FlowSchema]{
		get: func(ctx context.Context, name string) (*flowcontrolv1.FlowSchema, error) {
			return c.Get(ctx, name, metav1.GetOptions{})
		},
		list: func(ctx context.Context) ([]*flowcontrolv1.FlowSchema, error) {
			l, err := c.List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, err
			}
			out := make([]*flowcontrolv1.FlowSchema, len(l.Items))
			for i := range l.Items {
				out[i] = &l.Items[i]
			}
			return out, nil
		},
		create: func(ctx context.Context, fs *flowcontrolv1.FlowSchema) error {
			_, err := c.Create(ctx, fs, metav1.CreateOptions{FieldManager: fieldManager})
			return err
		},
		update: func(ctx context.Context, fs *flowcontrolv1.FlowSchema) error {
			_, err := c.Update(ctx, fs, metav1.UpdateOptions{FieldManager: fieldManager})
			return err
		},
		delete: func(ctx context.Context, name string) error { return c.Delete(ctx, name, metav1.DeleteOptions{}) },
		specEqual: func(want, have *flowcontrolv1.FlowSchema) bool {
			return equality.Semantic.DeepEqual(want.Spec, have.Spec)
		},
		withSpec: func(into, from *flowcontrolv1.FlowSchema) *flowcontrolv1.FlowSchema {
			out := into.DeepCopy()
			out.Spec = *from.Spec.DeepCopy()
			return out
		},
		copy: (*flowcontrolv1.FlowSchema).DeepCopy,
	}
}

func priorityLevelOps(c flowcontrolclient.PriorityLevelConfigurationInterface) kindOps[*flowcontrolv1.PriorityLevelConfiguration] {
	return kindOps[*flowcontrolv1.PriorityLevelConfiguration]{
		get: func(ctx context.Context, name string) (*flowcontrolv1.PriorityLevelConfiguration, error) {
			return c.Get(ctx, name, metav1.GetOptions{})
		},
		list: func(ctx context.Context) ([]*flowcontrolv1.PriorityLevelConfiguration, error) {
			l, err := c.List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, err
			}
			out := make([]*flowcontrolv1.PriorityLevelConfiguration, len(l.Items))
			for i := range l.Items {
				out[i] = &l.Items[i]
			}
			return out, nil
		},
		create: func(ctx context.Context, pl *flowcontrolv1.PriorityLevelConfiguration) error {
			_, err := c.Create(ctx, pl, metav1.CreateOptions{FieldManager: fieldManager})
			return err
		},
		update: func(ctx context.Context, pl *flowcontrolv1.PriorityLevelConfiguration) error {
			_, err := c.Update(ctx, pl, metav1.UpdateOptions{FieldManager: fieldManager})
			return err
		},
		delete: func(ctx context.Context, name string) error { return c.Delete(ctx, name, metav1.DeleteOptions{}) },
		specEqual: func(want, have *flowcontrolv1.PriorityLevelConfiguration) bool {
			w := want.Spec.DeepCopy()
			if want.Name == flowcontrolv1.PriorityLevelConfigurationNameExempt {
				// An administrator may tune exempt's shares and lending.
				if have.Spec.Exempt == nil {
					return false
				}
				w.Exempt = have.Spec.Exempt.DeepCopy()
			}
			return equality.Semantic.DeepEqual(*w, have.Spec)
		},
		withSpec: func(into, from *flowcontrolv1.PriorityLevelConfiguration) *flowcontrolv1.PriorityLevelConfiguration {
			out := into.DeepCopy()
			out.Spec = *from.Spec.DeepCopy()
			return out
		},
		copy: (*flowcontrolv1.PriorityLevelConfiguration).DeepCopy,
	}
}

// Ensure makes one pass over the bootstrap objects through client.
func Ensure(ctx context.Context, client flowcontrolclient.FlowcontrolV1Interface) error {
	pls, fss := priorityLevelOps(client.PriorityLevelConfigurations()), flowSchemaOps(client.FlowSchemas())
	// Levels first, so the schemas made next are not dangling.
	if err := ensureAll(ctx, pls, bootstrap.SuggestedPriorityLevelConfigurations(), false); err != nil {
		return fmt.Errorf("suggested priority levels: %w", err)
	}
	if err := ensureAll(ctx, fss, bootstrap.SuggestedFlowSchemas(), false); err != nil {
		return fmt.Errorf("suggested flow schemas: %w", err)
	}
	if err := ensureAll(ctx, pls, bootstrap.MandatoryPriorityLevelConfigurations(), true); err != nil {
		return fmt.Errorf("mandatory priority levels: %w", err)
	}
	if err := ensureAll(ctx, fss, bootstrap.MandatoryFlowSchemas(), true); err != nil {
		return fmt.Errorf("mandatory flow schemas: %w", err)
	}
	if err := removeUnwanted(ctx, fss, append(bootstrap.MandatoryFlowSchemas(), bootstrap.SuggestedFlowSchemas()...)); err != nil {
		return fmt.Errorf("old flow schemas: %w", err)
	}
	if err := removeUnwanted(ctx, pls, append(bootstrap.MandatoryPriorityLevelConfigurations(), bootstrap.SuggestedPriorityLevelConfigurations()...)); err != nil {
		return fmt.Errorf("old priority levels: %w", err)
	}
	return nil
}

func ensureAll[T configObject](ctx context.Context, ops kindOps[T], wants []T, mandatory bool) error {
	for _, want := range wants {
		if err := ensureOne(ctx, ops, want, mandatory); err != nil {
			return err
		}
	}
	return nil
}

func ensureOne[T configObject](ctx context.Context, ops kindOps[T], want T, mandatory bool) error {
	name := want.GetName()
	cur, err := ops.get(ctx, name)
	if apierrors.IsNotFound(err) {
		err = ops.create(ctx, ops.copy(want))
		if apierrors.IsAlreadyExists(err) {
			return nil // made concurrently (another server): looked at next time
		}
		if err != nil {
			return fmt.Errorf("create %s: %w", name, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("get %s: %w", name, err)
	}
	revised, ok := revise(ops, cur, want, mandatory)
	if !ok {
		return nil
	}
	if err := ops.update(ctx, revised); err != nil && !apierrors.IsConflict(err) {
		return fmt.Errorf("update %s: %w", name, err)
	}
	return nil // a conflict is someone else's change: looked at next time
}

// revise returns cur as it should be, and whether that is a change.
func revise[T configObject](ops kindOps[T], cur, want T, mandatory bool) (T, bool) {
	autoUpdate := mandatory || shouldUpdateSpec(cur)
	fixAnnotation := annotationDiffers(cur, autoUpdate)
	specChanged := autoUpdate && !ops.specEqual(want, cur)
	if !fixAnnotation && !specChanged {
		var zero T
		return zero, false
	}
	revised := ops.copy(cur)
	if specChanged {
		revised = ops.withSpec(cur, want)
	}
	if fixAnnotation {
		a := revised.GetAnnotations()
		if a == nil {
			a = map[string]string{}
		}
		a[flowcontrolv1.AutoUpdateAnnotationKey] = strconv.FormatBool(autoUpdate)
		revised.SetAnnotations(a)
	}
	return revised, true
}

// shouldUpdateSpec reads the annotation; without a usable one, an object
// nobody has changed (generation 1) may be updated.
func shouldUpdateSpec(obj metav1.Object) bool {
	if v, err := strconv.ParseBool(obj.GetAnnotations()[flowcontrolv1.AutoUpdateAnnotationKey]); err == nil {
		return v
	}
	return obj.GetGeneration() == 1
}

func annotationDiffers(obj metav1.Object, want bool) bool {
	v, ok := obj.GetAnnotations()[flowcontrolv1.AutoUpdateAnnotationKey]
	if !ok {
		return true
	}
	cur, err := strconv.ParseBool(v)
	return err != nil || cur != want
}

// removeUnwanted deletes the objects annotated autoupdate-spec=true whose
// names are not bootstrap objects any more; others are the users'.
func removeUnwanted[T configObject](ctx context.Context, ops kindOps[T], wanted []T) error {
	names := map[string]bool{}
	for _, w := range wanted {
		names[w.GetName()] = true
	}
	cur, err := ops.list(ctx)
	if err != nil {
		return fmt.Errorf("list: %w", err)
	}
	for _, obj := range cur {
		if names[obj.GetName()] {
			continue
		}
		if v, err := strconv.ParseBool(obj.GetAnnotations()[flowcontrolv1.AutoUpdateAnnotationKey]); err != nil || !v {
			continue
		}
		if err := ops.delete(ctx, obj.GetName()); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete %s: %w", obj.GetName(), err)
		}
	}
	return nil
}
