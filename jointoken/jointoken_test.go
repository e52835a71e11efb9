package jointoken

import (
	"errors"
	"net/http"
	"strings"
	"testing"
)

const hash = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    Token
		wantErr string
	}{
		{"full server token", "K10" + hash + "::server:s3cret", Token{CAHash: hash, ID: "server", Secret: "s3cret"}, ""},
		{"server secret may hold colons", "K10" + hash + "::server:a:b", Token{CAHash: hash, ID: "server", Secret: "a:b"}, ""},
		{"full bootstrap token", "K10" + hash + "::abcdef.0123456789abcdef", Token{CAHash: hash, ID: "abcdef", Secret: "0123456789abcdef"}, ""},
		{"bare bootstrap token", "abcdef.0123456789abcdef", Token{ID: "abcdef", Secret: "0123456789abcdef"}, ""},
		{"bare secret is the server secret", "my-password", Token{ID: "server", Secret: "my-password"}, ""},
		{"surrounding white space is trimmed", "  K10" + hash + "::server:x\n", Token{CAHash: hash, ID: "server", Secret: "x"}, ""},
		{"empty", "", Token{}, "empty"},
		{"short hash", "K10abc::server:x", Token{}, "64 lower-case hex"},
		{"upper-case hash", "K10" + strings.ToUpper(hash) + "::server:x", Token{}, "64 lower-case hex"},
		{"unknown user", "K10" + hash + "::admin:x", Token{}, `unknown user "admin"`},
		{"empty server secret", "K10" + hash + "::server:", Token{}, "empty secret"},
		{"bootstrap secret of the wrong length", "K10" + hash + "::abcdef.short", Token{}, "want K10<hash>::server:<secret>"},
		{"nothing after the hash", "K10" + hash + "::", Token{}, "nothing after"},
		{"white space inside", "my password", Token{}, "white space"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, ErrInvalid) {
					t.Fatalf("Parse(%q) error = %v, want one containing %q wrapping ErrInvalid", tt.in, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("Parse(%q) = %+v, want %+v", tt.in, got, tt.want)
			}
		})
	}
}

func TestStringRoundTrips(t *testing.T) {
	for _, tok := range []Token{
		{CAHash: hash, ID: "server", Secret: "abc"},
		{CAHash: hash, ID: "abcdef", Secret: "0123456789abcdef"},
		{ID: "server", Secret: "abc"},
	} {
		got, err := Parse(tok.String())
		if err != nil || got != tok {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", tok.String(), got, err, tok)
		}
	}
	if s := (Token{CAHash: hash, ID: "server", Secret: "abc"}).String(); s != "K10"+hash+"::server:abc" {
		t.Errorf("String = %q", s)
	}
}

func TestNewSecretsAreRandomAndValid(t *testing.T) {
	a, err := NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := NewSecret()
	if a == b || len(a) != 32 {
		t.Fatalf("secrets %q %q", a, b)
	}
	id, secret, err := NewBootstrap()
	if err != nil {
		t.Fatal(err)
	}
	tok, err := Parse("K10" + hash + "::" + id + "." + secret)
	if err != nil || tok.ID != id || tok.Secret != secret || !ValidID(id) {
		t.Fatalf("bootstrap token %s.%s parses to %+v, %v", id, secret, tok, err)
	}
}

func TestAuthHeadersRoundTrip(t *testing.T) {
	for _, tok := range []Token{{ID: "server", Secret: "pw"}, {ID: "abcdef", Secret: "0123456789abcdef"}} {
		r, _ := http.NewRequest(http.MethodPost, "https://x/", nil)
		tok.SetAuth(r)
		got, ok := FromRequest(r)
		if !ok || got != tok {
			t.Errorf("FromRequest after SetAuth(%+v) = %+v, %v", tok, got, ok)
		}
	}
	r, _ := http.NewRequest(http.MethodPost, "https://x/", nil)
	r.Header.Set("Authorization", "Bearer eyJhbGciOi.something")
	if _, ok := FromRequest(r); ok {
		t.Error("a JWT bearer token was read as a join token")
	}
}
