package agent

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"

	"skiff/agent/join"
	"skiff/agent/kubelet"
	"skiff/agent/loadbalancer"
	"skiff/agent/nodestatus"
	"skiff/agent/podcertificate"
	"skiff/agent/stream"
	"skiff/agent/volumes"
	"skiff/runtime/containers"
	"skiff/runtime/daemon"
	"skiff/runtime/images"
	"skiff/runtime/podnet"
)

// containerdNamespace keeps skiff's containers apart from anything else
// sharing a containerd.
const containerdNamespace = "skiff"

// node is one running agent: every part, built in start and run by run.
type node struct {
	cfg      Config
	log      *slog.Logger
	creds    *join.Credentials
	lb       *loadbalancer.LB // the API load balancer every client dials
	client   kubernetes.Interface
	runtime  *containers.Runtime
	images   *images.Store
	reporter *nodestatus.Reporter
	network  *podnet.Network
	kubelet  *kubelet.Kubelet
	// kubeletRef is kubelet for the node reporter's goroutines, which
	// start before the kubelet exists.
	kubeletRef atomic.Pointer[kubelet.Kubelet]
	stream     *stream.Server
	daemon     *daemon.Daemon
	services   *services
	netReady   atomic.Bool
	started    time.Time
}

// start joins through the balancer, starts containerd, registers the Node
// and brings up the pod network; the long-running loops start in run. The
// balancer's own loops (it must serve the join) and the watch that feeds
// it the servers run in g from the start.
func start(ctx context.Context, cfg Config, b *balancer, g *loops) (*node, error) {
	n := &node{cfg: cfg, log: cfg.Logger, lb: b.lb, started: time.Now()}
	ips, err := nodeIPs(cfg.NodeIPs)
	if err != nil {
		return nil, err
	}
	n.creds, err = join.Join(ctx, join.Config{ServerURL: b.lb.URL(), Token: cfg.Token, NodeName: cfg.NodeName, DataDir: cfg.DataDir, NodeIPs: ips, Logger: n.log.With("component", "join")})
	if err != nil {
		return nil, fmt.Errorf("%w (joining %s through the agent's API load balancer at %s)", err, cfg.ServerURL, b.lb.Addr())
	}
	if err := b.health.trust([]byte(n.creds.CAPEM)); err != nil {
		return nil, err
	}
	rest, err := apiRestConfig(n.creds.Kubeconfig, b.lb.URL(), cfg.NodeName)
	if err != nil {
		return nil, err
	}
	if n.client, err = kubernetes.NewForConfig(rest); err != nil {
		return nil, err
	}
	b.watchServers(g, n.client)
	if err := n.startRuntime(ctx); err != nil {
		return nil, err
	}
	if err := n.register(ctx, ips); err != nil {
		return nil, err
	}
	if err := n.startNetwork(ctx, ips[0]); err != nil {
		return nil, err
	}
	if err := n.startServices(ips); err != nil {
		return nil, err
	}
	return n, n.buildKubelet()
}

// nodeIPs parses --node-ip, or detects the machine's address.
func nodeIPs(given []string) ([]net.IP, error) {
	var ips []net.IP
	for _, s := range given {
		ips = append(ips, net.ParseIP(s))
	}
	if len(ips) > 0 {
		return ips, nil
	}
	ips, err := nodestatus.DetectNodeIPs()
	if err != nil || len(ips) == 0 {
		return nil, fmt.Errorf("no node address found (%v): give --node-ip", err)
	}
	return ips, nil
}

// startRuntime starts the embedded containerd (unless an endpoint is
// given), connects to it and imports the images in <data-dir>/agent/images.
func (n *node) startRuntime(ctx context.Context) error {
	addr := n.cfg.ContainerRuntimeEndpoint
	if addr == "" {
		d, err := daemon.Start(ctx, daemon.Config{Dir: n.cfg.dir("containerd"), Logger: n.log.With("component", "containerd")})
		if err != nil {
			return fmt.Errorf("containerd: %w", err)
		}
		n.daemon, addr = d, d.Address()
	}
	addr = trimUnixScheme(addr)
	rt, err := containers.New(ctx, containers.Config{Address: addr, Namespace: containerdNamespace, StateDir: n.cfg.dir("containers"), Logger: n.log.With("component", "runtime")})
	if err != nil {
		return fmt.Errorf("containerd at %s: %w", addr, err)
	}
	n.runtime = rt
	n.images, err = images.New(images.Config{Client: rt.Client(), Namespace: containerdNamespace, RegistriesFile: n.cfg.RegistriesFile, Logger: n.log.With("component", "images")})
	if err != nil {
		return err
	}
	if err := n.images.ImportDir(ctx, n.cfg.dir("images")); err != nil {
		n.log.Warn("importing images", "dir", n.cfg.dir("images"), "err", err)
	}
	return nil
}

func trimUnixScheme(addr string) string {
	const scheme = "unix://"
	if len(addr) > len(scheme) && addr[:len(scheme)] == scheme {
		return addr[len(scheme):]
	}
	return addr
}

// register creates or updates the Node.
func (n *node) register(ctx context.Context, ips []net.IP) error {
	labels, err := nodestatus.ParseLabels(n.cfg.NodeLabels)
	if err != nil {
		return err
	}
	taints, err := nodestatus.ParseTaints(n.cfg.NodeTaints)
	if err != nil {
		return err
	}
	version := "containerd://2.4.2"
	if v, err := n.runtime.Client().Version(ctx); err == nil {
		version = "containerd://" + v.Version
	}
	n.reporter, err = nodestatus.New(nodestatus.Config{
		NodeName: n.cfg.NodeName, Client: n.client, NodeIPs: ips, Labels: labels, Taints: taints,
		ControlPlane: n.cfg.ControlPlane, KubeletPort: n.cfg.KubeletPort, DataDir: n.cfg.DataDir,
		Annotations: n.annotations, Images: n.nodeImages, Ready: n.ready, Pressure: n.pressure,
		KubeletVersion: n.cfg.KubeletVersion, RuntimeVersion: version, Logger: n.log.With("component", "nodestatus"),
	})
	if err != nil {
		return err
	}
	if _, err := n.reporter.Register(ctx); err != nil {
		return fmt.Errorf("register node %s: %w", n.cfg.NodeName, err)
	}
	return nil
}

func (n *node) annotations() map[string]string {
	if !n.netReady.Load() {
		return nil
	}
	return n.network.Annotations()
}

func (n *node) ready() error {
	if !n.netReady.Load() {
		return errors.New("container runtime network not ready: waiting for the pod CIDR")
	}
	return nil
}

// pressure is the kubelet's eviction view, once it exists.
func (n *node) pressure() (memory, disk, pid bool) {
	if k := n.kubeletRef.Load(); k != nil {
		memory, disk = k.Pressure()
	}
	return memory, disk, false
}

func (n *node) nodeImages(ctx context.Context) ([]corev1.ContainerImage, error) {
	list, err := n.images.List(ctx)
	if err != nil {
		return nil, err
	}
	byID := map[string]*corev1.ContainerImage{}
	var out []corev1.ContainerImage
	for _, img := range list {
		if c, ok := byID[img.ID]; ok {
			c.Names = append(c.Names, img.Ref)
			continue
		}
		out = append(out, corev1.ContainerImage{Names: []string{img.ID, img.Ref}, SizeBytes: img.Size})
		byID[img.ID] = &out[len(out)-1]
	}
	return out, nil
}

// startNetwork waits for the node's podCIDR and brings the pod network up.
func (n *node) startNetwork(ctx context.Context, nodeIP net.IP) error {
	waitCtx, cancel := context.WithCancel(ctx)
	reported := make(chan struct{})
	go func() { // the Lease and status must flow while we wait
		defer close(reported)
		_ = n.reporter.Run(waitCtx)
	}()
	cidr, err := n.reporter.WaitForPodCIDR(ctx)
	cancel()
	<-reported
	if err != nil {
		return fmt.Errorf("waiting for the node's podCIDR: %w", err)
	}
	_, cluster, _ := net.ParseCIDR(n.cfg.ClusterCIDR)
	n.network, err = podnet.New(podnet.Config{
		NodeName: n.cfg.NodeName, NodeIP: nodeIP, ClusterCIDR: cluster, Backend: podnet.Backend(n.cfg.NetworkBackend),
		StateDir: n.cfg.dir("network"), NetNSDir: n.cfg.NetNSDir, Logger: n.log.With("component", "podnet"),
	})
	if err != nil {
		return err
	}
	if err := n.network.Start(ctx, cidr); err != nil {
		return fmt.Errorf("pod network: %w", err)
	}
	n.netReady.Store(true)
	return nil
}

// buildKubelet makes the pod workers and the streaming server.
func (n *node) buildKubelet() error {
	podCerts := podcertificate.New(podcertificate.Config{Client: n.client, NodeName: n.cfg.NodeName, Logger: n.log.With("component", "podcertificate")})
	vols := volumes.New(volumes.Config{Root: n.cfg.dir("pods"), Client: n.client, NodeName: n.cfg.NodeName, ClusterDomain: n.cfg.ClusterDomain, Logger: n.log.With("component", "volumes"),
		PodCertificates: podCerts, Images: n.images})
	var err error
	n.kubelet, err = kubelet.New(kubelet.Config{
		NodeName: n.cfg.NodeName, Client: n.client, Runtime: n.runtime, Network: n.podNetwork(), Images: n.images,
		Volumes: volumeAdapter{vols}, StaticPodDir: n.cfg.dir("pod-manifests"), LogDir: n.cfg.PodLogDir,
		CgroupRoot: n.cfg.CgroupRoot, ClusterDNS: []string{n.cfg.ClusterDNS}, ClusterDomain: n.cfg.ClusterDomain,
		NodeIP: n.reporterIP(), NodeFSPath: n.cfg.DataDir, Logger: n.log.With("component", "kubelet"),
	})
	if err != nil {
		return err
	}
	n.kubeletRef.Store(n.kubelet)
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(n.creds.CAPEM)) {
		return errors.New("the cluster CA from the join is not PEM")
	}
	n.stream, err = stream.New(stream.Config{
		Addr: fmt.Sprintf(":%d", n.cfg.KubeletPort), CertFile: n.creds.ServingCertFile, KeyFile: n.creds.ServingKeyFile,
		ClientCA: pool, Pods: streamPods{n.kubelet}, Runtime: n.runtime, Logger: n.log.With("component", "stream"),
		PodList: n.kubelet, Metrics: promhttp.HandlerFor(n.services.registry, promhttp.HandlerOpts{}),
	})
	return err
}

func (n *node) reporterIP() string {
	ips, err := nodeIPs(n.cfg.NodeIPs)
	if err != nil {
		return ""
	}
	return ips[0].String()
}

// run runs every loop in g (which already runs the balancer's) until g's
// context ends or one of them fails.
func (n *node) run(g *loops) error {
	loops := map[string]func(context.Context) error{
		"nodestatus": n.reporter.Run,
		"kubelet":    n.kubelet.Run,
		"stream":     n.stream.Run,
		"peers":      n.watchPeers,
		"certs":      func(ctx context.Context) error { n.creds.RenewLoop(ctx); return nil },
		"imagegc":    n.imageGC,
	}
	for name, loop := range n.services.loops() {
		loops[name] = loop
	}
	for name, loop := range loops {
		g.Go(name, loop)
	}
	n.log.Info("node ready", "node", n.cfg.NodeName, "startup", time.Since(n.started).Round(time.Millisecond), "api", n.lb.URL())
	if n.cfg.Started != nil {
		n.cfg.Started()
	}
	<-g.Done()
	err := g.Stop()
	n.runtime.Close()
	n.network.Close()
	if n.daemon != nil {
		<-n.daemon.Done()
	}
	return err
}

// Image garbage collection thresholds, as the kubelet's defaults: above
// 85% use of the image filesystem, unused images go (oldest first) until
// it is below 80%.
const (
	imageGCHighPct  = 85
	imageGCLowPct   = 80
	imageGCInterval = 5 * time.Minute
)

// imageGC removes images no container uses when the disk fills up.
func (n *node) imageGC(ctx context.Context) error {
	t := time.NewTicker(imageGCInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		freed, err := n.images.GC(ctx, n.kubelet.ImagesInUse(), imageGCHighPct, imageGCLowPct)
		if err != nil {
			n.log.Warn("image garbage collection", "freed", freed, "err", err)
		} else if freed > 0 {
			n.log.Info("image garbage collection", "freed", freed)
		}
	}
}

// watchPeers keeps the pod network's routes to the other nodes current.
func (n *node) watchPeers(ctx context.Context) error {
	return n.reporter.WatchPeers(ctx, func(nodes []corev1.Node) {
		var peers []podnet.Peer
		for _, nd := range nodes {
			p := podnet.Peer{Name: nd.Name, Annotations: nd.Annotations}
			if _, cidr, err := net.ParseCIDR(nd.Spec.PodCIDR); err == nil {
				p.PodCIDR = cidr
			}
			for _, a := range nd.Status.Addresses {
				if a.Type == corev1.NodeInternalIP && p.InternalIP == nil {
					p.InternalIP = net.ParseIP(a.Address)
				}
			}
			peers = append(peers, p)
		}
		if err := n.network.SetPeers(ctx, peers); err != nil {
			n.log.Warn("updating routes to other nodes", "err", err)
		}
	})
}

// volumeAdapter fits agent/volumes to the kubelet's Volumes interface.
type volumeAdapter struct{ m *volumes.Manager }

func (a volumeAdapter) Setup(ctx context.Context, pod *corev1.Pod) (map[string]string, error) {
	return a.m.Setup(ctx, pod)
}

func (a volumeAdapter) Mounts(pod *corev1.Pod, c *corev1.Container, vols map[string]string) ([]containers.Mount, error) {
	return a.m.Mounts(pod, c, vols)
}

// MountsWithEnv expands subPathExpr with the container's environment.
func (a volumeAdapter) MountsWithEnv(pod *corev1.Pod, c *corev1.Container, vols map[string]string, env []string) ([]containers.Mount, error) {
	return a.m.MountsWithEnv(pod, c, vols, env)
}

func (a volumeAdapter) WritePodFiles(pod *corev1.Pod, podIP string, dns kubelet.DNSConfig) error {
	return a.m.WritePodFiles(pod, podIP, volumes.DNSConfig{ClusterDNS: dns.ClusterDNS, ClusterDomain: dns.ClusterDomain, HostResolvConf: dns.HostResolvConf})
}

func (a volumeAdapter) Teardown(ctx context.Context, uid string) error { return a.m.Teardown(ctx, uid) }

// MountImage mounts an image volume (kubelet.ImageVolumeMounter).
func (a volumeAdapter) MountImage(ctx context.Context, pod *corev1.Pod, volume, ref string) (string, error) {
	return a.m.MountImage(ctx, pod, volume, ref)
}

func (a volumeAdapter) PodUIDsOnDisk() ([]string, error) { return a.m.PodUIDsOnDisk() }

// streamPods fits the kubelet's lookups to the streaming server.
type streamPods struct{ k *kubelet.Kubelet }

func (p streamPods) Container(ns, pod, c string, previous bool) (stream.ContainerRef, error) {
	r, err := p.k.Container(ns, pod, c, previous)
	return stream.ContainerRef{ID: r.ID, LogPath: r.LogPath, Running: r.Running}, err
}

func (p streamPods) PodNetNS(ns, pod string) (string, error) { return p.k.PodNetNS(ns, pod) }
