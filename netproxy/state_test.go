package netproxy

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"skiff/netproxy/nft"
)

// world is the API state at one step of a scenario.
type world struct {
	svcs   []*corev1.Service
	slices []*discoveryv1.EndpointSlice
}

func (w world) source() *staticSource { return newSource(w.svcs, w.slices...) }

func (w world) keys() []string {
	var keys []string
	for _, s := range w.svcs {
		keys = append(keys, s.Namespace+"/"+s.Name)
	}
	slices.Sort(keys)
	return keys
}

// scenario walks Services through endpoint removals, policy and affinity
// changes, type changes and deletions; their endpoint maps come and go
// (a chain with one endpoint has none, the local chain gets one with two
// local endpoints).
func scenario() []world {
	web, webSl := clusterIPTwoNodes()
	sticky, stickySl := clientIPAffinity()
	lb, lbSl := loadBalancerLocal()
	udp, udpSl := udpNamedPorts()

	webOne := webSl.DeepCopy()
	webOne.Endpoints = webOne.Endpoints[:1]
	sticky300 := sticky.DeepCopy()
	sticky300.Spec.SessionAffinityConfig.ClientIP.TimeoutSeconds = ptr(int32(300))
	lbTwoLocal := lbSl.DeepCopy()
	lbTwoLocal.Endpoints = append(lbTwoLocal.Endpoints, ep("10.42.1.9", "node-a", ready))
	lbTerminating := lbSl.DeepCopy()
	lbTerminating.Endpoints[0] = ep("10.42.1.8", "node-a", terminating)

	webNone := webSl.DeepCopy()
	webNone.Endpoints = nil
	stickyOff := sticky.DeepCopy()
	stickyOff.Spec.SessionAffinity = corev1.ServiceAffinityNone
	lbRemote := lbSl.DeepCopy()
	lbRemote.Endpoints = lbRemote.Endpoints[1:]

	lbCluster := lb.DeepCopy()
	lbCluster.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster

	udpLocal := udp.DeepCopy()
	udpLocal.Spec.InternalTrafficPolicy = ptr(corev1.ServiceInternalTrafficPolicyLocal)
	udpRemote := udpSl.DeepCopy()
	udpRemote.Endpoints = udpRemote.Endpoints[1:]

	return []world{
		{svcs: []*corev1.Service{web, sticky, lb}, slices: []*discoveryv1.EndpointSlice{webSl, stickySl, lbSl}},
		{svcs: []*corev1.Service{web, sticky, lb}, slices: []*discoveryv1.EndpointSlice{webSl, stickySl, lbTwoLocal}},
		{svcs: []*corev1.Service{web, sticky300, lb}, slices: []*discoveryv1.EndpointSlice{webOne, stickySl, lbTerminating}},
		{svcs: []*corev1.Service{web, stickyOff, lb}, slices: []*discoveryv1.EndpointSlice{webNone, stickySl, lbRemote}},
		{svcs: []*corev1.Service{sticky, lbCluster, udp}, slices: []*discoveryv1.EndpointSlice{stickySl, lbRemote, udpSl}},
		{svcs: []*corev1.Service{udpLocal}, slices: []*discoveryv1.EndpointSlice{udpRemote}},
		{},
	}
}

// fullSyncDump is the table a full sync of w writes into an empty kernel.
func fullSyncDump(t *testing.T, w world) string {
	t.Helper()
	k := newSimKernel()
	tb := newTable(v4(), "skiff")
	pl := tb.planFull(w.keys(), w.source().get, testOpts(), nil, nil, quietLog())
	if err := k.Apply(pl.tx); err != nil {
		t.Fatalf("full sync refused: %v", err)
	}
	return k.dump(tb.name)
}

func TestIncremental_ScenarioSteps_KernelAcceptsAndEndsLikeFullSync(t *testing.T) {
	k := newSimKernel()
	tb := newTable(v4(), "skiff")
	var prev world
	steps := scenario()
	pl := tb.planFull(nil, prev.source().get, testOpts(), nil, nil, quietLog())
	if err := k.Apply(pl.tx); err != nil {
		t.Fatalf("empty full sync refused: %v", err)
	}
	tb.commit(pl)
	for i, w := range steps {
		keys := append(prev.keys(), w.keys()...)
		pl := tb.planIncremental(keys, w.source().get, testOpts(), quietLog())
		if pl == nil {
			t.Fatalf("step %d: no batch", i)
		}
		if err := k.Apply(pl.tx); err != nil {
			t.Fatalf("step %d: batch refused: %v\n%s", i, err, pl.tx)
		}
		tb.commit(pl)
		want := fullSyncDump(t, w)
		if got := k.dump(tb.name); got != want {
			t.Errorf("step %d: incremental result differs from a full sync:\n%s", i, lineDiff(want, got))
		}
		// A full resync over the incremental result changes nothing and
		// leaves no stray object.
		chains, sets, _ := k.Existing(tb.name)
		full := tb.planFull(w.keys(), w.source().get, testOpts(), chains, sets, quietLog())
		if err := k.Apply(full.tx); err != nil {
			t.Fatalf("step %d: full resync refused: %v", i, err)
		}
		tb.commit(full)
		if got := k.dump(tb.name); got != want {
			t.Errorf("step %d: full resync changed the table:\n%s", i, lineDiff(want, got))
		}
		wantCount := countDump(want)
		if tb.count != wantCount {
			t.Errorf("step %d: installed count %+v, kernel has %+v", i, tb.count, wantCount)
		}
		prev = w
	}
}

// countDump counts the chains, rules and map elements of a dump (affinity
// sets have no elements in the simulator).
func countDump(d string) objectCount {
	var c objectCount
	inSet := false
	for _, l := range strings.Split(d, "\n") {
		switch {
		case strings.HasPrefix(l, "chain "):
			c.chains++
			inSet = false
		case strings.HasPrefix(l, "set "):
			inSet = true
		case strings.HasPrefix(l, "  ") && inSet:
			c.elements++
		case strings.HasPrefix(l, "  "):
			c.rules++
		}
	}
	return c
}

func TestIncremental_UnchangedService_NoBatch(t *testing.T) {
	svc, sl := clusterIPTwoNodes()
	tb := installed(t, svc, sl)
	relabelled := svc.DeepCopy()
	relabelled.Labels = map[string]string{"tier": "front"}
	if pl := tb.planIncremental([]string{"default/web"}, newSource([]*corev1.Service{relabelled}, sl).get, testOpts(), quietLog()); pl != nil {
		t.Errorf("batch for an unchanged service:\n%s", pl.tx)
	}
}

func TestSync_DuplicateExternalIP_OnlyFirstServiceOwnsIt(t *testing.T) {
	a, aSl := nodePortCluster()
	a.Spec.ExternalIPs = []string{"198.51.100.9"}
	b := service("default", "other", "10.43.0.26", svcPort("", "", 8000, 8000))
	b.Spec.ExternalIPs = []string{"198.51.100.9"}
	bSl := endpointSlice("default", "other", "other-1", slicePorts(b.Spec.Ports[0]), ep("10.42.1.31", "node-a", ready))
	w := world{svcs: []*corev1.Service{a, b}, slices: []*discoveryv1.EndpointSlice{aSl, bSl}}

	for _, full := range []bool{false, true} {
		k := newSimKernel()
		tb := newTable(v4(), "skiff")
		if err := k.Apply(tb.planFull(nil, world{}.source().get, testOpts(), nil, nil, quietLog()).tx); err != nil {
			t.Fatal(err)
		}
		var pl *plan
		if full {
			pl = tb.planFull(w.keys(), w.source().get, testOpts(), nil, nil, quietLog())
		} else {
			pl = tb.planIncremental(w.keys(), w.source().get, testOpts(), quietLog())
		}
		if err := k.Apply(pl.tx); err != nil {
			t.Fatalf("full=%t: batch refused: %v\n%s", full, err, pl.tx)
		}
		tb.commit(pl)
		d := k.dump(tb.name)
		if !strings.Contains(d, "198.51.100.9 . tcp . 8000 : goto external-L54OOY4A-default/np/tcp/") {
			t.Errorf("full=%t: the first service (by id) does not own the shared address:\n%s", full, d)
		}
		if got := tb.owners[elemKey{addr: addr16("198.51.100.9"), proto: nft.TCP, port: 8000}]; got != "default/np/tcp/" {
			t.Errorf("full=%t: owner %q, want default/np/tcp/", full, got)
		}
	}
}

func addr16(s string) [16]byte {
	var a [16]byte
	copy(a[:], v4().parse(s).To16())
	return a
}
