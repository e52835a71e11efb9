package volumes

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestWritePodFilesHosts(t *testing.T) {
	nodeHosts := filepath.Join(t.TempDir(), "hosts")
	os.WriteFile(nodeHosts, []byte("127.0.0.1 localhost\n192.168.1.2 node-a"), 0o644)
	nodeName, _ := os.Hostname()
	tests := []struct {
		name         string
		mutate       func(p *corev1.Pod)
		wantHosts    string
		wantHostname string
	}{
		{name: "managed hosts with pod IPs",
			mutate: func(p *corev1.Pod) { p.Status.PodIPs = []corev1.PodIP{{IP: "10.42.0.7"}, {IP: "fd00::7"}} },
			wantHosts: "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n" +
				"fe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n" +
				"10.42.0.7\tweb\nfd00::7\tweb\n",
			wantHostname: "web\n"},
		{name: "hostname, subdomain, FQDN and hostAliases",
			mutate: func(p *corev1.Pod) {
				p.Spec.Hostname, p.Spec.Subdomain, p.Spec.SetHostnameAsFQDN = "h1", "sub", bp(true)
				p.Spec.HostAliases = []corev1.HostAlias{{IP: "1.2.3.4", Hostnames: []string{"foo", "bar"}}}
			},
			wantHosts: "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n" +
				"fe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n" +
				"10.42.0.7\th1.sub.ns1.svc.cluster.local\th1\n\n# Entries added by HostAliases.\n1.2.3.4\tfoo\tbar\n",
			wantHostname: "h1.sub.ns1.svc.cluster.local\n"},
		{name: "long pod name is cut to 63 without trailing dash",
			mutate: func(p *corev1.Pod) { p.Name = strings.Repeat("a", 62) + "-bcd" },
			wantHosts: "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n" +
				"fe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n" +
				"10.42.0.7\t" + strings.Repeat("a", 62) + "\n",
			wantHostname: strings.Repeat("a", 62) + "\n"},
		{name: "hostNetwork gets the node's hosts file and hostname",
			mutate: func(p *corev1.Pod) {
				p.Spec.HostNetwork = true
				p.Spec.HostAliases = []corev1.HostAlias{{IP: "1.2.3.4", Hostnames: []string{"foo"}}}
			},
			wantHosts: "# Kubernetes-managed hosts file (host network).\n127.0.0.1 localhost\n192.168.1.2 node-a\n" +
				"\n# Entries added by HostAliases.\n1.2.3.4\tfoo\n",
			wantHostname: nodeName + "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, _, _ := newTestManager(t)
			m.cfg.HostsFile = nodeHosts
			pod := newPod()
			tt.mutate(pod)
			if err := m.WritePodFiles(pod, "10.42.0.7", DNSConfig{}); err != nil {
				t.Fatal(err)
			}
			d := m.PodDir("uid-1")
			if got := readFile(t, filepath.Join(d, "etc-hosts")); got != tt.wantHosts {
				t.Fatalf("hosts:\n%q\nwant\n%q", got, tt.wantHosts)
			}
			if got := readFile(t, filepath.Join(d, "etc-hostname")); got != tt.wantHostname {
				t.Fatalf("hostname %q want %q", got, tt.wantHostname)
			}
		})
	}
}

func TestWritePodFilesKeepsInode(t *testing.T) {
	m, _, _ := newTestManager(t)
	pod := newPod()
	if err := m.WritePodFiles(pod, "10.42.0.7", DNSConfig{}); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(m.PodDir("uid-1"), "etc-hosts")
	before, _ := os.Stat(p)
	if err := m.WritePodFiles(pod, "10.42.0.8", DNSConfig{}); err != nil {
		t.Fatal(err)
	}
	after, _ := os.Stat(p)
	if !os.SameFile(before, after) {
		t.Fatal("hosts file replaced: a container's bind mount would not see the change")
	}
	if !strings.Contains(readFile(t, p), "10.42.0.8\tweb\n") {
		t.Fatal("hosts not updated")
	}
}

func TestWritePodFilesResolvConf(t *testing.T) {
	hostResolv := filepath.Join(t.TempDir(), "resolv.conf")
	os.WriteFile(hostResolv, []byte("# comment\nnameserver 192.168.1.1\nnameserver 192.168.1.2\nsearch corp.example lab.example\noptions timeout:2 rotate\n"), 0o644)
	s := func(v string) *string { return &v }
	tests := []struct {
		name   string
		mutate func(p *corev1.Pod)
		dns    DNSConfig
		want   string
	}{
		{name: "ClusterFirst by default: cluster DNS, cluster searches then host searches, ndots:5",
			dns: DNSConfig{ClusterDNS: []string{"10.43.0.10"}},
			want: "search ns1.svc.cluster.local svc.cluster.local cluster.local corp.example lab.example\n" +
				"nameserver 10.43.0.10\noptions ndots:5\n"},
		{name: "custom cluster domain",
			dns:  DNSConfig{ClusterDNS: []string{"10.43.0.10"}, ClusterDomain: "k.test"},
			want: "search ns1.svc.k.test svc.k.test k.test corp.example lab.example\nnameserver 10.43.0.10\noptions ndots:5\n"},
		{name: "ClusterFirst on hostNetwork falls back to the host",
			mutate: func(p *corev1.Pod) { p.Spec.HostNetwork = true },
			dns:    DNSConfig{ClusterDNS: []string{"10.43.0.10"}},
			want:   "search corp.example lab.example\nnameserver 192.168.1.1\nnameserver 192.168.1.2\noptions timeout:2 rotate\n"},
		{name: "ClusterFirst without cluster DNS falls back to the host",
			want: "search corp.example lab.example\nnameserver 192.168.1.1\nnameserver 192.168.1.2\noptions timeout:2 rotate\n"},
		{name: "ClusterFirstWithHostNet uses cluster DNS on hostNetwork",
			mutate: func(p *corev1.Pod) { p.Spec.HostNetwork, p.Spec.DNSPolicy = true, corev1.DNSClusterFirstWithHostNet },
			dns:    DNSConfig{ClusterDNS: []string{"10.43.0.10"}},
			want: "search ns1.svc.cluster.local svc.cluster.local cluster.local corp.example lab.example\n" +
				"nameserver 10.43.0.10\noptions ndots:5\n"},
		{name: "Default is the host's resolv.conf",
			mutate: func(p *corev1.Pod) { p.Spec.DNSPolicy = corev1.DNSDefault },
			dns:    DNSConfig{ClusterDNS: []string{"10.43.0.10"}},
			want:   "search corp.example lab.example\nnameserver 192.168.1.1\nnameserver 192.168.1.2\noptions timeout:2 rotate\n"},
		{name: "None uses dnsConfig only",
			mutate: func(p *corev1.Pod) {
				p.Spec.DNSPolicy = corev1.DNSNone
				p.Spec.DNSConfig = &corev1.PodDNSConfig{Nameservers: []string{"1.1.1.1"}, Searches: []string{"a.b"},
					Options: []corev1.PodDNSConfigOption{{Name: "ndots", Value: s("2")}, {Name: "edns0"}}}
			},
			dns:  DNSConfig{ClusterDNS: []string{"10.43.0.10"}},
			want: "search a.b\nnameserver 1.1.1.1\noptions ndots:2 edns0\n"},
		{name: "dnsConfig merges: extra servers and searches deduplicated, options override by name",
			mutate: func(p *corev1.Pod) {
				p.Spec.DNSConfig = &corev1.PodDNSConfig{Nameservers: []string{"10.43.0.10", "8.8.8.8"}, Searches: []string{"cluster.local", "x.y"},
					Options: []corev1.PodDNSConfigOption{{Name: "ndots", Value: s("1")}, {Name: "single-request"}}}
			},
			dns: DNSConfig{ClusterDNS: []string{"10.43.0.10"}},
			want: "search ns1.svc.cluster.local svc.cluster.local cluster.local corp.example lab.example x.y\n" +
				"nameserver 10.43.0.10\nnameserver 8.8.8.8\noptions ndots:1 single-request\n"},
		{name: "at most three nameservers",
			mutate: func(p *corev1.Pod) {
				p.Spec.DNSConfig = &corev1.PodDNSConfig{Nameservers: []string{"1.1.1.1", "2.2.2.2", "3.3.3.3"}}
			},
			dns: DNSConfig{ClusterDNS: []string{"10.43.0.10"}},
			want: "search ns1.svc.cluster.local svc.cluster.local cluster.local corp.example lab.example\n" +
				"nameserver 10.43.0.10\nnameserver 1.1.1.1\nnameserver 2.2.2.2\noptions ndots:5\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, _, _ := newTestManager(t)
			pod := newPod()
			if tt.mutate != nil {
				tt.mutate(pod)
			}
			dns := tt.dns
			dns.HostResolvConf = hostResolv
			if err := m.WritePodFiles(pod, "10.42.0.7", dns); err != nil {
				t.Fatal(err)
			}
			if got := readFile(t, filepath.Join(m.PodDir("uid-1"), "etc-resolv.conf")); got != tt.want {
				t.Fatalf("resolv.conf:\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}
