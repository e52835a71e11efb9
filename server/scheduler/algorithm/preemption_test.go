package algorithm

import (
	"errors"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// preempt schedules pod (which must not fit) and runs preemption.
func preempt(t *testing.T, pod *v1.Pod, nodes []*v1.Node, placed []*v1.Pod, pdbs ...*policyv1.PodDisruptionBudget) *Preemption {
	t.Helper()
	a := algorithmFor(t, DefaultProfile())
	st := NewSnapshot(nodes, placed)
	_, err := a.Schedule(pod, st)
	var fe *FitError
	if !errors.As(err, &fe) {
		t.Fatalf("Schedule: %v, want a FitError", err)
	}
	return a.Preempt(pod, st, &fe.Diagnosis, pdbs)
}

func victimNames(p *Preemption) []string {
	var out []string
	for _, v := range p.Victims {
		out = append(out, v.Name)
	}
	return out
}

func started(ago time.Duration) podOpt {
	return func(p *v1.Pod) { t := metav1.NewTime(time.Now().Add(-ago)); p.Status.StartTime = &t }
}

func TestPreempt_PicksTheNodeWithTheLeastImportantVictims(t *testing.T) {
	nodes := []*v1.Node{mkNode("a", "2", "8Gi"), mkNode("b", "2", "8Gi")}
	placed := []*v1.Pod{
		mkPod("a-low", on("a"), req("1", ""), priority(1)),
		mkPod("a-mid", on("a"), req("1", ""), priority(5)),
		mkPod("b-mid1", on("b"), req("1", ""), priority(5)),
		mkPod("b-mid2", on("b"), req("1", ""), priority(5)),
	}
	p := preempt(t, mkPod("p", req("1", ""), priority(10)), nodes, placed)
	if p.Node == "" {
		t.Fatalf("no preemption: %s", p.Message)
	}
	if got := victimNames(p); p.Node != "a" || len(got) != 1 || got[0] != "a-low" {
		t.Errorf("got node %s victims %v, want node a victim [a-low]", p.Node, got)
	}
}

func TestPreempt_EvictsOnlyAsManyAsNeededStartingWithTheLeastImportant(t *testing.T) {
	nodes := []*v1.Node{mkNode("a", "4", "8Gi")}
	placed := []*v1.Pod{
		mkPod("old", on("a"), req("1", ""), priority(1), started(time.Hour)),
		mkPod("young", on("a"), req("1", ""), priority(1), started(time.Minute)),
		mkPod("mid", on("a"), req("1", ""), priority(3)),
		mkPod("high", on("a"), req("1", ""), priority(100)),
	}
	p := preempt(t, mkPod("p", req("2", ""), priority(10)), nodes, placed)
	if p.Node == "" {
		t.Fatalf("no preemption: %s", p.Message)
	}
	// With all three lower pods gone 1 cpu is used. Putting them back most
	// important first: mid fits (2 + 2 ≤ 4), then old (older, so more
	// important than young) does not, nor young.
	if got := victimNames(p); len(got) != 2 || got[0] != "old" || got[1] != "young" {
		t.Errorf("victims %v, want [old young]", got)
	}
}

func TestPreempt_PrefersNodesWhoseVictimsNoBudgetProtects(t *testing.T) {
	nodes := []*v1.Node{mkNode("a", "1", "8Gi"), mkNode("b", "1", "8Gi")}
	placed := []*v1.Pod{
		mkPod("guarded", on("a"), req("1", ""), priority(1), podLabels("app", "db")),
		mkPod("free", on("b"), req("1", ""), priority(2), podLabels("app", "web")),
	}
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "default"}, Spec: policyv1.PodDisruptionBudgetSpec{Selector: selector("app", "db")}}
	p := preempt(t, mkPod("p", req("1", ""), priority(10)), nodes, placed, pdb)
	if p.Node == "" {
		t.Fatalf("no preemption: %s", p.Message)
	}
	if p.Node != "b" || p.PDBViolations != 0 {
		t.Errorf("got node %s with %d violations, want b with 0", p.Node, p.PDBViolations)
	}
	// Without a budget the lower-priority victim on a wins.
	if p := preempt(t, mkPod("p", req("1", ""), priority(10)), nodes, placed); p.Node != "a" {
		t.Errorf("without budget got %v, want node a", p)
	}
}

func TestPreempt_Refusals(t *testing.T) {
	never := v1.PreemptNever
	nodes := []*v1.Node{mkNode("a", "1", "8Gi"), mkNode("b", "1", "8Gi", taints(v1.Taint{Key: "k", Effect: v1.TaintEffectNoSchedule}))}
	now := metav1.Now()
	tests := []struct {
		name       string
		pod        *v1.Pod
		placed     []*v1.Pod
		want       string
		ineligible bool
	}{
		{"preemptionPolicy Never", mkPod("p", req("1", ""), priority(10), func(p *v1.Pod) { p.Spec.PreemptionPolicy = &never }),
			[]*v1.Pod{mkPod("low", on("a"), req("1", ""), priority(1))},
			"preemption: not eligible due to preemptionPolicy=Never.", true},
		{"only pods of equal or higher priority", mkPod("p", req("1", ""), priority(10)),
			[]*v1.Pod{mkPod("same", on("a"), req("1", ""), priority(10))},
			"preemption: 0/2 nodes are available: 1 No preemption victims found for incoming pod, 1 Preemption is not helpful for scheduling.", false},
		{"still waiting for a victim on the nominated node", mkPod("p", req("1", ""), priority(10), func(p *v1.Pod) { p.Status.NominatedNodeName = "a" }),
			[]*v1.Pod{mkPod("low", on("a"), req("1", ""), priority(1), func(p *v1.Pod) { p.DeletionTimestamp = &now })},
			"preemption: not eligible due to a terminating pod on the nominated node.", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := preempt(t, tt.pod, nodes, tt.placed)
			if p.Node != "" || p.Message != tt.want || p.Ineligible != tt.ineligible {
				t.Errorf("got node %q, %q, ineligible %v; want none, %q, %v", p.Node, p.Message, p.Ineligible, tt.want, tt.ineligible)
			}
		})
	}
}

func TestPreempt_AntiAffinityVictim(t *testing.T) {
	nodes := []*v1.Node{mkNode("a", "4", "8Gi")}
	placed := []*v1.Pod{mkPod("rival", on("a"), podLabels("app", "rival"), priority(1)), mkPod("bystander", on("a"), priority(1))}
	pod := mkPod("p", priority(10), affinity(&v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{podAffinityTerm(v1.LabelHostname, selector("app", "rival"))}}}))
	p := preempt(t, pod, nodes, placed)
	if p.Node == "" {
		t.Fatalf("no preemption: %s", p.Message)
	}
	if got := victimNames(p); len(got) != 1 || got[0] != "rival" {
		t.Errorf("victims %v, want [rival]", got)
	}
}

// The conformance PreemptionExecutionPath case: the node advertises 1000
// of an extended resource, three lower pods hold 950 and the preemptor
// asks 500. Putting victims back most important first keeps the 450 pod;
// the 300 and 200 pods go.
func TestPreempt_ExtendedResource_EvictsLeastImportantUntilItFits(t *testing.T) {
	const fake v1.ResourceName = "example.com/fakecpu"
	extended := func(q string) podOpt {
		return func(p *v1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "c", Image: "app", Resources: v1.ResourceRequirements{
				Requests: v1.ResourceList{fake: resource.MustParse(q)}, Limits: v1.ResourceList{fake: resource.MustParse(q)}}})
		}
	}
	node := mkNode("a", "4", "8Gi", func(n *v1.Node) { n.Status.Allocatable[fake] = resource.MustParse("1000") })
	placed := []*v1.Pod{
		mkPod("p1", on("a"), extended("200"), priority(1)),
		mkPod("p2", on("a"), extended("300"), priority(2)),
		mkPod("p3", on("a"), extended("450"), priority(3)),
	}
	p := preempt(t, mkPod("p4", extended("500"), priority(4)), []*v1.Node{node}, placed)
	if p.Node != "a" {
		t.Fatalf("preemption node %q: %s", p.Node, p.Message)
	}
	got := victimNames(p)
	slices.Sort(got)
	if !slices.Equal(got, []string{"p1", "p2"}) {
		t.Errorf("victims %v, want [p1 p2]", got)
	}
}
