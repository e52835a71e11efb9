package job

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

func TestIntervals_ParseAndFormat(t *testing.T) {
	for _, tc := range []struct {
		in          string
		completions int
		want        string
		total       int
	}{
		{"", 10, "", 0},
		{"0", 10, "0", 1},
		{"0,1", 10, "0,1", 2},
		{"0-3,5", 10, "0-3,5", 5},
		{"0,1,2,3", 10, "0-3", 4},
		{"5,0-2,3", 10, "0-3,5", 5},
		{"1-3,2-6", 10, "1-6", 6},
		{"7-12", 10, "7-9", 3},
		{"12,3", 10, "3", 1},
		{"x,2,-1,4-3,5-", 10, "2", 1},
		{"0-99999", 100000, "0-99999", 100000},
	} {
		got := parseIntervals(tc.in, tc.completions)
		if got.String() != tc.want || got.total() != tc.total {
			t.Errorf("parse(%q, %d) = %q (total %d), want %q (total %d)", tc.in, tc.completions, got, got.total(), tc.want, tc.total)
		}
	}
}

func TestIntervals_WithIndexesAndHas(t *testing.T) {
	for _, tc := range []struct {
		start string
		add   []int
		want  string
	}{
		{"", []int{2, 0}, "0,2"},
		{"0,2", []int{1}, "0-2"},
		{"0-2,6", []int{4}, "0-2,4,6"},
		{"0-2,4,6", []int{3, 5}, "0-6"},
		{"3,4", []int{3, 4}, "3,4"},
		{"10", []int{9, 11, 0}, "0,9-11"},
	} {
		iv := parseIntervals(tc.start, 100)
		got := iv.withIndexes(tc.add)
		if got.String() != tc.want {
			t.Errorf("%q + %v = %q, want %q", tc.start, tc.add, got, tc.want)
		}
		if iv.String() != tc.start {
			t.Errorf("withIndexes changed its receiver to %q", iv)
		}
		want := parseIntervals(tc.want, 100)
		for ix := range 15 {
			in := slices.ContainsFunc(strings.Split(expand(want), ","), func(s string) bool { return s == strconv.Itoa(ix) })
			if got.has(ix) != in {
				t.Errorf("%q has(%d) = %v", got, ix, got.has(ix))
			}
		}
	}
}

// expand lists every index, "0,1,2".
func expand(iv intervals) string {
	var out []string
	for _, v := range iv {
		for i := v.first; i <= v.last; i++ {
			out = append(out, strconv.Itoa(i))
		}
	}
	return strings.Join(out, ",")
}

func indexedPod(name string, ix int, phase corev1.PodPhase) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), Finalizers: []string{batchv1.JobTrackingFinalizer}}}
	p.Status.Phase = phase
	if ix != noIndex {
		p.Annotations = map[string]string{batchv1.JobCompletionIndexAnnotation: strconv.Itoa(ix)}
	}
	return p
}

func TestPendingIndexes(t *testing.T) {
	for _, tc := range []struct {
		name        string
		succeeded   string
		busy        []int
		count       int
		completions int
		want        []int
	}{
		{name: "fresh job", count: 3, completions: 5, want: []int{0, 1, 2}},
		{name: "skips succeeded and busy", succeeded: "0,2", busy: []int{1, 4}, count: 5, completions: 6, want: []int{3, 5}},
		{name: "nothing left", succeeded: "0-2", busy: []int{3}, count: 2, completions: 4, want: nil},
		{name: "count caps", succeeded: "1", count: 2, completions: 10, want: []int{0, 2}},
		{name: "zero wanted", count: 0, completions: 3, want: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var busy []*corev1.Pod
			for _, ix := range tc.busy {
				busy = append(busy, indexedPod(fmt.Sprint("p", ix), ix, corev1.PodRunning))
			}
			got := pendingIndexes(parseIntervals(tc.succeeded, tc.completions), busy, tc.count, tc.completions)
			if !slices.Equal(got, tc.want) {
				t.Errorf("pending = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestSurplusIndexedPods_DuplicatesAndOutOfRangeGo(t *testing.T) {
	running := indexedPod("a-running", 0, corev1.PodRunning)
	pending := indexedPod("a-pending", 0, corev1.PodPending)
	b := indexedPod("b", 1, corev1.PodRunning)
	beyond := indexedPod("beyond", 7, corev1.PodRunning)
	none := indexedPod("none", noIndex, corev1.PodRunning)
	rm, keep := surplusIndexedPods([]*corev1.Pod{running, beyond, pending, none, b}, 3)
	names := func(ps []*corev1.Pod) []string {
		var out []string
		for _, p := range ps {
			out = append(out, p.Name)
		}
		slices.Sort(out)
		return out
	}
	if got, want := names(rm), []string{"a-pending", "beyond", "none"}; !slices.Equal(got, want) {
		t.Errorf("remove %v, want %v", got, want)
	}
	if got, want := names(keep), []string{"a-running", "b"}; !slices.Equal(got, want) {
		t.Errorf("keep %v, want %v", got, want)
	}
}

func TestSucceededIndexes_CountsOnlyUncountedSucceededPods(t *testing.T) {
	job := &batchv1.Job{Spec: batchv1.JobSpec{Completions: ptr.To[int32](5)}, Status: batchv1.JobStatus{CompletedIndexes: "0"}}
	counted := indexedPod("counted", 1, corev1.PodSucceeded)
	counted.Finalizers = nil
	pods := []*corev1.Pod{
		indexedPod("new", 3, corev1.PodSucceeded),
		counted,
		indexedPod("failed", 2, corev1.PodFailed),
		indexedPod("beyond", 9, corev1.PodSucceeded),
	}
	prev, all := succeededIndexes(job, pods)
	if prev.String() != "0" || all.String() != "0,3" {
		t.Errorf("prev %q all %q, want \"0\" and \"0,3\"", prev, all)
	}
}

func TestIndexedGenerateName_FitsALabel(t *testing.T) {
	if got := indexedGenerateName("job", 7); got != "job-7-" {
		t.Errorf("got %q", got)
	}
	long := strings.Repeat("a", 63)
	got := indexedGenerateName(long, 12345)
	if len(got) != 58 || !strings.HasSuffix(got, "-12345-") {
		t.Errorf("got %q (%d chars), want 58 ending in -12345-", got, len(got))
	}
}
