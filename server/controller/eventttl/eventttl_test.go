package eventttl

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"skiff/server/controller/controllertest"
)

var now = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

func ago(d time.Duration) metav1.Time           { return metav1.NewTime(now.Add(-d)) }
func agoMicro(d time.Duration) metav1.MicroTime { return metav1.NewMicroTime(now.Add(-d)) }

func TestLastSeen(t *testing.T) {
	for _, tc := range []struct {
		name string
		core corev1.Event
		want time.Duration // before now
	}{
		{"lastTimestamp", corev1.Event{FirstTimestamp: ago(5 * time.Hour), LastTimestamp: ago(2 * time.Hour)}, 2 * time.Hour},
		{"eventTime only", corev1.Event{EventTime: agoMicro(3 * time.Hour)}, 3 * time.Hour},
		{"series seen later than its eventTime", corev1.Event{EventTime: agoMicro(3 * time.Hour), Series: &corev1.EventSeries{Count: 4, LastObservedTime: agoMicro(time.Minute)}}, time.Minute},
		{"latest of lastTimestamp and eventTime", corev1.Event{LastTimestamp: ago(10 * time.Minute), EventTime: agoMicro(3 * time.Hour)}, 10 * time.Minute},
		{"firstTimestamp when no later time", corev1.Event{FirstTimestamp: ago(4 * time.Hour)}, 4 * time.Hour},
		{"creation when no time at all", corev1.Event{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: ago(7 * time.Hour)}}, 7 * time.Hour},
		{"old times win over a recent creation", corev1.Event{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: ago(0)}, LastTimestamp: ago(2 * time.Hour)}, 2 * time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := now.Sub(lastSeenCore(&tc.core)); got != tc.want {
				t.Errorf("core/v1: last seen %v ago, want %v", got, tc.want)
			}
		})
	}
}

type cluster struct {
	client kubernetes.Interface
}

func newCluster(t *testing.T, namespaces ...string) *cluster {
	t.Helper()
	return &cluster{client: controllertest.Start(t, controllertest.Options{Namespaces: namespaces}).Client}
}

// coreEvent creates an old-style event last seen at the given time.
func (c *cluster) coreEvent(t *testing.T, ns, name string, last time.Time) {
	t.Helper()
	e := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "p"},
		Reason:         "Test", Message: "m", Type: corev1.EventTypeNormal,
		FirstTimestamp: metav1.NewTime(last), LastTimestamp: metav1.NewTime(last), Count: 1}
	if _, err := c.client.CoreV1().Events(ns).Create(t.Context(), e, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// newEvent creates an events.k8s.io/v1 event that happened at the given
// time and, with a series, was last seen at seriesLast.
func (c *cluster) newEvent(t *testing.T, ns, name string, at time.Time, seriesLast *time.Time) {
	t.Helper()
	e := &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Regarding: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "p"}, EventTime: metav1.NewMicroTime(at),
		ReportingController: "example.com/test", ReportingInstance: "i", Action: "Testing", Reason: "Test", Type: corev1.EventTypeNormal}
	if seriesLast != nil {
		e.Series = &eventsv1.EventSeries{Count: 2, LastObservedTime: metav1.NewMicroTime(*seriesLast)}
	}
	if _, err := c.client.EventsV1().Events(ns).Create(t.Context(), e, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (c *cluster) coreNames(t *testing.T) []string {
	t.Helper()
	l, err := c.client.CoreV1().Events("").List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range l.Items {
		out = append(out, e.Namespace+"/"+e.Name)
	}
	slices.Sort(out)
	return out
}

func (c *cluster) newNames(t *testing.T) []string {
	t.Helper()
	l, err := c.client.EventsV1().Events("").List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range l.Items {
		out = append(out, e.Namespace+"/"+e.Name)
	}
	slices.Sort(out)
	return out
}

func TestEventTTL_OldEventsDeletedNewKept(t *testing.T) {
	c := newCluster(t, "default", "other")
	wall := time.Now()
	c.coreEvent(t, "default", "old", wall.Add(-2*time.Hour))
	c.coreEvent(t, "other", "old", wall.Add(-61*time.Minute))
	c.coreEvent(t, "default", "fresh", wall.Add(-5*time.Minute))
	c.newEvent(t, "default", "old-new", wall.Add(-3*time.Hour), nil)
	c.newEvent(t, "other", "recurring", wall.Add(-3*time.Hour), new(wall.Add(-time.Minute)))
	c.newEvent(t, "other", "fresh", wall, nil)

	controllertest.Run(t, t.Context(), func(ctx context.Context) error {
		return Run(ctx, Config{Client: c.client, Logger: controllertest.Logger(t, slog.LevelInfo), Period: 50 * time.Millisecond, PageSize: 2})
	})
	// Both groups serve the same stored Events: each view lists them all.
	wantCore := []string{"default/fresh", "other/fresh", "other/recurring"}
	wantNew := wantCore
	err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		return slices.Equal(c.coreNames(t), wantCore) && slices.Equal(c.newNames(t), wantNew), nil
	})
	if err != nil {
		t.Fatalf("events left: core/v1 %v (want %v), events.k8s.io/v1 %v (want %v)", c.coreNames(t), wantCore, c.newNames(t), wantNew)
	}
}

func TestEventTTL_Sweep_PagesThroughABacklog(t *testing.T) {
	c := newCluster(t, "a", "b")
	wall := time.Now()
	var keep []string
	for i := range 23 {
		ns := []string{"a", "b"}[i%2]
		name := fmt.Sprintf("e%02d", i)
		if i%4 == 0 {
			c.coreEvent(t, ns, name, wall)
			keep = append(keep, ns+"/"+name)
		} else {
			c.coreEvent(t, ns, name, wall.Add(-90*time.Minute))
		}
	}
	slices.Sort(keep)
	s := newSweeper(Config{Client: c.client, PageSize: 5})
	n, err := s.sweep(t.Context(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if n != 23-len(keep) {
		t.Errorf("sweep deleted %d events, want %d", n, 23-len(keep))
	}
	if got := c.coreNames(t); !slices.Equal(got, keep) {
		t.Errorf("left %v, want %v", got, keep)
	}
	// A second sweep finds nothing more.
	if n, err := s.sweep(t.Context(), time.Now()); n != 0 || err != nil {
		t.Errorf("second sweep = %d, %v", n, err)
	}
}

func TestEventTTL_EventUpdatedSinceListed_Kept(t *testing.T) {
	c := newCluster(t, "default")
	c.coreEvent(t, "default", "bumped", time.Now().Add(-2*time.Hour))
	l, err := c.client.CoreV1().Events("default").List(t.Context(), metav1.ListOptions{})
	if err != nil || len(l.Items) != 1 {
		t.Fatalf("list = %v, %v", l, err)
	}
	stale := l.Items[0]
	// The event recurs: its recorder bumps count and lastTimestamp.
	cur := stale.DeepCopy()
	cur.Count, cur.LastTimestamp = 2, metav1.Now()
	if _, err := c.client.CoreV1().Events("default").Update(t.Context(), cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	s := newSweeper(Config{Client: c.client})
	list := func(context.Context, metav1.ListOptions) ([]expired, string, error) {
		return []expired{{stale.Namespace, stale.Name, stale.UID, stale.ResourceVersion}}, "", nil
	}
	del := func(ctx context.Context, e expired, opts metav1.DeleteOptions) error {
		return c.client.CoreV1().Events(e.namespace).Delete(ctx, e.name, opts)
	}
	n, err := s.pages(t.Context(), "core/v1", list, del)
	if err != nil || n != 0 {
		t.Fatalf("pages = %d, %v; want the stale delete refused quietly", n, err)
	}
	if got := c.coreNames(t); !slices.Equal(got, []string{"default/bumped"}) {
		t.Errorf("events left %v", got)
	}
}
