package main

import (
	"bytes"
	"context"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"skiff/server/join"
	"skiff/server/members"
	"skiff/store/raft"
)

// memberCluster is a members.Cluster in memory.
type memberCluster struct {
	mu      sync.Mutex
	members []raft.Member
	removed []string
}

func (c *memberCluster) Members(context.Context) ([]raft.Member, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.members), nil
}

func (c *memberCluster) RemoveMember(_ context.Context, id string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removed = append(c.removed, id)
	c.members = slices.DeleteFunc(c.members, func(m raft.Member) bool { return m.ID == id })
	return nil
}

// membersServer serves h over TLS and writes a kubeconfig trusting it.
func membersServer(t *testing.T, h http.Handler) (kubeconfig string) {
	t.Helper()
	srv := httptest.NewTLSServer(h)
	t.Cleanup(srv.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	path := filepath.Join(t.TempDir(), "kubeconfig.yaml")
	cfg := clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"skiff": {Server: srv.URL, CertificateAuthorityData: ca}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"admin": {Token: "secret"}},
		Contexts:       map[string]*clientcmdapi.Context{"skiff": {Cluster: "skiff", AuthInfo: "admin"}},
		CurrentContext: "skiff",
	}
	if err := clientcmd.WriteToFile(cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

func runMembers(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := newMembersCommand()
	cmd.SilenceUsage, cmd.SilenceErrors = true, true // as the root command
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(io.Discard)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(t.Context())
	return out.String(), err
}

func TestMembersCommand(t *testing.T) {
	tests := []struct {
		name        string
		members     []raft.Member
		args        []string // after --kubeconfig
		env         bool     // the kubeconfig as $KUBECONFIG instead of --kubeconfig
		wantOut     string
		wantErr     string
		wantRemoved []string
	}{
		{
			name: "list prints a table of the members", args: []string{"list"},
			members: []raft.Member{{ID: "s2", Address: "10.0.0.2:2380", Voter: true}, {ID: "s1", Address: "10.0.0.1:2380", Voter: true, Leader: true}, {ID: "s3", Address: "10.0.0.3:2380"}},
			wantOut: "NAME   ADDRESS         VOTER   LEADER\n" +
				"s1     10.0.0.1:2380   true    true\n" +
				"s2     10.0.0.2:2380   true    false\n" +
				"s3     10.0.0.3:2380   false   false\n",
		},
		{
			name: "list finds the kubeconfig in $KUBECONFIG", args: []string{"ls"}, env: true,
			members: []raft.Member{{ID: "s1", Address: "10.0.0.1:2380", Voter: true, Leader: true}},
			wantOut: "NAME   ADDRESS         VOTER   LEADER\ns1     10.0.0.1:2380   true    true\n",
		},
		{
			name: "remove removes the member", args: []string{"remove", "s2"},
			members: []raft.Member{{ID: "s1", Voter: true}, {ID: "s2", Voter: true}},
			wantOut: "member s2 removed\n", wantRemoved: []string{"s2"},
		},
		{
			name: "remove of no such member shows the server's message", args: []string{"remove", "nope"},
			members: []raft.Member{{ID: "s1", Voter: true}, {ID: "s2", Voter: true}},
			wantErr: `members "nope" not found`,
		},
		{
			name: "remove of the last member shows the server's message", args: []string{"rm", "s1"}, env: true,
			members: []raft.Member{{ID: "s1", Voter: true}},
			wantErr: `cannot remove "s1": it is the cluster's only member`,
		},
		{
			name: "remove of a name with a slash is refused", args: []string{"remove", "a/b"},
			wantErr: `invalid member name "a/b"`,
		},
		{
			name: "remove needs a name", args: []string{"remove"},
			wantErr: "accepts 1 arg(s), received 0",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &memberCluster{members: tt.members}
			path := membersServer(t, members.Handler(c))
			args := append([]string{"--kubeconfig", path}, tt.args...)
			if tt.env {
				t.Setenv(clientcmd.RecommendedConfigPathEnvVar, path)
				args = tt.args
			}
			out, err := runMembers(t, args...)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("members %q: %v", args, err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("members %q = %v, want an error containing %q", args, err, tt.wantErr)
			}
			if out != tt.wantOut {
				t.Errorf("output:\n%s\nwant:\n%s", out, tt.wantOut)
			}
			if !slices.Equal(c.removed, tt.wantRemoved) {
				t.Errorf("removed %q, want %q", c.removed, tt.wantRemoved)
			}
		})
	}
}

// A server that does not mount the members API answers its router's 404:
// the command says what that means rather than ` "" not found`.
func TestMembersCommand_ServerWithoutMembersAPI(t *testing.T) {
	path := membersServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"\"\" not found","reason":"NotFound","details":{},"code":404}`)
	}))
	_, err := runMembers(t, "--kubeconfig", path, "list")
	if err == nil || !strings.Contains(err.Error(), "does not serve /v1-skiff/members") {
		t.Fatalf("list = %v, want it to say the server does not serve the members API", err)
	}
}

func TestMembersKubeconfigPath(t *testing.T) {
	for _, tc := range []struct {
		flag, env, want string
	}{
		{flag: "/tmp/k.yaml", env: "/env.yaml", want: "/tmp/k.yaml"},
		{env: "/env.yaml", want: ""}, // the loading rules read $KUBECONFIG
		{want: join.DefaultKubeconfig},
	} {
		getenv := func(k string) string {
			if k == "KUBECONFIG" {
				return tc.env
			}
			return ""
		}
		if got := membersKubeconfigPath(tc.flag, getenv); got != tc.want {
			t.Errorf("membersKubeconfigPath(%q) with KUBECONFIG=%q = %q, want %q", tc.flag, tc.env, got, tc.want)
		}
	}
}

// Under `skiff server`, as main.go mounts it: the server's flags and
// config-file handling do not get in the way.
func TestMembersCommand_UnderServerCommand(t *testing.T) {
	path := membersServer(t, members.Handler(&memberCluster{members: []raft.Member{{ID: "s1", Address: "10.0.0.1:2380", Voter: true, Leader: true}}}))
	root := newRootCommand()
	if srv := findCommand(root, "server"); findCommand(srv, "members") == nil { // until main.go adds it
		srv.AddCommand(newMembersCommand())
	}
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(io.Discard)
	root.SetArgs([]string{"server", "members", "list", "--kubeconfig", path})
	if err := root.ExecuteContext(t.Context()); err != nil {
		t.Fatal(err)
	}
	if want := "NAME   ADDRESS         VOTER   LEADER\ns1     10.0.0.1:2380   true    true\n"; out.String() != want {
		t.Errorf("output:\n%s\nwant:\n%s", out.String(), want)
	}
}

func findCommand(parent *cobra.Command, name string) *cobra.Command {
	for _, c := range parent.Commands() {
		if c.Name() == name {
			return c
		}
	}
	return nil
}
