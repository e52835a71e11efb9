package cronjob

import (
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	// spec.timeZone must resolve on hosts without a zoneinfo database,
	// as the API server's validation does.
	_ "time/tzdata"

	"github.com/robfig/cron/v3"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// maxMissed is how many missed schedule times are still worth starting
// one job for without a warning (upstream's "more than 80, less than lots").
const maxMissed = 100

// nextScheduleDelta is added to requeue delays so that the sync lands
// just after the schedule time, not a hair before it.
const nextScheduleDelta = 100 * time.Millisecond

type missed int

const (
	noneMissed missed = iota
	fewMissed
	manyMissed
)

// parseSchedule parses spec.schedule (5 fields or a descriptor such as
// @hourly) in spec.timeZone, or the controller's local time zone when none
// is given, as upstream does.
func parseSchedule(cj *batchv1.CronJob) (cron.Schedule, error) {
	spec := cj.Spec.Schedule
	if cj.Spec.TimeZone != nil && !hasTZPrefix(spec) {
		spec = "TZ=" + *cj.Spec.TimeZone + " " + spec
	}
	sched, err := cron.ParseStandard(spec)
	if err != nil {
		return nil, fmt.Errorf("parse schedule %q: %w", cj.Spec.Schedule, err)
	}
	return sched, nil
}

// hasTZPrefix spots CRON_TZ= and TZ= in the schedule, which validation
// refuses but older objects may carry; they win over spec.timeZone.
func hasTZPrefix(schedule string) bool {
	return strings.Contains(schedule, "TZ=")
}

// mostRecent returns the latest schedule time in (earliest, now], if any,
// and how many were missed. It walks at most maxMissed+1 times; past that
// it finds the latest time by searching back from now, so a clock off by
// years costs no more than a few hundred steps.
func mostRecent(sched cron.Schedule, earliest, now time.Time) (*time.Time, missed, error) {
	t1 := sched.Next(earliest)
	if t1.IsZero() {
		return nil, noneMissed, errors.New("the schedule has no upcoming time")
	}
	if now.Before(t1) {
		return nil, noneMissed, nil
	}
	t2 := sched.Next(t1)
	if !t2.IsZero() && t2.Sub(t1) < time.Second {
		return nil, noneMissed, errors.New("time difference between two schedules is less than 1 second")
	}
	last, n := t1, 1
	for t := t2; !t.IsZero() && !t.After(now); t = sched.Next(t) {
		last, n = t, n+1
		if n > maxMissed {
			latest := latestBefore(sched, now, t2.Sub(t1))
			return &latest, manyMissed, nil
		}
	}
	if n == 1 {
		return &last, noneMissed, nil
	}
	return &last, fewMissed, nil
}

// latestBefore finds the last schedule time not after now, looking back
// over a window that doubles from step until it holds one.
func latestBefore(sched cron.Schedule, now time.Time, step time.Duration) time.Time {
	for w := step; ; w *= 2 {
		t := sched.Next(now.Add(-w))
		if t.IsZero() || t.After(now) {
			continue
		}
		for n := sched.Next(t); !n.IsZero() && !n.After(now); n = sched.Next(n) {
			t = n
		}
		return t
	}
}

// earliestTime is where the search for unmet schedule times starts: the
// last time a job was scheduled, or the CronJob's creation.
func earliestTime(cj *batchv1.CronJob) time.Time {
	if cj.Status.LastScheduleTime != nil {
		return cj.Status.LastScheduleTime.Time
	}
	return cj.CreationTimestamp.Time
}

// nextScheduleTime is the unmet schedule time to act on now, if any:
// the most recent one still within startingDeadlineSeconds. Older misses
// are skipped; only the latest run is started, whatever the number.
func nextScheduleTime(cj *batchv1.CronJob, now time.Time, sched cron.Schedule) (*time.Time, missed, error) {
	earliest := earliestTime(cj)
	if d := cj.Spec.StartingDeadlineSeconds; d != nil {
		if deadline := now.Add(-time.Duration(*d) * time.Second); deadline.After(earliest) {
			earliest = deadline
		}
	}
	t, m, err := mostRecent(sched, earliest, now)
	if t == nil || t.After(now) {
		return nil, m, err
	}
	return t, m, err
}

// untilNext is how long until the schedule time after the most recent
// one, to requeue the CronJob then.
func untilNext(cj *batchv1.CronJob, now time.Time, sched cron.Schedule) time.Duration {
	earliest := earliestTime(cj)
	base := now
	recent, m, err := mostRecent(sched, earliest, now)
	switch {
	case err != nil:
	case recent != nil:
		base = *recent
	case m == noneMissed:
		base = earliest
	}
	next := sched.Next(base)
	if next.IsZero() {
		// Nothing within the next years: look again in a day.
		return 24 * time.Hour
	}
	return next.Add(nextScheduleDelta).Sub(now)
}

// jobName is deterministic per schedule time, so a job is never created
// twice for the same time even if the status update recording it is lost.
func jobName(cj *batchv1.CronJob, scheduled time.Time) string {
	return fmt.Sprintf("%s-%d", cj.Name, scheduled.Unix()/60)
}

var cronJobKind = batchv1.SchemeGroupVersion.WithKind("CronJob")

// jobFromTemplate builds the Job for one schedule time.
func jobFromTemplate(cj *batchv1.CronJob, scheduled time.Time) (*batchv1.Job, error) {
	tz := ""
	if cj.Spec.TimeZone != nil {
		tz = *cj.Spec.TimeZone
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return nil, fmt.Errorf("time zone %q: %w", tz, err)
	}
	tmpl := cj.Spec.JobTemplate
	annotations := maps.Clone(tmpl.Annotations)
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[batchv1.CronJobScheduledTimestampAnnotation] = scheduled.In(loc).Format(time.RFC3339)
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name:            jobName(cj, scheduled),
			Namespace:       cj.Namespace,
			Labels:          maps.Clone(tmpl.Labels),
			Annotations:     annotations,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(cj, cronJobKind)},
		},
		Spec: *tmpl.Spec.DeepCopy(),
	}, nil
}
