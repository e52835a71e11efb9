package apiserver

import (
	"context"
	"reflect"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
)

// Reinvocation across admission plugins, as upstream's reinvoker
// (k8s.io/apiserver pkg/admission/reinvocation.go):
//
// The mutating phase runs every mutating plugin once, in order. A plugin
// that changed the object calls AdmissionAttributes.Reinvocation's
// SetShouldReinvoke; if one did, the Reinvocable plugins run a second
// time, with IsReinvoke true. On that pass each reruns only what it owes
// a rerun: upstream's MutatingAdmissionPolicy and MutatingAdmissionWebhook
// reinvoke their IfNeeded policies and webhooks that ran on the first
// pass and saw the object change after them (a later hook of their own,
// or, found by comparing the object with what the plugin last left, any
// plugin in between). As upstream's, a MutatingAdmissionPolicy pass that
// applied any patch also makes every IfNeeded policy it ran due (its
// dispatcher's object is then dirty), so such a policy runs twice even
// alone: IfNeeded policies must be idempotent. There is no third pass.
//
// Each plugin keeps what it needs between the passes in the request's
// Reinvocation, under a key of its own (SetValue, Value); Hooks is that
// state for a plugin of IfNeeded hooks (which ran, which are due, the
// object the plugin left).
//
// The plugins after the last Reinvocable one (Service address allocation
// and the checks that upstream does in its registry, outside the mutating
// chain) run once, after the reinvocation pass, so they see the final
// object. Upstream also reruns its in-tree mutating plugins on the second
// pass; here only the plugins that implement Reinvocable rerun.

// Reinvocable marks a mutating admission plugin that takes part in the
// reinvocation pass: it is admitted a second time when a plugin asked for
// it, and its Admit then reads a.Reinvocation.IsReinvoke.
type Reinvocable interface {
	Admitter
	Reinvocable()
}

// Reinvocation is one request's reinvocation state, shared by the passes
// of its mutating phase. A nil *Reinvocation (admission outside the
// mutating phase) is a first pass that nothing reinvokes: its methods are
// safe to call and keep nothing.
type Reinvocation struct {
	reinvoke  bool
	requested bool
	values    map[any]any
}

// IsReinvoke tells whether this is the reinvocation pass.
func (r *Reinvocation) IsReinvoke() bool { return r != nil && r.reinvoke }

// SetShouldReinvoke asks for the reinvocation pass: a plugin changed the
// object.
func (r *Reinvocation) SetShouldReinvoke() {
	if r != nil {
		r.requested = true
	}
}

// ShouldReinvoke tells whether a plugin asked for the reinvocation pass.
func (r *Reinvocation) ShouldReinvoke() bool { return r != nil && r.requested }

// Value is what a plugin stored under key (nil if nothing).
func (r *Reinvocation) Value(key any) any {
	if r == nil {
		return nil
	}
	return r.values[key]
}

// SetValue stores a plugin's state under key, which should be the
// plugin's own (a value of an unexported type, or the plugin itself).
func (r *Reinvocation) SetValue(key, v any) {
	if r == nil {
		return
	}
	if r.values == nil {
		r.values = map[any]any{}
	}
	r.values[key] = v
}

// Hooks is a plugin's IfNeeded hooks (webhooks, policy invocations) for
// one request, stored under key (get or create); with a nil Reinvocation
// it is fresh and kept by nobody.
func (r *Reinvocation) Hooks(key any) *Hooks {
	if h, ok := r.Value(key).(*Hooks); ok {
		return h
	}
	h := &Hooks{}
	r.SetValue(key, h)
	return h
}

// Hooks tracks one plugin's IfNeeded hooks across the passes, as
// upstream's webhook and policy reinvocation contexts: a hook that ran
// is due again once the object changes after it (Changed), by a later
// hook of the plugin or, found when the reinvocation pass begins, by any
// plugin since the plugin's last pass.
type Hooks struct {
	last    runtime.Object
	invoked map[string]bool // IfNeeded hooks run since the last change, by key
	due     map[string]bool // hooks the reinvocation pass runs again
}

// Invoked records that the IfNeeded hook key ran.
func (h *Hooks) Invoked(key string) {
	if h.invoked == nil {
		h.invoked = map[string]bool{}
	}
	h.invoked[key] = true
}

// Changed records that the object changed: every IfNeeded hook run
// before is due.
func (h *Hooks) Changed() {
	if len(h.invoked) > 0 && h.due == nil {
		h.due = map[string]bool{}
	}
	for k := range h.invoked {
		h.due[k] = true
	}
	clear(h.invoked)
}

// Due tells whether the reinvocation pass runs hook key again.
func (h *Hooks) Due(key string) bool { return h.due[key] }

// BeginReinvoke starts the plugin's reinvocation pass on obj: a change
// since its last pass makes the hooks run before it due. It tells
// whether any hook is due (none: the plugin has nothing to do).
func (h *Hooks) BeginReinvoke(obj runtime.Object) bool {
	if len(h.invoked) > 0 && !equality.Semantic.DeepEqual(h.last, obj) {
		h.Changed()
	}
	return len(h.due) > 0
}

// Left records the object the plugin's pass leaves. Only hooks not yet
// due need it, so without them no copy is made.
func (h *Hooks) Left(obj runtime.Object) {
	h.last = nil
	if len(h.invoked) > 0 && !nilObject(obj) {
		h.last = obj.DeepCopyObject()
	}
}

func nilObject(obj runtime.Object) bool {
	if obj == nil {
		return true
	}
	v := reflect.ValueOf(obj)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// AdmitMutating runs a request's mutating plugins, in order, with
// upstream's reinvocation (above): a gets a fresh Reinvocation.
func AdmitMutating(ctx context.Context, plugins []Admitter, a AdmissionAttributes) error {
	last := -1
	for i, p := range plugins {
		if _, ok := p.(Reinvocable); ok {
			last = i
		}
	}
	rc := &Reinvocation{}
	a.Reinvocation = rc
	for _, p := range plugins[:last+1] {
		if err := p.Admit(ctx, a); err != nil {
			return err
		}
	}
	if rc.ShouldReinvoke() {
		rc.reinvoke = true
		for _, p := range plugins[:last+1] {
			if _, ok := p.(Reinvocable); !ok {
				continue
			}
			if err := p.Admit(ctx, a); err != nil {
				return err
			}
		}
	}
	a.Reinvocation = nil // the rest run once, as the first and only pass
	for _, p := range plugins[last+1:] {
		if err := p.Admit(ctx, a); err != nil {
			return err
		}
	}
	return nil
}
