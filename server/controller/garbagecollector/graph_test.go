package garbagecollector

import (
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Objects of the graph tests: UIDs are the names, so that tests read.
func rs(ns, name string) objectRef {
	return objectRef{APIVersion: "apps/v1", Kind: "ReplicaSet", Namespace: ns, Name: name, UID: types.UID(name)}
}

func pod(ns, name string) objectRef {
	return objectRef{APIVersion: "v1", Kind: "Pod", Namespace: ns, Name: name, UID: types.UID(name)}
}

func clusterNode(name string) objectRef {
	return objectRef{APIVersion: "v1", Kind: "Node", Name: name, UID: types.UID(name)}
}

func ownedBy(r objectRef, block bool) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: r.APIVersion, Kind: r.Kind, Name: r.Name, UID: r.UID, BlockOwnerDeletion: &block}
}

func nd(r objectRef, owners ...metav1.OwnerReference) *node {
	return &node{ref: r, owners: owners}
}

func fg(n *node) *node { n.deleting, n.foreground = true, true; return n }

func orphaning(n *node) *node { n.deleting, n.orphan = true, true; return n }

func sortedWork(ws []work) []string {
	out := make([]string, 0, len(ws))
	for _, w := range ws {
		out = append(out, w.String())
	}
	slices.Sort(out)
	return out
}

func TestGraphChanges(t *testing.T) {
	a, b := "a", "b"
	cases := []struct {
		name    string
		setup   []*node
		observe *node     // the change: an add or update ...
		forget  objectRef // ... or a deletion
		want    []work
	}{
		{name: "dependent of an unseen owner: verify the owner",
			observe: nd(pod(a, "p"), ownedBy(rs(a, "r"), true)),
			want:    []work{verifyWork(rs(a, "r"))}},
		{name: "dependent of a seen owner: nothing to do",
			setup:   []*node{nd(rs(a, "r"))},
			observe: nd(pod(a, "p"), ownedBy(rs(a, "r"), true))},
		{name: "owner seen after its dependent: nothing to do",
			setup:   []*node{nd(pod(a, "p"), ownedBy(rs(a, "r"), true))},
			observe: nd(rs(a, "r"))},
		{name: "owner seen under other coordinates than referenced: check the dependent",
			setup:   []*node{nd(pod(a, "p"), ownedBy(rs(a, "r"), true))},
			observe: nd(objectRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: a, Name: "r", UID: "r"}),
			want:    []work{deleteWork(pod(a, "p"))}},
		{name: "reference across namespaces to a seen owner: check the dependent",
			setup:   []*node{nd(rs(a, "r"))},
			observe: nd(pod(b, "p"), ownedBy(rs(a, "r"), true)),
			want:    []work{deleteWork(pod(b, "p"))}},
		{name: "cluster-scoped owner referenced from a namespace: fine",
			setup:   []*node{nd(clusterNode("n"))},
			observe: nd(pod(a, "p"), ownedBy(clusterNode("n"), false))},
		{name: "owner deleted: its dependents may be garbage",
			setup:  []*node{nd(rs(a, "r")), nd(pod(a, "p1"), ownedBy(rs(a, "r"), true)), nd(pod(a, "p2"), ownedBy(rs(a, "r"), false))},
			forget: rs(a, "r"),
			want:   []work{deleteWork(pod(a, "p1")), deleteWork(pod(a, "p2"))}},
		{name: "dependent deleted: a foreground owner may be done",
			setup:  []*node{fg(nd(rs(a, "r"))), nd(pod(a, "p"), ownedBy(rs(a, "r"), true))},
			forget: pod(a, "p"),
			want:   []work{deleteWork(rs(a, "r"))}},
		{name: "dependent deleted: an ordinary owner needs nothing",
			setup:  []*node{nd(rs(a, "r")), nd(pod(a, "p"), ownedBy(rs(a, "r"), true))},
			forget: pod(a, "p")},
		{name: "deleting an unknown object needs nothing",
			forget: pod(a, "nobody")},
		{name: "owner starts foreground deletion: its dependents and itself",
			setup:   []*node{nd(rs(a, "r")), nd(pod(a, "p"), ownedBy(rs(a, "r"), true))},
			observe: fg(nd(rs(a, "r"))),
			want:    []work{deleteWork(pod(a, "p")), deleteWork(rs(a, "r"))}},
		{name: "foreground deletion seen again: nothing new",
			setup:   []*node{fg(nd(rs(a, "r"))), nd(pod(a, "p"), ownedBy(rs(a, "r"), true))},
			observe: fg(nd(rs(a, "r")))},
		{name: "owner starts orphaning",
			setup:   []*node{nd(rs(a, "r")), nd(pod(a, "p"), ownedBy(rs(a, "r"), true))},
			observe: orphaning(nd(rs(a, "r"))),
			want:    []work{orphanWork(rs(a, "r"))}},
		{name: "owner first seen orphaning (restart): orphan it",
			observe: orphaning(nd(rs(a, "r"))),
			want:    []work{orphanWork(rs(a, "r"))}},
		{name: "dependent drops its reference to a foreground owner: the owner may be done",
			setup:   []*node{fg(nd(rs(a, "r"))), nd(pod(a, "p"), ownedBy(rs(a, "r"), true))},
			observe: nd(pod(a, "p")),
			want:    []work{deleteWork(rs(a, "r"))}},
		{name: "dependent stops blocking a foreground owner: the owner may be done",
			setup:   []*node{fg(nd(rs(a, "r"))), nd(pod(a, "p"), ownedBy(rs(a, "r"), true))},
			observe: nd(pod(a, "p"), ownedBy(rs(a, "r"), false)),
			want:    []work{deleteWork(rs(a, "r"))}},
		{name: "new dependent of a foreground owner goes too",
			setup:   []*node{fg(nd(rs(a, "r")))},
			observe: nd(pod(a, "p"), ownedBy(rs(a, "r"), true)),
			want:    []work{deleteWork(pod(a, "p"))}},
		{name: "unchanged update: nothing to do",
			setup:   []*node{nd(rs(a, "r")), nd(pod(a, "p"), ownedBy(rs(a, "r"), true))},
			observe: nd(pod(a, "p"), ownedBy(rs(a, "r"), true))},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := newGraph()
			for _, n := range tc.setup {
				g.observe(n)
			}
			var got []work
			if tc.observe != nil {
				got = g.observe(tc.observe)
			} else {
				got = g.forget(tc.forget)
			}
			if g, w := sortedWork(got), sortedWork(tc.want); !slices.Equal(g, w) {
				t.Errorf("work:\n got %v\nwant %v", g, w)
			}
		})
	}
}

func TestGraphQueries(t *testing.T) {
	g := newGraph()
	r := rs("a", "r")
	g.observe(nd(r))
	g.observe(nd(pod("a", "blocking"), ownedBy(r, true)))
	g.observe(fg(nd(pod("a", "blocking-fg"), ownedBy(r, true))))
	g.observe(nd(pod("a", "nonblocking"), ownedBy(r, false)))
	g.observe(nd(pod("a", "other"), ownedBy(rs("a", "x"), true)))

	var names []string
	for _, b := range g.blockers(r.UID) {
		names = append(names, b.ref.Name+map[bool]string{true: "(fg)"}[b.foreground])
	}
	slices.Sort(names)
	if want := "blocking,blocking-fg(fg)"; strings.Join(names, ",") != want {
		t.Errorf("blockers = %v, want %s", names, want)
	}
	if deps := g.dependentsOf(r.UID); len(deps) != 3 {
		t.Errorf("dependentsOf = %v, want 3", deps)
	}
	if has, fgDep := g.dependentFacts(r.UID); !has || !fgDep {
		t.Errorf("dependentFacts = %v, %v; want true, true", has, fgDep)
	}
	if has, _ := g.dependentFacts(pod("a", "other").UID); has {
		t.Error("a pod has no dependents")
	}
	// Forgetting a dependent unlinks it; forgetting the owner keeps the
	// index of who references it (they still do).
	g.forget(pod("a", "blocking"))
	g.forget(r)
	if deps := g.dependentsOf(r.UID); len(deps) != 2 {
		t.Errorf("after forgetting: dependentsOf = %v, want 2", deps)
	}
	if _, ok := g.get(r.UID); ok {
		t.Error("forgotten owner still in the graph")
	}
	if g.size() != 3 {
		t.Errorf("size = %d, want 3", g.size())
	}
}

func TestDiffOwners(t *testing.T) {
	x, y, z := ownedBy(rs("a", "x"), true), ownedBy(rs("a", "y"), false), ownedBy(rs("a", "z"), true)
	xFree := ownedBy(rs("a", "x"), false)
	added, removed, unblockedRefs := diffOwners([]metav1.OwnerReference{x, y}, []metav1.OwnerReference{xFree, z})
	uids := func(rs []metav1.OwnerReference) (out []types.UID) {
		for _, r := range rs {
			out = append(out, r.UID)
		}
		return out
	}
	if !slices.Equal(uids(added), []types.UID{"z"}) || !slices.Equal(uids(removed), []types.UID{"y"}) || !slices.Equal(uids(unblockedRefs), []types.UID{"x"}) {
		t.Errorf("added %v removed %v unblocked %v", uids(added), uids(removed), uids(unblockedRefs))
	}
}

func TestRefMatches(t *testing.T) {
	cases := []struct {
		name  string
		ref   metav1.OwnerReference
		depNS string
		owner objectRef
		want  bool
	}{
		{"same", ownedBy(rs("a", "r"), true), "a", rs("a", "r"), true},
		{"other version of the group", metav1.OwnerReference{APIVersion: "apps/v1beta2", Kind: "ReplicaSet", Name: "r", UID: "r"}, "a", rs("a", "r"), true},
		{"other group", metav1.OwnerReference{APIVersion: "extensions/v1beta1", Kind: "ReplicaSet", Name: "r", UID: "r"}, "a", rs("a", "r"), false},
		{"other kind", metav1.OwnerReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "r", UID: "r"}, "a", rs("a", "r"), false},
		{"other name", metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "s", UID: "r"}, "a", rs("a", "r"), false},
		{"other namespace", ownedBy(rs("a", "r"), true), "b", rs("a", "r"), false},
		{"cluster-scoped owner", ownedBy(clusterNode("n"), true), "b", clusterNode("n"), true},
		{"bad apiVersion", metav1.OwnerReference{APIVersion: "a/b/c", Kind: "ReplicaSet", Name: "r", UID: "r"}, "a", rs("a", "r"), false},
	}
	for _, tc := range cases {
		if got := refMatches(tc.ref, tc.depNS, tc.owner); got != tc.want {
			t.Errorf("%s: refMatches = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestNodeFor(t *testing.T) {
	now := metav1.Now()
	cases := []struct {
		name                  string
		meta                  metav1.ObjectMeta
		deleting, fg, orphans bool
	}{
		{"alive", metav1.ObjectMeta{Finalizers: []string{metav1.FinalizerDeleteDependents}}, false, false, false},
		{"foreground", metav1.ObjectMeta{DeletionTimestamp: &now, Finalizers: []string{"x", metav1.FinalizerDeleteDependents}}, true, true, false},
		{"orphan", metav1.ObjectMeta{DeletionTimestamp: &now, Finalizers: []string{metav1.FinalizerOrphanDependents}}, true, false, true},
		{"background", metav1.ObjectMeta{DeletionTimestamp: &now, Finalizers: []string{"x"}}, true, false, false},
	}
	for _, tc := range cases {
		n := nodeFor(pod("a", "p"), &tc.meta)
		if n.deleting != tc.deleting || n.foreground != tc.fg || n.orphan != tc.orphans {
			t.Errorf("%s: deleting=%v foreground=%v orphan=%v", tc.name, n.deleting, n.foreground, n.orphan)
		}
	}
}
