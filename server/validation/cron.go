package validation

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// cronField describes one of the five standard schedule fields.
type cronField struct {
	min, max int
	names    map[string]int
}

// The five fields of a standard schedule, in order. Names are accepted in
// any case, as the upstream parser accepts them.
var cronFields = [5]cronField{
	{min: 0, max: 59}, // minute
	{min: 0, max: 23}, // hour
	{min: 1, max: 31}, // day of month
	{min: 1, max: 12, names: map[string]int{ // month
		"jan": 1, "feb": 2, "mar": 3, "apr": 4, "may": 5, "jun": 6,
		"jul": 7, "aug": 8, "sep": 9, "oct": 10, "nov": 11, "dec": 12,
	}},
	{min: 0, max: 6, names: map[string]int{ // day of week
		"sun": 0, "mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6,
	}},
}

// cronMacros are the descriptors that stand for a whole schedule.
var cronMacros = map[string]bool{
	"@yearly": true, "@annually": true, "@monthly": true, "@weekly": true,
	"@daily": true, "@midnight": true, "@hourly": true,
}

// parseCronSchedule checks a standard five-field cron schedule the way the
// CronJob controller will read it, and returns an error worded like the
// upstream parser's when it cannot be read.
func parseCronSchedule(spec string) error {
	if spec == "" {
		return errors.New("empty spec string")
	}
	// A leading TZ= or CRON_TZ= names the schedule's time zone.
	if strings.HasPrefix(spec, "TZ=") || strings.HasPrefix(spec, "CRON_TZ=") {
		zone, rest, _ := strings.Cut(spec, " ")
		_, name, _ := strings.Cut(zone, "=")
		if _, err := time.LoadLocation(name); err != nil {
			return fmt.Errorf("provided bad location %s: %w", name, err)
		}
		spec = strings.TrimSpace(rest)
	}
	if strings.HasPrefix(spec, "@") {
		return parseCronDescriptor(spec)
	}
	fields := strings.Fields(spec)
	if len(fields) != len(cronFields) {
		return fmt.Errorf("expected exactly %d fields, found %d: %s", len(cronFields), len(fields), fields)
	}
	for i, f := range fields {
		for _, expr := range strings.Split(f, ",") {
			if err := parseCronRange(expr, cronFields[i]); err != nil {
				return err
			}
		}
	}
	return nil
}

func parseCronDescriptor(spec string) error {
	if cronMacros[spec] {
		return nil
	}
	if d, ok := strings.CutPrefix(spec, "@every "); ok {
		if _, err := time.ParseDuration(d); err != nil {
			return fmt.Errorf("failed to parse duration %s: %w", spec, err)
		}
		return nil
	}
	return fmt.Errorf("unrecognized descriptor: %s", spec)
}

// parseCronRange checks one list element: "*", "?", a value, a range
// "a-b", each optionally followed by a step "/n".
func parseCronRange(expr string, f cronField) error {
	rangeAndStep := strings.Split(expr, "/")
	if len(rangeAndStep) > 2 {
		return fmt.Errorf("too many slashes: %s", expr)
	}
	lowAndHigh := strings.Split(rangeAndStep[0], "-")
	if len(lowAndHigh) > 2 {
		return fmt.Errorf("too many hyphens: %s", expr)
	}
	start, end := f.min, f.max
	if lowAndHigh[0] != "*" && lowAndHigh[0] != "?" {
		var err error
		if start, err = cronValue(lowAndHigh[0], f); err != nil {
			return err
		}
		end = start
		if len(lowAndHigh) == 2 {
			if end, err = cronValue(lowAndHigh[1], f); err != nil {
				return err
			}
		} else if len(rangeAndStep) == 2 {
			// "n/step" means from n to the end of the field.
			end = f.max
		}
	}
	if len(rangeAndStep) == 2 {
		step, err := cronInt(rangeAndStep[1])
		if err != nil {
			return err
		}
		if step == 0 {
			return fmt.Errorf("step of range should be a positive number: %s", expr)
		}
	}
	switch {
	case start < f.min:
		return fmt.Errorf("beginning of range (%d) below minimum (%d): %s", start, f.min, expr)
	case end > f.max:
		return fmt.Errorf("end of range (%d) above maximum (%d): %s", end, f.max, expr)
	case start > end:
		return fmt.Errorf("beginning of range (%d) beyond end of range (%d): %s", start, end, expr)
	}
	return nil
}

func cronValue(s string, f cronField) (int, error) {
	if v, ok := f.names[strings.ToLower(s)]; ok {
		return v, nil
	}
	return cronInt(s)
}

func cronInt(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("failed to parse int from %s: %w", s, err)
	}
	if n < 0 {
		return 0, fmt.Errorf("negative number (%d) not allowed: %s", n, s)
	}
	return n, nil
}
