package nodelifecycle

import (
	"testing"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

func cond(t corev1.NodeConditionType, s corev1.ConditionStatus) corev1.NodeCondition {
	return corev1.NodeCondition{Type: t, Status: s}
}

func taint(key string, effect corev1.TaintEffect) corev1.Taint {
	return corev1.Taint{Key: key, Effect: effect}
}

func stamped(key string, at time.Time) corev1.Taint {
	t := metav1.NewTime(at)
	return corev1.Taint{Key: key, Effect: corev1.TaintEffectNoExecute, TimeAdded: &t}
}

func TestDesiredTaints(t *testing.T) {
	const (
		ns, ne   = corev1.TaintEffectNoSchedule, corev1.TaintEffectNoExecute
		nr, ur   = corev1.TaintNodeNotReady, corev1.TaintNodeUnreachable
		foreign  = "example.com/dedicated"
		earlier  = -time.Hour
		decided  = true
		undecide = false
	)
	now := metav1.NewTime(t0)
	ready := cond(corev1.NodeReady, corev1.ConditionTrue)
	foreignTaint := corev1.Taint{Key: foreign, Value: "db", Effect: ns}
	tests := []struct {
		name       string
		conditions []corev1.NodeCondition
		unsched    bool
		taints     []corev1.Taint
		noExecute  string
		decided    bool
		want       []corev1.Taint
	}{
		{name: "ready node keeps no taints", conditions: []corev1.NodeCondition{ready}, decided: decided},
		{name: "unknown node gets both unreachable taints, NoExecute stamped",
			conditions: []corev1.NodeCondition{cond(corev1.NodeReady, corev1.ConditionUnknown)}, noExecute: ur, decided: decided,
			want: []corev1.Taint{taint(ur, ns), stamped(ur, t0)}},
		{name: "not ready node gets both not-ready taints",
			conditions: []corev1.NodeCondition{cond(corev1.NodeReady, corev1.ConditionFalse)}, noExecute: nr, decided: decided,
			want: []corev1.Taint{taint(nr, ns), stamped(nr, t0)}},
		{name: "unreachable swaps to not-ready with a fresh stamp",
			conditions: []corev1.NodeCondition{cond(corev1.NodeReady, corev1.ConditionFalse)},
			taints:     []corev1.Taint{foreignTaint, taint(ur, ns), stamped(ur, t0.Add(earlier))}, noExecute: nr, decided: decided,
			want: []corev1.Taint{foreignTaint, taint(nr, ns), stamped(nr, t0)}},
		{name: "ready again removes ours and keeps foreign ones",
			conditions: []corev1.NodeCondition{ready},
			taints:     []corev1.Taint{taint(ur, ns), foreignTaint, stamped(ur, t0.Add(earlier))}, decided: decided,
			want: []corev1.Taint{foreignTaint}},
		{name: "existing NoExecute keeps its stamp and value",
			conditions: []corev1.NodeCondition{cond(corev1.NodeReady, corev1.ConditionUnknown)},
			taints:     []corev1.Taint{taint(ur, ns), {Key: ur, Value: "v", Effect: ne, TimeAdded: stamped(ur, t0.Add(earlier)).TimeAdded}}, noExecute: ur, decided: decided,
			want: []corev1.Taint{taint(ur, ns), {Key: ur, Value: "v", Effect: ne, TimeAdded: stamped(ur, t0.Add(earlier)).TimeAdded}}},
		{name: "undecided node keeps its NoExecute taint even when ready",
			conditions: []corev1.NodeCondition{ready}, taints: []corev1.Taint{stamped(ur, t0.Add(earlier))}, decided: undecide,
			want: []corev1.Taint{stamped(ur, t0.Add(earlier))}},
		{name: "undecided unknown node gets NoSchedule only (NoExecute waits for the limiter)",
			conditions: []corev1.NodeCondition{cond(corev1.NodeReady, corev1.ConditionUnknown)}, decided: undecide,
			want: []corev1.Taint{taint(ur, ns)}},
		{name: "pressure conditions and network give NoSchedule taints",
			conditions: []corev1.NodeCondition{ready, cond(corev1.NodeMemoryPressure, corev1.ConditionTrue), cond(corev1.NodeDiskPressure, corev1.ConditionTrue),
				cond(corev1.NodePIDPressure, corev1.ConditionTrue), cond(corev1.NodeNetworkUnavailable, corev1.ConditionTrue)}, decided: decided,
			want: []corev1.Taint{taint(corev1.TaintNodeMemoryPressure, ns), taint(corev1.TaintNodeDiskPressure, ns),
				taint(corev1.TaintNodeNetworkUnavailable, ns), taint(corev1.TaintNodePIDPressure, ns)}},
		{name: "pressure relieved drops its taint",
			conditions: []corev1.NodeCondition{ready, cond(corev1.NodeMemoryPressure, corev1.ConditionFalse)},
			taints:     []corev1.Taint{taint(corev1.TaintNodeMemoryPressure, ns)}, decided: decided},
		{name: "a NoExecute taint under a condition key is not ours",
			conditions: []corev1.NodeCondition{ready}, taints: []corev1.Taint{taint(corev1.TaintNodeMemoryPressure, ne)}, decided: decided,
			want: []corev1.Taint{taint(corev1.TaintNodeMemoryPressure, ne)}},
		{name: "unschedulable node gets its taint", conditions: []corev1.NodeCondition{ready}, unsched: true, decided: decided,
			want: []corev1.Taint{taint(corev1.TaintNodeUnschedulable, ns)}},
		{name: "schedulable again drops it", conditions: []corev1.NodeCondition{ready},
			taints: []corev1.Taint{taint(corev1.TaintNodeUnschedulable, ns)}, decided: decided},
		{name: "node that never reported keeps its creation taint",
			taints: []corev1.Taint{taint(nr, ns)}, want: []corev1.Taint{taint(nr, ns)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			node := &corev1.Node{Spec: corev1.NodeSpec{Unschedulable: tt.unsched, Taints: tt.taints}, Status: corev1.NodeStatus{Conditions: tt.conditions}}
			got := desiredTaints(node, tt.noExecute, tt.decided, now)
			if !sameTaints(got, tt.want) {
				t.Errorf("desiredTaints =\n  %v\nwant\n  %v", got, tt.want)
			}
		})
	}
}

func TestNoExecuteVerdict(t *testing.T) {
	const (
		nr, ur = corev1.TaintNodeNotReady, corev1.TaintNodeUnreachable
		T, F   = corev1.ConditionTrue, corev1.ConditionFalse
		U      = corev1.ConditionUnknown
	)
	tests := []struct {
		name      string
		ready     corev1.ConditionStatus
		current   string
		full      bool
		allow     bool
		want      string
		wantOK    bool
		wantAsked bool
	}{
		{name: "ready node loses its taint", ready: T, current: ur, want: "", wantOK: true},
		{name: "unknown node is tainted unreachable when the limiter allows", ready: U, allow: true, want: ur, wantOK: true, wantAsked: true},
		{name: "unknown node waits when the limiter refuses", ready: U, allow: false, want: "", wantOK: false, wantAsked: true},
		{name: "not ready node is tainted not-ready", ready: F, allow: true, want: nr, wantOK: true, wantAsked: true},
		{name: "swap from not-ready to unreachable skips the limiter", ready: U, current: nr, want: ur, wantOK: true},
		{name: "swap from unreachable to not-ready skips the limiter", ready: F, current: ur, want: nr, wantOK: true},
		{name: "tainted node stays tainted", ready: U, current: ur, want: ur, wantOK: true},
		{name: "full disruption lifts the taint", ready: U, current: ur, full: true, want: "", wantOK: true},
		{name: "full disruption taints nothing", ready: U, allow: true, full: true, want: "", wantOK: true},
		{name: "node that never reported is left alone", ready: "", current: ur, want: "", wantOK: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			asked := false
			got, ok := noExecuteVerdict(tt.ready, tt.current, tt.full, func() bool { asked = true; return tt.allow })
			if got != tt.want || ok != tt.wantOK || asked != tt.wantAsked {
				t.Errorf("noExecuteVerdict = %q, %v (limiter asked %v), want %q, %v (asked %v)", got, ok, asked, tt.want, tt.wantOK, tt.wantAsked)
			}
		})
	}
}

func TestComputeZoneState(t *testing.T) {
	tests := []struct {
		ready, notReady int
		want            zoneState
	}{
		{ready: 3, notReady: 0, want: stateNormal},
		{ready: 0, notReady: 1, want: stateFull},
		{ready: 0, notReady: 5, want: stateFull},
		{ready: 1, notReady: 2, want: stateNormal}, // two down is never a disruption
		{ready: 1, notReady: 3, want: statePartial},
		{ready: 10, notReady: 3, want: stateNormal},
		{ready: 9, notReady: 11, want: statePartial},
		{ready: 0, notReady: 0, want: stateNormal},
	}
	for _, tt := range tests {
		if got := computeZoneState(tt.ready, tt.notReady, DefaultUnhealthyZoneThreshold); got != tt.want {
			t.Errorf("computeZoneState(%d ready, %d not) = %s, want %s", tt.ready, tt.notReady, got, tt.want)
		}
	}
}

func TestZoneLimiter_OnePerIntervalWithBurstOfOne(t *testing.T) {
	steps := []struct {
		at   time.Duration
		qps  float64
		want bool
	}{
		{0, 0.1, true},
		{time.Second, 0.1, false},
		{9 * time.Second, 0.1, false},
		{10 * time.Second, 0.1, true},
		{11 * time.Second, 0, false},
		{time.Hour, 0, false},
		{time.Hour, -1, true},
		{time.Hour, -1, true},
	}
	var l zoneLimiter
	for _, s := range steps {
		if got := l.tryAccept(t0.Add(s.at), s.qps); got != s.want {
			t.Errorf("at %v qps %v: tryAccept = %v, want %v", s.at, s.qps, got, s.want)
		}
	}
}

func TestZoneOf(t *testing.T) {
	tests := []struct {
		labels map[string]string
		want   string
	}{
		{nil, ""},
		{map[string]string{corev1.LabelTopologyZone: "a", corev1.LabelTopologyRegion: "r"}, "r:\x00:a"},
		{map[string]string{corev1.LabelFailureDomainBetaZone: "b"}, ":\x00:b"},
		{map[string]string{corev1.LabelFailureDomainBetaZone: "b", corev1.LabelTopologyZone: "a"}, ":\x00:a"},
	}
	for _, tt := range tests {
		if got := zoneOf(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: tt.labels}}); got != tt.want {
			t.Errorf("zoneOf(%v) = %q, want %q", tt.labels, got, tt.want)
		}
	}
}

func TestTolerates(t *testing.T) {
	ur := corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute}
	valued := corev1.Taint{Key: "k", Value: "v", Effect: corev1.TaintEffectNoExecute}
	tests := []struct {
		name  string
		tol   corev1.Toleration
		taint corev1.Taint
		want  bool
	}{
		{"exists on key", corev1.Toleration{Key: ur.Key, Operator: corev1.TolerationOpExists}, ur, true},
		{"exists on key and effect", corev1.Toleration{Key: ur.Key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}, ur, true},
		{"other effect", corev1.Toleration{Key: ur.Key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}, ur, false},
		{"other key", corev1.Toleration{Key: "other", Operator: corev1.TolerationOpExists}, ur, false},
		{"empty key exists tolerates all", corev1.Toleration{Operator: corev1.TolerationOpExists}, valued, true},
		{"equal value", corev1.Toleration{Key: "k", Value: "v"}, valued, true},
		{"equal other value", corev1.Toleration{Key: "k", Operator: corev1.TolerationOpEqual, Value: "w"}, valued, false},
		{"unknown operator", corev1.Toleration{Key: "k", Operator: "Gt", Value: "1"}, valued, false},
	}
	for _, tt := range tests {
		if got := tolerates(tt.tol, tt.taint); got != tt.want {
			t.Errorf("%s: tolerates = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func secs(n int64) *int64 { return &n }

func TestEvictionDeadline(t *testing.T) {
	ur := stamped(corev1.TaintNodeUnreachable, t0)
	nr := stamped(corev1.TaintNodeNotReady, t0.Add(time.Minute))
	unstamped := corev1.Taint{Key: "example.com/drain", Effect: corev1.TaintEffectNoExecute}
	noSched := taint("example.com/ns", corev1.TaintEffectNoSchedule)
	tolUR := func(s *int64) corev1.Toleration {
		return corev1.Toleration{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: s}
	}
	tolNR := func(s *int64) corev1.Toleration {
		return corev1.Toleration{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: s}
	}
	seenAt := t0.Add(5 * time.Minute)
	since := func(t corev1.Taint) time.Time {
		if t.TimeAdded != nil {
			return t.TimeAdded.Time
		}
		return seenAt
	}
	tests := []struct {
		name      string
		taints    []corev1.Taint
		tols      []corev1.Toleration
		wantAt    time.Time
		wantEvict bool
	}{
		{name: "no taints", wantEvict: false},
		{name: "NoSchedule taints do not evict", taints: []corev1.Taint{noSched}, wantEvict: false},
		{name: "untolerated evicts at once", taints: []corev1.Taint{ur}, wantEvict: true},
		{name: "one untolerated among tolerated evicts at once", taints: []corev1.Taint{ur, nr}, tols: []corev1.Toleration{tolUR(nil)}, wantEvict: true},
		{name: "tolerated for ever stays", taints: []corev1.Taint{ur}, tols: []corev1.Toleration{tolUR(nil)}, wantEvict: false},
		{name: "tolerated for a while, counted from timeAdded", taints: []corev1.Taint{ur}, tols: []corev1.Toleration{tolUR(secs(300))},
			wantAt: t0.Add(300 * time.Second), wantEvict: true},
		{name: "zero seconds is at once", taints: []corev1.Taint{ur}, tols: []corev1.Toleration{tolUR(secs(0))}, wantEvict: true},
		{name: "negative seconds is at once", taints: []corev1.Taint{ur}, tols: []corev1.Toleration{tolUR(secs(-5))}, wantEvict: true},
		{name: "earliest window wins across taints", taints: []corev1.Taint{ur, nr}, tols: []corev1.Toleration{tolUR(secs(300)), tolNR(secs(10))},
			wantAt: t0.Add(time.Minute + 10*time.Second), wantEvict: true},
		{name: "for ever on one taint, a while on another", taints: []corev1.Taint{ur, nr}, tols: []corev1.Toleration{tolUR(nil), tolNR(secs(10))},
			wantAt: t0.Add(time.Minute + 10*time.Second), wantEvict: true},
		{name: "first matching toleration decides", taints: []corev1.Taint{ur},
			tols: []corev1.Toleration{tolUR(secs(30)), {Operator: corev1.TolerationOpExists}}, wantAt: t0.Add(30 * time.Second), wantEvict: true},
		{name: "taint without timeAdded counts from when it was seen", taints: []corev1.Taint{unstamped},
			tols: []corev1.Toleration{{Key: unstamped.Key, Operator: corev1.TolerationOpExists, TolerationSeconds: secs(60)}}, wantAt: seenAt.Add(time.Minute), wantEvict: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			at, evict := evictionDeadline(tt.taints, tt.tols, since)
			if evict != tt.wantEvict || !at.Equal(tt.wantAt) {
				t.Errorf("evictionDeadline = %v, %v; want %v, %v", at, evict, tt.wantAt, tt.wantEvict)
			}
		})
	}
}

func TestObserve_ProbeMovesOnlyWhenAHeartbeatChanges(t *testing.T) {
	node := func(hb time.Time) *corev1.Node {
		n := &corev1.Node{}
		if !hb.IsZero() {
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.NewTime(hb)}}
		}
		return n
	}
	lease := func(renew time.Time) *coordv1.Lease {
		r := metav1.NewMicroTime(renew)
		return &coordv1.Lease{Spec: coordv1.LeaseSpec{RenewTime: &r}}
	}
	// Remote clocks are far off on purpose: only change counts.
	remote := t0.Add(-24 * time.Hour)
	steps := []struct {
		name      string
		at        time.Duration
		node      *corev1.Node
		lease     *coordv1.Lease
		wantProbe time.Duration
	}{
		{"first sight counts as heard from", 0, node(remote), lease(remote), 0},
		{"nothing moved", 10 * time.Second, node(remote), lease(remote), 0},
		{"lease renewed", 20 * time.Second, node(remote), lease(remote.Add(time.Second)), 20 * time.Second},
		{"lease gone is no news", 30 * time.Second, node(remote), nil, 20 * time.Second},
		{"status heartbeat moved", 40 * time.Second, node(remote.Add(time.Second)), nil, 40 * time.Second},
		{"lease back unchanged is no news", 50 * time.Second, node(remote.Add(time.Second)), lease(remote.Add(time.Second)), 40 * time.Second},
		{"lease renewal backwards still moved", 60 * time.Second, node(remote.Add(time.Second)), lease(remote), 60 * time.Second},
		{"Ready condition removed", 70 * time.Second, node(time.Time{}), lease(remote), 70 * time.Second},
	}
	var h *health
	for _, s := range steps {
		h = observe(h, s.node, s.lease, t0.Add(s.at))
		if !h.probe.Equal(t0.Add(s.wantProbe)) {
			t.Errorf("%s: probe = %v, want %v", s.name, h.probe.Sub(t0), s.wantProbe)
		}
	}
}

func TestSilent_StartupGraceUntilReadyIsPosted(t *testing.T) {
	h := &health{probe: t0}
	never := &corev1.Node{}
	posted := &corev1.Node{Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{cond(corev1.NodeReady, corev1.ConditionTrue)}}}
	tests := []struct {
		node  *corev1.Node
		after time.Duration
		want  bool
	}{
		{never, 59 * time.Second, false},
		{never, 61 * time.Second, true},
		{posted, 40 * time.Second, false},
		{posted, 41 * time.Second, true},
	}
	for _, tt := range tests {
		if got := silent(tt.node, h, t0.Add(tt.after), time.Minute, 40*time.Second); got != tt.want {
			t.Errorf("silent(posted=%v, after %v) = %v, want %v", len(tt.node.Status.Conditions) > 0, tt.after, got, tt.want)
		}
	}
}

func TestMarkUnknown(t *testing.T) {
	created := metav1.NewTime(t0.Add(-time.Hour))
	now := metav1.NewTime(t0)
	earlier := metav1.NewTime(t0.Add(-time.Minute))
	unknown := func(t corev1.NodeConditionType, reason, msg string, hb, tr metav1.Time) corev1.NodeCondition {
		return corev1.NodeCondition{Type: t, Status: corev1.ConditionUnknown, Reason: reason, Message: msg, LastHeartbeatTime: hb, LastTransitionTime: tr}
	}
	stopped := func(t corev1.NodeConditionType) corev1.NodeCondition {
		return unknown(t, "NodeStatusUnknown", "Kubelet stopped posting node status.", earlier, now)
	}
	never := func(t corev1.NodeConditionType) corev1.NodeCondition {
		return unknown(t, "NodeStatusNeverUpdated", "Kubelet never posted node status.", created, now)
	}
	posted := func(t corev1.NodeConditionType, s corev1.ConditionStatus) corev1.NodeCondition {
		return corev1.NodeCondition{Type: t, Status: s, Reason: "Kubelet", Message: "fine", LastHeartbeatTime: earlier, LastTransitionTime: earlier}
	}
	network := posted(corev1.NodeNetworkUnavailable, corev1.ConditionFalse)
	tests := []struct {
		name        string
		in          []corev1.NodeCondition
		want        []corev1.NodeCondition
		wantChanged bool
	}{
		{name: "never posted", want: []corev1.NodeCondition{never(corev1.NodeReady), never(corev1.NodeMemoryPressure), never(corev1.NodeDiskPressure), never(corev1.NodePIDPressure)}, wantChanged: true},
		{name: "stopped posting; network left alone",
			in: []corev1.NodeCondition{posted(corev1.NodeReady, corev1.ConditionTrue), posted(corev1.NodeMemoryPressure, corev1.ConditionFalse),
				posted(corev1.NodeDiskPressure, corev1.ConditionFalse), posted(corev1.NodePIDPressure, corev1.ConditionFalse), network},
			want: []corev1.NodeCondition{stopped(corev1.NodeReady), stopped(corev1.NodeMemoryPressure), stopped(corev1.NodeDiskPressure),
				stopped(corev1.NodePIDPressure), network}, wantChanged: true},
		{name: "already unknown stays as it is",
			in:   []corev1.NodeCondition{unknown(corev1.NodeReady, "R", "m", earlier, earlier), unknown(corev1.NodeMemoryPressure, "R", "m", earlier, earlier), unknown(corev1.NodeDiskPressure, "R", "m", earlier, earlier), unknown(corev1.NodePIDPressure, "R", "m", earlier, earlier)},
			want: []corev1.NodeCondition{unknown(corev1.NodeReady, "R", "m", earlier, earlier), unknown(corev1.NodeMemoryPressure, "R", "m", earlier, earlier), unknown(corev1.NodeDiskPressure, "R", "m", earlier, earlier), unknown(corev1.NodePIDPressure, "R", "m", earlier, earlier)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := corev1.NodeStatus{Conditions: tt.in}
			changed := markUnknown(&st, created, now)
			if changed != tt.wantChanged || !equality.Semantic.DeepEqual(st.Conditions, tt.want) {
				t.Errorf("markUnknown changed=%v conditions=\n  %+v\nwant changed=%v\n  %+v", changed, st.Conditions, tt.wantChanged, tt.want)
			}
		})
	}
}

func TestMarkPodNotReady(t *testing.T) {
	now := metav1.NewTime(t0)
	tests := []struct {
		name   string
		in     []corev1.PodCondition
		want   bool
		status corev1.ConditionStatus
	}{
		{"ready pod flips", []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}, {Type: corev1.PodReady, Status: corev1.ConditionTrue}}, true, corev1.ConditionFalse},
		{"not ready pod unchanged", []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}, false, corev1.ConditionFalse},
		{"pod without Ready is left alone", []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}, false, ""},
	}
	for _, tt := range tests {
		st := corev1.PodStatus{Conditions: tt.in}
		got := markPodNotReady(&st, now)
		var status corev1.ConditionStatus
		for _, c := range st.Conditions {
			if c.Type == corev1.PodReady {
				status = c.Status
				if got && !c.LastTransitionTime.Equal(&now) {
					t.Errorf("%s: transition time not moved", tt.name)
				}
			}
		}
		if got != tt.want || status != tt.status {
			t.Errorf("%s: markPodNotReady = %v, Ready %q; want %v, %q", tt.name, got, status, tt.want, tt.status)
		}
	}
}

func TestSetDisruptionTarget_OnceOnly(t *testing.T) {
	var st corev1.PodStatus
	if !setDisruptionTarget(&st, metav1.NewTime(t0)) {
		t.Fatal("first call did not add the condition")
	}
	if setDisruptionTarget(&st, metav1.NewTime(t0.Add(time.Minute))) {
		t.Error("second call changed the condition again")
	}
	if len(st.Conditions) != 1 || st.Conditions[0].Reason != "DeletionByTaintManager" || !st.Conditions[0].LastTransitionTime.Time.Equal(t0) {
		t.Errorf("conditions = %+v", st.Conditions)
	}
}
