package algorithm

import (
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

// Code says whether a node can take a pod and, if not, whether evicting
// pods from it could change that.
type Code int

const (
	Success Code = iota
	// Unschedulable: preemption might make room.
	Unschedulable
	// UnschedulableAndUnresolvable: no eviction helps (a taint, a label).
	UnschedulableAndUnresolvable
	// Error: the plugin could not decide.
	Error
)

// Status is one plugin's verdict on one node.
type Status struct {
	Code    Code
	Reasons []string
	// Plugin names who rejected the node, for requeueing on the events
	// that could change its mind.
	Plugin string
}

func newStatus(code Code, plugin string, reasons ...string) *Status {
	return &Status{Code: code, Plugin: plugin, Reasons: reasons}
}

// IsSuccess reports whether s is nil or Success.
func (s *Status) IsSuccess() bool { return s == nil || s.Code == Success }

// Message joins the reasons.
func (s *Status) Message() string {
	if s == nil {
		return ""
	}
	return strings.Join(s.Reasons, ", ")
}

// Diagnosis records why each node was rejected.
type Diagnosis struct {
	// NodeToStatus has the verdict of every node that was evaluated.
	NodeToStatus map[string]*Status
	// AbsentStatus, when set, applies to nodes missing from NodeToStatus
	// (those a pre-filter ruled out without evaluating them).
	AbsentStatus *Status
	// UnschedulablePlugins rejected at least one node.
	UnschedulablePlugins sets.Set[string]
	// PreFilterMsg is set when the pod was rejected before any node was
	// looked at; PostFilterMsg is what preemption had to say.
	PreFilterMsg  string
	PostFilterMsg string
}

func (d *Diagnosis) set(node string, s *Status) {
	if d.NodeToStatus == nil {
		d.NodeToStatus = map[string]*Status{}
	}
	d.NodeToStatus[node] = s
	if s.Plugin != "" {
		if d.UnschedulablePlugins == nil {
			d.UnschedulablePlugins = sets.New[string]()
		}
		d.UnschedulablePlugins.Insert(s.Plugin)
	}
}

// statusOf is the verdict on node, counting absent nodes.
func (d *Diagnosis) statusOf(node string) *Status {
	if s, ok := d.NodeToStatus[node]; ok {
		return s
	}
	return d.AbsentStatus
}

// FitError is the answer when no node can take the pod.
type FitError struct {
	Pod         *v1.Pod
	NumAllNodes int
	Diagnosis   Diagnosis
}

// Error is upstream's message: "0/3 nodes are available: 1 Insufficient
// cpu, 2 node(s) had untolerated taint {k: v}. preemption: ...".
func (f *FitError) Error() string {
	if f.NumAllNodes == 0 && f.Diagnosis.PreFilterMsg == "" {
		return "no nodes available to schedule pods"
	}
	msg := fmt.Sprintf("0/%d nodes are available:", f.NumAllNodes)
	if pre := f.Diagnosis.PreFilterMsg; pre != "" {
		msg += " " + pre + "."
	} else if h := histogram(&f.Diagnosis, f.NumAllNodes); h != "" {
		msg += " " + h + "."
	}
	if post := strings.TrimSuffix(f.Diagnosis.PostFilterMsg, "."); post != "" {
		msg += " " + post + "."
	}
	return msg
}

// histogram counts nodes per reason, sorted as upstream sorts them (as
// strings, count first).
func histogram(d *Diagnosis, numAll int) string {
	counts := map[string]int{}
	for _, s := range d.NodeToStatus {
		for _, r := range s.Reasons {
			counts[r]++
		}
	}
	if absent := numAll - len(d.NodeToStatus); absent > 0 && d.AbsentStatus != nil {
		for _, r := range d.AbsentStatus.Reasons {
			counts[r] += absent
		}
	}
	parts := make([]string, 0, len(counts))
	for r, n := range counts {
		parts = append(parts, fmt.Sprintf("%d %s", n, r))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}
