package stream

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writeCRILog writes records "<time> <stream> <tag> <text>" one second apart
// starting at base.
func writeCRILog(t *testing.T, path string, base time.Time, records ...string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for i, r := range records {
		ts := base.Add(time.Duration(i) * time.Second).UTC().Format(time.RFC3339Nano)
		if _, err := fmt.Fprintf(f, "%s %s\n", ts, r); err != nil {
			t.Fatal(err)
		}
	}
}

func TestContainerLogs_QueryOptions(t *testing.T) {
	ts := startTestServer(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "0.log")
	base := time.Date(2026, 1, 2, 3, 4, 5, 600, time.UTC)
	writeCRILog(t, path, base,
		"stdout F one",
		"stderr F two",
		"stdout P thr",
		"stdout F ee",
		"stdout F four",
	)
	ts.pods.set("ns1/web/logs", ContainerRef{ID: "c9", LogPath: path})
	prevPath := filepath.Join(dir, "prev.log")
	writeCRILog(t, prevPath, base, "stdout F before the restart")
	ts.pods.set("ns1/web/logs/previous", ContainerRef{ID: "c8", LogPath: prevPath})
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: ts.tlsConfig(t, DefaultClientCN)}, Timeout: 10 * time.Second}
	since := base.Add(2 * time.Second).Format(time.RFC3339)
	tests := []struct {
		name  string
		query string
		want  string
		code  int
	}{
		{"whole log with partial lines joined", "", "one\ntwo\nthree\nfour\n", 200},
		{"tailLines keeps the last lines", "tailLines=2", "three\nfour\n", 200},
		{"tailLines=0 is empty", "tailLines=0", "", 200},
		{"limitBytes cuts the output", "limitBytes=6", "one\ntw", 200},
		{"timestamps prefix each line", "timestamps=true&tailLines=1",
			base.Add(4*time.Second).Format(time.RFC3339Nano) + " four\n", 200},
		{"sinceTime drops older lines", "sinceTime=" + since, "three\nfour\n", 200},
		{"previous reads the last terminated container", "previous=true", "before the restart\n", 200},
		{"a bad tailLines is rejected", "tailLines=x", "", 400},
		{"sinceTime and sinceSeconds together are rejected", "sinceSeconds=5&sinceTime=" + since, "", 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := client.Get(ts.url + "/containerLogs/ns1/web/logs?" + tt.query)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.code {
				t.Fatalf("status %d (%s), want %d", resp.StatusCode, body, tt.code)
			}
			if tt.code == 200 && string(body) != tt.want {
				t.Fatalf("body %q, want %q", body, tt.want)
			}
		})
	}
}

func TestContainerLogs_FollowEndsWhenTheContainerStops(t *testing.T) {
	ts := startTestServer(t)
	path := filepath.Join(t.TempDir(), "0.log")
	base := time.Now().Add(-time.Minute)
	writeCRILog(t, path, base, "stdout F first", "stdout F second")
	ts.pods.set("ns1/web/follow", ContainerRef{ID: "c5", LogPath: path, Running: true})
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: ts.tlsConfig(t, DefaultClientCN)}}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ts.url+"/containerLogs/ns1/web/follow?follow=true&tailLines=1", nil)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := bufio.NewReader(resp.Body)
	expect := func(want string) {
		t.Helper()
		got, err := lines.ReadString('\n')
		if err != nil || got != want {
			t.Fatalf("read %q, %v; want %q", got, err, want)
		}
	}
	expect("second\n")
	writeCRILog(t, path, time.Now(), "stdout F third")
	expect("third\n")
	writeCRILog(t, path, time.Now(), "stderr F last words")
	ts.pods.set("ns1/web/follow", ContainerRef{ID: "c5", LogPath: path, Running: false})
	expect("last words\n")
	rest, err := io.ReadAll(lines)
	if err != nil || strings.TrimSpace(string(rest)) != "" {
		t.Fatalf("after the container stopped: %q, %v; want the end of the stream", rest, err)
	}
}
