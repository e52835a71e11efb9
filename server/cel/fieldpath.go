package cel

import (
	"bufio"
	"errors"
	"fmt"
	"regexp"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var errInvalidField = errors.New("does not refer to a valid field")

// ValidFieldPath parses a rule's fieldPath (".a.b", ".m['key']") against
// the schema it is declared on, as upstream does, and returns it as a
// field.Path relative to that schema. allowArrayNotation=false rejects the
// ['...'] form (selectable fields use it so).
func ValidFieldPath(jsonPath string, s *apiextensionsv1.JSONSchemaProps, allowArrayNotation bool) (*field.Path, *apiextensionsv1.JSONSchemaProps, error) {
	var path *field.Path
	appendToPath := func(name string, isNamed bool) error {
		if !isNamed {
			path = path.Key(name)
			s = additionalSchema(s)
			return nil
		}
		path = path.Child(name)
		p, ok := s.Properties[name]
		if !ok {
			return errInvalidField
		}
		s = &p
		return nil
	}
	next := func(name string) error {
		switch {
		case s == nil:
			return errInvalidField
		case s.Properties != nil:
			return appendToPath(name, true)
		case s.AdditionalProperties != nil:
			return appendToPath(name, false)
		}
		return errInvalidField
	}

	scanner := bufio.NewScanner(strings.NewReader(jsonPath))
	scanner.Split(splitFieldPath)
	for scanner.Scan() {
		switch tok := scanner.Text(); tok {
		case "[":
			if !allowArrayNotation {
				return nil, nil, fmt.Errorf("array notation is not allowed")
			}
			if !scanner.Scan() {
				return nil, nil, fmt.Errorf("unexpected end of JSON path")
			}
			tok = scanner.Text()
			if len(tok) < 2 || tok[0] != '\'' || tok[len(tok)-1] != '\'' {
				return nil, nil, fmt.Errorf("expected single quoted string but got %s", tok)
			}
			unescaped, err := unescapeSingleQuote(tok[1 : len(tok)-1])
			if err != nil {
				return nil, nil, fmt.Errorf("invalid string literal: %w", err)
			}
			if err := next(unescaped); err != nil {
				return nil, nil, err
			}
			if !scanner.Scan() {
				return nil, nil, fmt.Errorf("unexpected end of JSON path")
			}
			if tok = scanner.Text(); tok != "]" {
				return nil, nil, fmt.Errorf("expected ] but got %s", tok)
			}
		case ".":
			if !scanner.Scan() {
				return nil, nil, fmt.Errorf("unexpected end of JSON path")
			}
			if err := next(scanner.Text()); err != nil {
				return nil, nil, err
			}
		default:
			return nil, nil, fmt.Errorf("expected [ or . but got: %s", tok)
		}
	}
	return path, s, nil
}

// splitFieldPath returns '.', '[' and ']' as tokens of their own, quoted
// strings whole, and the text between delimiters.
func splitFieldPath(data []byte, atEOF bool) (int, []byte, error) {
	if len(data) == 0 {
		return 0, nil, nil
	}
	for i := 0; i < len(data); i++ {
		if data[0] == '\'' {
			if i > 0 && data[i] == '\'' && data[i-1] != '\\' {
				return i + 1, data[:i+1], nil
			}
			continue
		}
		switch data[i] {
		case '.', '[', ']':
			if i == 0 {
				return 1, data[:1], nil
			}
			return i, data[:i], nil
		}
	}
	if atEOF {
		return len(data), data, nil
	}
	return 0, nil, nil
}

var unescapeMatcher = regexp.MustCompile(`\\.`)

func unescapeSingleQuote(s string) (string, error) {
	var err error
	unescaped := unescapeMatcher.ReplaceAllStringFunc(s, func(m string) string {
		switch m[1] {
		case 'a':
			return "\a"
		case 'b':
			return "\b"
		case 'f':
			return "\f"
		case 'n':
			return "\n"
		case 'r':
			return "\r"
		case 't':
			return "\t"
		case 'v':
			return "\v"
		case '\'':
			return "'"
		case '\\':
			return "\\"
		}
		err = fmt.Errorf("invalid escape char %s", m)
		return ""
	})
	return unescaped, err
}
