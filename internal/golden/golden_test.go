package golden

import (
	"strings"
	"testing"
)

func TestLineDiff_MissingAndExtraLinesMarked_ReorderShowsBoth(t *testing.T) {
	if d := LineDiff("a\nb\n", "a\nc\n"); !strings.Contains(d, "- b") || !strings.Contains(d, "+ c") || strings.Contains(d, "a") {
		t.Errorf("diff %q", d)
	}
	if d := LineDiff("a\nb\n", "b\na\n"); !strings.Contains(d, "different order") {
		t.Errorf("reorder diff %q", d)
	}
}
