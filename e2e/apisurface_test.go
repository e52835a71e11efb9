package e2e

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// notYetServed are upstream resources that belong to later issues and that
// skiff must not serve until it enforces them ("accepted means enforced"):
// the test fails if one is served while still listed here, so each leaves
// this list with the issue that builds it.
var notYetServed = map[string]string{}

// notPreferred are the group-versions that are not their group's preferred
// version upstream (api/discovery/apis.json): kubectl api-resources lists a
// group's resources at its preferred version only.
var notPreferred = map[string]bool{"autoscaling/v1": true}

// apiResource is one line of the recorded upstream list: a resource or a
// subresource of one group-version.
type apiResource struct {
	gv, name, kind, verbs, shortNames string
	namespaced                        bool
}

func (r apiResource) key() string { return r.gv + " " + r.name }

func upstreamResources(t *testing.T) []apiResource {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "upstream-api-resources-v1.37.2.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []apiResource
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		p := strings.Fields(line)
		if len(p) != 6 {
			t.Fatalf("bad line %q", line)
		}
		out = append(out, apiResource{gv: p[0], name: p[1], namespaced: p[2] == "true", kind: p[3], verbs: p[4], shortNames: dash(p[5])})
	}
	return out
}

func dash(s string) string {
	if s == "-" {
		return ""
	}
	return s
}

// TestAPIResources_MatchUpstreamDefaultServer compares what skiff serves with
// what a default kube-apiserver v1.37.2 serves, through kubectl 1.27 and 1.33
// (api-resources -o wide, api-versions) and through raw discovery (which also
// lists subresources and their verbs).
func TestAPIResources_MatchUpstreamDefaultServer(t *testing.T) {
	c := startCluster(t)
	want := map[string]apiResource{}
	wantGVs := map[string]bool{}
	for _, r := range upstreamResources(t) {
		if _, pending := notYetServed[r.key()]; pending {
			continue
		}
		want[r.key()] = r
		wantGVs[r.gv] = true
	}
	bins := kubectlVersions(t)
	for _, v := range []string{"1.27", "1.33"} {
		bin := bins[v]
		t.Run("kubectl-"+v, func(t *testing.T) {
			got := parseAPIResources(t, c.ok(t, bin, "api-resources", "-o", "wide"))
			compareResources(t, preferredOnly(topLevel(want)), got, false)
			var gvs []string
			for gv := range wantGVs {
				gvs = append(gvs, gv)
			}
			sort.Strings(gvs)
			gotGVs := strings.Fields(c.ok(t, bin, "api-versions"))
			if strings.Join(gotGVs, " ") != strings.Join(gvs, " ") {
				t.Errorf("api-versions:\n got %v\nwant %v", gotGVs, gvs)
			}
		})
	}
	t.Run("discovery", func(t *testing.T) {
		got := map[string]apiResource{}
		for gv := range wantGVs {
			path := "/apis/" + gv
			if gv == "v1" {
				path = "/api/v1"
			}
			for _, r := range discoveryResources(t, c, bins["1.33"], path) {
				got[r.key()] = r
			}
		}
		for k := range notYetServed {
			if _, ok := got[k]; ok {
				t.Errorf("%s is served but listed as not yet served (%s): remove it from notYetServed", k, notYetServed[k])
			}
		}
		compareResources(t, want, got, true)
		var groups struct {
			Groups []struct {
				Name      string `json:"name"`
				Preferred struct {
					GroupVersion string `json:"groupVersion"`
				} `json:"preferredVersion"`
			} `json:"groups"`
		}
		decodeJSON(t, c.ok(t, bins["1.33"], "get", "--raw", "/apis"), &groups)
		for _, g := range groups.Groups {
			if notPreferred[g.Preferred.GroupVersion] {
				t.Errorf("group %s prefers %s, upstream does not", g.Name, g.Preferred.GroupVersion)
			}
		}
	})
}

func preferredOnly(m map[string]apiResource) map[string]apiResource {
	out := map[string]apiResource{}
	for k, r := range m {
		if !notPreferred[r.gv] {
			out[k] = r
		}
	}
	return out
}

func topLevel(m map[string]apiResource) map[string]apiResource {
	out := map[string]apiResource{}
	for k, r := range m {
		if !strings.Contains(r.name, "/") {
			out[k] = r
		}
	}
	return out
}

// compareResources reports missing, extra and differing resources; verbs
// are compared when withVerbs (kubectl's wide output drops subresources).
func compareResources(t *testing.T, want, got map[string]apiResource, withVerbs bool) {
	t.Helper()
	for k, w := range want {
		g, ok := got[k]
		if !ok {
			t.Errorf("missing %s (%s)", k, w.kind)
			continue
		}
		if g.kind != w.kind || g.namespaced != w.namespaced || g.shortNames != w.shortNames || (withVerbs && g.verbs != w.verbs) {
			t.Errorf("%s:\n got kind=%s namespaced=%v short=%q verbs=%s\nwant kind=%s namespaced=%v short=%q verbs=%s",
				k, g.kind, g.namespaced, g.shortNames, g.verbs, w.kind, w.namespaced, w.shortNames, w.verbs)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("served but not by upstream v1.37.2: %s", k)
		}
	}
}

// parseAPIResources reads `kubectl api-resources -o wide` by the header's
// column offsets (SHORTNAMES is often empty, so fields cannot be split on
// blanks).
func parseAPIResources(t *testing.T, out string) map[string]apiResource {
	t.Helper()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) < 2 {
		t.Fatalf("api-resources printed nothing:\n%s", out)
	}
	head := lines[0]
	cols := []string{"NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND", "VERBS", "CATEGORIES"}
	at := make([]int, len(cols))
	for i, c := range cols {
		at[i] = strings.Index(head, c)
		if at[i] < 0 {
			t.Fatalf("no %s column in %q", c, head)
		}
	}
	cell := func(line string, i int) string {
		if at[i] >= len(line) {
			return ""
		}
		end := len(line)
		if i+1 < len(at) && at[i+1] < end {
			end = at[i+1]
		}
		return strings.TrimSpace(line[at[i]:end])
	}
	got := map[string]apiResource{}
	for _, line := range lines[1:] {
		r := apiResource{name: cell(line, 0), shortNames: cell(line, 1), gv: cell(line, 2),
			namespaced: cell(line, 3) == "true", kind: cell(line, 4)}
		verbs := strings.Fields(strings.Trim(cell(line, 5), "[]"))
		sort.Strings(verbs)
		r.verbs = strings.Join(verbs, ",")
		got[r.key()] = r
	}
	return got
}

// discoveryResources reads one group-version's APIResourceList.
func discoveryResources(t *testing.T, c *cluster, bin, path string) []apiResource {
	t.Helper()
	var list struct {
		GroupVersion string `json:"groupVersion"`
		Resources    []struct {
			Name       string   `json:"name"`
			Namespaced bool     `json:"namespaced"`
			Kind       string   `json:"kind"`
			Verbs      []string `json:"verbs"`
			ShortNames []string `json:"shortNames"`
		} `json:"resources"`
	}
	decodeJSON(t, c.ok(t, bin, "get", "--raw", path), &list)
	var out []apiResource
	for _, r := range list.Resources {
		verbs := append([]string(nil), r.Verbs...)
		sort.Strings(verbs)
		out = append(out, apiResource{gv: list.GroupVersion, name: r.Name, namespaced: r.Namespaced, kind: r.Kind,
			verbs: strings.Join(verbs, ","), shortNames: strings.Join(r.ShortNames, ",")})
	}
	return out
}

func decodeJSON(t *testing.T, s string, into any) {
	t.Helper()
	if err := json.Unmarshal([]byte(s), into); err != nil {
		t.Fatalf("decode %.200s: %v", s, err)
	}
}
