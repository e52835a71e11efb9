package podenv

import (
	"fmt"
	"strings"
)

// Expand replaces $(VAR) references in s the way the kubelet does for env
// values, command and args: lookup returns a variable's value and whether it
// is defined; an undefined reference stays as written; "$$" is an escaped
// "$" (so "$$(VAR)" yields the literal "$(VAR)"); a "$" not followed by "("
// or "$", and an unterminated "$(", are kept as is.
func Expand(s string, lookup func(name string) (string, bool)) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch next := s[i+1]; next {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString("$(")
				i++
				continue
			}
			name := s[i+2 : i+2+end]
			if v, ok := lookup(name); ok {
				b.WriteString(v)
			} else {
				b.WriteString("$(" + name + ")")
			}
			i += 2 + end
		default:
			b.WriteByte('$')
			b.WriteByte(next)
			i++
		}
	}
	return b.String()
}

// IsEnvVarName reports whether name may be an environment variable name
// with Kubernetes 1.34+'s relaxed rule (RelaxedEnvironmentVariableValidation,
// GA): not empty, printable ASCII only, no '='. envFrom keys failing it are
// skipped.
func IsEnvVarName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c < 0x20 || c > 0x7e || c == '=' {
			return false
		}
	}
	return true
}

// envMap turns KEY=VALUE entries into a map (a later entry wins).
func envMap(env []string) map[string]string {
	m := make(map[string]string, len(env))
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return m
}

// ExpandCommand expands $(VAR) in a container's command or args against
// its resolved environment (KEY=VALUE, as Resolve returns), as the kubelet
// does before starting it; undefined references stay as written. A nil
// slice stays nil (the image's ENTRYPOINT/CMD then apply).
func ExpandCommand(args []string, env []string) []string {
	if args == nil {
		return nil
	}
	m := envMap(env)
	lookup := func(name string) (string, bool) { v, ok := m[name]; return v, ok }
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = Expand(a, lookup)
	}
	return out
}

// ExpandSubPath expands a volumeMount's subPathExpr against the
// container's resolved environment; a reference to a variable that is
// undefined or empty is an error naming it, as upstream.
func ExpandSubPath(expr string, env []string) (string, error) {
	m := envMap(env)
	var missing []string
	out := Expand(expr, func(name string) (string, bool) {
		v := m[name]
		if v == "" {
			missing = append(missing, name)
		}
		return v, true
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("subPathExpr %q: missing value for %s", expr, strings.Join(missing, ", "))
	}
	return out, nil
}
