// Package podsecurity is upstream's Pod Security admission
// (k8s.io/pod-security-admission) written here: the privileged, baseline and
// restricted levels with every versioned check, the namespace labels that
// choose them, the PodSecurityConfiguration file, and the admission plugin.
package podsecurity

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Level is a Pod Security Standards level.
type Level string

const (
	LevelPrivileged Level = "privileged"
	LevelBaseline   Level = "baseline"
	LevelRestricted Level = "restricted"
)

// The namespace labels that choose a namespace's policy.
const (
	labelPrefix         = "pod-security.kubernetes.io/"
	EnforceLevelLabel   = labelPrefix + "enforce"
	EnforceVersionLabel = labelPrefix + "enforce-version"
	AuditLevelLabel     = labelPrefix + "audit"
	AuditVersionLabel   = labelPrefix + "audit-version"
	WarnLevelLabel      = labelPrefix + "warn"
	WarnVersionLabel    = labelPrefix + "warn-version"
)

// Version is a policy version: "latest" or v1.minor.
type Version struct {
	major, minor int
	latest       bool
}

// Latest is the version that follows the newest checks.
func Latest() Version { return Version{latest: true} }

// MajorMinor is version vMAJOR.MINOR.
func MajorMinor(major, minor int) Version { return Version{major: major, minor: minor} }

func (v Version) String() string {
	if v.latest {
		return "latest"
	}
	return fmt.Sprintf("v%d.%d", v.major, v.minor)
}

// Older reports whether v is older than other; latest is newer than every
// numbered version, even future ones.
func (v Version) Older(other Version) bool {
	if v.latest {
		return false
	}
	if other.latest {
		return true
	}
	if v.major != other.major {
		return v.major < other.major
	}
	return v.minor < other.minor
}

func (v Version) next() Version {
	if v.latest {
		return v
	}
	return MajorMinor(v.major, v.minor+1)
}

// ParseLevel reads a level; an unknown one is an error (and restricted, the
// safe reading, is returned with it).
func ParseLevel(s string) (Level, error) {
	switch l := Level(s); l {
	case LevelPrivileged, LevelBaseline, LevelRestricted:
		return l, nil
	}
	return LevelRestricted, fmt.Errorf("must be one of privileged, baseline, restricted")
}

var versionRE = regexp.MustCompile(`^v1\.([0-9]|[1-9][0-9]*)$`)

// ParseVersion reads "latest" or "v1.x"; anything else is an error (and
// latest is returned with it).
func ParseVersion(s string) (Version, error) {
	if s == "latest" {
		return Latest(), nil
	}
	m := versionRE.FindStringSubmatch(s)
	if len(m) != 2 {
		return Latest(), fmt.Errorf(`must be "latest" or "v1.x"`)
	}
	minor, err := strconv.Atoi(m[1])
	if err != nil {
		return Latest(), fmt.Errorf(`must be "latest" or "v1.x"`)
	}
	return MajorMinor(1, minor), nil
}

// CompareLevels is -1, 0 or +1 as a is less, as or more strict than b.
func CompareLevels(a, b Level) int {
	if a == b {
		return 0
	}
	switch a {
	case LevelPrivileged:
		return -1
	case LevelRestricted:
		return 1
	}
	switch b {
	case LevelPrivileged:
		return 1
	case LevelRestricted:
		return -1
	}
	return 0
}

// LevelVersion is one mode's setting, printed "restricted:latest".
type LevelVersion struct {
	Level   Level
	Version Version
}

func (lv LevelVersion) String() string { return fmt.Sprintf("%s:%s", lv.Level, lv.Version) }

// equivalent: both privileged (the version of privileged does not matter),
// or the same level and version.
func (lv LevelVersion) equivalent(o LevelVersion) bool {
	return (lv.Level == LevelPrivileged && o.Level == LevelPrivileged) || lv == o
}

// Policy is a namespace's effective setting for the three modes.
type Policy struct {
	Enforce, Audit, Warn LevelVersion
}

func (p Policy) fullyPrivileged() bool {
	return p.Enforce.Level == LevelPrivileged && p.Audit.Level == LevelPrivileged && p.Warn.Level == LevelPrivileged
}

func (p Policy) equivalent(o Policy) bool {
	return p.Enforce.equivalent(o.Enforce) && p.Audit.equivalent(o.Audit) && p.Warn.equivalent(o.Warn)
}

var labelsPath = field.NewPath("metadata", "labels")

// PolicyFromLabels is upstream's PolicyToEvaluate: the namespace labels
// over the defaults. A usable policy is always returned; bad labels are
// also reported as field errors: a bad enforce level reads as restricted
// (fail closed), a bad audit or warn level as privileged (fail open), a bad
// version as latest. An enforce level stricter than warn also sets warn
// unless warn is labelled, so users see what enforce will refuse.
func PolicyFromLabels(labels map[string]string, defaults Policy) (Policy, field.ErrorList) {
	p := defaults
	if len(labels) == 0 {
		return p, nil
	}
	var errs field.ErrorList
	bad := func(err error, label, value string) {
		if err != nil {
			errs = append(errs, field.Invalid(labelsPath.Key(label), value, err.Error()))
		}
	}
	var err error
	hasEnforceLevel := false
	if v, ok := labels[EnforceLevelLabel]; ok {
		p.Enforce.Level, err = ParseLevel(v)
		hasEnforceLevel = err == nil
		bad(err, EnforceLevelLabel, v)
	}
	if v, ok := labels[EnforceVersionLabel]; ok {
		p.Enforce.Version, err = ParseVersion(v)
		bad(err, EnforceVersionLabel, v)
	}
	if v, ok := labels[AuditLevelLabel]; ok {
		if p.Audit.Level, err = ParseLevel(v); err != nil {
			p.Audit.Level = LevelPrivileged
		}
		bad(err, AuditLevelLabel, v)
	}
	if v, ok := labels[AuditVersionLabel]; ok {
		p.Audit.Version, err = ParseVersion(v)
		bad(err, AuditVersionLabel, v)
	}
	_, hasWarnLevel := labels[WarnLevelLabel]
	if v, ok := labels[WarnLevelLabel]; ok {
		if p.Warn.Level, err = ParseLevel(v); err != nil {
			p.Warn.Level = LevelPrivileged
		}
		bad(err, WarnLevelLabel, v)
	}
	_, hasWarnVersion := labels[WarnVersionLabel]
	if v, ok := labels[WarnVersionLabel]; ok {
		p.Warn.Version, err = ParseVersion(v)
		bad(err, WarnVersionLabel, v)
	}
	if !hasWarnLevel && hasEnforceLevel && CompareLevels(p.Enforce.Level, p.Warn.Level) > 0 {
		p.Warn.Level = p.Enforce.Level
		if !hasWarnVersion {
			p.Warn.Version = p.Enforce.Version
		}
	}
	return p, errs
}

func joinQuote(items []string) string {
	if len(items) == 0 {
		return ""
	}
	return `"` + strings.Join(items, `", "`) + `"`
}

func pluralize(singular, plural string, n int) string {
	if n == 1 {
		return singular
	}
	return plural
}
