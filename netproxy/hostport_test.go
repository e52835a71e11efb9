package netproxy

import (
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"skiff/netproxy/nft"
)

const testNodeIP = "192.168.88.1"

// hostPort is a HostPort of pod "default/<pod>" (UID "uid-<pod>").
func hostPort(pod string, proto corev1.Protocol, hostIP string, port uint16, podIP string, target uint16) HostPort {
	return HostPort{Pod: "default/" + pod, UID: "uid-" + pod, Protocol: proto, HostIP: net.ParseIP(hostIP),
		HostPort: port, PodIP: net.ParseIP(podIP), Port: target}
}

// e2eHostPorts are the pods of upstream's "[sig-network] HostPort"
// conformance test: one hostPort on 127.0.0.1 TCP, on the node IP TCP
// and on the node IP UDP; plus a port on every address.
func e2eHostPorts() []HostPort {
	return []HostPort{
		hostPort("pod1", corev1.ProtocolTCP, "127.0.0.1", 54323, "10.42.1.10", 8080),
		hostPort("pod2", corev1.ProtocolTCP, testNodeIP, 54323, "10.42.1.11", 8080),
		hostPort("pod3", corev1.ProtocolUDP, testNodeIP, 54323, "10.42.1.12", 8080),
		hostPort("any", "", "", 8443, "10.42.1.13", 443),
	}
}

func TestPodHostPorts(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	pod := func(hostNet bool, ports ...corev1.ContainerPort) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "p", UID: types.UID("u")},
			Spec:       corev1.PodSpec{HostNetwork: hostNet, Containers: []corev1.Container{{Name: "c", Ports: ports}}},
		}
	}
	withSidecar := pod(false)
	withSidecar.Spec.InitContainers = []corev1.Container{
		{Name: "sidecar", RestartPolicy: &always, Ports: []corev1.ContainerPort{{ContainerPort: 9000, HostPort: 9000}}},
		{Name: "init", Ports: []corev1.ContainerPort{{ContainerPort: 9001, HostPort: 9001}}},
	}
	v4, v6 := net.ParseIP("10.42.1.5"), net.ParseIP("fd00::5")
	tests := []struct {
		name string
		pod  *corev1.Pod
		ips  []net.IP
		want []string // "<hostIP>/<hostPort> -> <podIP>:<port>"
	}{
		{"HostNetwork_None", pod(true, corev1.ContainerPort{ContainerPort: 80, HostPort: 80}), []net.IP{v4}, nil},
		{"NoHostPort_None", pod(false, corev1.ContainerPort{ContainerPort: 80}), []net.IP{v4}, nil},
		{"NoPodIP_None", pod(false, corev1.ContainerPort{ContainerPort: 80, HostPort: 80}), nil, nil},
		{"UnsetHostIP_EveryFamily", pod(false, corev1.ContainerPort{ContainerPort: 80, HostPort: 8080}), []net.IP{v4, v6},
			[]string{"<nil>/8080 -> 10.42.1.5:80", "<nil>/8080 -> fd00::5:80"}},
		{"HostIPOfOneFamily_ThatFamilyOnly", pod(false, corev1.ContainerPort{ContainerPort: 80, HostPort: 8080, HostIP: "127.0.0.1"}), []net.IP{v4, v6},
			[]string{"127.0.0.1/8080 -> 10.42.1.5:80"}},
		{"SidecarPortsPublished_PlainInitNot", withSidecar, []net.IP{v4}, []string{"<nil>/9000 -> 10.42.1.5:9000"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, hp := range PodHostPorts(tc.pod, tc.ips) {
				if hp.Pod != "default/p" || hp.UID != "u" {
					t.Errorf("pod %q uid %q, want default/p u", hp.Pod, hp.UID)
				}
				got = append(got, hp.HostIP.String()+"/"+itoa(hp.HostPort)+" -> "+hp.PodIP.String()+":"+itoa(hp.Port))
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("host ports %q, want %q", got, tc.want)
			}
		})
	}
}

func itoa(p uint16) string { return strconv.Itoa(int(p)) }

func TestBuildHostPorts_SlotClaimedTwice_OneMappingStableChoice(t *testing.T) {
	old := hostPort("old", corev1.ProtocolTCP, testNodeIP, 80, "10.42.1.20", 8080)
	repl := hostPort("b-new", corev1.ProtocolTCP, testNodeIP, 80, "10.42.1.21", 8080)
	otherFamily := hostPort("v6", corev1.ProtocolTCP, "fd00::1", 80, "fd00::21", 8080)
	tb := newTable(v4(), "skiff")

	// Nothing installed: the lowest UID, whatever the order.
	for _, hps := range [][]HostPort{{old, repl, otherFamily}, {repl, old}} {
		got := buildHostPorts(hps, tb.fam, tb.hostPorts, quietLog())
		if len(got) != 1 || got[0].uid != "uid-b-new" {
			t.Fatalf("mappings %+v, want the one of uid-b-new", got)
		}
	}
	// Installed for "old": it keeps the slot while it has it.
	tb.commit(tb.planIncrementalWith(nil, newSource(nil).get, testOpts(), &[]HostPort{old}, quietLog()))
	got := buildHostPorts([]HostPort{repl, old}, tb.fam, tb.hostPorts, quietLog())
	if len(got) != 1 || got[0].uid != "uid-old" {
		t.Fatalf("mappings %+v, want the installed one of uid-old", got)
	}
}

// installedHostPorts is a table holding hps as synced.
func installedHostPorts(t *testing.T, hps []HostPort) *table {
	t.Helper()
	tb := newTable(v4(), "skiff")
	pl := tb.planIncrementalWith(nil, newSource(nil).get, testOpts(), &hps, quietLog())
	if pl == nil {
		t.Fatal("no plan for the initial host ports")
	}
	tb.commit(pl)
	return tb
}

func TestHostPortBatch_Golden(t *testing.T) {
	tb := newTable(v4(), "skiff")
	hps := e2eHostPorts()
	pl := tb.planIncrementalWith(nil, newSource(nil).get, testOpts(), &hps, quietLog())
	if pl == nil {
		t.Fatal("no batch for new host ports")
	}
	checkGolden(t, "hostports_add", pl.tx.String())
}

func TestHostPortBatch_Unchanged_NoBatch(t *testing.T) {
	hps := e2eHostPorts()
	tb := installedHostPorts(t, hps)
	if pl := tb.planIncrementalWith(nil, newSource(nil).get, testOpts(), &hps, quietLog()); pl != nil {
		t.Errorf("batch for unchanged host ports:\n%s", pl.tx)
	}
}

func TestHostPortBatch_PodGone_ElementDeletedThenChain(t *testing.T) {
	tb := installedHostPorts(t, e2eHostPorts())
	before := tb.count
	rest := slices.DeleteFunc(e2eHostPorts(), func(hp HostPort) bool { return hp.Pod == "default/pod2" })
	pl := tb.planIncrementalWith(nil, newSource(nil).get, testOpts(), &rest, quietLog())
	if pl == nil {
		t.Fatal("no batch for a pod that went away")
	}
	checkGolden(t, "hostports_pod_gone", pl.tx.String())
	tb.commit(pl)
	if _, ok := tb.hostPorts["tcp/"+testNodeIP+"/54323"]; ok || len(tb.hostPorts) != 3 {
		t.Errorf("installed host ports %v, want the 3 others", slices.Sorted(maps.Keys(tb.hostPorts)))
	}
	if want := (objectCount{before.chains - 1, before.rules - 2, before.elements - 1}); tb.count != want {
		t.Errorf("count %+v, want %+v", tb.count, want)
	}
	// Everything gone: nothing left.
	pl = tb.planIncrementalWith(nil, newSource(nil).get, testOpts(), &[]HostPort{}, quietLog())
	tb.commit(pl)
	if len(tb.hostPorts) != 0 || tb.count != (objectCount{}) {
		t.Errorf("after every pod went: %d host ports, count %+v", len(tb.hostPorts), tb.count)
	}
}

func TestHostPortFullSync_WithServices_SimKernelTakesIt(t *testing.T) {
	web, webSl := clusterIPTwoNodes()
	tb := newTable(v4(), "skiff")
	k := newSimKernel()
	pl := tb.planFullWith([]string{"default/web"}, newSource([]*corev1.Service{web}, webSl).get, testOpts(), e2eHostPorts(), nil, nil, quietLog())
	if err := k.Apply(pl.tx); err != nil {
		t.Fatalf("full sync with host ports refused: %v\n%s", err, pl.tx)
	}
	tb.commit(pl)
	dump := k.dump(tb.name)
	for _, want := range []string{
		"127.0.0.1 . tcp . 54323 : goto " + hostPortName("tcp/127.0.0.1/54323"),
		"tcp . 8443 : goto " + hostPortName("tcp/*/8443"),
	} {
		if !strings.Contains(dump, want) {
			t.Errorf("kernel lacks %q:\n%s", want, dump)
		}
	}
	// A full resync over the same state writes the same table.
	again := tb.planFullWith([]string{"default/web"}, newSource([]*corev1.Service{web}, webSl).get, testOpts(), e2eHostPorts(), nil, nil, quietLog())
	if err := k.Apply(again.tx); err != nil {
		t.Fatal(err)
	}
	if got := k.dump(tb.name); got != dump {
		t.Errorf("second full sync changed the table:\n%s", lineDiff(dump, got))
	}
}

func hostPortName(id string) string { return objectName(hostPortPrefix, shortHash(id), id) }

func TestHostPortStaleFlows(t *testing.T) {
	fam := v4()
	inst := func(hp HostPort) *installedHostPort {
		m := newHostPortMapping(hp, fam)
		return &installedHostPort{m: m, rules: fam.hostPortRules(m)}
	}
	udp := hostPort("pod3", corev1.ProtocolUDP, testNodeIP, 54323, "10.42.1.12", 8080)
	udpMoved := hostPort("pod4", corev1.ProtocolUDP, testNodeIP, 54323, "10.42.1.14", 8080)
	udpAny := hostPort("pod5", corev1.ProtocolUDP, "", 5353, "10.42.1.15", 53)
	tcp := hostPort("pod2", corev1.ProtocolTCP, testNodeIP, 54323, "10.42.1.11", 8080)
	tests := []struct {
		name       string
		c          hostPortChange
		afterStart bool
		want       []string
	}{
		{"UDPGone_EntriesToThePod", hostPortChange{old: inst(udp)}, true, []string{"udp dst 192.168.88.1:54323 reply-src 10.42.1.12"}},
		{"UDPMovedToOtherPod_OldPodsEntries", hostPortChange{old: inst(udp), new: inst(udpMoved)}, true, []string{"udp dst 192.168.88.1:54323 reply-src 10.42.1.12"}},
		{"UDPNew_EntriesMadeBeforeIt", hostPortChange{new: inst(udpAny)}, true, []string{"udp dst *:5353 reply-src *"}},
		{"UDPNewAtStart_NothingKnown", hostPortChange{new: inst(udpAny)}, false, nil},
		{"UDPSameTarget_Nothing", hostPortChange{old: inst(udp), new: inst(udp)}, true, nil},
		{"TCP_Nothing", hostPortChange{old: inst(tcp)}, true, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, f := range hostPortStaleFlows(tc.c, tc.afterStart) {
				got = append(got, f.String())
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("flows %q, want %q", got, tc.want)
			}
		})
	}
}

// staticHostPorts is a HostPortSource tests change.
type staticHostPorts struct {
	mu  sync.Mutex
	hps []HostPort
}

func (s *staticHostPorts) HostPorts() []HostPort {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.hps)
}

func (s *staticHostPorts) set(hps []HostPort) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hps = hps
}

func TestProxier_HostPortsChanged_IncrementalSyncAndUDPEntriesDeleted(t *testing.T) {
	src := &staticHostPorts{hps: e2eHostPorts()}
	e := newEnv(t, Config{SyncPeriod: time.Hour, HostPorts: src})
	e.kernel, e.ct = newSimKernel(), &fakeConntrack{}
	e.p.openRules = func(string) (ruleWriter, error) { return e.kernel, nil }
	e.p.openConntrack = func(string) (conntrackCleaner, error) { return e.ct, nil }
	var localnet []string
	var mu sync.Mutex
	e.p.enableLocalnet = func(ns string) error {
		mu.Lock()
		defer mu.Unlock()
		localnet = append(localnet, ns)
		return nil
	}
	e.run(t)
	e.waitSync(t, "at start", isFull)
	tbl := nft.Table{Family: nft.IPv4, Name: "skiff"}
	if d := e.kernel.dump(tbl); !strings.Contains(d, testNodeIP+" . udp . 54323 : goto "+hostPortName("udp/"+testNodeIP+"/54323")) {
		t.Fatalf("first sync lacks the UDP host port:\n%s", d)
	}
	mu.Lock()
	if len(localnet) != 1 {
		t.Errorf("route_localnet enabled %d times after the first full sync, want once", len(localnet))
	}
	mu.Unlock()

	src.set(slices.DeleteFunc(e2eHostPorts(), func(hp HostPort) bool { return hp.Pod == "default/pod3" }))
	e.p.HostPortsChanged()
	r := e.waitSync(t, "after the UDP pod went", isPartial)
	if d := e.kernel.dump(tbl); strings.Contains(d, "udp . 54323") {
		t.Errorf("UDP host port still mapped after %d ops:\n%s", r.Ops, d)
	}
	if got, want := e.ct.flows(), []string{"udp dst 192.168.88.1:54323 reply-src 10.42.1.12"}; !slices.Equal(got, want) {
		t.Errorf("conntrack deletions %q, want %q", got, want)
	}
}

// On a node the pods come one by one: the host ports change many times,
// each told with HostPortsChanged after an incremental sync of the last.
func TestProxier_HostPortsChangedAgainAfterAnIncrementalSync_EveryChangeSynced(t *testing.T) {
	src := &staticHostPorts{}
	e := newEnv(t, Config{SyncPeriod: time.Hour, HostPorts: src})
	e.kernel, e.ct = newSimKernel(), &fakeConntrack{}
	e.p.openRules = func(string) (ruleWriter, error) { return e.kernel, nil }
	e.p.openConntrack = func(string) (conntrackCleaner, error) { return e.ct, nil }
	e.p.enableLocalnet = func(string) error { return nil }
	e.run(t)
	e.waitSync(t, "at start", isFull)
	tbl := nft.Table{Family: nft.IPv4, Name: "skiff"}
	all := e2eHostPorts()
	for i := range all {
		src.set(all[:i+1])
		e.p.HostPortsChanged()
		e.waitSync(t, "after host port "+all[i].Pod+" came", isPartial)
		d := e.kernel.dump(tbl)
		for _, hp := range all[:i+1] {
			if !strings.Contains(d, ": goto "+hostPortName(hostPortID(hp))) {
				t.Fatalf("after change %d: %s's host port %d not mapped:\n%s", i+1, hp.Pod, hp.HostPort, d)
			}
		}
	}
}

// hostPortID is the slot id of an IPv4 host port.
func hostPortID(hp HostPort) string {
	proto, _ := protoOf(hp.Protocol)
	where := "*"
	if hp.HostIP != nil {
		where = hp.HostIP.String()
	}
	return proto.String() + "/" + where + "/" + strconv.Itoa(int(hp.HostPort))
}
