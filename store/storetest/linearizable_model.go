package storetest

import (
	"fmt"
	"hash/fnv"

	"github.com/anishathalye/porcupine"
)

// The sequential specification CheckLinearizable checks histories against:
// one key of a store.Store. Histories are partitioned by key, so the model
// sees only the writes of its own key; the revisions other keys' writes take
// in between are invisible to it. It therefore knows a key's next write gets
// a revision greater than the key's last one, not that it gets exactly the
// next one — the global ordering of revisions across keys is checked apart
// (checkRevisionOrder), in real-time order, from the same history.

// lzKind is the kind of one recorded operation.
type lzKind uint8

const (
	lzGet lzKind = iota
	lzCreate
	lzUpdate // Expected 0: unguarded
	lzDelete // Expected 0: unguarded
)

func (k lzKind) String() string {
	return [...]string{"get", "create", "update", "delete"}[k]
}

// lzInput is a call. Values are unique per write, so a read names the write
// it saw.
type lzInput struct {
	Kind     lzKind
	Key      string
	Value    string // Create, Update
	Expected int64  // Update, Delete: the guard (0: none)
}

// lzOutcome is what the store answered.
type lzOutcome uint8

const (
	lzOK lzOutcome = iota
	lzNotFound
	lzExists
	lzConflict
	// lzUnknown: a write that failed with something other than a definite
	// answer (timeout, ErrUnavailable, a connection error): it may or may not
	// have been applied, and if it was, its revision is unknown.
	lzUnknown
)

func (o lzOutcome) String() string {
	return [...]string{"ok", "not-found", "exists", "conflict", "unknown"}[o]
}

// NotReported, as a store.KeyValue's CreateRevision or a Delete's
// revision, says the client cannot tell it: a store.Store adapter over the
// Kubernetes API returns it (resourceVersion is the ModRevision; there is no
// CreateRevision, and a delete answers a Status without one). The model
// then checks what is reported and nothing more.
const NotReported = -1

// lzOutput is a return. The KeyValue fields carry, per kind and outcome:
// Get ok — the value read; Create/Update ok — the new key; Delete ok — the
// previous key (and DeleteRev the delete's revision); conflict — the key's
// current state (ModRev 0 when the backend returned none).
type lzOutput struct {
	Outcome   lzOutcome
	Value     string
	CreateRev int64
	ModRev    int64
	DeleteRev int64
}

// keyState is one possible state of a key. It is a comparable value, so
// porcupine's == and the power-set construction of NondeterministicModel
// work on it directly.
type keyState struct {
	Exists bool
	Value  string
	// Rev is the revision of the key's last write (create, update or
	// delete; before any write, the store's revision when the run began).
	// Exact when RevKnown; otherwise the least it can be, because the last
	// write had an unknown outcome — its revision is then "greater than the
	// previous one", fixed by the next read that returns it.
	Rev      int64
	RevKnown bool
	// CreateIsLast: the key's last write created it, so its CreateRevision
	// is Rev. Otherwise Create is the CreateRevision, exact when
	// CreateKnown, else its least possible value.
	CreateIsLast bool
	Create       int64
	CreateKnown  bool
}

// fixRev says the key's last write has revision m.
func (s keyState) fixRev(m int64) (keyState, bool) {
	if s.RevKnown {
		return s, m == s.Rev
	}
	if m < s.Rev {
		return s, false
	}
	s.Rev, s.RevKnown = m, true
	return s, true
}

// fixCreate says the key's CreateRevision is c; call it after fixRev.
// c < 0 is "not reported": the Kubernetes API has no CreateRevision, so a
// client of it (NotReported) leaves it unchecked.
func (s keyState) fixCreate(c int64) (keyState, bool) {
	switch {
	case c < 0:
		return s, true
	case s.CreateIsLast:
		return s.fixRev(c)
	case s.CreateKnown:
		return s, c == s.Create
	case c < s.Create || (s.RevKnown && c >= s.Rev):
		return s, false
	}
	s.Create, s.CreateKnown = c, true
	return s, true
}

// matchKV says the key currently is (value, c, m).
func (s keyState) matchKV(value string, c, m int64) (keyState, bool) {
	if !s.Exists || s.Value != value {
		return s, false
	}
	s, ok := s.fixRev(m)
	if !ok {
		return s, false
	}
	return s.fixCreate(c)
}

// guard applies a CAS guard of a write the store applied.
func (s keyState) guard(expected int64) (keyState, bool) {
	if expected == 0 {
		return s, true
	}
	return s.fixRev(expected)
}

// overwrite is the state after an update or delete. rev 0: the write's
// outcome was unknown, so its revision is only known to exceed the last one.
func (s keyState) overwrite(exists bool, value string, rev int64) keyState {
	if s.CreateIsLast {
		s.CreateIsLast, s.Create, s.CreateKnown = false, s.Rev, s.RevKnown
	}
	if rev == 0 {
		s.Rev, s.RevKnown = s.Rev+1, false
	} else {
		s.Rev, s.RevKnown = rev, true
	}
	s.Exists, s.Value = exists, value
	if !exists {
		s.Value, s.Create, s.CreateKnown = "", 0, false
	}
	return s
}

func (s keyState) create(value string, rev int64) keyState {
	s = s.overwrite(true, value, rev)
	s.CreateIsLast, s.Create, s.CreateKnown = true, 0, false
	return s
}

// stepKey is the specification: the states the key can be in after in
// returned out, starting from s; none when the step is impossible.
func stepKey(s keyState, in lzInput, out lzOutput) []keyState {
	if out.Outcome == lzUnknown {
		return stepUnknown(s, in)
	}
	switch out.Outcome {
	case lzNotFound:
		return when(s, !s.Exists && in.Kind != lzCreate)
	case lzExists:
		return when(s, s.Exists && in.Kind == lzCreate)
	case lzConflict:
		return stepConflict(s, in, out)
	}
	switch in.Kind {
	case lzGet:
		s, ok := s.matchKV(out.Value, out.CreateRev, out.ModRev)
		return when(s, ok)
	case lzCreate:
		ok := !s.Exists && out.Value == in.Value && out.CreateRev == out.ModRev && out.ModRev > s.Rev
		return when(s.create(in.Value, out.ModRev), ok)
	case lzUpdate:
		if !s.Exists || out.Value != in.Value {
			return nil
		}
		s, ok := s.guard(in.Expected)
		if !ok {
			return nil
		}
		if s, ok = s.fixCreate(out.CreateRev); !ok || out.ModRev <= s.Rev {
			return nil
		}
		return []keyState{s.overwrite(true, in.Value, out.ModRev)}
	case lzDelete:
		s, ok := s.guard(in.Expected)
		if !ok {
			return nil
		}
		if out.DeleteRev == NotReported {
			// The client learns only that the delete happened (the
			// Kubernetes API answers a Status): the key existed, and its
			// delete took some revision after its last write.
			return when(s.overwrite(false, "", 0), s.Exists)
		}
		if s, ok = s.matchKV(out.Value, out.CreateRev, out.ModRev); !ok || out.DeleteRev <= s.Rev {
			return nil
		}
		return []keyState{s.overwrite(false, "", out.DeleteRev)}
	}
	return nil
}

// stepConflict: a guarded write refused because the key's ModRevision was
// not the expected one; the store returned the current state (if any).
func stepConflict(s keyState, in lzInput, out lzOutput) []keyState {
	if !s.Exists || in.Expected == 0 || (in.Kind != lzUpdate && in.Kind != lzDelete) {
		return nil
	}
	if out.ModRev == 0 { // no state returned: only the guard can be checked
		return when(s, !s.RevKnown || s.Rev != in.Expected)
	}
	if out.ModRev == in.Expected {
		return nil
	}
	s, ok := s.matchKV(out.Value, out.CreateRev, out.ModRev)
	return when(s, ok)
}

// stepUnknown: a write that may have been applied. Porcupine gives it a
// return at the end of the history, so "not applied" is the linearization
// that puts it last; here it is applied at its linearization point, with a
// revision only known to be greater than the key's last.
func stepUnknown(s keyState, in lzInput) []keyState {
	switch in.Kind {
	case lzCreate:
		if s.Exists {
			return []keyState{s} // would fail with ErrExists
		}
		return []keyState{s.create(in.Value, 0)}
	case lzUpdate, lzDelete:
		if !s.Exists {
			return []keyState{s} // would fail with ErrNotFound
		}
		apply := func(s keyState) keyState {
			if in.Kind == lzDelete {
				return s.overwrite(false, "", 0)
			}
			return s.overwrite(true, in.Value, 0)
		}
		switch {
		case in.Expected == 0 || (s.RevKnown && s.Rev == in.Expected):
			return []keyState{apply(s)}
		case s.RevKnown || in.Expected < s.Rev:
			return []keyState{s} // would fail with ErrConflict
		}
		// The revision is unknown but may be the expected one: both. (The
		// refused branch forgets "Rev != Expected"; a slight leniency.)
		applied, _ := s.fixRev(in.Expected)
		return []keyState{s, apply(applied)}
	}
	return []keyState{s} // an unknown read has no effect
}

func when(s keyState, ok bool) []keyState {
	if !ok {
		return nil
	}
	return []keyState{s}
}

// keyModel is the porcupine model of the keys of one run; startRev is the
// store's revision before the run, which every write of the run exceeds.
func keyModel(startRev int64) porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Partition: partitionByKey,
		Init: func() []interface{} {
			return []interface{}{keyState{Rev: startRev, RevKnown: true}}
		},
		Step: func(state, input, output interface{}) []interface{} {
			next := stepKey(state.(keyState), input.(lzInput), output.(lzOutput))
			states := make([]interface{}, len(next))
			for i, s := range next {
				states[i] = s
			}
			return states
		},
		Hash: func(state interface{}) uint64 {
			h := fnv.New64a()
			fmt.Fprintf(h, "%+v", state.(keyState))
			return h.Sum64()
		},
		DescribeOperation: describeOperation,
		DescribeState:     describeState,
	}
	return nm.ToModel()
}

func partitionByKey(history []porcupine.Operation) [][]porcupine.Operation {
	byKey := map[string]int{}
	var parts [][]porcupine.Operation
	for _, op := range history {
		key := op.Input.(lzInput).Key
		i, ok := byKey[key]
		if !ok {
			i = len(parts)
			byKey[key] = i
			parts = append(parts, nil)
		}
		parts[i] = append(parts[i], op)
	}
	return parts
}

func describeOperation(input, output interface{}) string {
	in, out := input.(lzInput), output.(lzOutput)
	call := fmt.Sprintf("%s(%s", in.Kind, in.Key)
	if in.Value != "" {
		call += ", " + in.Value
	}
	if in.Kind == lzUpdate || in.Kind == lzDelete {
		call += fmt.Sprintf(", rev=%d", in.Expected)
	}
	call += ")"
	switch {
	case out.Outcome != lzOK && out.ModRev == 0:
		return call + " -> " + out.Outcome.String()
	case out.Outcome != lzOK:
		return fmt.Sprintf("%s -> %s (now %s c=%d m=%d)", call, out.Outcome, out.Value, out.CreateRev, out.ModRev)
	case in.Kind == lzDelete:
		return fmt.Sprintf("%s -> rev %d (was %s c=%d m=%d)", call, out.DeleteRev, out.Value, out.CreateRev, out.ModRev)
	}
	return fmt.Sprintf("%s -> %s c=%d m=%d", call, out.Value, out.CreateRev, out.ModRev)
}

func describeState(state interface{}) string {
	s := state.(keyState)
	rev := fmt.Sprint(s.Rev)
	if !s.RevKnown {
		rev = fmt.Sprintf(">=%d", s.Rev)
	}
	if !s.Exists {
		return "absent, last write " + rev
	}
	create := "=m"
	if !s.CreateIsLast {
		create = fmt.Sprint(s.Create)
		if !s.CreateKnown {
			create = ">=" + create
		}
	}
	return fmt.Sprintf("%s c=%s m=%s", s.Value, create, rev)
}
