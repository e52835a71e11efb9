package podsecurity

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Result is one check's verdict. Reason is short and always shown; Detail
// names the offending containers or values when one object is checked.
type Result struct {
	Allowed bool
	Reason  string
	Detail  string
}

var allowed = Result{Allowed: true}

// checkFn judges the pod (or pod template) metadata and spec.
type checkFn func(meta *metav1.ObjectMeta, spec *corev1.PodSpec) Result

type checkID string

// check is one rule of a level; its versions say from which policy version
// each revision applies (until the next one).
type check struct {
	id       checkID
	level    Level
	versions []versionedCheck
}

type versionedCheck struct {
	min Version
	fn  checkFn
	// overrides are baseline checks this restricted check replaces (it is
	// a stricter form of them).
	overrides []checkID
}

// Evaluator runs the checks of a level and version.
type Evaluator struct {
	baseline, restricted map[Version][]checkFn
	// max is the newest version any check names; later versions, and
	// latest, are evaluated as it.
	max Version
}

// NewEvaluator builds the evaluator over upstream's checks.
func NewEvaluator() *Evaluator { return newEvaluator(allChecks()) }

func newEvaluator(checks []check) *Evaluator {
	e := &Evaluator{baseline: map[Version][]checkFn{}, restricted: map[Version][]checkFn{}, max: MajorMinor(1, 0)}
	for _, c := range checks {
		if last := c.versions[len(c.versions)-1].min; e.max.Older(last) {
			e.max = last
		}
	}
	restricted := map[Version]map[checkID]versionedCheck{}
	baseline := map[Version]map[checkID]versionedCheck{}
	var baselineIDs, restrictedIDs []checkID
	for _, c := range checks {
		if c.level == LevelRestricted {
			restrictedIDs = append(restrictedIDs, c.id)
			inflate(c, restricted, e.max)
		} else {
			baselineIDs = append(baselineIDs, c.id)
			inflate(c, baseline, e.max)
		}
	}
	// Messages list baseline checks first, each group sorted by ID, as
	// upstream's do: users and tests compare them verbatim.
	slices.Sort(baselineIDs)
	slices.Sort(restrictedIDs)
	order := append(baselineIDs, restrictedIDs...)
	for v := MajorMinor(1, 0); v.Older(e.max.next()); v = v.next() {
		overridden := map[checkID]bool{}
		for _, c := range restricted[v] {
			for _, id := range c.overrides {
				overridden[id] = true
			}
		}
		if restricted[v] == nil {
			restricted[v] = map[checkID]versionedCheck{}
		}
		for id, c := range baseline[v] {
			if !overridden[id] {
				restricted[v][id] = c
			}
		}
		e.restricted[v] = ordered(restricted[v], order)
		e.baseline[v] = ordered(baseline[v], order)
	}
	return e
}

// inflate records, for every version from each revision's minimum up to the
// next revision (or the newest version), which revision applies.
func inflate(c check, into map[Version]map[checkID]versionedCheck, max Version) {
	for i, vc := range c.versions {
		end := max.next()
		if i+1 < len(c.versions) {
			end = c.versions[i+1].min
		}
		for v := vc.min; v.Older(end); v = v.next() {
			if into[v] == nil {
				into[v] = map[checkID]versionedCheck{}
			}
			into[v][c.id] = vc
		}
	}
}

func ordered(checks map[checkID]versionedCheck, order []checkID) []checkFn {
	fns := make([]checkFn, 0, len(checks))
	for _, id := range order {
		if c, ok := checks[id]; ok {
			fns = append(fns, c.fn)
		}
	}
	return fns
}

// Evaluate runs the checks of lv on a pod's metadata and spec.
func (e *Evaluator) Evaluate(lv LevelVersion, meta *metav1.ObjectMeta, spec *corev1.PodSpec) Verdict {
	if lv.Level == LevelPrivileged {
		return Verdict{Allowed: true}
	}
	v := lv.Version
	if e.max.Older(v) {
		v = e.max
	}
	fns := e.restricted[v]
	if lv.Level == LevelBaseline {
		fns = e.baseline[v]
	}
	if meta == nil {
		meta = &metav1.ObjectMeta{}
	}
	var results []Result
	for _, fn := range fns {
		results = append(results, fn(meta, spec))
	}
	return aggregate(results)
}

// Verdict is the outcome of all checks of a level.
type Verdict struct {
	Allowed bool
	// Reasons and Details are parallel: one entry per failed check.
	Reasons, Details []string
}

const unknownReason = "unknown forbidden reason"

func aggregate(results []Result) Verdict {
	var v Verdict
	for _, r := range results {
		if r.Allowed {
			continue
		}
		reason := r.Reason
		if reason == "" {
			reason = unknownReason
		}
		v.Reasons = append(v.Reasons, reason)
		v.Details = append(v.Details, r.Detail)
	}
	v.Allowed = len(v.Reasons) == 0
	return v
}

// Reason is the failed checks' reasons: "host ports, privileged".
func (v Verdict) Reason() string { return strings.Join(v.Reasons, ", ") }

// Detail is the reasons each followed by its detail in parentheses:
// `allowPrivilegeEscalation != false (container "c" must set ...), ...`.
func (v Verdict) Detail() string {
	var b strings.Builder
	for i, r := range v.Reasons {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(r)
		if v.Details[i] != "" {
			fmt.Fprintf(&b, " (%s)", v.Details[i])
		}
	}
	return b.String()
}
