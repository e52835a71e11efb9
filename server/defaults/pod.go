package defaults

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// setPod applies the defaults that only a Pod gets. Upstream keeps these out of
// PodSpec defaulting on purpose: adding them to every template would change the
// stored templates of existing workloads and trigger rollouts on upgrade.
func setPod(pod *corev1.Pod) {
	for i := range pod.Spec.Containers {
		requestsFromLimits(&pod.Spec.Containers[i].Resources)
	}
	for i := range pod.Spec.InitContainers {
		requestsFromLimits(&pod.Spec.InitContainers[i].Resources)
	}
	if pod.Spec.EnableServiceLinks == nil {
		pod.Spec.EnableServiceLinks = new(corev1.DefaultEnableServiceLinks)
	}
	if pod.Spec.HostNetwork {
		hostNetworkPorts(pod.Spec.Containers)
		hostNetworkPorts(pod.Spec.InitContainers)
	}
	setPodSpec(&pod.Spec)
	syncPodIPs(&pod.Status)
}

// requestsFromLimits copies every limit that has no matching request, so the
// scheduler accounts for a container that only states limits.
func requestsFromLimits(res *corev1.ResourceRequirements) {
	if res.Limits == nil {
		return
	}
	if res.Requests == nil {
		res.Requests = corev1.ResourceList{}
	}
	for name, limit := range res.Limits {
		if _, ok := res.Requests[name]; !ok {
			res.Requests[name] = limit.DeepCopy()
		}
	}
}

// hostNetworkPorts makes hostPort explicit: with host networking the container
// port is the host port, and later conflict checks rely on seeing it.
func hostNetworkPorts(containers []corev1.Container) {
	for i := range containers {
		for j := range containers[i].Ports {
			p := &containers[i].Ports[j]
			if p.HostPort == 0 {
				p.HostPort = p.ContainerPort
			}
		}
	}
}

// setPodSpec applies the defaults shared by pods and every pod template.
func setPodSpec(spec *corev1.PodSpec) {
	if spec.DNSPolicy == "" {
		spec.DNSPolicy = corev1.DNSClusterFirst
	}
	if spec.RestartPolicy == "" {
		spec.RestartPolicy = corev1.RestartPolicyAlways
	}
	if spec.SecurityContext == nil {
		spec.SecurityContext = &corev1.PodSecurityContext{}
	}
	if spec.TerminationGracePeriodSeconds == nil {
		spec.TerminationGracePeriodSeconds = new(int64(corev1.DefaultTerminationGracePeriodSeconds))
	}
	if spec.SchedulerName == "" {
		spec.SchedulerName = corev1.DefaultSchedulerName
	}
	syncServiceAccountAlias(spec)
	for i := range spec.Volumes {
		setVolume(&spec.Volumes[i])
	}
	for i := range spec.InitContainers {
		setContainer(&spec.InitContainers[i])
	}
	for i := range spec.Containers {
		setContainer(&spec.Containers[i])
	}
	for i := range spec.EphemeralContainers {
		setContainer((*corev1.Container)(&spec.EphemeralContainers[i].EphemeralContainerCommon))
	}
	roundResourceList(spec.Overhead)
	if spec.Resources != nil {
		roundResourceList(spec.Resources.Limits)
		roundResourceList(spec.Resources.Requests)
	}
}

func setContainer(c *corev1.Container) {
	if c.ImagePullPolicy == "" {
		c.ImagePullPolicy = pullPolicyFor(c.Image)
	}
	if c.TerminationMessagePath == "" {
		c.TerminationMessagePath = corev1.TerminationMessagePathDefault
	}
	if c.TerminationMessagePolicy == "" {
		c.TerminationMessagePolicy = corev1.TerminationMessageReadFile
	}
	for i := range c.Ports {
		if c.Ports[i].Protocol == "" {
			c.Ports[i].Protocol = corev1.ProtocolTCP
		}
	}
	for i := range c.Env {
		if from := c.Env[i].ValueFrom; from != nil {
			setFieldSelector(from.FieldRef)
		}
	}
	roundResourceList(c.Resources.Limits)
	roundResourceList(c.Resources.Requests)
	setProbe(c.LivenessProbe)
	setProbe(c.ReadinessProbe)
	setProbe(c.StartupProbe)
	if c.Lifecycle != nil {
		setLifecycleHandler(c.Lifecycle.PostStart)
		setLifecycleHandler(c.Lifecycle.PreStop)
	}
}

func setProbe(p *corev1.Probe) {
	if p == nil {
		return
	}
	if p.TimeoutSeconds == 0 {
		p.TimeoutSeconds = 1
	}
	if p.PeriodSeconds == 0 {
		p.PeriodSeconds = 10
	}
	if p.SuccessThreshold == 0 {
		p.SuccessThreshold = 1
	}
	if p.FailureThreshold == 0 {
		p.FailureThreshold = 3
	}
	setHTTPGet(p.HTTPGet)
	if p.GRPC != nil && p.GRPC.Service == nil {
		p.GRPC.Service = new("")
	}
}

func setLifecycleHandler(h *corev1.LifecycleHandler) {
	if h != nil {
		setHTTPGet(h.HTTPGet)
	}
}

func setHTTPGet(h *corev1.HTTPGetAction) {
	if h == nil {
		return
	}
	if h.Path == "" {
		h.Path = "/"
	}
	if h.Scheme == "" {
		h.Scheme = corev1.URISchemeHTTP
	}
}

func setFieldSelector(s *corev1.ObjectFieldSelector) {
	if s != nil && s.APIVersion == "" {
		s.APIVersion = "v1"
	}
}

// pullPolicyFor mirrors upstream: only images that resolve to the "latest" tag
// (explicitly, or by having neither tag nor digest) are pulled every time.
func pullPolicyFor(image string) corev1.PullPolicy {
	if imageTag(image) == "latest" {
		return corev1.PullAlways
	}
	return corev1.PullIfNotPresent
}

// imageTag returns the tag an image reference resolves to: "latest" when it has
// neither tag nor digest, "" when it has only a digest or cannot be parsed.
func imageTag(image string) string {
	if image == "" || strings.ContainsAny(image, " \t\n") {
		return ""
	}
	name, _, hasDigest := strings.Cut(image, "@")
	tag := ""
	// A colon before the last slash belongs to a registry host:port, not a tag.
	if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		name, tag = name[:i], name[i+1:]
	}
	if name == "" || hasUppercasePath(name) {
		return ""
	}
	if tag == "" && !hasDigest {
		return "latest"
	}
	return tag
}

// hasUppercasePath reports an upper-case repository path, which the reference
// grammar rejects; the registry host part may legitimately contain capitals.
func hasUppercasePath(name string) bool {
	path := name
	if host, rest, ok := strings.Cut(name, "/"); ok && isRegistryHost(host) {
		path = rest
	}
	return strings.ToLower(path) != path
}

// isRegistryHost follows the reference grammar's rule for telling a registry
// host from the first path component.
func isRegistryHost(s string) bool {
	return strings.ContainsAny(s, ".:") || s == "localhost" || strings.ToLower(s) != s
}

func setVolume(v *corev1.Volume) {
	if allPtrFieldsNil(&v.VolumeSource) {
		v.VolumeSource = corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}
	}
	src := &v.VolumeSource
	if src.Secret != nil && src.Secret.DefaultMode == nil {
		src.Secret.DefaultMode = new(corev1.SecretVolumeSourceDefaultMode)
	}
	if src.ConfigMap != nil && src.ConfigMap.DefaultMode == nil {
		src.ConfigMap.DefaultMode = new(corev1.ConfigMapVolumeSourceDefaultMode)
	}
	if src.DownwardAPI != nil {
		if src.DownwardAPI.DefaultMode == nil {
			src.DownwardAPI.DefaultMode = new(corev1.DownwardAPIVolumeSourceDefaultMode)
		}
		setDownwardAPIFiles(src.DownwardAPI.Items)
	}
	if src.Projected != nil {
		setProjected(src.Projected)
	}
	if src.HostPath != nil && src.HostPath.Type == nil {
		src.HostPath.Type = new(corev1.HostPathUnset)
	}
	if src.Ephemeral != nil && src.Ephemeral.VolumeClaimTemplate != nil {
		setPVCSpec(&src.Ephemeral.VolumeClaimTemplate.Spec)
	}
	if src.Image != nil && src.Image.PullPolicy == "" {
		src.Image.PullPolicy = pullPolicyFor(src.Image.Reference)
	}
	setLegacyVolumeSources(src.RBD, src.ISCSI, src.AzureDisk, src.ScaleIO)
}

func setProjected(p *corev1.ProjectedVolumeSource) {
	if p.DefaultMode == nil {
		p.DefaultMode = new(corev1.ProjectedVolumeSourceDefaultMode)
	}
	for i := range p.Sources {
		s := &p.Sources[i]
		if s.DownwardAPI != nil {
			setDownwardAPIFiles(s.DownwardAPI.Items)
		}
		if s.ServiceAccountToken != nil && s.ServiceAccountToken.ExpirationSeconds == nil {
			s.ServiceAccountToken.ExpirationSeconds = new(int64(time.Hour / time.Second))
		}
	}
}

func setDownwardAPIFiles(items []corev1.DownwardAPIVolumeFile) {
	for i := range items {
		setFieldSelector(items[i].FieldRef)
	}
}

// setLegacyVolumeSources fills the declarative (+default) values of the in-tree
// volume plugins that share the pod volume type.
func setLegacyVolumeSources(rbd *corev1.RBDVolumeSource, iscsi *corev1.ISCSIVolumeSource, azure *corev1.AzureDiskVolumeSource, scaleIO *corev1.ScaleIOVolumeSource) {
	if rbd != nil {
		setRBD(&rbd.RBDPool, &rbd.RadosUser, &rbd.Keyring)
	}
	if iscsi != nil && iscsi.ISCSIInterface == "" {
		iscsi.ISCSIInterface = "default"
	}
	setAzureDisk(azure)
	if scaleIO != nil {
		setScaleIO(&scaleIO.StorageMode, &scaleIO.FSType)
	}
}

func setRBD(pool, user, keyring *string) {
	setString(pool, "rbd")
	setString(user, "admin")
	setString(keyring, "/etc/ceph/keyring")
}

func setScaleIO(storageMode, fsType *string) {
	setString(storageMode, "ThinProvisioned")
	setString(fsType, "xfs")
}

func setAzureDisk(d *corev1.AzureDiskVolumeSource) {
	if d == nil {
		return
	}
	if d.CachingMode == nil {
		d.CachingMode = new(corev1.AzureDataDiskCachingReadWrite)
	}
	if d.FSType == nil {
		d.FSType = new("ext4")
	}
	if d.ReadOnly == nil {
		d.ReadOnly = new(false)
	}
	if d.Kind == nil {
		d.Kind = new(corev1.AzureSharedBlobDisk)
	}
}

func setString(s *string, value string) {
	if *s == "" {
		*s = value
	}
}
