package volumes

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Files WritePodFiles keeps in the pod directory.
const (
	hostsFile    = "etc-hosts"
	hostnameFile = "etc-hostname"
	resolvFile   = "etc-resolv.conf"
)

// Limits the kubelet applies to resolv.conf.
const (
	maxNameservers = 3
	maxSearches    = 32
	maxSearchChars = 2048
)

// DNSConfig is what WritePodFiles needs to write resolv.conf.
type DNSConfig struct {
	// ClusterDNS are the cluster DNS servers' IPs.
	ClusterDNS []string
	// ClusterDomain is the cluster's DNS domain (the Manager's when empty).
	ClusterDomain string
	// HostResolvConf is the node's resolv.conf (/etc/resolv.conf when
	// empty), used for dnsPolicy Default and the host's search domains.
	HostResolvConf string
}

// PodHostname returns the pod's hostname as the kubelet sets it:
// spec.hostname, or the pod name cut to 63 characters (without a trailing
// "-" or "."); the FQDN <hostname>.<subdomain>.<ns>.svc.<domain> with
// setHostnameAsFQDN and a subdomain. fqdn is empty without a subdomain.
func PodHostname(pod *corev1.Pod, clusterDomain string) (hostname, fqdn string) {
	hostname = pod.Spec.Hostname
	if hostname == "" {
		hostname = pod.Name
		if len(hostname) > 63 {
			hostname = strings.TrimRight(hostname[:63], "-.")
		}
	}
	if pod.Spec.Subdomain != "" {
		fqdn = fmt.Sprintf("%s.%s.%s.svc.%s", hostname, pod.Spec.Subdomain, pod.Namespace, clusterDomain)
	}
	return hostname, fqdn
}

// WritePodFiles writes the pod's hosts, hostname and resolv.conf files
// (mounted by Mounts). hostNetwork pods get the node's hosts file and
// hostname; the others a managed hosts file with their IPs. resolv.conf
// follows dnsPolicy: ClusterFirst (the default; the host's resolv.conf for
// hostNetwork pods or without cluster DNS), ClusterFirstWithHostNet,
// Default and None, merged with dnsConfig.
func (m *Manager) WritePodFiles(pod *corev1.Pod, podIP string, dns DNSConfig) error {
	if pod.UID == "" {
		return fmt.Errorf("pod has no UID")
	}
	if dns.ClusterDomain == "" {
		dns.ClusterDomain = m.cfg.ClusterDomain
	}
	if dns.HostResolvConf == "" {
		dns.HostResolvConf = "/etc/resolv.conf"
	}
	defer m.lockPod(string(pod.UID))()
	dir := m.PodDir(string(pod.UID))
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	hostname, fqdn := PodHostname(pod, dns.ClusterDomain)
	var hosts []byte
	if pod.Spec.HostNetwork {
		h, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("node hostname: %w", err)
		}
		hostname, fqdn = h, ""
		node, err := os.ReadFile(m.cfg.HostsFile)
		if err != nil {
			return fmt.Errorf("read node hosts file: %w", err)
		}
		hosts = hostNetworkHosts(node, pod.Spec.HostAliases)
	} else {
		hosts = managedHosts(podIPs(pod, podIP), hostname, fqdn, pod.Spec.HostAliases)
	}
	name := hostname
	if fqdn != "" && pod.Spec.SetHostnameAsFQDN != nil && *pod.Spec.SetHostnameAsFQDN {
		name = fqdn
	}
	resolv, err := resolvConf(pod, dns)
	if err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		data []byte
	}{{hostsFile, hosts}, {hostnameFile, []byte(name + "\n")}, {resolvFile, resolv}} {
		if err := writeFileAtomic(filepath.Join(dir, f.name), f.data); err != nil {
			return err
		}
	}
	return nil
}

// writeFileAtomic replaces path with data in place: the file's inode must
// stay the same because containers bind-mount it.
func writeFileAtomic(path string, data []byte) error {
	if cur, err := os.ReadFile(path); err == nil && bytes.Equal(cur, data) {
		return nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Chmod(path, 0o644)
}

func podIPs(pod *corev1.Pod, podIP string) []string {
	var out []string
	if podIP != "" {
		out = append(out, podIP)
	}
	for _, ip := range pod.Status.PodIPs {
		if ip.IP != podIP {
			out = append(out, ip.IP)
		}
	}
	return out
}

func managedHosts(ips []string, hostname, fqdn string, aliases []corev1.HostAlias) []byte {
	var b bytes.Buffer
	b.WriteString("# Kubernetes-managed hosts file.\n")
	b.WriteString("127.0.0.1\tlocalhost\n")
	b.WriteString("::1\tlocalhost ip6-localhost ip6-loopback\n")
	b.WriteString("fe00::0\tip6-localnet\n")
	b.WriteString("fe00::0\tip6-mcastprefix\n")
	b.WriteString("fe00::1\tip6-allnodes\n")
	b.WriteString("fe00::2\tip6-allrouters\n")
	for _, ip := range ips {
		if fqdn != "" {
			fmt.Fprintf(&b, "%s\t%s\t%s\n", ip, fqdn, hostname)
		} else {
			fmt.Fprintf(&b, "%s\t%s\n", ip, hostname)
		}
	}
	b.Write(aliasLines(aliases))
	return b.Bytes()
}

func hostNetworkHosts(node []byte, aliases []corev1.HostAlias) []byte {
	var b bytes.Buffer
	b.WriteString("# Kubernetes-managed hosts file (host network).\n")
	b.Write(node)
	if len(node) > 0 && node[len(node)-1] != '\n' {
		b.WriteByte('\n')
	}
	b.Write(aliasLines(aliases))
	return b.Bytes()
}

func aliasLines(aliases []corev1.HostAlias) []byte {
	if len(aliases) == 0 {
		return nil
	}
	var b bytes.Buffer
	b.WriteString("\n# Entries added by HostAliases.\n")
	for _, a := range aliases {
		fmt.Fprintf(&b, "%s\t%s\n", a.IP, strings.Join(a.Hostnames, "\t"))
	}
	return b.Bytes()
}

// resolvSettings are resolv.conf's three kinds of lines.
type resolvSettings struct {
	nameservers, searches, options []string
}

func parseResolvConf(data []byte) resolvSettings {
	var r resolvSettings
	s := bufio.NewScanner(bytes.NewReader(data))
	for s.Scan() {
		line := s.Text()
		if i := strings.IndexAny(line, "#;"); i >= 0 {
			line = line[:i]
		}
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "nameserver":
			r.nameservers = append(r.nameservers, f[1])
		case "search":
			r.searches = f[1:]
		case "domain":
			r.searches = []string{f[1]}
		case "options":
			r.options = mergeOptions(r.options, f[1:])
		}
	}
	return r
}

func resolvConf(pod *corev1.Pod, dns DNSConfig) ([]byte, error) {
	policy := pod.Spec.DNSPolicy
	if policy == "" {
		policy = corev1.DNSClusterFirst
	}
	if policy == corev1.DNSClusterFirst && pod.Spec.HostNetwork {
		policy = corev1.DNSDefault
	}
	if (policy == corev1.DNSClusterFirst || policy == corev1.DNSClusterFirstWithHostNet) && len(dns.ClusterDNS) == 0 {
		policy = corev1.DNSDefault
	}
	var host resolvSettings
	if policy != corev1.DNSNone {
		data, err := os.ReadFile(dns.HostResolvConf)
		if err != nil && !os.IsNotExist(err) {
			return nil, fmt.Errorf("read host resolv.conf: %w", err)
		}
		host = parseResolvConf(data)
	}
	var r resolvSettings
	switch policy {
	case corev1.DNSClusterFirst, corev1.DNSClusterFirstWithHostNet:
		d := dns.ClusterDomain
		r.nameservers = append([]string(nil), dns.ClusterDNS...)
		r.searches = append([]string{pod.Namespace + ".svc." + d, "svc." + d, d}, host.searches...)
		r.options = []string{"ndots:5"}
	case corev1.DNSDefault:
		r = host
	case corev1.DNSNone:
	default:
		return nil, fmt.Errorf("unknown dnsPolicy %q", policy)
	}
	if c := pod.Spec.DNSConfig; c != nil {
		r.nameservers = append(r.nameservers, c.Nameservers...)
		r.searches = append(r.searches, c.Searches...)
		var opts []string
		for _, o := range c.Options {
			if o.Value != nil {
				opts = append(opts, o.Name+":"+*o.Value)
			} else {
				opts = append(opts, o.Name)
			}
		}
		r.options = mergeOptions(r.options, opts)
	}
	r.nameservers = dedupe(r.nameservers)
	if len(r.nameservers) > maxNameservers {
		r.nameservers = r.nameservers[:maxNameservers]
	}
	r.searches = limitSearches(dedupe(r.searches))
	var b bytes.Buffer
	if len(r.searches) > 0 {
		fmt.Fprintf(&b, "search %s\n", strings.Join(r.searches, " "))
	}
	for _, ns := range r.nameservers {
		fmt.Fprintf(&b, "nameserver %s\n", ns)
	}
	if len(r.options) > 0 {
		fmt.Fprintf(&b, "options %s\n", strings.Join(r.options, " "))
	}
	return b.Bytes(), nil
}

// mergeOptions adds opts to base; an option named like one in base
// ("ndots" in "ndots:2") replaces it in place.
func mergeOptions(base, opts []string) []string {
	out := append([]string(nil), base...)
	for _, o := range opts {
		name, _, _ := strings.Cut(o, ":")
		replaced := false
		for i, cur := range out {
			if n, _, _ := strings.Cut(cur, ":"); n == name {
				out[i], replaced = o, true
				break
			}
		}
		if !replaced {
			out = append(out, o)
		}
	}
	return out
}

func dedupe(list []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range list {
		if s != "" && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

func limitSearches(s []string) []string {
	if len(s) > maxSearches {
		s = s[:maxSearches]
	}
	for len(s) > 0 && len(strings.Join(s, " ")) > maxSearchChars {
		s = s[:len(s)-1]
	}
	return s
}
