package bootstrapdata

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"skiff/store"
	"skiff/store/sqlite"
)

func openStore(t *testing.T) store.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(t.TempDir(), "state.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func TestSeal_Unseal_RoundTripsAndWrongTokenIsRefused(t *testing.T) {
	files := map[string][]byte{"ca.crt": []byte("CERT"), "ca.key": []byte("KEY")}
	blob, err := Seal("s3cret", files)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(blob, []byte("KEY")) || bytes.Contains(blob, []byte("S0VZ")) { // plain or base64
		t.Fatalf("sealed data shows the key: %s", blob)
	}
	got, err := Unseal("s3cret", blob)
	if err != nil || string(got["ca.key"]) != "KEY" || string(got["ca.crt"]) != "CERT" {
		t.Fatalf("Unseal = %q, %v", got, err)
	}
	if _, err := Unseal("other", blob); !errors.Is(err, ErrWrongToken) {
		t.Fatalf("Unseal with another token: %v, want ErrWrongToken", err)
	}
	for name, bad := range map[string][]byte{"not json": []byte("{"), "unknown version": []byte(`{"version":9}`)} {
		if _, err := Unseal("s3cret", bad); err == nil || errors.Is(err, ErrWrongToken) {
			t.Errorf("%s: Unseal = %v, want a malformed-data error", name, err)
		}
	}
	if _, err := Seal("", files); err == nil {
		t.Error("Seal with an empty secret succeeded")
	}
}

func TestPublish_FirstWriterWins_OthersReceiveItsFiles(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	if _, found, err := Fetch(ctx, st, "tok"); err != nil || found {
		t.Fatalf("Fetch on an empty store = %v, %v; want not found", found, err)
	}
	first := map[string][]byte{"ca.crt": []byte("first")}
	stored, won, err := Publish(ctx, st, "tok", first)
	if err != nil || !won || string(stored["ca.crt"]) != "first" {
		t.Fatalf("first Publish = %q %v %v", stored, won, err)
	}
	stored, won, err = Publish(ctx, st, "tok", map[string][]byte{"ca.crt": []byte("second")})
	if err != nil || won || string(stored["ca.crt"]) != "first" {
		t.Fatalf("second Publish = %q %v %v, want the first server's files, not won", stored, won, err)
	}
	got, found, err := Fetch(ctx, st, "tok")
	if err != nil || !found || string(got["ca.crt"]) != "first" {
		t.Fatalf("Fetch = %q %v %v", got, found, err)
	}
}

func TestFetch_AnotherTokensData_IsRefusedByName(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	if _, _, err := Publish(ctx, st, "tok", map[string][]byte{"ca.crt": []byte("x")}); err != nil {
		t.Fatal(err)
	}
	_, found, err := Fetch(ctx, st, "wrong")
	if !errors.Is(err, ErrOtherCluster) || found {
		t.Fatalf("Fetch with another token = %v %v, want ErrOtherCluster", found, err)
	}
	if !strings.Contains(err.Error(), "server/token") {
		t.Errorf("error does not say where the right token is: %v", err)
	}
	// A tampered value under the right key is not trusted.
	if _, err := st.Update(ctx, Key("tok"), []byte(`{"version":1,"salt":"AAAA","nonce":"AAAAAAAAAAAAAAAA","data":"AAAA"}`), 0); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Fetch(ctx, st, "tok"); !errors.Is(err, ErrWrongToken) {
		t.Fatalf("Fetch of tampered data = %v, want ErrWrongToken", err)
	}
}
