package cel

import (
	"regexp"
)

// celReservedSymbols are the CEL keywords and reserved words; a property
// so named is reachable as __name__ (and, for field selection, by its
// plain name too).
var celReservedSymbols = map[string]bool{
	"true": true, "false": true, "null": true, "in": true,
	"as": true, "break": true, "const": true, "continue": true, "else": true,
	"for": true, "function": true, "if": true, "import": true, "let": true,
	"loop": true, "package": true, "namespace": true, "return": true,
	"var": true, "void": true, "while": true,
}

var expandMatcher = regexp.MustCompile(`(__|[-./]|[^a-zA-Z0-9-./_])`)

// Escape maps a property name to the CEL identifier rules use for it, as
// upstream does: "__" -> "__underscores__", "." -> "__dot__", "-" ->
// "__dash__", "/" -> "__slash__", reserved words -> "__word__". Names
// starting with a digit or holding other characters are not accessible
// (false).
func Escape(ident string) (string, bool) {
	if len(ident) == 0 || ('0' <= ident[0] && ident[0] <= '9') {
		return "", false
	}
	if celReservedSymbols[ident] {
		return "__" + ident + "__", true
	}
	needsRegex := false
	prevUnderscore := false
	for _, c := range ident {
		switch {
		case c == '/' || c == '-' || c == '.':
			needsRegex = true
		case c == '_':
			if prevUnderscore {
				needsRegex = true
			}
		case ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9'):
		default:
			return "", false
		}
		prevUnderscore = c == '_'
	}
	if !needsRegex {
		return ident, true
	}
	ok := true
	ident = expandMatcher.ReplaceAllStringFunc(ident, func(s string) string {
		switch s {
		case "__":
			return "__underscores__"
		case ".":
			return "__dot__"
		case "-":
			return "__dash__"
		case "/":
			return "__slash__"
		}
		ok = false
		return ""
	})
	if !ok {
		return "", false
	}
	return ident, true
}

var unexpandMatcher = regexp.MustCompile(`(_{2}[^_]+_{2})`)

// Unescape reverses Escape.
func Unescape(escaped string) (string, bool) {
	ok := true
	escaped = unexpandMatcher.ReplaceAllStringFunc(escaped, func(s string) string {
		contents := s[2 : len(s)-2]
		switch contents {
		case "underscores":
			return "__"
		case "dot":
			return "."
		case "dash":
			return "-"
		case "slash":
			return "/"
		}
		if celReservedSymbols[contents] {
			if len(s) != len(escaped) {
				ok = false
			}
			return contents
		}
		ok = false
		return ""
	})
	if !ok {
		return "", false
	}
	return escaped, true
}
