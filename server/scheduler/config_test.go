package scheduler

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"skiff/server/scheduler/algorithm"
)

func TestLoadConfig_EmptyPathIsTheDefaultProfile(t *testing.T) {
	s, err := LoadConfig("")
	if err != nil || len(s.Profiles) != 0 || s.PercentageOfNodesToScore != 0 {
		t.Fatalf("LoadConfig(\"\") = %+v, %v; want zero Settings", s, err)
	}
}

func TestParseConfig(t *testing.T) {
	const head = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
	weights := func(p algorithm.Profile) map[string]int64 {
		m := map[string]int64{}
		for _, s := range p.Scores {
			m[s.Name] = s.Weight
		}
		return m
	}
	tests := []struct {
		name    string
		yaml    string
		wantErr string
		check   func(t *testing.T, s Settings)
	}{
		{name: "global settings and a default profile", yaml: head + "percentageOfNodesToScore: 30\nparallelism: 4\npodInitialBackoffSeconds: 2\npodMaxBackoffSeconds: 20\nprofiles:\n- schedulerName: default-scheduler\n",
			check: func(t *testing.T, s Settings) {
				if s.PercentageOfNodesToScore != 30 || s.Parallelism != 4 || s.InitialBackoff != 2*time.Second || s.MaxBackoff != 20*time.Second {
					t.Errorf("settings %+v", s)
				}
				want := algorithm.DefaultProfile()
				if p := s.Profiles[0]; !slices.Equal(p.Filters, want.Filters) || !slices.Equal(p.Scores, want.Scores) || !p.Preemption {
					t.Errorf("profile %+v, want the default", p)
				}
			}},
		{name: "MostAllocated with custom resource weights", yaml: head + `profiles:
- schedulerName: packer
  pluginConfig:
  - name: NodeResourcesFit
    args:
      apiVersion: kubescheduler.config.k8s.io/v1
      kind: NodeResourcesFitArgs
      scoringStrategy:
        type: MostAllocated
        resources: [{name: cpu, weight: 3}, {name: memory, weight: 1}]
`, check: func(t *testing.T, s Settings) {
			p := s.Profiles[0]
			if p.SchedulerName != "packer" || p.FitStrategy != algorithm.MostAllocated || len(p.FitResources) != 2 || p.FitResources[0].Weight != 3 {
				t.Errorf("profile %+v", p)
			}
		}},
		{name: "score weights, '*' disabling all filters but two, preemption off", yaml: head + `profiles:
- plugins:
    multiPoint:
      disabled: [{name: DefaultPreemption}]
    filter:
      disabled: [{name: "*"}]
      enabled: [{name: NodeResourcesFit}, {name: TaintToleration}]
    score:
      disabled: [{name: ImageLocality}, {name: NodeResourcesBalancedAllocation}]
      enabled: [{name: NodeResourcesFit, weight: 5}]
`, check: func(t *testing.T, s Settings) {
			p := s.Profiles[0]
			if !slices.Equal(p.Filters, []string{algorithm.NodeResourcesFit, algorithm.TaintToleration}) || p.Preemption {
				t.Errorf("filters %v preemption %v", p.Filters, p.Preemption)
			}
			if w := weights(p); len(w) != 5 || w[algorithm.NodeResourcesFit] != 5 || w[algorithm.TaintToleration] != 3 {
				t.Errorf("scores %v", w)
			}
		}},
		{name: "multiPoint '*' then a single score plugin keeps its default weight", yaml: head + `profiles:
- plugins:
    multiPoint:
      disabled: [{name: "*"}]
      enabled: [{name: NodeResourcesFit}, {name: TaintToleration}]
`, check: func(t *testing.T, s Settings) {
			p := s.Profiles[0]
			if w := weights(p); len(w) != 2 || w[algorithm.TaintToleration] != 3 || w[algorithm.NodeResourcesFit] != 1 {
				t.Errorf("scores %v", w)
			}
			if !slices.Equal(p.Filters, []string{algorithm.NodeResourcesFit, algorithm.TaintToleration}) || p.Preemption {
				t.Errorf("filters %v preemption %v", p.Filters, p.Preemption)
			}
		}},
		{name: "PodTopologySpread List defaults", yaml: head + `profiles:
- pluginConfig:
  - name: PodTopologySpread
    args:
      defaultingType: List
      defaultConstraints:
      - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule}
`, check: func(t *testing.T, s Settings) {
			p := s.Profiles[0]
			if p.SpreadDefaulting != algorithm.ListDefaulting || len(p.DefaultSpreadConstraints) != 1 || p.DefaultSpreadConstraints[0].MaxSkew != 1 {
				t.Errorf("profile %+v", p)
			}
		}},
		{name: "PodTopologySpread System defaults with constraints", yaml: head + "profiles:\n- pluginConfig:\n  - name: PodTopologySpread\n    args: {defaultConstraints: [{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: DoNotSchedule}]}\n", wantErr: "need defaultingType List"},
		{name: "disabling an upstream plugin skiff lacks is fine", yaml: head + "profiles:\n- plugins:\n    multiPoint:\n      disabled: [{name: VolumeBinding}]\n"},
		{name: "unknown top-level field", yaml: head + "percentageOfNodesToScor: 30\n", wantErr: `unknown field "percentageOfNodesToScor"`},
		{name: "unknown field in plugin args", yaml: head + "profiles:\n- pluginConfig:\n  - name: NodeResourcesFit\n    args: {scoringStrategy: {typ: MostAllocated}}\n", wantErr: `unknown field "typ"`},
		{name: "unknown scoring strategy", yaml: head + "profiles:\n- pluginConfig:\n  - name: NodeResourcesFit\n    args: {scoringStrategy: {type: RequestedToCapacityRatio}}\n", wantErr: "is not LeastAllocated or MostAllocated"},
		{name: "unknown plugin", yaml: head + "profiles:\n- plugins:\n    score:\n      enabled: [{name: NodeNumber}]\n", wantErr: `unknown plugin "NodeNumber"`},
		{name: "filter plugin enabled as score", yaml: head + "profiles:\n- plugins:\n    score:\n      enabled: [{name: NodePorts}]\n", wantErr: `"NodePorts" is not a score plugin`},
		{name: "unimplemented plugin enabled", yaml: head + "profiles:\n- plugins:\n    filter:\n      enabled: [{name: VolumeBinding}]\n", wantErr: "not implemented"},
		{name: "weight out of range", yaml: head + "profiles:\n- plugins:\n    score:\n      enabled: [{name: ImageLocality, weight: 1000}]\n", wantErr: "must be in 1..100"},
		{name: "duplicate profile", yaml: head + "profiles:\n- schedulerName: a\n- schedulerName: a\n", wantErr: `duplicate schedulerName "a"`},
		{name: "wrong kind", yaml: "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeProxyConfiguration\n", wantErr: "want kubescheduler.config.k8s.io/v1 KubeSchedulerConfiguration"},
		{name: "percentage out of range", yaml: head + "percentageOfNodesToScore: 120\n", wantErr: "must be in 0..100"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := ParseConfig([]byte(tt.yaml))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tt.check != nil {
				tt.check(t, s)
			}
		})
	}
}

func TestLoadConfig_NamesTheFileInErrors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sched.yaml")
	if err := os.WriteFile(path, []byte("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nbogus: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := LoadConfig(path)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), `unknown field "bogus"`) {
		t.Errorf("err = %v", err)
	}
}
