package nodestatus

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestParseTaint(t *testing.T) {
	cases := []struct {
		in   string
		want corev1.Taint
		ok   bool
	}{
		{"dedicated=gpu:NoSchedule", corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}, true},
		{"node-role.kubernetes.io/control-plane:NoSchedule", corev1.Taint{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}, true},
		{"k=:PreferNoSchedule", corev1.Taint{Key: "k", Effect: corev1.TaintEffectPreferNoSchedule}, true},
		{"CriticalAddonsOnly=true:NoExecute", corev1.Taint{Key: "CriticalAddonsOnly", Value: "true", Effect: corev1.TaintEffectNoExecute}, true},
		{"no-effect", corev1.Taint{}, false},
		{"k=v", corev1.Taint{}, false},
		{"k=v:Sometimes", corev1.Taint{}, false},
		{"k=v:NoSchedule:extra", corev1.Taint{}, false},
		{"=v:NoSchedule", corev1.Taint{}, false},
		{"bad key!=v:NoSchedule", corev1.Taint{}, false},
		{"k=bad value:NoSchedule", corev1.Taint{}, false},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			got, err := ParseTaint(c.in)
			if c.ok {
				if err != nil || got != c.want {
					t.Fatalf("got %+v, %v; want %+v", got, err, c.want)
				}
				return
			}
			if !errors.Is(err, ErrBadTaint) {
				t.Fatalf("got %+v, %v; want ErrBadTaint", got, err)
			}
		})
	}
}

func TestParseTaints_SameKeyAndEffectTwice_IsRefused(t *testing.T) {
	if _, err := ParseTaints([]string{"a=1:NoSchedule", "a=2:NoSchedule"}); !errors.Is(err, ErrBadTaint) {
		t.Fatalf("got %v, want ErrBadTaint", err)
	}
	got, err := ParseTaints([]string{"a=1:NoSchedule", "a=1:NoExecute"})
	if err != nil || len(got) != 2 {
		t.Fatalf("same key, two effects: %v, %v", got, err)
	}
}

func TestParseLabels(t *testing.T) {
	cases := []struct {
		name string
		in   []string
		want map[string]string
		ok   bool
	}{
		{"plain and prefixed", []string{"tier=edge", "example.com/zone=a"}, map[string]string{"tier": "edge", "example.com/zone": "a"}, true},
		{"empty value", []string{"flag="}, map[string]string{"flag": ""}, true},
		{"later wins", []string{"a=1", "a=2"}, map[string]string{"a": "2"}, true},
		{"no equals", []string{"tier"}, nil, false},
		{"bad key", []string{"-a=1"}, nil, false},
		{"bad value", []string{"a=b c"}, nil, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseLabels(c.in)
			if !c.ok {
				if !errors.Is(err, ErrBadLabel) {
					t.Fatalf("got %v, %v; want ErrBadLabel", got, err)
				}
				return
			}
			if err != nil || len(got) != len(c.want) {
				t.Fatalf("got %v, %v; want %v", got, err, c.want)
			}
			for k, v := range c.want {
				if got[k] != v {
					t.Fatalf("got %v, want %v", got, c.want)
				}
			}
		})
	}
}
