package apiserver_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"skiff/server/apiserver"
)

// chainLog records the calls of a fake chain: "<name>#<pass>".
type chainLog []string

// fakeMutator is a mutating plugin that follows the reinvocation contract
// as upstream's reinvocable plugins do: on the reinvocation pass it runs
// again only if it is IfNeeded and the object changed since it last ran.
type fakeMutator struct {
	name     string
	ifNeeded bool
	mutate   func(cm *corev1.ConfigMap)
	log      *chainLog
	errAt    map[int]error // the refusal on each pass
}

type fakeState struct {
	ran  bool
	last string // the object as this plugin left it
}

func fingerprint(cm *corev1.ConfigMap) string { return fmt.Sprint(cm.Labels, cm.Annotations) }

func (p *fakeMutator) Reinvocable() {}

func (p *fakeMutator) Admit(_ context.Context, a apiserver.AdmissionAttributes) error {
	cm := a.Object.(*corev1.ConfigMap)
	rc := a.Reinvocation
	st, _ := rc.Value(p).(*fakeState)
	if st == nil {
		st = &fakeState{}
		rc.SetValue(p, st)
	}
	if rc.IsReinvoke() && !(p.ifNeeded && st.ran && st.last != fingerprint(cm)) {
		return nil
	}
	pass := 0
	if rc.IsReinvoke() {
		pass = 1
	}
	*p.log = append(*p.log, fmt.Sprintf("%s#%d", p.name, pass))
	before := fingerprint(cm)
	if p.mutate != nil {
		p.mutate(cm)
	}
	if fingerprint(cm) != before {
		rc.SetShouldReinvoke()
	}
	st.ran, st.last = true, fingerprint(cm)
	return p.errAt[pass]
}

// spy is a reinvocable plugin that records every pass it is admitted in.
type spy struct{ log *chainLog }

func (s *spy) Reinvocable() {}

func (s *spy) Admit(_ context.Context, a apiserver.AdmissionAttributes) error {
	pass := 0
	if a.Reinvocation.IsReinvoke() {
		pass = 1
	}
	*s.log = append(*s.log, fmt.Sprintf("spy#%d", pass))
	return nil
}

// builtin is a plugin that does not take part in reinvocation.
type builtin struct {
	name   string
	log    *chainLog
	mutate func(cm *corev1.ConfigMap)
	saw    string
}

func (b *builtin) Admit(_ context.Context, a apiserver.AdmissionAttributes) error {
	cm := a.Object.(*corev1.ConfigMap)
	pass := 0
	if a.Reinvocation.IsReinvoke() {
		pass = 1
	}
	*b.log = append(*b.log, fmt.Sprintf("%s#%d", b.name, pass))
	if b.mutate != nil {
		b.mutate(cm)
	}
	b.saw = fingerprint(cm)
	return nil
}

func setAnnotation(k string, v func(cm *corev1.ConfigMap) string) func(cm *corev1.ConfigMap) {
	return func(cm *corev1.ConfigMap) {
		if cm.Annotations == nil {
			cm.Annotations = map[string]string{}
		}
		cm.Annotations[k] = v(cm)
	}
}

func setLabel(k, v string) func(cm *corev1.ConfigMap) {
	return func(cm *corev1.ConfigMap) {
		if cm.Labels == nil {
			cm.Labels = map[string]string{}
		}
		cm.Labels[k] = v
	}
}

// sawB is what plugin A writes: whether B's label was there.
func sawB(cm *corev1.ConfigMap) string {
	if cm.Labels["b"] != "" {
		return "saw-b"
	}
	return "no-b"
}

func TestAdmitMutating_Reinvocation(t *testing.T) {
	cases := []struct {
		name      string
		aIfNeeded bool
		bMutates  bool
		wantLog   []string
		wantA     string
	}{
		{name: "IfNeeded plugin runs again after a later plugin changed the object", aIfNeeded: true, bMutates: true,
			wantLog: []string{"pre#0", "A#0", "B#0", "spy#0", "A#1", "spy#1", "tail#0"}, wantA: "saw-b"},
		{name: "Never plugin does not run again", aIfNeeded: false, bMutates: true,
			wantLog: []string{"pre#0", "A#0", "B#0", "spy#0", "spy#1", "tail#0"}, wantA: "no-b"},
		{name: "no change after the IfNeeded plugin, no second run", aIfNeeded: true, bMutates: false,
			wantLog: []string{"pre#0", "A#0", "B#0", "spy#0", "spy#1", "tail#0"}, wantA: "no-b"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var log chainLog
			a := &fakeMutator{name: "A", ifNeeded: tc.aIfNeeded, mutate: setAnnotation("a", sawB), log: &log}
			b := &fakeMutator{name: "B", log: &log}
			if tc.bMutates {
				b.mutate = setLabel("b", "yes")
			}
			pre := &builtin{name: "pre", log: &log}
			tail := &builtin{name: "tail", log: &log}
			cm := &corev1.ConfigMap{}
			err := apiserver.AdmitMutating(context.Background(), []apiserver.Admitter{pre, a, b, &spy{&log}, tail},
				apiserver.AdmissionAttributes{Op: apiserver.OpCreate, Object: cm})
			if err != nil {
				t.Fatal(err)
			}
			// A's annotation asks for the second pass in every case (spy#1);
			// there B (Never) and pre (not Reinvocable) do not run again.
			if !reflect.DeepEqual([]string(log), tc.wantLog) {
				t.Errorf("calls = %v, want %v", log, tc.wantLog)
			}
			if cm.Annotations["a"] != tc.wantA {
				t.Errorf("annotation a = %q, want %q", cm.Annotations["a"], tc.wantA)
			}
			if tail.saw != fingerprint(cm) {
				t.Errorf("the plugin after the reinvocable ones saw %s, want the final object %s", tail.saw, fingerprint(cm))
			}
		})
	}
}

func TestAdmitMutating_NothingChanged_NoSecondPass(t *testing.T) {
	var log chainLog
	a := &fakeMutator{name: "A", ifNeeded: true, log: &log}
	b := &fakeMutator{name: "B", ifNeeded: true, log: &log}
	err := apiserver.AdmitMutating(context.Background(), []apiserver.Admitter{a, b, &spy{&log}},
		apiserver.AdmissionAttributes{Op: apiserver.OpCreate, Object: &corev1.ConfigMap{}})
	if err != nil || !reflect.DeepEqual([]string(log), []string{"A#0", "B#0", "spy#0"}) {
		t.Fatalf("err %v, calls %v, want one pass: A#0 B#0 spy#0", err, log)
	}
}

func TestAdmitMutating_BuiltinChangeAfterReinvocable_NoSecondPass(t *testing.T) {
	// A built-in between two reinvocable plugins changes the object but
	// does not ask for reinvocation: the chain only reruns on request.
	var log chainLog
	a := &fakeMutator{name: "A", ifNeeded: true, log: &log}
	mid := &builtin{name: "mid", log: &log, mutate: setLabel("b", "yes")}
	b := &fakeMutator{name: "B", log: &log}
	err := apiserver.AdmitMutating(context.Background(), []apiserver.Admitter{a, mid, b},
		apiserver.AdmissionAttributes{Op: apiserver.OpCreate, Object: &corev1.ConfigMap{}})
	if err != nil || !reflect.DeepEqual([]string(log), []string{"A#0", "mid#0", "B#0"}) {
		t.Fatalf("err %v, calls %v", err, log)
	}
}

func TestAdmitMutating_Refusal_StopsTheChain(t *testing.T) {
	cases := []struct {
		name    string
		failing string // the plugin that refuses
		pass    int    // on this pass
		wantLog []string
	}{
		{"first pass refusal stops before the second pass", "B", 0, []string{"A#0", "B#0"}},
		{"reinvocation pass refusal stops before the tail", "A", 1, []string{"A#0", "B#0", "A#1"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var log chainLog
			refused := errors.New("refused")
			a := &fakeMutator{name: "A", ifNeeded: true, mutate: setAnnotation("a", sawB), log: &log}
			b := &fakeMutator{name: "B", mutate: setLabel("b", "yes"), log: &log}
			map[string]*fakeMutator{"A": a, "B": b}[tc.failing].errAt = map[int]error{tc.pass: refused}
			tail := &builtin{name: "tail", log: &log}
			err := apiserver.AdmitMutating(context.Background(), []apiserver.Admitter{a, b, tail},
				apiserver.AdmissionAttributes{Op: apiserver.OpCreate, Object: &corev1.ConfigMap{}})
			if !errors.Is(err, refused) || !reflect.DeepEqual([]string(log), tc.wantLog) {
				t.Fatalf("err %v, calls %v, want %v", err, log, tc.wantLog)
			}
		})
	}
}

func TestReinvocation_Nil_IsAFirstPassThatKeepsNothing(t *testing.T) {
	var rc *apiserver.Reinvocation
	rc.SetShouldReinvoke()
	rc.SetValue("k", 1)
	if rc.IsReinvoke() || rc.ShouldReinvoke() || rc.Value("k") != nil {
		t.Fatal("a nil Reinvocation kept state")
	}
}
