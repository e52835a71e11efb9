package cronjob

import (
	"fmt"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func cronJob(schedule string, tz *string, created string) *batchv1.CronJob {
	return &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Name: "backup", Namespace: "default", CreationTimestamp: metav1.NewTime(at(created))},
		Spec:       batchv1.CronJobSpec{Schedule: schedule, TimeZone: tz},
	}
}

func TestMostRecent(t *testing.T) {
	utc := ptr.To("Etc/UTC")
	for _, tc := range []struct {
		name, schedule, created, now string
		want                         string // "" for none
		missed                       missed
		err                          bool
	}{
		{name: "before the first time", schedule: "* * * * *", created: "2024-01-01T10:00:30Z", now: "2024-01-01T10:00:45Z"},
		{name: "one due", schedule: "* * * * *", created: "2024-01-01T10:00:30Z", now: "2024-01-01T10:01:10Z", want: "2024-01-01T10:01:00Z", missed: noneMissed},
		{name: "a few missed, latest wins", schedule: "* * * * *", created: "2024-01-01T10:00:30Z", now: "2024-01-01T10:05:10Z", want: "2024-01-01T10:05:00Z", missed: fewMissed},
		{name: "exactly on the tick", schedule: "*/5 * * * *", created: "2024-01-01T10:00:00Z", now: "2024-01-01T10:05:00Z", want: "2024-01-01T10:05:00Z", missed: noneMissed},
		{name: "weekdays skip the weekend", schedule: "0 9 * * 1-5", created: "2024-01-05T10:00:00Z", now: "2024-01-08T09:30:00Z", want: "2024-01-08T09:00:00Z", missed: noneMissed},
		{name: "hourly for days is too many", schedule: "@hourly", created: "2024-01-01T00:30:00Z", now: "2024-01-10T00:30:00Z", want: "2024-01-10T00:00:00Z", missed: manyMissed},
		{name: "uneven schedule over years", schedule: "0 0 1,15 * *", created: "2014-03-02T00:00:00Z", now: "2024-07-20T12:00:00Z", want: "2024-07-15T00:00:00Z", missed: manyMissed},
		{name: "every minute for a year", schedule: "* * * * *", created: "2023-01-01T00:00:00Z", now: "2024-01-01T00:00:30Z", want: "2024-01-01T00:00:00Z", missed: manyMissed},
		{name: "never satisfiable", schedule: "0 0 30 2 *", created: "2024-01-01T00:00:00Z", now: "2024-06-01T00:00:00Z", err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cj := cronJob(tc.schedule, utc, tc.created)
			sched, err := parseSchedule(cj)
			if err != nil {
				t.Fatal(err)
			}
			got, m, err := mostRecent(sched, earliestTime(cj), at(tc.now))
			if (err != nil) != tc.err {
				t.Fatalf("err = %v, want error %v", err, tc.err)
			}
			switch {
			case tc.want == "" && got != nil:
				t.Errorf("got %v, want none", got)
			case tc.want != "" && (got == nil || !got.Equal(at(tc.want))):
				t.Errorf("got %v, want %s", got, tc.want)
			case m != tc.missed:
				t.Errorf("missed = %v, want %v", m, tc.missed)
			}
		})
	}
}

func TestNextScheduleTime_StartingDeadlineSkipsOlderMisses(t *testing.T) {
	for _, tc := range []struct {
		name     string
		deadline *int64
		last     string
		now      string
		want     string
	}{
		{name: "no deadline: the late run still starts", last: "2024-01-01T10:00:00Z", now: "2024-01-01T10:30:20Z", want: "2024-01-01T10:30:00Z"},
		{name: "within the deadline", deadline: ptr.To[int64](60), last: "2024-01-01T10:00:00Z", now: "2024-01-01T10:30:20Z", want: "2024-01-01T10:30:00Z"},
		{name: "past the deadline: skipped", deadline: ptr.To[int64](10), last: "2024-01-01T10:00:00Z", now: "2024-01-01T10:30:20Z"},
		{name: "older misses skipped, the latest in time kept", deadline: ptr.To[int64](700), last: "2024-01-01T09:00:00Z", now: "2024-01-01T10:30:20Z", want: "2024-01-01T10:30:00Z"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cj := cronJob("*/10 * * * *", ptr.To("Etc/UTC"), "2023-01-01T00:00:00Z")
			cj.Spec.StartingDeadlineSeconds = tc.deadline
			cj.Status.LastScheduleTime = &metav1.Time{Time: at(tc.last)}
			sched, _ := parseSchedule(cj)
			got, _, err := nextScheduleTime(cj, at(tc.now), sched)
			if err != nil {
				t.Fatal(err)
			}
			if (tc.want == "") != (got == nil) || (got != nil && !got.Equal(at(tc.want))) {
				t.Errorf("got %v, want %q", got, tc.want)
			}
		})
	}
}

func TestParseSchedule_TimeZones(t *testing.T) {
	for _, tc := range []struct {
		name, schedule string
		tz             *string
		after, want    string
	}{
		{name: "Tokyo nine o'clock is midnight UTC", schedule: "0 9 * * *", tz: ptr.To("Asia/Tokyo"), after: "2023-12-31T23:00:00Z", want: "2024-01-01T00:00:00Z"},
		{name: "Berlin in winter is UTC+1", schedule: "0 9 * * *", tz: ptr.To("Europe/Berlin"), after: "2024-01-15T00:00:00Z", want: "2024-01-15T08:00:00Z"},
		{name: "Berlin in summer is UTC+2", schedule: "0 9 * * *", tz: ptr.To("Europe/Berlin"), after: "2024-07-15T00:00:00Z", want: "2024-07-15T07:00:00Z"},
		{name: "New York across the spring change", schedule: "0 12 * * *", tz: ptr.To("America/New_York"), after: "2024-03-09T18:00:00Z", want: "2024-03-10T16:00:00Z"},
		{name: "descriptor in a zone", schedule: "@daily", tz: ptr.To("Asia/Kolkata"), after: "2024-01-01T00:00:00Z", want: "2024-01-01T18:30:00Z"},
		{name: "TZ in the schedule wins", schedule: "TZ=Asia/Tokyo 0 9 * * *", tz: ptr.To("Europe/Berlin"), after: "2023-12-31T23:00:00Z", want: "2024-01-01T00:00:00Z"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sched, err := parseSchedule(cronJob(tc.schedule, tc.tz, "2020-01-01T00:00:00Z"))
			if err != nil {
				t.Fatal(err)
			}
			if got := sched.Next(at(tc.after)); !got.Equal(at(tc.want)) {
				t.Errorf("next after %s = %v, want %s", tc.after, got.UTC(), tc.want)
			}
		})
	}
	t.Run("no time zone is the controller's local time", func(t *testing.T) {
		sched, err := parseSchedule(cronJob("0 9 * * *", nil, "2020-01-01T00:00:00Z"))
		if err != nil {
			t.Fatal(err)
		}
		from := time.Date(2024, 1, 1, 0, 0, 0, 0, time.Local)
		if got, want := sched.Next(from), time.Date(2024, 1, 1, 9, 0, 0, 0, time.Local); !got.Equal(want) {
			t.Errorf("next = %v, want %v", got, want)
		}
	})
	for _, bad := range []string{"* * *", "61 * * * *", "@fortnightly"} {
		if _, err := parseSchedule(cronJob(bad, nil, "2020-01-01T00:00:00Z")); err == nil {
			t.Errorf("schedule %q parsed", bad)
		}
	}
}

func TestUntilNext(t *testing.T) {
	for _, tc := range []struct {
		name, schedule, created, last, now string
		want                               time.Duration
	}{
		{name: "next minute", schedule: "* * * * *", created: "2024-01-01T10:00:30Z", now: "2024-01-01T10:00:45Z", want: 15*time.Second + nextScheduleDelta},
		{name: "after the last run", schedule: "*/5 * * * *", created: "2024-01-01T09:00:00Z", last: "2024-01-01T10:00:00Z", now: "2024-01-01T10:01:00Z", want: 4*time.Minute + nextScheduleDelta},
		{name: "a missed run does not requeue at once", schedule: "*/5 * * * *", created: "2024-01-01T09:00:00Z", last: "2024-01-01T09:00:00Z", now: "2024-01-01T10:01:00Z", want: 4*time.Minute + nextScheduleDelta},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cj := cronJob(tc.schedule, ptr.To("Etc/UTC"), tc.created)
			if tc.last != "" {
				cj.Status.LastScheduleTime = &metav1.Time{Time: at(tc.last)}
			}
			sched, _ := parseSchedule(cj)
			if got := untilNext(cj, at(tc.now), sched); got != tc.want {
				t.Errorf("untilNext = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestJobFromTemplate_NameAnnotationOwner(t *testing.T) {
	cj := cronJob("0 9 * * *", ptr.To("Asia/Tokyo"), "2020-01-01T00:00:00Z")
	cj.UID = "cj-uid"
	cj.Spec.JobTemplate.Labels = map[string]string{"app": "backup"}
	cj.Spec.JobTemplate.Spec.BackoffLimit = ptr.To[int32](2)
	scheduled := at("2024-01-01T00:00:00Z")
	job, err := jobFromTemplate(cj, scheduled)
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("backup-%d", scheduled.Unix()/60); job.Name != want || job.Name != "backup-28401120" {
		t.Errorf("name %q, want %q", job.Name, want)
	}
	if got := job.Annotations[batchv1.CronJobScheduledTimestampAnnotation]; got != "2024-01-01T09:00:00+09:00" {
		t.Errorf("scheduled timestamp %q, want it in the CronJob's zone", got)
	}
	if job.Labels["app"] != "backup" || ptr.Deref(job.Spec.BackoffLimit, 0) != 2 {
		t.Errorf("template not copied: labels %v spec %+v", job.Labels, job.Spec)
	}
	ref := metav1.GetControllerOf(job)
	if ref == nil || ref.Kind != "CronJob" || ref.UID != "cj-uid" || ref.APIVersion != "batch/v1" {
		t.Errorf("controller reference %+v", ref)
	}
}

func TestOldestBeyond(t *testing.T) {
	job := func(name, start string) *batchv1.Job {
		j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if start != "" {
			j.Status.StartTime = &metav1.Time{Time: at(start)}
		}
		return j
	}
	names := func(js []*batchv1.Job) string {
		var out []string
		for _, j := range js {
			out = append(out, j.Name)
		}
		return fmt.Sprint(out)
	}
	jobs := []*batchv1.Job{
		job("c", "2024-01-01T10:02:00Z"), job("never", ""), job("a", "2024-01-01T10:00:00Z"),
		job("b2", "2024-01-01T10:01:00Z"), job("b1", "2024-01-01T10:01:00Z"),
	}
	for _, tc := range []struct {
		limit int
		want  string
	}{
		{5, "[]"}, {10, "[]"}, {3, "[a b1]"}, {1, "[a b1 b2 c]"}, {0, "[a b1 b2 c never]"},
	} {
		if got := names(oldestBeyond(jobs, tc.limit)); got != tc.want {
			t.Errorf("limit %d: delete %s, want %s", tc.limit, got, tc.want)
		}
	}
}
