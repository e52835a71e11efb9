package scheduler

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"skiff/server/scheduler/algorithm"
)

// Settings are what the scheduler configuration file decides. The zero
// value is upstream's defaults: one default-scheduler profile, adaptive
// percentageOfNodesToScore, back-off 1 s to 10 s.
type Settings struct {
	// Profiles, one per schedulerName served (default: default-scheduler
	// with upstream's default plugins).
	Profiles []algorithm.Profile
	// PercentageOfNodesToScore, 0 adapting it to the cluster size.
	PercentageOfNodesToScore int32
	// Parallelism is how many goroutines filter and score (0: GOMAXPROCS,
	// at most 16).
	Parallelism int
	// InitialBackoff and MaxBackoff bound the exponential back-off of
	// pods that did not fit (default 1 s and 10 s).
	InitialBackoff, MaxBackoff time.Duration
}

// The file format: upstream's KubeSchedulerConfiguration, the fields
// skiff honours. Unknown fields are errors, so a typo is not silently a
// default.
type kubeSchedulerConfiguration struct {
	APIVersion               string          `json:"apiVersion"`
	Kind                     string          `json:"kind"`
	PercentageOfNodesToScore *int32          `json:"percentageOfNodesToScore,omitempty"`
	Parallelism              *int32          `json:"parallelism,omitempty"`
	PodInitialBackoffSeconds *int64          `json:"podInitialBackoffSeconds,omitempty"`
	PodMaxBackoffSeconds     *int64          `json:"podMaxBackoffSeconds,omitempty"`
	Profiles                 []profileConfig `json:"profiles,omitempty"`
	// Accepted so that upstream files load; skiff runs the scheduler
	// in-process under its own leader election.
	LeaderElection   json.RawMessage `json:"leaderElection,omitempty"`
	ClientConnection json.RawMessage `json:"clientConnection,omitempty"`
}

type profileConfig struct {
	SchedulerName            string         `json:"schedulerName,omitempty"`
	PercentageOfNodesToScore *int32         `json:"percentageOfNodesToScore,omitempty"`
	Plugins                  *pluginsConfig `json:"plugins,omitempty"`
	PluginConfig             []pluginConfig `json:"pluginConfig,omitempty"`
}

// pluginsConfig mirrors upstream's extension points. Only multiPoint,
// filter, score and postFilter change anything: skiff's plugins are not
// split further, so names under the other points are only checked.
type pluginsConfig struct {
	MultiPoint pluginSet `json:"multiPoint,omitempty"`
	Filter     pluginSet `json:"filter,omitempty"`
	Score      pluginSet `json:"score,omitempty"`
	PostFilter pluginSet `json:"postFilter,omitempty"`

	PreEnqueue pluginSet `json:"preEnqueue,omitempty"`
	QueueSort  pluginSet `json:"queueSort,omitempty"`
	PreFilter  pluginSet `json:"preFilter,omitempty"`
	PreScore   pluginSet `json:"preScore,omitempty"`
	Reserve    pluginSet `json:"reserve,omitempty"`
	Permit     pluginSet `json:"permit,omitempty"`
	PreBind    pluginSet `json:"preBind,omitempty"`
	Bind       pluginSet `json:"bind,omitempty"`
	PostBind   pluginSet `json:"postBind,omitempty"`
}

type pluginSet struct {
	Enabled  []pluginRef `json:"enabled,omitempty"`
	Disabled []pluginRef `json:"disabled,omitempty"`
}

type pluginRef struct {
	Name   string `json:"name"`
	Weight *int32 `json:"weight,omitempty"`
}

type pluginConfig struct {
	Name string          `json:"name"`
	Args json.RawMessage `json:"args,omitempty"`
}

type resourceSpec struct {
	Name   string `json:"name"`
	Weight int64  `json:"weight,omitempty"`
}

type fitArgs struct {
	APIVersion      string `json:"apiVersion,omitempty"`
	Kind            string `json:"kind,omitempty"`
	ScoringStrategy *struct {
		Type      string         `json:"type,omitempty"`
		Resources []resourceSpec `json:"resources,omitempty"`
	} `json:"scoringStrategy,omitempty"`
	IgnoredResources      []string `json:"ignoredResources,omitempty"`
	IgnoredResourceGroups []string `json:"ignoredResourceGroups,omitempty"`
}

type balancedArgs struct {
	APIVersion string         `json:"apiVersion,omitempty"`
	Kind       string         `json:"kind,omitempty"`
	Resources  []resourceSpec `json:"resources,omitempty"`
}

type topologySpreadArgs struct {
	APIVersion         string                        `json:"apiVersion,omitempty"`
	Kind               string                        `json:"kind,omitempty"`
	DefaultConstraints []v1.TopologySpreadConstraint `json:"defaultConstraints,omitempty"`
	DefaultingType     string                        `json:"defaultingType,omitempty"`
}

type interPodAffinityArgs struct {
	APIVersion            string `json:"apiVersion,omitempty"`
	Kind                  string `json:"kind,omitempty"`
	HardPodAffinityWeight *int32 `json:"hardPodAffinityWeight,omitempty"`
}

const (
	configAPIVersion = "kubescheduler.config.k8s.io/v1"
	configKind       = "KubeSchedulerConfiguration"
)

// notImplemented are upstream's default plugins skiff does not have (no
// volume topology, no DRA): disabling them is fine, enabling them is an
// error rather than a silent no-op.
var notImplemented = []string{"PrioritySort", "DefaultBinder", "VolumeBinding", "VolumeRestrictions", "VolumeZone", "NodeVolumeLimits", "SchedulingGates", "DynamicResources"}

// defaultMultiPoint is upstream's default profile, in its order.
var defaultMultiPoint = []algorithm.Plugin{
	{Name: algorithm.NodeUnschedulable}, {Name: algorithm.NodeName}, {Name: algorithm.TaintToleration, Weight: 3},
	{Name: algorithm.NodeAffinity, Weight: 2}, {Name: algorithm.NodePorts}, {Name: algorithm.NodeResourcesFit, Weight: 1},
	{Name: algorithm.PodTopologySpread, Weight: 2}, {Name: algorithm.InterPodAffinity, Weight: 2}, {Name: algorithm.DefaultPreemption},
	{Name: algorithm.NodeResourcesBalancedAllocation, Weight: 1}, {Name: algorithm.ImageLocality, Weight: 1},
}

// LoadConfig reads a KubeSchedulerConfiguration file; an empty path gives
// the defaults.
func LoadConfig(path string) (Settings, error) {
	if path == "" {
		return Settings{}, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return Settings{}, fmt.Errorf("scheduler config: %w", err)
	}
	s, err := ParseConfig(data)
	if err != nil {
		return Settings{}, fmt.Errorf("scheduler config %s: %w", path, err)
	}
	return s, nil
}

// ParseConfig parses the contents of a configuration file.
func ParseConfig(data []byte) (Settings, error) {
	var c kubeSchedulerConfiguration
	if err := yaml.UnmarshalStrict(data, &c); err != nil {
		return Settings{}, err
	}
	if c.APIVersion != configAPIVersion || c.Kind != configKind {
		return Settings{}, fmt.Errorf("apiVersion %q kind %q: want %s %s", c.APIVersion, c.Kind, configAPIVersion, configKind)
	}
	var s Settings
	if v := c.PercentageOfNodesToScore; v != nil {
		if *v < 0 || *v > 100 {
			return Settings{}, fmt.Errorf("percentageOfNodesToScore must be in 0..100, not %d", *v)
		}
		s.PercentageOfNodesToScore = *v
	}
	if v := c.Parallelism; v != nil {
		if *v < 1 {
			return Settings{}, fmt.Errorf("parallelism must be positive, not %d", *v)
		}
		s.Parallelism = int(*v)
	}
	if v := c.PodInitialBackoffSeconds; v != nil {
		s.InitialBackoff = time.Duration(*v) * time.Second
	}
	if v := c.PodMaxBackoffSeconds; v != nil {
		s.MaxBackoff = time.Duration(*v) * time.Second
	}
	if s.InitialBackoff < 0 || s.MaxBackoff < 0 || (s.MaxBackoff > 0 && s.InitialBackoff > s.MaxBackoff) {
		return Settings{}, fmt.Errorf("podInitialBackoffSeconds (%v) must be positive and at most podMaxBackoffSeconds (%v)", s.InitialBackoff, s.MaxBackoff)
	}
	for i, pc := range c.Profiles {
		p, err := compileProfile(pc)
		if err != nil {
			return Settings{}, fmt.Errorf("profiles[%d]: %w", i, err)
		}
		if slices.ContainsFunc(s.Profiles, func(o algorithm.Profile) bool { return o.SchedulerName == p.SchedulerName }) {
			return Settings{}, fmt.Errorf("profiles[%d]: duplicate schedulerName %q", i, p.SchedulerName)
		}
		s.Profiles = append(s.Profiles, p)
	}
	return s, nil
}

func compileProfile(pc profileConfig) (algorithm.Profile, error) {
	p := algorithm.DefaultProfile()
	if pc.SchedulerName != "" {
		p.SchedulerName = pc.SchedulerName
	}
	p.PercentageOfNodesToScore = pc.PercentageOfNodesToScore
	if pl := pc.Plugins; pl != nil {
		if err := applyPlugins(&p, pl); err != nil {
			return p, err
		}
	}
	for _, c := range pc.PluginConfig {
		if err := applyArgs(&p, c); err != nil {
			return p, fmt.Errorf("pluginConfig %s: %w", c.Name, err)
		}
	}
	return p, p.Validate()
}

func known(name string) error {
	switch {
	case name == "*", slices.Contains(algorithm.FilterPlugins, name), slices.Contains(algorithm.ScorePlugins(), name), name == algorithm.DefaultPreemption, slices.Contains(notImplemented, name):
		return nil
	}
	return fmt.Errorf("unknown plugin %q", name)
}

// applyPlugins merges the file's plugin sets into the default profile as
// upstream does: multiPoint first, then each extension point's own
// disabled ("*" for all) and enabled lists.
func applyPlugins(p *algorithm.Profile, pl *pluginsConfig) error {
	for _, set := range []pluginSet{pl.MultiPoint, pl.Filter, pl.Score, pl.PostFilter, pl.PreEnqueue, pl.QueueSort, pl.PreFilter, pl.PreScore, pl.Reserve, pl.Permit, pl.PreBind, pl.Bind, pl.PostBind} {
		for _, r := range append(slices.Clone(set.Enabled), set.Disabled...) {
			if err := known(r.Name); err != nil {
				return err
			}
		}
		for _, r := range set.Enabled {
			if slices.Contains(notImplemented, r.Name) {
				return fmt.Errorf("plugin %q is not implemented by skiff's scheduler", r.Name)
			}
		}
	}
	multi := mergeSet(defaultMultiPoint, pl.MultiPoint, nil)
	var filters, scores []algorithm.Plugin
	for _, m := range multi {
		if slices.Contains(algorithm.FilterPlugins, m.Name) {
			filters = append(filters, algorithm.Plugin{Name: m.Name})
		}
		if slices.Contains(algorithm.ScorePlugins(), m.Name) {
			scores = append(scores, m)
		}
	}
	for _, r := range pl.Filter.Enabled {
		if !slices.Contains(algorithm.FilterPlugins, r.Name) {
			return fmt.Errorf("%q is not a filter plugin", r.Name)
		}
	}
	for _, r := range pl.Score.Enabled {
		if !slices.Contains(algorithm.ScorePlugins(), r.Name) {
			return fmt.Errorf("%q is not a score plugin", r.Name)
		}
	}
	p.Filters = nil
	for _, f := range mergeSet(filters, pl.Filter, nil) {
		p.Filters = append(p.Filters, f.Name)
	}
	p.Scores = mergeSet(scores, pl.Score, multi)
	p.Preemption = slices.ContainsFunc(mergeSet(multi, pl.PostFilter, nil), func(x algorithm.Plugin) bool { return x.Name == algorithm.DefaultPreemption })
	return nil
}

// mergeSet removes the disabled plugins from base and adds (or reweighs)
// the enabled ones. A weight not given comes from fallback, then from
// upstream's defaults, then is 1.
func mergeSet(base []algorithm.Plugin, set pluginSet, fallback []algorithm.Plugin) []algorithm.Plugin {
	var out []algorithm.Plugin
	for _, b := range base {
		if !slices.ContainsFunc(set.Disabled, func(r pluginRef) bool { return r.Name == "*" || r.Name == b.Name }) {
			out = append(out, b)
		}
	}
	for _, r := range set.Enabled {
		w := weightOf(r, fallback)
		if i := slices.IndexFunc(out, func(x algorithm.Plugin) bool { return x.Name == r.Name }); i >= 0 {
			if r.Weight != nil {
				out[i].Weight = w
			}
			continue
		}
		out = append(out, algorithm.Plugin{Name: r.Name, Weight: w})
	}
	return out
}

func weightOf(r pluginRef, fallback []algorithm.Plugin) int64 {
	if r.Weight != nil && *r.Weight != 0 {
		return int64(*r.Weight)
	}
	for _, list := range [][]algorithm.Plugin{fallback, algorithm.DefaultScores} {
		if i := slices.IndexFunc(list, func(x algorithm.Plugin) bool { return x.Name == r.Name }); i >= 0 && list[i].Weight > 0 {
			return list[i].Weight
		}
	}
	return 1
}

func strictJSON(raw json.RawMessage, into any) error {
	if len(raw) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	return dec.Decode(into)
}

func resourceWeights(in []resourceSpec) []algorithm.ResourceWeight {
	out := make([]algorithm.ResourceWeight, 0, len(in))
	for _, r := range in {
		w := r.Weight
		if w == 0 {
			w = 1
		}
		out = append(out, algorithm.ResourceWeight{Name: v1.ResourceName(r.Name), Weight: w})
	}
	return out
}

func applyArgs(p *algorithm.Profile, c pluginConfig) error {
	switch c.Name {
	case algorithm.NodeResourcesFit:
		var a fitArgs
		if err := strictJSON(c.Args, &a); err != nil {
			return err
		}
		if s := a.ScoringStrategy; s != nil {
			if s.Type != "" {
				p.FitStrategy = algorithm.ScoringStrategy(s.Type)
			}
			if len(s.Resources) > 0 {
				p.FitResources = resourceWeights(s.Resources)
			}
		}
		p.IgnoredResources, p.IgnoredResourceGroups = a.IgnoredResources, a.IgnoredResourceGroups
	case algorithm.NodeResourcesBalancedAllocation:
		var a balancedArgs
		if err := strictJSON(c.Args, &a); err != nil {
			return err
		}
		if len(a.Resources) > 0 {
			p.BalancedResources = resourceWeights(a.Resources)
		}
	case algorithm.PodTopologySpread:
		var a topologySpreadArgs
		if err := strictJSON(c.Args, &a); err != nil {
			return err
		}
		if a.DefaultingType != "" {
			p.SpreadDefaulting = algorithm.SpreadDefaulting(a.DefaultingType)
		}
		p.DefaultSpreadConstraints = a.DefaultConstraints
	case algorithm.InterPodAffinity:
		var a interPodAffinityArgs
		if err := strictJSON(c.Args, &a); err != nil {
			return err
		}
		if a.HardPodAffinityWeight != nil {
			p.HardPodAffinityWeight = *a.HardPodAffinityWeight
		}
	default:
		if err := known(c.Name); err != nil {
			return err
		}
		return fmt.Errorf("arguments for %s are not supported", c.Name)
	}
	return nil
}
