package algorithm

import (
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
)

// The plugins, named as upstream names them in configuration.
const (
	NodeUnschedulable               = "NodeUnschedulable"
	NodeName                        = "NodeName"
	TaintToleration                 = "TaintToleration"
	NodeAffinity                    = "NodeAffinity"
	NodePorts                       = "NodePorts"
	NodeResourcesFit                = "NodeResourcesFit"
	PodTopologySpread               = "PodTopologySpread"
	InterPodAffinity                = "InterPodAffinity"
	NodeResourcesBalancedAllocation = "NodeResourcesBalancedAllocation"
	ImageLocality                   = "ImageLocality"
	DefaultPreemption               = "DefaultPreemption"
)

// DefaultSchedulerName is the profile pods get when they name none.
const DefaultSchedulerName = v1.DefaultSchedulerName

// MaxNodeScore is what each score plugin gives its best node.
const MaxNodeScore int64 = 100

// ScoringStrategy says how NodeResourcesFit scores.
type ScoringStrategy string

const (
	// LeastAllocated favours emptier nodes (spreading).
	LeastAllocated ScoringStrategy = "LeastAllocated"
	// MostAllocated favours fuller nodes (bin packing).
	MostAllocated ScoringStrategy = "MostAllocated"
)

// SpreadDefaulting says which topology spread constraints pods without
// any of their own get.
type SpreadDefaulting string

const (
	// SystemDefaulting spreads pods of one Service, ReplicaSet,
	// StatefulSet or ReplicationController over hosts (maxSkew 3) and
	// zones (maxSkew 5), ScheduleAnyway; nodes missing a zone label still
	// count.
	SystemDefaulting SpreadDefaulting = "System"
	// ListDefaulting uses Profile.DefaultSpreadConstraints.
	ListDefaulting SpreadDefaulting = "List"
)

// SystemDefaultSpreadConstraints are upstream's system defaults.
func SystemDefaultSpreadConstraints() []v1.TopologySpreadConstraint {
	return []v1.TopologySpreadConstraint{
		{MaxSkew: 3, TopologyKey: v1.LabelHostname, WhenUnsatisfiable: v1.ScheduleAnyway},
		{MaxSkew: 5, TopologyKey: v1.LabelTopologyZone, WhenUnsatisfiable: v1.ScheduleAnyway},
	}
}

// ResourceWeight weighs one resource in a resource score.
type ResourceWeight struct {
	Name   v1.ResourceName
	Weight int64
}

// Plugin is an enabled score plugin and its weight.
type Plugin struct {
	Name   string
	Weight int64
}

// Profile is one scheduler profile: which plugins run and how.
type Profile struct {
	SchedulerName string
	// Filters run in this order; a node fails at the first one rejecting
	// it.
	Filters []string
	Scores  []Plugin
	// Preemption enables DefaultPreemption.
	Preemption bool

	FitStrategy           ScoringStrategy
	FitResources          []ResourceWeight
	IgnoredResources      []string
	IgnoredResourceGroups []string
	BalancedResources     []ResourceWeight
	// HardPodAffinityWeight is what an existing pod's required affinity
	// to the incoming pod adds to InterPodAffinity's score (default 1).
	HardPodAffinityWeight int32
	// ImageLocalityPresence scores the share of the pod's images present
	// on the node instead of upstream's size- and spread-scaled sum.
	ImageLocalityPresence bool
	// PercentageOfNodesToScore overrides the scheduler-wide setting.
	PercentageOfNodesToScore *int32
	// SpreadDefaulting and DefaultSpreadConstraints (List only, without
	// label selectors: the pod's Services and controller select) are
	// PodTopologySpread's defaults for pods without constraints.
	SpreadDefaulting         SpreadDefaulting
	DefaultSpreadConstraints []v1.TopologySpreadConstraint
}

// FilterPlugins are the filters in upstream's default order.
var FilterPlugins = []string{NodeUnschedulable, NodeName, TaintToleration, NodeAffinity, NodePorts, NodeResourcesFit, PodTopologySpread, InterPodAffinity}

// DefaultScores are upstream's default score plugins and weights.
var DefaultScores = []Plugin{
	{TaintToleration, 3},
	{NodeAffinity, 2},
	{NodeResourcesFit, 1},
	{PodTopologySpread, 2},
	{InterPodAffinity, 2},
	{NodeResourcesBalancedAllocation, 1},
	{ImageLocality, 1},
}

// ScorePlugins are the names of the score plugins.
func ScorePlugins() []string {
	out := make([]string, len(DefaultScores))
	for i, p := range DefaultScores {
		out[i] = p.Name
	}
	return out
}

// DefaultResources are cpu and memory, weight 1 each.
func DefaultResources() []ResourceWeight {
	return []ResourceWeight{{v1.ResourceCPU, 1}, {v1.ResourceMemory, 1}}
}

// DefaultProfile is upstream's default-scheduler profile.
func DefaultProfile() Profile {
	return Profile{
		SchedulerName:         DefaultSchedulerName,
		Filters:               slices.Clone(FilterPlugins),
		Scores:                slices.Clone(DefaultScores),
		Preemption:            true,
		FitStrategy:           LeastAllocated,
		FitResources:          DefaultResources(),
		BalancedResources:     DefaultResources(),
		HardPodAffinityWeight: 1,
		SpreadDefaulting:      SystemDefaulting,
	}
}

// Validate checks names and weights.
func (p *Profile) Validate() error {
	if p.SchedulerName == "" {
		return fmt.Errorf("profile has no schedulerName")
	}
	for _, f := range p.Filters {
		if !slices.Contains(FilterPlugins, f) {
			return fmt.Errorf("profile %q: %q is not a filter plugin", p.SchedulerName, f)
		}
	}
	for _, s := range p.Scores {
		if !slices.Contains(ScorePlugins(), s.Name) {
			return fmt.Errorf("profile %q: %q is not a score plugin", p.SchedulerName, s.Name)
		}
		if s.Weight < 1 || s.Weight > 100 {
			return fmt.Errorf("profile %q: weight of %s must be in 1..100, not %d", p.SchedulerName, s.Name, s.Weight)
		}
	}
	switch p.FitStrategy {
	case LeastAllocated, MostAllocated:
	default:
		return fmt.Errorf("profile %q: NodeResourcesFit scoringStrategy.type %q is not LeastAllocated or MostAllocated", p.SchedulerName, p.FitStrategy)
	}
	for _, rw := range append(slices.Clone(p.FitResources), p.BalancedResources...) {
		if rw.Weight < 1 || rw.Weight > 100 {
			return fmt.Errorf("profile %q: resource %s weight must be in 1..100, not %d", p.SchedulerName, rw.Name, rw.Weight)
		}
	}
	if v := p.PercentageOfNodesToScore; v != nil && (*v < 0 || *v > 100) {
		return fmt.Errorf("profile %q: percentageOfNodesToScore must be in 0..100, not %d", p.SchedulerName, *v)
	}
	switch p.SpreadDefaulting {
	case SystemDefaulting:
		if len(p.DefaultSpreadConstraints) > 0 {
			return fmt.Errorf("profile %q: PodTopologySpread defaultConstraints need defaultingType List", p.SchedulerName)
		}
	case ListDefaulting:
		for _, c := range p.DefaultSpreadConstraints {
			if c.LabelSelector != nil || c.MaxSkew < 1 || c.TopologyKey == "" || (c.WhenUnsatisfiable != v1.DoNotSchedule && c.WhenUnsatisfiable != v1.ScheduleAnyway) {
				return fmt.Errorf("profile %q: PodTopologySpread default constraint %+v needs maxSkew ≥ 1, a topologyKey, whenUnsatisfiable DoNotSchedule or ScheduleAnyway and no labelSelector", p.SchedulerName, c)
			}
		}
	default:
		return fmt.Errorf("profile %q: PodTopologySpread defaultingType %q is not System or List", p.SchedulerName, p.SpreadDefaulting)
	}
	if p.HardPodAffinityWeight < 0 || p.HardPodAffinityWeight > 100 {
		return fmt.Errorf("profile %q: hardPodAffinityWeight must be in 0..100, not %d", p.SchedulerName, p.HardPodAffinityWeight)
	}
	return nil
}
