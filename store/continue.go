package store

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
)

// continueToken is what a List continue token carries: the snapshot revision
// and the first key of the next page. Backends share it so that a token from
// one server is understood by another.
type continueToken struct {
	Rev   int64  `json:"rev"`
	Start string `json:"start"`
}

// EncodeContinue makes a continue token for a page that resumes at start
// (inclusive) in the snapshot at rev.
func EncodeContinue(rev int64, start string) string {
	b, _ := json.Marshal(continueToken{Rev: rev, Start: start})
	return base64.RawURLEncoding.EncodeToString(b)
}

// DecodeContinue reads a continue token and checks that it belongs to prefix.
// Errors wrap ErrInvalidContinue.
func DecodeContinue(token, prefix string) (rev int64, start string, err error) {
	b, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return 0, "", fmt.Errorf("%w: %v", ErrInvalidContinue, err)
	}
	var t continueToken
	if err := json.Unmarshal(b, &t); err != nil {
		return 0, "", fmt.Errorf("%w: %v", ErrInvalidContinue, err)
	}
	if t.Rev <= 0 || !strings.HasPrefix(t.Start, prefix) {
		return 0, "", fmt.Errorf("%w: token is not for prefix %q", ErrInvalidContinue, prefix)
	}
	return t.Rev, t.Start, nil
}
